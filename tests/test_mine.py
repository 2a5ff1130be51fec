"""The value miner against real sketches: §12's outcomes, signal numbers, cross-step and opportunities.

Sketches come from `opscope.run.host_stats` (the numpy reference of every sketch) on the seven
reference distributions, written as a tidy CSV the way the recorder writes it (f32
shortest text) and read back through `opscope.record.tidy`. Every number the miner reports is
checked against a direct numpy computation on the same f32 sketch values (rtol 1e-6);
labels against an independent if-chain of §4.2's cascade and against the §12 table;
counts exactly.
"""

from __future__ import annotations

import json

import numpy as np
import polars as pl
import pytest
from distributions import DISTS, sample
from test_tidy import f32_text, write_tidy_csv

import opscope
from opscope.dialect.lowering.signature import ELEMSIG_SKEW
from opscope.errors import OpscopeError
from opscope.ir.stat_config import StatConfig
from opscope.mining.keys import appearance_order
from opscope.mining.render import render
from opscope.mining.report import mine, mine_paths
from opscope.mining.signals import EXPLOITS, rank
from opscope.mining.temporal import (
    MIN_STEPS_REUSE,
    MIN_STEPS_STATIONARY,
    STATIONARY_CV,
    aggregate,
    cross_step,
    opportunities,
)
from opscope.record.tidy import SCHEMA, empty_tidy, read_tidy
from opscope.run.host_stats import host_stats

RTOL = 1e-6
ROLES = ("lhs", "rhs", "out")
SEEDS = (1, 2, 3)

# §12 of the reference design, cell by cell (our generators, 128x128x128, mean over seeds 1-3).
EXPECTED_12 = {
    "gaussian": ("dense", "dense", "dense"),
    "uniform": ("dense", "dense", "dense"),
    "sparse90": ("sparse-gemm", "sparse-gemm", "quantize-lut"),
    "lowrank": ("dense", "dense", "positional"),
    "outlier": ("quantize-lut", "quantize-lut", "channel-quant"),
    "quantized": ("dense", "dense", "dense"),
    "coherent": ("delta-compute", "delta-compute", "delta-compute"),
}


def sketch_rows(
    rows: list,
    run_id: int,
    step: int,
    dist: str,
    site: str,
    tensors: dict[str, np.ndarray],
    backend: str = "llvm-cpu",
    mkn: tuple[int, int, int] = (128, 128, 128),
    config: StatConfig = StatConfig(),
) -> dict[str, dict[str, np.ndarray]]:
    """Append the tidy rows of every tensor's sketches; return them as the f32 values the CSV holds."""
    out = {}
    for role, x in tensors.items():
        sk = host_stats(x, config)
        for stat, vals in sk.items():
            rows.extend(
                (run_id, step, backend, dist, *mkn, x.size, site, role, stat, i, f32_text(v))
                for i, v in enumerate(vals)
            )
        out[role] = {k: v.astype(np.float32).astype(np.float64) for k, v in sk.items()}
    return out


def np_signals(sk: dict[str, np.ndarray], numel: int) -> dict[str, float | None]:
    """§4.2's five per-observation signals and ours (zchan), straight from the sketch arrays."""
    sig = {
        "density": sk["nnz"][0] / max(numel, 1) if "nnz" in sk else None,
        "zchan": None,
        "outlier": None,
        "histtop": None,
        "pos_cv": None,
        "adj": None,
    }
    if "chan_maxabs" in sk:
        sig["zchan"] = float((sk["chan_maxabs"] == 0).mean())
    if "chan_maxabs" in sk and sk["chan_maxabs"].mean() > 1e-9:
        sig["outlier"] = sk["chan_maxabs"].max() / sk["chan_maxabs"].mean()
    if "hist" in sk and sk["hist"].sum() > 0:
        sig["histtop"] = sk["hist"].max() / sk["hist"].sum()
    if "pos_sumsq" in sk:
        p = sk["pos_sumsq"]
        sig["pos_cv"] = 0.0 if abs(p.mean()) < 1e-12 else p.std() / abs(p.mean())
        if "adj_sumsq" in sk and p.mean() > 1e-9:
            sig["adj"] = sk["adj_sumsq"].mean() / p.mean()
    return sig


def np_mean_signals(observations: list[dict[str, float | None]]) -> dict[str, float | None]:
    out = {}
    for k in observations[0]:
        vals = [o[k] for o in observations if o[k] is not None]
        out[k] = float(np.mean(vals)) if vals else None
    return out


def np_cascade(s: dict[str, float | None]) -> tuple[str, float]:
    """The rule cascade written as a plain if-chain (nulls never match)."""
    d, z, o, h, a, p = (s[k] for k in ("density", "zchan", "outlier", "histtop", "adj", "pos_cv"))
    if d is not None and d < 0.5:
        return "sparse-gemm", 1 - d
    if z is not None and z >= 0.05:
        return "channel-skip", z
    if o is not None and o > 6:
        return "channel-quant", min(o / 30, 1)
    if h is not None and h > 0.25:
        return "quantize-lut", h
    if a is not None and a < 0.5:
        return "delta-compute", 1 - a
    if p is not None and p > 0.75:
        return "positional", min(p / 3, 1)
    return "dense", 0.0


