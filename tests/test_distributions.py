"""The local distribution generators keep §2.10's statistical contract (the numerics tests
lean on it: sparse90 exercises nnz, outlier chan_outlier, quantized the histogram edges,
coherent adj_sumsq)."""

from __future__ import annotations

import numpy as np
import pytest
from distributions import DISTS, sample

SHAPE = (256, 128)


@pytest.mark.parametrize("dist", DISTS)
def test_deterministic_float32_and_seeded(dist):
    a, b, c = sample(dist, SHAPE, 5), sample(dist, SHAPE, 5), sample(dist, SHAPE, 6)
    assert a.dtype == np.float32 and a.shape == SHAPE
    assert np.array_equal(a, b) and not np.array_equal(a, c)
    assert np.isfinite(a).all()


@pytest.mark.parametrize("shape", [(24,), (4, 6), (2, 3, 8)])
def test_any_rank(shape):
    assert sample("coherent", shape).shape == shape


def test_gaussian_is_the_base_block():
    x = sample("gaussian", SHAPE)
    assert abs(x.mean()) < 0.02 and abs(x.std() - 1) < 0.02
    base = sample("gaussian", SHAPE, 3)
    nz = sample("sparse90", SHAPE, 3)
    assert np.array_equal(nz[nz != 0], base[nz != 0])  # sparse90 keeps base values
    q = sample("quantized", SHAPE, 3)
    assert np.array_equal(q, np.round(2 * base) / 2)


def test_uniform():
    x = sample("uniform", SHAPE)
    assert x.min() >= -1 and x.max() <= 1
    counts, _ = np.histogram(x, bins=8, range=(-1, 1))
    assert counts.min() > 0.9 * x.size / 8


def test_sparse90_is_about_90_percent_zeros():
    assert abs(np.mean(sample("sparse90", SHAPE) == 0) - 0.9) < 0.01


def test_lowrank_has_rank_4():
    assert np.linalg.matrix_rank(sample("lowrank", SHAPE).astype(np.float64), tol=1e-3) == 4


def test_outlier_scales_about_1_percent_by_30():
    base, x = sample("gaussian", SHAPE, 1), sample("outlier", SHAPE, 1)
    scaled = ~np.isclose(x, base)
    assert abs(scaled.mean() - 0.01) < 0.003
    np.testing.assert_allclose(x[scaled], 30 * base[scaled], rtol=1e-6)


def test_quantized_is_on_half_steps():
    x = sample("quantized", SHAPE)
    assert np.array_equal(x * 2, np.round(x * 2)) and len(np.unique(x)) < 40


def test_coherent_rows_step_by_0_15():
    x = sample("coherent", SHAPE).astype(np.float64)
    steps = np.diff(x, axis=0)
    assert abs(steps.std() - 0.15) < 0.005
    assert abs(x[0].std() - 1) < 0.2
