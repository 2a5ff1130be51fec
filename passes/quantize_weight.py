"""`quantize-weight`: store each matmul's constant weight as real int8/int4 codes plus f32 scales (W8A16, W4A16, W8A8).

Matches every float, static-shaped linalg contraction site (`opscope.ir.sites`) in a
function's entry block whose name `sites` finds (and, from Python, `keep` accepts) and whose
rhs is a stored weight (an `arith.constant` or immutable `util.global` holding `dense<…>` or
`dense_resource<…>`, under the transposes, batch broadcasts and batch-merging
`tensor.collapse_shape`s an importer put in between), or whose lhs is where the rhs is computed
(W @ x, rewritten as x ×_K W: `opscope.ir.commute`). The weight is quantized on the host
with `fakequant-weights`' numerics (symmetric, one scale per output channel, or per (output
channel, group of `group` consecutive K); codes round(x·(1/amax)·qmax) half away from zero,
clamped to ±qmax; an all-zero channel gets zero codes), stored as an i8 `dense_resource` or an
i4 `dense` constant (IREE packs i4 two to a byte; the bytecode writer takes no i4 resource)
and f32 scales amax·(1/qmax). The codes are stored in a matmul rhs' layout, the K dims just
before the last N dim (a Linear's W [N, K] as [K, N]: `codes_layout`), and read through the
copies' composed indexing maps (no transpose or broadcast is left).

The scales are factored out of the K sum. Per channel the site becomes a mixed-type
contraction acc = Σ_K f32(x)·sitofp(q), two inputs and a multiply-add body (a contraction
to IREE, which tiles it as a matmul; llvm-cpu has no data tiling for f32 × i8, so the codes
are read as stored, in vectors along N), into zeros, then one elementwise generic
out + acc·scale that IREE fuses into the contraction's dispatch. With `group`: K is split
into [K/g, g], the contraction sums each group into p[K/g, out…] (the group a batch loop,
outermost), p·scale elementwise, then a plain reduction out + Σ_groups behind an
`iree_tensor_ext.compute_barrier.start` (why: `_grouped`). Nothing dequantizes the codes
outside the contraction: a standalone dequantization of constants is a constant
expression, which IREE 3.13 hoists into an f32 global filled at load time (measured: the
.vmfb stays small but the f32 weight is back in memory); here the codes stay codes up to
the matmul's dispatch (512×512 .vmfb: f32 1.06 MB, i8 275 KB, i4 144 KB, i4 in groups of
128 151 KB).

Why factored (IREE 3.13, llvm-cpu, opscope's tuned flags, 2 cores, µs per call,
iree-benchmark-module, min of 5 rounds): the previous lowering, one generic dequantizing in
its body (acc + x·(sitofp(q)·scale): three inputs, no contraction to IREE, generic codegen),
against this one, on x[M, 1024] · W (`bench/bench_kernels.py`: W [K, N] = [1024, 1024], a global):

    M=1   f32 134 | W8A16 271 -> 149 | W4A16 g128 293 -> 159 | W8A8 108
    M=32  f32 518 | W8A16 3576 -> 759 | W4A16 g128 6888 -> 646 | W8A8 336
    M=32, a torch Linear's W [N, K]: f32 518 | W8A16 5202 -> 534 | W4A16 g128 2529 -> 658
    M=32, 3072×1024: f32 1174 | W8A16 9861 -> 1354 | W4A16 g128 15821 -> 2074

Measured on the way there: the codes read along K (W [N, K] kept as is) are about 3×
slower at M=1 and M=32 (the contraction vectorizes along N); a separate dequantization generic on
the codes behind `util.optimization_barrier` (no hoisting) becomes its own dispatch writing
the f32 weight on every call (M=1 2× slower than f32); the group loop after the site's loops
instead of first is 2× slower at M=32. The partial sums p cost K/g × M × N floats written
and read back: at M=512 (one thread) f32 10.7 ms, W8A16 11.3, W4A16 14.0, W4A16 g128 16.6.
`activations=true` (W8A8; bits=8, group=0) quantizes the lhs per row at run time (amax over
its K dims), contracts i8 × i8 into i32 and scales back: out + f32(acc)·(amax_x/qmax)·scale.
A site whose rhs is a function argument or computed (q·kᵀ) is skipped (info), or refused
when `sites` names it; convolutions and other unsupported sites are skipped with a warning.

    %w = arith.constant dense<…> : tensor<4x8xf32>
    %wt = linalg.transpose ins(%w : tensor<4x8xf32>) outs(%e : tensor<8x4xf32>) permutation = [1, 0]
    %0 = linalg.matmul ins(%x, %wt : tensor<3x8xf32>, tensor<8x4xf32>) outs(%c : tensor<3x4xf32>) loc("fc1")
becomes
    %q = arith.constant dense_resource<opscope.fc1.codes> : tensor<8x4xi8>
    %s = arith.constant dense<[…]> : tensor<4xf32>
    %acc = linalg.generic {indexing_maps = [(m, n, k) -> (m, k), (m, n, k) -> (k, n), (m, n, k) -> (m, n)],
                           iterator_types = ["parallel", "parallel", "reduction"]}
        ins(%x, %q : tensor<3x8xf32>, tensor<8x4xi8>) outs(%zeros : tensor<3x4xf32>) {
      sitofp, mulf, addf } loc("fc1")
    %0 = linalg.generic {(m, n) -> (m, n), (m, n) -> (n), (m, n) -> (m, n)} ins(%acc, %s) outs(%c) {
      mulf, addf: out + acc·scale } loc("fc1")
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import ClassVar

import numpy as np
from iree.compiler import ir
from iree.compiler.dialects import arith, iree_tensor_ext, linalg, math, tensor, util

from opscope.errors import OpscopeError
from opscope.ir.build import cast_float, dim_map, generic, to_f32
from opscope.ir.commute import Commutes
from opscope.ir.const_expr import memoized, owner
from opscope.ir.dequant_view import SMOOTHING
from opscope.ir.fakequant import TINY, qmax, quantize
from opscope.ir.site_select import select_sites
from opscope.ir.sites import Site, is_convolution, operand_dims
from opscope.ir.smoothing import read_calibration, smoothing_factors, uncalibrated
from opscope.ir.weight_source import rhs_source
from opscope.ir.weight_trace import trace_weight
from opscope.ir.weights import read_stored

log = logging.getLogger("opscope")

BITS = (4, 8)  # the integer types IREE stores and runs on llvm-cpu: i4 (packed) and i8


@dataclass(frozen=True)
class _Plan:
    """How one site reads its weight: the stored tensor, the copies from it to the site's rhs,
    and the codes' layout: `perm`, the weight's dims in the codes' order (`codes_layout`); the
    site's loop that indexes each codes dim; the codes dims indexed by K loops."""

    site: Site
    weight: ir.Value
    perm: tuple[int, ...]
    loops: tuple[int, ...]
    k_dims: tuple[int, ...]
    chain: tuple[ir.Operation, ...]


