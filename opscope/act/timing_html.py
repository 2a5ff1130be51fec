"""A timing report as one HTML page: a roofline scatter of every timed dispatch (achieved GFLOP/s
against arithmetic intensity, log-log, under the target's measured ceilings: its streaming
bandwidth and its f32 matmul rate, or, when no compute ceiling was measured, the fastest
dispatch) and bars of where the call's time goes; the text report below them."""

from __future__ import annotations

from typing import TYPE_CHECKING

from opscope.act.timing import timing_text
from opscope.html.page import Charts, esc, page, preformatted, section

if TYPE_CHECKING:
    from opscope.act.timing import TimingReport


def timing_html(report: TimingReport) -> str:
    """The page: roofline, time per dispatch, the text report."""
    charts = Charts()
    timed = [d for d in report.dispatches if d.roofline is not None and d.us is not None]
    parts = [
        f'<p class="lead">{esc(report.model)} on {esc(report.target)}: whole call {report.call_ms:.3f} ms '
        f"(median), Σ dispatches {report.dispatch_ms:.3f} ms.</p>"
        f"<p>Ceilings: {esc(report.ceilings or f'bandwidth {report.peak_gbps:.1f} GB/s (given)')}.</p>"
    ]
    if timed:
        points = [
            {"x": d.roofline.intensity, "y": d.roofline.achieved_gflops, "label": f"{d.name} ({d.us:.2f} µs)"}
            for d in timed
            if d.roofline.intensity > 0 and d.roofline.achieved_gflops > 0
        ]
        xs = [p["x"] for p in points] or [1.0]
        lo, hi = min(xs) / 2, max(xs) * 2
        bw, top = report.peak_gbps, report.peak_gflops
        knee = min(max(top / bw, lo), hi) if top else hi  # the ridge: the roof bends from bandwidth to compute
        measured = "IREE streaming" if top else "bandwidth"
        lines = [{"name": f"{measured} {bw:.1f} GB/s", "points": [[lo, bw * lo], [knee, bw * knee]]}]
        if top:
            lines.append({"name": f"IREE f32 matmul {top:.1f} GFLOP/s", "points": [[knee, top], [hi, top]]})
        best = max((p["y"] for p in points), default=0.0)
        if best > (top or 0.0):  # no compute ceiling measured, or a dispatch above it (bf16, int8, a better shape)
            lines.append({"name": f"fastest dispatch {best:.1f} GFLOP/s", "points": [[lo, best], [hi, best]]})
        parts.append(
            charts.add(
                "scatter",
                "roofline: each timed dispatch, achieved GFLOP/s against FLOP per byte (log-log)",
                points=points,
                lines=lines,
                logx=True,
                logy=True,
                xlabel="FLOP/B",
                ylabel="GFLOP/s",
            )
        )
        order = sorted(timed, key=lambda d: -(d.calls or 1) * d.us)
        parts.append(
            charts.add(
                "bars",
                "time per call in each dispatch (µs × calls), longest first",
                x=[d.name for d in order],
                y=[(d.calls or 1) * d.us for d in order],
                ylabel="µs",
                xlabel="dispatch",
            )
        )
    body = section("Dispatches", "".join(parts)) + section(
        "The text report", preformatted(timing_text(report)), level=3, open_=False
    )
    return page(f"opscope timing: {report.model}", body, charts)
