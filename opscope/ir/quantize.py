"""Symmetric fake quantization (a quantize → dequantize round trip) built inline as linalg.

`fake_quant(x, reduced, bits)` is what `fakequant-activations` and `fakequant-weights`
insert: one reduction `linalg.generic` for amax = max|x| over the dims `reduced` (one scale
per kept index), then one elementwise `linalg.generic` for the reference's value (§2.7):

    y = amax · clamp(round(qmax · x · (1/amax)), −qmax, qmax) · (1/qmax),  qmax = 2^(bits−1) − 1

computed in f32 in that order (x·(1/amax), ·qmax, round, clamp, ·(1/qmax), ·amax) and
stored back in x's element type. `round` is `math.round`: half away from zero, the
reference's Rust rule (numpy's `np.round` is half-to-even). Guard (the reference has
none): where amax <= 1e-20 the reciprocal is taken as 0, so an all-zero row comes back
exactly zero instead of 0·inf = NaN (values below 1e-20 round to 0, as the reference's own
test reference does with its scale-1 guard). Every op carries the caller's location.

    %amax = linalg.generic {... iterator_types = ["parallel", "reduction"]} ins(%x : tensor<3x8xf32>)
        outs(%zeros : tensor<3xf32>) { absf, maximumf } -> tensor<3xf32> loc("fc1")
    %xq = linalg.generic {... ["parallel", "parallel"]} ins(%x, %amax : tensor<3x8xf32>, tensor<3xf32>)
        outs(%e : tensor<3x8xf32>) { mulf, mulf, math.round, maximumf, minimumf, mulf, mulf } loc("fc1")

`operand_dims` reads which dims of a site's lhs or rhs its contraction (K) loops index
from the op's indexing maps; `grouped_fake_quant` gives one scale per group of `group`
consecutive K elements (reshaping K into [K/group, group] and back); `copy_source` and
`replay` move a weight's round trip under the transposes and broadcasts an importer put
between it and its matmul; `RoundTrips` builds each (tensor, scales) round trip once;
`select_sites` is both passes' site filter.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Sequence

from iree.compiler import ir
from iree.compiler.dialects import arith, linalg, math, tensor

from opscope.errors import OpscopeError
from opscope.ir.build import dim_map, generic, to_f32
from opscope.ir.sites import ROLES, Site, find_sites

log = logging.getLogger("opscope")

MIN_BITS, MAX_BITS = 2, 16
TINY = 1e-20  # amax below this: the round trip gives zeros (the reciprocal would overflow)
_OPERAND = {"lhs": 0, "rhs": 1}


def qmax(bits: int) -> int:
    """The largest code of a symmetric signed `bits`-bit quantizer: 2^(bits−1) − 1."""
    return (1 << (bits - 1)) - 1


def check_bits(pass_name: str, bits: int) -> None:
    """Refuse a bit width outside 2..16, naming the pass."""
    if not MIN_BITS <= bits <= MAX_BITS:
        raise OpscopeError(f"{pass_name}: option 'bits' expects an integer in {MIN_BITS}..{MAX_BITS}, got {bits}")


def check_choice(pass_name: str, option: str, value: str, choices: Sequence[str]) -> None:
    """Refuse a value of an enumerated option, naming the pass and the choices."""
    if value not in choices:
        raise OpscopeError(f"{pass_name}: option '{option}' expects one of {', '.join(choices)}, got '{value}'")


MOST_NAMES = 12  # site names a "names no site" error lists


def select_sites(pass_name: str, module, pattern: str, keep: Callable[[Site], bool] | None) -> list[Site]:
    """The float, static-shaped sites in a function's entry block whose name `pattern` finds
    and `keep` accepts; every other matching site is logged with why it is skipped."""
    try:
        regex = re.compile(pattern) if pattern else None
    except re.error as e:
        raise OpscopeError(f"{pass_name}: bad 'sites' regex '{pattern}': {e}") from None
    chosen = []
    every = find_sites(module.operation)
    if regex and every and not any(regex.search(s.name) for s in every):
        names = [s.name for s in every]
        listed = ", ".join(names[:MOST_NAMES]) + (
            f" and {len(names) - MOST_NAMES} more (`opscope sites MODEL` lists them)" if len(names) > MOST_NAMES else ""
        )
        raise OpscopeError(f"{pass_name}: sites='{pattern}' names no matmul site of this module (valid: {listed})")
    for site in every:
        if (regex and not regex.search(site.name)) or (keep is not None and not keep(site)):
            continue
        why = None
        if not site.op.name.startswith("linalg."):
            why = f"{site.op.name} (only linalg sites are rewritten: import to linalg first)"
        elif not site.is_float:
            why = f"integer matmul ({', '.join(site.element_type(r) for r in ROLES)}), already quantized"
        elif site.dynamic or any(not site.value(r).type.has_static_shape for r in ROLES):
            why = f"dynamic shape ({site.value('lhs').type} x {site.value('rhs').type})"
        elif not _in_entry_block(site.op):
            why = "not in a function's entry block"
        if why:
            log.warning("%s: skipping site '%s' at %s: %s", pass_name, site.name, site.location, why)
            continue
        chosen.append(site)
    return chosen


def _in_entry_block(op: ir.Operation) -> bool:
    parent = op.parent
    return parent is not None and parent.name == "func.func" and op.block == parent.regions[0].blocks[0]


def is_convolution(site: Site) -> bool:
    """The site is a linalg convolution (not a contraction)."""
    return not linalg.isa_contraction_op(site.op)


def operand_dims(site: Site, role: str, which: str = "k") -> tuple[int, ...] | None:
    """The dims of the site op's `role` operand (lhs or rhs, as the op reads it: a
    convolution's padded input) indexed by its contraction loops (`which="k"`: K; for a
    convolution input channels × filter window), or by its channel loops (`which="channel"`,
    convolutions: input channels of lhs, output channels of rhs, and depthwise/group dims),
    read from the indexing maps; None when such a dim is indexed by a compound expression."""
    op = site.op
    maps = [ir.AffineMapAttr(a).value for a in linalg.get_indexing_maps(op)]
    amap = maps[_OPERAND[role]]
    if linalg.isa_contraction_op(op):
        loops = set(linalg.infer_contraction_dimensions(op).k)
    else:
        dims = linalg.infer_convolution_dimensions(op)
        if which == "k":
            loops = set(dims.input_channel) | set(dims.filter_loop)
        else:
            loops = set(dims.depth) | set(dims.input_channel if role == "lhs" else dims.output_channel)
    found = []
    for pos, expr in enumerate(amap.results):
        if isinstance(expr, ir.AffineDimExpr):
            if expr.position in loops:
                found.append(pos)
        elif which == "k" and any(_uses(expr, d, amap.n_dims) for d in loops):
            return None
    return tuple(found)


def _uses(expr: ir.AffineExpr, dim: int, n_dims: int) -> bool:
    """`expr` reads loop dim `dim` (it changes when that dim is replaced by a symbol)."""
    repl = [ir.AffineDimExpr.get(i) if i != dim else ir.AffineConstantExpr.get(0) for i in range(n_dims)]
    return str(expr.compose(ir.AffineMap.get(n_dims, 0, repl))) != str(expr)


def copy_source(value: ir.Value, dims: Sequence[int]) -> tuple[ir.Value, tuple[int, ...], list[ir.Operation]]:
    """Follow `value` back through pure data movement (`linalg.transpose`, `linalg.broadcast`,
    a copy `linalg.generic` that only permutes, broadcasts or widens (`arith.extf`) its input) to the tensor it
    copies: (that tensor, the positions `dims` of `value` have in it, the copy ops from it
    to `value`). A weight imported as `broadcast(transpose(W))` is quantized as W, which
    IREE's const-eval folds into one constant of W's size (quantizing the broadcast copy
    would be a constant 8x larger, which IREE declines to hoist: it then runs every call)."""
    chain: list[ir.Operation] = []
    dims = tuple(dims)
    while isinstance(value, ir.OpResult):
        op = value.owner.operation if hasattr(value.owner, "operation") else value.owner
        back = _copy_dims(op, dims)
        if back is None:
            break
        chain.append(op)
        value, dims = op.operands[0], back
    return value, dims, chain[::-1]


def _copy_dims(op: ir.Operation, dims: Sequence[int]) -> tuple[int, ...] | None:
    """Where the result dims `dims` of a pure copy `op` come from in its input, or None when
    `op` is no such copy (or broadcasts along one of `dims`)."""
    if op.name in ("tensor.collapse_shape", "tensor.expand_shape") and len(op.results) == 1:
        return _reshape_dims(op, dims)
    if len(op.results) != 1 or len(op.operands) != 2:
        return None
    if op.name == "linalg.transpose":
        perm = list(ir.DenseI64ArrayAttr(op.attributes["permutation"]))
        return tuple(sorted(perm[d] for d in dims))
    if op.name == "linalg.broadcast":
        added = set(ir.DenseI64ArrayAttr(op.attributes["dimensions"]))
        if added & set(dims):
            return None
        kept = [d for d in range(ir.RankedTensorType(op.results[0].type).rank) if d not in added]
        return tuple(kept.index(d) for d in dims)
    if op.name != "linalg.generic":
        return None
    block = op.regions[0].blocks[0]
    body = list(block.operations)
    iters = [str(a) for a in ir.ArrayAttr(op.attributes["iterator_types"])]
    read = list(body[0].operands) if body else []
    if len(body) == 2 and body[0].name == "arith.extf" and list(body[1].operands) == [body[0].result]:
        body = body[1:]  # a widening copy (a weight stored in bf16, read as f32) keeps every value
    if len(body) != 1 or read != [block.arguments[0]] or any("parallel" not in i for i in iters):
        return None
    in_map, out_map = (ir.AffineMapAttr(a).value for a in ir.ArrayAttr(op.attributes["indexing_maps"]))
    if not all(isinstance(e, ir.AffineDimExpr) for e in [*in_map.results, *out_map.results]):
        return None
    out_loops = [ir.AffineDimExpr(e).position for e in out_map.results]
    in_loops = [ir.AffineDimExpr(e).position for e in in_map.results]
    if sorted(out_loops) != list(range(out_map.n_dims)) or len(set(in_loops)) != len(in_loops):
        return None
    wanted = [out_loops[d] for d in dims]
    if not all(loop in in_loops for loop in wanted):
        return None  # broadcast along a wanted dim
    return tuple(sorted(in_loops.index(loop) for loop in wanted))


def _reshape_dims(op: ir.Operation, dims: Sequence[int]) -> tuple[int, ...] | None:
    """Where the result dims `dims` of a `collapse_shape`/`expand_shape` come from in its source,
    when each is one source dim (its group's other dims all 1), else None. A weight broadcast over
    a batch and the batch dims merged (`linalg.linear` on a 4-D activation: ConvNeXt's pointwise
    convs) is then read as the weight, counted once."""
    groups = [[ir.IntegerAttr(d).value for d in ir.ArrayAttr(g)] for g in ir.ArrayAttr(op.attributes["reassociation"])]
    source = ir.RankedTensorType(op.operands[0].type).shape
    result = ir.RankedTensorType(op.results[0].type).shape
    back = []
    for d in dims:
        if op.name == "tensor.collapse_shape":  # result dim d is source group d
            wide = [s for s in groups[d] if source[s] != 1]
            if len(wide) > 1:
                return None
            back.append(wide[0] if wide else groups[d][0])
        else:  # expand_shape: source dim g became the result dims of group g
            g = next(i for i, group in enumerate(groups) if d in group)
            if any(result[r] != 1 for r in groups[g] if r != d):
                return None
            back.append(g)
    return tuple(sorted(back))


def replay(chain: list[ir.Operation], value: ir.Value, ip: ir.InsertionPoint) -> ir.Value:
    """Copies of the ops `chain` (from `copy_source`), inserted at `ip`, reading `value`:
    the originals stay for their other users."""
    for op in chain:
        new = op.clone(ip=ip)
        new.operands[0] = value
        value = new.results[0]
    return value


class RoundTrips:
    """Builds fake-quant round trips, each (value, reduced dims) once: a second site that
    reads the same tensor gets the first one's result (q/k/v projections of one normed x)."""

    def __init__(self, bits: int):
        self.bits = bits
        self._built: dict = {}

    def get(
        self,
        value: ir.Value,
        reduced: Sequence[int],
        loc: ir.Location,
        ip: ir.InsertionPoint,
        group: tuple[tuple[int, ...], int] | None = None,
    ) -> tuple[ir.Value, bool]:
        """(the round trip of `value`, whether it was built now); with `group` = (K dims, g),
        K is split into groups of g and `reduced` lists the other dims sharing a scale."""
        key = (value, tuple(reduced), group)
        if key in self._built:
            return self._built[key], False
        if group is None:
            out = fake_quant(value, reduced, self.bits, loc=loc, ip=ip)
        else:
            out = grouped_fake_quant(value, group[0], group[1], self.bits, loc=loc, ip=ip, shared=reduced)
        self._built[key] = out
        return out, True


def fake_quant(x: ir.Value, reduced: Sequence[int], bits: int, *, loc: ir.Location, ip: ir.InsertionPoint) -> ir.Value:
    """The symmetric round trip of `x` with one scale per index of its dims not in `reduced`
    (amax over `reduced`): two linalg.generics inserted at `ip`, located at `loc`."""
    ty = ir.RankedTensorType(x.type)
    rank, elem = ty.rank, ty.element_type
    reduced = sorted(set(reduced))
    kept = [d for d in range(rank) if d not in reduced]
    f32 = ir.F32Type.get()
    with loc, ip:  # linalg.fill's builder ignores ip=: it inserts at the innermost insertion point
        ident = dim_map(rank, range(rank))
        scale_map = dim_map(rank, kept)
        empty = tensor.EmptyOp([ty.shape[d] for d in kept], f32, ip=ip)
        zero = arith.ConstantOp(f32, 0.0, ip=ip)
        init = linalg.fill(zero.result, outs=[empty.result])
        amax_ty = ir.RankedTensorType.get([ty.shape[d] for d in kept], f32)
        iters = ["reduction" if d in reduced else "parallel" for d in range(rank)]

        def amax_body(v, acc):
            return arith.maximumf(acc, math.absf(to_f32(v)))

        amax = generic(amax_ty, [x], init, [ident, scale_map], iters, amax_body, ip)
        q = float(qmax(bits))

        def round_trip_body(v, m, _out):
            zero_, one, tiny, lo, hi, inv_q = (arith.constant(f32, c) for c in (0.0, 1.0, TINY, -q, q, 1.0 / q))
            inv = arith.select(arith.cmpf(arith.CmpFPredicate.OGT, m, tiny), arith.divf(one, m), zero_)
            t = arith.mulf(arith.mulf(to_f32(v), inv), hi)
            t = arith.minimumf(arith.maximumf(math.round(t), lo), hi)
            y = arith.mulf(arith.mulf(t, inv_q), m)
            return y if elem == f32 else arith.truncf(elem, y)

        out_empty = tensor.EmptyOp(list(ty.shape), elem, ip=ip)
        return generic(
            ty, [x, amax], out_empty.result, [ident, scale_map, ident], ["parallel"] * rank, round_trip_body, ip
        )


def grouped_fake_quant(
    x: ir.Value,
    k_dims: Sequence[int],
    group: int,
    bits: int,
    *,
    loc: ir.Location,
    ip: ir.InsertionPoint,
    shared: Sequence[int] = (),
) -> ir.Value:
    """The round trip of `x` with one scale per (index of its other dims, group of `group`
    consecutive elements of its flattened K dims `k_dims`, which must be adjacent and hold a
    multiple of `group` elements): K is reshaped to [K/group, group], and back. Dims in
    `shared` (not K dims) share their scales too (a per-tensor scale per K group)."""
    ty = ir.RankedTensorType(x.type)
    shape = list(ty.shape)
    first, last = min(k_dims), max(k_dims)
    k = 1
    for d in range(first, last + 1):
        k *= shape[d]
    flat = shape[:first] + [k] + shape[last + 1 :]
    split = shape[:first] + [k // group, group] + shape[last + 1 :]
    reduced = [first + 1] + [d if d < first else d - (last - first) + 1 for d in shared]
    with loc:
        v = x
        if last > first:
            v = _collapse(v, flat, _reassociation(len(shape), first, last), ip)
        v = _expand(v, split, _reassociation(len(split), first, first + 1), ip)
        v = fake_quant(v, reduced, bits, loc=loc, ip=ip)
        v = _collapse(v, flat, _reassociation(len(split), first, first + 1), ip)
        if last > first:
            v = _expand(v, shape, _reassociation(len(shape), first, last), ip)
    return v


def _reassociation(rank: int, first: int, last: int) -> list[list[int]]:
    """Groups of a rank-`rank` shape's dims: [first..last] together, every other dim alone."""
    return [[d] for d in range(first)] + [list(range(first, last + 1))] + [[d] for d in range(last + 1, rank)]


def _collapse(v: ir.Value, shape: list[int], groups: list[list[int]], ip: ir.InsertionPoint) -> ir.Value:
    ty = ir.RankedTensorType.get(shape, ir.RankedTensorType(v.type).element_type)
    return tensor.CollapseShapeOp(ty, v, _groups_attr(groups), ip=ip).result


def _expand(v: ir.Value, shape: list[int], groups: list[list[int]], ip: ir.InsertionPoint) -> ir.Value:
    ty = ir.RankedTensorType.get(shape, ir.RankedTensorType(v.type).element_type)
    return tensor.ExpandShapeOp(ty, v, _groups_attr(groups), [], shape, ip=ip).result


def _groups_attr(groups: list[list[int]]) -> ir.ArrayAttr:
    i64 = ir.IntegerType.get_signless(64)
    return ir.ArrayAttr.get([ir.ArrayAttr.get([ir.IntegerAttr.get(i64, d) for d in g]) for g in groups])
