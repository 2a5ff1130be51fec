"""The inference-dynamics section of a report: tables for `text` and `markdown` (`json` takes
the frames as records: `render.dynamics_records`), and the plain-word summary `findings`
(and so `opscope profile`) prints."""

from __future__ import annotations

import math
from collections.abc import Callable

import polars as pl

from opscope.mining.dynamics import (
    COLD_FAIR,
    DIFFUSE_ENTROPY,
    HOT_FAIR,
    MASSIVE_REL,
    PEAKED_QMAX,
    SINK_RATIO,
    SKIP_BI,
    TOP_KEYS,
    DynamicsReport,
)

Table = Callable[[list[str], list[list[str]]], str]

ATTENTION_HEAD = ["site", "S_q×S_k", "mask", "qmax", "entropy", "top10%", "sinks", "peaked", "diffuse", "exploit"]
HEADS_HEAD = ["site", "head", "qmax", "entropy", "top10%", "sinks", "max ratio", "kind"]
ROUTING_HEAD = ["site", "experts", "k", "tokens", "max load", "min load", "imbalance", "hot", "cold", "exploit"]
GATES_HEAD = ["site", "experts", "top-1 p", "top2/top1", "entropy", "exploit"]
RESIDUAL_HEAD = ["rank", "site", "Σh²", "Σd²", "‖d‖/‖h‖", "gap", "BI", "flag"]
NUMERIC = {
    "qmax",
    "entropy",
    "top10%",
    "head",
    "max ratio",
    "experts",
    "k",
    "tokens",
    "max load",
    "min load",
    "imbalance",
    "top-1 p",
    "top2/top1",
    "rank",
    "Σh²",
    "Σd²",
    "‖d‖/‖h‖",
    "gap",
    "BI",
}

LEGEND = (
    f"qmax: mean peak probability per query; entropy: mean −Σp·ln p / ln(visible keys); top10%: mass on "
    f"the top {TOP_KEYS:.0%} of keys; sinks: key positions receiving ≥ {SINK_RATIO:g}× their fair share "
    f"in at least half the heads; a head is peaked at qmax ≥ {PEAKED_QMAX:g}, diffuse at entropy ≥ "
    f"{DIFFUSE_ENTROPY:g}. Experts are hot at ≥ {HOT_FAIR:g}× and cold below {COLD_FAIR:g}× the fair "
    f"load 1/E. Blocks (h: the stream, d: the block's output, sums over every token): BI = 1 − mean cos(h, "
    f"h + d) per token, least influential first; skip when BI < {SKIP_BI:g}; massive when ‖d‖/‖h‖ ≥ "
    f"{MASSIVE_REL:g} (the block writes a massive activation); gap = √(min/max) of the sums (the "
    f"reference's)."
)


def _f(x: float | None, spec: str = ".3f") -> str:
    return "-" if x is None or (isinstance(x, float) and math.isnan(x)) else format(x, spec)


def _ids(xs: list[int] | None, most: int = 6) -> str:
    if not xs:
        return "-"
    return ",".join(str(x) for x in xs[:most]) + (f",+{len(xs) - most}" if len(xs) > most else "")


def _where(r: dict, one: bool) -> str:
    return r["site"] if one else f"{r['backend']}/{r['dist']}/{r['site']}"


def _single(d: DynamicsReport) -> bool:
    """Whether one backend and one dist cover every table (names can drop them)."""
    keys = set()
    for f in (d.attention, d.routing, d.gates, d.residual):
        keys |= set(f.select("backend", "dist").unique().rows()) if f.height else set()
    return len(keys) <= 1


def head_lists(d: DynamicsReport) -> dict[tuple[str, str, str], tuple[list[int], list[int]]]:
    """Per attention site: its peaked and its diffuse heads."""
    out: dict[tuple[str, str, str], tuple[list[int], list[int]]] = {}
    for r in d.heads.iter_rows(named=True):
        peaked, diffuse = out.setdefault((r["backend"], r["dist"], r["site"]), ([], []))
        (peaked if r["kind"] == "peaked" else diffuse if r["kind"] == "diffuse" else []).append(r["head"])
    return out


