"""Token-row sampling (`StatConfig(row_stride=K)`, `opscope profile --sample-rows K`): each
activation's sketches are those of its rows 0, K, 2K, ... (numpy's `host_stats` of `x[::K]`, the
reference), the weights' stay exact (equal to the unsampled build's, bit for bit), the manifest
and the report say so, and adjacent-row differences are not recorded (for weights neither: the
sketch plan is one per build).
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from opscope.drive.profile import profile_module
from opscope.errors import OpscopeError
from opscope.ir.manifest import Manifest
from opscope.ir.stat_config import StatConfig
from opscope.mining.report import mine_paths
from opscope.models.demo import transformer_module
from opscope.run.host_stats import host_stats
from opscope.run.instrumented import InstrumentedModel

MODEL = transformer_module(1, 16, 10, weights="globals")  # x: 10 tokens x 16
STRIDE = 3  # rows 0, 3, 6, 9: four of ten, the last block short


@pytest.fixture(scope="module")
def builds():
    full = InstrumentedModel.build(MODEL, name="full", taps=("matmul",))
    sampled = InstrumentedModel.build(MODEL, name="sampled", taps=("matmul",), config=StatConfig(row_stride=STRIDE))
    x = np.random.default_rng(1).standard_normal(full.args[0].shape).astype(np.float32)
    return full, sampled, x


def test_activations_are_sketched_on_every_kth_row(builds):
    full, sampled, x = builds
    assert sampled.manifest.row_stride == STRIDE and full.manifest.row_stride == 1
    got = sampled.manifest.values(sampled(x))
    want = host_stats(x[::STRIDE], StatConfig(adjacency=False))
    site = "layer0.attn.q"  # reads the model's input x
    for stat in ("min", "max", "mean", "l1", "sumsq", "nnz", "chan_maxabs", "pos_sumsq"):
        np.testing.assert_allclose(got[(site, "lhs", stat)], want[stat], rtol=1e-5, atol=1e-6, err_msg=stat)
    assert len(got[(site, "lhs", "pos_sumsq")]) == 4
    numel = {(e.site, e.role): e.numel for e in sampled.manifest.entries}
    assert numel[(site, "lhs")] == 4 * 16
    assert not any(e.stat == "adj_sumsq" for e in sampled.manifest.entries)


def test_weights_stay_exact(builds):
    full, sampled, x = builds
    a, b = full.manifest.values(full(x)), sampled.manifest.values(sampled(x))
    once = full.manifest.call_results  # the weights' sketches: the results of @main$weights
    weights = {(e.site, e.role, e.stat) for e in full.manifest.entries if e.result >= once and e.stat != "adj_sumsq"}
    assert weights and weights <= set(b)
    for key in weights:
        np.testing.assert_array_equal(b[key], a[key], err_msg=str(key))


def test_the_manifest_and_the_report_say_it(builds, tmp_path):
    _, sampled, _ = builds
    sampled.manifest.save(tmp_path / "m.json")
    assert Manifest.load(tmp_path / "m.json").row_stride == STRIDE
    run = profile_module(MODEL, tmp_path / "run", steps=1, config=StatConfig(row_stride=STRIDE), taps=("matmul",))
    assert json.loads((tmp_path / "run" / "manifest.json").read_text())["row_stride"] == STRIDE
    note = f"1 row (token) in {STRIDE}"
    assert any(note in n for n in run.report.notes)
    assert note in (tmp_path / "run" / "report.md").read_text()
    assert any(note in n for n in mine_paths(tmp_path / "run").notes)  # re-mined from the folder


def test_the_cli_summary_says_it(tmp_path):
    from inprocess import opscope

    model = tmp_path / "model.mlir"
    model.write_text(MODEL)
    args = ["profile", str(model), "--steps", "1", "--taps", "matmul", "--sample-rows", str(STRIDE)]
    proc = opscope(*args, "--out", str(tmp_path / "run"))
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert f"sketches per step (activations on 1 row in {STRIDE}: rows 0, {STRIDE}, ...; weights exact)" in proc.stdout


def test_a_stride_below_one_is_refused():
    with pytest.raises(OpscopeError, match="row_stride must be >= 1"):
        StatConfig(row_stride=0)
