"""`opscope sweep`: one matmul per shape × the 7 distributions × 3 seeds → tidy CSV (§4.1).

The reference's shapes (128,128,128), (256,64,256), (64,256,128), each injected and compiled
once; every (shape, dist, seed) is one run with `A = sample(dist, M, K, seed)`,
`B = sample(dist, K, N, seed + 1000)`, `run_id` 0..62 in that order, `step` 0. The first
run of each shape is checked against the un-instrumented module (the reference checks only
the very first run). Each shape's site is named `matmul_MxKxN` (the reference names all
three `matmul#<id>`, so its miner averages across shapes; ours keeps them apart).

Runs are recorded one at a time and journaled by `Recorder`, so `resume=True` after an
interruption skips the runs already on disk and loses or duplicates none.

With `dask` (`opscope.jobs.executor`: `local:N` worker processes or a scheduler's address) each
run is a job on a worker: the worker builds each shape once (`once_per_worker`), runs it and writes
the run's rows as a shard of its own (`<out>.shards/<job id>.csv`, atomic); this process appends
the shards to `out` in run-id order as they arrive, so the file is byte for byte the serial one.
A killed client leaves its finished shards: `resume=True` appends them without running them again.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

from tqdm import tqdm

from opscope.drive.synthetic import DISTS, sample
from opscope.errors import OpscopeError
from opscope.ir.stat_config import StatConfig
from opscope.jobs.executor import open_pool
from opscope.jobs.run import Job, once_per_worker, run_jobs
from opscope.jobs.shards import Shards, job_id
from opscope.models.demo import matmul_module
from opscope.record.recorder import Recorder, run_rows, write_site_costs
from opscope.run.instrumented import InstrumentedModel

SHAPES: tuple[tuple[int, int, int], ...] = ((128, 128, 128), (256, 64, 256), (64, 256, 128))
SEEDS: tuple[int, ...] = (1, 2, 3)


@dataclass(frozen=True)
class SweepRun:
    """One planned run: its id and what it feeds."""

    run_id: int
    shape: tuple[int, int, int]
    dist: str
    seed: int


def plan(shapes=SHAPES, dists=DISTS, seeds=SEEDS) -> list[SweepRun]:
    """Every run of a sweep in recording order; run ids are positions in this list."""
    runs = [(s, d, seed) for s in shapes for d in dists for seed in seeds]
    return [SweepRun(i, *r) for i, r in enumerate(runs)]


@dataclass
class SweepResult:
    """What a sweep did: runs recorded now, runs found done, parity per shape."""

    out: Path
    recorded: list[int] = field(default_factory=list)
    skipped: list[int] = field(default_factory=list)
    parity: dict[tuple[int, int, int], float | None] = field(default_factory=dict)  # None: not compared
    sketches_per_run: dict[tuple[int, int, int], int] = field(default_factory=dict)
    site_costs: Path | None = None
    target: str = "llvm-cpu"
    from_shards: list[int] = field(default_factory=list)  # runs a killed client's workers had finished
    workers: str = "this process"

    def to_dict(self) -> dict:
        """JSON-safe: the runs recorded and skipped, parity and sketches per shape (`MxKxN` keys)."""
        shape = "x".join
        return {
            "out": str(self.out),
            "target": self.target,
            "recorded": list(self.recorded),
            "skipped": list(self.skipped),
            "parity": {shape(map(str, s)): v for s, v in self.parity.items()},
            "sketches_per_run": {shape(map(str, s)): n for s, n in self.sketches_per_run.items()},
            "site_costs": None if self.site_costs is None else str(self.site_costs),
            "from_shards": list(self.from_shards),
            "workers": self.workers,
        }


def site_name(shape: tuple[int, int, int]) -> str:
    m, k, n = shape
    return f"matmul_{m}x{k}x{n}"


def sweep(
    out: str | Path,
    target: str = "llvm-cpu",
    shapes=SHAPES,
    dists=DISTS,
    seeds=SEEDS,
    resume: bool = False,
    config: StatConfig = StatConfig(),
    progress: bool | None = None,
    dask: str | None = None,
    say: Callable[[str], None] | None = None,
) -> SweepResult:
    """Record the sweep into `out` (a CSV); `resume` continues a file an earlier sweep left, with the
    sketch `config` it was recorded with (`<out>.config.json` says which; another is refused, so one
    file never mixes two sketch sets). `dask`: the runs as jobs on that pool (the module's
    docstring), `say` told of each job's end."""
    out = Path(out)
    if out.exists() and out.stat().st_size and not resume:
        raise OpscopeError(f"{out} exists: pass --resume to continue it, or remove it to start over")
    _same_config(out, config, resume)
    runs = plan(shapes, dists, seeds)
    result = SweepResult(out, target=target)
    costs: dict[str, int] = {}
    with Recorder(out, mode="a" if resume else "w") as rec:
        done = set(rec.completed_runs)
        result.skipped = sorted(r.run_id for r in runs if r.run_id in done)
        todo = [r for r in runs if r.run_id not in done]
        models: dict[tuple[int, int, int], InstrumentedModel] = {}
        bar = tqdm(
            total=len(runs),
            initial=len(runs) - len(todo),
            desc=f"sweep {target}",
            unit="run",
            disable=None if progress is None else not progress,
        )
        with bar:
            if dask is not None:
                _sweep_jobs(todo, rec, result, config, Path(str(out) + ".shards"), dask, bar.update, say)
                todo = []
            for run in todo:
                model = models.get(run.shape)
                if model is None:
                    model = models[run.shape] = _build(run.shape, target, config)
                    result.sketches_per_run[run.shape] = len(model.manifest.entries)
                m, k, n = run.shape
                a = sample(run.dist, m, k, run.seed)
                b = sample(run.dist, k, n, run.seed + 1000)
                outputs = model(a, b)
                if run.shape not in result.parity:
                    result.parity[run.shape] = model.check_parity([a, b], outputs)
                rec.record(run.run_id, 0, target, run.dist, m, k, n, model.manifest, outputs)
                result.recorded.append(run.run_id)
                bar.update()
        for shape in shapes:
            m, k, n = shape
            costs[site_name(shape)] = 2 * m * k * n
    result.site_costs = Path(str(out) + ".sites")
    write_site_costs(result.site_costs, costs)
    return result