@pytest.fixture(scope="module")
def sweep(tmp_path_factory):
    """An `opscope-sweep`-like CSV: 7 dists x seeds 1-3 at 128x128x128, one site; and numpy signals."""
    rows: list = []
    obs: dict[tuple[str, str], list] = {}
    run = 0
    for dist in DISTS:
        for seed in SEEDS:
            lhs = sample(dist, (128, 128), seed)
            rhs = sample(dist, (128, 128), seed + 1000)
            sk = sketch_rows(rows, run, 0, dist, "matmul#0", {"lhs": lhs, "rhs": rhs, "out": lhs @ rhs})
            for role in ROLES:
                obs.setdefault((dist, role), []).append(np_signals(sk[role], 128 * 128))
            run += 1
    path = write_tidy_csv(tmp_path_factory.mktemp("sweep") / "sweep.csv", rows)
    expected = {k: np_mean_signals(v) for k, v in obs.items()}
    return path, len(rows), expected


def test_sweep_signals_match_numpy(sweep):
    path, nrows, expected = sweep
    report = mine_paths(path)
    assert report.rows == nrows and report.steps == 1
    sig = report.signals
    assert sig.height == len(DISTS) * len(ROLES)
    assert sig["observations"].to_list() == [len(SEEDS)] * sig.height
    for r in sig.iter_rows(named=True):
        want = expected[(r["dist"], r["role"])]
        for k in ("density", "zchan", "outlier", "histtop", "pos_cv", "adj"):
            assert r[k] == pytest.approx(want[k], rel=RTOL), (r["dist"], r["role"], k)


def test_sweep_labels_follow_the_cascade_and_section_12(sweep):
    path, _, expected = sweep
    report = mine_paths(path)
    got = {(r["dist"], r["role"]): (r["exploit"], r["score"]) for r in report.signals.iter_rows(named=True)}
    for (dist, role), (exploit, score) in got.items():
        want_exploit, want_score = np_cascade(expected[(dist, role)])
        assert exploit == want_exploit, (dist, role)
        assert score == pytest.approx(want_score, rel=RTOL, abs=0.0), (dist, role)
        assert exploit == EXPECTED_12[dist][ROLES.index(role)], (dist, role)
    # Order: first appearance (the recorder's dist order, then lhs, rhs, out).
    assert report.signals.select("dist", "role").rows() == [(d, r) for d in DISTS for r in ROLES]


def test_signals_do_not_depend_on_row_order(sweep):
    """Interleaved rows (a vector's elements not consecutive) give the same signals."""
    df = read_tidy(sweep[0])
    shuffled = df.sample(fraction=1.0, shuffle=True, seed=7)
    a, b = (mine(x).signals.sort("dist", "role") for x in (df, shuffled))  # order of appearance differs
    same = ("dist", "role", "observations", "exploit")
    assert a.select(same).equals(b.select(same))
    for col in ("density", "zchan", "outlier", "histtop", "pos_cv", "adj"):
        np.testing.assert_allclose(b[col].to_numpy(), a[col].to_numpy(), rtol=1e-12)


def test_ranked_list(sweep):
    path, _, expected = sweep
    report = mine_paths(path)
    positive = sum(np_cascade(s)[1] > 0 for s in expected.values())
    ranked = report.ranked
    assert ranked.height == positive
    assert ranked["rank"].to_list() == list(range(1, positive + 1))
    scores = ranked["score"].to_list()
    assert all(a >= b for a, b in zip(scores, scores[1:]))
    assert ranked.row(0, named=True)["exploit"] in EXPLOITS and "dense" not in ranked["exploit"].to_list()


def test_equal_scores_rank_in_appearance_order_whatever_their_last_bits():
    """Polars' parallel sums end in other last bits from run to run: two keys of the same true score
    (q, k and v of one input) must not swap ranks with them, or one table mines to two reports."""
    tiny = 0.3 * np.finfo(np.float64).eps
    signals = pl.DataFrame(
        {
            "backend": ["llvm-cpu"] * 3,
            "dist": ["text"] * 3,
            "site": ["attn.q", "attn.k", "attn.v"],
            "role": ["out"] * 3,
            "numel": [4096] * 3,
            "exploit": ["positional"] * 3,
            "score": [0.26, 0.26 + tiny * 2, 0.5],
            "suggestion": ["s"] * 3,
        }
    )
    assert rank(signals)["site"].to_list() == ["attn.v", "attn.q", "attn.k"]


