"""The reference's seven synthetic input distributions, seeded and deterministic.

§2.10 of the reference design: a base `rows x cols` N(0,1) block is always drawn first
from `rng = Philox(seed)`; a second stream `mask = Philox(seed ^ 0x9E3779B97F4A7C15)`
drives masks. Both are numpy `Generator`s over the Philox bit generator. numpy does not
reproduce the reference's Philox4x32 bits, so the contract kept is the statistical one:

| dist      | construction                                                        |
|-----------|---------------------------------------------------------------------|
| gaussian  | the base block                                                      |
| uniform   | `2*u01 - 1`, `u01 = u32 / (2**32 - 1)` fresh from `rng` after base   |
| sparse90  | base where `mask u32 % 10 == 0`, else exactly 0 (about 90 % zeros)  |
| lowrank   | `U @ V / sqrt(4)`, U `[rows, 4]` from `rng`, V `[4, cols]` from mask |
| outlier   | base x 30 where `mask u32 % 100 == 0` (about 1 %), else base        |
| quantized | `round(2*base) / 2` (0.5 steps)                                     |
| coherent  | row 0 from `rng`; row t = row t-1 + 0.15 * N(0,1) from `mask`       |

Values are computed in float64 and rounded once to float32.
"""

from __future__ import annotations

from math import prod

import numpy as np

from opscope.errors import OpscopeError

DISTS: tuple[str, ...] = ("gaussian", "uniform", "sparse90", "lowrank", "outlier", "quantized", "coherent")
MASK_XOR = 0x9E3779B97F4A7C15
LOWRANK_RANK = 4
OUTLIER_SCALE = 30.0
COHERENT_STEP = 0.15
_U32_MAX = np.float64(2**32 - 1)


def sample(dist: str, rows: int, cols: int, seed: int = 0) -> np.ndarray:
    """A float32 `[rows, cols]` block from reference distribution `dist` (seeded, deterministic)."""
    if dist not in DISTS:
        raise OpscopeError(f"unknown distribution {dist!r} (choose one of: {', '.join(DISTS)})")
    for name, v in (("rows", rows), ("cols", cols), ("seed", seed)):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 0:
            raise OpscopeError(f"sample: {name} must be a non-negative integer, got {v!r}")
    rows, cols, seed = int(rows), int(cols), int(seed)
    rng = np.random.Generator(np.random.Philox(seed))
    mask = np.random.Generator(np.random.Philox(seed ^ MASK_XOR))
    base = rng.standard_normal((rows, cols))

    def u32() -> np.ndarray:
        return mask.integers(0, 2**32, size=(rows, cols), dtype=np.uint64)

    if dist == "gaussian":
        x = base
    elif dist == "uniform":
        x = 2.0 * (rng.integers(0, 2**32, size=(rows, cols), dtype=np.uint64) / _U32_MAX) - 1.0
    elif dist == "sparse90":
        x = np.where(u32() % 10 == 0, base, 0.0)
    elif dist == "lowrank":
        u = rng.standard_normal((rows, LOWRANK_RANK))
        v = mask.standard_normal((LOWRANK_RANK, cols))
        x = u @ v / np.sqrt(LOWRANK_RANK)
    elif dist == "outlier":
        x = np.where(u32() % 100 == 0, base * OUTLIER_SCALE, base)
    elif dist == "quantized":
        x = np.round(2.0 * base) / 2.0
    else:  # coherent: a random walk down the rows (cumsum adds in order, like the loop)
        steps = COHERENT_STEP * mask.standard_normal((rows, cols))
        if rows:
            steps[0] = rng.standard_normal(cols)
        x = np.cumsum(steps, axis=0)
    return x.astype(np.float32)


def sample_shaped(dist: str, shape: tuple[int, ...], seed: int = 0) -> np.ndarray:
    """A float32 tensor of `shape` from `dist`: rows = product of the leading dims, cols = last dim."""
    shape = tuple(int(d) for d in shape)
    cols = shape[-1] if shape else 1
    rows = prod(shape[:-1])
    return sample(dist, rows, cols, seed).reshape(shape)
