"""The per-tensor sketch set computed on the host with numpy.

This is the executable form of §2.3 of the reference design: the independent reference
the tests compare IREE's results against, and the "naive" alternative the benchmarks
time (return every operand, compute the statistics in numpy).
"""

from __future__ import annotations

import numpy as np

from opscope.dialect.lowering.layout import channel_view
from opscope.dialect.lowering.signature import ELEMSIG_SKEW
from opscope.ir.stat_config import ELEMSIG_MAX, StatConfig, plan_stats

EPS_SCALE = np.float32(1e-12)
EPS_RATIO = 1e-20


def host_stats(
    x: np.ndarray, config: StatConfig = StatConfig(), channel_dims: tuple[int, ...] | None = None
) -> dict[str, np.ndarray]:
    """Every sketch `config` asks for, as float64 arrays, keyed by stat name in order; with
    `channel_dims` the tensor is read channel-last, those dims moved last and merged
    (`channel_view`), as the device reads an NCHW convolution's operands."""
    x32 = np.asarray(x).astype(np.float32)
    perm, view = channel_view(x32.shape, channel_dims)
    if perm is not None or view != x32.shape:
        x32 = np.transpose(x32, perm or tuple(range(x32.ndim))).reshape(view)
    flat = x32.reshape(-1).astype(np.float64)
    n = flat.size
    out: dict[str, np.ndarray] = {}
    for req in plan_stats(x32.shape, config):
        out[req.kind] = np.atleast_1d(_one(req.kind, x32, flat, n, config)).astype(np.float64)
    return out


def _one(kind: str, x32: np.ndarray, flat: np.ndarray, n: int, config: StatConfig):
    if kind == "min":
        return flat.min()
    if kind == "max":
        return flat.max()
    if kind == "mean":
        return flat.mean()
    if kind == "l1":
        return np.abs(flat).sum()
    if kind == "sumsq":
        return np.square(flat).sum()
    if kind == "nnz":
        return np.count_nonzero(x32)
    if kind == "kurtosis":
        d = flat - flat.mean()
        m2 = np.mean(d**2)
        return np.mean(d**4) / (m2**2 + EPS_RATIO)
    if kind == "hist":
        lo, hi = config.hist_range
        v = x32.reshape(-1)
        if config.hist_normalize:
            v = v / (np.abs(v).max() + EPS_SCALE)  # in f32, like the device
        counts, _ = np.histogram(v.astype(np.float64), bins=config.hist_bins, range=(lo, hi))
        return counts
    if kind == "elemsig":
        k = min(ELEMSIG_MAX, n)
        j = np.arange(k)
        return flat[(j * n) // k + (j * ELEMSIG_SKEW) % max(1, n // k)]
    cols = x32.shape[-1]
    rows2d = flat.reshape(-1, cols)
    if kind == "chan_maxabs":
        return np.abs(rows2d).max(axis=0)
    if kind == "chan_outlier":
        c = np.abs(rows2d).max(axis=0)
        return c.max() / (c.mean() + EPS_RATIO)
    if kind == "pos_sumsq":
        return np.square(rows2d).sum(axis=1)
    if kind == "adj_sumsq":
        return np.square(np.diff(rows2d, axis=0)).sum(axis=1)
    raise ValueError(f"unknown stat kind {kind!r}")
