"""A layers report as one HTML page: every storage option of every layer (weight error against
bytes, the chosen plan marked), the chosen error and bytes per layer, the plans measured end to
end, and the text report below them; every number the report's."""

from __future__ import annotations

from typing import TYPE_CHECKING

from opscope.html.page import Charts, esc, page, preformatted, section, table
from opscope.probe.render import layers_text
from opscope.text.numbers import nbytes

if TYPE_CHECKING:
    from opscope.probe.report import LayersReport


def layers_html(report: LayersReport, every: bool = False) -> str:
    """The page of one per-layer plan (`every`: the text lists every layer)."""
    charts, plan = Charts(), report.plan
    points, chosen_rows, errors, sizes = [], [], [], []
    for profile, pick in zip(report.profiles, plan.choice):
        for i, option in enumerate(profile.options):
            if profile.dense_bytes and option.rel_err > 0:
                points.append(
                    {
                        "x": option.bytes / profile.dense_bytes,
                        "y": option.rel_err,
                        "label": f"{profile.name} {option.label}",
                        "marked": i == pick,
                    }
                )
        chosen = profile.options[pick]
        chosen_rows.append(
            [profile.name, chosen.label, f"{chosen.rel_err:.4f}", nbytes(chosen.bytes), nbytes(profile.dense_bytes)]
        )
        errors.append(chosen.rel_err)
        sizes.append(chosen.bytes / profile.dense_bytes if profile.dense_bytes else None)
    names = [p.name for p in report.profiles]
    parts = [
        f'<p class="lead">{esc(report.name)}: {len(names)} weights, {nbytes(plan.dense_bytes)} dense; the '
        f"{esc(report.allocator)} plan stores {nbytes(plan.total_bytes)} ({plan.compression:.2f}× smaller) at a "
        f"total weight error of {plan.total_err:.4g}.</p>"
    ]
    if points:
        parts.append(
            charts.add(
                "scatter",
                "every option of every layer: weight error against bytes (share of dense); the plan's choices marked",
                points=points,
                logy=True,
                xlabel="bytes / dense",
                ylabel="relative weight error",
            )
        )
    parts.append(charts.add("bars", "the chosen option's weight error per layer", x=names, y=errors, ylabel="error"))
    parts.append(
        charts.add("bars", "the chosen option's bytes per layer (share of dense)", x=names, y=sizes, ylabel="bytes")
    )
    if report.measured and report.headline:
        measured = [
            {"x": o.bytes, "y": o.metrics.get(report.headline), "label": o.label}
            for o in report.measured
            if o.metrics.get(report.headline) is not None
        ]
        parts.append(
            charts.add(
                "scatter",
                f"plans built into the model and measured: {report.headline} against bytes",
                points=measured,
                xlabel="bytes",
                ylabel=report.headline,
            )
        )
    head = ["layer", "option", "weight error", "bytes", "dense"]
    parts.append(table(head, chosen_rows, numeric=("weight error",), caption="the plan, layer by layer"))
    body = section("Layers", "".join(parts)) + section(
        "The text report", preformatted(layers_text(report, every)), level=3, open_=False
    )
    return page(f"opscope layers: {report.name}", body, charts)
