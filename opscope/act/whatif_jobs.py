"""What-if sweeps as jobs on the jobs layer (`--dask`), each result a shard a resumed run reads back.

`measure_request` runs a what-if request: in this process (`opscope.act.whatif.measure`) or, with
`dask`, a sweep's evaluations as jobs. `sweep_layer_jobs` measures each build of `sweep_layers` as
a job (`measure_jobs`); `sweep_skip_jobs` runs each evaluation of `sweep_skips`' gated build as one:
the singles in one wave, the greedy curve in waves of twice the workers, cut at the first point
below `floor` exactly where the serial loop stops, then the curve's answer built for real. A worker compiles and runs the original once
(`worker_bench`) and compiles the gated build once (`_worker_gated`) for every job it is given.
The report is the serial one, field for field.

With a `Store` of shards (`--shards-dir DIR`), this process writes each result, as JSON, to
`DIR/<job id>.json` as it comes back (atomically, `opscope.jobs.shards.Shards`; the workers need
no shared folder); with `resume`, a job whose shard is there is read, not run. The folder goes once
the report is complete.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from opscope.act.evalset import EvalSet
from opscope.act.quality import compare
from opscope.act.whatif import (
    FLOOR,
    KEEP,
    Bench,
    Outcome,
    Variant,
    WhatIfReport,
    built_note,
    by_layer,
    check_variants,
    gate_names,
    gate_pipeline,
    gated_build,
    gated_outcome,
    gates_on_note,
    layer_variants,
    measure,
    sensitivity_order,
    skip,
)
from opscope.errors import OpscopeError
from opscope.jobs.run import Job, once_per_worker
from opscope.jobs.shards import job_id
from opscope.jobs.store import Codec, Store, Waves, check_folder, check_resume

PREFIX = "whatif"  # every what-if job id starts so (`whatif-…`, `whatif-original-…`, `whatif-gated-…`)
_REPORT_FIELDS = ("model", "task", "target", "data", "baseline", "flops", "bytes", "weights")


def check_jobs(
    sweep: bool, sweep_layers: str | None, dask: str | None, shards_dir: str | Path | None, resume: bool
) -> None:
    """Refuse `--dask`, `--shards-dir` and `--resume` where they do not go, in one line, before any compile."""
    from opscope.jobs.executor import check_spec

    if resume and not (sweep or sweep_layers):
        raise OpscopeError("--resume (resume) continues an interrupted --sweep or --sweep-layers run: drop --resume")
    check_resume(dask, shards_dir, resume)
    if dask is not None and not (sweep or sweep_layers):
        raise OpscopeError(
            "--dask spreads --sweep's and --sweep-layers' evaluations over workers (sweep, sweep_layers); the "
            "other what-if requests run in this process: drop --dask"
        )
    if dask is not None:
        check_spec(dask)
    if shards_dir is not None:
        check_folder(Path(shards_dir), resume, PREFIX, "--shards-dir")


def encode(result: Any) -> bytes:
    """A job's result as the JSON of its shard: an Outcome, the original's report, or metrics."""
    if isinstance(result, Outcome):
        body = {"kind": "outcome", **dataclasses.asdict(result)}
    elif isinstance(result, WhatIfReport):
        body = {"kind": "report", **{name: getattr(result, name) for name in _REPORT_FIELDS}}
    else:
        body = {"kind": "metrics", "metrics": result}
    return json.dumps(body, sort_keys=True).encode()


def decode(data: bytes) -> Any:
    """The result `encode` wrote (floats round-trip exactly through JSON)."""
    body = json.loads(data)
    kind = body.pop("kind")
    if kind == "outcome":
        return Outcome(**body)
    if kind == "report":
        return WhatIfReport(**body)
    return body["metrics"]


def whatif_store(folder: str | Path | None, resume: bool = False) -> Store:
    """The store of `--shards-dir` (`folder`) and `--resume`, coding outcomes, reports and metrics as JSON."""
    return Store.of(folder, resume, Codec(encode, decode), PREFIX, "--shards-dir")


def original_job(sent: EvalSet, key: str, target: str) -> Job:
    """The job of the original's report (each worker compiles and runs the original once)."""
    return Job(
        job_id("whatif-original", {"set": key, "target": target}), "the original", report_job, (sent, key, target)
    )


