"""ONNX `LSTM`, `GRU` and `RNN` nodes → their per-step subgraph, before import (phase unroll).

torch-mlir's onnx-to-torch lowers a recurrent node to an `scf.for` loop over time: its
recurrent matmul sits in the loop body, where no site is found, and the input projection
is not separate. Over a static sequence length T, this phase rewrites each node into the
ops of ONNX's own definition of it (MatMul, Add, Split, Sigmoid/Tanh/Relu, Mul, ...): one
MatMul for the input projection of every step and one per step for the recurrent
projection, in the order and under the names of `recurrent.step_scopes` (each new node
carries its scope as `opscope.scope` metadata, which `onnx_model.scope_of` reads first), so
an LSTM gives the same sites from ONNX as from PyTorch. The layer index is the node's ordinal
among the recurrent nodes of the same module path (exporters write one node per layer).

Handled: `direction` forward, reverse and bidirectional; `layout` 0 and 1; initial states or
none; biases or none; LSTM peepholes and `input_forget`; GRU `linear_before_reset` 0 and 1;
`clip`; every activation of the ONNX spec, with `activation_alpha`/`activation_beta`
consumed in order by the activations that take them (Keras-era LSTMs use HardSigmoid). A
node with `sequence_lens` or a dynamic sequence length or batch is refused in one line
(torch-mlir's loop would hide its matmuls; with a non-default activation it also computes
wrong results on IREE 3.13).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from opscope.errors import OpscopeError
from opscope.importers.recurrent import step_scope

KINDS = {"LSTM": 4, "GRU": 3, "RNN": 1}  # op type → gates
SCOPE_KEY = "opscope.scope"
# ONNX's activation names (case-insensitive) → (spelling, default alpha, default beta); None: takes none.
_ACTIVATIONS: dict[str, tuple[str, float | None, float | None]] = {
    "sigmoid": ("Sigmoid", None, None),
    "tanh": ("Tanh", None, None),
    "relu": ("Relu", None, None),
    "softsign": ("Softsign", None, None),
    "softplus": ("Softplus", None, None),
    "hardsigmoid": ("HardSigmoid", 0.2, 0.5),
    "leakyrelu": ("LeakyRelu", 0.01, None),
    "thresholdedrelu": ("ThresholdedRelu", 1.0, None),
    "elu": ("Elu", 1.0, None),
    "scaledtanh": ("ScaledTanh", 1.0, 1.0),
    "affine": ("Affine", 1.0, 0.0),
}
_DEFAULT_ACTIVATIONS = {"LSTM": ("Sigmoid", "Tanh", "Tanh"), "GRU": ("Sigmoid", "Tanh"), "RNN": ("Tanh",)}


def unroll_recurrent(model, scope_of, label: str) -> int:
    """Rewrite every supported recurrent node of `model`'s main graph in place; returns how many.

    `scope_of(node)` gives a node's module path (`onnx_model.scope_of`).
    """
    from onnx import helper

    graph = model.graph
    if not any(n.op_type in KINDS and n.domain in ("", "ai.onnx") for n in graph.node):
        return 0
    shapes = _static_shapes(model)
    inits = {t.name: t for t in graph.initializer}
    taken = {n.name for n in graph.node} | {v for n in graph.node for v in (*n.input, *n.output)} | set(inits)
    layers: dict[str, int] = {}
    nodes = []
    unrolled = 0
    replaced: set[str] = set()  # initializers the rewritten nodes read (W, R, B, P), sliced into new ones
    for node in graph.node:
        if node.op_type not in KINDS or node.domain not in ("", "ai.onnx"):
            nodes.append(node)
            continue
        base = scope_of(node)
        if not base and not _exported_by_torch(node):  # a hand-made node is named by its own name
            base = node.name or node.output[0]
        refusal = _unsupported(node, shapes)
        if refusal:
            reason, fix = refusal
            raise OpscopeError(
                f"{label}: {node.op_type} node '{node.name}' at {base} cannot be unrolled: {reason}; try: {fix}"
            )
        layer = layers.get(base, 0)
        layers[base] = layer + 1
        builder = _Builder(helper, inits, taken, node.name or node.output[0])
        _unroll(builder, node, base, layer, shapes)
        nodes.extend(builder.nodes)
        graph.initializer.extend(builder.initializers)
        replaced.update(name for name in node.input if name in inits)
        unrolled += 1
    if unrolled:
        del graph.node[:]
        graph.node.extend(nodes)
        used = {v for n in graph.node for v in n.input} | {o.name for o in graph.output}
        kept = [t for t in graph.initializer if t.name not in replaced or t.name in used]
        del graph.initializer[:]
        graph.initializer.extend(kept)
    return unrolled


def _exported_by_torch(node) -> bool:
    """Whether torch wrote the node (a legacy `/…` name or dynamo metadata): its scope '' is the root module."""
    return node.name.startswith("/") or any(p.key == "pkg.torch.onnx.name_scopes" for p in node.metadata_props)


def _static_shapes(model) -> dict[str, tuple]:
    """Every value's shape, as far as the graph's (inferred) value infos and initializers say."""
    shapes: dict[str, tuple] = {}
    graph = model.graph
    for vi in (*graph.input, *graph.value_info, *graph.output):
        dims = vi.type.tensor_type.shape.dim if vi.type.HasField("tensor_type") else ()
        shapes[vi.name] = tuple(d.dim_value if d.HasField("dim_value") else None for d in dims)
    for t in graph.initializer:
        shapes[t.name] = tuple(t.dims)
    return shapes


def _attrs(node) -> dict:
    from onnx import helper

    return {a.name: helper.get_attribute_value(a) for a in node.attribute}


def _input(node, i: int) -> str:
    return node.input[i] if len(node.input) > i else ""


def _unsupported(node, shapes) -> tuple[str, str] | None:
    """Why `node` cannot be unrolled here and what to do, or None."""
    attrs = _attrs(node)
    if _input(node, 4):
        return (
            "it has sequence_lens (sequences of different lengths)",
            "export it on full-length sequences, without pack_padded_sequence",
        )
    x = shapes.get(node.input[0])
    layout = int(attrs.get("layout", 0))
    if not x or len(x) != 3 or x[1 - layout] is None or x[layout] is None:
        return "its sequence length or batch size is not static", "export it with fixed input shapes"
    for a in attrs.get("activations", ()):
        name = a.decode() if isinstance(a, bytes) else a
        if name.lower() not in _ACTIVATIONS:
            return (
                f"activation {name} is not an ONNX RNN activation",
                f"use one of {', '.join(v[0] for v in _ACTIVATIONS.values())}",
            )
    if "hidden_size" not in attrs and not shapes.get(node.input[2]):
        return "its hidden size is unknown", "set hidden_size on the node"
    return None


def _activations(node, kind: str, dirs: int) -> list[tuple[str, float | None, float | None]]:
    """(name, alpha, beta) of each activation in the node's order (f, g, h per direction): the
    `activation_alpha`/`activation_beta` lists are consumed in order by the activations that take them."""
    attrs = _attrs(node)
    names = [a.decode() if isinstance(a, bytes) else a for a in attrs.get("activations", ())]
    names = names or list(_DEFAULT_ACTIVATIONS[kind]) * dirs
    alphas, betas = list(attrs.get("activation_alpha", ())), list(attrs.get("activation_beta", ()))
    out = []
    for name in names:
        spelling, alpha, beta = _ACTIVATIONS[name.lower()]
        if alpha is not None and alphas:
            alpha = float(alphas.pop(0))
        if beta is not None and betas:
            beta = float(betas.pop(0))
        out.append((spelling, alpha, beta))
    return out


@dataclass
class _Builder:
    """New nodes and initializers, with names that collide with nothing in the graph."""

    helper: object
    inits: dict
    taken: set
    prefix: str
    nodes: list = field(default_factory=list)
    initializers: list = field(default_factory=list)
    counts: dict = field(default_factory=dict)
    scope: str = ""

    def fresh(self, hint: str) -> str:
        """`<prefix>/<hint>_<n>`, the first n not taken."""
        i = self.counts.get(hint, 0)
        while f"{self.prefix}/{hint}_{i}" in self.taken:
            i += 1
        self.counts[hint] = i + 1
        name = f"{self.prefix}/{hint}_{i}"
        self.taken.add(name)
        return name

    def op(self, op_type: str, inputs: list[str], outputs: int | list[str] = 1, **attrs) -> list[str]:
        outs = outputs if isinstance(outputs, list) else [self.fresh(op_type) for _ in range(outputs)]
        step = self.scope.rpartition(".")[2]  # 'ih', 't3' or the layer's own name
        node = self.helper.make_node(op_type, inputs, outs, name=self.fresh(f"{step}/{op_type}"), **attrs)
        if self.scope:
            self.helper.set_metadata_props(node, {SCOPE_KEY: self.scope})
        self.nodes.append(node)
        return outs

    def one(self, op_type: str, *inputs: str, **attrs) -> str:
        return self.op(op_type, list(inputs), 1, **attrs)[0]

    def const(self, value: np.ndarray, hint: str = "const") -> str:
        from onnx import numpy_helper

        name = self.fresh(hint)
        self.initializers.append(numpy_helper.from_array(np.array(value, order="C"), name))  # 0-d stays 0-d
        return name

    def slice_direction(self, tensor: str, d: int, axis: int = 0) -> str:
        """`tensor[d]` along `axis` (an initializer is sliced here, anything else by a Gather node)."""
        from onnx import numpy_helper

        if tensor in self.inits:
            return self.const(np.take(numpy_helper.to_array(self.inits[tensor]), d, axis=axis), "w")
        return self.one("Gather", tensor, self.const(np.array(d, np.int64), "index"), axis=axis)

    def transposed(self, tensor: str) -> str:
        """A 2-D tensor's transpose (folded for an initializer just made)."""
        from onnx import numpy_helper

        made = {t.name: t for t in self.initializers}
        if tensor in made:
            return self.const(numpy_helper.to_array(made[tensor]).T, "wT")
        return self.one("Transpose", tensor, perm=[1, 0])


