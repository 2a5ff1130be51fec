"""A run's statistics as Model Explorer node data: one overlay per statistic and role.

Model Explorer colours the nodes of a graph by "node data" (its `node_data_builder`
dataclasses: `ModelNodeData` → per graph id a `GraphNodeData` with `results` keyed by node
id and a `gradient` of `GradientItem`s); opscope writes them as plain dicts of the same
fields, keyed by the node ids of `opscope.analysis.graph` (the tapped ops). The numbers are the
report page's own (`RunView.grid`, one source): per matmul/convolution site and role (lhs, rhs,
out) `density`, `zero-channels`, `outliers` (the mined signals), `kurtosis` and `headroom`
(log2 of max|x| / rms, bits), each the mean over the run's observations; per attention site
`attention-entropy` (normalized, the mean over heads) and per residual add `block-influence`
(BI = 1 − cos(h, h + d)).

A statistic whose values are all positive and span a decade or more is coloured on a log
scale: each node's colour is set from log(value) (`bgColor`), and the gradient's stops sit at
equal steps of log(value) between the minimum and the maximum, so the legend reads the same;
other statistics are coloured linearly. The palette is viridis (dark at the minimum).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

import polars as pl

from opscope.mining.run_view import GRID_STATS

if TYPE_CHECKING:
    from opscope.mining.run_view import RunView

# Viridis at 0, 1/4, 1/2, 3/4, 1: light text on the dark half.
PALETTE = ("#440154", "#3b528b", "#21918c", "#5ec962", "#fde725")
LOG_SPAN = 10.0  # max/min at or above which a positive statistic is coloured on a log scale: a decade
LOG_STOPS = 9  # gradient stops of a log scale (8 segments between min and max)

# The grid's statistics as node-data file stems; those of PER_SITE are one value per site (no role).
FILE_KEYS = {
    "density": "density",
    "zchan": "zero-channels",
    "outlier": "outliers",
    "kurtosis": "kurtosis",
    "headroom": "headroom",
    "entropy": "attention-entropy",
    "bi": "block-influence",
}
PER_SITE = ("entropy", "bi")


@dataclass(frozen=True)
class Overlay:
    """One statistic of one role over the run's sites: file stem, title, site -> value."""

    key: str
    title: str
    values: dict[str, float]

    @property
    def log(self) -> bool:
        """Whether its values are coloured on a log scale (all positive, spanning LOG_SPAN or more)."""
        lo, hi = min(self.values.values()), max(self.values.values())
        return lo > 0 and hi / lo >= LOG_SPAN


def overlays(view: RunView) -> tuple[list[Overlay], list[str]]:
    """Every statistic of the run's grid that holds values, one overlay per role, and notes."""
    backends, dists = (view.report.counts.get(k, 1) for k in ("backends", "dists"))
    notes = (
        [f"the run holds {backends} backends and {dists} dists: each value is the mean over them, as on its page"]
        if backends * dists > 1
        else []
    )
    out = []
    for column, title, _ in GRID_STATS:
        frame = view.grid.select("site", "role", pl.col(column).alias("v")).filter(pl.col("v").is_not_null())
        for role in dict.fromkeys(frame["role"].to_list()):
            values = _values(frame.filter(pl.col("role") == role))
            if not values:
                continue
            if column in PER_SITE:
                out.append(Overlay(FILE_KEYS[column], title, values))
            else:
                out.append(Overlay(f"{FILE_KEYS[column]}.{role}", f"{title}, {role}", values))
    return out, notes


def node_data(overlay: Overlay, nodes: dict[str, tuple[str, str]]) -> dict:
    """`overlay` as Model Explorer's `ModelNodeData` (graph id -> `GraphNodeData`), its sites
    placed on their nodes (`nodes`: site -> (graph id, node id)); sites without a node are left out."""
    lo, hi = min(overlay.values.values()), max(overlay.values.values())
    log = overlay.log
    graphs: dict[str, dict] = {}
    for site, value in overlay.values.items():
        if site not in nodes:
            continue
        graph, node = nodes[site]
        t = _position(value, lo, hi, log)
        results = graphs.setdefault(graph, {"name": overlay.title, "results": {}, "gradient": gradient(lo, hi, log)})
        results["results"].setdefault(node, {"value": value, "bgColor": colour(t), "textColor": text_colour(t)})
    return graphs


def gradient(lo: float, hi: float, log: bool) -> list[dict]:
    """Model Explorer's gradient stops (0 at the minimum, 1 at the maximum) for values in [lo, hi]:
    on a log scale, LOG_STOPS stops where equal steps of log(value) fall."""
    if not log or hi <= lo:
        stops = [(i / (len(PALETTE) - 1), i / (len(PALETTE) - 1)) for i in range(len(PALETTE))]
    else:
        ts = [i / (LOG_STOPS - 1) for i in range(LOG_STOPS)]
        stops = [((lo * (hi / lo) ** t - lo) / (hi - lo), t) for t in ts]
        stops[0], stops[-1] = (0.0, 0.0), (1.0, 1.0)
    return [{"stop": round(s, 6), "bgColor": colour(t), "textColor": text_colour(t)} for s, t in stops]


def colour(t: float) -> str:
    """The palette at `t` in [0, 1], interpolated in RGB, as #rrggbb."""
    t = min(max(t, 0.0), 1.0) * (len(PALETTE) - 1)
    i = min(int(t), len(PALETTE) - 2)
    a, b = (tuple(int(c[k : k + 2], 16) for k in (1, 3, 5)) for c in PALETTE[i : i + 2])
    f = t - i
    return "#" + "".join(f"{round(x + (y - x) * f):02x}" for x, y in zip(a, b))


def text_colour(t: float) -> str:
    """White on the palette's dark half, black on its light half."""
    return "#ffffff" if t < 0.5 else "#000000"


def _position(value: float, lo: float, hi: float, log: bool) -> float:
    """Where `value` sits between `lo` and `hi` (0..1), on a log scale when `log`."""
    if hi <= lo:
        return 0.5
    if log:
        return math.log(value / lo) / math.log(hi / lo)
    return (value - lo) / (hi - lo)


def _values(frame: pl.DataFrame) -> dict[str, float]:
    """site -> finite value of a (site, v) frame."""
    return {
        site: float(v) for site, v in frame.select("site", "v").iter_rows() if v is not None and math.isfinite(float(v))
    }
