"""The reference's seven synthetic distributions, a local stand-in for the real generators.

§2.10 of the reference design: a base N(0,1) block is always drawn first from
`Philox(seed)`; a second stream `Philox(seed ^ 0x9E3779B97F4A7C15)` drives masks. The
contract kept is the statistical one (fractions, scales, rank 4, step 0.15), not the
reference's exact bits. Tests get `sample` through the `dists` fixture and parametrize
over `DISTS`.
"""

from __future__ import annotations

from math import prod

import numpy as np

DISTS: tuple[str, ...] = ("gaussian", "uniform", "sparse90", "lowrank", "outlier", "quantized", "coherent")
MASK_XOR = 0x9E3779B97F4A7C15
U32_MAX = np.float64(2**32 - 1)


def sample(dist: str, shape: tuple[int, ...], seed: int = 0) -> np.ndarray:
    """A float32 tensor of `shape` from reference distribution `dist` (rows = leading dims)."""
    shape = tuple(shape)
    cols = shape[-1] if shape else 1
    rows = prod(shape[:-1]) if len(shape) > 1 else 1
    rng = np.random.Generator(np.random.Philox(seed))
    mask = np.random.Generator(np.random.Philox(seed ^ MASK_XOR))
    base = rng.standard_normal((rows, cols))

    def u32(n):
        return mask.integers(0, 2**32, size=n, dtype=np.uint64).reshape(rows, cols)

    if dist == "gaussian":
        x = base
    elif dist == "uniform":
        x = 2.0 * (rng.integers(0, 2**32, size=(rows, cols), dtype=np.uint64) / U32_MAX) - 1.0
    elif dist == "sparse90":
        x = np.where(u32(rows * cols) % 10 == 0, base, 0.0)
    elif dist == "lowrank":
        u = rng.standard_normal((rows, 4))
        v = mask.standard_normal((4, cols))
        x = u @ v / np.sqrt(4.0)
    elif dist == "outlier":
        x = np.where(u32(rows * cols) % 100 == 0, base * 30.0, base)
    elif dist == "quantized":
        x = np.round(2.0 * base) / 2.0
    elif dist == "coherent":
        x = np.empty((rows, cols))
        x[0] = rng.standard_normal(cols)
        steps = mask.standard_normal((rows, cols))
        for t in range(1, rows):
            x[t] = x[t - 1] + 0.15 * steps[t]
    else:
        raise ValueError(f"unknown distribution {dist!r} (choose one of: {', '.join(DISTS)})")
    return x.astype(np.float32).reshape(shape)
