"""The text of a what-if report: the original's own numbers, one row per variant, the skip
sweep and the greedy curve, and the answer in one sentence."""

from __future__ import annotations

from typing import TYPE_CHECKING

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


def _flop(n: int) -> str:
    """`34.79 GFLOP`, `512 FLOP`."""
    from opscope.analysis.ledger import human_count

    count = human_count(n)
    return count + ("FLOP" if count[-1].isalpha() else " FLOP")


def _fmt(value: float | None, fmt: str) -> str:
    if value is None:
        return "-"
    return f"{100 * value:.1f} %" if fmt == "pct" else format(value, fmt)


def _table(headers: list[str], rows: list[list[str]]) -> list[str]:
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(headers)]

    def line(cells: list[str]) -> str:
        return "  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(cells, widths))).rstrip()

    return [line(headers), line(["-" * w for w in widths])] + [line(r) for r in rows]


def _cells(report: WhatIfReport, o: Outcome) -> list[str]:
    cells = [_fmt(o.metrics.get(k), f) for k, _, f in COLUMNS[report.task]]
    return cells + [f"{100 * report.saved(o):+.1f} %", f"{100 * report.weights_saved(o):+.1f} %"]


def whatif_text(report: WhatIfReport, every: bool = False) -> str:
    """The report as text (see the module docstring); `every` lists every sweep row."""
    from opscope.analysis.ledger import human_bytes

    cols = COLUMNS[report.task]
    head = [h for _, h, _ in cols] + ["FLOPs saved", "weights saved"]
    own = ", ".join(f"{h} {_fmt(report.baseline[k], f)}" for k, h, f in cols if k in report.baseline)
    out = [
        f"opscope whatif: {report.model} on {report.target}",
        f"  measured on {report.data}; original: {own or 'the reference'}; "
        f"{_flop(report.flops)} per call, {human_bytes(report.weights)} of matmul weights (static)",
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
        table = [
            [str(i), o.what.removeprefix("skip "), *_cells(report, o)] if o else ["...", "", *[""] * len(head)]
            for i, o in rows
        ]
        out += _table(["rank", "block"] + head, table)
    if report.curve:
        out += ["", "Greedy curve: skip the k least harmful blocks of the sweep together:"]
        names = [o.what.removeprefix("skip ") for o in report.sweep]
        table = [
            [str(k), names[k - 1] if k <= len(names) else "", *_cells(report, o)] for k, o in enumerate(report.curve, 1)
        ]
        out += _table(["k", "+ block"] + head, table)
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
        f"({_fmt(measured.metrics.get(report.headline), fmt)}{', built and measured' if built else ''}), "
        f"saving {100 * report.saved(measured):.1f} % of the FLOPs."
    )