def variant_job(sent: EvalSet, key: str, target: str, variant: Variant) -> Job:
    """The job of one variant built, run and compared with the original."""
    params = {"set": key, "target": target, "pipeline": variant.pipeline, "what": variant.what}
    return Job(job_id("whatif", params), variant.what, measure_job, (sent, key, target, variant))


def gated_job(sent: EvalSet, key: str, target: str, gate: str, off: Sequence[str], what: str) -> Job:
    """The job of one evaluation of the gated build, the blocks `off` gated to 0 (none: every gate on)."""
    params = {"set": key, "target": target, "gate": gate, "off": list(off), "what": what}
    fn, args = (
        (gated_eval_job, (sent, key, target, gate, tuple(off), what))
        if off
        else (gates_on_job, (sent, key, target, gate))
    )
    return Job(job_id("whatif-gated", params), what, fn, args)


def measure_request(
    evalset: EvalSet,
    variants: Sequence[Variant],
    *,
    sweep: bool = False,
    sweep_layers_scheme: str | None = None,
    blocks: str = "*",
    keep: float = KEEP,
    floor: float = FLOOR,
    verify: bool = True,
    target: str = "llvm-cpu",
    progress: Callable[[str], None] | None = None,
    dask: str | None = None,
    shards_dir: str | Path | None = None,
    resume: bool = False,
) -> WhatIfReport:
    """The request `check_request` and `check_jobs` accepted, run: without `dask` in this process
    (`opscope.act.whatif.measure`), with it the sweep's evaluations as jobs (their results shards in
    `shards_dir`, read back with `resume`)."""
    if dask is None:
        return measure(
            evalset,
            variants,
            sweep=sweep,
            sweep_layers_scheme=sweep_layers_scheme,
            blocks=blocks,
            keep=keep,
            floor=floor,
            verify=verify,
            target=target,
            progress=progress,
        )
    store = whatif_store(shards_dir, resume)
    if sweep:
        sweep_options = {"blocks": blocks, "keep": keep, "floor": floor, "verify": verify, "variants": variants}
        return sweep_skip_jobs(evalset, **sweep_options, target=target, dask=dask, store=store, progress=progress)
    return sweep_layer_jobs(evalset, str(sweep_layers_scheme), target=target, dask=dask, store=store, progress=progress)


def sweep_layer_jobs(
    evalset: EvalSet,
    scheme: str,
    *,
    target: str = "llvm-cpu",
    dask: str,
    store: Store | None = None,
    progress: Callable[[str], None] | None = None,
) -> WhatIfReport:
    """`opscope.act.whatif.sweep_layers` with each build a job on the `dask` pool: the serial report."""
    store = store or whatif_store(None)
    report, outcomes = measure_jobs(evalset, layer_variants(evalset, scheme), target, dask, store, progress)
    store.remove()
    return by_layer(report, outcomes)


def measure_jobs(
    evalset: EvalSet,
    variants: Sequence[Variant],
    target: str,
    dask: str,
    store: Store,
    progress: Callable[[str], None] | None,
) -> tuple[WhatIfReport, list[Outcome]]:
    """Each variant measured as a job on the `dask` pool, and the report of the original (a job too):
    each worker compiles and runs the original once (`worker_bench`) for every variant it measures."""
    from opscope.jobs.executor import open_pool

    sent, key = evalset.shipped(), evalset.digest()
    base = original_job(sent, key, target)
    jobs = [base] + [variant_job(sent, key, target, v) for v in variants]
    with open_pool(dask) as pool:
        results = Waves(pool, store, progress).run(jobs, f"{len(variants)} builds")
    return results[base.id], [results[job.id] for job in jobs[1:]]


