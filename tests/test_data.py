"""`opscope.drive.synthetic` keeps §2.10's statistical contract on 256x256 blocks.

Bounds are about 5 binomial/sampling standard deviations (stated per test), so a
correct generator fails with probability under ~1e-6 per check; the seeds are fixed,
so the outcome is deterministic anyway.
"""

from __future__ import annotations

import numpy as np
import pytest

from opscope.drive.synthetic import DISTS, sample, sample_shaped
from opscope.errors import OpscopeError

R = C = 256
N = R * C
SEEDS = (0, 1, 7)


def binomial_bounds(n: int, p: float, sigmas: float = 5.0) -> tuple[float, float]:
    """(low, high) counts for Binomial(n, p) at `sigmas` standard deviations."""
    sd = np.sqrt(n * p * (1 - p))
    return n * p - sigmas * sd, n * p + sigmas * sd


def test_dists_in_reference_order():
    assert DISTS == ("gaussian", "uniform", "sparse90", "lowrank", "outlier", "quantized", "coherent")


@pytest.mark.parametrize("dist", DISTS)
def test_float32_shape_deterministic_and_seeded(dist):
    a, b, c = sample(dist, R, C, 5), sample(dist, R, C, 5), sample(dist, R, C, 6)
    assert a.dtype == np.float32 and a.shape == (R, C)
    assert np.array_equal(a, b)
    assert not np.array_equal(a, c)
    assert np.isfinite(a).all()


@pytest.mark.parametrize("dist", DISTS)
@pytest.mark.parametrize("shape", [(24,), (4, 6), (2, 3, 8), (2, 1, 3, 5)])
def test_sample_shaped_folds_leading_dims_into_rows(dist, shape):
    x = sample_shaped(dist, shape, 3)
    assert x.shape == shape and x.dtype == np.float32
    rows = int(np.prod(shape[:-1]))
    assert np.array_equal(x.reshape(rows, shape[-1]), sample(dist, rows, shape[-1], 3))


@pytest.mark.parametrize("dist", DISTS)
def test_empty_blocks(dist):
    assert sample(dist, 0, 5, 1).shape == (0, 5)
    assert sample(dist, 3, 0, 1).shape == (3, 0)


def test_gaussian_mean_std_and_mass_within_one_sigma():
    for seed in SEEDS:
        x = sample("gaussian", R, C, seed).astype(np.float64)
        assert abs(x.mean()) < 5 / np.sqrt(N)  # sd of the mean = 1/256
        assert abs(x.std() - 1) < 5 / np.sqrt(2 * N)  # sd of the sample std ~ 1/sqrt(2n)
        lo, hi = binomial_bounds(N, 0.682689492)  # P(|z| < 1)
        assert lo < np.count_nonzero(np.abs(x) < 1) < hi


def test_uniform_is_flat_on_minus_one_one():
    for seed in SEEDS:
        x = sample("uniform", R, C, seed).astype(np.float64)
        assert x.min() >= -1 and x.max() <= 1
        counts, _ = np.histogram(x, bins=16, range=(-1, 1))
        expected = N / 16
        chi2 = ((counts - expected) ** 2 / expected).sum()
        assert chi2 < 56.49  # chi-square, 15 dof, upper tail 1e-6 (scipy.stats.chi2.isf)
        assert abs(x.mean()) < 5 * np.sqrt(1 / 3 / N)
        assert abs(x.var() - 1 / 3) < 0.01  # var of U(-1,1) is 1/3; sd of the estimate ~0.0011


def test_sparse90_keeps_about_10_percent_of_the_base_values():
    for seed in SEEDS:
        base, x = sample("gaussian", R, C, seed), sample("sparse90", R, C, seed)
        kept = x != 0
        lo, hi = binomial_bounds(N, 0.1)
        assert lo < np.count_nonzero(kept) < hi
        assert np.array_equal(x[kept], base[kept])  # kept values are the base block's, untouched


def test_outlier_scales_about_1_percent_by_30():
    for seed in SEEDS:
        base = sample("gaussian", R, C, seed).astype(np.float64)
        x = sample("outlier", R, C, seed).astype(np.float64)
        scaled = np.abs(x) > 2 * np.abs(base)  # the mask, read off |x|
        lo, hi = binomial_bounds(N, 0.01)
        assert lo < np.count_nonzero(scaled) < hi
        np.testing.assert_allclose(x[scaled], 30 * base[scaled], rtol=2e-7)  # one f32 rounding
        assert np.array_equal(x[~scaled], base[~scaled])


def test_quantized_is_exactly_on_half_steps():
    for seed in SEEDS:
        base, x = sample("gaussian", R, C, seed), sample("quantized", R, C, seed)
        assert np.array_equal(2 * x, np.round(2 * x))
        assert np.array_equal(x, np.round(2 * base.astype(np.float64)) / 2)
        lo, hi = binomial_bounds(N, 0.197412619)  # P(|z| < 0.25): rounds to 0
        assert lo < np.count_nonzero(x == 0) < hi


def test_lowrank_is_numerically_rank_4_with_unit_entry_variance():
    variances = []
    for seed in range(8):
        x = sample("lowrank", R, C, seed).astype(np.float64)
        s = np.linalg.svd(x, compute_uv=False)
        assert s[3] / s[0] > 0.05  # four real directions
        assert s[4] / s[0] < 1e-6  # the rest is float32 rounding
        variances.append((x**2).mean())
    # U V / sqrt(4) of normals: each entry has variance 1; a 256x256 block has only rank-4
    # freedom, so one block's mean square has sd ~0.06, eight blocks ~0.022.
    assert abs(np.mean(variances) - 1) < 0.12


def test_coherent_rows_step_by_0_15():
    for seed in SEEDS:
        x = sample("coherent", R, C, seed).astype(np.float64)
        steps = np.diff(x, axis=0)
        n = steps.size
        assert abs(steps.mean()) < 5 * 0.15 / np.sqrt(n)
        assert abs(steps.std() - 0.15) < 5 * 0.15 / np.sqrt(2 * n)
        assert abs(x[0].std() - 1) < 5 / np.sqrt(2 * C)
        # steps are independent of each other: lag-1 correlation of a 65280-sample series
        r = np.corrcoef(steps[1:].ravel(), steps[:-1].ravel())[0, 1]
        assert abs(r) < 5 / np.sqrt(n)


def test_unknown_distribution_lists_the_valid_names():
    with pytest.raises(
        OpscopeError,
        match="unknown distribution 'laplace'.*gaussian, uniform, sparse90, lowrank, outlier, quantized, coherent",
    ):
        sample("laplace", 2, 2, 0)


@pytest.mark.parametrize("rows,cols,seed", [(-1, 2, 0), (2, -3, 0), (2, 2, -1), (2.5, 2, 0)])
def test_bad_sizes_and_seeds_are_refused(rows, cols, seed):
    with pytest.raises(OpscopeError, match="must be a non-negative integer"):
        sample("gaussian", rows, cols, seed)