def test_zero_channels_are_channel_skip_after_sparse(tmp_path):
    """Whole zero columns (structured sparsity) fire `channel-skip` above 5 % of channels; scattered
    zeros under 50 % density still win first; one zero column in 64 (1.6 %) is noise."""
    rows: list = []
    base = sample("gaussian", (64, 64), 3)
    cases = {"cols16": (base, 16), "cols1": (base, 1), "sparse": (sample("sparse90", (64, 64), 3), 16)}
    for run, (site, (x, zero)) in enumerate(cases.items()):
        for step in range(2):
            y = x.copy()
            y[:, step : step + zero] = 0.0  # a different set each step: the share is per observation
            sketch_rows(rows, run, step, "x", site, {"lhs": y}, mkn=(64, 64, 64))
    report = mine(read_tidy(write_tidy_csv(tmp_path / "z.csv", rows)))
    sig = {r["site"]: r for r in report.signals.iter_rows(named=True)}
    assert sig["cols16"]["zchan"] == 16 / 64 and sig["cols16"]["exploit"] == "channel-skip"
    assert sig["cols16"]["score"] == 16 / 64
    assert sig["cols16"]["suggestion"] == "channel-skip (25% of channels all zero: structured sparsity, density 0.75)"
    assert sig["cols1"]["zchan"] == 1 / 64 and sig["cols1"]["exploit"] == "dense"
    assert sig["sparse"]["zchan"] >= 0.25 and sig["sparse"]["exploit"] == "sparse-gemm"


def test_ties_keep_appearance_order(tmp_path):
    rows: list = []
    x = sample("sparse90", (32, 32), 5)
    for site in ("zeta#1", "alpha#0"):
        sketch_rows(rows, 0, 0, "sparse90", site, {"lhs": x}, mkn=(32, 32, 32))
    report = mine(read_tidy(write_tidy_csv(tmp_path / "t.csv", rows)))
    assert report.ranked["site"].to_list() == ["zeta#1", "alpha#0"]
    assert report.ranked["score"][0] == report.ranked["score"][1]


def test_backends_stay_apart(tmp_path):
    rows: list = []
    sketch_rows(rows, 0, 0, "x", "matmul#0", {"lhs": sample("sparse90", (128, 128), 1)}, backend="llvm-cpu")
    sketch_rows(rows, 1, 0, "x", "matmul#0", {"lhs": sample("gaussian", (128, 128), 1)}, backend="vulkan-spirv")
    report = mine(read_tidy(write_tidy_csv(tmp_path / "b.csv", rows)))
    assert report.signals.select("backend", "exploit").rows() == [
        ("llvm-cpu", "sparse-gemm"),
        ("vulkan-spirv", "dense"),
    ]


def test_tensors_too_small_for_a_statistic_are_not_ranked(tmp_path):
    """Issue 31: a 1-element tensor is "100% in one bin" and a 48-element one of zeros "sparse":
    signals on fewer than 64 elements stay in the signals table but are not ranked, and the
    report says how many were left out."""
    rows: list = []
    sketch_rows(rows, 0, 0, "x", "tiny", {"lhs": np.full((1, 1), 3.0, np.float32)})
    sketch_rows(rows, 0, 0, "x", "small", {"lhs": sample("sparse90", (6, 8), 1)})
    sketch_rows(rows, 0, 0, "x", "big", {"lhs": sample("sparse90", (8, 8), 1)})  # 64: ranked
    report = mine(read_tidy(write_tidy_csv(tmp_path / "s.csv", rows)))
    assert report.signals.select("site", "numel").rows() == [("tiny", 1), ("small", 48), ("big", 64)]
    assert (report.signals["score"] > 0).all() and report.ranked["site"].to_list() == ["big"]
    line = "2 tensors under 64 elements with a signal not ranked (too few values for a statistic"
    assert (
        line in render(report, "findings")
        and line in opscope.render(report)
        and line in opscope.render(report, "markdown")
    )


def test_missing_signals_are_null_and_keys_without_signals_left_out(tmp_path):
    rows: list = []
    a, b = sample("outlier", (128, 128), 1), sample("outlier", (128, 128), 1001)
    sk = sketch_rows(rows, 0, 0, "outlier", "matmul#0", {"lhs": a, "out": a @ b}, config=StatConfig.lean())
    rows.extend(
        (0, 0, "llvm-cpu", "outlier", 128, 128, 128, 128, "softmax#1", "attn", "attn_qmax", i, 0.5) for i in range(4)
    )
    report = mine(read_tidy(write_tidy_csv(tmp_path / "lean.csv", rows)))
    sig = report.signals
    assert sig.select("site", "role").rows() == [("matmul#0", "lhs"), ("matmul#0", "out")]
    for col in ("histtop", "pos_cv", "adj"):
        assert sig[col].null_count() == 2
    out = sig.row(1, named=True)
    assert out["outlier"] == pytest.approx(np_signals(sk["out"], 128 * 128)["outlier"], rel=RTOL)
    assert sig["exploit"].to_list() == ["dense", "channel-quant"]
    values, dynamics = opscope.render(report).split("Inference dynamics")
    assert "matmul#0" in values and "  -  " in values and "softmax#1" not in values
    assert "softmax#1" in dynamics  # the attention rows are the dynamics miner's (qmax only: the rest '-')
    assert report.dynamics.attention.row(0, named=True)["qmax"] == pytest.approx(0.5)


