"""The numeric kernels of `opscope.probe`: the reference's tests (§3.5, §3.15) and cross-checks.

Every stat is checked against an independent definition written here (explicit loops over a
small matrix); the decompositions against the reference's recovery tests; the probe's verdicts
against the synthetic distributions of `opscope.drive.synthetic`.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from opscope.drive.synthetic import sample
from opscope.errors import OpscopeError
from opscope.probe import decompose, stats
from opscope.probe.stats import Probe
from opscope.probe.svd import SVD_SEED, XorShift64, truncated_svd, truncated_svd_power

SVDS = [truncated_svd, truncated_svd_power]


def _rel(a, b) -> float:
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return float(np.linalg.norm(a - b) / np.linalg.norm(a))


def _rank2_12x9() -> np.ndarray:
    """The reference's svd_reconstructs_rank2 matrix: u1 v1ᵀ + u2 v2ᵀ from a modular pattern."""

    def mk(seed, n):
        return np.array([((i * 7 + seed * 3) % 11) - 5.0 for i in range(n)])

    return np.outer(mk(1, 12), mk(2, 9)) + np.outer(mk(3, 12), mk(4, 9))


def _round_half_away(v: float) -> float:
    return math.copysign(math.floor(abs(v) + 0.5), v)


# -- svd --------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("svd", SVDS, ids=lambda f: f.__name__)
def test_svd_reconstructs_rank2(svd):
    a = _rank2_12x9()
    u, s, v = svd(a, 2)
    assert u.shape == (12, 2) and s.shape == (2,) and v.shape == (9, 2)
    assert _rel(a, (u * s) @ v.T) < 1e-4


@pytest.mark.parametrize("svd", SVDS, ids=lambda f: f.__name__)
def test_svd_clips_rank_and_zeroes_past_true_rank(svd):
    a = _rank2_12x9()
    u, s, v = svd(a, 50)
    assert s.shape == (9,) and u.shape == (12, 9) and v.shape == (9, 9)
    assert np.all(s[2:] < 1e-6 * s[0])
    assert svd(a, 0)[1].shape == (1,)


def test_power_and_exact_svd_agree():
    rng = np.random.default_rng(7)
    q1, _ = np.linalg.qr(rng.standard_normal((20, 20)))
    q2, _ = np.linalg.qr(rng.standard_normal((15, 15)))
    sig = np.array([10.0, 7.0, 5.0, 3.5, 2.0, 1.2, 0.8, 0.5, 0.3, 0.2, 0.1, 0.05, 0.03, 0.02, 0.01])
    a = q1[:, :15] * sig @ q2.T
    up, sp, vp = truncated_svd_power(a, 4)
    ue, se, ve = truncated_svd(a, 4)
    np.testing.assert_allclose(sp, sig[:4], rtol=1e-4)
    np.testing.assert_allclose(se, sig[:4], rtol=1e-10)
    r2 = (ue[:, :2] * se[:2]) @ ve[:, :2].T
    assert _rel(r2, (up[:, :2] * sp[:2]) @ vp[:, :2].T) < 1e-4
    # the sign convention: largest-|.| entry of each U column is positive, and deterministic
    assert np.all(ue[np.argmax(np.abs(ue), axis=0), np.arange(4)] > 0)
    np.testing.assert_array_equal(truncated_svd(a, 4)[0], ue)
    np.testing.assert_array_equal(truncated_svd_power(a, 4)[0], up)


def test_xorshift64_matches_its_definition():
    state = SVD_SEED | 1
    want = []
    for _ in range(5):
        state ^= (state << 13) & (2**64 - 1)
        state ^= state >> 7
        state ^= (state << 17) & (2**64 - 1)
        want.append(state)
    g = XorShift64(SVD_SEED)
    assert [g.next_u64() for _ in range(5)] == want
    assert XorShift64(0).state == 1  # seed | 1
    u = XorShift64(3).uniforms(1000)
    s = XorShift64(3).signeds(1000)
    assert u.min() >= 0 and u.max() < 1 and s.min() >= -1 and s.max() <= 1
    assert s.min() < -0.9 and s.max() > 0.9 and abs(u.mean() - 0.5) < 0.05


# -- decompositions -------------------------------------------------------------------------------------------------