@dataclass(frozen=True)
class QuantizeWeight:
    """Store each matmul site's constant weight as int8/int4 codes and f32 scales, dequantized in the contraction."""

    name: ClassVar[str] = "quantize-weight"

    bits: int = 8
    group: int = 0
    activations: bool = False
    sites: str = ""
    calibration: str = ""  # an .npz of each site's lhs max|x| per K channel (`opscope.ir.smoothing`)
    smooth: float = 0.0  # SmoothQuant's migration strength α in (0, 1]; 0: no smoothing
    static: bool = False  # W8A8 with one activation scale calibrated offline instead of one per row at run time
    keep: Callable[[Site], bool] | None = field(default=None, compare=False, metadata={"api_only": True})

    def __post_init__(self) -> None:
        """Refuse a negative group (`bits` and `activations` are checked when the pass runs)."""
        if self.group < 0:
            raise OpscopeError(
                f"{self.name}: option 'group' expects a group size >= 0 (0: one scale per output "
                f"channel), got {self.group}"
            )

    def check(self) -> None:
        """Refuse a bit width IREE stores no integer type for, W8A8 with anything but 8 bits per
        channel, and smoothing or static scales without a calibration file (or the file without them)."""
        if not 0.0 <= self.smooth <= 1.0:
            raise OpscopeError(f"{self.name}: option 'smooth' expects α in [0, 1] (0: off), got {self.smooth:g}")
        if self.static and not self.activations:
            raise OpscopeError(
                f"{self.name}: static=true calibrates the activations' int8 scale: add activations=true (W8A8)"
            )
        if (self.smooth or self.static) and not self.calibration:
            raise OpscopeError(
                f"{self.name}: {'smooth' if self.smooth else 'static'} needs the activations' recorded maxima: "
                "add calibration=FILE.npz (opscope.write_calibration writes one from a profile run)"
            )
        if self.calibration and not (self.smooth or self.static):
            raise OpscopeError(
                f"{self.name}: calibration is read for smooth=α or static=true only: add one, or drop calibration"
            )
        if self.bits not in BITS:
            raise OpscopeError(f"{self.name}: option 'bits' expects 4 or 8 (codes stored as i4 or i8), got {self.bits}")
        if self.activations and (self.bits != 8 or self.group):
            raise OpscopeError(
                f"{self.name}: activations=true (W8A8, an i8 x i8 -> i32 contraction) takes bits=8 "
                f"group=0 only, got bits={self.bits} group={self.group}: drop activations for "
                f"W{self.bits}A16"
            )

    def plan(self, site: Site, calibration: dict[str, np.ndarray] | None = None, uncalibrated: str = "") -> _Plan | str:
        """How `site` reads its weight, or why it is skipped; raises for a site `sites` names whose
        rhs is no constant or that `calibration` lacks or cannot calibrate (`uncalibrated`: why, as
        `opscope.ir.smoothing.uncalibrated` says of the site before it was commuted), for K not a
        multiple of `group`, and for a calibration entry of another length than the site's K."""
        where = f"{self.name}: site '{site.name}' at {site.location}"
        source = rhs_source(site)
        if source != "constant":
            what = {
                "argument": "a function argument",
                "gathered": "gathered per token from a MoE's expert bank (fakequant-weights simulates its codes)",
            }.get(source, "computed from activations (an attention's q·kᵀ or p·v)")
            if self.sites:
                fix = "fakequant-weights{arguments=true} simulates its quantization; " if source == "argument" else ""
                raise OpscopeError(f"{where}: its rhs is {what}, not a stored weight: {fix}leave it out of 'sites'")
            return f"its rhs is {what}, not a stored weight"
        if is_convolution(site):
            return "a convolution: only contractions are rewritten (fakequant-weights simulates a filter's codes)"
        traced = trace_weight(site)
        if isinstance(traced, str):
            return traced
        weight, loops, chain = traced
        k_loops = set(linalg.infer_contraction_dimensions(site.op).k)
        k_dims = tuple(d for d, loop in enumerate(loops) if loop in k_loops)
        if not k_dims:
            return "its weight has no K dim"
        if len(k_dims) == len(loops):  # x @ w with w a vector: one scale for no channel (found by the
            return "its weight has no output channel (a vector: x @ w)"  # generated-model tests: invalid IR)
        if self.group:
            if len(k_dims) != 1:
                return f"group={self.group} needs one K dim in the weight, it has {len(k_dims)}"
            k = ir.RankedTensorType(weight.type).shape[k_dims[0]]
            if k % self.group:
                raise OpscopeError(f"{where}: K = {k} is not a multiple of group={self.group}")
            if _lhs_position(site, loops[k_dims[0]]) is None:
                return "its lhs does not index the K loop by one plain dim"
        if self.activations:
            lhs_k = operand_dims(site, "lhs")
            if lhs_k is None or not lhs_k:
                return "its lhs is indexed by a compound expression of its K loops"
            if _row_positions(site, lhs_k) is None:
                return "its lhs rows are not indexed by plain loops the result keeps"
        if calibration is not None:
            why = uncalibrated or self._calibrated(site, calibration)
            if why:
                return self._uncalibrated(site, why)
        perm = codes_layout(len(loops), k_dims)
        return _Plan(
            site, weight, perm, tuple(loops[d] for d in perm), tuple(perm.index(d) for d in k_dims), tuple(chain)
        )

    def _uncalibrated(self, site: Site, why: str) -> str:
        """`why` a site cannot be calibrated, as a skip; raised when `sites` names it."""
        if self.sites:
            raise OpscopeError(f"{self.name}: site '{site.name}' at {site.location}: {why}: leave it out of 'sites'")
        return why

    def _calibrated(self, site: Site, calibration: dict[str, np.ndarray]) -> str:
        """Why `calibration` cannot smooth or statically scale `site` ("" when it can): it has no
        entry for it; raises for an entry of another length than the site's K (another model's)."""
        if site.name not in calibration:
            return f"the calibration file {self.calibration} has no entry for it"
        have, k = len(calibration[site.name]), site.shape("lhs")[-1]
        if have != k:
            raise OpscopeError(
                f"{self.name}: site '{site.name}' at {site.location}: calibration {self.calibration} holds "
                f"{have} channels, its lhs has K = {k}: calibrate on a run of this model"
            )
        return ""

    def apply(self, module) -> None:
        self.check()
        calibration = read_calibration(self.name, self.calibration) if self.calibration else None
        with memoized(), Commutes() as commutes:
            plans: list[_Plan] = []
            for site in select_sites(self.name, module, self.sites, self.keep):
                why = uncalibrated(site) if calibration is not None else ""  # before W @ x is commuted
                plan = self.plan(commutes.view(site), calibration, why)  # every refusal before the first rewrite
                if isinstance(plan, str):
                    level = logging.INFO if plan.startswith("its rhs is") else logging.WARNING
                    log.log(level, "%s: skipping site '%s' at %s: %s", self.name, site.name, site.location, plan)
                else:
                    plans.append(plan)
            for plan in plans:  # a W @ x is rewritten as x ×_K W (`opscope.ir.commute`)
                commutes.adopt(plan.site)
        stored = read_stored(module, [p.weight for p in plans], [p.site.name for p in plans])
        calibrated = self._calibrations(plans, stored, calibration) if calibration is not None else {}
        built: dict = {}  # (storage, K dims, function, lhs if smoothed) -> (codes, scales): a tied weight once
        rows: dict = {}  # (lhs, K dims) -> (i8 codes, amax): q/k/v projections of one x share it
        divided: dict = {}  # lhs -> x·(1/s): the smoothed activation, shared by the sites that read x
        done = 0
        for plan, read in zip(plans, stored):
            site = plan.site
            if isinstance(read, str):
                log.warning("%s: skipping site '%s' at %s: %s", self.name, site.name, site.location, read)
                continue
            key, values = read
            values = np.transpose(values, plan.perm)
            ip, loc = ir.InsertionPoint(site.op), site.op.location
            lhs = site.op.operands[0]
            cal = calibrated.get(lhs)
            cache = (key, plan.perm, plan.k_dims, site.op.parent, lhs if self.smooth else None)
            with loc:
                if self.smooth:
                    values = values * cal.factors.reshape(
                        [-1 if d == plan.k_dims[0] else 1 for d in range(values.ndim)]
                    )
                    if lhs not in divided:
                        divided[lhs] = _divide_channels(lhs, cal.inverse, ip)
                    lhs = divided[lhs]
                if cache not in built:
                    codes, scales = quantize(values, plan.k_dims, self.bits, self.group)
                    built[cache] = _constants(codes, scales, self.bits, site.name, site.op.parent, ip)
                q, s = built[cache]
                if self.activations:
                    out = _w8a8(plan, lhs, q, s, rows, cal.amax if self.static else None, loc, ip)
                elif self.group:
                    out = _grouped(plan, lhs, q, s, self.group, loc, ip)
                else:
                    out = _factored(plan, lhs, q, s, loc, ip)
            site.op.results[0].replace_all_uses_with(out)
            site.op.erase()
            _erase_unused(
                [*reversed(plan.chain), owner(plan.weight)]
                if isinstance(plan.weight, ir.OpResult)
                else list(reversed(plan.chain))
            )
            done += 1
        if not done:
            log.warning("%s: no matmul site with a constant weight to quantize in this module", self.name)

    def _calibrations(self, plans: Sequence[_Plan], stored: Sequence, calibration: dict[str, np.ndarray]) -> dict:
        """lhs -> `_Calibrated` of the sites that read it: one smoothing for all of them (SmoothQuant's
        shared factor for q/k/v of one x: max|w_k| over every such site's weight), so the smoothed x
        and its int8 codes are computed once; the static scale is max_k max|x_k|·(1/s_k)."""
        by_lhs: dict = {}
        for plan, read in zip(plans, stored):
            if isinstance(read, str):
                continue
            values = np.abs(np.transpose(read[1], plan.perm))
            kd = plan.k_dims[0]
            w_max = values.max(axis=tuple(d for d in range(values.ndim) if d != kd))
            x_max = calibration[plan.site.name]
            lhs = plan.site.op.operands[0]
            if lhs in by_lhs:
                old_x, old_w = by_lhs[lhs]
                by_lhs[lhs] = (np.maximum(old_x, x_max), np.maximum(old_w, w_max))
            else:
                by_lhs[lhs] = (x_max, w_max)
        out = {}
        for lhs, (x_max, w_max) in by_lhs.items():
            factors = smoothing_factors(x_max, w_max, self.smooth) if self.smooth else np.ones_like(x_max)
            inverse = (1.0 / factors.astype(np.float64)).astype(np.float32)
            amax = float(np.max((x_max * inverse).astype(np.float32), initial=0.0))
            out[lhs] = _Calibrated(factors, inverse, amax)
        return out


