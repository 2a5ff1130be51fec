"""Activation calibration for the weight rewrites: per-channel max|x| of each site's lhs, read
from a file, and SmoothQuant's migration of activation outliers into the weight.

A calibration file is an `.npz` holding, per site name, the float32 max|x| of each channel of
the site's lhs along its K dim (the last lhs dim): what a profile run records as the lhs'
`chan_maxabs`, its largest over the recorded steps (`opscope.act.calibration` writes it from a
run folder). SmoothQuant (Xiao et al., ICML 2023) divides each input channel k of x by
s_k = max|x_k|^α / max|w_k|^(1−α) and multiplies the weight's K row k by it: x·W is unchanged
in exact arithmetic, the activation's outlier channels shrink and the weight's grow, so one
int8 scale per token loses less of the small channels (α = 0.5 in the paper; α → 1 moves all
of the range into the weight).
"""

from __future__ import annotations

import zipfile
from pathlib import Path

import numpy as np

from opscope.errors import OpscopeError
from opscope.ir.sites import Site, operand_dims
from opscope.ir.weight_source import lhs_weight

FLOOR = 1e-5  # SmoothQuant's clamp of both maxima: a dead channel gets a finite factor
SEEN = 0.01  # a channel's calibrated max|x| is taken as at least this share of the median channel's


def read_calibration(pass_name: str, path: str | Path) -> dict[str, np.ndarray]:
    """Site name -> float32 max|x| per lhs K channel, from the `.npz` at `path`; a one-line error
    for a file that is missing, not an npz, or holds a non-finite, negative or non-vector entry."""
    path = Path(path)
    if not path.is_file():
        raise OpscopeError(
            f"{pass_name}: no calibration file {path} (write one from a profile run: opscope.write_calibration)"
        )
    try:
        with np.load(path, allow_pickle=False) as npz:
            table = {name: np.asarray(npz[name]) for name in npz.files}
    except (OSError, ValueError, zipfile.BadZipFile, EOFError) as e:
        raise OpscopeError(f"{pass_name}: calibration file {path} is not a readable .npz ({e})") from None
    for name, v in table.items():
        if v.ndim != 1 or not np.issubdtype(v.dtype, np.floating) or not np.all(np.isfinite(v)) or np.any(v < 0):
            raise OpscopeError(
                f"{pass_name}: calibration file {path}: entry '{name}' must be a vector of finite max|x| >= 0 "
                f"per channel, got {v.dtype} {list(v.shape)}"
            )
    return {name: v.astype(np.float32) for name, v in table.items()}


def smoothing_factors(x_max: np.ndarray, w_max: np.ndarray, alpha: float) -> np.ndarray:
    """SmoothQuant's s_k = x_k^α / max(w_max_k, FLOOR)^(1−α), in float32 (computed in float64): x
    is divided by s, the weight's K row k multiplied by it. x_k is the calibration's max|x_k|, but
    at least SEEN × the median channel's (and FLOOR): a channel the calibration barely saw (a ReLU
    unit dead on its few inputs: max 0) would otherwise be multiplied by up to 1/FLOOR^α and, where
    it fires on other data, take the whole row's int8 range (a 4-row torch MLP's plan, smoothed
    W8A8 on another input: 11 of 32 outputs off by more than 5 % without this floor, 4 with it;
    none once the calibration left out the step the plan measures on)."""
    x = np.asarray(x_max, np.float64)
    x = np.maximum(x, max(FLOOR, SEEN * float(np.median(x)) if x.size else FLOOR))
    w = np.maximum(np.asarray(w_max, np.float64), FLOOR)
    return (x**alpha / w ** (1.0 - alpha)).astype(np.float32)


def uncalibrated(site: Site) -> str:
    """Why a calibration of `site`'s lhs cannot smooth or scale it ("" when it can): its weight is
    its lhs (W @ x: the lhs maxima a run records are the weight's), or its K is not the lhs' last
    dim alone (the dim a calibration's channels, `chan_maxabs`, index). The plan proposes and
    `quantize-weight` rewrites by this one rule."""
    if lhs_weight(site):
        return "its weight is its lhs (W @ x): the calibration holds no x maxima"
    if operand_dims(site, "lhs") != (len(site.shape("lhs")) - 1,):
        return "its lhs is not contracted along its last dim alone (calibrated per last-dim channel)"
    return ""
