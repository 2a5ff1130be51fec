"""`sparse-weight`: store a mostly-zero constant weight by output channel and skip its zeros.

Matches every float, static-shaped linalg contraction site (`opscope.ir.sites`) whose name
`sites` finds (and, from Python, `keep` accepts) and whose rhs is a stored weight read as one
matrix W [K, N] of one K loop and one N loop (`opscope.ir.weight_layout`: under the transposes
and batch broadcasts an importer put in between). W is stored the ELLPACK way, by output
channel: for each of its N columns the K indices of its nonzeros and their values, padded to
the longest column's count L with index 0 and value 0 (`idx` i32 [N, L], `val` [N, L] in the
weight's element type, `dense` constants: IREE 3.13 fails to codegen a bf16 `dense_resource` read
inside the dispatch, `opscope.ir.weights.elements_attr`); the site becomes one `linalg.generic` over
its own loops without K plus a reduction loop l, reading its lhs at `idx[n, l]`
(`tensor.extract`: a gather) and multiplying by `val[n, l]`. It costs L/K of the dense
product's multiply-adds and reads (4 + element bytes)·N·L weight bytes instead of
element bytes·K·N. A site is rewritten only where L/K (the padded density) is at most `density`
(default 0.5, the reference's sparse-GEMM trigger; 1 rewrites every weight it can read), else a
warning.

    %w = arith.constant dense<...> : tensor<64x256xf32>          // 90 % zeros, at most 14 per column
    %0 = linalg.matmul ins(%x, %w : tensor<32x64xf32>, tensor<64x256xf32>) outs(%c : ...) loc("fc")
  becomes
    %idx = arith.constant dense<...> : tensor<256x14xi32>
    %val = arith.constant dense<...> : tensor<256x14xf32>
    %0 = linalg.generic {(m, n, l): (n, l), (n, l) -> (m, n); parallel, parallel, reduction}
           ins(%idx, %val) outs(%c) { acc + x[m, idx] · val } loc("fc")

The sum runs over the nonzero terms in K order, so the result differs from the dense
product's only by rounding (`opscope plan` measures it: relative error ~1e-7), and where the
lhs holds inf or NaN at a K index whose weight is 0 (the dense product's 0·inf is NaN; the
skipped term is not computed). Measured on this project's CPU (llvm-cpu, f32, 90 % zeros,
docs/rewrites.md): IREE codegens the gather element by element, so the form loses to the
dense matmul 4–5× where the matmul is compute-bound (32×64×256: 0.19×; 128×1024×1024: 0.21×)
and wins only where it is bound by the weight's bytes (one row against a 4096×4096 weight:
2.8×). `opscope plan` proposes it below the density trigger and keeps it only where it measures
faster.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import ClassVar

import numpy as np
from iree.compiler import ir
from iree.compiler.dialects import arith, linalg, tensor

from opscope.errors import OpscopeError
from opscope.ir.build import cast_float, dim_map, generic
from opscope.ir.const_expr import memoized
from opscope.ir.site_select import select_sites
from opscope.ir.sites import Site
from opscope.ir.weight_layout import WeightLayout, drop_unread, stored_layouts, weight_layout
from opscope.ir.weight_source import rhs_source
from opscope.ir.weights import elements_attr

log = logging.getLogger("opscope")

DENSITY = 0.5  # the reference's sparse-GEMM trigger: at most half of the weight nonzero


def ellpack(w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(idx i32 [N, L], val [N, L]) of W [K, N] by output channel: column n's nonzero K indices in
    order and their values, padded with index 0 and value 0 to L, the longest column's count (≥ 1)."""
    nonzero = w != 0
    width = max(int(nonzero.sum(axis=0).max(initial=0)), 1)
    idx = np.zeros((w.shape[1], width), np.int32)
    val = np.zeros((w.shape[1], width), np.float32)
    for n in range(w.shape[1]):
        k = np.flatnonzero(nonzero[:, n])
        idx[n, : len(k)], val[n, : len(k)] = k, w[k, n]
    return idx, val


