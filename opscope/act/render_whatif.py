"""The text of a what-if report: the original's own numbers, one row per variant, the skip
sweep and the greedy curve, and the answer in one sentence."""

from __future__ import annotations

from typing import TYPE_CHECKING

from opscope.text.numbers import flops, nbytes, num, percent
from opscope.text.table import table

if TYPE_CHECKING:
    from opscope.act.whatif import Outcome, WhatIfReport

# task -> the metric columns: (key, header, format); percentages are shares in [0, 1]
COLUMNS: dict[str, list[tuple[str, str, str]]] = {
    "causal-lm": [
        ("top1_agreement", "top-1 agree", "pct"),
        ("perplexity", "perplexity", ".3f"),
        ("accuracy", "next-token acc", "pct"),
    ],
    "encoder": [
        ("cosine_mean", "cos mean", ".5f"),
        ("cosine_min", "cos min", ".5f"),
        ("nn_agreement", "NN agree", "pct"),
        ("rank_rho", "rank ρ", ".4f"),
    ],
    "classifier": [("agreement", "agree", "pct"), ("accuracy", "accuracy", "pct")],
    "outputs": [
        ("argmax_agreement", "argmax agree", "pct"),
        ("rel_l2_max", "rel L2 max", ".2e"),
        ("cosine_min", "cos min", ".6f"),
    ],
}
SWEEP_ROWS = 12  # rows of the sweep table shown (most and least harmful), unless everything is asked for


def _table(head: list[str], rows: list[list[str]]) -> list[str]:
    """The first column left-aligned, the numbers right-aligned, a rule under the head."""
    return table(head, rows, right=lambda i: i > 0, rule=True)


def _cell(value: float | None, fmt: str) -> str:
    return percent(value) if fmt == "pct" else num(value, fmt)


def _cells(report: WhatIfReport, o: Outcome) -> list[str]:
    cells = [_cell(o.metrics.get(k), f) for k, _, f in COLUMNS[report.task]]
    return cells + [percent(report.saved(o), sign=True), percent(report.weights_saved(o), sign=True)]


def whatif_text(report: WhatIfReport, every: bool = False) -> str:
    """The report as text (see the module docstring); `every` lists every sweep row."""
    cols = COLUMNS[report.task]
    head = [h for _, h, _ in cols] + ["FLOPs saved", "weights saved"]
    own = ", ".join(f"{h} {_cell(report.baseline[k], f)}" for k, h, f in cols if k in report.baseline)
    out = [
        f"opscope whatif: {report.model} on {report.target}",
        f"  measured on {report.data}; original: {own or 'the reference'}; "
        f"{flops(report.flops)} per call, {nbytes(report.weights)} of matmul weights (static)",
    ]
    if report.outcomes:
        out += [""] + _table(["what"] + head, [[o.what] + _cells(report, o) for o in report.outcomes])
        if any("fakequant" in o.pipeline for o in report.outcomes):
            out += [
                "(a fake-quant build adds its round trips' FLOPs, which a real int kernel does not compute; "
                "its saving is the weight bytes, stored at its bits with an f32 scale per channel or group)"
            ]
    if report.sweep:
        rows = list(enumerate(report.sweep, 1))
        if not every and len(rows) > SWEEP_ROWS:
            half = SWEEP_ROWS // 2
            rows = rows[:half] + [(None, None)] + rows[-half:]
        out += [
            "",
            f"Skip sweep: {len(report.sweep)} residual blocks, one off at a time, least harmful first "
            "(measured through one gated build):",
        ]
        ranked = [
            [str(i), o.what.removeprefix("skip "), *_cells(report, o)] if o else ["...", "", *[""] * len(head)]
            for i, o in rows
        ]
        out += _table(["rank", "block"] + head, ranked)
    if report.curve:
        out += ["", "Greedy curve: skip the k least harmful blocks of the sweep together:"]
        names = [o.what.removeprefix("skip ") for o in report.sweep]
        ranked = [
            [str(k), names[k - 1] if k <= len(names) else "", *_cells(report, o)] for k, o in enumerate(report.curve, 1)
        ]
        out += _table(["k", "+ block"] + head, ranked)
        out += ["", _answer(report)]
    if report.layers:
        out += ["", f"One layer at a time ({len(report.layers)} layers), most harmful first:"]
        out += _table(["what"] + head, [[o.what] + _cells(report, o) for o in report.layers])
    out += [f"note: {n}" for n in report.notes]
    return "\n".join(out)


def _answer(report: WhatIfReport) -> str:
    keep = report.keep
    metric = dict((k, h) for k, h, _ in COLUMNS[report.task]).get(report.headline, report.headline)
    fmt = dict((k, f) for k, _, f in COLUMNS[report.task]).get(report.headline, ".4f")
    floor = f"{keep:.0%}" if fmt == "pct" else format(keep, ".2f")
    best = report.most_skippable()
    if best is None:
        return f"No block can go at >= {floor} {metric}."
    k = report.curve.index(best) + 1
    built = [o for o in report.outcomes if o.pipeline == best.pipeline]
    measured = built[-1] if built else best
    return (
        f"{k} of {len(report.sweep)} blocks can go at >= {floor} {metric} "
        f"({_cell(measured.metrics.get(report.headline), fmt)}{', built and measured' if built else ''}), "
        f"saving {percent(report.saved(measured))} of the FLOPs."
    )
