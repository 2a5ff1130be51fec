"""A trace served through a `LiveSampler`, in this process or as K jobs whose sketches are merged.

With K shares (`serve_jobs`), share w serves requests w, w + K, ... of the trace as one job on
the jobs layer (`opscope.jobs`: `local:N` Dask worker processes here or a scheduler's workers).
A job carries what it serves as picklable arguments (both compiled builds as vmfb bytes, the
paths of the parameter files they map, the manifest, the trace): a remote cluster needs a shared
file system only for those parameter files. Each job (its id: `job_id("live-share", ...)`) returns
its share's final sketch as JSON, and this process merges them in share order. A worker that dies mid-job has Dask run the job again elsewhere from the share's first
request, so nothing is lost and nothing counted twice.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
from tqdm import tqdm

from opscope.drive.live import LiveSampler
from opscope.drive.trace import Trace
from opscope.errors import OpscopeError
from opscope.ir.manifest import Manifest
from opscope.jobs.executor import open_pool
from opscope.jobs.run import Job, once_per_worker, run_jobs
from opscope.jobs.shards import content_digest, job_id
from opscope.online.snapshot import from_dict, to_dict
from opscope.online.stream import StreamSketch
from opscope.run.compile import CompiledModule
from opscope.run.runtime import load as load_module


@dataclass(frozen=True)
class WorkerOutcome:
    """One share of the trace served as a job: its requests, the calls its sketch holds, its time."""

    worker: int
    requests: int  # its share of the trace
    calls_saved: int  # calls in its final sketch (what the merge holds of it: all of its requests)
    seconds: float = 0.0  # the job's own time on its worker
    job: str = ""  # its id (`job_id("live-share", ...)`)


@dataclass
class Served:
    """A served trace: the (merged) sketch, the wall time of serving, each share's outcome, where it ran."""

    sketch: StreamSketch
    seconds: float
    workers: list[WorkerOutcome] = field(default_factory=list)
    where: str | None = None  # the pool the shares ran on, in words (None: this process)

    @property
    def lost(self) -> int:
        """Requests of the trace missing from the merged sketch (0: a dead worker's share is run again)."""
        return sum(w.requests - w.calls_saved for w in self.workers)


@dataclass(frozen=True)
class Builds:
    """What a share's job serves with: both compiled builds (parameter files by path), the manifest,
    the sampling settings, and a digest of the builds (the key a worker loads them once under)."""

    tapped: CompiledModule
    plain: CompiledModule
    manifest: Manifest
    every: int
    target: str
    name: str
    fingerprint_inputs: bool
    config: dict | None
    digest: str


def serve(sampler: LiveSampler, trace: Trace, progress: bool | None = None) -> Served:
    """Every request of `trace` through `sampler`, in order, in this process."""
    t0 = time.perf_counter()
    for inputs, label in tqdm(trace.requests(), total=len(trace), desc="serve", unit="req", disable=_quiet(progress)):
        sampler(*inputs, label=label)
    return Served(sampler.sketch, time.perf_counter() - t0)


def _quiet(progress: bool | None) -> bool | None:
    return None if progress is None else not progress


def serve_jobs(
    sampler: LiveSampler,
    trace: Trace,
    workers: int,
    dask: str,
    say: Callable[[str], None] | None = None,
) -> Served:
    """`trace` in `workers` shares (share w: requests w, w + K, ...), each a job on the `dask` pool
    (`opscope.jobs.executor`), their final sketches (JSON, as `opscope.online.snapshot` saves them)
    merged in share order."""
    if workers < 1:
        raise OpscopeError(f"live: --workers must be >= 1, got {workers}")
    builds = builds_of(sampler)
    jobs = share_jobs(builds, trace, workers)
    results: dict[str, bytes] = {}
    with open_pool(dask) as pool:
        if say is not None:
            say(pool.line(f"{workers} share{'s' if workers != 1 else ''} of {len(trace)} requests"))
        t0 = time.perf_counter()
        done = run_jobs(pool, jobs, lambda job, data: results.__setitem__(job.id, data), say)
        seconds = time.perf_counter() - t0
    sketches = [from_dict(json.loads(results[job.id])) for job in jobs]
    outcomes = [
        WorkerOutcome(w, len(trace.order[w::workers]), s.calls, done.seconds[job.id], job.id)
        for w, (job, s) in enumerate(zip(jobs, sketches, strict=True))
    ]
    return Served(merge_shares(sketches, builds.every, builds.config), seconds, outcomes, pool.where)


def merge_shares(sketches: list[StreamSketch], every: int, config: dict | None) -> StreamSketch:
    """The shares' sketches merged in share order onto an empty sketch: what the shares served one
    after another in one process and merged so give (exactly, but for the KLL value sketches, whose
    compactions draw random bits: the same counts, extremes and quantiles within their rank error)."""
    merged = StreamSketch(every, config=config)
    for sketch in sketches:
        merged = merged.merge(sketch)
    return merged


def builds_of(sampler: LiveSampler) -> Builds:
    """The sampler's builds and settings as a job's picklable arguments, named by a digest of both builds."""
    builds = (sampler.tapped.compiled, sampler.plain.compiled)
    digest = content_digest(part for c in builds for part in (c.vmfb, json.dumps(c.parameters).encode()))
    return Builds(
        sampler.tapped.compiled,
        sampler.plain.compiled,
        sampler.manifest,
        sampler.every,
        sampler.target,
        sampler.name,
        sampler.fingerprint_inputs,
        sampler.sketch.config,
        digest,
    )


def trace_digest(trace: Trace) -> str:
    """A digest of what the trace sends (its order, its pool's inputs and labels): part of each share's id."""
    arrays = (np.asarray(x) for entry in trace.pool for x in entry)
    return content_digest([trace.order.astype("int64"), json.dumps(trace.labels).encode(), *arrays])


def share_jobs(builds: Builds, trace: Trace, workers: int) -> list[Job]:
    """One job per share, its id from what it computes (the builds, the trace, its index of K, the sampling)."""
    key = trace_digest(trace)
    return [
        Job(
            job_id(
                "live-share",
                {
                    "builds": builds.digest,
                    "trace": key,
                    "worker": w,
                    "workers": workers,
                    "every": builds.every,
                    "fingerprint_inputs": builds.fingerprint_inputs,
                    "config": builds.config,
                },
            ),
            f"share {w} of {workers} ({len(trace.order[w::workers])} requests)",
            serve_share,
            (builds, trace, w, workers),
        )
        for w in range(workers)
    ]


def serve_share(builds: Builds, trace: Trace, w: int, workers: int) -> bytes:
    """One share on a worker, from its first request: requests w, w + K, ... through a fresh sampler on
    the builds (loaded once per worker thread); its final sketch as JSON (`opscope.online.snapshot`)."""
    tapped, plain = once_per_worker(
        ("live", builds.digest, threading.get_ident()),  # a thread's own: a build's context serves one caller
        lambda: (load_module(builds.tapped), load_module(builds.plain)),
    )
    sampler = LiveSampler(
        builds.manifest,
        tapped,
        plain,
        builds.every,
        target=builds.target,
        name=builds.name,
        fingerprint_inputs=builds.fingerprint_inputs,
        sketch=StreamSketch(builds.every, config=builds.config),
    )
    for inputs, label in trace.requests(w, workers):
        sampler(*inputs, label=label)
    return json.dumps(to_dict(sampler.sketch)).encode()
