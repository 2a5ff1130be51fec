"""The digits model end to end: trained on real images, profiled on llvm-cpu, mined, checked against numpy."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from opscope.drive.profile import profile_module
from opscope.errors import OpscopeError
from opscope.models.digits import (
    BATCH,
    PIXELS,
    digit_images,
    digits_batches,
    digits_model,
    forward,
    hidden,
    train_digits,
)

STEPS = 4
LOGIT_TOL = 1e-5  # |iree − numpy| ≤ LOGIT_TOL · (1 + max|logit|): f32 sums in another order
RELU_BAND = 1e-5  # pre-activations this close to 0 could flip sign between two f32 matmuls


@pytest.fixture(scope="module")
def profiled(tmp_path_factory):
    source, _ = digits_model(BATCH)
    out = tmp_path_factory.mktemp("digits")
    return profile_module(
        source, out, "llvm-cpu", STEPS, name="digits", dist="digits", inputs=digits_batches(BATCH, STEPS)
    )


@pytest.fixture(scope="module")
def steps_inputs():
    return list(digits_batches(BATCH, STEPS))


def _nnz(profiled, site: str, role: str) -> list[float]:
    df = pl.read_csv(profiled.out_dir / "sketches.csv")
    rows = df.filter((pl.col("site") == site) & (pl.col("role") == role) & (pl.col("stat") == "nnz")).sort("step")
    return rows["value"].to_list()


def _signal(profiled, site: str, role: str) -> dict:
    sig = profiled.report.signals.filter((pl.col("site") == site) & (pl.col("role") == role))
    assert sig.height == 1
    return sig.row(0, named=True)


def _zero_columns(x: np.ndarray) -> float:
    """numpy's share of the columns (channels) of x that are zero in every row."""
    return float((np.abs(x).max(axis=0) == 0).mean())


def test_trained_model_classifies_held_out_digits():
    trained = train_digits()
    assert trained.accuracy > 0.95
    assert [w.shape for w in trained.weights] == [(64, 64), (64,), (64, 10), (10,)]
    assert all(w.dtype == np.float32 for w in trained.weights)
    assert trained.x_test.min() == 0.0 and trained.x_test.max() == 1.0


def test_images_are_real_and_do_not_repeat():
    images = digit_images(BATCH * STEPS)
    assert images.shape == (BATCH * STEPS, PIXELS) and images.dtype == np.float32
    assert len({im.tobytes() for im in images}) > 0.99 * len(images)  # a few digits are pixel-identical
    np.testing.assert_array_equal(images, train_digits().x_test[: len(images)])  # held-out images first
    with pytest.raises(OpscopeError, match="the data set has 1797"):
        digit_images(1798)


def test_mlir_has_two_named_sites(profiled):
    assert [s.name for s in profiled.model.manifest.sites] == ["fc1", "fc2"]
    assert [a.shape for a in profiled.model.args] == [(BATCH, 64), (64, 64), (64,), (64, 10), (10,)]
    assert profiled.parity == 0.0


def test_logits_match_numpy(profiled, steps_inputs):
    for args in steps_inputs:
        logits = profiled.model.original(profiled.model(*args))[0]
        ref = forward(args[0], args[1:])
        assert np.abs(logits - ref).max() <= LOGIT_TOL * (1 + np.abs(ref).max())
        assert (logits.argmax(1) == ref.argmax(1)).all()


def test_image_density_is_numpy_count_exactly(profiled, steps_inputs):
    recorded = _nnz(profiled, "fc1", "lhs")
    assert recorded == [float(np.count_nonzero(a[0])) for a in steps_inputs]
    sig = _signal(profiled, "fc1", "lhs")
    assert sig["density"] == pytest.approx(
        np.mean([np.count_nonzero(a[0]) / a[0].size for a in steps_inputs]), abs=1e-12
    )
    # cropped 8×8 digits are half background: just above the unstructured threshold (0.5)...
    assert 0.5 < sig["density"] < 0.52
    assert sig["histtop"] == pytest.approx(1 - sig["density"], abs=1e-6)  # (the zeros fill the top bin)
    # ...but the border pixels are zero in whole batches: structured sparsity, flagged as such
    assert sig["zchan"] == pytest.approx(np.mean([_zero_columns(a[0]) for a in steps_inputs]), abs=1e-12)
    assert sig["zchan"] > 0.1
    assert sig["exploit"] == "channel-skip"
    assert "density 0.51" in sig["suggestion"]


def test_hidden_density_is_numpy_count_exactly(profiled, steps_inputs):
    recorded = _nnz(profiled, "fc2", "lhs")
    for nnz, args in zip(recorded, steps_inputs):
        pre = args[0] @ args[1] + args[2]
        assert not (np.abs(pre) < RELU_BAND).any()  # no sign is ambiguous on these images...
        assert nnz == np.count_nonzero(hidden(args[0], args[1:]))  # ...so the count is exact
    sig = _signal(profiled, "fc2", "lhs")
    assert sig["density"] == pytest.approx(np.mean(recorded) / (BATCH * 64), abs=1e-12)
    assert 0.6 < sig["density"] < 0.85  # post-ReLU: a quarter of hidden units are off...
    zeros = [_zero_columns(hidden(a[0], a[1:])) for a in steps_inputs]
    assert sig["zchan"] == pytest.approx(np.mean(zeros), abs=1e-12)  # ...and some for every image
    assert sig["exploit"] == "channel-skip" and sig["zchan"] > 0.05


def test_weights_stationary_activations_not(profiled):
    cross = profiled.report.cross_step
    verdict = {(r["site"], r["role"]): r["stationary"] for r in cross.iter_rows(named=True)}
    assert verdict == {
        ("fc1", "lhs"): False,
        ("fc1", "rhs"): True,
        ("fc1", "out"): False,
        ("fc2", "lhs"): False,
        ("fc2", "rhs"): True,
        ("fc2", "out"): False,
    }
    assert (cross["steps"] == STEPS).all()


def test_bad_batches_are_refused():
    with pytest.raises(OpscopeError, match="batch and steps must be >= 1"):
        next(digits_batches(0, 1))
