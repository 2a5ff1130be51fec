"""`profile --dask`: a profile's steps split in shards, each a job, merged into one run folder.

A profile over many inputs (a long `--text`, `--inputs` files of many batches) is
embarrassingly parallel by step: every step is one call of the same tapped build on its own
inputs, recorded as the rows of (run 0, step t). The client builds the model as a serial
profile does (its manifest, site costs, verification and the returned model are the same),
writes the untapped module once beside the CSV, and submits contiguous step ranges as jobs.
Each worker builds the model once (`once_per_worker`; IREE's compile cache on disk makes the
build a lookup on the client's machine), calls its steps, and writes their rows as one shard
(`<sketches.csv>.shards/<job id>.csv`). The client appends the shards in step order, one
journaled `record_bytes` per step: the merged table is the serial run's, row for row and byte
for byte, so every sketch mined from it (extremes, counts, sums, histograms) is the serial
run's too. Step 0's shard also checks parity and returns the model's own outputs (verify).
A worker that dies mid-shard has Dask run that shard again; a shard is whole or absent, so
nothing is recorded twice.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from opscope.drive.sequence import SequenceResult, module_rows
from opscope.errors import OpscopeError
from opscope.ir.stat_config import StatConfig
from opscope.jobs.executor import check_spec, open_pool
from opscope.jobs.run import Job, once_per_worker, run_jobs, timed
from opscope.jobs.shards import Shards, atomic_write, content_digest, job_id
from opscope.record.recorder import Recorder, run_rows, write_site_costs
from opscope.run.instrumented import InstrumentedModel

DEFAULT_SHARDS = 8  # shards of a profile's steps unless asked (capped at the steps)
MODULE_FILE = "model.mlirbc"  # the untapped module the workers build, beside the shards


@dataclass(frozen=True)
class ShardedBuild:
    """What every worker builds: the untapped module's file and hash, and how it is tapped."""

    module: str  # the file holding the untapped module (bytecode), on a file system the workers share
    digest: str  # its `content_digest`: the build's identity
    target: str
    config: StatConfig
    name: str
    batch: int
    taps: tuple[str, ...]
    sites: str

    def key(self) -> dict:
        """The build's parameters as JSON-able values: part of every shard's job id."""
        return {
            "module": self.digest,
            "target": self.target,
            "config": asdict(self.config),
            "batch": self.batch,
            "taps": list(self.taps),
            "sites": self.sites,
        }


@dataclass(frozen=True)
class ShardDone:
    """A shard's answer: for the shard of step 0, its parity and the model's own outputs (else None)."""

    parity: float | None = None
    outputs: list | None = None  # the original results of step 0 (what verify compares)


def check_sharding(dask: str | None, shards: int | None, steps: int, resume: bool) -> int:
    """How many shards `steps` are split in: `shards` (default 8), at most one per step; one-line errors,
    before any work, for a bad `--dask`, shards without `--dask` or below 1, a resume without `--dask`."""
    if dask is not None:
        check_spec(dask)
    count = min(steps, DEFAULT_SHARDS)
    if shards is not None:
        if dask is None:
            raise OpscopeError("--shards splits a profile's steps over Dask workers: give --dask too (local:2)")
        if isinstance(shards, bool) or not isinstance(shards, int) or shards < 1:
            raise OpscopeError(f"--shards must be a whole number >= 1, got {shards!r}")
        count = min(shards, steps)
    if resume and dask is None:
        raise OpscopeError(
            "--resume continues a profile run on Dask workers: give --dask (and --shards) as that run did"
        )
    return count


def shards_folder(csv: Path) -> Path:
    """Where a sharded profile's shards and the module its workers build wait: beside the CSV."""
    return Path(str(csv) + ".shards")


def split_steps(steps: int, shards: int) -> list[range]:
    """`steps` as `shards` contiguous ranges, the first `steps % shards` one step longer."""
    size, extra = divmod(steps, shards)
    out, at = [], 0
    for i in range(shards):
        n = size + (i < extra)
        out.append(range(at, at + n))
        at += n
    return out


