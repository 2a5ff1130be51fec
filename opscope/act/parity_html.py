"""A parity report as one HTML page: each paired op's error (max |a − b| / max |a|) in A's program
order on a log scale, the tolerance drawn, ops beyond it marked, the first divergence named;
the text report below."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from opscope.act.op_compare import parity_text
from opscope.html.page import Charts, esc, page, preformatted, section

if TYPE_CHECKING:
    from opscope.act.op_compare import ParityReport

FLOOR = 1e-12  # bit-identical ops are drawn here (a log scale has no zero)


def parity_html(report: ParityReport, all_ops: bool = False) -> str:
    """The page of one op-by-op comparison (`all_ops`: the text lists every op)."""
    charts = Charts()
    first = report.first_beyond()
    lead = (
        f"A: {report.a}; B: {report.b}. {report.ops_checked} ops paired, {report.identical} bit-identical, "
        f"{len(report.beyond())} beyond the tolerance {report.tol:g}"
        + (f"; the first: #{first.index} {first.name} ({first.op})." if first else ".")
    )
    parts = [f'<p class="lead">{esc(lead)}</p>']
    finite = [d for d in report.ops if math.isfinite(d.err)]
    if report.ops:
        points = [
            {
                "x": d.index,
                "y": max(d.err, FLOOR) if math.isfinite(d.err) else None,
                "label": f"#{d.index} {d.name} ({d.op}){'' if math.isfinite(d.err) else ': not finite'}",
                "marked": not d.within(report.tol),
            }
            for d in report.ops
        ]
        xs = [d.index for d in report.ops]
        lines = [{"name": f"tolerance {report.tol:g}", "points": [[min(xs), report.tol], [max(xs), report.tol]]}]
        infinite = len(report.ops) - len(finite)
        title = "error per op in A's program order (log; bit-identical ops at 1e-12; beyond the tolerance marked)"
        parts.append(
            charts.add(
                "scatter",
                title + (f"; {infinite} ops with a non-finite error not drawn" if infinite else ""),
                points=points,
                lines=lines,
                logy=True,
                xlabel="op #",
                ylabel="error",
            )
        )
    body = section("Parity", "".join(parts)) + section(
        "The text report", preformatted(parity_text(report, all_ops)), level=3, open_=False
    )
    return page(f"opscope parity: {report.a} vs {report.b}", body, charts)
