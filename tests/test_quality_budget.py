"""The plan's quality budget: gates parsed from text, and the assembly that keeps the most lossy
rewrites a model's end-to-end quality allows (least site error per µs saved first, a bisection of
builds, then past the rewrites that broke the budget).

The assembly runs against a stand-in bench whose build scores exactly 1 − the sum of its lossy
rewrites' damages on the headline (argmax agreement; 0.01 each unless given), so what is kept and
the builds it takes are known in advance. Real builds: tests/test_kernel_plan.py (a
quality-budgeted --apply on an MLP, against numpy).
"""

from __future__ import annotations

import re

import numpy as np
import pytest
from errors import one_line

from opscope.act.assemble import SKIPS, assemble, shared_examples, worth
from opscope.act.candidates import Guard, Proposal
from opscope.act.quality import summary
from opscope.act.quality_gate import Gate, failures, parse_quality
from opscope.act.site_bench import Measured
from opscope.act.specialize import ACCEPT, Candidate, applied_pipeline
from opscope.errors import OpscopeError


def test_gates_from_a_number_and_from_text():
    assert parse_quality(0.001, "encoder") == (Gate("cosine_mean", ">=", 0.999),)
    assert parse_quality("0.03", "causal-lm") == (Gate("top1_agreement", ">=", 0.97),)
    gates = parse_quality("top1_agreement>=0.97, perplexity<=1.02x", "causal-lm")
    assert gates == (Gate("top1_agreement", ">=", 0.97), Gate("perplexity", "<=", 1.02, True))
    own = {"perplexity": 10.0}
    assert failures(gates, {"top1_agreement": 0.98, "perplexity": 10.2}, own) == []
    assert failures(gates, {"top1_agreement": 0.96, "perplexity": 10.3}, own) == [
        "top1_agreement 0.96 < 0.97",
        "perplexity 10.3 > 10.2",
    ]


@pytest.mark.parametrize(
    "quality,task,message",
    [
        (
            "cos>=1",
            "encoder",
            "quality gate 'cos>=1': no metric cos for this task (choose from cosine_mean, "
            "cosine_min, nn_agreement, rank_rho)",
        ),
        (
            "nn_agreement>=0.9x",
            "encoder",
            "quality gate 'nn_agreement>=0.9x': nn_agreement has no value of the "
            "original's own to be relative to (relative gates: none for this task)",
        ),
        (
            "fast",
            "encoder",
            "quality gate 'fast' is not metric>=value or metric<=value (e.g. cosine_mean>=0.99, perplexity<=1.02x)",
        ),
        (
            "1.5",
            "causal-lm",
            "quality expects a share of top1_agreement to lose in [0, 1), or gates like top1_agreement>=0.99; got 1.5",
        ),
    ],
)
def test_a_bad_budget_is_one_line(quality, task, message):
    with pytest.raises(OpscopeError) as e:
        parse_quality(quality, task)
    assert one_line(e) == message


class _Bench:
    """A bench whose build has argmax agreement 1 − the sum of its sites' `damage` (0.01 each unless given)."""

    def __init__(self, damage: dict[str, float] | None = None):
        self.reference = summary("outputs")
        self.reference.add([np.zeros(1)], [np.eye(4, dtype=np.float32)])
        self.evalset = type("E", (), {"data": "4 generated batches"})()
        self.damage = damage or {}
        self.built: list[int] = []

    def measure(self, variant):
        sites = re.findall(r'sites="\^([^$]+)\$" bits=8', variant.pipeline)
        self.built.append(len(sites))
        score = 1 - sum(self.damage.get(site, 0.01) for site in sites)
        return type("O", (), {"metrics": {"rel_l2_max": 1 - score, "cosine_min": 1.0, "argmax_agreement": score}})()


def _candidate(site: str, err: float, exact: bool = False, us: tuple[float, float] | None = None) -> Candidate:
    kind, options = ("skip-zero-channels", 'channels="0"') if exact else ("quantize-weight", "bits=8")
    measured = Measured(*us) if us else None
    return Candidate(Proposal(site, kind, "x", options, "", Guard("g", (), 0.0)), 1.0, measured, "", err, ACCEPT)


