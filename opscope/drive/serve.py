"""A trace served through a `LiveSampler`, in this process or in K worker processes merged.

Workers are separate processes (spawned, each with its own IREE runtime) that load the two
builds the parent compiled, serve every K-th request of the trace, and save their sketches
every `snapshot_every` sampled calls (atomically). The parent merges whatever each worker
saved last: a worker that crashes loses only the calls since its last snapshot, and the
report says which worker, how it ended and how many calls it saved.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from tqdm import tqdm

from opscope.drive.live import LiveSampler
from opscope.drive.trace import Trace
from opscope.errors import OpscopeError
from opscope.ir.manifest import Manifest
from opscope.online.snapshot import load as load_sketch
from opscope.online.stream import StreamSketch
from opscope.run.compile import CompiledModule
from opscope.run.runtime import load
from opscope.run.targets import get_target

log = logging.getLogger("opscope")
WORKER_SNAPSHOT = 8  # sampled calls between a worker's saves, unless asked otherwise


@dataclass(frozen=True)
class WorkerOutcome:
    worker: int
    exitcode: int
    requests: int  # its share of the trace
    calls_saved: int  # calls in its last snapshot (what the merge holds of it)


@dataclass
class Served:
    """A served trace: the (merged) sketch, the wall time of serving, each worker's outcome."""

    sketch: StreamSketch
    seconds: float
    workers: list[WorkerOutcome] = field(default_factory=list)

    @property
    def lost(self) -> int:
        return sum(w.requests - w.calls_saved for w in self.workers)


def serve(sampler: LiveSampler, trace: Trace, progress: bool | None = None) -> Served:
    """Every request of `trace` through `sampler`, in order, in this process."""
    t0 = time.perf_counter()
    for inputs, label in tqdm(trace.requests(), total=len(trace), desc="serve", unit="req", disable=_quiet(progress)):
        sampler(*inputs, label=label)
    return Served(sampler.sketch, time.perf_counter() - t0)


def _quiet(progress: bool | None) -> bool | None:
    return None if progress is None else not progress


def serve_workers(
    sampler: LiveSampler,
    trace: Trace,
    workers: int,
    folder: str | Path,
    snapshot_every: int = WORKER_SNAPSHOT,
    crash_after: dict[int, int] | None = None,
) -> Served:
    """`trace` served by `workers` processes (worker w takes requests w, w + K, ...), their saved
    sketches merged. `crash_after` {worker: n} makes worker w exit abruptly after n requests (tests)."""
    if workers < 1:
        raise OpscopeError(f"live: --workers must be >= 1, got {workers}")
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    spec = folder / "spec.json"
    spec.write_text(json.dumps(_write_spec(sampler, trace, folder, snapshot_every)))
    t0 = time.perf_counter()
    procs = []
    for w in range(workers):
        state, log_path = folder / f"worker-{w}.json", folder / f"worker-{w}.log"
        state.unlink(missing_ok=True)
        crash = (crash_after or {}).get(w)
        code = (
            f"from opscope.drive.serve import _worker; "
            f"_worker({str(spec)!r}, {w}, {workers}, {str(state)!r}, {crash!r})"
        )
        with open(log_path, "wb") as err:  # a separate interpreter: no re-import of the caller's main module
            procs.append((subprocess.Popen([sys.executable, "-c", code], stdout=err, stderr=err), state, log_path))
    for p, _, _ in procs:
        p.wait()
    seconds = time.perf_counter() - t0
    merged, outcomes = StreamSketch(sampler.every, config=sampler.sketch.config), []
    for w, (p, state, log_path) in enumerate(procs):
        share = len(trace.order[w::workers])
        saved = load_sketch(state) if state.is_file() else None
        if saved is not None:
            merged = merged.merge(saved)
        outcome = WorkerOutcome(w, p.returncode, share, saved.calls if saved else 0)
        if p.returncode != 0:
            log.warning(
                "live: worker %d stopped (exit code %s): merged the %d calls of its last snapshot, %d of its "
                "%d requests are not in the report (its log: %s)",
                w,
                p.returncode,
                outcome.calls_saved,
                share - outcome.calls_saved,
                share,
                log_path,
            )
        outcomes.append(outcome)
    if not any(o.calls_saved for o in outcomes):
        raise OpscopeError(f"live: no worker saved any sketch (logs: {folder}/worker-*.log)")
    return Served(merged, seconds, outcomes)


def _write_spec(sampler: LiveSampler, trace: Trace, folder: Path, snapshot_every: int) -> dict:
    """What a worker needs, as files: both builds (and the parameter files they map), the manifest,
    the trace."""
    (folder / "tapped.vmfb").write_bytes(sampler.tapped.compiled.vmfb)
    (folder / "plain.vmfb").write_bytes(sampler.plain.compiled.vmfb)
    sampler.manifest.save(folder / "manifest.json")
    arrays = {f"pool_{j}_{a}": x for j, entry in enumerate(trace.pool) for a, x in enumerate(entry)}
    np.savez(folder / "trace.npz", order=trace.order, **arrays)
    (folder / "labels.json").write_text(json.dumps(trace.labels))
    return {
        "folder": str(folder),
        "target": sampler.target,
        "every": sampler.every,
        "name": sampler.name,
        "snapshot_every": snapshot_every,
        "fingerprint_inputs": sampler.fingerprint_inputs,
        "config": sampler.sketch.config,
        "arity": len(trace.pool[0]) if trace.pool else 0,
        "parameters": {
            k: [list(f) for f in m.compiled.parameters]
            for k, m in (("tapped", sampler.tapped), ("plain", sampler.plain))
        },
    }


def _load_trace(folder: Path, arity: int) -> Trace:
    with np.load(folder / "trace.npz") as data:
        labels = json.loads((folder / "labels.json").read_text())
        pool = [[data[f"pool_{j}_{a}"] for a in range(arity)] for j in range(len(labels))]
        return Trace(pool, labels, data["order"], "")


def _worker(spec_path: str, w: int, workers: int, state: str, crash_after: int | None) -> None:
    """One worker process: load the builds, serve its share, save its sketches as it goes."""
    spec = json.loads(Path(spec_path).read_text())
    folder = Path(spec["folder"])
    target = get_target(spec["target"])
    files = spec.get("parameters", {})
    tapped, plain = (
        load(
            CompiledModule(
                (folder / f"{k}.vmfb").read_bytes(), target, (), parameters=tuple(map(tuple, files.get(k, ())))
            )
        )
        for k in ("tapped", "plain")
    )
    sampler = LiveSampler(
        Manifest.load(folder / "manifest.json"),
        tapped,
        plain,
        spec["every"],
        target=target.name,
        name=spec["name"],
        fingerprint_inputs=spec["fingerprint_inputs"],
        state=state,
        snapshot_every=spec["snapshot_every"],
        sketch=StreamSketch(spec["every"], config=spec.get("config")),
    )
    trace = _load_trace(folder, spec["arity"])
    for n, (inputs, label) in enumerate(trace.requests(w, workers), 1):
        sampler(*inputs, label=label)
        if crash_after is not None and n >= crash_after:
            os._exit(3)  # an abrupt death: no close, no final save
    sampler.close()
