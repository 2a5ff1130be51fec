"""The value miner (`opscope mine`): a tidy table in, a `MineReport` of polars frames out.

`mine` runs the signals and rule cascade (`opscope.mining.signals`) and, with two or more
steps, the cross-step and temporal sections (`opscope.mining.temporal`); `mine_paths`
reads files, folders or globs first (`opscope.record.tidy`) with their `site,flops`
sidecars. A report renders as text, Markdown or JSON (`opscope.mining.render`).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import polars as pl

from opscope.errors import OpscopeError
from opscope.mining.dynamics import DynamicsReport, has_dynamics, mine_dynamics
from opscope.mining.keys import appearance_order
from opscope.mining.signals import classify, rank, value_signals
from opscope.mining.temporal import aggregate, cross_step, opportunities
from opscope.record.recorder import MODULE_ROW, UNKNOWN_ROW, UNTAPPED_PREFIX, is_site_row, read_site_costs
from opscope.record.tidy import COLUMNS, MANIFEST_NAME, NOTES_NAME, read_tidy, site_cost_files, tidy_files

GIVEN_COSTS = "the site costs given"  # `costs_source` of a mapping passed in


@dataclass(frozen=True)
class MineReport:
    """Everything `mine` found, as polars frames; `opscope.render(report, "text" | "markdown" | "json")`
    (`opscope.mining.render`) writes it."""

    rows: int
    steps: int
    signals: pl.DataFrame
    ranked: pl.DataFrame
    cross_step: pl.DataFrame | None = None
    opportunities: pl.DataFrame | None = None
    aggregate: pl.DataFrame | None = None
    coverage: pl.DataFrame | None = None  # what of the module's FLOPs the tapped sites hold (`coverage`)
    counts: dict[str, int] = field(default_factory=dict)
    costs_source: str | None = None
    notes: tuple[str, ...] = ()
    dynamics: DynamicsReport | None = None  # attention, routing and residual taps (`opscope.mining.dynamics`)


def mine(
    df: pl.DataFrame,
    site_costs: dict[str, int] | None = None,
    *,
    notes: Iterable[str] = (),
    costs_source: str | None = None,
) -> MineReport:
    """Mine a tidy frame: signals and exploits per key, ranked list, and the multi-step sections."""
    missing = [c for c in COLUMNS if c not in df.columns]
    if missing:
        raise OpscopeError(f"mine: the frame lacks tidy columns {', '.join(missing)}")
    df = df.select(COLUMNS)
    order = appearance_order(df)
    signals = classify(value_signals(df, order))
    steps = df["step"].n_unique() if df.height else 0
    counts = {"rows": df.height, "steps": steps}
    if df.height:
        counts.update(
            {
                c: df[k].n_unique()
                for c, k in (("runs", "run_id"), ("backends", "backend"), ("dists", "dist"), ("sites", "site"))
            }
        )
    cross = opps = agg = None
    if steps > 1:
        cross = cross_step(df, order)
        opps = opportunities(df, site_costs, order)
        agg = aggregate(opps, order)
    cov = coverage(site_costs)
    if cov is not None:
        counts["module_flops"] = site_costs[MODULE_ROW]
        counts["unknown_ops"] = site_costs.get(UNKNOWN_ROW, 0)
    return MineReport(
        rows=df.height,
        steps=steps,
        signals=signals,
        ranked=rank(signals),
        cross_step=cross,
        opportunities=opps,
        aggregate=agg,
        coverage=cov,
        counts=counts,
        costs_source=costs_source,
        notes=tuple(notes),
        dynamics=mine_dynamics(df) if has_dynamics(df) else None,
    )


def coverage(site_costs: dict[str, int] | None) -> pl.DataFrame | None:
    """What the tapped sites hold of the module's FLOPs, and every untapped kind of op, when
    the sidecar says the module's FLOPs (`MODULE_ROW`): rows `what`, `flops`, `share` of the
    module, the tapped sites first, then the untapped op kinds, largest first."""
    costs = site_costs or {}
    module = costs.get(MODULE_ROW)
    if not module:
        return None
    tapped = sum(f for s, f in costs.items() if is_site_row(s))
    untapped = sorted(
        ((s.removeprefix(UNTAPPED_PREFIX), f) for s, f in costs.items() if s.startswith(UNTAPPED_PREFIX)),
        key=lambda kv: (-kv[1], kv[0]),
    )
    rows = [("tapped sites", tapped), *untapped]
    return pl.DataFrame(
        {"what": [w for w, _ in rows], "flops": [f for _, f in rows], "share": [f / module for _, f in rows]},
        schema={"what": pl.String, "flops": pl.Int64, "share": pl.Float64},
    )


def recorded_notes(files: Iterable[str | Path]) -> list[str]:
    """The notes a run's recorder left beside its tidy files (`notes.json`: degenerate inputs)."""
    notes = []
    for folder in dict.fromkeys(Path(f).parent for f in files):
        try:
            saved = json.loads((folder / NOTES_NAME).read_text())
        except (OSError, ValueError):
            continue  # none recorded here
        notes += [str(n) for n in saved] if isinstance(saved, list) else []
    return notes