def sweep_skip_jobs(
    evalset: EvalSet,
    *,
    blocks: str = "*",
    target: str = "llvm-cpu",
    keep: float = KEEP,
    floor: float = FLOOR,
    verify: bool = True,
    variants: Sequence[Variant] = (),
    dask: str,
    store: Store | None = None,
    progress: Callable[[str], None] | None = None,
) -> WhatIfReport:
    """`opscope.act.whatif.sweep_skips` with each evaluation a job on the `dask` pool (the module
    docstring): the serial report."""
    from opscope.jobs.executor import open_pool

    store = store or whatif_store(None)
    gate = gate_pipeline(blocks)
    check_variants(evalset, [gate] + [v.pipeline for v in variants])
    sent, key, names = evalset.shipped(), evalset.digest(), gate_names(evalset, gate)
    base, on = original_job(sent, key, target), gated_job(sent, key, target, gate, (), "all gates on")
    singles = [gated_job(sent, key, target, gate, [name], f"skip {name}") for name in names]
    extra = [variant_job(sent, key, target, v) for v in variants]
    with open_pool(dask) as pool:
        waves = Waves(pool, store, progress)
        builds = f" and {len(extra)} build{'s' if len(extra) != 1 else ''}" if extra else ""
        got = waves.run([base, on, *singles, *extra], f"{len(names) + 1} evaluations of the gated build{builds}")
        report = got[base.id]
        report.keep = keep
        metric = report.headline
        report.notes += [n for n in [gates_on_note(metric, got[on.id])] if n]
        outcomes = [got[job.id] for job in singles]
        order = sensitivity_order(outcomes, metric)
        report.sweep = [outcomes[i] for i in order]
        report.curve = _curve(waves, [names[i] for i in order], floor, metric, (sent, key, target, gate))
        best = report.most_skippable(keep)
        if verify and best is not None:
            job = variant_job(sent, key, target, Variant(best.what + " (built)", best.pipeline))
            built = waves.run([job], "1 build (the curve's answer, skipped for real)")[job.id]
            report.outcomes.append(built)
            report.notes += [n for n in [built_note(metric, built, best)] if n]
    report.outcomes += [got[job.id] for job in extra]
    store.remove()
    return report


def _curve(waves: Waves, ranked: Sequence[str], floor: float, metric: str, where: tuple) -> list[Outcome]:
    """The greedy curve (the first k of `ranked` off, k = 1, 2, ...) in waves of twice the workers,
    cut at its first point below `floor`: the points the serial loop computes, no more."""
    size = 2 * max(waves.pool.workers, 1)
    curve: list[Outcome] = []
    for start in range(0, len(ranked), size):
        ks = range(start + 1, min(start + size, len(ranked)) + 1)
        jobs = [gated_job(*where, ranked[:k], skip(ranked[:k]).what) for k in ks]
        got = waves.run(jobs, f"{len(jobs)} evaluations of the greedy curve (k = {ks[0]} to {ks[-1]})")
        for job in jobs:
            curve.append(got[job.id])
            if curve[-1].metrics.get(metric, 0.0) < floor:
                return curve
    return curve


def worker_bench(evalset: EvalSet, key: str, target: str) -> Bench:
    """This process's `Bench` of the evaluation set `key` names (the original compiled and run once),
    shared by every job measured against it here (a what-if's variants and gates, a layers plan's builds)."""
    return once_per_worker(("bench", key, target), lambda: Bench(evalset, target))


def _worker_gated(evalset: EvalSet, key: str, target: str, gate: str) -> tuple[Bench, list[str], Any]:
    """This process's bench, and its gated build's block names and loaded build (compiled once)."""
    bench = worker_bench(evalset, key, target)
    names, loaded = once_per_worker(("whatif-gated", key, target, gate), lambda: gated_build(bench, gate))
    return bench, names, loaded


def report_job(evalset: EvalSet, key: str, target: str) -> WhatIfReport:
    """The original's report (its own metrics, FLOPs, bytes and weights), no variant yet, on a worker."""
    return dataclasses.replace(worker_bench(evalset, key, target).report, outcomes=[])


def measure_job(evalset: EvalSet, key: str, target: str, variant: Variant) -> Outcome:
    """One variant built, run and compared with the original, on a worker."""
    bench = worker_bench(evalset, key, target)
    outcome = bench.measure(variant)
    bench.report.outcomes.clear()  # the worker's bookkeeping: the client assembles the report
    return outcome


def gates_on_job(evalset: EvalSet, key: str, target: str, gate: str) -> dict[str, float]:
    """The gated build with every gate on against the original (1.0: the gates change nothing), on a worker."""
    bench, names, loaded = _worker_gated(evalset, key, target, gate)
    return compare(bench.reference, bench.summarize(loaded, "all gates on", [np.ones(len(names), np.float32)]))


def gated_eval_job(evalset: EvalSet, key: str, target: str, gate: str, off: tuple[str, ...], what: str) -> Outcome:
    """One point of the sweep or the curve: the blocks `off` gated to 0, on a worker."""
    bench, names, loaded = _worker_gated(evalset, key, target, gate)
    return gated_outcome(bench, loaded, names, off, what, what)
