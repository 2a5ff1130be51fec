"""Equal weights stored once: parameters and constants of an exported program that hold the same
bytes (two layers initialized alike, all-ones norms, a copied block) made one tensor before the
FX import, so the importer writes one constant for them (it keys its literals by tensor identity);
an ONNX model's equal initializers read from one (`share_equal_initializers`).

Before, each was its own `dense_resource` blob, never merged: the module and IREE's build stored
both, and `weight_bytes` counted both (found by the generated-model tests: two identical MLPs in one
`.pt2` counted 7,448 bytes where their distinct parameters hold 4,736).
"""

from __future__ import annotations

EDGE = 64  # elements compared first at each end: unequal weights differ there, equal ones are compared whole


def share_equal_tensors(state: dict) -> dict:
    """Point each tensor of `state` (name → tensor, edited in place) equal to an earlier one (dtype,
    shape and bytes) at that one; returns {name: the tensor it held} of those replaced."""
    import torch

    first: dict[tuple, list] = {}
    replaced: dict = {}
    for name, t in list(state.items()):
        if not isinstance(t, torch.Tensor) or t.numel() == 0 or t.is_sparse or t.device.type == "meta":
            continue
        flat = t.detach().reshape(-1)
        try:
            key = (t.dtype, tuple(t.shape), _edge_bytes(flat))
        except (RuntimeError, TypeError):  # a dtype with no byte view (quantized, ...): kept as it is
            continue
        for other in first.setdefault(key, []):
            if other is t or _same_bytes(other.detach().reshape(-1), flat):
                if other is not t:
                    replaced[name] = t
                    state[name] = other
                break
        else:
            first[key].append(t)
    return replaced


def _edge_bytes(flat) -> bytes:
    """The bytes of `flat`'s first and last EDGE elements (all of it when short)."""
    import torch

    part = flat if flat.numel() <= 2 * EDGE else torch.cat((flat[:EDGE], flat[-EDGE:]))
    return _bytes(part).numpy().tobytes()


def _same_bytes(a, b) -> bool:
    """Bit for bit (a NaN equals itself, -0.0 differs from 0.0): weights are storage, not numbers."""
    import torch

    return torch.equal(_bytes(a), _bytes(b))


def _bytes(t):
    """`t` (1-D) viewed as its bytes, copied only where it is not contiguous."""
    import torch

    return t.contiguous().view(torch.uint8)


def share_equal_initializers(graph) -> int:
    """Read each initializer of an ONNX `graph` (edited in place) equal to an earlier one (type, dims
    and bytes) from that one: its readers renamed, itself dropped; returns how many. Names a subgraph
    reads are left alone (its scope is not renamed here)."""
    from onnx import numpy_helper

    def data(init) -> bytes:  # a copy, held only while compared: the model's weights are not held twice
        return init.raw_data or numpy_helper.to_array(init).tobytes()

    inner = {name for node in graph.node for a in node.attribute for g in _subgraphs(a) for name in _reads(g)}
    first: dict[tuple, list] = {}
    rename: dict[str, str] = {}
    for init in graph.initializer:
        if init.name in inner or init.data_location == 1:  # external data not loaded: left as it is
            continue
        mine = data(init)
        key = (init.data_type, tuple(init.dims), mine[: 4 * EDGE], mine[-4 * EDGE :])
        del mine
        for other in first.setdefault(key, []):
            if data(other) == data(init):
                rename[init.name] = other.name
                break
        else:
            first[key].append(init)
    if not rename:
        return 0
    for node in graph.node:
        for i, name in enumerate(node.input):
            if name in rename:
                node.input[i] = rename[name]
    kept = [init for init in graph.initializer if init.name not in rename]
    del graph.initializer[:]
    graph.initializer.extend(kept)
    return len(rename)


def _subgraphs(attr) -> list:
    return ([attr.g] if attr.HasField("g") else []) + list(attr.graphs)


def _reads(graph) -> set[str]:
    names = {name for node in graph.node for name in node.input}
    for node in graph.node:
        for a in node.attribute:
            for g in _subgraphs(a):
                names |= _reads(g)
    return names
