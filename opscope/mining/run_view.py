"""A recorded run seen whole, for the pictures: the mined report, each tapped tensor's recorded
histogram, per-channel max|x| and value range per step, and per-layer statistics laid out as a
layer × site-kind grid.

A site's layer is the first whole number that ends a part of its name (`model.layers.3.mlp.down_proj`:
3; `/encoder/layer.0/attention/...` and `layer0.attn.q`: 0; `conv2d` holds none), its kind the
name with that number replaced by `#`;
sites without a number are their own kind with no layer. The numbers are the run's: means over
observations (run × step) for the per-tensor statistics, the largest |x| over observations per
channel, min and max per step.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import polars as pl

from opscope.errors import OpscopeError
from opscope.mining.report import MineReport, load_paths, mine_loaded
from opscope.record.run_record import read_run_record

LAYER = re.compile(r"(?<![0-9])(\d+)(?![0-9A-Za-z])")  # `layers.3.`, `layer.0/`, `layer0.`, `h_3`; not `conv2d`
HIST_DEFAULT = (-6.0, 6.0)  # StatConfig's histogram range, for runs that did not record theirs
# The grid's statistics: (column in `grid_stats`, title, log scale).
GRID_STATS: tuple[tuple[str, str, bool], ...] = (
    ("density", "density (share of nonzero values)", False),
    ("zchan", "zero channels (share of all-zero channels)", False),
    ("outlier", "outlier ratio (top channel max|x| / mean)", True),
    ("kurtosis", "kurtosis", True),
    ("headroom", "quantization headroom (log2 of max|x| / rms, bits)", False),
    ("entropy", "attention entropy (normalized)", False),
    ("bi", "block influence (BI = 1 − cos(h, h + d))", True),
)


def layer_of(site: str) -> tuple[str, int | None]:
    """(kind, layer) of a site name: the first whole number in it is the layer (None: none)."""
    m = LAYER.search(site)
    if m is None:
        return site, None
    return site[: m.start()] + "#" + site[m.end() :], int(m.group(1))


def anchor(site: str, role: str) -> str:
    """The HTML anchor of one tapped tensor's section."""
    return "t-" + re.sub(r"[^0-9A-Za-z_.-]", "_", f"{site}-{role}")


@dataclass(frozen=True)
class Tensor:
    """One tapped tensor's recorded pictures: histogram, per-channel max|x|, range per step."""

    site: str
    role: str
    numel: int
    hist: tuple[float, ...]  # mean over observations per bin
    chan_maxabs: tuple[float, ...]  # largest over observations per channel
    steps: tuple[int, ...]
    mins: tuple[float, ...]  # per step, over runs
    maxs: tuple[float, ...]


@dataclass(frozen=True)
class RunView:
    """A run's report with what its pictures need (see the module docstring)."""

    path: str
    report: MineReport
    tensors: tuple[Tensor, ...]
    grid: pl.DataFrame  # site, role, kind, layer and the GRID_STATS columns (null: not recorded)
    hist_range: tuple[float, float]
    notes: tuple[str, ...] = field(default=())

    def to_dict(self) -> dict:
        """JSON-safe: the run, the histogram range, each tensor's pictures and the grid's rows."""
        return {
            "run": self.path,
            "hist_range": list(self.hist_range),
            "notes": list(self.notes),
            "tensors": [t.__dict__ | {"hist": list(t.hist)} for t in self.tensors],
            "grid": self.grid.to_dicts(),
        }


def run_view(run: str | Path | Iterable[str | Path], costs: str | Path | Mapping[str, int] | None = None) -> RunView:
    """Read and mine a run (a profile's folder, or tidy files; `costs` as `mine_paths`') and gather
    its pictures' numbers."""
    df, files, notes = load_paths(run)
    if not df.height:  # refused before mining
        raise OpscopeError(f"{run}: no sketches recorded: nothing to draw (profile a model first)")
    report = mine_loaded(df, files, notes, costs)
    hist_range, view_notes = _hist_range(files)
    df = df.with_columns(pl.col("site", "role").cast(pl.String))  # once: the tensors and the grid key on them
    return RunView(str(run), report, tuple(_tensors(df)), _grid(df, report), hist_range, tuple(view_notes))


def _hist_range(files: list[Path]) -> tuple[tuple[float, float], list[str]]:
    """The histogram range the run recorded in its run.json, else StatConfig's default, said."""
    for f in files:
        h = read_run_record(f.parent).get("histogram")
        if h:
            return (float(h["min"]), float(h["max"])), []
    lo, hi = HIST_DEFAULT
    return HIST_DEFAULT, [
        f"histogram bin range not recorded with this run: drawn as opscope's default [{lo:g}, {hi:g}]"
    ]