@pytest.fixture(scope="module")
def seq(tmp_path_factory):
    """An `opscope-seq`-like CSV: 2 runs x 16 steps of A·W, W fixed per run, A a random walk."""
    rows: list = []
    l1: dict[tuple[int, str], list[float]] = {}
    for run, (wseed, aseed) in enumerate(((777, 1), (778, 3))):
        w = sample("gaussian", (128, 128), wseed)
        a = sample("gaussian", (64, 128), aseed)
        walk = np.random.Generator(np.random.Philox(aseed + 1))
        for step in range(16):
            if step:
                a = (a + 0.05 * walk.standard_normal(a.shape)).astype(np.float32)
            sk = sketch_rows(
                rows, run, step, "decode", "matmul#0", {"lhs": a, "rhs": w, "out": a @ w}, mkn=(64, 128, 128)
            )
            for role in ROLES:
                l1.setdefault((run, role), []).append(sk[role]["l1"][0])
    return write_tidy_csv(tmp_path_factory.mktemp("seq") / "seq.csv", rows), l1


def test_cross_step_stationary_weights_and_drifting_activations(seq):
    path, l1 = seq
    report = mine_paths(path)
    assert report.steps == 16
    cross = report.cross_step
    assert cross.select("run_id", "role").rows() == [(r, role) for r in (0, 1) for role in ROLES]
    assert cross["steps"].to_list() == [16] * 6
    for r in cross.iter_rows(named=True):
        series = np.array(l1[(r["run_id"], r["role"])])
        cv = series.std() / abs(series.mean())
        assert r["l1_cv"] == pytest.approx(cv, rel=RTOL, abs=1e-12)
        assert r["stationary"] == (r["role"] == "rhs")
        assert r["verdict"].startswith("stationary" if r["role"] == "rhs" else "drifting")
        assert r["sumsq_cv"] < 1e-4 if r["role"] == "rhs" else r["sumsq_cv"] > 1e-4
    # The reference mixes runs in one series; the two runs' weights would then read as drifting.
    mixed = np.array(l1[(0, "rhs")] + l1[(1, "rhs")])
    assert mixed.std() / mixed.mean() > 1e-4


def test_cross_step_conserved_l1_is_not_stationary(tmp_path):
    """Softmax rows always sum to 1, so their l1 never moves; their sumsq does: drifting."""
    rows: list = []
    rng = np.random.Generator(np.random.Philox(5))
    for step in range(6):
        logits = rng.standard_normal((16, 16))
        p = np.exp(logits) / np.exp(logits).sum(1, keepdims=True)
        sketch_rows(rows, 0, step, "attn", "ctx", {"lhs": p.astype(np.float32)}, mkn=(16, 16, 16))
    report = mine_paths(write_tidy_csv(tmp_path / "softmax.csv", rows))
    (r,) = report.cross_step.to_dicts()
    assert r["l1_cv"] < 1e-6 and r["sumsq_cv"] > 1e-2
    assert not r["stationary"] and r["verdict"].startswith("drifting")


def test_zero_samples_are_not_a_repeat(tmp_path):
    """Fresh inputs whose 16 elemsig positions are all zero (like an underflowed softmax)
    share a fingerprint; the moments differ, so no memoize (the reference would say 100 %)."""
    rows: list = []
    rng = np.random.Generator(np.random.Philox(9))
    j = np.arange(16)
    sampled = (j * 32 * 16) // 16 + (j * ELEMSIG_SKEW) % 32  # the positions elemsig reads
    for step in range(6):
        x = rng.standard_normal(32 * 16)
        x[sampled] = 0.0
        sketch_rows(rows, 0, step, "attn", "ctx", {"lhs": x.reshape(32, 16).astype(np.float32)})
    (r,) = mine_paths(write_tidy_csv(tmp_path / "zeros.csv", rows)).opportunities.to_dicts()
    assert r["recur"] == 0.0 and r["action"] != "memoize"
    # all-zero samples say nothing about drift either (the reference: 0/(0 + 1e-9) = no drift)
    assert r["drift"] == float("inf") and r["action"] == "none"


# -- hand-made tidy frames: what a verdict rests on, and how many steps it needs -------------------
def tidy_frame(rows: list[tuple]) -> pl.DataFrame:
    """13-field tidy rows as the typed frame `read_tidy` returns."""
    return pl.DataFrame(rows, schema=SCHEMA, orient="row")