@dataclass(frozen=True)
class _Calibrated:
    """One lhs' smoothing: the weight's K rows multiplied by `factors`, x by `inverse` (1/s in
    float32), and the static int8 scale's max|x·(1/s)| over the calibration."""

    factors: np.ndarray
    inverse: np.ndarray
    amax: float


# ------------------------------------------------------------------------------ the weight's codes


def codes_layout(rank: int, k_dims: Sequence[int]) -> tuple[int, ...]:
    """The weight's dims in the order the codes store them: the K dims just before the last
    non-K dim (a Linear's W [N, K] is stored [K, N], a batched [B, N, K] as [B, K, N]): the
    layout of a matmul's rhs, which IREE's contraction codegen reads along N in vectors (the
    codes are not data-tiled: llvm-cpu has no f32 x i8 tile; read along K it is 3x slower)."""
    rest = [d for d in range(rank) if d not in k_dims]
    return (*rest[:-1], *k_dims, *rest[-1:])


def _constants(
    codes: np.ndarray, scales: np.ndarray, bits: int, name: str, func: ir.Operation, ip: ir.InsertionPoint
) -> tuple[ir.Value, ir.Value]:
    """The codes and the f32 scales (`dense`) as values at `ip` (inside `func`). i8 codes: an
    `arith.constant` holding a `dense_resource` blob. i4 codes: a private `util.global`
    `<inlining_policy = #util.inline.never>` holding `dense` (IREE packs it two to a byte),
    loaded at `ip`: IREE 3.13 copies a small constant into the dispatch that reads it, and
    llvm-cpu cannot lower an i4 constant there (`memref.get_global` of i4: measured)."""
    ty = ir.RankedTensorType.get(list(codes.shape), ir.IntegerType.get_signless(bits))
    if bits == 8:
        attr = ir.DenseResourceElementsAttr.get_from_buffer(np.ascontiguousarray(codes), _symbol(name), ty)
        q = arith.ConstantOp(ty, attr, ip=ip).result
    else:
        # one byte per element, masked to its nibble: IREE packs the bytes two to one by OR-ing, so a
        # sign-extended byte (0xFE for -2) would spill into its neighbour's nibble (measured on IREE 3.13)
        attr = ir.DenseElementsAttr.get(np.ascontiguousarray(codes & 0xF), type=ty.element_type)
        table, sym = ir.SymbolTable(func.parent), _symbol(name)
        while sym in table:
            sym += "_"
        util.GlobalOp(
            sym,
            ty,
            sym_visibility="private",
            initial_value=attr,
            inlining_policy=ir.Attribute.parse("#util.inline.never"),
            ip=ir.InsertionPoint(func),
        )
        q = util.GlobalLoadOp(ty, sym, is_immutable=True, ip=ip).result
    f32 = ir.F32Type.get()
    scales = np.ascontiguousarray(scales, np.float32)
    s_ty = ir.RankedTensorType.get(list(scales.shape), f32)
    s_attr = (
        ir.DenseElementsAttr.get(scales, type=f32)
        if scales.ndim
        else ir.DenseElementsAttr.get_splat(s_ty, ir.FloatAttr.get(f32, float(scales)))
    )
    return q, arith.ConstantOp(s_ty, s_attr, ip=ip).result


