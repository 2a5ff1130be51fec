"""The recording drivers end to end: sweep, seq and replay write tidy CSVs whose sketches
equal numpy's on the same inputs, resume without losing or duplicating runs, and mine to
the outcomes of §12 of the reference design on every target that runs here.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from test_mine import EXPECTED_12  # §12 of the reference design, cell by cell

from opscope.drive.sequence import decode_inputs, replay, seq
from opscope.drive.sweep import SHAPES, plan, site_name, sweep
from opscope.drive.synthetic import DISTS, sample
from opscope.ir.stat_config import StatConfig
from opscope.mining.report import mine_paths
from opscope.record.recorder import HEADER, MODULE_ROW, UNKNOWN_ROW, UNTAPPED_PREFIX, is_site_row, read_site_costs
from opscope.run.host_stats import host_stats

SMALL = ((32, 48, 16),)
BIN = Path(sys.executable).parent


def read(path: Path) -> pl.DataFrame:
    return pl.read_csv(path, schema_overrides={"value": pl.Float32})


def test_plan_is_the_references():
    runs = plan()
    assert len(runs) == 63 and [r.run_id for r in runs] == list(range(63))
    assert runs[0].shape == SHAPES[0] and runs[0].dist == "gaussian" and runs[0].seed == 1
    assert runs[-1].shape == SHAPES[-1] and runs[-1].dist == "coherent" and runs[-1].seed == 3
    assert [r.dist for r in runs[:21:3]] == list(DISTS)


def test_sweep_records_numpys_sketches(tmp_path, runnable_target):
    """Every sketch element of every run equals host_stats of the same inputs (rtol 1e-5,
    counts exactly), rows are in manifest order, and the sidecar holds 2·M·K·N."""
    out = tmp_path / "sweep.csv"
    res = sweep(out, runnable_target, shapes=SMALL, seeds=(5,), progress=False)
    assert res.recorded == list(range(7)) and res.skipped == []
    assert res.parity[SMALL[0]] == 0.0
    df = read(out)
    assert tuple(df.columns) == HEADER
    assert sorted(df["run_id"].unique().to_list()) == list(range(7))
    assert df["backend"].unique().to_list() == [runnable_target]
    m, k, n = SMALL[0]
    site = site_name(SMALL[0])
    assert read_site_costs(Path(str(out) + ".sites")) == {site: 2 * m * k * n}
    for run in plan(SMALL, seeds=(5,)):
        a = sample(run.dist, m, k, run.seed)
        b = sample(run.dist, k, n, run.seed + 1000)
        want = {"lhs": a, "rhs": b, "out": (a.astype(np.float64) @ b.astype(np.float64)).astype(np.float32)}
        rows = df.filter(pl.col("run_id") == run.run_id)
        assert rows["dist"].unique().to_list() == [run.dist]
        assert rows.select("M", "K", "N").unique().rows() == [(m, k, n)]
        for role, x in want.items():
            ref = host_stats(x, StatConfig())
            for stat, vals in ref.items():
                got = rows.filter((pl.col("role") == role) & (pl.col("stat") == stat)).sort("idx")
                assert got["idx"].to_list() == list(range(len(vals))), (run, role, stat)
                assert set(got["numel"].to_list()) == {x.size}
                g = got["value"].to_numpy().astype(np.float64)
                if stat in ("nnz", "hist"):
                    assert np.array_equal(g, vals), (run, role, stat)
                elif role == "out" and stat in ("min", "max", "chan_maxabs", "elemsig", "chan_outlier"):
                    # out is IREE's matmul vs numpy's: compare the values, not the sums of them
                    np.testing.assert_allclose(g, vals, rtol=1e-4, atol=1e-5, err_msg=f"{run} {role} {stat}")
                else:
                    np.testing.assert_allclose(g, vals, rtol=2e-4, atol=1e-6, err_msg=f"{run} {role} {stat}")


def test_sweep_refuses_to_overwrite(tmp_path):
    out = tmp_path / "s.csv"
    out.write_text("x\n")
    with pytest.raises(Exception, match="exists: pass --resume"):
        sweep(out, shapes=SMALL, seeds=(1,), progress=False)
    assert out.read_text() == "x\n"


def test_sweep_resume_after_kill_equals_uninterrupted(tmp_path):
    """SIGKILL an `opscope sweep` once some runs are on disk, `--resume`: the CSV is byte
    for byte the one an uninterrupted sweep writes."""
    args = ["--shapes", "32x48x16,16x32x8", "--seeds", "1,2"]
    full = tmp_path / "full.csv"
    done = subprocess.run(
        [str(BIN / "opscope"), "sweep", "--out", str(full), *args], capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stderr
    assert "recorded 28 runs of 28" in done.stdout

    cut = tmp_path / "cut.csv"
    proc = subprocess.Popen(
        [str(BIN / "opscope"), "sweep", "--out", str(cut), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    journal = Path(str(cut) + ".runs")
    deadline = time.time() + 300
    while time.time() < deadline and proc.poll() is None:
        if journal.exists() and len(journal.read_text().splitlines()) >= 3:
            break
        time.sleep(0.01)
    assert proc.poll() is None, "the sweep finished before it could be killed; make it longer"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    before = len(journal.read_text().splitlines())
    assert 3 <= before < 28
    with open(cut, "a") as f:  # a crash in the middle of a write leaves a partial line
        f.write("99,0,llvm-cpu,gaussian,1,2")
    resumed = subprocess.run(
        [str(BIN / "opscope"), "sweep", "--out", str(cut), "--resume", *args],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert resumed.returncode == 0, resumed.stderr
    assert "already done" in resumed.stdout
    assert cut.read_bytes() == full.read_bytes()


def test_seq_weight_stationary_activations_drift(tmp_path, runnable_target):
    out = tmp_path / "seq.csv"
    res = seq(out, runnable_target, steps=6, progress=False)
    assert res.steps == 6 and res.parity == 0.0
    df = read(out)
    assert sorted(df["step"].unique().to_list()) == list(range(6))
    # the recorded lhs l1 follows numpy's on the same walk
    l1 = df.filter((pl.col("role") == "lhs") & (pl.col("stat") == "l1")).sort("step")["value"].to_numpy()
    want = [np.abs(a.astype(np.float64)).sum() for a, _ in decode_inputs(6)]
    np.testing.assert_allclose(l1, want, rtol=1e-5)
    report = mine_paths(out)
    stationary = {role: st for role, st in report.cross_step.select("role", "stationary").iter_rows()}
    assert stationary == {"lhs": False, "rhs": True, "out": False}
    assert report.cross_step["site"].unique().to_list() == ["decode"]


@pytest.mark.parametrize("pool,want", [(4, "memoize"), (0, "delta-compute")])
def test_replay_pool_memoizes_walk_delta_computes(tmp_path, pool, want):
    out = tmp_path / f"replay{pool}.csv"
    res = replay(out, steps=12, pool=pool, progress=False)
    all_costs = read_site_costs(res.site_costs)
    costs = {s: f for s, f in all_costs.items() if is_site_row(s)}
    assert costs == {
        "fc0": 2 * 32 * 64 * 128,
        "fc1": 2 * 32 * 128 * 64,
        "fc2": 2 * 32 * 64 * 512,
        "fc3": 2 * 32 * 512 * 64,
    }
    relu = 32 * (128 + 64 + 512 + 64)  # one maximumf per element after each matmul: not tapped
    assert {s: f for s, f in all_costs.items() if not is_site_row(s)} == {
        MODULE_ROW: sum(costs.values()) + relu,
        UNKNOWN_ROW: 0,
        UNTAPPED_PREFIX + "generic<maximumf>": relu,
    }
    report = mine_paths(out)
    opps = report.opportunities.to_dicts()
    assert {o["site"] for o in opps} == set(costs)
    assert {o["flops"] for o in opps} == set(costs.values())
    assert all(o["action"] == want for o in opps), opps
    if pool:
        # 12 picks from 4 inputs: at most 4 first sightings, so recur >= 8/11
        assert all(o["recur"] >= 8 / 11 - 1e-9 for o in opps)


def test_sweep_mines_to_section_12(tmp_path, runnable_target):
    out = tmp_path / "sweep.csv"
    sweep(out, runnable_target, shapes=((128, 128, 128),), progress=False)
    sig = mine_paths(out).signals
    assert sig["backend"].unique().to_list() == [runnable_target]
    got = {(d, r): e for d, r, e in sig.select("dist", "role", "exploit").iter_rows()}
    want = {(d, r): e for d, labels in EXPECTED_12.items() for r, e in zip(("lhs", "rhs", "out"), labels)}
    assert got == want