def tensor_rows(
    step: int, l1: float, sumsq: float, elemsig: list[float] | None, run: int = 0, site: str = "ctx", role: str = "lhs"
) -> list[tuple]:
    """One tensor's l1, sumsq and (when given) elemsig rows at one step."""
    head = (run, step, "llvm-cpu", "attn", 16, 16, 16, 256, site, role)
    rows = [(*head, "l1", 0, l1), (*head, "sumsq", 0, sumsq)]
    return rows + [(*head, "elemsig", i, v) for i, v in enumerate(elemsig or [])]


def np_elemsig_cv(vectors: list[list[float]]) -> float:
    """sqrt(mean over positions of the variance over steps) / mean |value|, on the f32 values."""
    a = np.array(vectors, dtype=np.float32).astype(np.float64)
    return float(np.sqrt(a.var(axis=0).mean()) / np.abs(a).mean())


# A softmax's rows always sum to 1 (l1 = 16 rows) and here its sumsq does not move either; only
# the 16 sampled probabilities show that the tensor changes from step to step.
SOFTMAX_SAMPLES = [
    [0.5, 0.25, 0.125, 0.125] * 4,
    [0.25, 0.5, 0.125, 0.125] * 4,
    [0.125, 0.125, 0.5, 0.25] * 4,
    [0.125, 0.25, 0.125, 0.5] * 4,
]


def test_conserved_l1_and_steady_sumsq_with_a_changing_elemsig_is_not_stationary():
    rows = [r for step, sig in enumerate(SOFTMAX_SAMPLES) for r in tensor_rows(step, 16.0, 5.5, sig)]
    (r,) = cross_step(tidy_frame(rows)).to_dicts()
    assert (r["steps"], r["l1_cv"], r["sumsq_cv"]) == (4, 0.0, 0.0)
    assert r["elemsig_cv"] == pytest.approx(np_elemsig_cv(SOFTMAX_SAMPLES), rel=1e-12)
    assert r["elemsig_cv"] > STATIONARY_CV and r["basis"] == "l1+sumsq+elemsig"
    assert r["stationary"] is False
    assert r["verdict"] == f"drifting (l1 cv 0, sumsq cv 0, elemsig cv {r['elemsig_cv']:.2g}) → temporal coherence"


def test_without_elemsig_the_verdict_says_what_it_rests_on():
    no_sig = [r for step in range(4) for r in tensor_rows(step, 16.0, 5.5, None)]
    zeros = [r for step in range(4) for r in tensor_rows(step, 16.0, 5.5, [0.0] * 16)]
    partial = [r for step in range(4) for r in tensor_rows(step, 16.0, 5.5, SOFTMAX_SAMPLES[0] if step < 2 else None)]
    for rows, why in (
        (no_sig, "no elemsig recorded"),
        (zeros, "elemsig samples all zero"),
        (partial, "elemsig recorded at 2 of 4 steps"),
    ):
        (r,) = cross_step(tidy_frame(rows)).to_dicts()
        assert (r["stationary"], r["basis"], r["elemsig_cv"]) == (True, "l1+sumsq", None), why
        assert r["verdict"] == f"stationary across steps (l1+sumsq only: {why}) → precompute / prepack"
    report = mine(tidy_frame(no_sig))
    assert (
        "Across 4 steps: 1 of 1 tensors are stationary (precompute / prepack): 1 lhs (1 of them without a "
        "usable elemsig fingerprint); 0 change from step to step." in render(report, "findings")
    )


def test_bit_identical_weights_stay_stationary():
    w = [0.3, -1.25, 0.0, 2.0] * 4
    (r,) = cross_step(
        tidy_frame([r for step in range(3) for r in tensor_rows(step, 13.0, 9.0, w, role="rhs")])
    ).to_dicts()
    assert (r["steps"], r["l1_cv"], r["sumsq_cv"], r["basis"], r["stationary"]) == (
        3,
        0.0,
        0.0,
        "l1+sumsq+elemsig",
        True,
    )
    assert r["elemsig_cv"] <= 1e-15  # identical values: a variance of rounding error at most
    assert r["verdict"] == "stationary across steps → precompute / prepack"


def two_runs(steps_a: int, steps_b: int) -> pl.DataFrame:
    """Run 0 and run 1 of one site: a fixed weight (rhs) and a changing input (lhs) with a sidecar-less cost."""
    rows: list[tuple] = []
    for run, steps in ((0, steps_a), (1, steps_b)):
        for step in range(steps):
            rows += tensor_rows(step, 13.0, 9.0, [0.5] * 16, run=run, site="fc", role="rhs")
            rows += tensor_rows(step, 10.0 + step, 20.0 + step, SOFTMAX_SAMPLES[step % 4], run=run, site="fc")
    return tidy_frame(rows)


