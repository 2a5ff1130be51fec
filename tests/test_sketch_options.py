"""The sketch configuration on the command line (`--lean`, `--hist-bins N`, `--roles`, `--sites`):
what `opscope profile` records is what the options ask, the histograms equal numpy's on a weight
(a tensor the test knows without running the model), and a bad option is one line before any work."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from opscope.ir.loading import new_context, parse_module
from opscope.ir.stat_config import StatConfig
from opscope.ir.weights import read_weights
from opscope.models.demo import transformer_module
from opscope.run.host_stats import host_stats

MODEL = transformer_module(1, 16, 10, weights="globals")  # x: 10 tokens x 16


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """One profile with every option: the lean set, 8 histogram bins, lhs and out, the FFN's sites."""
    from inprocess import opscope

    folder = tmp_path_factory.mktemp("options")
    model = folder / "model.mlir"
    model.write_text(MODEL)
    args = ["profile", str(model), "--steps", "1", "--lean", "--hist-bins", "8", "--roles", "lhs,rhs", "--sites", "ffn"]
    proc = opscope(*args, "--out", str(folder / "run"))
    assert proc.returncode == 0, proc.stderr[-2000:]
    return folder / "run", model


def test_only_the_chosen_sites_and_roles_are_sketched(run):
    sketches = pl.read_csv(run[0] / "sketches.csv")
    sites = set(sketches["site"].unique())
    assert sites and all("ffn" in s for s in sites)
    assert {"layer0.ffn.up", "layer0.ffn.down"} <= sites  # both FFN matmuls, and no attention projection
    matmul = sketches.filter(pl.col("role").is_in(["lhs", "rhs", "out"]))
    assert set(matmul["role"].unique()) == {"lhs", "rhs"}


def test_the_lean_set_with_8_bins_and_nothing_else(run):
    sketches = pl.read_csv(run[0] / "sketches.csv").filter(pl.col("role").is_in(["lhs", "rhs"]))
    stats = set(sketches["stat"].unique())
    assert "pos_sumsq" not in stats and "adj_sumsq" not in stats  # the lean set's
    hist = sketches.filter(pl.col("stat") == "hist")
    assert set(hist["idx"].unique()) == set(range(8))


def test_a_weights_histogram_is_numpys(run):
    """The up-projection's weight (its rhs, a constant) with 8 bins, against host_stats under the same
    configuration (numpy)."""
    folder, model = run
    config = StatConfig.lean().replace(hist_bins=8, hist_normalize=StatConfig().hist_normalize)
    (weight,) = read_weights(parse_module(model.read_text(), new_context()), sites="layer0.ffn.up")
    w = np.asarray(weight.values, np.float32)
    want = host_stats(w, config=config)["hist"]
    row = pl.read_csv(folder / "sketches.csv").filter(
        (pl.col("site") == "layer0.ffn.up") & (pl.col("role") == "rhs") & (pl.col("stat") == "hist")
    )
    got = row.sort("idx")["value"].to_numpy()
    assert np.array_equal(got, np.asarray(want, np.float64))


@pytest.mark.parametrize(
    "option,words",
    [
        (["--sites", "ffn("], "is not a regular expression"),
        (["--roles", "lhs,weights"], "roles must be distinct names among lhs, rhs, out"),
        (["--hist-bins", "-1"], "hist_bins must be >= 0"),
        (["--sites", "nothing-is-named-so"], "named like 'nothing-is-named-so' found"),
    ],
)
def test_a_bad_option_is_one_line_and_writes_nothing(tmp_path, option, words):
    from inprocess import opscope

    model = tmp_path / "model.mlir"
    model.write_text(MODEL)
    proc = opscope("profile", str(model), "--steps", "1", *option, "--out", str(tmp_path / "run"))
    assert proc.returncode != 0
    lines = [line for line in proc.stderr.splitlines() if line.startswith("opscope: error")]
    assert len(lines) == 1 and words in lines[0] and "Traceback" not in proc.stderr
    assert not (tmp_path / "run" / "sketches.csv").exists()


def test_a_sweep_records_the_asked_sketches_and_resumes_only_with_them(tmp_path):
    """`sweep --hist-bins 4 --roles lhs`: each run's lhs histogram is numpy's of the block the sweep
    samples; `--resume` with other sketches is one line (a file never mixes two sets), with the same
    ones it records the missing runs."""
    from inprocess import opscope

    from opscope.drive.synthetic import DISTS, sample

    out = tmp_path / "sweep.csv"
    base = ["sweep", "--shapes", "2x3x2", "--out", str(out), "--hist-bins", "4", "--roles", "lhs"]
    proc = opscope(*base, "--seeds", "1")
    assert proc.returncode == 0, proc.stderr[-2000:]
    rows = pl.read_csv(out)
    assert set(rows["role"].unique()) == {"lhs"}
    config = StatConfig(hist_bins=4, roles=("lhs",))
    for dist in DISTS:
        got = rows.filter((pl.col("dist") == dist) & (pl.col("stat") == "hist")).sort("idx")["value"].to_numpy()
        assert np.array_equal(got, host_stats(sample(dist, 2, 3, 1), config=config)["hist"]), dist
    proc = opscope("sweep", "--shapes", "2x3x2", "--out", str(out), "--seeds", "1,2", "--resume")
    assert proc.returncode != 0 and "was recorded with other sketches (hist_bins 4 there, 32 now" in proc.stderr
    assert pl.read_csv(out).height == rows.height  # nothing written
    proc = opscope(*base, "--seeds", "1,2", "--resume")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert pl.read_csv(out)["run_id"].n_unique() == 2 * len(DISTS)


def test_infer_taps_the_chosen_sites_and_a_rerun_takes_no_sketch_option(tmp_path):
    from inprocess import opscope

    model = tmp_path / "model.mlir"
    model.write_text(transformer_module(2, 16, 10, weights="globals"))
    proc = opscope("infer", str(model), "--steps", "1", "--sites", "layer1", "--out", str(tmp_path / "run"))
    assert proc.returncode == 0, proc.stderr[-2000:]
    sites = set(pl.read_csv(tmp_path / "run" / "sketches.csv")["site"].unique())
    assert sites and all(s.startswith("layer1.") for s in sites)
    assert {"layer1.attn.softmax", "layer1.ffn.residual"} <= sites
    proc = opscope("infer", str(tmp_path / "run"), "--lean")
    assert proc.returncode != 0 and "a recorded run is re-read as it is" in proc.stderr


@pytest.mark.parametrize("workers", [1, 2])
def test_live_samples_only_the_chosen_sites(tmp_path, workers):
    """`live --sites layer1` (one process, or two workers serving the parent's build): the report and
    the tidy statistics hold layer 1's sites only."""
    from inprocess import opscope

    model = tmp_path / "model.mlir"
    model.write_text(transformer_module(2, 16, 10, weights="globals"))
    csv = tmp_path / "live.csv"
    args = ["live", str(model), "--requests", "12", "--pool", "3", "--every", "2", "--sites", "layer1"]
    proc = opscope(*args, "--workers", str(workers), "--csv", str(csv))
    assert proc.returncode == 0, proc.stderr[-2000:]
    sites = set(pl.read_csv(csv)["site"].unique())
    assert sites and all(s.startswith("layer1.") for s in sites)
    assert "layer1.ffn.up" in sites and "layer0.ffn.up" not in proc.stdout
    if workers == 2:  # two shares as jobs on an embedded LocalCluster of 2 worker processes (local:2)
        assert "opscope live: 2 shares of 12 requests on 2 local worker processes" in proc.stderr
