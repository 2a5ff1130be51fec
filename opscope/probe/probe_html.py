"""A probe report as one HTML page: per weight, the errors of its cheaper forms (int4 per tensor and
per channel, 2:4, ternary), its stable rank as a share of its width, and the verdict table; the
text report below. Every number the report's."""

from __future__ import annotations

from typing import TYPE_CHECKING

from opscope.html.page import Charts, esc, page, preformatted, section, table
from opscope.probe.render import probe_text

if TYPE_CHECKING:
    from opscope.probe.report import ProbeReport

FORMS = (
    ("int4_channel", "int4 per channel"),
    ("int4_tensor", "int4 per tensor"),
    ("nm24", "2:4 sparsity"),
    ("ternary", "ternary (TWN)"),
)


def probe_html(report: ProbeReport) -> str:
    """The page of one probe run."""
    charts = Charts()
    names = list(report.probes)
    probes = [report.probes[n] for n in names]
    parts = [f'<p class="lead">{esc(report.name)}: {len(names)} weights probed in {report.seconds:.1f} s.</p>']
    if probes:
        for key, title in FORMS:
            y = [getattr(p, key) for p in probes]
            parts.append(charts.add("bars", f"relative weight error as {title}", x=names, y=y, ylabel="error"))
        parts.append(
            charts.add(
                "bars",
                "stable rank as a share of the weight's width (low: a low-rank form pays)",
                x=names,
                y=[p.stable_rank / p.cols if p.cols else None for p in probes],
                ylabel="share",
            )
        )
        rows = [
            [n, f"{p.rows}×{p.cols}", f"{p.stable_rank:.1f}", p.cardinality, f"{p.outlier_ratio:.1f}", p.verdict]
            for n, p in zip(names, probes)
        ]
        parts.append(
            table(
                ["weight", "shape", "stable rank", "distinct", "outlier ratio", "verdict"],
                rows,
                numeric=("stable rank", "distinct", "outlier ratio"),
            )
        )
    body = section("Probes", "".join(parts)) + section(
        "The text report", preformatted(probe_text(report)), level=3, open_=False
    )
    return page(f"opscope probe: {report.name}", body, charts)
