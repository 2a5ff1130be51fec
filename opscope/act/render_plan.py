"""The kernel plan as text: one row per candidate, the guard's cost, then the applied module."""

from __future__ import annotations

from typing import TYPE_CHECKING

from opscope.text.table import table

if TYPE_CHECKING:
    from opscope.act.specialize import KernelPlan

HEADER = (
    "site",
    "candidate",
    "guard",
    "σ",
    "stability",
    "est.",
    "orig µs",
    "new µs",
    "no-guard µs",
    "measured",
    "parity",
    "rel err",
    "decision",
)


def plan_text(plan: KernelPlan) -> str:
    """The plan's table and the applied module's whole-model measurement."""
    lines = [f"opscope plan: {plan.model} on {plan.target} (run {plan.run}, {plan.steps} steps)", ""]
    if not plan.candidates:
        lines.append(
            "no candidate: no recorded site had an lhs channel zero in every step, a constant weight "
            "or a mostly-zero weight that never changed"
        )
    else:
        rows = [_row(c) for c in plan.candidates]
        lines += table(HEADER, rows)
        lines.append("")
        if any(not c.proposal.exact for c in plan.candidates):
            lines.append(
                "lossy candidates (W8A16, W8A8, low rank, sparse) rewrite constant weights: no run-time guard, "
                "accepted within the error bound of the site's output (rel err, relative L2); sparse: "
                "the nonzero terms only, est. 1/density"
            )
        lines.append(
            "measured: the site outlined at its real shapes (extract-site) on the run's first-step tensors, "
            "µs per call (iree-benchmark-module), minimum over alternating rounds; est.: the cost model's "
            "roofline time before over after"
        )
    for c in plan.candidates:
        m = c.measured
        if m is not None and m.baked_us is not None:
            lines.append(
                f"{c.site}: its weight is an argument, baked for the measurement: dense and baked "
                f"{m.original_us / m.baked_us:.2f}×, stored sparse {m.speedup:.2f}× (the original reads the "
                "argument); `--apply` leaves it out (store the weight as a constant to apply it)"
            )
        if m is not None and m.unguarded_us is not None:
            lines.append(
                f"{c.site}: the slice alone {m.original_us / m.unguarded_us:.2f}×; the guard (check, "
                f"readback, branch) costs {m.rewritten_us - m.unguarded_us:+.1f} µs per call"
            )
    if plan.sparse_activations:
        shown = ", ".join(f"{s} lhs {d:.0%} nonzero" for s, d in plan.sparse_activations[:4])
        more = len(plan.sparse_activations) - 4
        lines.append(
            f"mostly-zero activations at {len(plan.sparse_activations)} site(s) ({shown}"
            + (f", {more} more" if more > 0 else "")
            + "): no candidate; an IREE dispatch cannot skip zeros it finds only at run time (its loops "
            "are static, a select computes both sides), and a gather of the nonzeros measured slower "
            "than the dense matmul (docs/rewrites.md, sparse-weight)"
        )
    a = plan.applied
    if a is not None:
        lines.append("")
        lines.append(
            f"applied: {a.pipeline}" if a.pipeline else "applied: no rewrite accepted; the module is the original"
        )
        if a.quality is not None:
            lines += _quality_lines(a.quality)
        if a.measured is not None:
            agreement = a.parity if a.parity == "bit-identical" else f"{a.parity}, rel err {a.rel_error:.2g}"
            lines.append(
                f"whole model: {a.measured.original_us:.1f} µs → {a.measured.rewritten_us:.1f} µs "
                f"({a.measured.speedup:.2f}×), {agreement} over {a.steps} step(s)"
            )
            if a.measured.speedup < 1.0:
                lines.append(
                    "the whole model is slower with them: the sites' gains did not survive in the model "
                    "(or were the machine's noise); keep the original"
                )
        if a.path is not None and a.weights:
            flags = " ".join(f"--parameters={scope}={f}" for scope, f in a.weights)
            lines.append(
                f"wrote {a.path} (compiles with plain iree-compile) and its weights beside it: run it with {flags}"
            )
        elif a.path is not None:
            lines.append(f"wrote {a.path} (compiles with plain iree-compile)")
    for c in plan.accepted:
        if c.kind == "memoize":
            lines.append(
                f"{c.site}: memoize on the host (not an IR rewrite): "
                f"opscope.act.memoize.memoize_site(model, {c.site!r}, {plan.target!r})"
            )
    return "\n".join(lines)


def _quality_lines(q: dict) -> list[str]:
    """The budget, what the kept build measured against it on held-out data, what stayed out."""
    from opscope.act.quality import COUNTS
    from opscope.text.numbers import percent

    lines = [
        f"quality budget {', '.join(q['gates'])} on {q['data']}: "
        + ("met" if q["passed"] else "not met even without lossy rewrites")
        + f" with {q['lossy_kept']} lossy rewrite(s) ({q['builds']} whole-model build(s) measured): "
        + ", ".join(f"{k} {v:.4g}" for k, v in q["metrics"].items() if k not in COUNTS)
        + "".join(f" (original {k} {v:.4g})" for k, v in q["own"].items() if k not in COUNTS)
    ]
    if q["left_out"]:
        out = ", ".join(f"{site} ({label}, site error {err:.2g})" for site, label, err in q["left_out"][:6])
        more = f" and {len(q['left_out']) - 6} more" if len(q["left_out"]) > 6 else ""
        lines.append(f"left as they were for quality: {out}{more}")
    shared, total = q["shared_examples"]
    if shared:
        lines.append(
            f"not held out: {shared} of the run's {total} calibration examples are in the evaluation set "
            f"({percent(shared / total)}); profile on other data (--text, --inputs) for a held-out check"
        )
    return lines


def _row(c) -> tuple[str, ...]:
    m = c.measured
    g = c.guard
    label = f"{c.proposal.label} ({c.proposal.why})" if c.proposal.exact else c.proposal.label
    predicate = g.predicate if g.samples or c.proposal.exact else "-"
    return (
        c.site,
        label,
        predicate,
        f"{g.sigma:.3f}" if g.samples else "-",
        g.stability if g.samples else "-",
        f"{c.estimated:.2f}×" if m else "-",
        f"{m.original_us:.1f}" if m else "-",
        f"{m.rewritten_us:.1f}" if m else "-",
        f"{m.unguarded_us:.1f}" if m and m.unguarded_us is not None else "-",
        f"{m.speedup:.2f}×" if m else "-",
        c.parity or "-",
        f"{c.rel_error:.1e}" if m else "-",
        c.decision or "-",
    )
