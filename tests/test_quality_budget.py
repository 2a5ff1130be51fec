"""The plan's quality budget: gates parsed from text, and the assembly that keeps the most lossy
rewrites a model's end-to-end quality allows (least site error first, a bisection of builds).

The assembly runs against a stand-in bench whose build of k lossy rewrites scores exactly
1 − 0.01·k on the headline (argmax agreement), so the kept prefix and the number of builds are
known in advance: the largest k with 1 − 0.01·k ≥ the gate, found in ⌈log2 n⌉ + 1 builds.
Real builds: tests/test_kernel_plan.py (a quality-budgeted --apply on an MLP, against numpy).
"""

from __future__ import annotations

import numpy as np
import pytest
from errors import one_line

from opscope.act.assemble import assemble, shared_examples
from opscope.act.candidates import Guard, Proposal
from opscope.act.quality import summary
from opscope.act.quality_gate import Gate, failures, parse_quality
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
    """A bench whose build of k lossy rewrites has argmax agreement 1 − 0.01·k (task outputs)."""

    def __init__(self):
        self.reference = summary("outputs")
        self.reference.add([np.zeros(1)], [np.eye(4, dtype=np.float32)])
        self.evalset = type("E", (), {"data": "4 generated batches"})()
        self.built: list[int] = []

    def measure(self, variant):
        k = variant.pipeline.count("bits=8")
        self.built.append(k)
        return type(
            "O", (), {"metrics": {"rel_l2_max": 0.01 * k, "cosine_min": 1.0, "argmax_agreement": 1 - 0.01 * k}}
        )()


def _candidate(site: str, err: float, exact: bool = False) -> Candidate:
    kind, options = ("skip-zero-channels", 'channels="0"') if exact else ("quantize-weight", "bits=8")
    return Candidate(Proposal(site, kind, "x", options, "", Guard("g", (), 0.0)), 1.0, None, "", err, ACCEPT)


@pytest.mark.parametrize(
    "floor,kept,builds", [(0.905, 9, [16, 8, 12, 10, 9]), (0.835, 16, [16]), (0.995, 0, [16, 8, 4, 2, 1])]
)
def test_the_least_damaging_rewrites_are_kept_as_far_as_the_budget_allows(floor, kept, builds):
    """16 lossy rewrites (site errors shuffled) and an exact one: the exact one always stays; the
    lossy ones in order of their site error, the longest prefix that passes, found by bisection."""
    rng = np.random.default_rng(0)
    errors = rng.permutation(16) * 1e-3 + 1e-4
    lossy = [_candidate(f"s{i}", float(e)) for i, e in enumerate(errors)]
    bench = _Bench()
    found = assemble(
        [_candidate("skip", 0.0, exact=True), *lossy], bench, (Gate("argmax_agreement", ">=", floor),), applied_pipeline
    )
    assert bench.built == builds and found.builds == len(builds)
    assert found.passed and found.metrics["argmax_agreement"] == pytest.approx(1 - 0.01 * kept)
    assert [c.site for c in found.kept] == ["skip"] + [c.site for c in sorted(lossy, key=lambda c: c.rel_error)][:kept]
    assert [site for site, _, _ in found.left_out] == [c.site for c in sorted(lossy, key=lambda c: c.rel_error)][kept:]
    assert [k for k, _, _ in found.tried] == sorted(set(builds) | ({0} if kept == 0 else set()))


def test_calibration_examples_seen_by_the_evaluation_are_counted():
    a = np.arange(12).reshape(4, 3)
    run = [[a[:2]], [a[2:]]]
    assert shared_examples(run, [[a[1:3]]]) == (2, 4)
    assert shared_examples(run, [[a[:1] + 100]]) == (0, 4)
