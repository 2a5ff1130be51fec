"""A profile run's activation maxima as the calibration file `quantize-weight` reads.

Per recorded site, the lhs' `chan_maxabs` (max|x| of each channel of its last dim) taken at its
largest over every recorded step: the range SmoothQuant's smoothing factors and a static int8
scale are built from (`opscope.ir.smoothing`). The run's data is the calibration set; the
quality of a build calibrated on it is measured on other data (the zoo's held-out sets).
A run that sketched one row in K (`sample-rows`) recorded a lower bound of each maximum.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from opscope.errors import OpscopeError

CALIBRATION_NAME = "calibration.npz"


def site_maxima(tidy) -> dict[str, np.ndarray]:
    """Site -> float32 max|x| per lhs channel, the largest over the recorded steps (a channel never
    recorded reads 0)."""
    import polars as pl

    rows = tidy.filter((pl.col("role") == "lhs") & (pl.col("stat") == "chan_maxabs"))
    if rows.is_empty():
        return {}
    grouped = (
        rows.group_by(pl.col("site").cast(pl.String), "idx", maintain_order=True)
        .agg(pl.col("value").max())
        .sort("site", "idx")
    )
    out = {}
    for (site,), part in grouped.group_by("site", maintain_order=True):
        idx = part["idx"].to_numpy().astype(np.int64)
        v = np.zeros(int(idx.max()) + 1, np.float32)
        v[idx] = part["value"].to_numpy().astype(np.float32)
        out[str(site)] = v
    return out


def write_calibration(run: str | Path, out: str | Path | None = None) -> Path:
    """Write the calibration file of profile run folder `run` (default `RUN/calibration.npz`),
    atomically; a one-line error when the run recorded no lhs `chan_maxabs`."""
    from opscope.act.run_folder import read_run
    from opscope.drive.profile import CSV_NAME
    from opscope.record.tidy import read_tidy

    folder, _ = read_run(run)
    maxima = site_maxima(read_tidy(folder / CSV_NAME))
    if not maxima:
        raise OpscopeError(
            f"{folder} recorded no chan_maxabs of any site's lhs: profile with a sketch set that keeps it "
            "(the default does)"
        )
    return save_calibration(maxima, Path(out) if out is not None else folder / CALIBRATION_NAME)


def save_calibration(maxima: dict[str, np.ndarray], path: Path) -> Path:
    """Write `maxima` (site -> max|x| per lhs channel) to `path` as an .npz, atomically (a reader
    never sees half a file; an existing one is replaced whole: `opscope.jobs.shards.atomic_write`)."""
    from opscope.jobs.shards import atomic_write

    atomic_write(path, lambda f: np.savez(f, **maxima))
    return path
