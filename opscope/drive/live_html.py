"""A served run (`opscope live`) as one HTML page: what was served and the trace's truth, then
the live report's charts; the text below them."""

from __future__ import annotations

from typing import TYPE_CHECKING

from opscope.drive.live_run import live_text
from opscope.html.page import Charts, esc, page, preformatted, section
from opscope.online.report_html import live_sections

if TYPE_CHECKING:
    from opscope.drive.live_run import LiveRun


def live_run_html(run: LiveRun) -> str:
    """The page of one served trace."""
    charts, truth = Charts(), run.truth()
    lead = (
        f"{run.name}: {run.trace.description}; 1 call in {run.every} sampled. Trace truth: {truth['stream']:.1%} of "
        f"requests repeat an earlier one, {truth['sampled']:.1%} of the sampled ones."
    )
    body = section("Live", f'<p class="lead">{esc(lead)}</p>' + live_sections(run.report, charts)) + section(
        "The text report", preformatted(live_text(run)), level=3, open_=False
    )
    return page(f"opscope live: {run.name}", body, charts)