def _unroll(b: _Builder, node, base: str, layer: int, shapes) -> None:
    """Append the unrolled subgraph of one recurrent node, producing the node's own outputs."""
    kind = node.op_type
    gates = KINDS[kind]
    attrs = _attrs(node)
    layout = int(attrs.get("layout", 0))
    direction = attrs.get("direction", b"forward")
    direction = direction.decode() if isinstance(direction, bytes) else direction
    dirs = 2 if direction == "bidirectional" else 1
    hidden = int(attrs.get("hidden_size") or shapes[node.input[2]][2])
    x_shape = shapes[node.input[0]]
    steps, batch = x_shape[layout], x_shape[1 - layout]
    acts = _activations(node, kind, dirs)
    per_dir = len(_DEFAULT_ACTIVATIONS[kind])
    clip = attrs.get("clip")
    outputs = list(node.output) + [""] * (3 - len(node.output))

    b.scope = base
    x = node.input[0] if layout == 0 else b.one("Transpose", node.input[0], perm=[1, 0, 2])
    ys, finals_h, finals_c = [], [], []
    for d in range(dirs):
        reverse = direction == "reverse" or d == 1
        f_act, *rest = acts[d * per_dir : (d + 1) * per_dir]
        w = b.transposed(b.slice_direction(node.input[1], d))  # [I, G·H]
        r = b.slice_direction(node.input[2], d)  # [G·H, H]
        bias = b.slice_direction(_input(node, 3), d) if _input(node, 3) else None  # [2·G·H]

        def state(i: int, d: int = d) -> str:
            name = _input(node, i)
            if name:
                return b.slice_direction(name, d, axis=1 if layout else 0)  # [B, H]
            return b.const(np.zeros((batch, hidden), np.float32), "zeros")

        h = state(5)
        c = state(6) if kind == "LSTM" else None
        rb = rb_h = None
        b.scope = step_scope(base, layer, d == 1, None)
        xw = b.one("MatMul", x, w)  # [T, B, G·H]: the input projection, a site
        if bias is not None:
            wb, rb = b.op("Split", [bias, b.const(np.array([gates * hidden] * 2, np.int64), "split")], 2, axis=0)
            xw = b.one("Add", xw, wb)
        if kind == "GRU" and not int(attrs.get("linear_before_reset", 0)):
            r_zr, r_h = b.op("Split", [r, b.const(np.array([2 * hidden, hidden], np.int64), "split")], 2, axis=0)
            r, r_h = b.transposed(r_zr), b.transposed(r_h)
            if rb is not None:
                rb, rb_h = b.op("Split", [rb, b.const(np.array([2 * hidden, hidden], np.int64), "split")], 2, axis=0)
        else:
            r, r_h = b.transposed(r), None
        peep = (
            b.op(
                "Split",
                [b.slice_direction(_input(node, 7), d), b.const(np.array([hidden] * 3, np.int64), "split")],
                3,
                axis=0,
            )
            if kind == "LSTM" and _input(node, 7)
            else None
        )
        by_time: dict[int, str] = {}
        for t in range(steps - 1, -1, -1) if reverse else range(steps):
            b.scope = step_scope(base, layer, d == 1, t)
            xt = b.one("Gather", xw, b.const(np.array(t, np.int64), "index"), axis=0)  # [B, G·H]
            hr = b.one("MatMul", h, r)  # [B, G·H]: the recurrent projection, a site
            if rb is not None:
                hr = b.one("Add", hr, rb)
            if kind == "LSTM":
                h, c = _lstm_step(b, xt, hr, c, hidden, f_act, rest, clip, peep, int(attrs.get("input_forget", 0)))
            elif kind == "GRU":
                h = _gru_step(b, xt, hr, h, hidden, f_act, rest[0], clip, r_h, rb_h)
            else:
                h = _act(b, f_act, _clip(b, b.one("Add", xt, hr), clip))
            by_time[t] = h
        b.scope = base
        seq = b.one(
            "Concat",
            *[b.one("Unsqueeze", by_time[t], b.const(np.array([0], np.int64), "axes")) for t in range(steps)],
            axis=0,
        )  # [T, B, H]
        ys.append(b.one("Unsqueeze", seq, b.const(np.array([1], np.int64), "axes")))  # [T, 1, B, H]
        finals_h.append(b.one("Unsqueeze", h, b.const(np.array([0], np.int64), "axes")))
        if c is not None:
            finals_c.append(b.one("Unsqueeze", c, b.const(np.array([0], np.int64), "axes")))

    def emit(parts: list[str], name: str, axis: int, perm: list[int]) -> None:
        """Join the directions along `axis` into the node's output `name`, transposed for layout 1."""
        if not name:
            return
        if layout == 0:
            b.op("Concat", parts, [name], axis=axis)
        else:
            b.op("Transpose", [b.one("Concat", *parts, axis=axis)], [name], perm=perm)

    emit(ys, outputs[0], 1, [2, 0, 1, 3])  # Y: [T, D, B, H], or [B, T, D, H] for layout 1
    emit(finals_h, outputs[1], 0, [1, 0, 2])  # Y_h: [D, B, H], or [B, D, H]
    if kind == "LSTM":
        emit(finals_c, outputs[2], 0, [1, 0, 2])