def sampling_notes(files: Iterable[str | Path]) -> list[str]:
    """What a run's `manifest.json` beside its tidy files says of row sampling (`sample-rows`):
    a report must not present statistics of 1 token in K as the whole tensor's."""
    notes = []
    for folder in dict.fromkeys(Path(f).parent for f in files):
        try:
            stride = int(json.loads((folder / MANIFEST_NAME).read_text()).get("row_stride", 1))
        except (OSError, ValueError, AttributeError):
            continue  # no manifest here (a bare CSV), or not one of ours: nothing to say
        if stride > 1:
            notes.append(
                f"{folder}: sampled: each activation was sketched on 1 row (token) in {stride} (rows 0, {stride}, "
                f"{2 * stride}, ...): its statistics, numel and positions are those rows'; the weights' are exact"
            )
    return notes


def mine_paths(
    spec: str | Path | Iterable[str | Path], costs: str | Path | Mapping[str, int] | None = None
) -> MineReport:
    """Read tidy files (file, dir, glob or list) and mine them. `costs` is a `site,flops`
    sidecar or a site → FLOPs mapping; when None, the sidecars beside the files are read."""
    return mine_loaded(*load_paths(spec), costs=costs)


def load_paths(spec: str | Path | Iterable[str | Path]) -> tuple[pl.DataFrame, list[Path], list[str]]:
    """The tidy files of `spec` (file, dir, glob or list) read as one frame, the files, and the
    notes reading them left (what was recorded, how rows were sampled)."""
    notes: list[str] = []
    files = tidy_files(spec, notes)
    df = read_tidy(files, notes)
    return df, files, notes + recorded_notes(files) + sampling_notes(files)


def mine_loaded(
    df: pl.DataFrame, files: list[Path], notes: list[str], costs: str | Path | Mapping[str, int] | None = None
) -> MineReport:
    """`load_paths`' frame mined, weighed by `costs` or, when None, the sidecars beside `files`."""
    notes = list(notes)
    if isinstance(costs, Mapping):
        return mine(df, dict(costs), notes=notes, costs_source=GIVEN_COSTS)
    sources = [Path(costs)] if costs is not None else site_cost_files(files)
    site_costs: dict[str, int] | None = None
    if sources:
        site_costs = {}
        for src in sources:
            for site, flops in read_site_costs(src).items():
                if site in site_costs and site_costs[site] != flops:
                    notes.append(
                        f"{src}: site {site!r} has {flops} FLOPs, {site_costs[site]} in an earlier "
                        f"sidecar; the first is kept"
                    )
                site_costs.setdefault(site, flops)
    return mine(df, site_costs, notes=notes, costs_source=", ".join(str(s) for s in sources) or None)


def residual_table(run: str) -> pl.DataFrame:
    """The residual blocks' table (`opscope.mining.dynamics`: Σh², Σd², block influence, ...) of a
    recorded run; a run without residual taps is a one-line error saying how to record them."""
    dynamics = mine_paths([run]).dynamics
    table = dynamics.residual if dynamics is not None else None
    if table is None or not table.height:
        raise OpscopeError(f"{run} holds no residual taps: record them with `opscope infer MODEL --out {run}`")
    return table


def block_gaps(run: str) -> dict[str, float]:
    """Residual block -> ‖d‖/‖h‖ (= ‖out − in‖/‖in‖ of the block) in a recorded run, the worst over
    its backends and data (`residual_table`)."""
    table = residual_table(run)
    gaps: dict[str, float] = {}
    for site, rel in zip(table["site"].to_list(), table["rel"].to_list()):
        gaps[site] = max(gaps.get(site, 0.0), float(rel))
    return gaps