def test_factorize_recovers_low_rank():
    rng = np.random.default_rng(1)
    w = rng.standard_normal((64, 2)) @ rng.standard_normal((2, 48))
    u, v, r = decompose.factorize(w, 4)
    assert r == 4 and u.shape == (64, 4) and v.shape == (4, 48)
    assert stats.rel_err(w, decompose.lowrank_reconstruct(u, v)) < 1e-3
    # the rank reveal zeroes the two redundant directions instead of normalizing noise
    norms = np.linalg.norm(u, axis=0)
    assert np.count_nonzero(norms > 0.5) == 2 and np.count_nonzero(norms == 0) == 2
    assert decompose.factorize(w, 999)[2] == 48 and decompose.factorize(w, 0)[2] == 1


def test_lowrank_is_the_best_rank_r():
    rng = np.random.default_rng(2)
    w = rng.standard_normal((30, 20))
    a, b = decompose.lowrank(w, 5)
    assert a.shape == (30, 5) and b.shape == (5, 20)
    s = np.linalg.svd(w, compute_uv=False)
    want = np.sqrt((s[5:] ** 2).sum() / (s**2).sum())
    assert abs(_rel(w, decompose.lowrank_reconstruct(a, b)) - want) < 1e-6
    assert decompose.lowrank_params(30, 20, 5) == 250


def test_monarch_operator_matches_dense():
    m = 4
    rng = np.random.default_rng(3)
    w1, w2 = rng.standard_normal((m, m, m)), rng.standard_normal((m, m, m))
    x = rng.standard_normal((5, m * m))
    dense = decompose.monarch_reconstruct(w1, w2, m)
    assert dense.shape == (16, 16) and dense.dtype == np.float32
    assert _rel(x @ dense.astype(np.float64), decompose.monarch_matmul(x, w1, w2, m)) < 1e-5
    np.testing.assert_allclose(decompose.monarch_matmul(np.eye(m * m), w1, w2, m), dense, rtol=1e-6, atol=1e-6)
    # the dense entry by its definition
    ri, j, lo, s = 1, 2, 3, 0  # in group, in index, out group, out index
    assert abs(dense[ri * m + j, lo * m + s] - w1[ri, j, lo] * w2[lo, s, ri]) < 1e-5
    assert decompose.monarch_params(m) == 128


def test_monarch_projects_true_monarch_exactly():
    m = 4
    rng = np.random.default_rng(4)
    w = decompose.monarch_reconstruct(rng.standard_normal((m, m, m)), rng.standard_normal((m, m, m)), m)
    p1, p2 = decompose.monarch_project(w, m)
    x = rng.standard_normal((6, m * m))
    assert _rel(x @ w.astype(np.float64), decompose.monarch_matmul(x, p1, p2, m)) < 1e-3


def test_monarch_project_is_a_rank1_fit_per_block():
    """Projection of a generic W equals the per-block best rank-1 fit, computed here block by block."""
    m = 3
    rng = np.random.default_rng(5)
    w = rng.standard_normal((m * m, m * m))
    got = decompose.monarch_reconstruct(*decompose.monarch_project(w, m), m).astype(np.float64)
    for lo in range(m):
        for ri in range(m):
            blk = np.array([[w[ri * m + j, lo * m + s] for j in range(m)] for s in range(m)])
            u, sv, vt = np.linalg.svd(blk)
            best = sv[0] * np.outer(u[:, 0], vt[0])
            fit = np.array([[got[ri * m + j, lo * m + s] for j in range(m)] for s in range(m)])
            np.testing.assert_allclose(fit, best, atol=1e-5)


def test_monarch_blocks():
    assert [decompose.monarch_blocks(n) for n in (0, 1, 15, 16, 64, 4096, 4097)] == [None, 1, None, 4, 8, 64, None]


def test_tucker_recovers_low_multilinear_rank():
    rng = np.random.default_rng(6)
    core = rng.standard_normal((2, 2, 2))
    fs = [rng.standard_normal((d, 2)) for d in (6, 5, 4)]
    x = np.einsum("ijk,ai,bj,ck->abc", core, *fs)
    g, factors = decompose.hosvd(x, (3, 3, 3))
    assert g.shape == (3, 3, 3) and [f.shape for f in factors] == [(6, 3), (5, 3), (4, 3)]
    rec = decompose.tucker_reconstruct(g, factors)
    assert rec.shape == (6, 5, 4) and rec.dtype == np.float32
    assert _rel(x, rec) < 1e-3
    assert decompose.tucker_params((6, 5, 4), (3, 3, 3)) == 27 + 18 + 15 + 12