def _act(b: _Builder, spec: tuple[str, float | None, float | None], x: str) -> str:
    """One activation as ONNX ops: ScaledTanh and Affine (no ONNX ops) as Mul/Tanh/Add, Softsign as
    x / (1 + |x|) (IREE 3.13's onnx-to-torch has no pattern for the Softsign node)."""
    name, alpha, beta = spec
    if name == "Softsign":
        return b.one("Div", x, b.one("Add", b.one("Abs", x), b.const(np.array(1.0, np.float32), "one")))
    if name == "ScaledTanh":
        scaled = b.one("Mul", x, b.const(np.array(beta, np.float32), "beta"))
        return b.one("Mul", b.one("Tanh", scaled), b.const(np.array(alpha, np.float32), "alpha"))
    if name == "Affine":
        scaled = b.one("Mul", x, b.const(np.array(alpha, np.float32), "alpha"))
        return b.one("Add", scaled, b.const(np.array(beta, np.float32), "beta"))
    attrs = {k: v for k, v in (("alpha", alpha), ("beta", beta)) if v is not None}
    return b.one(name, x, **attrs)


def _clip(b: _Builder, x: str, clip) -> str:
    if clip is None:
        return x
    lo, hi = b.const(np.array(-clip, np.float32), "clip"), b.const(np.array(clip, np.float32), "clip")
    return b.one("Clip", x, lo, hi)