def _config_path(out: Path) -> Path:
    return Path(str(out) + ".config.json")


def _same_config(out: Path, config: StatConfig, resume: bool) -> None:
    """Write `config` beside a fresh sweep's `out`; on resume, refuse one other than the recorded one
    (a sweep recorded before the sidecar existed used the default)."""
    import dataclasses
    import json

    want = json.loads(json.dumps(dataclasses.asdict(config)))  # tuples as lists, as read back
    side = _config_path(out)
    if resume and out.exists() and out.stat().st_size:
        try:
            had = json.loads(side.read_text()) if side.exists() else dataclasses.asdict(StatConfig())
            had = json.loads(json.dumps(had))
            if not isinstance(had, dict):
                raise ValueError("not a JSON object")
        except (OSError, ValueError) as e:
            raise OpscopeError(f"{side}: unreadable ({e}); remove it to resume with the default sketches") from None
        if had != want:
            diff = ", ".join(f"{k} {had.get(k)!r} there, {v!r} now" for k, v in want.items() if had.get(k) != v)
            raise OpscopeError(
                f"{out} was recorded with other sketches ({diff}): resume it with the same options, or start a new file"
            )
        return
    out.parent.mkdir(parents=True, exist_ok=True)
    side.write_text(json.dumps(want, indent=1) + "\n")


def _build(shape: tuple[int, int, int], target: str, config: StatConfig) -> InstrumentedModel:
    m, k, n = shape
    name = site_name(shape)
    return InstrumentedModel.build(matmul_module(m, k, n, name=name), target, config, name=name)


def _sweep_jobs(todo, rec: Recorder, result: SweepResult, config, folder: Path, dask: str, tick, say) -> None:
    """`todo` as jobs on the `dask` pool, their shards appended to `rec` in run-id order as the
    order allows (shards a killed client left are appended first, without a job)."""
    shards = Shards(folder, ".csv")
    settings = asdict(config)
    ids = {
        r.run_id: job_id(
            "sweep", {"shape": r.shape, "dist": r.dist, "seed": r.seed, "target": result.target, "config": settings}
        )
        for r in todo
    }
    have = shards.done()
    order = [r.run_id for r in todo]
    pending: dict[int, bytes] = {}
    at = 0

    def append_ready() -> None:
        nonlocal at
        while at < len(order) and order[at] in pending:
            data = pending.pop(order[at])
            rec.record_bytes(order[at], 0, data, data.count(b"\n"))
            result.recorded.append(order[at])
            tick()
            at += 1

    for r in todo:
        if ids[r.run_id] in have:
            pending[r.run_id] = shards.read(ids[r.run_id])
            result.from_shards.append(r.run_id)
    first: dict[tuple[int, int, int], int] = {}  # the run of each shape checked for parity: its first job
    for r in todo:
        if ids[r.run_id] not in have:
            first.setdefault(r.shape, r.run_id)
    jobs = [
        Job(
            ids[r.run_id],
            f"run {r.run_id} ({site_name(r.shape)}, {r.dist}, seed {r.seed})",
            sweep_job,
            (r, result.target, config, str(folder), ids[r.run_id], first[r.shape] == r.run_id),
        )
        for r in todo
        if ids[r.run_id] not in have
    ]

    def on_done(job: Job, answer) -> None:
        run, parity, entries = answer
        if first[run.shape] == run.run_id:
            result.parity[run.shape] = parity
        result.sketches_per_run[run.shape] = entries
        pending[run.run_id] = shards.read(job.id)
        append_ready()

    append_ready()
    if jobs:
        with open_pool(dask) as pool:
            result.workers = pool.where
            if say is not None:
                say(pool.line(f"sweep: {len(jobs)} runs"))
            run_jobs(pool, jobs, on_done, say)
    append_ready()
    if at == len(order):
        shards.remove()


def sweep_job(run: SweepRun, target: str, config: StatConfig, folder: str, job: str, check: bool):
    """One sweep run on a worker: its rows written as shard `job` in `folder`; returns (the run, the
    parity of its first run of a shape or None, sketches per run)."""
    model = once_per_worker(("sweep", run.shape, target, repr(config)), lambda: _build(run.shape, target, config))
    m, k, n = run.shape
    a = sample(run.dist, m, k, run.seed)
    b = sample(run.dist, k, n, run.seed + 1000)
    outputs = model(a, b)
    parity = model.check_parity([a, b], outputs) if check else None
    data, _ = run_rows(run.run_id, 0, target, run.dist, m, k, n, model.manifest, outputs)
    Shards(folder, ".csv").write(job, data)
    return run, parity, len(model.manifest.entries)
