"""IDX files (the MNIST format) and the reference's MNIST MLP they drive.

An IDX file is a big-endian header, two zero bytes, a type code (0x08 unsigned byte, 0x09 signed
byte, 0x0B i16, 0x0C i32, 0x0D f32, 0x0E f64) and the number of dims, then each dim as a u32,
then the data (`read_idx`). A file of images (`train-images-idx3-ubyte`, [N, rows, cols] bytes)
given to `opscope profile` runs the reference's `opscope-mnist` model on it (`mnist_source`): an
untrained MLP relu(x·W1 + b1)·W2 + b2, 784 → 128 → 10, He-normal weights (seed 0xC0FFEE), zero
biases, fed the next 64 images per step, pixels scaled to [0, 1] so the background stays exactly
0 (the border pixels the sparse candidates read). The digits MLP stays the offline default.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np

from opscope.errors import OpscopeError

TYPES = {0x08: ">u1", 0x09: ">i1", 0x0B: ">i2", 0x0C: ">i4", 0x0D: ">f4", 0x0E: ">f8"}
MNIST_BATCH, MNIST_HIDDEN, MNIST_SEED = 64, 128, 0xC0FFEE


def is_idx(path: str | Path) -> bool:
    """The file starts like an IDX file: two zero bytes and a known type code."""
    try:
        with open(path, "rb") as f:
            head = f.read(4)
    except OSError:
        return False
    return len(head) == 4 and head[:2] == b"\x00\x00" and head[2] in TYPES and 1 <= head[3] <= 8


def read_idx(path: str | Path) -> np.ndarray:
    """The array an IDX file holds (native byte order); a malformed file is one line naming it."""
    data = Path(path).read_bytes()
    if len(data) < 4 or data[:2] != b"\x00\x00" or data[2] not in TYPES:
        raise OpscopeError(f"{path}: not an IDX file (expected 00 00 <type> <dims> at its start, got {data[:4].hex()})")
    dims = data[3]
    if len(data) < 4 + 4 * dims:
        raise OpscopeError(f"{path}: IDX header cut off ({len(data)} bytes for {dims} dims)")
    shape = tuple(int.from_bytes(data[4 + 4 * i : 8 + 4 * i], "big") for i in range(dims))
    dtype = np.dtype(TYPES[data[2]])
    need = int(np.prod(shape)) * dtype.itemsize
    body = data[4 + 4 * dims :]
    if len(body) < need:
        raise OpscopeError(
            f"{path}: IDX data cut off: {'x'.join(map(str, shape))} {dtype.name} needs {need} bytes, the file has "
            f"{len(body)}"
        )
    return np.frombuffer(body[:need], dtype).reshape(shape).astype(dtype.newbyteorder("="))


def mnist_weights(hidden: int = MNIST_HIDDEN, pixels: int = 784, classes: int = 10) -> list[np.ndarray]:
    """[fc1_w, fc1_b, fc2_w, fc2_b]: He-normal (scale √(2/fan_in)), zero biases, a fixed seed."""
    rng = np.random.default_rng(MNIST_SEED)
    w1 = (rng.standard_normal((pixels, hidden)) * np.sqrt(2 / pixels)).astype(np.float32)
    w2 = (rng.standard_normal((hidden, classes)) * np.sqrt(2 / hidden)).astype(np.float32)
    return [w1, np.zeros(hidden, np.float32), w2, np.zeros(classes, np.float32)]


def mnist_images(path: str | Path, count: int) -> np.ndarray:
    """The first `count` images of an IDX image file, [count, rows·cols] float32 in [0, 1]."""
    images = read_idx(path)
    if images.ndim != 3 or images.dtype != np.uint8:
        raise OpscopeError(
            f"{path}: an IDX file of {images.ndim}-D {images.dtype} data, not images (3-D unsigned bytes, "
            "like train-images-idx3-ubyte)"
        )
    if len(images) < count:
        raise OpscopeError(
            f"{path}: {len(images)} images, {count} asked for ({count // MNIST_BATCH} steps of {MNIST_BATCH}): "
            "use fewer steps"
        )
    return images[:count].reshape(count, -1).astype(np.float32) / np.float32(255)


def mnist_batches(path: str | Path, steps: int) -> Iterator[list[np.ndarray]]:
    """Per step the next MNIST_BATCH images and the fixed weights: [x, *weights]."""
    images = mnist_images(path, MNIST_BATCH * steps)
    weights = mnist_weights(pixels=images.shape[1])
    for t in range(steps):
        yield [np.ascontiguousarray(images[t * MNIST_BATCH : (t + 1) * MNIST_BATCH]), *weights]


def mnist_source(path: str | Path, steps: int) -> tuple[str, list[list[np.ndarray]], str]:
    """(module, per-step inputs, name) of the reference's MNIST MLP on the images of `path`."""
    from opscope.models.digits import digits_mlir

    batches = list(mnist_batches(path, steps))
    pixels = batches[0][0].shape[1]
    name = f"MNIST MLP ({pixels}→{MNIST_HIDDEN}→10, untrained, He-normal) on {path}, {MNIST_BATCH} images per step"
    return digits_mlir(MNIST_BATCH, MNIST_HIDDEN, pixels), batches, name