def _symbol(site: str) -> str:
    """The codes' resource or global name (MLIR renames a resource on a collision)."""
    return "opscope." + re.sub(r"[^A-Za-z0-9_.]", "_", site) + ".codes"


def _maps(op: ir.Operation) -> list[ir.AffineMap]:
    return [ir.AffineMapAttr(a).value for a in linalg.get_indexing_maps(op)]


def _lhs_position(site: Site, k_loop: int) -> int | None:
    """The lhs dim indexed by loop `k_loop` when exactly one plain dim is and no compound expression uses it."""
    amap = _maps(site.op)[0]
    found = [p for p, e in enumerate(amap.results) if isinstance(e, ir.AffineDimExpr) and e.position == k_loop]
    plain = all(isinstance(e, ir.AffineDimExpr) for e in amap.results)
    return found[0] if len(found) == 1 and plain else None


def _row_positions(site: Site, lhs_k: Sequence[int]) -> list[int] | None:
    """For each lhs dim that is not a K dim (a row dim), the result dim its loop indexes, or
    None when one is no plain loop of the result."""
    lhs_map, _, out_map = _maps(site.op)
    out_loops = [ir.AffineDimExpr(e).position if isinstance(e, ir.AffineDimExpr) else None for e in out_map.results]
    found = []
    for p, e in enumerate(lhs_map.results):
        if p in lhs_k:
            continue
        if not isinstance(e, ir.AffineDimExpr) or ir.AffineDimExpr(e).position not in out_loops:
            return None
        found.append(out_loops.index(ir.AffineDimExpr(e).position))
    return found


