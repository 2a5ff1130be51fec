"""Builders and verifier for the ops of the `opscope` dialect.

The IREE 3.13 Python context has neither `irdl` nor `dialects.ext`, so opscope ops are
created as generic (unregistered) operations by typed builders and checked by
`verify_stat`; `opscope.irdl.mlir` gives stock tools (`iree-opt --irdl-file`) the same
definition.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from iree.compiler import ir

from opscope.dialect.dynamics import DYNAMICS_KINDS, PAIR_KINDS

# The reference's per-tensor sketch order (§2.3); manifests and packed results follow it.
STAT_KINDS: tuple[str, ...] = (
    "min",
    "max",
    "mean",
    "l1",
    "sumsq",
    "nnz",
    "kurtosis",
    "hist",
    "elemsig",
    "chan_maxabs",
    "chan_outlier",
    "pos_sumsq",
    "adj_sumsq",
)
ROLES: tuple[str, ...] = ("lhs", "rhs", "out")
# Inference-dynamics taps (`dialect/dynamics.py` computes them): attention probabilities, a
# router's softmax, chosen expert indices, a residual add's stream and block output.
DYNAMICS_ROLES: tuple[str, ...] = ("attn", "gate", "route", "residual")
FLOAT_TYPES: tuple[str, ...] = ("f32", "f16", "bf16")
STAT_OP = "opscope.stat"


def irdl_path() -> Path:
    """Path of the IRDL definition, for `iree-opt --irdl-file=...`."""
    return Path(__file__).with_name("opscope.irdl.mlir")


@dataclass(frozen=True)
class StatOp:
    """A read-only view of one `opscope.stat` op."""

    op: ir.Operation

    @property
    def value(self) -> ir.Value:
        return self.op.operands[0]

    @property
    def values(self) -> tuple[ir.Value, ...]:
        """Every tapped value: one, or (stream, block output) for a residual statistic."""
        return tuple(self.op.operands)

    @property
    def kind(self) -> str:
        return ir.StringAttr(self.op.attributes["kind"]).value

    @property
    def site(self) -> str:
        return ir.StringAttr(self.op.attributes["site"]).value

    @property
    def role(self) -> str:
        return ir.StringAttr(self.op.attributes["role"]).value

    @property
    def options(self) -> dict[str, object]:
        d = ir.DictAttr(self.op.attributes["options"])
        return {d[i].name: _py_value(d[i].attr) for i in range(len(d))}


def stat_ops(op: ir.Operation) -> list[ir.Operation]:
    """Every `opscope.stat` inside `op` (nested regions included), in walk order. The walk
    only gathers: an exception raised in a walk callback reaches Python as a bare RuntimeError."""
    found: list[ir.Operation] = []

    def visit(inner):
        if inner.name == STAT_OP:
            found.append(inner)
        return ir.WalkResult.ADVANCE

    op.walk(visit)
    return found


def _py_value(attr: ir.Attribute) -> object:
    if isinstance(attr, ir.BoolAttr):
        return attr.value
    if isinstance(attr, ir.IntegerAttr):
        return attr.value
    if isinstance(attr, ir.FloatAttr):
        return attr.value
    if isinstance(attr, ir.StringAttr):
        return attr.value
    if isinstance(attr, ir.ArrayAttr):
        return [_py_value(a) for a in attr]
    return str(attr)


def _options_attr(options: dict[str, object]) -> ir.DictAttr:
    f32 = ir.F32Type.get()
    i64 = ir.IntegerType.get_signless(64)
    attrs: dict[str, ir.Attribute] = {}
    for name, v in options.items():
        if isinstance(v, bool):
            attrs[name] = ir.BoolAttr.get(v)
        elif isinstance(v, (list, tuple)):
            attrs[name] = ir.ArrayAttr.get([ir.IntegerAttr.get(i64, int(x)) for x in v])
        elif isinstance(v, int):
            attrs[name] = ir.IntegerAttr.get(i64, v)
        elif isinstance(v, float):
            attrs[name] = ir.FloatAttr.get(f32, v)
        else:
            attrs[name] = ir.StringAttr.get(str(v))
    return ir.DictAttr.get(attrs)


def stat(
    value: ir.Value | tuple[ir.Value, ...],
    kind: str,
    site: str,
    role: str,
    options: dict[str, object] | None = None,
    *,
    loc: ir.Location | None = None,
    ip: ir.InsertionPoint | None = None,
) -> ir.Operation:
    """Record statistic `kind` of `value` (a tuple of two for a residual statistic), operand
    `role` of site `site`.

        "opscope.stat"(%lhs) {kind = "max", options = {}, role = "lhs", site = "fc1"}
            : (tensor<64x128xf32>) -> ()
    """
    op = ir.Operation.create(
        STAT_OP,
        results=[],
        operands=list(value) if isinstance(value, tuple) else [value],
        attributes={
            "kind": ir.StringAttr.get(kind),
            "site": ir.StringAttr.get(site),
            "role": ir.StringAttr.get(role),
            "options": _options_attr(options or {}),
        },
        loc=loc,
        ip=ip,
    )
    problem = verify_stat(op)
    if problem:
        op.erase()
        raise ValueError(problem)
    return op


def _verify_dynamics(view: StatOp) -> str | None:
    """The operand checks of an inference-dynamics statistic."""
    types = [v.type for v in view.values]
    for ty in types:
        if not isinstance(ty, ir.RankedTensorType) or not ty.has_static_shape:
            return f"opscope.stat: {view.kind} needs static ranked tensors, got {ty}"
    ty = types[0]
    if view.kind == "route_load":
        experts, axis = int(view.options.get("experts", 0)), int(view.options.get("axis", -1))
        if experts <= 0:
            return "opscope.stat: route_load needs options {experts = E} with E > 0"
        if axis >= 0:  # a routing mask, its experts along dim `axis`
            if axis >= ty.rank or ty.shape[axis] != experts:
                return f"opscope.stat: route_load of a mask needs dim {axis} of size {experts}, got {ty}"
            return None
        if not isinstance(ty.element_type, ir.IntegerType):
            return (
                "opscope.stat: route_load counts integer expert indices, or a mask's nonzeros with "
                f"options axis = its experts' dim, got {ty}"
            )
        return None
    if str(ty.element_type) not in FLOAT_TYPES:
        return f"opscope.stat: {view.kind} needs f32, f16 or bf16, got {ty}"
    if view.kind in PAIR_KINDS and types[1] != ty:
        return f"opscope.stat: {view.kind} needs two tensors of one type, got {ty} and {types[1]}"
    if view.kind.startswith("attn_") and ty.rank < 2:
        return f"opscope.stat: {view.kind} needs probabilities of rank >= 2, got {ty}"
    return None


def verify_stat(op: ir.Operation) -> str | None:
    """Return why `op` is not a valid `opscope.stat`, or None when it is."""
    attrs = op.attributes
    for name in ("kind", "site", "role", "options"):
        if name not in attrs:
            return f"opscope.stat: missing attribute '{name}'"
    view = StatOp(op)
    if view.kind not in STAT_KINDS + DYNAMICS_KINDS:
        return f"opscope.stat: unknown kind '{view.kind}' (expected one of {', '.join(STAT_KINDS + DYNAMICS_KINDS)})"
    arity = 2 if view.kind in PAIR_KINDS else 1
    if len(op.operands) != arity or len(op.results) != 0:
        return f"opscope.stat: {view.kind} expects {'two operands' if arity == 2 else 'one operand'} and no results"
    if view.role not in ROLES + DYNAMICS_ROLES:
        return f"opscope.stat: unknown role '{view.role}' (expected one of {', '.join(ROLES + DYNAMICS_ROLES)})"
    if view.kind in DYNAMICS_KINDS:
        return _verify_dynamics(view)
    ty = view.value.type
    if not isinstance(ty, ir.RankedTensorType):
        return f"opscope.stat: expects a ranked tensor, got {ty}"
    if not ty.has_static_shape:
        return f"opscope.stat: dynamic shape {ty} is not supported (stat kernels are static-shaped)"
    if str(ty.element_type) not in FLOAT_TYPES:
        return f"opscope.stat: unsupported element type {ty.element_type} (expected f32, f16 or bf16)"
    if "channel_dims" in view.options:
        dims = view.options["channel_dims"]
        if (
            not isinstance(dims, list)
            or not dims
            or not all(isinstance(d, int) for d in dims)
            or len(set(dims)) != len(dims)
            or not all(0 <= d < ty.rank for d in dims)
            or len(dims) >= ty.rank
        ):
            return (
                f"opscope.stat: channel_dims must list distinct dims of the rank-{ty.rank} tensor and leave a "
                f"position dim, got {dims}"
            )
    if view.kind == "hist":
        opts = view.options
        missing = {"bins", "lo", "hi", "normalize"} - set(opts)
        if missing:
            return f"opscope.stat: hist needs options {sorted(missing)}"
        if int(opts["bins"]) <= 0 or not float(opts["lo"]) < float(opts["hi"]):
            return "opscope.stat: hist needs bins > 0 and lo < hi"
    return None