def _tensors(df: pl.DataFrame) -> Iterable[Tensor]:
    keyed = df.filter(pl.col("stat").is_in(["hist", "chan_maxabs", "min", "max"]))
    numel = df.group_by("site", "role", maintain_order=True).agg(pl.col("numel").max())
    hist = (
        keyed.filter(pl.col("stat") == "hist").group_by("site", "role", "idx").agg(pl.col("value").mean()).sort("idx")
    )
    chan = (
        keyed.filter(pl.col("stat") == "chan_maxabs")
        .group_by("site", "role", "idx")
        .agg(pl.col("value").abs().max())
        .sort("idx")
    )
    rng = (
        keyed.filter(pl.col("stat").is_in(["min", "max"]))
        .group_by("site", "role", "step")
        .agg(
            pl.col("value").filter(pl.col("stat") == "min").min().alias("min"),
            pl.col("value").filter(pl.col("stat") == "max").max().alias("max"),
        )
        .sort("step")
    )
    by = {
        name: {k: g for k, g in frame.group_by("site", "role")}
        for name, frame in (("h", hist), ("c", chan), ("r", rng))
    }
    for site, role, n in numel.iter_rows():
        h, c, r = (by[k].get((site, role)) for k in ("h", "c", "r"))
        yield Tensor(
            str(site),
            str(role),
            int(n),
            tuple(h["value"].to_list()) if h is not None else (),
            tuple(c["value"].to_list()) if c is not None else (),
            tuple(r["step"].to_list()) if r is not None else (),
            tuple(r["min"].to_list()) if r is not None else (),
            tuple(r["max"].to_list()) if r is not None else (),
        )


def _grid(df: pl.DataFrame, report: MineReport) -> pl.DataFrame:
    """Per tapped tensor: kind, layer and every GRID_STATS column (null where not recorded)."""
    per = (
        df.filter(pl.col("stat").is_in(["kurtosis", "min", "max", "sumsq"]))
        .group_by("site", "role", "run_id", "step", "backend", "dist")
        .agg(
            kurtosis=pl.col("value").filter(pl.col("stat") == "kurtosis").first(),
            peak=pl.max_horizontal(
                pl.col("value").filter(pl.col("stat") == "max").first().abs(),
                pl.col("value").filter(pl.col("stat") == "min").first().abs(),
            ),
            ms=pl.col("value").filter(pl.col("stat") == "sumsq").first() / pl.col("numel").first(),
        )
        .with_columns(
            headroom=pl.when((pl.col("ms") > 0) & (pl.col("peak") > 0)).then(
                (pl.col("peak") / pl.col("ms").sqrt()).log(2)
            )
        )
        .group_by("site", "role", maintain_order=True)
        .agg(pl.col("kurtosis").mean(), pl.col("headroom").mean())
    )
    signals = report.signals.with_columns(pl.col("site", "role").cast(pl.String))
    signals = signals.group_by("site", "role", maintain_order=True).agg(pl.col("density", "zchan", "outlier").mean())
    grid = per.join(signals, on=["site", "role"], how="full", coalesce=True)
    d = report.dynamics
    extra = []
    if d is not None and d.attention.height:
        extra.append(d.attention.group_by("site").agg(pl.col("entropy").mean()).with_columns(role=pl.lit("attn")))
    if d is not None and d.residual.height:
        extra.append(d.residual.group_by("site").agg(pl.col("bi").mean()).with_columns(role=pl.lit("residual")))
    for frame in extra:
        grid = grid.join(frame, on=["site", "role"], how="full", coalesce=True)
    for name, _, _ in GRID_STATS:
        if name not in grid.columns:
            grid = grid.with_columns(pl.lit(None, pl.Float64).alias(name))
    kinds = [layer_of(s) for s in grid["site"].to_list()]
    return grid.with_columns(
        kind=pl.Series([k for k, _ in kinds], dtype=pl.String),
        layer=pl.Series([n for _, n in kinds], dtype=pl.Int64),
    ).select("site", "role", "kind", "layer", *(n for n, _, _ in GRID_STATS))


def finite_or_none(v: float | None) -> float | None:
    """A number for a picture, None when there is none (NaN, inf)."""
    return v if v is not None and math.isfinite(v) else None
