"""The digits model: the reference's MNIST MLP, trained in seconds on scikit-learn's digits.

`logits = relu(x·W1 + b1)·W2 + b2` (§4.1 `opscope-mnist`), matmul sites `fc1` and `fc2`,
weights `fc1_w [64,H]`, `fc1_b [H]`, `fc2_w [H,10]`, `fc2_b [10]` as function arguments
after the images `x [batch,64]`. The data is `sklearn.datasets.load_digits` (1,797 real
8×8 handwritten digits, installed with scikit-learn): pixels are 0..16, scaled by 1/16 to
[0,1] so the background stays exactly 0. A stratified 25 % split (seed 0) is held out;
`MLPClassifier(hidden_layer_sizes=(64,), activation="relu", random_state=0)` trains on the
rest in about a second (one BLAS thread, so the weights are the same on every machine).

Unlike MNIST (digits size-normalized to 20×20, then padded into a 28×28 frame, 19 %
nonzero), the digits are cropped to their 8×8 box: about 51 % of pixels are nonzero, and
the zeros are concentrated in the left and right border columns.
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from opscope.errors import OpscopeError
from opscope.models.demo import _Builder, _t

HIDDEN = 64
CLASSES = 10
PIXELS = 64
BATCH = 64
SEED = 0
TEST_FRACTION = 0.25
MAX_ITER = 200
WEIGHT_NAMES: tuple[str, ...] = ("fc1_w", "fc1_b", "fc2_w", "fc2_b")


@dataclass(frozen=True)
class TrainedDigits:
    """The trained MLP's weights (f32, in argument order), its held-out accuracy and the data."""

    weights: tuple[np.ndarray, ...]
    accuracy: float
    x_test: np.ndarray
    y_test: np.ndarray
    x_train: np.ndarray
    y_train: np.ndarray


def _require_sklearn():
    """Import scikit-learn's pieces, or say which extra installs them."""
    try:
        from sklearn.datasets import load_digits
        from sklearn.exceptions import ConvergenceWarning
        from sklearn.model_selection import train_test_split
        from sklearn.neural_network import MLPClassifier
        from threadpoolctl import threadpool_limits
    except ImportError:
        raise OpscopeError("digits needs the digits extra: pip install 'opscope[digits]'") from None
    return load_digits, ConvergenceWarning, train_test_split, MLPClassifier, threadpool_limits


@functools.lru_cache(maxsize=1)
def train_digits() -> TrainedDigits:
    """Load the digits, hold out 25 %, train the MLP once per process (about a second)."""
    load_digits, convergence, split, mlp, limits = _require_sklearn()
    data = load_digits()
    x = (data.data / 16.0).astype(np.float32)  # 0..16 → [0,1], background exactly 0
    x_train, x_test, y_train, y_test = split(
        x, data.target, test_size=TEST_FRACTION, random_state=SEED, stratify=data.target
    )
    clf = mlp(hidden_layer_sizes=(HIDDEN,), activation="relu", max_iter=MAX_ITER, random_state=SEED)
    with limits(limits=1), warnings.catch_warnings():
        warnings.simplefilter("ignore", convergence)  # 200 Adam epochs reach ~97.6 %; more buys little
        clf.fit(x_train, y_train)
    weights = tuple(
        np.ascontiguousarray(w, dtype=np.float32)
        for w in (clf.coefs_[0], clf.intercepts_[0], clf.coefs_[1], clf.intercepts_[1])
    )
    accuracy = float(np.mean(forward(x_test, weights).argmax(axis=1) == y_test))
    return TrainedDigits(weights, accuracy, x_test, y_test, x_train, y_train)


def forward(x: np.ndarray, weights: tuple[np.ndarray, ...] | list[np.ndarray]) -> np.ndarray:
    """numpy's f32 forward pass, the reference the compiled model is checked against."""
    w2, b2 = weights[2], weights[3]
    return hidden(x, weights) @ w2 + b2


def hidden(x: np.ndarray, weights: tuple[np.ndarray, ...] | list[np.ndarray]) -> np.ndarray:
    """The post-ReLU hidden activations (fc2's lhs) in f32."""
    w1, b1 = weights[0], weights[1]
    return np.maximum(x.astype(np.float32) @ w1 + b1, np.float32(0))


def _bias_add(b: _Builder, x: str, bias: str, shape: tuple[int, int], name: str) -> str:
    """`x + bias` with the bias [n] broadcast over the rows of x [m,n], as one linalg.generic."""
    ty, bty = _t(shape, b.dtype), _t(shape[1:], b.dtype)
    e, r = b.fresh(), b.fresh()
    b.lines.append(f"{e} = tensor.empty() : {ty}")
    b.lines.append(
        f"{r} = linalg.generic {{indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d1)>, "
        f'affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]}} '
        f"ins({x}, {bias} : {ty}, {bty}) outs({e} : {ty}) {{\n"
        f"  ^bb0(%in0: {b.dtype}, %in1: {b.dtype}, %out: {b.dtype}):\n"
        f"    %r = arith.addf %in0, %in1 : {b.dtype}\n    linalg.yield %r : {b.dtype}\n"
        f'  }} -> {ty} loc("{name}")'
    )
    return r


def digits_mlir(batch: int = BATCH, hidden_size: int = HIDDEN, pixels: int = PIXELS) -> str:
    """The MLP as linalg on tensors: `@main(x, fc1_w, fc1_b, fc2_w, fc2_b) -> logits [batch,10]`
    (`pixels` per image: 64 for the digits, 784 for MNIST's 28×28)."""
    b = _Builder()
    x = b.arg("x", (batch, pixels))
    w1, b1 = b.arg("fc1_w", (pixels, hidden_size)), b.arg("fc1_b", (hidden_size,))
    w2, b2 = b.arg("fc2_w", (hidden_size, CLASSES)), b.arg("fc2_b", (CLASSES,))
    h, hs = b.matmul(x, (batch, pixels), w1, (pixels, hidden_size), "fc1")
    h = b.relu(_bias_add(b, h, b1, hs, "fc1.bias"), hs, "fc1.relu")
    y, ys = b.matmul(h, hs, w2, (hidden_size, CLASSES), "fc2")
    return b.module(_bias_add(b, y, b2, ys, "fc2.bias"), ys)


def digits_model(batch: int = BATCH) -> tuple[str, tuple[np.ndarray, ...]]:
    """The trained model: its MLIR text for `batch` images per call, and its weights."""
    trained = train_digits()
    return digits_mlir(batch, trained.weights[0].shape[1]), trained.weights


def digit_images(count: int) -> np.ndarray:
    """The first `count` images, held-out ones first, then training ones; none repeats."""
    trained = train_digits()
    pool = np.concatenate([trained.x_test, trained.x_train])
    if count > len(pool):
        raise OpscopeError(
            f"digits: {count} images asked for, the data set has {len(pool)}; use fewer steps or a smaller batch"
        )
    return pool[:count]


def digit_labels(count: int) -> np.ndarray:
    """The labels of `digit_images(count)`, in the same order."""
    trained = train_digits()
    return np.concatenate([trained.y_test, trained.y_train])[:count]


def digits_batches(batch: int = BATCH, steps: int = 4) -> Iterator[list[np.ndarray]]:
    """Per step the next `batch` real digit images and the same weights: [x, *weights]."""
    if batch < 1 or steps < 1:
        raise OpscopeError(f"digits: batch and steps must be >= 1, got {batch} and {steps}")
    images = digit_images(batch * steps)
    weights = train_digits().weights
    for t in range(steps):
        yield [np.ascontiguousarray(images[t * batch : (t + 1) * batch]), *weights]
