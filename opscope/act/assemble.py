"""The plan's accepted rewrites assembled into one model that stays within a quality budget, end to end.

Each site's rewrite was judged alone, on the site's own output (`opscope.act.specialize`); what
a user ships is judged by the whole model's outputs on held-out data (`opscope.act.evalset`,
`opscope.act.quality`). Exact rewrites (bit-identical) always go in. The lossy ones are ordered
by the error they cost their own site per µs they save it (`worth`: a greedy knapsack, so an
lm_head that is a third of an LLM's time comes before thirty small projections of less error
each; rewrites not timed go last, least error first), and the longest prefix of that order whose
build passes every gate (`opscope.act.quality_gate`) is kept: the whole order is built first,
then a bisection (log2 n builds) under the assumption that adding a rewrite never improves
quality. The rewrite that broke the budget is then passed over and the rest tried after it, up to
`SKIPS` times (the next one alone first: one build when it breaks the budget too); the sites left
out stay as they were (mixed precision by measured sensitivity).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

SKIPS = 2  # rewrites that broke the budget passed over, each time the rest tried after it


@dataclass(frozen=True)
class Assembled:
    """The rewrites kept, the end-to-end quality of their build, what stayed out and why."""

    kept: tuple  # Candidates, exact first, then lossy in `worth` order
    metrics: dict[str, float]
    own: dict[str, float]  # the original build's own metrics (its perplexity)
    gates: tuple  # Gates
    passed: bool  # the kept build passes every gate (False: no lossy rewrite could, exact ones only)
    left_out: tuple[
        tuple[str, str, float], ...
    ] = ()  # (site, rewrite, its site error): the ones that broke the budget first
    builds: int = 0  # whole-model builds compiled and run on the evaluation set
    data: str = ""  # the evaluation set, in words
    tried: tuple[tuple[int, dict[str, float], tuple[str, ...]], ...] = field(
        default=()
    )  # (lossy rewrites in the build, metrics, misses), in the order built


def saved_us(c) -> float:
    """µs a call the candidate's rewrite saves its site, at the floor (0: not timed, or slower)."""
    m = c.measured
    return max(m.original_us - m.rewritten_us, 0.0) if m is not None else 0.0


def worth(c) -> tuple:
    """Sort key, best first: site error per µs saved; rewrites that save nothing measured after,
    least site error first."""
    saved = saved_us(c)
    return (c.rel_error / saved, 0.0, c.site) if saved > 0 else (math.inf, c.rel_error, c.site)


def assemble(
    accepted: list,
    bench,
    gates: tuple,
    pipeline_of: Callable[[list], str],
    progress: Callable[[str], None] | None = None,
    skips: int = SKIPS,
) -> Assembled:
    """The most of `accepted`'s lossy rewrites, taken in `worth` order, whose whole model, built with
    `pipeline_of(kept)` and run by `bench` (`opscope.act.whatif.Bench`) on its evaluation set,
    passes `gates`: the longest passing prefix, then past each rewrite that broke the budget, up to
    `skips` of them; exact rewrites are always kept."""
    from opscope.act.quality import compare, own
    from opscope.act.quality_gate import failures
    from opscope.act.whatif import Variant

    say = progress or (lambda line: None)
    mine = own(bench.reference)
    exact = [c for c in accepted if c.proposal.exact]
    lossy = sorted((c for c in accepted if not c.proposal.exact), key=worth)
    seen: dict[tuple[int, ...], tuple[dict[str, float], list[str]]] = {}
    history: list[tuple[int, dict[str, float], tuple[str, ...]]] = []

    def measure(chosen: list[int]) -> bool:
        key = tuple(chosen)
        if key not in seen:
            if not chosen:  # exact rewrites only: the original's outputs bit for bit
                metrics = compare(bench.reference, bench.reference)
            else:
                what = f"{len(chosen)} of {len(lossy)} lossy rewrites"
                metrics = bench.measure(Variant(what, pipeline_of(exact + [lossy[i] for i in chosen]))).metrics
            misses = failures(gates, metrics, mine)
            seen[key] = (metrics, misses)
            history.append((len(chosen), metrics, tuple(misses)))
            say(
                f"{len(chosen)} of {len(lossy)} lossy rewrites: "
                + ("within the budget" if not misses else "; ".join(misses))
            )
        return not seen[key][1]

    kept: list[int] = []
    rest = list(range(len(lossy)))
    passed_over: list[int] = []
    while rest:
        if passed_over and not measure(kept + rest[:1]):  # after a skip: the next one alone first
            lo = 0
        elif measure(kept + rest):
            lo = len(rest)
        else:
            lo, hi = (1 if passed_over else 0), len(rest)
            while hi - lo > 1:
                mid = (lo + hi) // 2
                if measure(kept + rest[:mid]):
                    lo = mid
                else:
                    hi = mid
        kept += rest[:lo]
        if lo < len(rest):
            passed_over.append(rest[lo])
        rest = rest[lo + 1 :] if len(passed_over) <= skips else []
    measure(kept)
    metrics, misses = seen[tuple(kept)]
    placed = set(kept) | set(passed_over)
    out = passed_over + [i for i in range(len(lossy)) if i not in placed]
    left = tuple((lossy[i].site, lossy[i].proposal.label, lossy[i].rel_error) for i in out)
    builds = sum(1 for key in seen if key)
    return Assembled(
        tuple(exact + [lossy[i] for i in kept]),
        metrics,
        mine,
        gates,
        not misses,
        left,
        builds,
        bench.evalset.data,
        tuple(history),
    )


def shared_examples(run_batches: list[list[np.ndarray]], eval_batches: list[list[np.ndarray]]) -> tuple[int, int]:
    """(how many of the run's examples, rows of its first input, are also in the evaluation set, how
    many the run has): a calibration that saw the evaluation data is not a held-out check."""
    seen = {np.ascontiguousarray(row).tobytes() for b in eval_batches for row in np.asarray(b[0])}
    rows = [np.ascontiguousarray(row).tobytes() for b in run_batches for row in np.asarray(b[0])]
    return sum(r in seen for r in rows), len(rows)
