"""Plain-text tables of the probe reports (`opscope probe`, `layers`, `actions`, `layers --quant`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from opscope.probe.layers import OK, TIGHT
from opscope.text.numbers import count, nbytes, num, percent
from opscope.text.table import table

ERROR_WORDS = {"sum": "Σ rel_err", "squares": "Σ rel_err²", "energy": "Σ ‖W − Ŵ‖²"}

if TYPE_CHECKING:
    from opscope.probe.report import ActionsReport, LayersReport, ProbeReport, QuantReport


def _skipped(skipped: list[str]) -> list[str]:
    return [f"left out: {s}" for s in skipped]


def probe_text(report: ProbeReport) -> str:
    """One row per tensor: spectrum, quantization, sparsity, cardinality, outliers and the verdict."""
    params = sum(p.rows * p.cols for p in report.probes.values())
    out = [
        f"probe: {report.name} — {len(report.probes)} tensors, {count(params)} values, {report.seconds:.1f} s",
        "  srank: stable rank ‖W‖²_F/σ²_max; erank90/99: rank keeping 90/99 % of ‖W‖²_F; int4 t/c: int4 error "
        "per tensor/per channel; 2:4, tern: their errors; card: distinct values at 1e-3; bits: fewest bits "
        "per channel under 2 % error; outl: columns above 6× the median column max",
        "",
    ]
    rows = []
    for name, p in report.probes.items():
        rows.append(
            [
                name,
                f"{p.rows}×{p.cols}",
                f"{p.stable_rank:.1f}",
                str(p.effective_rank_90),
                str(p.effective_rank_99),
                f"{p.int4_tensor:.3f}",
                f"{p.int4_channel:.3f}",
                f"{p.nm24:.3f}",
                f"{p.ternary:.3f}",
                str(p.cardinality),
                "-" if p.best_bits is None else str(p.best_bits),
                f"{p.outliers} ({p.outlier_ratio:.1f}×)",
                p.verdict,
            ]
        )
    out += table(
        [
            "tensor",
            "shape",
            "srank",
            "erank90",
            "erank99",
            "int4 t",
            "int4 c",
            "2:4",
            "tern",
            "card",
            "bits",
            "outl",
            "verdict",
        ],
        rows,
        right=set(range(2, 11)),
    )
    return "\n".join(out + _skipped(report.skipped)) + "\n"


def layers_text(report: LayersReport, every: bool = False) -> str:
    """The chosen option per layer, the totals, greedy vs DADO, the measured plans and the time taken."""
    plan = report.plan
    dense = plan.dense_bytes
    out = [
        f"layers: {report.name} — {len(report.profiles)} weights, {nbytes(dense)} dense (as stored); budget "
        f"{report.budget:.0%} = {nbytes(plan.budget)}; plan: {report.allocator}, minimizing "
        f"{ERROR_WORDS[report.error]}",
        "",
    ]
    if every:
        out += _every(report)
    rows = []
    for p, c in zip(report.profiles, plan.choice):
        o = p.options[c]
        rows.append(
            [
                p.name,
                f"{p.rows}×{p.cols}",
                o.label,
                f"{o.rel_err:.4f}",
                nbytes(o.bytes),
                count(o.flops),
                f"{p.dense_bytes / o.bytes:.2f}×",
            ]
        )
    out += table(["layer", "shape", "option", "error", "bytes", "FLOPs/row", "×"], rows, right={3, 4, 5, 6})
    out += [
        "",
        f"total: Σ rel_err {plan.total_err:.4f}; {nbytes(plan.total_bytes)} of {nbytes(dense)} "
        f"({plan.total_bytes / dense:.1%}, {plan.compression:.2f}× smaller); FLOPs per input row "
        f"{count(report.flops(plan))} of {count(report.dense_flops)}"
        + ("" if plan.feasible else " — OVER BUDGET: no option left saves bytes"),
    ]
    g, d = report.greedy, report.dado
    line = f"greedy: Σ rel_err {g.total_err:.4f} at {nbytes(g.total_bytes)}"
    if d is not None:
        gain = g.total_err - d.total_err
        line += (
            f"; dado: Σ rel_err {d.total_err:.4f} at {nbytes(d.total_bytes)} "
            f"({f'better by {gain:.2g}' if gain > 0 else f'worse by {-gain:.2g}' if gain < 0 else 'same'})"
        )
    out.append(line)
    kinds: dict[str, int] = {}
    for p, c in zip(report.profiles, plan.choice):
        kinds[p.options[c].label.split("(")[0]] = kinds.get(p.options[c].label.split("(")[0], 0) + 1
    out.append("options chosen: " + ", ".join(f"{k} ×{n}" for k, n in sorted(kinds.items(), key=lambda kv: -kv[1])))
    if report.measured:
        own = ", ".join(f"{h} {_metric(report.baseline[k], f)}" for k, h, f in report.columns if k in report.baseline)
        out += ["", f"measured end to end on {report.data}" + (f"; the original: {own}" if own else "") + ":"]
        rows, same = [], []
        for m in report.measured:
            first, *also = m.label.split(" = ")
            if also:
                same.append(f"  {first} is also: {'; '.join(also)}")
            rows.append(
                [
                    first + (" (=)" if also else ""),
                    nbytes(m.bytes),
                    f"{m.bytes / dense:.1%}",
                    f"{m.total_err:.3f}",
                    *(_metric(m.metrics.get(k), f) for k, _, f in report.columns),
                ]
            )
        out += [
            "  " + r
            for r in table(
                ["plan", "bytes", "of dense", "Σ rel_err", *(h for _, h, _ in report.columns)],
                rows,
                right=set(range(1, 4 + len(report.columns))),
            )
        ]
        out += same
        if report.picked:
            m = next(m for m in report.measured if m.label == report.picked)
            fmt = next((f for k, _, f in report.columns if k == report.headline), ".4g")
            out.append(
                f"  measured objective: {report.picked.split(' = ')[0]} keeps the most {report.headline} within "
                f"the budget "
                f"({_metric(m.metrics.get(report.headline), fmt)}, Σ rel_err {m.total_err:.3f})"
            )
        elif report.dado is not None:
            out.append("  " + _winner(report))
    s = report.seconds
    kinds_s = sorted(((k.split(":", 1)[1], v) for k, v in s.items() if k.startswith("profile:")), key=lambda kv: -kv[1])
    out += [
        "",
        f"time: profile {s.get('profile', 0):.1f} s ("
        + ", ".join(f"{k} {v:.1f} s" for k, v in kinds_s)
        + f"), greedy {s.get('greedy', 0):.2f} s"
        + (f", dado {s['dado']:.2f} s" if "dado" in s else "")
        + (f", measuring {s['measure']:.0f} s" if "measure" in s else ""),
    ]
    return "\n".join(out + _skipped(report.skipped)) + "\n"


def _every(report: LayersReport) -> list[str]:
    """Every option of every layer, by bytes, flagged tight (≤ 2 %) or ok (≤ 8 %), as the reference prints."""
    out = []
    for p in report.profiles:
        out.append(f"{p.name} [{p.rows}×{p.cols}], dense {nbytes(p.dense_bytes)}:")
        best = p.options[p.best_within(TIGHT)]
        for o in sorted(p.options, key=lambda o: o.bytes):
            flag = "tight" if o.rel_err <= TIGHT else "ok" if o.rel_err <= OK else ""
            mark = "  ← cheapest within 2%" if o is best else ""
            out.append(
                f"    {o.label:<28} err {o.rel_err:8.4f}  {nbytes(o.bytes):>9}  "
                f"{p.dense_bytes / o.bytes:6.2f}×  {flag}{mark}"
            )
    return out + [""]


def actions_text(report: ActionsReport) -> str:
    """Per layer: the cheapest option within the budget and the verb; then the skippable blocks."""
    dense = sum(a.dense_bytes for a in report.actions)
    chosen = sum(a.bytes for a in report.actions)
    out = [f"actions: {report.name} — the cheapest option per layer within {report.budget:.0%} weight error", ""]
    rows = [[a.name, a.verb, a.option, f"{a.rel_err:.4f}", nbytes(a.bytes)] for a in report.actions]
    out += table(["layer", "action", "option", "error", "bytes"], rows, right={3, 4})
    out += ["", f"total: {nbytes(chosen)} of {nbytes(dense)} ({dense / chosen:.2f}× smaller)"]
    tern = [a.name for a in report.actions if "ternary" in a.verb]
    structural = [a.name for a in report.actions if a.verb == "REPLACE (structural)"]
    out.append(f"ternary-viable: {', '.join(tern) if tern else 'none'}")
    out.append(f"structural replacement (low rank, Monarch, Tucker, TT, 2:4): {', '.join(structural) or 'none'}")
    if report.gaps is None:
        out.append(
            "near-identity blocks: give --from RUN (a run recorded with the residual taps: `opscope infer "
            "MODEL --out RUN`) to find the blocks to skip"
        )
    else:
        out.append(
            f"near-identity blocks (‖out − in‖/‖in‖ < 0.02 ⇒ SKIP): {', '.join(report.skips) or 'none'}"
            + (
                f"; the closest: {min(report.gaps, key=report.gaps.get)} at {min(report.gaps.values()):.3f}"
                if report.gaps
                else ""
            )
        )
    return "\n".join(out) + "\n"


def quant_text(report: QuantReport) -> str:
    """Depth trend, projection kinds, outlier hotspots and the mixed-precision recipe."""
    stats = report.stats
    out = [f"quant: {report.name} — {len(stats)} weights, {report.seconds:.1f} s", ""]
    layers = report.by_layer()
    if layers:
        out.append("by depth (mean per-channel error):")
        top = max(v[1] for v in layers.values()) or 1.0
        out += [
            "  " + r
            for r in table(
                ["layer", "int8", "int4", ""],
                [[str(k), f"{a:.4f}", f"{b:.4f}", "█" * max(1, round(20 * b / top))] for k, (a, b) in layers.items()],
                right={1, 2},
            )
        ]
        keys = list(layers)
        third = max(1, len(keys) // 3)
        early = sum(layers[k][1] for k in keys[:third]) / third
        late = sum(layers[k][1] for k in keys[-third:]) / third
        trend = (
            "depth-invariant"
            if abs(late - early) <= 0.05 * early
            else "deeper layers quantize worse"
            if late > early
            else "earlier layers quantize worse"
        )
        out += [f"  int4: early third {early:.4f}, late third {late:.4f}: {trend}", ""]
    total = sum(s.numel for s in stats)
    kinds = report.by_kind()
    rows = []
    for kind, group in sorted(kinds.items(), key=lambda kv: -sum(s.numel for s in kv[1])):
        n = sum(s.numel for s in group)
        rows.append(
            [
                kind,
                count(n),
                f"{n / total:.1%}",
                f"{_mean(group, 'int8_pt'):.4f}",
                f"{_mean(group, 'int8_pc'):.4f}",
                f"{_mean(group, 'int4_pc'):.4f}",
                f"{_mean(group, 'int3_pc'):.4f}",
                f"{_mean(group, 'outlier'):.1f}×",
            ]
        )
    out += ["by kind (mean error; /t per tensor, /c per channel):"]
    out += [
        "  " + r
        for r in table(
            ["kind", "params", "share", "int8/t", "int8/c", "int4/c", "int3/c", "outlier"], rows, right=set(range(1, 8))
        )
    ]
    hot = sorted(stats, key=lambda s: -s.outlier)[:5]
    out += [
        "",
        "outlier hotspots (max/median column max): "
        + ", ".join(f"{s.name} {s.outlier:.1f}× ({s.outliers} col)" for s in hot),
    ]
    recipe = report.recipe()
    mixed = sum(s.numel * recipe[s.name] / 8 for s in stats)
    forced = sorted({s.kind for s in stats if recipe[s.name] == 8})
    out += [
        f"recipe: int4 where per-channel int4 error ≤ {report.int4_budget}, else int8: "
        f"{sum(b == 4 for b in recipe.values())} int4, {sum(b == 8 for b in recipe.values())} int8; "
        f"{nbytes(mixed)} vs uniform int8 {nbytes(total)} / int4 {nbytes(total / 2)} "
        "(weights only, scales not counted)",
        f"  Σ error: mixed {sum(s.int4_pc if recipe[s.name] == 4 else s.int8_pc for s in stats):.3f}, "
        f"uniform int8 {sum(s.int8_pc for s in stats):.3f}, uniform int4 {sum(s.int4_pc for s in stats):.3f}; "
        f"kinds kept at int8: {', '.join(forced) or 'none'}",
    ]
    best = {}
    for kind, group in kinds.items():
        bits = [s.best_bits for s in group]
        best[kind] = "-" if any(b is None for b in bits) else str(max(bits))
    out.append(
        "best bits per kind (every weight of the kind under 3 % per-channel error): "
        + ", ".join(f"{k} {v}" for k, v in best.items())
    )
    return "\n".join(out) + "\n"


def _mean(group, attr: str) -> float:
    return sum(getattr(s, attr) for s in group) / len(group)


def _metric(value: float | None, fmt: str) -> str:
    return percent(value) if fmt == "pct" else num(value, fmt)


def _winner(report: LayersReport) -> str:
    """Which of greedy's and DADO's plans at the budget measured better on the headline metric."""
    at = {m.label.split(" @ ")[0]: m for m in report.measured if m.label.endswith(f"@ {report.budget:.0%}")}
    d, g = at.get("dado"), at.get("greedy")
    if d is None or g is None:
        return "greedy and DADO chose the same plan at the budget"
    key = report.headline
    better = d if d.metrics.get(key, 0) >= g.metrics.get(key, 0) else g
    return (
        f"measured objective: {better.label.split(' @ ')[0]}'s plan keeps more {key} "
        f"({d.metrics.get(key, 0):.4g} DADO vs {g.metrics.get(key, 0):.4g} greedy; Σ rel_err "
        f"{d.total_err:.3f} vs {g.total_err:.3f})"
    )