def _assemble(candidates, floor: float, damage=None, skips: int = SKIPS):
    bench = _Bench(damage)
    found = assemble(candidates, bench, (Gate("argmax_agreement", ">=", floor),), applied_pipeline, skips=skips)
    return found, bench.built


@pytest.mark.parametrize(
    "floor,kept,builds",
    [(0.905, 9, [16, 8, 12, 10, 9, 10, 10]), (0.835, 16, [16]), (0.995, 0, [16, 8, 4, 2, 1, 1, 1])],
)
def test_the_least_damaging_rewrites_are_kept_as_far_as_the_budget_allows(floor, kept, builds):
    """16 lossy rewrites not timed (site errors shuffled) and an exact one: the exact one always stays;
    the lossy ones in order of their site error, the longest prefix that passes, found by bisection,
    then the next one alone after each of the two that broke the budget (each breaks it too here)."""
    rng = np.random.default_rng(0)
    errors = rng.permutation(16) * 1e-3 + 1e-4
    lossy = [_candidate(f"s{i}", float(e)) for i, e in enumerate(errors)]
    found, built = _assemble([_candidate("skip", 0.0, exact=True), *lossy], floor)
    assert built == builds and found.builds == len(builds)
    assert found.passed and found.metrics["argmax_agreement"] == pytest.approx(1 - 0.01 * kept)
    order = [c.site for c in sorted(lossy, key=lambda c: c.rel_error)]
    assert [c.site for c in found.kept] == ["skip"] + order[:kept]
    passed_over = order[kept : kept + 3] if kept < 16 else []
    assert [site for site, _, _ in found.left_out] == passed_over + order[kept + 3 :]
    assert [k for k, _, _ in found.tried] == builds + ([0] if kept == 0 else [])  # exact rewrites only: no build


def test_the_rewrites_that_save_most_per_error_come_first():
    """Site error per µs saved orders the lossy rewrites: a large site (the lm_head) of twice the error
    of the small ones goes first when it saves ten times their time; rewrites not timed or slower last."""
    small = [_candidate(f"p{i}", 0.01, us=(100.0, 50.0)) for i in range(3)]
    big = _candidate("lm_head", 0.02, us=(1000.0, 500.0))
    slow = _candidate("slow", 0.001, us=(100.0, 120.0))
    untimed = _candidate("untimed", 0.0005)
    assert [c.site for c in sorted([*small, slow, untimed, big], key=worth)] == [
        "lm_head",
        "p0",
        "p1",
        "p2",
        "untimed",
        "slow",
    ]


def test_a_rewrite_that_breaks_the_budget_alone_is_passed_over():
    """The lm_head saves most but costs 5 % alone: it is passed over and the six small rewrites after
    it (1 % each) are kept as far as the 4 % budget goes; after `skips` such rewrites the rest stay out."""
    lossy = [_candidate("lm_head", 0.02, us=(1000.0, 100.0))]
    lossy += [_candidate(f"p{i}", 0.01, us=(100.0, 50.0)) for i in range(6)]
    found, built = _assemble(lossy, 0.96, damage={"lm_head": 0.05})
    assert [c.site for c in found.kept] == ["p0", "p1", "p2", "p3"]
    assert found.passed and found.metrics["argmax_agreement"] == pytest.approx(0.96)
    assert [site for site, _, _ in found.left_out] == ["lm_head", "p4", "p5"]
    assert built == [7, 3, 1, 1, 6, 3, 4, 5, 5]
    found, built = _assemble(lossy, 0.96, damage={"lm_head": 0.05}, skips=0)
    assert found.kept == () and built == [7, 3, 1] and found.builds == 3


def test_calibration_examples_seen_by_the_evaluation_are_counted():
    a = np.arange(12).reshape(4, 3)
    run = [[a[:2]], [a[2:]]]
    assert shared_examples(run, [[a[1:3]]]) == (2, 4)
    assert shared_examples(run, [[a[:1] + 100]]) == (0, 4)