def test_hosvd_keeps_clipped_ranks_past_the_unfolding_rank():
    x = np.random.default_rng(8).standard_normal((8, 2, 2))
    g, factors = decompose.hosvd(x, (6, 9, 0))
    assert g.shape == (6, 2, 1) and factors[0].shape == (8, 6)
    assert np.all(factors[0][:, 4:] == 0)  # the mode-0 unfolding [8, 4] has rank 4


def test_tt_recovers_low_bond_rank():
    rng = np.random.default_rng(9)
    dims, bond = (4, 5, 3, 4), (1, 2, 2, 2, 1)
    true = [rng.standard_normal((bond[k], d, bond[k + 1])) for k, d in enumerate(dims)]
    x = decompose.tt_reconstruct(true).astype(np.float64)
    assert x.shape == dims
    cores = decompose.tt_svd(x, dims, 3)
    assert [c.shape[1] for c in cores] == list(dims)
    assert cores[0].shape[0] == 1 and cores[-1].shape[2] == 1
    assert all(a.shape[2] == b.shape[0] for a, b in zip(cores, cores[1:]))
    assert _rel(x, decompose.tt_reconstruct(cores)) < 1e-3
    assert decompose.tt_params(cores) == sum(c.shape[0] * c.shape[1] * c.shape[2] for c in cores)


def test_tt_reconstruct_matches_the_chain_product():
    rng = np.random.default_rng(10)
    cores = [rng.standard_normal(s) for s in ((1, 2, 3), (3, 3, 2), (2, 2, 1))]
    want = np.zeros((2, 3, 2))
    for i in range(2):
        for j in range(3):
            for k in range(2):
                want[i, j, k] = (cores[0][:, i, :] @ cores[1][:, j, :] @ cores[2][:, k, :])[0, 0]
    np.testing.assert_allclose(decompose.tt_reconstruct(cores), want, rtol=1e-5, atol=1e-6)


def test_balanced_factor():
    assert [decompose.balanced_factor(n) for n in (1, 7, 12, 16, 768, 4096)] == [
        (1, 1),
        (1, 7),
        (3, 4),
        (4, 4),
        (24, 32),
        (64, 64),
    ]


# -- stats against independent definitions --------------------------------------------------------------------------


def _quant_loop(x, bits, per_row, group=0):
    levels = max(2 ** (bits - 1) - 1, 1)
    rows, cols = x.shape
    out = np.zeros_like(x, dtype=np.float64)
    for r in range(rows):
        spans = [(0, cols)] if not group else [(g, g + group) for g in range(0, cols, group)]
        for lo, hi in spans:
            amax = np.abs(x).max() if not per_row else max(abs(v) for v in x[r, lo:hi])
            scale = 1.0 if amax < 1e-20 else amax / levels
            for c in range(lo, hi):
                out[r, c] = min(max(_round_half_away(x[r, c] / scale), -levels), levels) * scale
    return out


def _err(x, q):
    return math.sqrt(float(((x - q) ** 2).sum() / (x**2).sum()))


def test_quantize_round_trips_match_a_loop():
    rng = np.random.default_rng(11)
    x = rng.standard_normal((6, 8)) * np.array([[0.1], [1], [10], [0], [3], [0.5]])
    for bits in (3, 4, 8):
        for scope, per_row in (("tensor", False), ("row", True)):
            want = _quant_loop(x, bits, per_row)
            got = stats.quantize(x, bits, scope)
            assert got.dtype == np.float32
            np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)
        assert abs(stats.quant_error(x, bits) - _err(x, _quant_loop(x, bits, False))) < 1e-12
        assert abs(stats.per_channel_quant_error(x, bits) - _err(x, _quant_loop(x, bits, True))) < 1e-12
        np.testing.assert_allclose(stats.group_quant_error(x, bits, 4), _err(x, _quant_loop(x, bits, True, 4)))
        np.testing.assert_allclose(stats.quantize(x, bits, "row", 4), _quant_loop(x, bits, True, 4), atol=1e-6)
        rows = stats.row_quant_errors(x, bits)
        q = _quant_loop(x, bits, True)
        assert rows[3] == 0.0
        for r in (0, 1, 2, 4, 5):
            assert abs(rows[r] - _err(x[r], q[r])) < 1e-12
    # bits=1 keeps one level; an all-zero tensor has no error
    np.testing.assert_allclose(stats.quantize(x, 1, "row"), _quant_loop(x, 1, True), atol=1e-6)
    assert stats.quant_error(np.zeros((3, 3)), 4) == 0.0 == stats.per_channel_quant_error(np.zeros((3, 3)), 4)


