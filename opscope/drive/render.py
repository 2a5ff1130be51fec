"""What the drivers' results say when printed: a profile's run line, findings and files; a sweep's
and a sequence's recording. The CLI prints these through `opscope.render`."""

from __future__ import annotations

from typing import TYPE_CHECKING

from opscope.mining.render import render as render_mine
from opscope.text.numbers import flops

if TYPE_CHECKING:
    from opscope.drive.profile import ProfileResult
    from opscope.drive.sequence import SequenceResult
    from opscope.drive.sweep import SweepResult
    from opscope.ir.sites import SiteList
    from opscope.run.targets import TargetTable

DYNAMICS_NOUNS = {"softmax": "softmax", "attention": "fused attention", "routing": "top-k", "residual": "residual add"}


def sites_text(sites) -> str:
    """`16 matmul sites`, `4 sites (3 convolutions, 1 matmul)`, `40 sites (16 matmuls, 8
    softmax, 16 residual adds)`: the kinds tapped."""
    convs = sum("conv" in s.kind for s in sites)
    counts = {noun: sum(s.kind == kind for s in sites) for kind, noun in DYNAMICS_NOUNS.items()}
    mms = len(sites) - convs - sum(counts.values())
    if not convs and not any(counts.values()):
        return f"{len(sites)} matmul sites"
    parts = [(convs, "convolution"), (mms, "matmul")] + [(n, noun) for noun, n in counts.items()]
    return (
        f"{len(sites)} sites ("
        + ", ".join(f"{n} {noun}{'s' * (n != 1 and noun != 'softmax')}" for n, noun in parts if n)
        + ")"
    )


def compile_text(seconds: float, cached: bool) -> str:
    return "compiled module from the cache" if cached else f"compile {seconds:.1f} s"


def parity_phrase(worst: float | None) -> str:
    """How the original results compared with the taps in: `bit-identical`, `within 3e-07`, or why not compared."""
    if worst is None:
        return "not compared (the untapped model does not compile: see the warning)"
    return "bit-identical" if worst == 0 else f"within {worst:.2g}"


def run_line(res: ProfileResult, brief: bool = False) -> str:
    """`  22 sites (...) (6.82 M FLOPs), 642 sketches per step; compile 4.7 s; 4 steps in 0.03 s;
    original results bit-identical with injection`; `brief`: the sites, compile, steps and parity only."""
    m = res.model
    done = f"{compile_text(m.compile_seconds, m.compile_cached)}; {res.steps} steps in {res.run_seconds:.2f} s"
    if brief:
        return f"  {sites_text(m.manifest.sites)}; {done}; original results {parity_phrase(res.parity)} with the taps"
    stride = m.manifest.row_stride
    sampled = f" (activations on 1 row in {stride}: rows 0, {stride}, ...; weights exact)" if stride > 1 else ""
    return (
        f"  {sites_text(m.manifest.sites)} ({flops(sum(s.flops for s in m.manifest.sites))}), "
        f"{len(m.manifest.entries)} sketches per step{sampled}; {done}; original results "
        f"{parity_phrase(res.parity)} with injection"
    )


def profile_text(res: ProfileResult, brief: bool = False) -> str:
    """The run line, the findings, and the files written (what `opscope profile` prints after the
    model line); `brief`: the run line alone, as `opscope infer` shows it."""
    if brief:
        return run_line(res, brief=True)
    out = res.out_dir
    return (
        f"{run_line(res)}\n\n{render_mine(res.report, 'findings')}\n"
        f"wrote {out}/: sketches.csv ({res.rows:,} rows), site_costs.csv, manifest.json, report.md "
        f"(full tables; `opscope mine {out}` re-mines)"
    )


def sweep_text(res: SweepResult) -> str:
    """Parity and sketches per shape, then what was recorded where."""
    lines = [
        f"  parity {'x'.join(map(str, shape))}: original result {parity_phrase(worst)} with injection on {res.target}"
        for shape, worst in res.parity.items()
    ]
    lines += [f"  {'x'.join(map(str, shape))}: {n} sketches per run" for shape, n in res.sketches_per_run.items()]
    lines.append(
        f"recorded {len(res.recorded)} runs"
        + (f", {len(res.skipped)} already done" if res.skipped else "")
        + f" of {len(res.recorded) + len(res.skipped)} into {res.out} (site costs: {res.site_costs})"
    )
    return "\n".join(lines)


def sequence_text(res: SequenceResult) -> str:
    """`recorded 16 steps (N rows) into OUT; site costs FILE`."""
    return f"recorded {res.steps} steps ({res.rows:,} rows) into {res.out}; site costs {res.site_costs}"


def site_list_text(sites: SiteList) -> str:
    """A model's sites, one line each: name, kind, batch, M, K, N and FLOPs ('dynamic' when unknown)."""
    if not sites:
        return f"{sites.source}: no matmul sites\n" if sites.source else "no matmul sites\n"
    lines = [f"{'site':32} {'kind':14} {'batch':>5} {'M':>6} {'K':>6} {'N':>6} {'FLOPs':>14}"]
    for s in sites:
        fl = "dynamic" if s.dynamic else f"{s.flops:,}"
        lines.append(f"{s.name:32} {s.kind:14} {s.batch:5d} {s.m:6d} {s.k:6d} {s.n:6d} {fl:>14}")
    return "\n".join(lines) + "\n"


def target_table_text(table: TargetTable) -> str:
    """One line a target: its name, whether it runs here (and why not), its note and its ridge."""
    return "".join(
        f"{t.name:13} {'runs here' if why is None else 'compiles only'}  {t.note}"
        + (f" ({why})" if why else "")
        + f"; ridge {t.ridge:g} FLOP/B ({t.ridge_source})\n"
        for t, why in table
    )
