"""Exact FLOPs of one op, read from its IR: the iteration domain times the body's arithmetic.

FLOPs of a linalg structured op (named or generic): the iteration-domain size (loop sizes
read off the indexing maps and operand shapes; `linalg.get_indexing_maps` answers for
named ops too and their implicit body is in the IR, so nothing is generalized) times the
body's arithmetic ops: 1 per arith add/sub/mul/div/rem/neg/max/min/cmpf and per math op
on floats, 2 per `math.fma` (a multiply-add counts 2). Casts, select, constants, yield,
linalg.index, tensor.extract and cf.assert count 0; integer arithmetic counts only in
contractions and convolutions (quantized MACs, as `Site.flops`). Only per-point work
counts: loop-invariant body ops (on captured values only) and ops feeding only an unread
result count 0. Any other body op makes the FLOPs unknown.

The two formula ops: `linalg.softmax` = 5 per input element (max, subtract, exp, sum,
divide: what its decomposition counts); `iree_linalg_ext.attention`, with B, M, K1, K2, N
read off its indexing maps, = 2·B·M·K1·K2 + 5·B·M·K2 + 2·B·M·K2·N (q·kᵀ, softmax, p·v)
plus its score-modifier body per score. Top-level arith/math ops on tensors count per element.

Loops: `trip_count` reads an `scf.for`'s iterations off constant bounds and step (through
index casts); the cost model counts such a loop as trip count × its body. An `scf.while`,
or an `scf.for` with a bound that is not a constant, has no static trip count (None, why).

This is the IR stage's answer (sites and their FLOPs); `opscope.analysis.cost` adds bytes
and whole-module totals on top of it.
"""

from __future__ import annotations

from math import prod

from iree.compiler import ir
from iree.compiler.dialects import linalg

from opscope.ir.labels import INT_CASTS
from opscope.ir.sites import loop_sizes

SOFTMAX_FLOPS = 5  # per element: max, subtract, exp, sum, divide
ATTENTION = "iree_linalg_ext.attention"
SOFTMAX = "linalg.softmax"
FOR = "scf.for"
WHILE = "scf.while"

FLOAT_OPS = frozenset(
    {
        "arith.addf",
        "arith.subf",
        "arith.mulf",
        "arith.divf",
        "arith.remf",
        "arith.negf",
        "arith.maximumf",
        "arith.minimumf",
        "arith.maxnumf",
        "arith.minnumf",
        "arith.cmpf",
    }
)
INT_OPS = frozenset(
    {
        "arith.addi",
        "arith.subi",
        "arith.muli",
        "arith.divsi",
        "arith.divui",
        "arith.ceildivsi",
        "arith.ceildivui",
        "arith.floordivsi",
        "arith.remsi",
        "arith.remui",
        "arith.maxsi",
        "arith.maxui",
        "arith.minsi",
        "arith.minui",
        "arith.andi",
        "arith.ori",
        "arith.xori",
        "arith.shli",
        "arith.shrsi",
        "arith.shrui",
        "arith.cmpi",
    }
)
FREE_OPS = frozenset(
    {
        "arith.extf",
        "arith.truncf",
        "arith.sitofp",
        "arith.uitofp",
        "arith.fptosi",
        "arith.fptoui",
        "arith.extsi",
        "arith.extui",
        "arith.trunci",
        "arith.index_cast",
        "arith.index_castui",
        "arith.bitcast",
        "arith.select",
        "arith.constant",
        "linalg.yield",
        "linalg.index",
        "iree_linalg_ext.yield",
        "tensor.extract",
        "cf.assert",
    }
)
TWO_FLOP_OPS = frozenset({"math.fma"})


# -- FLOPs of a body -----------------------------------------------------------------------
def _is_float(value: ir.Value) -> bool:
    """A float (or complex) value or tensor of them."""
    ty = value.type
    if isinstance(ty, ir.ShapedType):
        ty = ty.element_type
    return isinstance(ty, (ir.FloatType, ir.ComplexType))