@dataclass(frozen=True)
class SparseWeight:
    """Store each named site's mostly-zero constant weight by output channel (ELLPACK) and skip its zeros."""

    name: ClassVar[str] = "sparse-weight"

    sites: str = ""
    density: float = DENSITY
    keep: Callable[[Site], bool] | None = field(default=None, compare=False, metadata={"api_only": True})

    def apply(self, module) -> None:
        if not 0.0 < self.density <= 1.0:
            raise OpscopeError(
                f"{self.name}: option 'density' expects a fraction in (0, 1] (rewrite a weight whose "
                f"fullest output channel holds at most density·K nonzeros), got {self.density}"
            )
        with memoized():
            plans, packed = [], {}
            sites = select_sites(self.name, module, self.sites, self.keep)
            for site, layout, read in stored_layouts(self.name, module, sites, self.layout):
                key = (read[0], layout.order)  # a tied weight read the same way: packed once
                if key not in packed:
                    packed[key] = ellpack(read[1].transpose(layout.order).reshape(site.k, site.n))
                idx, val = packed[key]
                padded = idx.shape[1] / site.k
                if padded > self.density:
                    log.warning(
                        "%s: skipping site '%s' at %s: its fullest output channel holds %d of %d K "
                        "weights (%.0f %%), above density=%g",
                        *(self.name, site.name, site.location, idx.shape[1], site.k, 100 * padded, self.density),
                    )
                    continue
                plans.append((site, layout, idx, val))
        for site, layout, idx, val in plans:
            _rewrite(site, layout, idx, val)
            log.info(
                "%s: site '%s' reads %d of %d K weights per output channel (%d nonzero of %d)",
                *(self.name, site.name, idx.shape[1], site.k, int(np.count_nonzero(val)), site.k * site.n),
            )
        if not plans:
            log.warning("%s: no matmul site of this module has a constant weight sparse enough", self.name)

    def layout(self, site: Site) -> WeightLayout | str | None:
        """How `site` reads its weight, or why it is skipped (a warning), or None (skipped quietly:
        a rhs that is no stored weight under the default `sites`; one that `sites` names raises)."""
        source = rhs_source(site)
        if source != "constant":
            if self.sites:
                raise OpscopeError(
                    f"{self.name}: site '{site.name}' at {site.location}: its rhs is {source}, not a "
                    f"constant weight; narrow sites='{self.sites}' to sites with a stored weight"
                )
            log.info("%s: skipping site '%s': its rhs is %s, not a constant weight", self.name, site.name, source)
            return None
        layout = weight_layout(site, "stored sparse")
        if isinstance(layout, str):
            return layout
        if len(layout.k_loops) != 1 or len(layout.n_loops) != 1:
            return "its weight spans more than one K or N loop"
        return layout


def _rewrite(site: Site, layout: WeightLayout, idx: np.ndarray, val: np.ndarray) -> None:
    """Replace `site` by the gather-and-reduce generic over (its loops without K, l), then erase the
    weight's copies and load where nothing else reads them."""
    op = site.op
    lhs, init = op.operands[0], op.operands[2]
    (k_loop,), (n_loop,) = layout.k_loops, layout.n_loops
    loops = [d for d in range(len(layout.sizes)) if d != k_loop]
    new = {d: i for i, d in enumerate(loops)}
    n_dims, l_dim = len(loops) + 1, len(loops)
    lhs_map, _, out_map = layout.maps
    lhs_dims = [ir.AffineDimExpr(e).position for e in lhs_map.results]
    acc = ir.RankedTensorType(init.type).element_type
    elem = ir.RankedTensorType(layout.weight.type).element_type
    ip = ir.InsertionPoint(op)
    with op.location:
        idx_ty = ir.RankedTensorType.get(list(idx.shape), ir.IntegerType.get_signless(32))
        idx_value = arith.ConstantOp(idx_ty, ir.DenseElementsAttr.get(idx, type=idx_ty), ip=ip).result
        val_ty = ir.RankedTensorType.get(list(val.shape), elem)
        val_value = arith.ConstantOp(val_ty, elements_attr(val, val_ty), ip=ip).result  # read in the dispatch

        def body(k, v, sum_):
            at = [
                arith.IndexCastOp(ir.IndexType.get(), k).result if d == k_loop else linalg.IndexOp(new[d]).result
                for d in lhs_dims
            ]
            x = tensor.ExtractOp(lhs, at).result
            return arith.addf(sum_, arith.mulf(cast_float(x, acc), cast_float(v, acc)))

        channel = dim_map(n_dims, [new[n_loop], l_dim])
        result = generic(
            init.type,
            [idx_value, val_value],
            init,
            [channel, channel, dim_map(n_dims, [new[ir.AffineDimExpr(e).position] for e in out_map.results])],
            ["parallel"] * len(loops) + ["reduction"],
            body,
            ip,
        )
    op.results[0].replace_all_uses_with(result)
    op.erase()
    drop_unread(layout)