def _lstm_step(b, xt, hr, c, hidden, f, rest, clip, peep, input_forget):
    """ONNX's LSTM equations (gates i, o, f, c): returns (H_t, C_t)."""
    g, h_act = rest
    gi, go, gf, gc = b.op(
        "Split", [b.one("Add", xt, hr), b.const(np.array([hidden] * 4, np.int64), "split")], 4, axis=1
    )
    if peep is not None:
        gi = b.one("Add", gi, b.one("Mul", peep[0], c))
        gf = b.one("Add", gf, b.one("Mul", peep[2], c))
    i = _act(b, f, _clip(b, gi, clip))
    if input_forget:
        fg = b.one("Sub", b.const(np.array(1.0, np.float32), "one"), i)
    else:
        fg = _act(b, f, _clip(b, gf, clip))
    cand = _act(b, g, _clip(b, gc, clip))
    c = b.one("Add", b.one("Mul", fg, c), b.one("Mul", i, cand))
    if peep is not None:
        go = b.one("Add", go, b.one("Mul", peep[1], c))
    o = _act(b, f, _clip(b, go, clip))
    return b.one("Mul", o, _act(b, h_act, c)), c


def _gru_step(b, xt, hr, h, hidden, f, g, clip, r_h, rb_h):
    """ONNX's GRU equations (gates z, r, h); `r_h` set means linear_before_reset = 0 (a second matmul)."""
    xz, xr, xh = b.op("Split", [xt, b.const(np.array([hidden] * 3, np.int64), "split")], 3, axis=1)
    if r_h is None:
        hz, hr_, hh = b.op("Split", [hr, b.const(np.array([hidden] * 3, np.int64), "split")], 3, axis=1)
    else:
        hz, hr_ = b.op("Split", [hr, b.const(np.array([hidden] * 2, np.int64), "split")], 2, axis=1)
    z = _act(b, f, _clip(b, b.one("Add", xz, hz), clip))
    r = _act(b, f, _clip(b, b.one("Add", xr, hr_), clip))
    if r_h is None:
        pre = b.one("Add", xh, b.one("Mul", r, hh))
    else:
        hh = b.one("MatMul", b.one("Mul", r, h), r_h)
        pre = b.one("Add", xh, b.one("Add", hh, rb_h) if rb_h is not None else hh)
    cand = _act(b, g, _clip(b, pre, clip))
    return b.one("Add", cand, b.one("Mul", z, b.one("Sub", h, cand)))  # (1 - z)·h̃ + z·H