def test_quantize_group_must_divide_the_columns():
    with pytest.raises(OpscopeError, match="do not split into groups of 3"):
        stats.quantize(np.ones((2, 8)), 4, "row", 3)
    with pytest.raises(OpscopeError, match="scope must be 'tensor' or 'row'"):
        stats.quantize(np.ones((2, 8)), 4, "col")


def test_rounding_is_half_away_from_zero():
    v = np.array([0.5, -0.5, 1.5, -1.5, 2.5, -2.5, 0.49999999999999994, 2.0**52 + 1, 0.2, -0.7])
    np.testing.assert_array_equal(stats.round_half_away(v), [1, -1, 2, -2, 3, -3, 0, 2.0**52 + 1, 0, -1])
    # levels 7 at 4 bits: v/scale = ±2.5 must go to ±3 (np.round would give ±2)
    x = np.array([[2.5, -2.5, 7.0, -7.0]])
    np.testing.assert_array_equal(stats.quantize(x, 4, "row"), [[3, -3, 7, -7]])
    assert stats.cardinality(np.array([0.0005, -0.0005, 0.0015]), 1000.0) == 3  # 1, -1, 2


def test_best_bitwidth():
    rng = np.random.default_rng(12)
    x = rng.standard_normal((16, 64))
    errs = {b: _err(x, _quant_loop(x, b, True)) for b in (3, 4, 6, 8)}
    for budget in (0.5, 0.1, 0.03, 0.005, 1e-9):
        want = next((b for b in (3, 4, 6, 8) if errs[b] < budget), None)
        assert stats.best_bitwidth(x, budget) == want


