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

`grouped_fake_quant` gives one scale per group of `group` consecutive K elements
(reshaping K into [K/group, group] and back); `RoundTrips` builds each (tensor, scales) round
trip once. `quantize` is the same quantizer on the host (numpy, the same f32 op order),
giving the integer codes and scales `quantize-weight` stores.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from iree.compiler import ir
from iree.compiler.dialects import arith, linalg, math, tensor

from opscope.errors import OpscopeError
from opscope.ir.build import dim_map, generic, to_f32

MIN_BITS, MAX_BITS = 2, 16
TINY = 1e-20  # amax below this: the round trip gives zeros (the reciprocal would overflow)


def qmax(bits: int) -> int:
    """The largest code of a symmetric signed `bits`-bit quantizer: 2^(bits−1) − 1."""
    return (1 << (bits - 1)) - 1


def check_bits(pass_name: str, bits: int) -> None:
    """Refuse a bit width outside 2..16, naming the pass."""
    if not MIN_BITS <= bits <= MAX_BITS:
        raise OpscopeError(f"{pass_name}: option 'bits' expects an integer in {MIN_BITS}..{MAX_BITS}, got {bits}")


def quantize(w: np.ndarray, k_dims: Sequence[int], bits: int, group: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """(int8 codes, float32 scales) of the float32 weight `w` quantized over its dims `k_dims`,
    in `fakequant-weights`' float32 op order: amax = max|w| per scale, t = (w·(1/amax))·qmax
    (1/amax taken as 0 when amax <= 1e-20), codes = round(t) half away from zero, clamped to
    ±qmax; scale = amax·(1/qmax), so codes·scale is the round trip to float rounding. Without
    a group the scales have `w`'s other dims; with one (a single K dim of size a multiple of
    `group`), K is split into [K/group, group] in both codes and scales (scales: K/group)."""
    w = np.asarray(w, np.float32)
    q = np.float32(qmax(bits))
    if group:
        (kd,) = k_dims
        w = w.reshape(w.shape[:kd] + (w.shape[kd] // group, group) + w.shape[kd + 1 :])
        reduced: tuple[int, ...] = (kd + 1,)
    else:
        reduced = tuple(k_dims)
    amax = np.abs(w).max(axis=reduced, keepdims=True).astype(np.float32)
    with np.errstate(divide="ignore"):
        inv = np.where(amax > np.float32(TINY), np.float32(1) / amax, np.float32(0)).astype(np.float32)
    t = ((w * inv).astype(np.float32) * q).astype(np.float32).astype(np.float64)
    codes = np.clip(np.sign(t) * np.floor(np.abs(t) + 0.5), -q, q).astype(np.int8)  # exact in float64
    scales = (np.squeeze(amax, axis=reduced) * np.float32(1.0 / float(q))).astype(np.float32)
    return codes, scales


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
