"""A compression plan built into the model and measured end to end, next to uniform int8 and int4.

The allocators (`opscope.probe.allocate`) minimize the sum of per-layer weight errors; what a
user ships is judged by the model's outputs. `measure_plans` substitutes each plan's
reconstructed weights (`opscope.probe.layers.reconstruct`: the dense weight a factored,
quantized or pruned layer computes with) for the originals (`opscope.ir.weights`), compiles
every build and compares its outputs with the original's on the same real data, as `whatif`
does (`opscope.act.quality`). It measures the plan at the budget, greedy's plan at the same
budget, uniform int8 and uniform int4, and the allocator's plans at exactly their bytes: the
plan and the uniform scheme compared at the same size. With the measured objective it also
builds the allocator's plans for the other error objectives (Σ rel_err², Σ ‖W − Ŵ‖²_F:
`opscope.probe.allocate.ERRORS`) and picks, among every plan that fits the budget, the one
whose outputs stay closest to the original's: Σ weight error is only a proxy (on SmolLM2 at
26 % of the bytes the Σ rel_err plan keeps 56 % top-1 agreement, the Σ rel_err² plan 95 %).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from opscope.act.evalset import EvalSet
from opscope.act.quality import compare
from opscope.act.render_whatif import COLUMNS
from opscope.jobs.store import Codec, Store
from opscope.probe.allocate import ERRORS, Allocation, DadoConfig, dado_allocate, greedy_allocate
from opscope.probe.layers import Option, reconstruct
from opscope.probe.report import LayersReport, PlanOutcome
from opscope.probe.sources import WeightSet

if TYPE_CHECKING:
    from opscope.act.whatif import Bench, WhatIfReport


def uniform(report: LayersReport, kind: str) -> Allocation:
    """Every layer stored as option `kind` (int8 or int4: every profile has both)."""
    choice = tuple(next(i for i, o in enumerate(p.options) if o.kind == kind) for p in report.profiles)
    opts = [p.options[c] for p, c in zip(report.profiles, choice)]
    dense = sum(p.dense_bytes for p in report.profiles)
    total = sum(o.bytes for o in opts)
    return Allocation(choice, float(sum(o.rel_err for o in opts)), total, dense, float(total))


LABELS = {"sum": "", "squares": " Σerr²", "energy": " Σ‖ΔW‖²"}  # the objectives' tags in plan labels


def plans_to_measure(
    report: LayersReport, cfg: DadoConfig = DadoConfig(), objective: str = "weights"
) -> list[tuple[str, Allocation]]:
    """(label, allocation) of every plan `measure_plans` builds; a plan equal to an earlier one (the same
    choices) is measured once, under both labels. The measured objective adds the allocator's plans
    for the other error objectives (`opscope.probe.allocate.ERRORS`) at the budget and at each
    uniform scheme's bytes."""
    budget = f"{report.budget:.0%}"
    errors = [report.error] + ([e for e in ERRORS if e != report.error] if objective == "measured" else [])

    def allocate(frac: float, error: str) -> Allocation:
        if report.dado is not None:
            return dado_allocate(report.profiles, frac, cfg, error=error)
        return greedy_allocate(report.profiles, frac, error)

    plans = [(f"{report.allocator}{LABELS[report.error]} @ {budget}", report.plan)]
    if report.dado is not None:
        plans.append((f"greedy{LABELS[report.error]} @ {budget}", report.greedy))
    plans += [(f"{report.allocator}{LABELS[e]} @ {budget}", allocate(report.budget, e)) for e in errors[1:]]
    for kind in ("int8", "int4"):
        u = uniform(report, kind)
        plans.append((f"uniform {kind}", u))
        frac = u.total_bytes / u.dense_bytes
        plans += [(f"{report.allocator}{LABELS[e]} @ {kind} bytes ({frac:.1%})", allocate(frac, e)) for e in errors]
    merged: dict[tuple[int, ...], tuple[str, Allocation]] = {}
    for label, a in plans:
        if a.choice in merged:
            merged[a.choice] = (f"{merged[a.choice][0]} = {label}", merged[a.choice][1])
        else:
            merged[a.choice] = (label, a)
    return list(merged.values())


Rewrites = dict[str, tuple[np.ndarray, Option]]  # layer name -> (its dense weight, the option it is stored as)