def test_outlier_channels_match_their_definition():
    rng = np.random.default_rng(13)
    x = rng.standard_normal((10, 9))
    x[:, 2] *= 40
    x[4, 7] = -60.0
    cmax = [max(abs(x[r, c]) for r in range(10)) for c in range(9)]
    med = sorted(cmax)[9 // 2]
    count, ratio = stats.outlier_channels(x, 6.0)
    assert count == sum(c > 6.0 * med for c in cmax) == 2
    assert abs(ratio - max(cmax) / med) < 1e-12
    assert stats.outlier_channels(np.zeros((2, 3)), 6.0) == (0, 0.0)


def _nm_loop(x, n, m):
    out = np.zeros_like(x)
    for r in range(x.shape[0]):
        for lo in range(0, x.shape[1], m):
            grp = list(range(lo, min(lo + m, x.shape[1])))
            keep = sorted(grp, key=lambda c: -abs(x[r, c]))[:n]  # stable: earlier wins ties
            for c in keep:
                out[r, c] = x[r, c]
    return out


def test_nm_prune_matches_a_loop():
    rng = np.random.default_rng(14)
    x = rng.standard_normal((5, 11))
    x[0, :4] = [1.0, -1.0, 1.0, -1.0]  # ties keep the earlier entries
    for n, m in ((2, 4), (1, 3), (3, 8), (5, 4)):
        want = _nm_loop(x, n, m)
        np.testing.assert_array_equal(stats.nm_prune(x, n, m), want.astype(np.float32))
        assert abs(stats.nm_sparsity_error(x, n, m) - _err(x, want)) < 1e-6
    assert stats.nm_sparsity_error(x, 4, 4) == 0.0


def test_ternary_matches_its_definition():
    rng = np.random.default_rng(15)
    x = rng.standard_normal((7, 9))
    delta = 0.7 * np.abs(x).mean()
    alpha = np.mean([abs(v) for v in x.ravel() if abs(v) > delta])
    want = np.array([[alpha if v > delta else -alpha if v < -delta else 0.0 for v in row] for row in x])
    np.testing.assert_allclose(stats.ternary(x), want, rtol=1e-6)
    assert abs(stats.ternary_error(x) - _err(x, want)) < 1e-12
    w = np.array([[0.8, 0.0, -0.8, 0.0], [0.0, 0.8, 0.0, -0.8]])
    assert stats.ternary_error(w) < 1e-12 and stats.ternary_error(np.zeros((2, 2))) == 0.0


def test_cardinality():
    vals = np.array([-1.5, -0.25, 0.0, 0.125, 0.5, 2.0, 3.75])
    x = np.random.default_rng(16).choice(vals, size=(20, 30))
    x[0, :7] = vals
    assert stats.cardinality(x) == 7
    assert stats.cardinality(x, 1.0) == 5  # -1.5 -> -2, -0.25 -> -0 = 0, 0.125 -> 0, 0.5 -> 1, 2, 3.75 -> 4
    assert stats.cardinality(np.arange(1000.0), 1.0, cap=100) == 100


def test_gaps_and_norms():
    a = np.array([[3.0, 4.0]])
    assert stats.frob(a) == 5.0
    assert abs(stats.rel_err(a, a * 1.1) - 0.5 / (5 + 1e-9)) < 1e-12
    assert abs(stats.block_identity_gap(a, a + [[0.0, 0.05]]) - 0.05 / (5 + 1e-9)) < 1e-12
    assert stats.rel_err(np.zeros(3), np.zeros(3)) == 0.0


def test_stable_rank_and_spectrum():
    rng = np.random.default_rng(17)
    q1, _ = np.linalg.qr(rng.standard_normal((40, 40)))
    q2, _ = np.linalg.qr(rng.standard_normal((30, 30)))
    sig = np.concatenate([[10.0], np.linspace(3.0, 0.1, 29)])  # a clear gap after the first
    x = q1[:, :30] * sig @ q2.T
    want = np.linalg.norm(x, "fro") ** 2 / np.linalg.norm(x, ord=2) ** 2
    assert abs(stats.stable_rank(x) - want) < 1e-3 * want
    assert abs(stats.sigma_max(x) - 10.0) < 1e-6
    np.testing.assert_allclose(stats.spectrum(x), sig, rtol=1e-10)
    assert stats.stable_rank(np.zeros((3, 4))) == 0.0 == stats.sigma_max(np.zeros((3, 4)))


def test_effective_rank_counts_the_whole_energy():
    s = np.array([3.0, 2.0, 1.0, 1.0, 1.0])  # energies 9, 4, 1, 1, 1 of 16
    assert stats.effective_rank(s, 0.5) == 1  # 9/16 >= 0.5
    assert stats.effective_rank(s, 0.8) == 2  # 13/16 = 0.8125
    assert stats.effective_rank(s, 0.9) == 4  # 15/16
    assert stats.effective_rank(s, 1.0) == 5
    assert stats.effective_rank(s, 0.0) == 1
    assert stats.effective_rank(np.zeros(4), 0.9) == 1
    assert stats.effective_rank(s[::-1], 0.8) == 2  # order-free


# -- the probe and its verdict --------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def probes() -> dict[str, Probe]:
    return {d: stats.probe(sample(d, 128, 128, 42)) for d in ("gaussian", "lowrank", "quantized", "sparse90")}


def test_probe_lowrank(probes):
    p = probes["lowrank"]
    assert p.stable_rank < 0.10 * p.cols and p.effective_rank_99 == 4
    assert p.nm24 >= 0.10 and p.cardinality > 32
    assert p.verdict == "low rank → factored matmul"


def test_probe_sparse90(probes):
    # 90 % zeros: almost every group of 4 holds at most 2 nonzeros, so 2:4 pruning is near-lossless
    p = probes["sparse90"]
    assert p.density < 0.2 and p.nm24 < 0.10
    assert p.verdict == "2:4 near-lossless → sparse tensor cores"


def test_probe_quantized(probes):
    p = probes["quantized"]
    assert p.cardinality <= 32 and p.nm24 >= 0.10
    assert p.verdict == "LUT/palettized"


def test_probe_gaussian(probes):
    p = probes["gaussian"]
    assert p.density == 1.0 and p.stable_rank > 0.10 * p.cols and p.cardinality > 32 and p.outliers == 0
    assert p.int4_channel >= 0.05 and p.best_bits in (6, 8)
    assert p.verdict == f"int{p.best_bits}"
    d = p.to_dict()
    assert d["verdict"] == p.verdict and d["rows"] == 128 and set(d) >= {"nm24", "best_bits", "effective_rank_90"}


def _probe(**kw) -> Probe:
    base = dict(
        rows=64,
        cols=64,
        stable_rank=30.0,
        effective_rank_90=40,
        effective_rank_99=60,
        int4_tensor=0.2,
        int4_channel=0.1,
        nm24=0.4,
        ternary=0.4,
        cardinality=5000,
        best_bits=8,
        outliers=0,
        outlier_ratio=2.0,
        density=1.0,
    )
    return Probe(**{**base, **kw})


@pytest.mark.parametrize(
    "kw, verdict",
    [
        (dict(nm24=0.09, cardinality=3), "2:4 near-lossless → sparse tensor cores"),
        (dict(cardinality=32, stable_rank=1.0), "LUT/palettized"),
        (dict(stable_rank=6.3, outliers=3, outlier_ratio=20.0), "low rank → factored matmul"),
        (dict(outliers=1, outlier_ratio=8.5), "AWQ/SmoothQuant mixed int4"),
        (dict(outliers=0, outlier_ratio=50.0), "int8"),
        (dict(int4_channel=0.04, int4_tensor=0.05), "per-CHANNEL int4 (grouped int4)"),
        (dict(int4_channel=0.04, int4_tensor=0.049, best_bits=4), "int4 per-channel"),
        (dict(best_bits=3), "int3 per-channel"),
        (dict(best_bits=6), "int6"),
        (dict(best_bits=None), "dense fp — keep f16/bf16"),
    ],
)
def test_verdict_rules_in_order(kw, verdict):
    assert _probe(**kw).verdict == verdict


# -- input checks ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "x, msg",
    [
        (np.ones(5), r"probes take a 2-D tensor \[rows, cols\]; got shape \(5,\): reshape it, e\.g\. a conv filter"),
        (np.ones((2, 3, 4)), r"got shape \(2, 3, 4\)"),
        (np.array([[1.0, np.nan]]), "holds NaN/Inf values: probes need finite weights"),
        (np.array([[1.0, np.inf]]), "holds NaN/Inf values: probes need finite weights"),
        (np.ones((0, 3)), "at least one row and one column"),
    ],
)
def test_as_matrix_refuses(x, msg):
    with pytest.raises(OpscopeError, match=msg):
        stats.probe(x)
    with pytest.raises(OpscopeError, match=msg):
        stats.as_matrix(x)


