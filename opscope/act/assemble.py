"""The plan's accepted rewrites assembled into one model that stays within a quality budget, end to end.

Each site's rewrite was judged alone, on the site's own output (`opscope.act.specialize`); what
a user ships is judged by the whole model's outputs on held-out data (`opscope.act.evalset`,
`opscope.act.quality`). Exact rewrites (bit-identical) always go in. The lossy ones are ordered
by the error they cost their own site, smallest first (mixed precision: the sites that lose
most stay f32), and the longest prefix of that order whose build passes every gate
(`opscope.act.quality_gate`) is kept: the whole order is built first, then a bisection
(log2 n builds) under the assumption that adding a rewrite never improves quality.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np


@dataclass(frozen=True)
class Assembled:
    """The rewrites kept, the end-to-end quality of their build, what stayed out and why."""

    kept: tuple  # Candidates, exact first, then lossy in order of their site error
    metrics: dict[str, float]
    own: dict[str, float]  # the original build's own metrics (its perplexity)
    gates: tuple  # Gates
    passed: bool  # the kept build passes every gate (False: no lossy rewrite could, exact ones only)
    left_out: tuple[tuple[str, str, float], ...] = ()  # (site, rewrite, its site error) dropped for quality
    builds: int = 0  # whole-model builds compiled and run on the evaluation set
    data: str = ""  # the evaluation set, in words
    tried: tuple[tuple[int, dict[str, float], tuple[str, ...]], ...] = field(
        default=()
    )  # (lossy kept, metrics, misses)


def assemble(
    accepted: list,
    bench,
    gates: tuple,
    pipeline_of: Callable[[list], str],
    progress: Callable[[str], None] | None = None,
) -> Assembled:
    """The longest prefix of `accepted`'s lossy rewrites (smallest site error first) whose whole
    model, built with `pipeline_of(kept)` and run by `bench` (`opscope.act.whatif.Bench`) on its
    evaluation set, passes `gates`; exact rewrites are always kept."""
    from opscope.act.quality import compare, own
    from opscope.act.quality_gate import failures
    from opscope.act.whatif import Variant

    say = progress or (lambda line: None)
    mine = own(bench.reference)
    exact = [c for c in accepted if c.proposal.exact]
    lossy = sorted((c for c in accepted if not c.proposal.exact), key=lambda c: (c.rel_error, c.site))
    tried: dict[int, tuple[dict[str, float], list[str]]] = {}

    def measure(k: int) -> bool:
        if k == 0:  # exact rewrites only: the original's outputs bit for bit
            metrics = compare(bench.reference, bench.reference)
        else:
            kept = exact + lossy[:k]
            metrics = bench.measure(Variant(f"{k} of {len(lossy)} lossy rewrites", pipeline_of(kept))).metrics
        misses = failures(gates, metrics, mine)
        tried[k] = (metrics, misses)
        say(f"{k} of {len(lossy)} lossy rewrites: " + ("within the budget" if not misses else "; ".join(misses)))
        return not misses

    good = len(lossy)
    if lossy and not measure(good):
        lo, hi = 0, good
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if measure(mid):
                lo = mid
            else:
                hi = mid
        good = lo
    if good not in tried:
        measure(good)
    metrics, misses = tried[good]
    left = tuple((c.site, c.proposal.label, c.rel_error) for c in lossy[good:])
    history = tuple((k, m, tuple(f)) for k, (m, f) in sorted(tried.items()))
    builds = sum(1 for k in tried if k)
    return Assembled(
        tuple(exact + lossy[:good]), metrics, mine, gates, not misses, left, builds, bench.evalset.data, history
    )


def shared_examples(run_batches: list[list[np.ndarray]], eval_batches: list[list[np.ndarray]]) -> tuple[int, int]:
    """(how many of the run's examples, rows of its first input, are also in the evaluation set, how
    many the run has): a calibration that saw the evaluation data is not a held-out check."""
    seen = {np.ascontiguousarray(row).tobytes() for b in eval_batches for row in np.asarray(b[0])}
    rows = [np.ascontiguousarray(row).tobytes() for b in run_batches for row in np.asarray(b[0])]
    return sum(r in seen for r in rows), len(rows)