def test_two_steps_give_no_verdict_in_any_format():
    report = mine(two_runs(2, 2), {"fc": 1000})
    cross = report.cross_step
    assert cross["stationary"].to_list() == [None] * 4
    assert cross["verdict"].to_list() == [f"too few steps (2 < {MIN_STEPS_STATIONARY})"] * 4
    assert cross["l1_cv"].to_list()[:2] == [0.0, pytest.approx(0.5 / 10.5, rel=1e-12)]  # still measured
    opps = report.opportunities
    assert opps["steps"].to_list() == [2, 2] and opps["recur"].to_list() == [0.0, 0.0]
    assert opps.select("action", "reuse", "savings").null_count().row(0) == (2, 2, 2)
    assert opps["cost_share"].to_list() == [1.0, 1.0]
    assert opps["recommendation"].to_list() == [f"too few steps (2 < {MIN_STEPS_REUSE})"] * 2
    assert report.aggregate.rows() == [(0, "llvm-cpu", "attn", 1, None), (1, "llvm-cpu", "attn", 1, None)]
    doc = json.loads(opscope.render(report, "json"))
    assert [r["stationary"] for r in doc["cross_step"]] == [None] * 4
    assert [(r["action"], r["reuse"], r["savings"]) for r in doc["opportunities"]] == [(None, None, None)] * 2
    assert [r["savings"] for r in doc["aggregate"]] == [None, None]
    for text in (opscope.render(report), opscope.render(report, "markdown")):
        assert "too few steps (2 < 3)" in text and "too few steps (2 < 4)" in text
        assert "stationary across" not in text and "memoize —" not in text and "delta-compute —" not in text
    findings = render(report, "findings")
    assert "are stationary (" not in findings and "nothing to memoize" not in findings
    assert "Across 2 steps: too few steps (2 < 3) to say which of 4 tensors are stationary." in findings
    assert "Temporal reuse: too few steps (2 < 4) to judge memoize or delta-compute for any site's input." in findings


def test_verdicts_only_where_a_series_has_enough_steps():
    """Run 0 has 4 steps, run 1 has 2: only run 0 is judged, and the findings count only it."""
    report = mine(two_runs(4, 2), {"fc": 1000})
    cross = report.cross_step
    assert cross.select("run_id", "role", "stationary").rows() == [
        (0, "rhs", True),
        (0, "lhs", False),
        (1, "rhs", None),
        (1, "lhs", None),
    ]
    # invariants: a verdict exactly where there are enough steps; stationary only below every threshold
    assert ((cross["steps"] >= MIN_STEPS_STATIONARY) == cross["stationary"].is_not_null()).all()
    for r in cross.filter(pl.col("stationary")).iter_rows(named=True):
        assert max(r["l1_cv"], r["sumsq_cv"], r["elemsig_cv"]) < STATIONARY_CV
    opps = report.opportunities
    assert ((opps["steps"] >= MIN_STEPS_REUSE) == opps["action"].is_not_null()).all()
    assert opps.select("run_id", "action").rows() == [(0, "none"), (1, None)]  # judged first, then by run
    assert report.aggregate["savings"].to_list() == [0.0, None]
    findings = render(report, "findings")
    assert (
        "Across 4 steps: 1 of 2 tensors are stationary (precompute / prepack): 1 rhs; 1 change from step to "
        "step. 2 more have too few steps (2 < 3)."
    ) in findings
    assert (
        "No site's input repeats or drifts slowly across the 4 steps: nothing to memoize or delta-compute. "
        "1 more has too few steps (2 < 4)."
    ) in findings


PYRAMID = ((64, 128), (128, 64), (64, 512), (512, 64))
ROWS_S = 32
STEPS = 20


@pytest.fixture(scope="module")
def replay(tmp_path_factory):
    """An `opscope-replay`-like CSV: run 0 replays a pool of 4 inputs, run 1 a slow walk; + `.sites`."""
    weights = [
        (sample("gaussian", (k, n), 0xA11CE + i) * np.sqrt(2.0 / k)).astype(np.float32)
        for i, (k, n) in enumerate(PYRAMID)
    ]
    sites = [f"pyramid.{i}#{i}" for i in range(len(PYRAMID))]
    rng = np.random.Generator(np.random.Philox(99))
    pool = [rng.standard_normal((ROWS_S, 64)).astype(np.float32) for _ in range(4)]
    picks = rng.integers(0, 4, STEPS)
    walk = rng.standard_normal((ROWS_S, 64)).astype(np.float32)
    rows: list = []
    lhs_sk: dict[tuple[int, str], list[dict[str, np.ndarray]]] = {}
    for run in (0, 1):
        for step in range(STEPS):
            if run == 0:
                h = pool[picks[step]]
            else:
                if step:
                    walk = (walk + 0.03 * rng.standard_normal(walk.shape)).astype(np.float32)
                h = walk
            for site, w in zip(sites, weights):
                out = h @ w
                sk = sketch_rows(rows, run, step, "replay", site, {"lhs": h, "rhs": w, "out": out}, mkn=(ROWS_S, 64, 0))
                lhs_sk.setdefault((run, site), []).append(sk["lhs"])
                h = np.maximum(out, 0)
    path = write_tidy_csv(tmp_path_factory.mktemp("replay") / "replay.csv", rows)
    flops = {s: 2 * ROWS_S * k * n for s, (k, n) in zip(sites, PYRAMID)}
    path.with_name(path.name + ".sites").write_text("site,flops\n" + "".join(f"{s},{f}\n" for s, f in flops.items()))
    repeats = sum(picks[i] in picks[:i] for i in range(1, STEPS))
    return path, picks, repeats, flops, lhs_sk