def scalar_op_flops(op: ir.Operation, count_int: bool) -> int | None:
    """FLOPs of one scalar op (see the module docstring), None when the op is not modelled."""
    name = op.name
    if name in FREE_OPS:
        return 0
    if name in FLOAT_OPS:
        return 1
    if name in TWO_FLOP_OPS:
        return 2
    if name in INT_OPS:
        return 1 if count_int else 0
    if name.startswith("math."):
        operand = op.operands[0] if len(op.operands) else None
        if operand is not None and not _is_float(operand):
            return 1 if count_int else 0
        return 1
    return None


def body_flops(op: ir.Operation, count_int: bool) -> tuple[int | None, str | None]:
    """FLOPs of one execution of `op`'s body, or (None, why).

    Only per-point work counts: an op that reads a block argument, `linalg.index` or
    another such op (loop-invariant setup on captured values is hoisted by any compiler),
    and that feeds a yielded value whose result is read (`live_results`). Ops in nested
    regions count each time."""
    block = op.regions[0].blocks[0]
    inner_ops = [inner.operation for inner in block.operations]
    wanted = _live_values(op, inner_ops)
    varying = set(block.arguments)
    total = 0
    if wanted is not None:
        for inner in reversed(inner_ops[:-1]):
            if any(r in wanted for r in inner.results):
                wanted.update(inner.operands)
    for inner in inner_ops:
        if inner.name != "linalg.index" and not any(v in varying for v in inner.operands):
            continue
        varying.update(inner.results)
        if wanted is not None and inner.results and not any(r in wanted for r in inner.results):
            continue
        got, why = _inner_flops(inner, count_int)
        if got is None:
            return None, why
        total += got
    return total, None


def _inner_flops(inner: ir.Operation, count_int: bool) -> tuple[int | None, str | None]:
    """FLOPs of one body op and of every op in its nested regions, each counted once."""
    f = scalar_op_flops(inner, count_int)
    if f is None and not inner.regions:
        return None, f"body op {inner.name} is not modelled"
    total = f or 0
    for region in inner.regions:
        for block in region.blocks:
            for nested in block.operations:
                got, why = _inner_flops(nested.operation, count_int)
                if got is None:
                    return None, why
                total += got
    return total, None


def live_results(op: ir.Operation) -> list[bool]:
    """Which results count: those read by someone, or all of them when none or all are read."""
    used = [any(True for _ in r.uses) for r in op.results]
    return used if any(used) and not all(used) else [True] * len(used)


def _live_values(op: ir.Operation, inner_ops: list[ir.Operation]) -> set | None:
    """The yielded values of live results (`live_results`), None when every result is live."""
    live = live_results(op)
    yielded = list(inner_ops[-1].operands) if inner_ops else []
    if all(live) or len(yielded) != len(live):
        return None
    return {v for v, keep in zip(yielded, live) if keep}


# -- loop sizes ----------------------------------------------------------------------------
def indexing_maps(attr: ir.Attribute) -> list[ir.AffineMap]:
    """An `indexing_maps` array attribute as affine maps."""
    return [ir.AffineMapAttr(a).value for a in ir.ArrayAttr(attr)]


def domain_size(sizes: list[int | None]) -> int | None:
    """The iteration-space size, None when a loop size is unknown."""
    return None if any(s is None for s in sizes) else prod(sizes)


# -- one op --------------------------------------------------------------------------------
def structured_flops(op: ir.Operation, maps_attr: ir.Attribute) -> tuple[int | None, int | None, str | None]:
    """(domain, FLOPs, why FLOPs are unknown) of a linalg structured op with these indexing maps."""
    maps = indexing_maps(maps_attr)
    domain = domain_size(loop_sizes(maps, list(op.operands)))
    region = op.regions[0] if op.regions and len(op.regions[0].blocks) else None
    count_int = linalg.isa_contraction_op(op) or linalg.isa_convolution_op(op)
    per_point, why = body_flops(op, count_int) if region is not None else (0, None)
    return domain, None if domain is None or per_point is None else domain * per_point, why


