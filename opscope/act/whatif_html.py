"""A what-if report as one HTML page: the skip curve (quality against the FLOPs it saves), the
one-block-off sweep, per-layer sensitivity to a quantization and each variant's quality, every
number the report's; the text report below them."""

from __future__ import annotations

from typing import TYPE_CHECKING

from opscope.act.render_whatif import whatif_text
from opscope.html.page import Charts, esc, page, preformatted, section

if TYPE_CHECKING:
    from opscope.act.whatif import Outcome, WhatIfReport


def whatif_html(report: WhatIfReport, every: bool = False) -> str:
    """The page: the charts the report has data for, then the text (`every`: all sweep rows)."""
    charts, key = Charts(), report.headline
    base = report.baseline.get(key)
    lead = f"{report.model} on {report.target}, measured on {report.data}; the quality drawn is {key}"
    parts = [f'<p class="lead">{esc(lead)}' + (f" (original {base:.4g})" if base is not None else "") + ".</p>"]
    if report.curve:
        points = [
            {"x": 100 * report.saved(o), "y": o.metrics.get(key), "label": o.what}
            for o in report.curve
            if o.metrics.get(key) is not None
        ]
        xs = [p["x"] for p in points] or [0.0]
        lines = [{"name": f"keep {report.keep:.0%}", "points": [[min(xs), report.keep], [max(xs), report.keep]]}]
        parts.append(
            charts.add(
                "scatter",
                f"skip curve: {key} against the FLOPs saved, greedy k = 1, 2, … blocks off",
                points=points,
                lines=lines,
                xlabel="FLOPs saved (%)",
                ylabel=key,
            )
        )
    for outcomes, title in (
        (report.sweep, "one residual block off at a time, least harmful first"),
        (report.layers, "one layer rewritten at a time, most harmful first"),
        (report.outcomes, "each variant"),
    ):
        if outcomes:
            parts.append(_bars(charts, outcomes, key, f"{key}: {title}"))
    body = section("What if", "".join(parts)) + section(
        "The text report", preformatted(whatif_text(report, every)), level=3, open_=False
    )
    return page(f"opscope whatif: {report.model}", body, charts, report.notes)


def _bars(charts: Charts, outcomes: list[Outcome], key: str, title: str) -> str:
    return charts.add("bars", title, x=[o.what for o in outcomes], y=[o.metrics.get(key) for o in outcomes], ylabel=key)