def np_recur_drift(vecs: list[np.ndarray]) -> tuple[float, float]:
    """§3.10's recur and drift over one series of fingerprints (a direct double loop)."""

    def dist(a, b):
        return np.inf if len(a) != len(b) else np.linalg.norm(a - b) / (np.linalg.norm(a) + 1e-9)

    n = len(vecs)
    recur = sum(any(dist(vecs[i], vecs[j]) < 1e-3 for j in range(i)) for i in range(1, n)) / (n - 1)
    drift = float(np.mean([dist(vecs[i], vecs[i - 1]) for i in range(1, n)]))
    return recur, drift


def test_opportunities_memoize_replay_and_delta_compute_walk(replay):
    path, picks, repeats, flops, lhs_sk = replay
    report = mine_paths(path)  # finds replay.csv.sites beside it
    assert report.costs_source == str(path) + ".sites"
    opps = report.opportunities
    assert opps.height == 2 * len(PYRAMID)
    total = sum(flops.values())
    for r in opps.iter_rows(named=True):
        recur, drift = np_recur_drift([sk["elemsig"] for sk in lhs_sk[(r["run_id"], r["site"])]])
        assert r["steps"] == STEPS
        assert r["recur"] == pytest.approx(recur, rel=1e-12)
        assert r["drift"] == pytest.approx(drift, rel=RTOL, abs=1e-6)
        assert r["flops"] == flops[r["site"]] and r["cost_share"] == flops[r["site"]] / total
        if r["run_id"] == 0:
            assert r["recur"] == repeats / (STEPS - 1) and r["action"] == "memoize"
            assert r["savings"] == pytest.approx(r["cost_share"] * r["recur"], rel=1e-12)
        else:
            assert r["recur"] == 0.0 and r["action"] == "delta-compute" and r["drift"] < 0.3
            assert r["savings"] == pytest.approx(r["cost_share"] * (1 - r["drift"]), rel=1e-12)
    savings = opps["savings"].to_list()
    assert all(a >= b for a, b in zip(savings, savings[1:]))
    agg = report.aggregate
    assert agg.select("run_id", "sites").rows() == [(0, 4), (1, 4)]
    for run in (0, 1):
        want = opps.filter(pl.col("run_id") == run)["savings"].sum()
        assert agg.filter(pl.col("run_id") == run)["savings"][0] == pytest.approx(want, rel=1e-12)
    assert agg.filter(pl.col("run_id") == 0)["savings"][0] == pytest.approx(repeats / (STEPS - 1), rel=1e-12)


def test_opportunities_fall_back_to_moments_and_hist(replay):
    path, picks, repeats, flops, lhs_sk = replay
    df = read_tidy(path).filter(pl.col("stat") != "elemsig")
    opps = mine(df, flops).opportunities
    for r in opps.iter_rows(named=True):
        vecs = [
            np.concatenate([[sk["mean"][0], sk["sumsq"][0], sk["l1"][0], sk["nnz"][0]], sk["hist"]])
            for sk in lhs_sk[(r["run_id"], r["site"])]
        ]
        recur, drift = np_recur_drift(vecs)
        assert r["recur"] == pytest.approx(recur, rel=1e-12)
        assert r["drift"] == pytest.approx(drift, rel=RTOL, abs=1e-6)
    assert opps.filter(pl.col("run_id") == 0)["action"].to_list() == ["memoize"] * 4


def test_opportunities_without_costs_order_by_reuse(replay):
    path = replay[0]
    opps = mine(read_tidy(path)).opportunities
    assert opps["cost_share"].to_list() == [0.0] * opps.height
    reuse = opps["reuse"].to_list()
    assert all(a >= b for a, b in zip(reuse, reuse[1:]))


def test_single_step_has_no_temporal_sections(sweep):
    report = mine_paths(sweep[0])
    assert report.cross_step is None and report.opportunities is None and report.aggregate is None
    assert "Cross-step" not in opscope.render(report)


# The columns of a cross-step table, in order: the frame and its JSON rows both carry them.
CROSS_STEP_COLUMNS = [
    "run_id",
    "backend",
    "dist",
    "site",
    "role",
    "steps",
    "l1_mean",
    "l1_cv",
    "sumsq_cv",
    "elemsig_cv",
    "basis",
    "stationary",
    "verdict",
]


