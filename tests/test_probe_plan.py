"""A compression plan built into a real model through IREE and measured, against numpy.

The digits MLP takes its weights as arguments: `read_weights` reads them from its inputs and
`replace_weights` feeds each site a constant instead. Each measured plan's accuracy is
checked against the same MLP computed in numpy with the same reconstructed weights.
"""

from __future__ import annotations

import numpy as np
import pytest

import opscope
from opscope.act.plan import plans_to_measure
from opscope.models.digits import train_digits
from opscope.probe.allocate import Allocation
from opscope.probe.layers import reconstruct

pytest.importorskip("sklearn")


@pytest.fixture(scope="module")
def measured():
    return opscope.plan_layers("digits", budget=0.2, measure=True)


def _numpy_accuracy(report, alloc) -> float:
    """The MLP in numpy (float64) with `alloc`'s reconstructed weights, on the held-out images."""
    trained = train_digits()
    w1, b1, w2, b2 = (np.asarray(a, np.float64) for a in trained.weights)
    by = {p.name: p.options[c] for p, c in zip(report.profiles, alloc.choice)}
    w1 = reconstruct(w1.T.astype(np.float32), by["fc1"]).T.astype(np.float64)  # stored [in, out]; matrix [out, in]
    w2 = reconstruct(w2.T.astype(np.float32), by["fc2"]).T.astype(np.float64)
    x = np.asarray(trained.x_test, np.float64)
    n = len(x) // 64 * 64
    logits = np.maximum(x[:n] @ w1 + b1, 0.0) @ w2 + b2
    return float((logits.argmax(1) == trained.y_test[:n]).mean())


def test_plans_are_measured_and_match_numpy(measured):
    labels = [m.label for m in measured.measured]
    assert labels[0].startswith("dado @ 20%")
    assert any(x.startswith("uniform int8") for x in labels) and any(x.startswith("uniform int4") for x in labels)
    dense = Allocation((0,) * len(measured.profiles), 0.0, 0, 0, 0.0)
    assert measured.baseline["accuracy"] == pytest.approx(_numpy_accuracy(measured, dense), abs=1.5 / 448)
    plans = dict(plans_to_measure(measured))
    for m in measured.measured:
        assert m.metrics["accuracy"] == pytest.approx(_numpy_accuracy(measured, plans[m.label]), abs=1.5 / 448)
        assert m.bytes == plans[m.label].total_bytes
    u8 = next(m for m in measured.measured if m.label.startswith("uniform int8"))
    assert u8.metrics["agreement"] >= 0.99


def test_measured_report_renders_and_serializes(measured):
    text = opscope.render(measured)
    assert "measured end to end on" in text and "uniform int4" in text and "measuring" in text
    data = measured.to_dict()
    assert [m["label"] for m in data["measured"]] == [m.label for m in measured.measured]
    assert data["dado"]["bytes"] <= data["dado"]["budget_bytes"] + 1


def test_measured_objective_picks_the_best_plan_within_the_budget():
    report = opscope.plan_layers("digits", budget=0.15, objective="measured")
    assert report.objective == "measured" and report.picked
    fits = [m for m in report.measured if m.bytes <= report.plan.budget]
    picked = next(m for m in report.measured if m.label == report.picked)
    assert picked in fits
    assert picked.metrics["agreement"] == max(m.metrics["agreement"] for m in fits)
    assert "measured objective:" in opscope.render(report)
