"""How a contraction site reads its stored weight: the stored tensor, the copies in between, its K and N dims.

The weight rewrites that replace a weight by something built from its values (`factor-weight`,
`sparse-weight`) read it as the matrix W [K, N] of the site's K and N loops: `weight_layout`
finds the stored tensor under the transposes and batch broadcasts an importer put in between
(`opscope.ir.weight_trace.copy_source`) and the stored dim of each K and N loop, so
`values.transpose(layout.order).reshape(K, N)` is W; `drop_unread` erases the copies and the
old load once the rewritten site no longer reads them.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from iree.compiler import ir
from iree.compiler.dialects import linalg

from opscope.ir.const_expr import owner
from opscope.ir.sites import Site, is_convolution, loop_sizes
from opscope.ir.weight_trace import copy_source

log = logging.getLogger("opscope")


@dataclass(frozen=True)
class WeightLayout:
    """How a site reads its stored weight: the stored tensor, the copies from it to the site's
    rhs, the stored dims of the K loops then the N loops (in loop order), every loop's size."""

    weight: ir.Value
    chain: list
    order: tuple[int, ...]
    k_loops: list[int]
    n_loops: list[int]
    sizes: list[int]
    maps: list


def weight_layout(site: Site, verb: str = "rewritten") -> WeightLayout | str:
    """How `site` reads its rhs weight, or why it cannot be read as one matrix W [K, N] (`verb`
    says what the caller does: "a convolution (only matmul-like contractions are factored)")."""
    if is_convolution(site):
        return f"a convolution (only matmul-like contractions are {verb})"
    op = site.op
    maps = [ir.AffineMapAttr(a).value for a in linalg.get_indexing_maps(op)]
    if not all(isinstance(e, ir.AffineDimExpr) for m in maps for e in m.results):
        return "its indexing maps are not plain loop dims"
    dims = linalg.infer_contraction_dimensions(op)
    k_loops, n_loops = sorted(dims.k), sorted(dims.n)
    if not n_loops:
        return "its weight has no N dim (a matrix-vector product)"
    rhs_loops = {pos: ir.AffineDimExpr(e).position for pos, e in enumerate(maps[1].results)}
    kn = {pos: loop for pos, loop in rhs_loops.items() if loop in k_loops + n_loops}
    weight, _, chain = copy_source(op.operands[1], tuple(kn))  # a batch dim must be a broadcast: dropped
    if ir.RankedTensorType(weight.type).rank != len(kn):
        return "its weight has a batch dim (one matrix per batch index), not one matrix broadcast"
    stored_dim = {}
    for pos, loop in kn.items():
        alone, (where,), _ = copy_source(op.operands[1], (pos,))
        if alone != weight:
            return "its weight is broadcast along one of its K or N dims"
        stored_dim[loop] = where
    order = tuple(stored_dim[loop] for loop in k_loops + n_loops)
    sizes = loop_sizes(maps, [*op.operands])
    return WeightLayout(weight, chain, order, k_loops, n_loops, sizes, maps)


def drop_unread(layout: WeightLayout) -> None:
    """Erase the copies that fed a rewritten site its weight, and the weight's load or constant,
    where nothing else reads them (the global itself stays)."""
    for copy in reversed(layout.chain):
        if any(len(list(res.uses)) for res in copy.results):
            break
        dest = copy.operands[1]
        copy.erase()
        if isinstance(dest, ir.OpResult) and owner(dest).name == "tensor.empty" and not len(list(dest.uses)):
            owner(dest).erase()
    if isinstance(layout.weight, ir.OpResult) and not len(list(layout.weight.uses)):
        owner(layout.weight).erase()


def stored_layouts(
    name: str, module, sites: Iterable[Site], layout_of: Callable[[Site], WeightLayout | str | None]
) -> list[tuple[Site, WeightLayout, tuple]]:
    """(site, its layout, (storage key, float32 values as stored)) of each site whose `layout_of` is a
    layout and whose weight `opscope.ir.weights.read_stored` reads; the others are warned of by the
    pass `name` (a layout of None: skipped quietly). Every refusal comes before any rewrite."""
    from opscope.ir.weights import read_stored

    found = []
    for site in sites:
        layout = layout_of(site)
        if isinstance(layout, str):
            log.warning("%s: skipping site '%s' at %s: %s", name, site.name, site.location, layout)
        elif layout is not None:
            found.append((site, layout))
    out = []
    for (site, layout), read in zip(
        found, read_stored(module, [lay.weight for _, lay in found], [s.name for s, _ in found])
    ):
        if isinstance(read, str):
            log.warning("%s: skipping site '%s' at %s: %s", name, site.name, site.location, read)
        else:
            out.append((site, layout, read))
    return out
