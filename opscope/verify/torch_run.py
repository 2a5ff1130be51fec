"""The model's exported program run op by op in PyTorch, the tensors of chosen nodes kept.

The program is the one opscope imports (`torch.export`, then the importer's own decompositions),
run by `torch.fx.Interpreter`: every node is an ATen op PyTorch computes on the CPU, as eager
mode would, under `FlopCounterMode` (PyTorch's own FLOP count of the forward). A node whose key
(`opscope.verify.keys.fx_key`) is wanted keeps its tensor arguments and its result.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from opscope.verify.keys import Key, fx_key

MATMUL_TARGETS = (
    "aten.linear",
    "aten.mm",
    "aten.addmm",
    "aten.matmul",
    "aten.bmm",
    "aten.baddbmm",
    "aten.convolution",
    "aten._convolution",
    "aten.conv1d",
    "aten.conv2d",
    "aten.conv3d",
    "aten.conv_transpose1d",
    "aten.conv_transpose2d",
    "aten.conv_transpose3d",
)
SOFTMAX_TARGETS = ("aten.softmax", "aten._softmax", "aten._safe_softmax")
TOPK_TARGETS = ("aten.topk",)
ADD_TARGETS = ("aten.add",)
FAMILIES = {"matmul": MATMUL_TARGETS, "softmax": SOFTMAX_TARGETS, "routing": TOPK_TARGETS, "residual": ADD_TARGETS}


def family(node) -> str | None:
    """Which site family an FX node can be (by its ATen op), or None."""
    if node.op != "call_function":
        return None
    name = str(node.target).rsplit(".", 1)[0] if str(node.target).count(".") > 1 else str(node.target)
    return next((f for f, targets in FAMILIES.items() if name in targets), None)


@dataclass
class Captured:
    """One node's ATen op (its name and the op itself), its arguments (tensors detached) and its result."""

    target: str
    op: object
    args: list
    result: object
    unpadded: dict = field(default_factory=dict)  # arg position -> its input before a zero pad (constant_pad_nd)


@dataclass
class TorchRun:
    """What one forward computed: the kept nodes by (key, family) and ordinal there, the outputs, the FLOPs."""

    nodes: dict[tuple[Key, str], dict[int, Captured]] = field(default_factory=dict)  # by ordinal at the key
    outputs: list[np.ndarray] = field(default_factory=list)
    flops: int = 0


def family_keys(program) -> dict[tuple[Key, str], int]:
    """How many nodes of each (key, family) the program holds, in graph order."""
    counts: dict[tuple[Key, str], int] = {}
    for node in program.graph.nodes:
        fam = family(node)
        if fam is not None:
            k = (fx_key(node), fam)
            counts[k] = counts.get(k, 0) + 1
    return counts


def run_program(
    module, inputs: Sequence[np.ndarray], wanted: Callable[[Key, str, int], bool], weights_dtype: str | None = None
) -> TorchRun:
    """Run the unlifted exported program `module` (a `GraphModule`) on the flat `inputs`, keeping
    the nodes `wanted(key, family, ordinal)` accepts. `weights_dtype` (bf16, f16): its float32
    parameters rounded so first, as the run stored them."""
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    if weights_dtype is not None:
        narrow = {"bf16": torch.bfloat16, "f16": torch.float16}[weights_dtype]
        with torch.no_grad():
            for t in [*module.parameters(), *module.buffers()]:
                if t.dtype == torch.float32:
                    t.copy_(t.to(narrow).to(torch.float32))
    run = TorchRun()
    ordinals: dict[tuple[Key, str], int] = {}

    pads: dict = {}  # a zero pad feeding a matmul-like node -> its input (the interpreter frees it after the pad)

    class Keeping(torch.fx.Interpreter):
        def run_node(self, node):
            if _zero_pad(node) and any(family(u) == "matmul" for u in node.users):
                pads[node] = _detached(self.env[node.args[0]])
            result = super().run_node(node)
            fam = family(node)
            if fam is not None:
                k = (fx_key(node), fam)
                n = ordinals.get(k, 0)
                ordinals[k] = n + 1
                if wanted(k[0], fam, n):
                    args = [self._value(a) for a in node.args]
                    kept = Captured(str(node.target), node.target, args, _detached(result))
                    for i, a in enumerate(node.args):
                        if isinstance(a, torch.fx.Node) and a in pads:
                            kept.unpadded[i] = pads[a]
                    run.nodes.setdefault(k, {})[n] = kept
            return result

        def _value(self, a):
            if isinstance(a, torch.fx.Node):
                return _detached(self.env[a])
            return a

    with torch.no_grad(), FlopCounterMode(display=False) as counter:
        out = Keeping(module).run(*[torch.from_numpy(np.ascontiguousarray(x)) for x in inputs])
    run.flops = int(counter.get_total_flops())
    leaves = out if isinstance(out, (list, tuple)) else [out]
    run.outputs = [np.asarray(t.detach().numpy()) for t in _tensors(leaves)]
    return run


def _zero_pad(arg) -> bool:
    """`arg` is an FX node padding its input with zeros (TF-style "same" padding before a convolution)."""
    import torch

    if not isinstance(arg, torch.fx.Node) or arg.op != "call_function":
        return False
    name = str(arg.target)
    if name.startswith("aten.constant_pad_nd"):
        value = arg.args[2] if len(arg.args) > 2 else arg.kwargs.get("value", 0)
        return value == 0
    if name.startswith("aten.pad"):
        mode = arg.args[2] if len(arg.args) > 2 else arg.kwargs.get("mode", "constant")
        value = arg.args[3] if len(arg.args) > 3 else arg.kwargs.get("value", None)
        return mode == "constant" and not value
    return False


def _detached(value):
    import torch

    if isinstance(value, torch.Tensor):
        return value.detach()
    if isinstance(value, (list, tuple)):
        return type(value)(_detached(v) for v in value)
    return value


def _tensors(values) -> list:
    import torch

    out = []
    for v in values:
        if isinstance(v, torch.Tensor):
            out.append(v)
        elif isinstance(v, (list, tuple)):
            out += _tensors(v)
        elif isinstance(v, dict):
            out += _tensors(list(v.values()))
    return out