# --------------------------------------------------------------------------------- the rewrites


def _iterators(op: ir.Operation, n_loops: int) -> list[str]:
    k_loops = set(linalg.infer_contraction_dimensions(op).k)
    return ["reduction" if d in k_loops else "parallel" for d in range(n_loops)]


def _factored(
    plan: _Plan, lhs: ir.Value, q: ir.Value, s: ir.Value, loc: ir.Location, ip: ir.InsertionPoint
) -> ir.Value:
    """The site with its per-channel scales factored out of the K sum: a mixed-type contraction
    acc = Σ_K f32(x)·sitofp(q) (two inputs, the body a multiply-add through casts: the
    contraction IREE tiles as a matmul), then out + acc·scale, elementwise (fused into the
    contraction's dispatch)."""
    op = plan.site.op
    lhs_map, _, out_map = _maps(op)
    out_ty = ir.RankedTensorType(op.results[0].type)
    rank = out_ty.rank
    codes_map = dim_map(lhs_map.n_dims, plan.loops)
    with loc:
        acc = _mixed_contraction(
            lhs, q, [lhs_map, codes_map, out_map], _iterators(op, lhs_map.n_dims), list(out_ty.shape), ip
        )
        ident = dim_map(rank, range(rank))

        def rescale(c, sw, o):
            return arith.addf(o, cast_float(arith.mulf(c, sw), out_ty.element_type))

        return generic(
            out_ty,
            [acc, s],
            op.operands[2],
            [ident, dim_map(rank, _scale_dims(plan)), ident],
            ["parallel"] * rank,
            rescale,
            ip,
        )