def test_every_section_on_empty_input():
    report = mine(empty_tidy())
    assert report.rows == 0 and report.steps == 0
    assert report.signals.height == 0 and report.ranked.height == 0
    assert "(none" in opscope.render(report)
    doc = json.loads(opscope.render(report, "json"))
    assert doc["signals"] == [] and doc["cross_step"] is None
    assert opscope.render(report, "markdown").startswith("# opscope mine")
    assert "Across" not in render(report, "findings")
    # the temporal miners themselves, called directly on no rows
    empty = empty_tidy()
    cross = cross_step(empty)
    assert cross.height == 0 and cross.columns == CROSS_STEP_COLUMNS
    opps = opportunities(empty)
    assert opps.height == 0 and "action" in opps.columns and "recommendation" in opps.columns
    agg = aggregate(opps, appearance_order(empty))
    assert agg.height == 0 and agg.columns == ["run_id", "backend", "dist", "sites", "savings"]


def test_renderers(seq, replay):
    report = mine_paths([seq[0], replay[0]], costs=replay[0].with_name(replay[0].name + ".sites"))
    doc = json.loads(opscope.render(report, "json"))
    assert list(doc) == [
        "schema",
        "rows",
        "steps",
        "min_steps",
        "counts",
        "notes",
        "site_costs",
        "signals",
        "ranked",
        "cross_step",
        "opportunities",
        "aggregate",
        "coverage",
        "dynamics",
    ]
    assert doc["schema"] == "opscope-mine/4" and doc["rows"] == report.rows
    assert doc["min_steps"] == {"stationary": MIN_STEPS_STATIONARY, "reuse": MIN_STEPS_REUSE}
    assert list(doc["cross_step"][0]) == CROSS_STEP_COLUMNS
    assert len(doc["signals"]) == report.signals.height and len(doc["opportunities"]) == report.opportunities.height
    assert set(doc["signals"][0]) == {
        "backend",
        "dist",
        "site",
        "role",
        "observations",
        "numel",
        "density",
        "zchan",
        "outlier",
        "histtop",
        "pos_cv",
        "adj",
        "exploit",
        "score",
        "suggestion",
    }
    text = opscope.render(report)
    assert "pyramid.3#3" in text and "Aggregate recoverable compute" in text
    header = next(line for line in text.splitlines() if line.startswith("backend"))
    assert header.split()[:5] == ["backend", "dist", "site", "role", "obs"]
    md = opscope.render(report, "markdown")
    assert "| backend | dist | site | role |" in md and "## Temporal opportunities" in md
    with pytest.raises(OpscopeError, match="unknown output format 'html'"):
        render(report, "html")


def test_long_site_names_are_kept_or_shortened_in_the_middle(tmp_path):
    rows: list = []
    x = sample("gaussian", (16, 16), 1)
    names = ["encoder.layer.11.attention.self.query", "model." + "block." * 12 + "mlp.down_proj"]
    for site in names:
        sketch_rows(rows, 0, 0, "gaussian", site, {"lhs": x}, mkn=(16, 16, 16))
    text = opscope.render(mine(read_tidy(write_tidy_csv(tmp_path / "s.csv", rows))))
    assert names[0] in text
    assert names[1] not in text and "model.block.block.block…lock.block.mlp.down_proj" in text


def test_mine_rejects_frames_without_tidy_columns():
    with pytest.raises(OpscopeError, match="lacks tidy columns value"):
        mine(empty_tidy().drop("value"))


def test_reads_what_opscope_record_writes(tmp_path):
    """A Recorder CSV, its sidecar and its Parquet export in one directory: mined once, costs found."""
    from opscope.record.recorder import Recorder, write_parquet, write_site_costs

    x = sample("sparse90", (64, 32), 3)
    sk = host_stats(x)
    path = tmp_path / "rec.csv"
    with Recorder(path, durable=False) as rec:
        for step in range(MIN_STEPS_REUSE):
            rec.record_values(
                0,
                step,
                "llvm-cpu",
                "sparse90",
                64,
                32,
                16,
                {("fc1", "lhs", k): v for k, v in sk.items()},
                {("fc1", "lhs"): x.size},
            )
    write_site_costs(path.with_name("rec.csv.sites"), {"fc1": 65536})
    write_parquet(path, tmp_path / "rec.parquet")
    report = mine_paths(tmp_path)
    assert report.notes == (f"{path}: skipped, rec.parquet beside it holds its Parquet export",)
    assert report.rows == MIN_STEPS_REUSE * sum(v.size for v in sk.values())
    assert report.costs_source == str(tmp_path / "rec.csv.sites")
    row = report.signals.row(0, named=True)
    assert row["observations"] == MIN_STEPS_REUSE and row["exploit"] == "sparse-gemm"
    assert row["density"] == pytest.approx(np.count_nonzero(x) / x.size, rel=RTOL)
    opp = report.opportunities.row(0, named=True)
    assert opp["recur"] == 1.0 and opp["action"] == "memoize" and opp["cost_share"] == 1.0