def test_as_matrix_names_what_it_reads():
    with pytest.raises(OpscopeError, match=r"^layer\.0\.weight holds NaN"):
        stats.as_matrix([[float("nan")]], "layer.0.weight")
    assert stats.as_matrix(np.ones((2, 3), np.float32)).dtype == np.float64


def test_leading_subspace_spans_what_the_svd_spans():
    """The Gram-matrix route gives the SVD's leading left vectors (up to sign), tall and wide; zeros past the rank."""
    from opscope.probe.svd import leading_subspace

    rng = np.random.default_rng(3)
    for shape in [(40, 12), (12, 40)]:
        u0, _ = np.linalg.qr(rng.standard_normal((shape[0], 6)))
        v0, _ = np.linalg.qr(rng.standard_normal((shape[1], 6)))
        a = (u0 * np.array([9.0, 7.0, 5.0, 3.0, 2.0, 1.0])) @ v0.T
        ref = truncated_svd(a, 4)[0]
        got = leading_subspace(a, 4)
        np.testing.assert_allclose(np.abs(got.T @ ref), np.eye(4), atol=1e-8)
        past = leading_subspace(a, 8)
        assert np.allclose(past[:, 6:], 0.0)
        np.testing.assert_allclose(past[:, :6].T @ past[:, :6], np.eye(6), atol=1e-8)


SEVEN = {  # the seven synthetic distributions, 128×128, seed 42, as `opscope-probe` runs them
    "gaussian": "int8",  # dense: per-channel int8 is the fewest bits under 2 %
    "uniform": "int6",  # a flat histogram: 6 bits suffice
    "sparse90": "2:4 near-lossless → sparse tensor cores",  # 90 % zeros: ≤ 2 nonzeros in almost every 4-group
    "lowrank": "low rank → factored matmul",  # rank 4
    "outlier": "dense fp — keep f16/bf16",  # 1 % of values ×30: no bit width under 2 %
    "quantized": "LUT/palettized",  # 0.5 steps: 17 distinct values
    "coherent": "low rank → factored matmul",  # each row a small step from the last: stable rank ~1
}


@pytest.mark.parametrize("dist", list(SEVEN))
def test_probe_verdicts_on_the_seven_distributions(dist):
    p = stats.probe(sample(dist, 128, 128, 42))
    assert p.verdict == SEVEN[dist]
    if dist == "sparse90":
        assert p.density < 0.12 and p.nm24 < 0.10
    if dist in ("lowrank", "coherent"):
        assert p.stable_rank < 0.10 * p.cols and p.effective_rank_99 <= 16
    if dist == "quantized":
        assert p.cardinality <= 32
    if dist == "outlier":
        assert p.best_bits is None and p.int4_tensor > p.int4_channel
