"""A live report as one HTML page: recurrence per site (sampled and over every call), the hot
inputs, the drift between the first and last third of the sampled calls, and the loads; the
text report below them."""

from __future__ import annotations

from typing import TYPE_CHECKING

from opscope.html.page import Charts, page, preformatted, section, table
from opscope.online.report import live_report_text

if TYPE_CHECKING:
    from opscope.online.report import LiveReport

DRIFT = ("density", "rms", "crest")  # the order of SiteDrift's first/last means


def live_sections(report: LiveReport, charts: Charts) -> str:
    """The charts and tables of a live report (a page's body, or part of a served run's)."""
    parts = []
    if report.sites:
        names = [s.site for s in report.sites]
        parts.append(
            charts.add(
                "bars",
                "recurrence per site: 1 − distinct/samples over the sampled calls",
                x=names,
                y=[s.sampled for s in report.sites],
            )
        )
        if any(s.stream is not None for s in report.sites):
            parts.append(
                charts.add("bars", "recurrence per site over every call", x=names, y=[s.stream for s in report.sites])
            )
    if report.hot:
        parts.append(
            charts.add(
                "bars",
                "hot inputs: share of every call",
                x=[h.label for h in report.hot],
                y=[h.share for h in report.hot],
            )
        )
    if report.drift:
        for k, stat in enumerate(DRIFT):
            series = [
                {"name": "first third", "y": [d.first[k] for d in report.drift]},
                {"name": "last third", "y": [d.last[k] for d in report.drift]},
            ]
            parts.append(
                charts.add(
                    "line",
                    f"drift: mean {stat} per site, first vs last third of the sampled calls",
                    x=list(range(len(report.drift))),
                    series=series,
                    xlabel="site #",
                )
            )
        parts.append(
            table(
                ["site #", "site", "verdict"],
                [[i, d.site, d.verdict] for i, d in enumerate(report.drift)],
                numeric=("site #",),
                filter_=False,
            )
        )
    for load in report.loads:
        parts.append(charts.add("bars", f"{load.site} {load.stat}: {load.summary}", y=load.shares))
    return "".join(parts)


def live_report_html(report: LiveReport) -> str:
    """The page of a live report (merged sketches, or one run's)."""
    charts = Charts()
    body = section("Live", live_sections(report, charts)) + section(
        "The text report", preformatted(live_report_text(report)), level=3, open_=False
    )
    return page("opscope live", body, charts)