def record_sharded(
    model: InstrumentedModel,
    build: ShardedBuild,
    inputs: Sequence[Sequence[np.ndarray]],
    csv: Path,
    dist: str,
    costs: Path,
    dask: str,
    shards: int,
    progress: Callable[[str], None] | None = None,
    resume: bool = False,
) -> SequenceResult:
    """`inputs` (one argument list per step) recorded into `csv` by shard jobs on the `dask` pool,
    appended in step order: what `record_steps` writes in one process, with the same result. With
    `resume`, the steps `csv`'s journal holds and the shards a killed client left are not run again."""
    store = Shards(shards_folder(csv), ".csv")
    ranges = split_steps(len(inputs), shards)
    ids = [
        job_id(
            "profile",
            {
                **build.key(),
                "dist": dist,
                "first": r.start,
                "inputs": content_digest(np.asarray(a) for t in r for a in inputs[t]),
            },
        )
        for r in ranges
    ]
    result = SequenceResult(csv, len(inputs), 0, 0.0, costs, 0.0, [])
    with Recorder(csv, mode="a" if resume else "w") as rec:
        recorded = {t for run, t in rec.completed_steps if run == 0}
        if recorded - set(range(len(inputs))):
            raise OpscopeError(
                f"{csv} holds steps beyond the {len(inputs)} asked: resume with the --steps of the run it continues"
            )
        waiting = store.done()
        todo = [i for i, r in enumerate(ranges) if not set(r) <= recorded and ids[i] not in waiting]
        ready: set[int] = {i for i in range(len(ranges)) if i not in todo}
        head: ShardDone | None = None  # step 0's shard, when it runs here
        at = 0

        def append_ready() -> None:
            nonlocal at
            while at < len(ranges) and at in ready:
                if not set(ranges[at]) <= recorded:
                    _append(rec, store.read(ids[at]), ranges[at], recorded)
                at += 1

        def on_done(job: Job, done: ShardDone) -> None:
            nonlocal head
            i = ids.index(job.id)
            head = done if i == 0 else head
            ready.add(i)
            append_ready()

        append_ready()
        jobs = [
            Job(ids[i], _label(ranges[i]), profile_shard, _shard_args(build, inputs, ranges[i], dist, store, ids[i]))
            for i in todo
        ]
        if jobs:
            with open_pool(dask) as pool:
                if progress is not None:
                    before = f", {len(ranges) - len(jobs)} finished before" if len(jobs) < len(ranges) else ""
                    progress(pool.line(f"profile: {len(inputs)} steps in {len(ranges)} shards") + before)
                result.seconds, _ = timed(run_jobs, pool, jobs, on_done, progress)
        append_ready()
        result.rows = rec.rows_written if not resume else _rows(csv)
    if head is not None:
        result.parity, result.first_outputs = head.parity, head.outputs or []
    else:  # step 0 was recorded before this call: check it here
        out = model(*inputs[0])
        result.parity, result.first_outputs = model.check_parity(list(inputs[0]), out), model.original(out)
    write_site_costs(costs, model.manifest, module_rows(model))
    store.remove()
    return result


def _shard_args(
    build: ShardedBuild, inputs: Sequence[Sequence[np.ndarray]], steps: range, dist: str, store: Shards, job: str
) -> tuple:
    """`profile_shard`'s arguments for the shard of `steps`."""
    return (build, steps.start, [list(inputs[t]) for t in steps], dist, str(store.folder), job)


def _rows(csv: Path) -> int:
    """The rows of a tidy CSV (its lines but the header), counted in blocks."""
    lines = 0
    with open(csv, "rb") as f:
        while block := f.read(1 << 24):
            lines += block.count(b"\n")
    return max(lines - 1, 0)


def write_module(model: InstrumentedModel, csv: Path) -> tuple[str, str]:
    """The untapped module written once beside `csv`'s shards for the workers: (its path, its digest)."""
    folder = shards_folder(csv)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / MODULE_FILE
    atomic_write(path, lambda f: f.write(model.base_source))
    return str(path.resolve()), content_digest([model.base_source])


def profile_shard(
    build: ShardedBuild, first: int, steps: list[list[np.ndarray]], dist: str, folder: str, job: str
) -> ShardDone:
    """One shard on a worker: the model built once per worker, its steps called, their rows
    written as shard `job`; step 0 also checks parity and hands back the original outputs."""
    model = once_per_worker(job_id("profile-build", build.key()), lambda: _build(build))
    parts, done = [], ShardDone()
    for t, args in enumerate(steps, first):
        out = model(*args)
        parts.append(run_rows(0, t, model.target, dist, None, None, None, model.manifest, out)[0])
        if t == 0:
            done = ShardDone(model.check_parity(args, out), model.original(out))
    Shards(folder, ".csv").write(job, b"".join(parts))
    return done


def _build(build: ShardedBuild) -> InstrumentedModel:
    """The tapped model a worker calls, from the client's untapped module file."""
    source = Path(build.module).read_bytes()
    if content_digest([source]) != build.digest:
        raise OpscopeError(f"{build.module}: not the module this profile submitted (changed or not shared)")
    return InstrumentedModel.build(
        source, build.target, build.config, name=build.name, batch=build.batch, taps=build.taps, sites=build.sites
    )


def _append(rec: Recorder, data: bytes, steps: range, recorded: set[int] = frozenset()) -> None:
    """A shard's rows into `rec`, one journaled record per step (its rows are contiguous, in step
    order), but the steps `recorded` before (a client killed while appending this shard)."""
    at = 0
    for t in steps:
        end = data.find(b"\n0,%d," % (t + 1), at) + 1 if t + 1 < steps.stop else len(data)
        if end <= 0:
            end = len(data)
        chunk = data[at:end]
        if t not in recorded:
            rec.record_bytes(0, t, chunk, chunk.count(b"\n"))
        at = end


def _label(steps: range) -> str:
    """A shard as progress names it: `steps 8-15`, or `step 5`."""
    return f"step {steps.start}" if len(steps) == 1 else f"steps {steps.start}-{steps.stop - 1}"
