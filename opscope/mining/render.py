"""Renderers of a `MineReport`: one class per output format, chosen by name.

`text` (aligned, for a terminal), `markdown`, `json` (schema `opscope-mine/4`, fields in
docs/mining.md) and `findings` (the short form `opscope profile` prints). Series with too
few steps for a verdict say "too few steps (n < k)" in every format; JSON has null there.
"""

from __future__ import annotations

import json
import math
import textwrap
from collections.abc import Callable
from typing import TYPE_CHECKING

import polars as pl

from opscope.errors import OpscopeError
from opscope.mining import render_dynamics
from opscope.mining.signals import DENSE, MIN_RANKED_NUMEL, unranked_small
from opscope.mining.temporal import MIN_STEPS_REUSE, MIN_STEPS_STATIONARY, NO_REUSE, too_few
from opscope.text.numbers import count, num, percent
from opscope.text.table import markdown_table, table

if TYPE_CHECKING:
    from opscope.mining.dynamics import DynamicsReport
    from opscope.mining.report import MineReport
    from opscope.mining.run_view import RunView

JSON_SCHEMA = "opscope-mine/4"


def _fit(text: str, width: int = 48) -> str:
    """A site name, shortened in the middle only when it is very long (its tail tells sites apart)."""
    if len(text) <= width:
        return text
    keep = width - 1
    return text[: keep // 2] + "…" + text[len(text) - (keep - keep // 2) :]


Column = tuple[str, Callable[[dict], str]]


def _text(key: str, fit: bool = False) -> Callable[[dict], str]:
    """A column read as text from a frame row (a site name fitted to the table's width)."""
    return (lambda r: _fit(r[key])) if fit else (lambda r: str(r[key]))


def _num(key: str, spec: str) -> Callable[[dict], str]:
    """A column written by `text.num` with a format spec ('-' for no value)."""
    return lambda r: num(r[key], spec)


def _pct(key: str, digits: int = 1) -> Callable[[dict], str]:
    """A column written as a percentage."""
    return lambda r: percent(r[key], digits=digits)


_KEY = [("backend", _text("backend")), ("dist", _text("dist")), ("site", _text("site", fit=True))]
_RUN_KEY = [("run", _text("run_id")), *_KEY]
SIGNAL_COLUMNS: list[Column] = [
    *_KEY,
    ("role", _text("role")),
    ("obs", _text("observations")),
    ("density", _num("density", ".3f")),
    ("zchan", _num("zchan", ".3f")),
    ("outlier", _num("outlier", ".2f")),
    ("histtop", _num("histtop", ".3f")),
    ("pos_cv", _num("pos_cv", ".2f")),
    ("adj", _num("adj", ".2f")),
    ("suggested exploit", _text("suggestion")),
]
CROSS_COLUMNS: list[Column] = [
    *_RUN_KEY,
    ("role", _text("role")),
    ("steps", _text("steps")),
    ("l1 mean", _num("l1_mean", ".5g")),
    ("l1 cv", _num("l1_cv", ".2e")),
    ("sumsq cv", _num("sumsq_cv", ".2e")),
    ("elemsig cv", _num("elemsig_cv", ".2e")),
    ("verdict", _text("verdict")),
]
OPP_COLUMNS: list[Column] = [
    *_RUN_KEY,
    ("steps", _text("steps")),
    ("GFLOP", _num("gflops", ".3f")),
    ("%cost", _pct("cost_share")),
    ("recur", _pct("recur", digits=0)),
    ("drift", _num("drift", ".3f")),
    ("save", _pct("savings")),
    ("recommendation", _text("recommendation")),
]
AGG_COLUMNS: list[Column] = [
    ("run", _text("run_id")),
    ("backend", _text("backend")),
    ("dist", _text("dist")),
    ("sites", _text("sites")),
    ("recoverable", _pct("savings")),
]
DENSE_NOTE = (
    "dense: none of the six sketch signals fired; low rank, for one, is not observable in "
    "sketches (it needs a deep dump)."
)


def _small_line(report: MineReport) -> str:
    """What the ranking leaves out on purpose: signals on tensors too small to carry a statistic."""
    n = unranked_small(report.signals)
    if not n:
        return ""
    return (
        f"{n} tensor{'s' if n != 1 else ''} under {MIN_RANKED_NUMEL} elements with a signal not ranked "
        "(too few values for a statistic; listed with the value signals)"
    )


def _section(frame: pl.DataFrame, columns: list[Column]) -> tuple[list[str], list[list[str]]]:
    """A frame as a table's head and rows, one cell per column spec."""
    return [h for h, _ in columns], [[cell(r) for _, cell in columns] for r in frame.iter_rows(named=True)]


def _summary(report: MineReport) -> str:
    c = report.counts
    parts = [f"{report.rows:,} rows"] + [
        f"{c[k]} {k if c[k] != 1 else k[:-1]}" for k in ("runs", "steps", "backends", "dists", "sites") if k in c
    ]
    return ", ".join(parts)


def coverage_line(report: MineReport, kinds: int = 3) -> str | None:
    """`Tapped sites: 99.5% of the module's 6.85 M FLOPs per call; not tapped: softmax 0.2%, ...`,
    naming the `kinds` largest untapped kinds of op (0: none); None without a module total."""
    cov = report.coverage
    if cov is None:
        return None
    module = report.counts["module_flops"]
    rest = cov.slice(1)
    text = f"Tapped sites: {percent(cov['share'][0])} of the module's {count(module)} FLOPs per call"
    if rest.height and kinds:
        shown = ", ".join(f"{w} {percent(s)}" for w, s in rest.head(kinds).select("what", "share").iter_rows())
        extra = rest.height - kinds
        more = f" and {extra} more kind{'s' * (extra != 1)}" if extra > 0 else ""
        text += f"; not tapped: {shown}{more}"
    unknown = report.counts.get("unknown_ops", 0)
    if unknown:
        text += f"; {unknown} op{'s' * (unknown != 1)} of unknown FLOPs not counted"
    return text + "."


def _costs_line(report: MineReport) -> str:
    if report.costs_source:
        return f"FLOPs from {report.costs_source}"
    return "no site,flops sidecar: cost shares and savings are 0 (rows ordered by reuse)"


class TextRenderer:
    """Aligned plain text for a terminal: numbers right-aligned, names left-aligned, '-' for no value."""

    numeric = {
        "obs",
        "density",
        "zchan",
        "outlier",
        "histtop",
        "pos_cv",
        "adj",
        "run",
        "steps",
        "l1 mean",
        "l1 cv",
        "GFLOP",
        "%cost",
        "recur",
        "drift",
        "save",
        "sites",
        "recoverable",
        "sumsq cv",
        "elemsig cv",
        *render_dynamics.NUMERIC,
    }

    def table(self, head: list[str], rows: list[list[str]]) -> str:
        return "\n".join(table(head, rows, right=lambda i: head[i] in self.numeric, rule=True))

    def render(self, report: MineReport) -> str:
        out = [f"opscope mine: {_summary(report)}"]
        out += [f"note: {n}" for n in report.notes]
        if report.coverage is not None:
            out += ["", coverage_line(report, kinds=len(report.coverage))]
        out.append("")
        out.append("Value signals per (backend, dist, site, role), mean over observations (run × step):")
        out.append(
            self.table(*_section(report.signals, SIGNAL_COLUMNS))
            if report.signals.height
            else "  (no keys with value sketches)"
        )
        if report.signals.height and (report.signals["exploit"] == DENSE).any():
            out.append(DENSE_NOTE)
        out.append("")
        out.append("Ranked exploitable sites (by sketch signal strength):")
        if not report.ranked.height:
            out.append("  (none — all sites look dense/structureless to the current sketches)")
        if small := _small_line(report):
            out.append(f"  {small}")
        for r in report.ranked.iter_rows(named=True):
            out.append(
                f"  {r['rank']:>3}. [{r['score']:.2f}] {r['backend']}/{r['dist']}/{r['site']}/{r['role']}: "
                f"{r['suggestion']}"
            )
        if report.dynamics is not None:
            out += ["", textwrap.fill("Inference dynamics (" + render_dynamics.LEGEND + ")", 120)]
            for title, text in render_dynamics.tables(report.dynamics, self.table):
                out += ["", title + ":", text]
        if report.cross_step is not None:
            out += [
                "",
                f"Cross-step temporal analysis ({report.steps} steps; l1, sumsq and elemsig per run, "
                f"ordered by step; a verdict needs {MIN_STEPS_STATIONARY} steps):",
            ]
            out.append(
                self.table(*_section(report.cross_step, CROSS_COLUMNS))
                if report.cross_step.height
                else "  (no series with two or more steps)"
            )
        if report.opportunities is not None:
            out += [
                "",
                f"Temporal opportunities (lhs fingerprints per run; an action needs {MIN_STEPS_REUSE} steps; "
                f"{_costs_line(report)}):",
            ]
            out.append(
                self.table(*_section(report.opportunities, OPP_COLUMNS))
                if report.opportunities.height
                else "  (no lhs series with two or more steps)"
            )
            if report.aggregate is not None and report.aggregate.height:
                out += [
                    "",
                    "Aggregate recoverable compute (Σ cost-share × reuse) per run:",
                    self.table(*_section(report.aggregate, AGG_COLUMNS)),
                ]
        return "\n".join(out) + "\n"


class MarkdownRenderer:
    """GitHub-flavoured Markdown: a heading and a table per section."""

    def table(self, head: list[str], rows: list[list[str]]) -> str:
        return "\n".join(markdown_table(head, rows))

    def render(self, report: MineReport) -> str:
        out = ["# opscope mine", "", _summary(report), ""]
        out += [f"> note: {n}" for n in report.notes] + ([""] if report.notes else [])
        if report.coverage is not None:
            out += [
                "## Coverage",
                "",
                coverage_line(report, kinds=0),
                "",
                self.table(
                    ["what", "FLOPs", "share of the module"],
                    [[w, f"{f:,}", percent(s)] for w, f, s in report.coverage.iter_rows()],
                ),
                "",
            ]
        out += ["## Value signals", "", self.table(*_section(report.signals, SIGNAL_COLUMNS)), ""]
        if report.signals.height and (report.signals["exploit"] == DENSE).any():
            out += [DENSE_NOTE, ""]
        out += ["## Ranked exploitable sites", ""]
        if small := _small_line(report):
            out += [small, ""]
        if report.ranked.height:
            out.append(
                self.table(
                    ["rank", "score", "backend", "dist", "site", "role", "exploit"],
                    [
                        [
                            str(r["rank"]),
                            f"{r['score']:.2f}",
                            r["backend"],
                            r["dist"],
                            r["site"],
                            r["role"],
                            r["suggestion"],
                        ]
                        for r in report.ranked.iter_rows(named=True)
                    ],
                )
            )
        else:
            out.append("(none — all sites look dense/structureless to the current sketches)")
        out.append("")
        if report.dynamics is not None:
            out += ["## Inference dynamics", "", render_dynamics.LEGEND, ""]
            for title, text in render_dynamics.tables(report.dynamics, self.table, heads=True):
                out += [f"### {title}", "", text, ""]
        if report.cross_step is not None:
            out += [
                f"## Cross-step temporal analysis ({report.steps} steps)",
                "",
                f"l1, sumsq and elemsig per run; a verdict needs {MIN_STEPS_STATIONARY} steps.",
                "",
                self.table(*_section(report.cross_step, CROSS_COLUMNS)),
                "",
            ]
        if report.opportunities is not None:
            out += [
                "## Temporal opportunities",
                "",
                f"{_costs_line(report)}; an action needs {MIN_STEPS_REUSE} steps.",
                "",
                self.table(*_section(report.opportunities, OPP_COLUMNS)),
                "",
            ]
            if report.aggregate is not None:
                out += [
                    "### Aggregate recoverable compute per run",
                    "",
                    self.table(*_section(report.aggregate, AGG_COLUMNS)),
                    "",
                ]
        return "\n".join(out)


def _records(frame: pl.DataFrame | None) -> list[dict] | None:
    """Frame rows as JSON-safe dicts: non-finite floats become null."""
    if frame is None:
        return None
    return [
        {k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in r.items()}
        for r in frame.to_dicts()
    ]


def dynamics_records(d: DynamicsReport) -> dict[str, list[dict]]:
    """The dynamics tables as JSON-safe records, by table name."""
    return {
        "attention": _records(d.attention),
        "heads": _records(d.heads),
        "routing": _records(d.routing),
        "gates": _records(d.gates),
        "residual": _records(d.residual),
    }


class JsonRenderer:
    """A stable JSON document (schema `opscope-mine/4`, fields in docs/mining.md)."""

    def render(self, report: MineReport) -> str:
        doc = {
            "schema": JSON_SCHEMA,
            "rows": report.rows,
            "steps": report.steps,
            "min_steps": {"stationary": MIN_STEPS_STATIONARY, "reuse": MIN_STEPS_REUSE},
            "counts": report.counts,
            "notes": list(report.notes),
            "site_costs": report.costs_source,
            "signals": _records(report.signals),
            "ranked": _records(report.ranked),
            "cross_step": _records(report.cross_step),
            "opportunities": _records(report.opportunities),
            "aggregate": _records(report.aggregate),
            "coverage": _records(report.coverage),
            "dynamics": None if report.dynamics is None else dynamics_records(report.dynamics),
        }
        return json.dumps(doc, indent=2, ensure_ascii=False, allow_nan=False) + "\n"


def _too_few(count: int, frame: pl.DataFrame, needed: int) -> str:
    """' N more have too few steps (n < k).' for the series left without a verdict, else ''."""
    if not count:
        return ""
    short = frame.filter(pl.col("steps") < needed)["steps"].max()
    return f" {count} more {'has' if count == 1 else 'have'} {too_few(short, needed)}."


def _stationary_line(report: MineReport) -> str:
    """The findings' sentence on stationary tensors; never a count drawn from too few steps."""
    cross = report.cross_step
    judged = cross.filter(pl.col("stationary").is_not_null())
    if not judged.height:
        return (
            f"Across {report.steps} steps: {too_few(cross['steps'].max(), MIN_STEPS_STATIONARY)} to say which "
            f"of {cross.height} tensors are stationary."
        )
    st = judged.filter(pl.col("stationary"))
    roles = st.group_by("role", maintain_order=True).agg(pl.len()).rows()
    weak = st.filter(~pl.col("basis").str.contains("elemsig")).height
    return (
        f"Across {report.steps} steps: {st.height} of {judged.height} tensors are stationary "
        "(precompute / prepack): "
        + (", ".join(f"{n} {role}" for role, n in roles) if roles else "none")
        + (f" ({weak} of them without a usable elemsig fingerprint)" if weak else "")
        + f"; {judged.height - st.height} change from step to step."
        + _too_few(cross.height - judged.height, cross, MIN_STEPS_STATIONARY)
    )


class FindingsRenderer:
    """The short form `opscope profile` prints: the top findings, what is stationary, what
    temporal reuse is worth; the full tables go to report.md."""

    top: int = 12

    def render(self, report: MineReport) -> str:
        one = report.counts.get("backends", 0) <= 1 and report.counts.get("dists", 0) <= 1

        def where(r) -> str:
            return f"{r['site']} {r['role']}" if one else f"{r['backend']}/{r['dist']}/{r['site']}/{r['role']}"

        line = coverage_line(report)
        said = [
            textwrap.fill(f"note: {n}", 120, subsequent_indent="  ") for n in report.notes
        ]  # first: they qualify the rest
        out = (
            said
            + ([""] if said else [])
            + ([line, ""] if line else [])
            + [f"Top findings ({report.ranked.height} of {report.signals.height} tapped tensors show structure):"]
        )
        out += [
            f"  {r['rank']:>3}. [{r['score']:.2f}] {where(r)}: {r['suggestion']}"
            for r in report.ranked.head(self.top).iter_rows(named=True)
        ]
        if report.ranked.height > self.top:
            out.append(f"       ... {report.ranked.height - self.top} more in the full report")
        if not report.ranked.height:
            out.append("  (none: every tapped tensor looks dense to the current sketches)")
        if small := _small_line(report):
            out.append(f"  {small}")
        if report.dynamics is not None:
            out += [""] + [
                textwrap.fill(line, 120, subsequent_indent="  ") for line in render_dynamics.summary(report.dynamics)
            ]
        if report.cross_step is not None and report.cross_step.height:
            out += ["", _stationary_line(report)]
        if report.opportunities is not None and report.opportunities.height:
            opps = report.opportunities
            judged = opps.filter(pl.col("action").is_not_null())
            useful = judged.filter(pl.col("action") != NO_REUSE)
            few = _too_few(opps.height - judged.height, opps, MIN_STEPS_REUSE)
            if not judged.height:
                out += [
                    "",
                    f"Temporal reuse: {too_few(opps['steps'].max(), MIN_STEPS_REUSE)} to judge memoize "
                    "or delta-compute for any site's input.",
                ]
            elif not useful.height:
                out += [
                    "",
                    f"No site's input repeats or drifts slowly across the {report.steps} steps: "
                    "nothing to memoize or delta-compute." + few,
                ]
            else:
                out += ["", f"Temporal reuse of each site's input ({_costs_line(report)}):"]
                for r in useful.head(5).iter_rows(named=True):
                    out.append(
                        f"  {r['site']}: {percent(r['cost_share'])} of FLOPs, {r['recommendation']} "
                        f"(saves {percent(r['savings'])})"
                    )
                if report.aggregate is not None:
                    total = ", ".join(percent(v) for v in report.aggregate["savings"].to_list())
                    out.append(f"  recoverable compute (Σ cost-share × reuse): {total}")
                if few:
                    out.append(" " + few)
        return "\n".join(out) + "\n"


RENDERERS: dict[str, type] = {
    "text": TextRenderer,
    "markdown": MarkdownRenderer,
    "json": JsonRenderer,
    "findings": FindingsRenderer,
}


def dynamics_text(d: DynamicsReport, heads: bool = False) -> str:
    """The inference-dynamics summary, its tables (with `heads`, the per-head table too) and the legend."""
    out = [textwrap.fill(line, 120, subsequent_indent="  ") for line in render_dynamics.summary(d)]
    for title, text in render_dynamics.tables(d, TextRenderer().table, heads=heads):
        out.append(f"\n{title}:\n{text}")
    out.append("\n" + textwrap.fill(render_dynamics.LEGEND, 120))
    return "\n".join(out)


def dynamics_json(d: DynamicsReport) -> str:
    """The dynamics tables as JSON records, by table name."""
    return json.dumps(dynamics_records(d), indent=2, ensure_ascii=False)


def mine_text(report: MineReport) -> str:
    """An aligned plain-text report for a terminal."""
    return TextRenderer().render(report)


def mine_markdown(report: MineReport) -> str:
    """The report as GitHub-flavoured Markdown tables."""
    return MarkdownRenderer().render(report)


def mine_json(report: MineReport) -> str:
    """The report as JSON (schema `opscope-mine/4`, documented in docs/mining.md)."""
    return JsonRenderer().render(report)


def render(report: MineReport, name: str = "text") -> str:
    """The report in the named format (one of RENDERERS)."""
    try:
        renderer = RENDERERS[name.lower()]
    except KeyError:
        raise OpscopeError(f"mine: unknown output format {name!r} (choose one of: {', '.join(RENDERERS)})") from None
    return renderer().render(report)


def run_view_text(view: RunView) -> str:
    """A run view as text: its mined report (the pictures are the HTML page's)."""
    return mine_text(view.report)
