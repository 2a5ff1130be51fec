"""`skip-zero-channels`: drop K slices a site's lhs always has all-zero, behind a run-time guard.

For every matmul site `sites` names (a contraction with one K dim in each operand, the way
`fakequant-weights` selects sites), the K indices listed in `channels` (the lhs channels a
profile recorded all-zero in every step: digits' border pixels, padded keys, dead ReLU
units) are sliced out of both operands: the lhs keeps its other K columns, the rhs the
matching K rows (a constant weight's slice is a constant expression IREE folds at compile
time; a weight passed as an argument is sliced on every call, inside the guarded branch).
The guard reads the skipped columns of the lhs at run time: when every one is zero (±0;
a NaN fails it) the sliced contraction runs, otherwise the original dense one, so the
result is the dense op's either way. On llvm-cpu each output accumulates its K terms in
order, so dropping exact-zero terms leaves every bit unchanged (measured, tested); a target
that splits K across lanes may round differently, which `opscope parity` measures.

    %0 = linalg.matmul ins(%x, %w : tensor<64x64xf32>, tensor<64x64xf32>) outs(%z : ...) loc("fc1")
  becomes
    %s = linalg.generic {gather} ins(%skip_idx : tensor<10xi32>) outs(...) -> tensor<64x10xf32>   // x[:, skipped]
    %m = linalg.generic {max |s|} ... -> tensor<f32>
    %ok = arith.cmpf oeq, (tensor.extract %m[]), 0.0
    %0 = scf.if %ok -> (tensor<64x64xf32>) {
      %xk = linalg.generic {gather} ins(%keep_idx : tensor<54xi32>) ...                          // x[:, kept]
      %wk = linalg.generic {gather} ins(%keep_idx : tensor<54xi32>) ...                          // w[kept, :]
      %r = linalg.matmul ins(%xk, %wk : tensor<64x54xf32>, tensor<54x64xf32>) outs(%z : ...) loc("fc1")
      scf.yield %r
    } else {
      %r = linalg.matmul ins(%x, %w : ...) outs(%z : ...) loc("fc1.dense")
      scf.yield %r
    }

`guard=false` drops the check (the dense branch folds away): only for inputs known to hold
zeros there; `opscope plan` builds it to price the guard apart from the slicing.

`channels` is comma-separated indices and inclusive ranges (`0,7-9,56`); an index at or
past K, or an empty list, is refused before anything is rewritten. Skipping every channel
leaves the guarded branch yielding the init (the product of nothing). A site that would keep
one K channel keeps one skipped channel too (zero wherever the sliced branch runs, so the
result is the same): IREE 3.13 cannot data-tile a one-K matmul of one row whose lhs is
computed (here gathered), and `opscope.run.compile` would then build the whole model without
data tiling (found by the generated-model tests, `tests/test_generated_models.py`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import ClassVar

import numpy as np
from iree.compiler import ir
from iree.compiler.dialects import arith, linalg, math, scf, tensor

from opscope.errors import OpscopeError
from opscope.ir.build import dim_map, generic, to_f32
from opscope.ir.const_expr import is_weight
from opscope.ir.site_select import select_sites
from opscope.ir.sites import Site, is_convolution, operand_dims

log = logging.getLogger("opscope")

DENSE_SUFFIX = ".dense"  # the fallback op's name: `<site>.dense`


def parse_channels(pass_name: str, text: str) -> tuple[int, ...]:
    """`0,7-9,56` → (0, 7, 8, 9, 56), sorted and unique; a one-line error for anything else."""
    found: set[int] = set()
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        lo, sep, hi = part.partition("-")
        try:
            first, last = (int(lo), int(hi)) if sep else (int(lo), int(lo))
        except ValueError:
            raise OpscopeError(
                f"{pass_name}: option 'channels' expects indices and ranges like '0,7-9,56', got '{part}'"
            ) from None
        if first < 0 or last < first:
            raise OpscopeError(f"{pass_name}: option 'channels': '{part}' is not an index >= 0 or a range lo-hi")
        found.update(range(first, last + 1))
    if not found:
        raise OpscopeError(
            f"{pass_name}: option 'channels' is empty: name the lhs K indices to skip, "
            "e.g. channels=0,7-9 (`opscope plan RUN` finds them in a profile)"
        )
    return tuple(sorted(found))


def format_channels(channels) -> str:
    """The shortest `channels` text for a set of indices: runs of three or more as ranges."""
    idx = sorted(set(int(c) for c in channels))
    parts, i = [], 0
    while i < len(idx):
        j = i
        while j + 1 < len(idx) and idx[j + 1] == idx[j] + 1:
            j += 1
        parts.append(f"{idx[i]}-{idx[j]}" if j - i >= 2 else ",".join(str(v) for v in idx[i : j + 1]))
        i = j + 1
    return ",".join(parts)


@dataclass(frozen=True)
class SkipZeroChannels:
    """Slice the listed all-zero lhs K channels (and the weight's rows) out of each named site, guarded."""

    name: ClassVar[str] = "skip-zero-channels"

    sites: str = ""
    channels: str = ""
    guard: bool = True
    keep: Callable[[Site], bool] | None = field(default=None, compare=False, metadata={"api_only": True})

    def plan(self, site: Site, skip: tuple[int, ...]) -> tuple[int, int] | str:
        """(lhs K dim, rhs K dim) or why `site` is skipped; raises when a channel is past K."""
        if is_convolution(site):
            return "a convolution (only contractions are sliced)"
        dims = operand_dims(site, "lhs"), operand_dims(site, "rhs")
        if any(d is None or len(d) != 1 for d in dims):
            return "its operands do not have exactly one K dim each"
        k = site.shape("lhs")[dims[0][0]]
        if skip[-1] >= k:
            raise OpscopeError(
                f"{self.name}: site '{site.name}' at {site.location}: channel {skip[-1]} is past its "
                f"K = {k}; channels index the lhs's K dim (0..{k - 1})"
            )
        return dims[0][0], dims[1][0]

    def apply(self, module) -> None:
        skip = parse_channels(self.name, self.channels)
        plans = []
        for site in select_sites(self.name, module, self.sites, self.keep):
            plan = self.plan(site, skip)  # every refusal before the first rewrite
            if isinstance(plan, str):
                log.warning("%s: skipping site '%s' at %s: %s", self.name, site.name, site.location, plan)
            else:
                plans.append((site, plan))
        for site, (lhs_dim, rhs_dim) in plans:
            _guard(site, skip, lhs_dim, rhs_dim, self.guard)
            log.info(
                "%s: site '%s' skips %d of %d K channels behind a guard",
                self.name,
                site.name,
                len(skip),
                site.shape("lhs")[lhs_dim],
            )
        if not plans:
            log.warning("%s: no matmul site to slice in this module", self.name)


def _guard(site: Site, skip: tuple[int, ...], lhs_dim: int, rhs_dim: int, guarded: bool = True) -> None:
    """Replace `site`'s op by `scf.if (skipped lhs columns all zero) {sliced op} else {op}`
    (`guarded=False`: by the sliced op alone)."""
    op = site.op
    lhs, rhs, init = op.operands[0], op.operands[1], op.operands[2]
    k = ir.RankedTensorType(lhs.type).shape[lhs_dim]
    kept = tuple(i for i in range(k) if i not in set(skip))
    if len(kept) == 1:  # IREE 3.13 cannot data-tile a one-K, one-row matmul of a computed lhs (the whole
        # model would be built untiled): one skipped channel, zero wherever the sliced branch runs, stays in
        kept = tuple(sorted(kept + skip[:1]))
    loc = op.location
    ip = ir.InsertionPoint(op)
    with loc:
        f32 = ir.F32Type.get()
        zero = arith.ConstantOp(f32, 0.0, ip=ip).result
        skip_at, kept_at = _indices(skip, ip), (_indices(kept, ip) if kept else None)
        if guarded:
            ok = arith.CmpFOp(
                arith.CmpFPredicate.OEQ, _max_abs(_gather(lhs, lhs_dim, skip_at, ip), zero, ip), zero, ip=ip
            ).result
        rhs_kept = _gather(rhs, rhs_dim, kept_at, ip) if kept and is_weight(rhs) else None  # folded at compile time
        if not guarded:
            ok = arith.ConstantOp(ir.IntegerType.get_signless(1), 1, ip=ip).result
        branch = scf.IfOp(ok, [op.results[0].type], has_else=True, ip=ip)
    with loc, ir.InsertionPoint(branch.then_block) as then_ip:
        if kept:
            lhs_kept = _gather(lhs, lhs_dim, kept_at, then_ip)
            if rhs_kept is None:
                rhs_kept = _gather(rhs, rhs_dim, kept_at, then_ip)
            sliced = op.clone(ip=then_ip)
            sliced.operands[0], sliced.operands[1] = lhs_kept, rhs_kept
            scf.YieldOp([sliced.results[0]], ip=then_ip)
        else:
            scf.YieldOp([init], ip=then_ip)
    with loc, ir.InsertionPoint(branch.else_block) as else_ip:
        dense = op.clone(ip=else_ip)
        dense.location = ir.Location.name(f"{site.name}{DENSE_SUFFIX}", childLoc=loc)
        scf.YieldOp([dense.results[0]], ip=else_ip)
    op.results[0].replace_all_uses_with(branch.results[0])
    op.erase()


def _indices(index: tuple[int, ...], ip: ir.InsertionPoint) -> ir.Value:
    """A constant i32 tensor holding `index` (i32: SPIR-V targets have no 64-bit integers)."""
    ty = ir.RankedTensorType.get([len(index)], ir.IntegerType.get_signless(32))
    return arith.ConstantOp(ty, ir.DenseElementsAttr.get(np.asarray(index, dtype=np.int32), type=ty), ip=ip).result


def _gather(src: ir.Value, dim: int, index: ir.Value, ip: ir.InsertionPoint) -> ir.Value:
    """`src` with only the positions `index` (a constant i32 vector) of dim `dim`, in order: a gather generic."""
    ty = ir.RankedTensorType(src.type)
    shape = list(ty.shape)
    shape[dim] = ir.RankedTensorType(index.type).shape[0]
    rank = ty.rank

    def body(i, _out):
        at = [linalg.IndexOp(d).result for d in range(rank)]
        at[dim] = arith.IndexCastOp(ir.IndexType.get(), i).result
        return tensor.ExtractOp(src, at).result

    empty = tensor.EmptyOp(shape, ty.element_type, ip=ip)
    return generic(
        ir.RankedTensorType.get(shape, ty.element_type),
        [index],
        empty.result,
        [dim_map(rank, [dim]), dim_map(rank, range(rank))],
        ["parallel"] * rank,
        body,
        ip,
    )


def _max_abs(src: ir.Value, zero: ir.Value, ip: ir.InsertionPoint) -> ir.Value:
    """max |x| over all of `src`, as an f32 scalar (NaN if any element is NaN); `zero` is 0.0 : f32."""
    rank = ir.RankedTensorType(src.type).rank
    f32 = ir.F32Type.get()
    with ip:  # linalg.fill's builder ignores ip=: it inserts at the innermost insertion point
        init = linalg.fill(zero, outs=[tensor.EmptyOp([], f32).result])
    red = generic(
        ir.RankedTensorType.get([], f32),
        [src],
        init,
        [dim_map(rank, range(rank)), dim_map(rank, [])],
        ["reduction"] * rank,
        lambda v, acc: arith.maximumf(acc, math.absf(to_f32(v))),
        ip,
    )
    return tensor.ExtractOp(red, [], ip=ip).result
