"""A run as one self-contained HTML page (`opscope report RUN`, `render(view, "html")`): the
coverage and the findings (a table that sorts and filters), a layer × site-kind heatmap per
statistic, the inference dynamics, and each tapped tensor's histogram, per-channel max|x| and
range per step. Every number drawn is the run's (`RunView`); the page's last section is the
text report, so nothing the terminal shows is missing.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import polars as pl

from opscope.html.page import Charts, esc, page, preformatted, section, table
from opscope.mining.render import coverage_line, mine_text
from opscope.mining.run_view import GRID_STATS, anchor, finite_or_none, layer_of
from opscope.mining.signals import OUTLIER_RATIO

if TYPE_CHECKING:
    from opscope.mining.run_view import RunView, Tensor

MAX_BARS = 512  # channels drawn one bar each up to this; more are drawn as groups' largest
NO_LAYER = "–"


def run_html(view: RunView) -> str:
    """The whole page of one run."""
    charts = Charts()
    report = view.report
    parts = [_summary(view), _findings(view), _grids(view, charts), _dynamics(view, charts), _tensors(view, charts)]
    parts.append(section("The text report", preformatted(mine_text(report)), level=3, open_=False))
    return page(f"opscope report: {view.path}", "\n".join(p for p in parts if p), charts, [*report.notes, *view.notes])


def _summary(view: RunView) -> str:
    c = view.report.counts
    line = f"{view.report.rows:,} rows; " + ", ".join(
        f"{c[k]} {k if c[k] != 1 else k[:-1]}" for k in ("runs", "steps", "backends", "dists", "sites") if k in c
    )
    cov = coverage_line(view.report)
    return section("Run", f'<p class="lead">{esc(line)}</p>' + (f"<p>{esc(cov)}</p>" if cov else ""))


def _findings(view: RunView) -> str:
    ranked = view.report.ranked
    if not ranked.height:
        return section("Findings", "<p>None: every tapped tensor looks dense to the sketches.</p>")
    head = ["site", "role", "score", "exploit", "backend", "dist", "rank"]
    rows, links = [], []
    for r in ranked.iter_rows(named=True):
        rows.append([r["site"], r["role"], f"{r['score']:.2f}", r["suggestion"], r["backend"], r["dist"], r["rank"]])
        links.append(anchor(r["site"], r["role"]))
    body = table(head, rows, numeric=("score", "rank"), links=links)
    return section("Findings", f"<p>{ranked.height} tensors with an exploitable signal, best first.</p>" + body)


def _grids(view: RunView, charts: Charts) -> str:
    """One heatmap per statistic: rows the site kinds (× role), columns the layers."""
    grid = view.grid
    layers = sorted({n for n in grid["layer"].to_list() if n is not None})
    cols = [str(n) for n in layers] + ([NO_LAYER] if grid["layer"].null_count() else [])
    figures = []
    for name, title, log in GRID_STATS:
        sub = grid.filter(pl.col(name).is_not_null() & pl.col(name).is_finite())
        if not sub.height:
            continue
        kinds = list(dict.fromkeys(f"{k} · {r}" for k, r in sub.select("kind", "role").iter_rows()))
        values = [[None] * len(cols) for _ in kinds]
        links = [[None] * len(cols) for _ in kinds]
        for site, role, kind, layer, v in sub.select("site", "role", "kind", "layer", name).iter_rows():
            i, j = kinds.index(f"{kind} · {role}"), cols.index(NO_LAYER if layer is None else str(layer))
            values[i][j], links[i][j] = finite_or_none(float(v)), anchor(site, role)
        positive = all(v is None or v > 0 for row in values for v in row)
        figures.append(
            charts.add("heatmap", title, rows=kinds, cols=cols, values=values, links=links, log=log and positive)
        )
    if not figures:
        return ""
    lead = (
        f"<p>Each cell one tapped tensor (a click opens it): {len(layers)} layers, the layer read from the "
        f"site's name, '{NO_LAYER}' for sites outside the layers.</p>"
    )
    return section("Across layers", lead + "".join(figures))


def _dynamics(view: RunView, charts: Charts) -> str:
    d = view.report.dynamics
    if d is None or d.empty:
        return ""
    parts = []
    if d.heads.height:
        sites = list(dict.fromkeys(d.heads["site"].to_list()))
        layers = [layer_of(s)[1] for s in sites]
        by_layer = None not in layers and len(set(layers)) == len(layers)
        cols = [str(n) for n in layers] if by_layer else [str(i) for i in range(len(sites))]
        heads = sorted(set(d.heads["head"].to_list()))
        for stat, title in (("entropy", "attention entropy per head"), ("top10", "attention mass on the top 10% keys")):
            values = [[None] * len(sites) for _ in heads]
            for site, head, v in d.heads.select("site", "head", stat).iter_rows():
                values[heads.index(head)][sites.index(site)] = finite_or_none(v)
            rows = [f"head {h}" for h in heads]
            axis = "layer" if by_layer else "attention site #"
            parts.append(
                charts.add("heatmap", f"{title} (columns: {axis})", rows=rows, cols=cols, values=values, colname=axis)
            )
        sinks = d.attention.select("site", "sinks", "qmax", "entropy").iter_rows()
        parts.append(
            table(
                ["site", "sink positions", "qmax", "entropy"],
                [[s, ", ".join(map(str, k or [])) or "none", f"{q:.3f}", f"{e:.3f}"] for s, k, q, e in sinks],
                numeric=("qmax", "entropy"),
                filter_=False,
            )
        )
    if d.residual.height:
        res = d.residual
        parts.append(
            charts.add(
                "bars",
                "block influence per residual add, in model order",
                x=res["site"].to_list(),
                y=[finite_or_none(v) for v in res["bi"].to_list()],
                ylabel="BI",
                logy=bool((res["bi"] > 0).all()),
            )
        )
    if d.routing.height:
        for r in d.routing.iter_rows(named=True):
            parts.append(
                charts.add("bars", f"{r['site']}: load per expert (% of choices)", y=r["load"], xlabel="expert")
            )
    return section("Inference dynamics", "".join(parts))


def _tensors(view: RunView, charts: Charts) -> str:
    """Each tapped tensor's section, closed until opened (its charts draw then)."""
    lo, hi = view.hist_range
    out = []
    for t in view.tensors:
        out.append(
            section(
                f"{t.site} · {t.role} ({t.numel:,} elements)",
                _tensor(t, lo, hi, charts),
                anchor(t.site, t.role),
                3,
                False,
            )
        )
    lead = f"<p>{len(view.tensors)} tapped tensors; histograms over [{lo:g}, {hi:g}] in the run's bins.</p>"
    return section("Tapped tensors", lead + "\n".join(out))