def tables(d: DynamicsReport, table: Table, heads: bool = False) -> list[tuple[str, str]]:
    """(title, table) per non-empty section; `heads` adds the per-head table."""
    one = _single(d)
    lists = head_lists(d)
    out = []
    if d.attention.height:
        rows = []
        for r in d.attention.iter_rows(named=True):
            peaked, diffuse = lists.get((r["backend"], r["dist"], r["site"]), ([], []))
            rows.append(
                [
                    _where(r, one),
                    f"{r['S_q']}×{r['S_k']}",
                    "causal" if r["causal"] else "full",
                    _f(r["qmax"]),
                    _f(r["entropy"]),
                    _f(r["top10"] * 100 if r["top10"] is not None else None, ".1f"),
                    _ids(r["sinks"]),
                    _ids(peaked),
                    _ids(diffuse),
                    r["exploit"],
                ]
            )
        out.append(
            (f"Attention per site ({d.attention.height} sites; heads listed by index)", table(ATTENTION_HEAD, rows))
        )
    if heads and d.heads.height:
        rows = [
            [
                _where(r, one),
                str(r["head"]),
                _f(r["qmax"]),
                _f(r["entropy"]),
                _f(r["top10"] * 100 if r["top10"] is not None else None, ".1f"),
                _ids(r["sinks"]),
                _f(r["sink_ratio"], ".1f"),
                r["kind"],
            ]
            for r in d.heads.iter_rows(named=True)
        ]
        out.append(("Attention per head", table(HEADS_HEAD, rows)))
    if d.routing.height:
        rows = [
            [
                _where(r, one),
                str(r["experts"]),
                str(r["k"]),
                str(r["tokens"]),
                _f(max(r["load"]) * 100, ".1f"),
                _f(min(r["load"]) * 100, ".1f"),
                _f(r["imbalance"], ".2f"),
                _ids(r["hot"]),
                _ids(r["cold"]),
                r["exploit"],
            ]
            for r in d.routing.iter_rows(named=True)
        ]
        out.append(("Routing per top-k (load in % of the k·tokens choices)", table(ROUTING_HEAD, rows)))
    if d.gates.height:
        rows = [
            [_where(r, one), str(r["experts"]), _f(r["top1"]), _f(r["top2_ratio"]), _f(r["entropy"]), r["exploit"]]
            for r in d.gates.iter_rows(named=True)
        ]
        out.append(("Router gates (softmax over the experts)", table(GATES_HEAD, rows)))
    if d.residual.height:
        rows = [
            [
                str(r["rank"]),
                _where(r, one),
                _f(r["stream"], ".4g"),
                _f(r["block"], ".4g"),
                _f(r["rel"]),
                _f(r["gap"]),
                _f(r["bi"], ".4f"),
                _flag(r),
            ]
            for r in d.residual.sort("backend", "dist", "rank").iter_rows(named=True)
        ]
        out.append(("Residual blocks, least influential first", table(RESIDUAL_HEAD, rows)))
    return out


def _flag(r: dict) -> str:
    return ", ".join(w for w, on in (("skip", r["skip"]), ("massive", r["massive"])) if on) or "-"


def summary(d: DynamicsReport, least: int = 3) -> list[str]:
    """A few plain-word lines: sinks, heavy hitters, head kinds, experts, the blocks that change least."""
    out = []
    a = d.attention
    if a.height:
        heads = int(a["heads"].sum())
        mask = "causal" if a["causal"].all() else "bidirectional" if not a["causal"].any() else "mixed masks"
        sinks: dict[int, int] = {}
        for row in a["sinks"].to_list():
            for p in row:
                sinks[p] = sinks.get(p, 0) + 1
        sink_text = (
            "; ".join(
                f"key {p} is a sink in {n} of {a.height} sites"
                for p, n in sorted(sinks.items(), key=lambda kv: (-kv[1], kv[0]))[:3]
            )
            or "no sinks"
        )
        top = a["top10"].drop_nulls()
        lists = head_lists(d)
        peaked = sum(len(p) for p, _ in lists.values())
        diffuse = sum(len(q) for _, q in lists.values())
        out.append(
            f"Attention ({a.height} sites, {heads} heads, {mask}): {sink_text}; the top {TOP_KEYS:.0%} of "
            f"keys hold {top.min():.0%}–{top.max():.0%} of the mass; {peaked} heads peaked, {diffuse} diffuse."
        )
    r = d.routing
    if r.height:
        cold = sum(len(c) for c in r["cold"].to_list())
        hot = sum(len(h) for h in r["hot"].to_list())
        experts = int(r["experts"].sum())
        out.append(
            f"Routing ({r.height} top-k sites, {experts} experts in all): {cold} cold, {hot} hot; "
            f"imbalance (max/mean load) {r['imbalance'].min():.2f}–{r['imbalance'].max():.2f}."
        )
    res = d.residual
    if res.height:
        ranked = res.sort("rank").head(least)
        names = ", ".join(
            f"{x['site']} (BI {x['bi']:.3f}, ‖d‖/‖h‖ {x['rel']:.2f})" for x in ranked.iter_rows(named=True)
        )
        skips = res.filter(pl.col("skip"))
        skip = (
            f"{skips.height} skip candidate{'s' * (skips.height != 1)} (BI < {SKIP_BI:g})"
            if skips.height
            else f"no block has BI < {SKIP_BI:g}"
        )
        massive = res.filter(pl.col("massive"))
        big = (
            (
                "; "
                + ", ".join(f"{x['site']} ({x['rel']:.0f}×)" for x in massive.iter_rows(named=True))
                + f" write{'s' * (massive.height == 1)} a massive activation into the stream (‖d‖/‖h‖ ≥ "
                f"{MASSIVE_REL:g}: outliers int8 must keep)"
            )
            if massive.height
            else ""
        )
        out.append(f"Residual blocks ({res.height}): least influential {names}; {skip}{big}.")
    return out


def numeric(head: str) -> bool:
    """Whether a column of these tables is right-aligned in text."""
    return head in NUMERIC
