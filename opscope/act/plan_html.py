"""A kernel plan as one HTML page: each candidate's estimated speedup (the cost model's) against
its measured one, accepted candidates marked, and the candidates' table; the text plan below."""

from __future__ import annotations

from typing import TYPE_CHECKING

from opscope.act.render_plan import plan_text
from opscope.html.page import Charts, esc, page, preformatted, section, table

if TYPE_CHECKING:
    from opscope.act.specialize import KernelPlan


def plan_html(plan: KernelPlan) -> str:
    """The page of one kernel plan."""
    charts = Charts()
    measured = [c for c in plan.candidates if c.measured is not None]
    parts = [
        f'<p class="lead">{esc(plan.model)} on {esc(plan.target)}: {len(plan.candidates)} candidates from '
        f"{esc(plan.run)}, {len(measured)} measured, {len(plan.accepted)} accepted.</p>"
    ]
    if measured:
        points = [
            {
                "x": c.estimated,
                "y": c.measured.speedup,
                "label": f"{c.site} {c.kind}: {c.decision}",
                "marked": c.accepted,
            }
            for c in measured
            if c.estimated > 0 and c.measured.speedup > 0
        ]
        span = [v for p in points for v in (p["x"], p["y"])] or [1.0]
        lo, hi = min(span) / 1.2, max(span) * 1.2
        parts.append(
            charts.add(
                "scatter",
                "each candidate: measured speedup against the cost model's estimate (accepted marked; the line: equal)",
                points=points,
                lines=[{"name": "measured = estimated", "points": [[lo, lo], [hi, hi]]}],
                logx=True,
                logy=True,
                xlabel="estimated speedup",
                ylabel="measured speedup",
            )
        )
    rows = [
        [
            c.site,
            c.kind,
            f"{c.estimated:.2f}",
            "-" if c.measured is None else f"{c.measured.speedup:.2f}",
            c.parity or "-",
            c.decision,
        ]
        for c in plan.candidates
    ]
    parts.append(
        table(["site", "kind", "estimated", "measured", "parity", "decision"], rows, numeric=("estimated", "measured"))
    )
    body = section("Candidates", "".join(parts)) + section(
        "The text plan", preformatted(plan_text(plan)), level=3, open_=False
    )
    return page(f"opscope plan: {plan.model}", body, charts)