def attention_dims(op: ir.Operation) -> tuple[int, int, int, int, int] | None:
    """(B, M, K1, K2, N) of an `iree_linalg_ext.attention`, None when a size is dynamic."""
    maps = indexing_maps(op.attributes["indexing_maps"])
    operands = list(op.operands)
    n_out = len(op.results) or 1
    q, k, v, o = (
        set(e.position for e in maps[i].results if isinstance(e, ir.AffineDimExpr))
        for i in (0, 1, 2, len(operands) - n_out)
    )
    sizes = loop_sizes(maps, operands)
    groups = (q & k & v & o, (q & o) - k - v, (q & k) - v - o, (k & v) - q - o, (v & o) - q - k)
    dims = []
    for g in groups:
        vals = [sizes[d] for d in g]
        if any(s is None for s in vals):
            return None
        dims.append(prod(vals))
    return tuple(dims)  # type: ignore[return-value]


def attention_flops(b: int, m: int, k1: int, k2: int, n: int) -> int:
    """2·B·M·K1·K2 (q·kᵀ) + 5·B·M·K2 (softmax) + 2·B·M·K2·N (p·v)."""
    return 2 * b * m * k1 * k2 + SOFTMAX_FLOPS * b * m * k2 + 2 * b * m * k2 * n


def attention_op_flops(op: ir.Operation, dims: tuple[int, int, int, int, int]) -> tuple[int | None, str | None]:
    """FLOPs of an attention op of sizes `dims` (`attention_dims`): the formula plus its
    score-modifier body per score, or (None, why)."""
    b, m, _, k2, _ = dims
    per_score, why = body_flops(op, False) if op.regions and len(op.regions[0].blocks) else (0, None)
    return (None if per_score is None else attention_flops(*dims) + per_score * b * m * k2), why


def op_flops(op: ir.Operation) -> int | None:
    """FLOPs of a linalg structured op, a softmax or an attention (what `opscope.analysis.cost`
    counts for them); None when unknown or for any other op (a `stablehlo.dot_general` before
    lowering, a call)."""
    op = op.operation if hasattr(op, "operation") else op
    name = op.name
    if name == SOFTMAX:
        ty = op.operands[0].type
        return SOFTMAX_FLOPS * prod(ty.shape) if ty.has_static_shape else None
    if name == ATTENTION:
        dims = attention_dims(op)
        return None if dims is None else attention_op_flops(op, dims)[0]
    if name.startswith("linalg.") and op.results:
        maps = linalg.get_indexing_maps(op)
        if maps is not None and len(indexing_maps(maps)) == len(op.operands):
            return structured_flops(op, maps)[1]
    return None


# -- loops ---------------------------------------------------------------------------------
def constant_int(value: ir.Value, depth: int = 0) -> int | None:
    """The integer an `arith.constant` (seen through integer/index casts) gives `value`, else None."""
    if isinstance(value, ir.BlockArgument) or depth > 8:
        return None
    op = value.owner.operation if hasattr(value.owner, "operation") else value.owner
    if op.name == "arith.constant":
        attr = op.attributes["value"]
        return ir.IntegerAttr(attr).value if isinstance(attr, ir.IntegerAttr) else None
    if op.name in INT_CASTS:
        return constant_int(op.operands[0], depth + 1)
    return None


def trip_count(op: ir.Operation) -> tuple[int | None, str | None]:
    """Iterations of an `scf.for` with constant lower bound, upper bound and step:
    ceil((ub - lb) / step), 0 when ub <= lb; (None, a one-line reason) for an `scf.for`
    whose bounds are not constants, an `scf.while` (it runs until its condition fails),
    or any other op."""
    op = op.operation if hasattr(op, "operation") else op
    if op.name == WHILE:
        return None, "scf.while: no static trip count (it loops until its condition fails)"
    if op.name != FOR:
        return None, f"{op.name} is not a loop with a trip count"
    bounds = [constant_int(v) for v in list(op.operands)[:3]]
    missing = [what for what, b in zip(("lower bound", "upper bound", "step"), bounds) if b is None]
    if missing:
        return None, f"scf.for: no static trip count ({' and '.join(missing)} not a constant)"
    lb, ub, step = bounds
    if "unsignedCmp" in op.attributes:  # bounds compare as unsigned: read negative constants that way
        width = getattr(op.operands[0].type, "width", 64) if not isinstance(op.operands[0].type, ir.IndexType) else 64
        lb, ub = (b % (1 << width) for b in (lb, ub))
    if step <= 0:
        return None, f"scf.for: step {step} is not positive"
    return (max(0, -(-(ub - lb) // step))), None
