"""A contraction with its operands swapped, so a weight on the lhs (W @ x) is read as the rhs.

The weight rewrites (`quantize-weight`, `factor-weight`) build their new contractions around an
activation lhs and a weight rhs. A site whose weight is its lhs (`weight_source.lhs_weight`: JAX's
`jnp.dot(W, x)`, an einsum exported weight first) is rewritten through its commuted form: a
`linalg.generic` reading (x, W) with the two indexing maps swapped and its body cloned with the two
block arguments swapped. The product is the same: multiplication commutes and the K sum is the
contraction's either way; the site keeps its location, so its name survives.

    %0 = linalg.matmul ins(%w, %x : tensor<4x8xf32>, tensor<8x3xf32>) outs(%c : tensor<4x3xf32>) loc("fc")
is read as
    %0 = linalg.generic {indexing_maps = [(m, n, k) -> (k, n), (m, n, k) -> (m, k), (m, n, k) -> (m, n)],
                         iterator_types = ["parallel", "parallel", "reduction"]}
        ins(%x, %w : tensor<8x3xf32>, tensor<4x8xf32>) outs(%c : tensor<4x3xf32>) {…} loc("fc")

`Commutes` builds such a copy beside each site that needs it without wiring it in; a rewrite plans
on the copy, `adopt`s the ones it rewrites, and on leaving the `with` block the copies not adopted
are erased: a skipped site, or a refusal raised halfway, leaves the module as it was.
"""

from __future__ import annotations

from iree.compiler import ir
from iree.compiler.dialects import linalg

from opscope.ir.build import regeneric
from opscope.ir.sites import Site, classify
from opscope.ir.weight_source import lhs_weight


def commuted(site: Site) -> Site:
    """`site`'s op as a `linalg.generic` with its two inputs swapped, built just before it and read
    by nothing yet (the original untouched); the returned site keeps `site`'s name."""
    op = site.op
    maps = [ir.AffineMapAttr(a).value for a in linalg.get_indexing_maps(op)]
    k_loops = set(linalg.infer_contraction_dimensions(op).k)
    iters = ["reduction" if d in k_loops else "parallel" for d in range(maps[0].n_dims)]
    new = regeneric(op, [maps[1], maps[0], maps[2]], iters, order=(1, 0))
    kind, values, b, m, k, n, dynamic, channels = classify(new)
    return Site(site.name, kind, new, values, b, m, k, n, dynamic, channels)


class Commutes:
    """Commuted copies of the W @ x sites a rewrite looks at (`view`), wired in only where it
    rewrites them (`adopt`); the rest are erased when the `with` block ends, also on an error."""

    def __init__(self) -> None:
        self._built: list[tuple[Site, Site]] = []  # (copy, original), not adopted yet

    def __enter__(self) -> Commutes:
        return self

    def __exit__(self, *exc) -> None:
        for copy, _ in self._built:
            copy.op.erase()
        self._built.clear()

    def view(self, site: Site) -> Site:
        """`site` itself, or its commuted copy where its weight is the lhs (`lhs_weight`)."""
        if not lhs_weight(site):
            return site
        copy = commuted(site)
        self._built.append((copy, site))
        return copy

    def adopt(self, site: Site) -> None:
        """Wire `site` in where it is a copy `view` made: the original's readers read it, the original goes."""
        for at, (copy, original) in enumerate(self._built):
            if copy.op == site.op:
                original.op.results[0].replace_all_uses_with(copy.op.results[0])
                original.op.erase()
                del self._built[at]
                return