def _tensor(t: Tensor, lo: float, hi: float, charts: Charts) -> str:
    figures = []
    if t.hist:
        width = (hi - lo) / len(t.hist)
        centres = [f"{lo + (i + 0.5) * width:.3g}" for i in range(len(t.hist))]
        figures.append(
            charts.add(
                "bars",
                "histogram (values per bin, mean over observations)",
                x=centres,
                y=[finite_or_none(v) for v in t.hist],
            )
        )
    if t.chan_maxabs:
        figures.append(_channels(t.chan_maxabs, charts))
    if t.steps:
        figures.append(
            charts.add(
                "line",
                "value range per step",
                x=list(t.steps),
                series=[
                    {"name": "max", "y": [finite_or_none(v) for v in t.maxs]},
                    {"name": "min", "y": [finite_or_none(v) for v in t.mins]},
                ],
                xlabel="step",
            )
        )
    return "".join(figures) or "<p>No value sketches recorded for this tensor.</p>"


def _channels(values: tuple[float, ...], charts: Charts) -> str:
    """Per-channel max|x|, outlier channels (above OUTLIER_RATIO × the mean) marked; more than
    MAX_BARS channels are drawn as groups, each its largest, marked when it holds an outlier."""
    finite = [v for v in values if math.isfinite(v)]
    mean = sum(finite) / len(finite) if finite else 0.0
    outliers = {i for i, v in enumerate(values) if mean > 0 and math.isfinite(v) and v > OUTLIER_RATIO * mean}
    group = max(1, math.ceil(len(values) / MAX_BARS))
    ys, xs, marked = [], [], []
    for g, start in enumerate(range(0, len(values), group)):
        chunk = [v for v in values[start : start + group] if math.isfinite(v)]
        ys.append(max(chunk) if chunk else None)
        xs.append(str(start) if group == 1 else f"{start}–{min(start + group, len(values)) - 1}")
        if any(i in outliers for i in range(start, start + group)):
            marked.append(g)
    grouped = f", {group} channels a bar" if group > 1 else ""
    title = f"max|x| per channel ({len(outliers)} outlier channel{'s' * (len(outliers) != 1)} marked{grouped})"
    return charts.add("bars", title, x=xs, y=ys, marked=marked, xlabel="channel")