def _grouped(
    plan: _Plan, x: ir.Value, q: ir.Value, s: ir.Value, group: int, loc: ir.Location, ip: ir.InsertionPoint
) -> ir.Value:
    """The site with per-group scales: K split into [K/g, g] loops, a mixed-type contraction
    sums each group into p[K/g, out…] (the group loop a batch loop, outermost: 2× faster at
    M=32 than after the site's loops), p·scale elementwise (fused into its dispatch), then
    out + Σ_groups, a plain reduction. The sum reads the scaled p through an
    `iree_tensor_ext.compute_barrier.start`: without it IREE fuses the scaling into the sum,
    a multiply-add over the groups that it data-tiles as a second contraction (measured 20×
    slower at M=32); with `math.fma` as its body LLVM gets no vector reduction (scalar: 2.4×
    f32 at M=512, against 1.5×); `util.optimization_barrier` works too but makes the host
    wait between the two dispatches (+50 µs a site at M=1). IREE drops the barrier when it
    forms dispatches."""
    op, site = plan.site.op, plan.site
    lhs_map, _, out_map = _maps(op)
    n = lhs_map.n_dims
    out_ty = ir.RankedTensorType(op.results[0].type)
    rank = out_ty.rank
    kd = plan.k_dims[0]
    k = plan.loops[kd]
    # loops renumbered: kg (the group) first, the site's loops but K after it in order, j (in the group) last
    new = {old: i + 1 for i, old in enumerate(x for x in range(n) if x != k)}
    kg, j = 0, n
    pos = _lhs_position(site, k)
    shape = list(ir.RankedTensorType(x.type).shape)
    lhs = _expand(x, shape[:pos] + [shape[pos] // group, group] + shape[pos + 1 :], pos, loc, ip)
    lhs_loops = [new[ir.AffineDimExpr(e).position] for e in lhs_map.results if ir.AffineDimExpr(e).position != k]
    maps = [
        dim_map(n + 1, [*lhs_loops[:pos], kg, j, *lhs_loops[pos:]]),
        dim_map(n + 1, [*(new[x] for x in plan.loops[:kd]), kg, j, *(new[x] for x in plan.loops[kd + 1 :])]),
        dim_map(n + 1, [kg, *(new[ir.AffineDimExpr(e).position] for e in out_map.results)]),
    ]
    iters = ["parallel"] + [it for x, it in enumerate(_iterators(op, n)) if x != k] + ["reduction"]
    p_shape = [ir.RankedTensorType(q.type).shape[kd], *out_ty.shape]
    f32 = ir.F32Type.get()
    p_ty = ir.RankedTensorType.get(p_shape, f32)
    ident = dim_map(rank + 1, range(rank + 1))
    scale_dims = [d + 1 for d in _scale_dims(plan)]
    scale_dims.insert(kd, 0)  # the scales' group dim: p's dim 0
    with loc:
        p = _mixed_contraction(lhs, q, maps, iters, p_shape, ip)
        scaled = generic(
            p_ty,
            [p, s],
            tensor.EmptyOp(p_shape, f32, ip=ip).result,
            [ident, dim_map(rank + 1, scale_dims), ident],
            ["parallel"] * (rank + 1),
            lambda c, sw, _o: arith.mulf(c, sw),
            ip,
        )
        scaled = iree_tensor_ext.ComputeBarrierStartOp(p_ty, scaled, [], ip=ip).result

        def add(c, o):
            return cast_float(arith.addf(to_f32(o), c), out_ty.element_type)

        return generic(
            out_ty,
            [scaled],
            op.operands[2],
            [dim_map(rank + 1, [rank, *range(rank)]), dim_map(rank + 1, range(rank))],
            ["parallel"] * rank + ["reduction"],
            add,
            ip,
        )


def _mixed_contraction(
    lhs: ir.Value, q: ir.Value, maps: list[ir.AffineMap], iters: list[str], shape: list[int], ip: ir.InsertionPoint
) -> ir.Value:
    """Σ f32(lhs)·sitofp(codes) into a zero-filled f32 tensor of `shape` (f32 also for an
    f16/bf16 site: the unscaled codes' sums reach 127·K·|x|)."""
    f32 = ir.F32Type.get()
    zero = arith.ConstantOp(f32, 0.0, ip=ip)
    empty = tensor.EmptyOp(shape, f32, ip=ip)
    with ip:  # linalg.fill's builder inserts at the innermost insertion point
        init = linalg.fill(zero.result, outs=[empty.result])

    def mac(a, code, acc):
        return arith.addf(acc, arith.mulf(to_f32(a), arith.sitofp(f32, code)))

    return generic(ir.RankedTensorType.get(shape, f32), [lhs, q], init, maps, iters, mac, ip)


def _scale_dims(plan: _Plan) -> list[int]:
    """For each per-channel scale dim (a codes dim not indexed by K: an N or batch loop), the
    result dim its loop indexes."""
    out_loops = [ir.AffineDimExpr(e).position for e in _maps(plan.site.op)[2].results]
    return [out_loops.index(loop) for d, loop in enumerate(plan.loops) if d not in plan.k_dims]


def _w8a8(
    plan: _Plan,
    lhs: ir.Value,
    q: ir.Value,
    s: ir.Value,
    rows: dict,
    static: float | None,
    loc: ir.Location,
    ip: ir.InsertionPoint,
) -> ir.Value:
    """The site as an i8 x i8 -> i32 contraction of the row-quantized lhs with the codes, then
    out + f32(acc)·(amax_x·(1/127))·scale, elementwise (IREE fuses it into the matmul's dispatch);
    `static`: every row's amax_x is that calibrated constant. The result is read through an
    `iree_tensor_ext.compute_barrier.start`: without it IREE 3.13 fuses a consumer that reshapes
    and permutes the output (a key projection split into heads) into the contraction's dispatch
    and then does not data-tile it (MiniLM: 1,090 µs a call against 264 for its q projection);
    measured on MiniLM 8×48, every projection W8A8: 0.99× the f32 build without the barrier,
    1.12–1.31× with it (its other consumers, a bias add or GELU, become their own dispatches)."""
    op, site = plan.site.op, plan.site
    maps = _maps(op)
    n = maps[0].n_dims
    init = op.operands[2]
    lhs_k = operand_dims(site, "lhs")
    key = (lhs, tuple(lhs_k))
    with loc:
        if key not in rows:
            rows[key] = _quantize_rows(lhs, lhs_k, ip, static)
        xq, amax = rows[key]
        i32, f32 = ir.IntegerType.get_signless(32), ir.F32Type.get()
        out_ty = ir.RankedTensorType(op.results[0].type)
        acc_ty = ir.RankedTensorType.get(list(out_ty.shape), i32)
        zero = arith.ConstantOp(i32, 0, ip=ip)
        empty = tensor.EmptyOp(list(out_ty.shape), i32, ip=ip)
        with ip:  # linalg.fill's builder inserts at the innermost insertion point
            acc0 = linalg.fill(zero.result, outs=[empty.result])

        def mac(a, b, c):
            return arith.addi(c, arith.muli(arith.extsi(i32, a), arith.extsi(i32, b)))

        acc = generic(acc_ty, [xq, q], acc0, [maps[0], dim_map(n, plan.loops), maps[2]], _iterators(op, n), mac, ip)
        rank = out_ty.rank
        ident = dim_map(rank, range(rank))
        row_map = dim_map(rank, _row_positions(site, lhs_k))
        scale_map = dim_map(rank, _scale_dims(plan))
        inv_q = 1.0 / qmax(8)
        elem = out_ty.element_type

        def rescale(c, ax, sw, o):
            sx = arith.mulf(ax, arith.constant(f32, inv_q))
            return arith.addf(o, cast_float(arith.mulf(arith.mulf(arith.sitofp(f32, c), sx), sw), elem))

        out = generic(
            out_ty, [acc, amax, s], init, [ident, row_map, scale_map, ident], ["parallel"] * rank, rescale, ip
        )
        return iree_tensor_ext.ComputeBarrierStartOp(out_ty, out, [], ip=ip).result


def _quantize_rows(
    x: ir.Value, k_dims: Sequence[int], ip: ir.InsertionPoint, static: float | None = None
) -> tuple[ir.Value, ir.Value]:
    """(i8 codes of `x`, f32 amax per row: over its dims `k_dims`, or the calibrated `static` for
    every row), with `fakequant-activations`' per-token numerics: round((x·(1/amax))·127) half
    away from zero, clamped to ±127 (a value beyond a static amax clamps). A static scale reads x
    through an `iree_tensor_ext.compute_barrier.start`: without it IREE 3.13 fuses the codes into
    the dispatch of x's producer (a layer norm's reduction) together with data tiling's packing of
    both, and LLVM takes minutes on that dispatch (MiniLM, every projection: >200 s against 11 s)."""
    ty = ir.RankedTensorType(x.type)
    rank = ty.rank
    kept = [d for d in range(rank) if d not in k_dims]
    f32, i8 = ir.F32Type.get(), ir.IntegerType.get_signless(8)
    ident, row_map = dim_map(rank, range(rank)), dim_map(rank, kept)
    zero = arith.ConstantOp(f32, 0.0, ip=ip)
    empty = tensor.EmptyOp([ty.shape[d] for d in kept], f32, ip=ip)
    with ip:
        init = linalg.fill(zero.result, outs=[empty.result])
    amax_ty = ir.RankedTensorType.get([ty.shape[d] for d in kept], f32)
    iters = ["reduction" if d in k_dims else "parallel" for d in range(rank)]
    if static is None:
        amax = generic(
            amax_ty, [x], init, [ident, row_map], iters, lambda v, acc: arith.maximumf(acc, math.absf(to_f32(v))), ip
        )
    else:
        splat = ir.DenseElementsAttr.get_splat(amax_ty, ir.FloatAttr.get(f32, float(np.float32(static))))
        amax = arith.ConstantOp(amax_ty, splat, ip=ip).result
        x = iree_tensor_ext.ComputeBarrierStartOp(x.type, x, [], ip=ip).result
    q = float(qmax(8))

    def codes(v, m, _out):
        zero_, one, tiny, lo, hi = (arith.constant(f32, c) for c in (0.0, 1.0, TINY, -q, q))
        inv = arith.select(arith.cmpf(arith.CmpFPredicate.OGT, m, tiny), arith.divf(one, m), zero_)
        t = arith.mulf(arith.mulf(to_f32(v), inv), hi)
        return arith.fptosi(i8, arith.minimumf(arith.maximumf(math.round(t), lo), hi))

    out = tensor.EmptyOp(list(ty.shape), i8, ip=ip)
    xq = generic(
        ir.RankedTensorType.get(list(ty.shape), i8),
        [x, amax],
        out.result,
        [ident, row_map, ident],
        ["parallel"] * rank,
        codes,
        ip,
    )
    return xq, amax


def _divide_channels(x: ir.Value, inverse: np.ndarray, ip: ir.InsertionPoint) -> ir.Value:
    """x·(1/s) per channel of its last dim, in f32 (SmoothQuant's smoothed activation; IREE fuses
    it into the dispatch that reads it), marked `opscope.smoothing` so a quantized site's taps
    read x (`opscope.ir.dequant_view`)."""
    ty = ir.RankedTensorType(x.type)
    rank, f32 = ty.rank, ir.F32Type.get()
    inv = arith.ConstantOp(
        ir.RankedTensorType.get([len(inverse)], f32), ir.DenseElementsAttr.get(np.ascontiguousarray(inverse)), ip=ip
    ).result
    out = tensor.EmptyOp(list(ty.shape), f32, ip=ip).result
    divided = generic(
        ir.RankedTensorType.get(list(ty.shape), f32),
        [x, inv],
        out,
        [dim_map(rank, range(rank)), dim_map(rank, [rank - 1]), dim_map(rank, range(rank))],
        ["parallel"] * rank,
        lambda v, i, _o: arith.mulf(to_f32(v), i),
        ip,
    )
    owner(divided).attributes[SMOOTHING] = ir.UnitAttr.get()  # the taps read x, not x·(1/s)
    return divided


def _expand(v: ir.Value, shape: list[int], pos: int, loc: ir.Location, ip: ir.InsertionPoint) -> ir.Value:
    """`v` with its dim `pos` split into the two dims shape[pos], shape[pos + 1]."""
    groups = [[d] for d in range(pos)] + [[pos, pos + 1]] + [[d + 1] for d in range(pos + 1, len(shape) - 1)]
    i64 = ir.IntegerType.get_signless(64)
    attr = ir.ArrayAttr.get([ir.ArrayAttr.get([ir.IntegerAttr.get(i64, d) for d in g]) for g in groups])
    ty = ir.RankedTensorType.get(shape, ir.RankedTensorType(v.type).element_type)
    return tensor.ExpandShapeOp(ty, v, attr, [], shape, loc=loc, ip=ip).result


def _erase_unused(ops: Sequence[ir.Operation]) -> None:
    """Erase `ops` in order while nothing reads them (the old copies, then the old weight's
    constant or global load; the global itself stays)."""
    for op in ops:
        if any(len(list(r.uses)) for r in op.results):
            break
        inits = [owner(v) for v in op.operands if isinstance(v, ir.OpResult) and owner(v).name == "tensor.empty"]
        op.erase()
        for empty in inits:  # a copy's destination, now unread
            if not len(list(empty.results[0].uses)):
                empty.erase()