def measure_plans(
    evalset: EvalSet,
    weights: WeightSet,
    report: LayersReport,
    *,
    target: str = "llvm-cpu",
    cfg: DadoConfig = DadoConfig(),
    objective: str = "weights",
    progress: Callable[[str], None] | None = None,
    dask: str | None = None,
    shards_dir: str | Path | None = None,
    resume: bool = False,
) -> LayersReport:
    """Build and run every plan of `plans_to_measure` on `evalset`; fills `report.measured`. With
    `objective="measured"`, the plan within the budget that keeps most of the task's headline
    metric is `report.picked`. With `dask` (`opscope.jobs.executor`), each plan's build is a job on
    a worker (`plan_jobs`) and the report is the serial one but for `seconds` (the wall time); each
    result a shard in `shards_dir` (JSON) as it comes back, read instead of run with `resume`."""
    start = time.perf_counter()
    plans = plans_to_measure(report, cfg, objective)
    rewrites = [plan_rewrites(report, weights, alloc) for _, alloc in plans]
    if dask is None:
        from opscope.act.whatif import Bench

        bench = Bench(evalset, target, progress)
        original = bench.report
        metrics = [plan_metrics(bench, label, r) for (label, _), r in zip(plans, rewrites)]
    else:
        store = layers_store(shards_dir, resume)
        original, metrics = plan_jobs(evalset, plans, rewrites, target, dask, progress, store)
        store.remove()
    report.headline, report.baseline = original.headline, original.baseline
    report.columns, report.data = list(COLUMNS[evalset.task]), evalset.data
    report.objective = objective
    for (label, alloc), m in zip(plans, metrics):
        report.measured.append(PlanOutcome(label, alloc.choice, alloc.total_err, alloc.total_bytes, m))
    if objective == "measured":
        fits = [m for m in report.measured if m.bytes <= report.plan.budget]
        report.picked = max(fits, key=lambda m: (m.metrics.get(report.headline, 0.0), -m.total_err)).label
    report.seconds["measure"] = time.perf_counter() - start
    return report


def plan_rewrites(report: LayersReport, weights: WeightSet, alloc: Allocation) -> Rewrites:
    """The layers `alloc` stores other than dense, each with its weight and option (reconstructed where
    the build is made: on a worker, under `dask`)."""
    out: Rewrites = {}
    for p, c in zip(report.profiles, alloc.choice):
        if p.options[c].kind != "dense":
            out[p.name] = (weights.matrices[p.name], p.options[c])
    return out


def plan_metrics(bench: Bench, label: str, rewrites: Rewrites) -> dict[str, float]:
    """The plan's reconstructed weights built into the model, run and compared with the original."""
    from opscope.ir.weights import replace_weights

    new = {name: reconstruct(matrix, option) for name, (matrix, option) in rewrites.items()}
    module = bench.module()
    replace_weights(module, new)
    return compare(bench.reference, bench.run(module, label))


def plan_jobs(
    evalset: EvalSet,
    plans: list[tuple[str, Allocation]],
    rewrites: list[Rewrites],
    target: str,
    dask: str,
    progress: Callable[[str], None] | None,
    store: Store | None = None,
) -> tuple[WhatIfReport, list[dict[str, float]]]:
    """(the original's report, each plan's metrics in `plans`' order), each a job on the `dask` pool: a
    worker compiles and runs the original once (`worker_bench`) for every plan it builds. A job's
    id is the set's digest, the target and the plan's choices; it carries the weights it rewrites.
    `store`: where each result goes as a shard, and those a resumed run reads back."""
    from opscope.act.whatif_jobs import original_job
    from opscope.jobs.executor import open_pool
    from opscope.jobs.run import Job
    from opscope.jobs.shards import job_id
    from opscope.jobs.store import Waves

    shipped, key = evalset.shipped(), evalset.digest()
    base = original_job(shipped, key, target)
    jobs = [
        Job(
            job_id(
                "layers-plan",
                {"set": key, "target": target, "choice": a.choice, "options": {n: o.label for n, (_, o) in r.items()}},
            ),
            label,
            plan_job,
            (shipped, key, target, label, r),
        )
        for (label, a), r in zip(plans, rewrites)
    ]
    with open_pool(dask) as pool:
        results = Waves(pool, store or layers_store(None), progress).run([base, *jobs], f"{len(jobs)} builds")
    return results[base.id], [results[job.id] for job in jobs]


def layers_store(folder: str | Path | None, resume: bool = False) -> Store:
    """The shards of `layers --measure --dask` (`--shards-dir`): the original's report and each plan's
    metrics as JSON (the what-if's coding)."""
    from opscope.act.whatif_jobs import decode, encode

    return Store.of(folder, resume, Codec(encode, decode), ("whatif-original", "layers-plan"), "--shards-dir")


def plan_job(evalset: EvalSet, key: str, target: str, label: str, rewrites: Rewrites) -> dict[str, float]:
    """One plan built, run and compared with the original, on a worker."""
    from opscope.act.whatif_jobs import worker_bench

    return plan_metrics(worker_bench(evalset, key, target), label, rewrites)
