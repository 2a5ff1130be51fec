"""`factor-weight`: replace a matmul's constant weight by two rank-r factors, W ≈ U·V.

Matches every float, static-shaped linalg contraction site (`opscope.ir.sites`) in a
function's entry block whose name `sites` finds (and, from Python, `keep` accepts) and whose
rhs is a stored weight (an `arith.constant` or immutable `util.global` holding `dense<…>` or
`dense_resource<…>`, under the transposes and batch broadcasts an importer put in between:
`copy_source`), or whose lhs is where the rhs is computed (W @ x, factored as x ×_K W:
`opscope.ir.commute`), read as the matrix W [K, N] of the site's K and N loops. `out = lhs ×_K W`
becomes `t = lhs ×_K U` (located `<site>.u`) and `out = t ×_r V` (the site's own location,
so its name survives), U [K, r] = P·√S and V [r, N] = √S·Qᵀ from the truncated SVD W ≈ P·S·Qᵀ
(the singular values split evenly, so neither factor's scale dwarfs the other's in bf16/f16):
new `dense_resource` constants in the weight's element type (`opscope.ir.weights`'s blob
writer). `rank=0` keeps the smallest r holding `energy` of ‖W‖²_F. A site is rewritten only
where FLOPs drop, r·(K+N) < K·N (else a warning); results keep their indices and types.

    %w = arith.constant dense<...> : tensor<8x6xf32>
    %0 = linalg.matmul ins(%x, %w : tensor<3x8xf32>, tensor<8x6xf32>) outs(%c : tensor<3x6xf32>) loc("fc")
becomes, with rank=2,
    %u = arith.constant dense_resource<opscope.fc.u> : tensor<8x2xf32>
    %t = linalg.matmul ins(%x, %u : tensor<3x8xf32>, tensor<8x2xf32>) outs(%zeros : tensor<3x2xf32>) loc("fc.u"(...))
    %v = arith.constant dense_resource<opscope.fc.v> : tensor<2x6xf32>
    %0 = linalg.matmul ins(%t, %v : tensor<3x2xf32>, tensor<2x6xf32>) outs(%c : tensor<3x6xf32>) loc("fc")
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
from opscope.ir.commute import Commutes
from opscope.ir.const_expr import memoized
from opscope.ir.site_select import select_sites
from opscope.ir.sites import Site
from opscope.ir.weight_layout import WeightLayout, drop_unread, stored_layouts, weight_layout
from opscope.ir.weight_source import rhs_source
from opscope.ir.weights import resource_attr

log = logging.getLogger("opscope")


@dataclass(frozen=True)
class FactorWeight:
    """Replace each matmul site's constant weight W [K, N] by two contractions with its rank-r factors U·V."""

    name: ClassVar[str] = "factor-weight"

    rank: int = 0
    energy: float = 0.99
    sites: str = ""
    keep: Callable[[Site], bool] | None = field(default=None, compare=False, metadata={"api_only": True})

    def __post_init__(self) -> None:
        """Refuse a negative rank (`energy` is checked when the pass runs: only rank=0 reads it)."""
        if self.rank < 0:
            raise OpscopeError(
                f"{self.name}: option 'rank' expects an integer >= 0 (0: the smallest rank keeping "
                f"'energy' of the weight), got {self.rank}"
            )

    def apply(self, module) -> None:
        if not self.rank and not 0.0 < self.energy <= 1.0:
            raise OpscopeError(
                f"{self.name}: option 'energy' expects a fraction in (0, 1] of the weight's squared "
                f"Frobenius norm, got {self.energy}"
            )
        with memoized(), Commutes() as commutes:
            # a W @ x is factored as x ×_K W (`opscope.ir.commute`)
            views = (commutes.view(s) for s in select_sites(self.name, module, self.sites, self.keep))
            plans, factored = [], {}
            for site, layout, read in stored_layouts(self.name, module, views, self.layout):
                key = (read[0], layout.order, len(layout.k_loops))  # a tied weight read the same way: factored once
                if key not in factored:
                    factored[key] = self.factors(read[1].transpose(layout.order).reshape(site.k, site.n))
                why = _no_gain(factored[key][0].shape[1], site)
                if why:
                    log.warning("%s: skipping site '%s' at %s: %s", self.name, site.name, site.location, why)
                    continue
                plans.append((site, layout, key))
                commutes.adopt(site)
        constants: dict[tuple, tuple[ir.Value, ir.Value]] = {}
        for site, layout, key in plans:
            func = site.op.parent
            if (key, func) not in constants:  # one pair per function, before its first reader
                constants[(key, func)] = _constants(site, layout, *factored[key])
            _rewrite(site, layout, *constants[(key, func)])
        if not plans:
            log.warning("%s: no matmul site of this module has a constant weight worth factoring", self.name)

    def layout(self, site: Site) -> WeightLayout | str | None:
        """How `site` reads its weight (`WeightLayout`), or why it is skipped (a warning), or None
        (skipped quietly: a computed rhs under the default `sites`). Raises for a rank that
        does not fit the weight and for a site `sites` names whose rhs is no constant."""
        source = rhs_source(site)
        if source != "constant":
            why = {
                "argument": "a function argument",
                "gathered": "gathered per token from a MoE's expert bank",
            }.get(source, "computed (an activation, as attention's k in q·kᵀ)")
            if self.sites:
                raise OpscopeError(
                    f"{self.name}: site '{site.name}' at {site.location}: its rhs is {why}, not a "
                    f"constant weight; narrow sites='{self.sites}' to sites with a stored weight"
                )
            (log.warning if source == "gathered" else log.info)(
                "%s: skipping site '%s': its rhs is %s, not a constant weight", self.name, site.name, why
            )
            return None
        layout = weight_layout(site, "factored")
        if isinstance(layout, str):
            return layout
        if self.rank > min(site.k, site.n):
            raise OpscopeError(
                f"{self.name}: site '{site.name}' at {site.location}: rank {self.rank} exceeds the "
                f"weight's {site.k}×{site.n} matrix; choose rank < min(K,N) = {min(site.k, site.n)}"
            )
        return (self.rank and _no_gain(self.rank, site)) or layout  # known before reading the weight

    def factors(self, w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(U [K, r], V [r, N]) float32 with U·V the best rank-r approximation of `w` [K, N]
        (Eckart–Young), the singular values split evenly; r is `rank`, or with rank=0 the
        smallest keeping `energy` of Σσ² (at least 1). numpy's full SVD, not `opscope.probe.svd`
        (a later room): rank reveal needs the whole spectrum, and U·V has no sign convention."""
        p, s, qt = np.linalg.svd(np.asarray(w, np.float64), full_matrices=False)
        if self.rank:
            r = self.rank
        else:
            kept = np.cumsum(np.square(s))
            total = kept[-1]
            r = 1 if total <= 0 else int(np.searchsorted(kept, self.energy * total * (1 - 1e-12))) + 1
        root = np.sqrt(s[:r])
        return (
            np.ascontiguousarray(p[:, :r] * root, np.float32),
            np.ascontiguousarray(root[:, None] * qt[:r], np.float32),
        )


def _no_gain(r: int, site: Site) -> str | None:
    """Why rank `r` does not pay at `site` (two contractions cost r·(K+N) per output row, W costs K·N), or None."""
    k, n = site.k, site.n
    if r * (k + n) < k * n:
        return None
    return f"rank {r} saves no FLOPs on its {k}×{n} weight (r·(K+N) = {r * (k + n)} >= K·N = {k * n})"


def _constants(site: Site, layout: WeightLayout, u: np.ndarray, v: np.ndarray) -> tuple[ir.Value, ir.Value]:
    """U [k sizes…, r] and V [r, n sizes…] as dense_resource constants in the weight's element type, before `site`."""
    elem = ir.RankedTensorType(layout.weight.type).element_type
    r = u.shape[1]
    ip = ir.InsertionPoint(site.op)
    out = []
    for suffix, values, shape in (
        ("u", u, [*(layout.sizes[d] for d in layout.k_loops), r]),
        ("v", v, [r, *(layout.sizes[d] for d in layout.n_loops)]),
    ):
        with _name_loc(site, suffix):
            ty = ir.RankedTensorType.get(shape, elem)
            attr = resource_attr(values.reshape(shape), ty, f"{site.name}.{suffix}")
            out.append(arith.ConstantOp(ty, attr, ip=ip).result)
    return out[0], out[1]


def _name_loc(site: Site, suffix: str) -> ir.Location:
    return ir.Location.name(f"{site.name}.{suffix}", childLoc=site.op.location)


def _rewrite(site: Site, layout: WeightLayout, u: ir.Value, v: ir.Value) -> None:
    """Replace `site` by `t = lhs ×_K u` and `out = t ×_r v`, then erase it, the copies that
    fed it its weight and the weight's load or constant where nothing else reads them."""
    op = site.op
    lhs, init = op.operands[0], op.operands[2]
    ip = ir.InsertionPoint(op)
    acc = ir.RankedTensorType(op.results[0].type).element_type
    r = ir.RankedTensorType(u.type).shape[-1]
    rows = [d for d in range(len(layout.sizes)) if d not in layout.k_loops and d not in layout.n_loops]
    with _name_loc(site, "u"), ip:  # linalg.fill's builder ignores ip=: it inserts at the innermost one
        zero = arith.ConstantOp(acc, 0.0).result
        t_init = linalg.fill(zero, outs=[tensor.EmptyOp([*(layout.sizes[d] for d in rows), r], acc).result])
        if _plain_matmul(op, layout):
            t = linalg.matmul(lhs, u, outs=[t_init])
        else:
            t = _contraction(layout, lhs, u, t_init, drop=layout.n_loops, rows=rows, first=True)
    with op.location, ip:
        if _plain_matmul(op, layout):
            new = linalg.matmul(t, v, outs=[init])
        else:
            new = _contraction(layout, t, v, init, drop=layout.k_loops, rows=rows, first=False)
    op.results[0].replace_all_uses_with(new)
    op.erase()
    drop_unread(layout)


def _plain_matmul(op: ir.Operation, layout: WeightLayout) -> bool:
    """A `linalg.matmul` whose lhs is [M, K] and out [M, N]: both contractions stay named matmuls."""
    if op.name != "linalg.matmul":
        return False
    lhs, _, out = ([ir.AffineDimExpr(e).position for e in m.results] for m in layout.maps)
    m_loop = [d for d in range(3) if d not in layout.k_loops + layout.n_loops]
    return lhs == m_loop + layout.k_loops and out == m_loop + layout.n_loops


def _contraction(
    layout: WeightLayout, a: ir.Value, b: ir.Value, init: ir.Value, *, drop: list[int], rows: list[int], first: bool
) -> ir.Value:
    """One `linalg.generic` contraction over the site's loops without `drop`, plus a loop r.
    first: lhs (its own map) ×_K u [K…, r] → t [rows…, r]; else t ×_r v [r, N…] → out (its own map)."""
    loops = [d for d in range(len(layout.sizes)) if d not in drop]
    new = {d: i for i, d in enumerate(loops)}
    n, r = len(loops) + 1, len(loops)

    lhs_map, _, out_map = layout.maps
    t_map = dim_map(n, [*(new[d] for d in rows), r])
    if first:
        maps = [
            dim_map(n, [new[ir.AffineDimExpr(e).position] for e in lhs_map.results]),
            dim_map(n, [*(new[d] for d in layout.k_loops), r]),
            t_map,
        ]
        iters = ["reduction" if d in layout.k_loops else "parallel" for d in loops] + ["parallel"]
    else:
        maps = [
            t_map,
            dim_map(n, [r, *(new[d] for d in layout.n_loops)]),
            dim_map(n, [new[ir.AffineDimExpr(e).position] for e in out_map.results]),
        ]
        iters = ["parallel"] * len(loops) + ["reduction"]
    acc = ir.RankedTensorType(init.type).element_type
    return generic(
        init.type,
        [a, b],
        init,
        maps,
        iters,
        lambda x, y, sum_: arith.addf(sum_, arith.mulf(cast_float(x, acc), cast_float(y, acc))),
    )
