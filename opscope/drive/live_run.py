"""`opscope live`: a model served over a request trace, 1 call in N sampled, and what the sketches say.

Everything a user can get wrong is checked before the model is imported or compiled. The
report sits beside the trace's own truth (the trace knows which request repeats which), so a
reader sees how far the sketches are from the exact answer on this very stream.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

from opscope.drive.live import LiveSampler, check_every, live_config
from opscope.drive.serve import Served, serve, serve_jobs
from opscope.drive.trace import DEMO_EVERY, DEMO_POOL, DEMO_REQUESTS, DEMO_SEED, Trace, demo_trace, model_trace
from opscope.errors import OpscopeError
from opscope.ir.stat_config import StatConfig
from opscope.jobs.executor import parse_spec, require_dask
from opscope.online.report import LiveReport, live_report, live_report_text
from opscope.online.snapshot import save
from opscope.pipeline.taps import check_sites_regex
from opscope.record.recorder import write_parquet

MODEL_REQUESTS, MODEL_POOL, MODEL_ZIPF, MODEL_EVERY = 1000, 64, 1.1, 16  # a model's defaults (the demo has its own)


@dataclass
class LiveRun:
    """A served trace: the report, the trace (its truth), how it was served."""

    name: str
    trace: Trace
    every: int
    workers: int
    served: Served
    report: LiveReport

    def truth(self) -> dict[str, float]:
        """The trace's exact recurrences: of the whole stream, and of the calls the sampler sampled."""
        return {
            "stream": self.trace.exact_recurrence(),
            "sampled": self.trace.exact_sampled_recurrence(self.every, self.workers),
        }

    def to_dict(self) -> dict:
        return {
            "model": self.name,
            "trace": self.trace.description,
            "every": self.every,
            "workers": self.workers,
            "seconds": self.served.seconds,
            "truth": self.truth(),
            "where": self.served.where,
            "shares": [asdict(w) for w in self.served.workers],
            "lost_requests": self.served.lost,
            "report": self.report.to_dict(),
        }


def live_text(run: LiveRun) -> str:
    """The served trace, the live report and the trace's truth beside it."""
    t = run.truth()
    lines = [
        f"{run.name}: {run.trace.description}; 1 call in {run.every} sampled"
        + (f", {run.workers} shares on {run.served.where}" if run.served.where else ""),
        f"served in {run.served.seconds:.2f} s ({1e3 * run.served.seconds / max(len(run.trace), 1):.2f} ms "
        "per request, wall)",
        "",
        live_report_text(run.report),
        "",
        f"trace truth: {t['stream']:.1%} of requests repeat an earlier one; {t['sampled']:.1%} of the "
        "sampled ones repeat an earlier sampled one (what the 'sampled' column estimates)",
    ]
    return "\n".join(lines)


def _check_out(path: str | Path | None, force: bool, what: str) -> Path | None:
    if path is None:
        return None
    path = Path(path)
    if path.exists() and not force:
        raise OpscopeError(f"live: {what} {path} exists; pass --force to overwrite it or choose another path")
    if not path.parent.is_dir():
        raise OpscopeError(f"live: no folder {path.parent} for {what} {path}")
    return path


def run_live(
    source=None,
    *,
    every: int | None = None,
    requests: int | None = None,
    pool: int | None = None,
    zipf: float | None = None,
    seed: int = 0,
    workers: int = 1,
    target: str = "llvm-cpu",
    csv: str | Path | None = None,
    parquet: str | Path | None = None,
    state: str | Path | None = None,
    snapshot_every: int = 0,
    force: bool = False,
    progress: bool | None = None,
    parameters: bool | None = None,
    sites: str = "",
    config: StatConfig | None = None,
    dask: str | None = None,
    say: Callable[[str], None] | None = None,
) -> LiveRun:
    """Serve `source` (None: the reference's demo, 500 requests over a pool of 8, every 5th sampled) over a
    trace of `requests` drawn from a `pool` of its inputs (Zipf `zipf`), 1 call in `every` instrumented,
    in `workers` shares; `csv`/`parquet` get the tidy snapshots, `state` the sketches (JSON).
    `parameters`: both builds (and every worker) map a model's weights from one parameter file in a
    temporary folder (None: so for a model of 128 MiB or more) instead of carrying them. `sites`: a regex on
    site names, only those tapped ("" all; checked first); `config` the sketches a sampled call records
    (default `StatConfig.live()`; checked first: it must keep role lhs). `workers` K > 1 or `dask`: the
    shares (share w: requests w, w + K, ...) as jobs on `dask`'s pool ("local:N", "tcp://HOST:PORT"; None:
    "local:K"), their sketches merged; `say` told of each job's end."""
    check_sites_regex(sites)
    config = live_config(config)
    demo = source is None
    every = check_every(every if every is not None else DEMO_EVERY if demo else MODEL_EVERY)
    requests = requests if requests is not None else DEMO_REQUESTS if demo else MODEL_REQUESTS
    pool = pool if pool is not None else DEMO_POOL if demo else MODEL_POOL
    zipf = zipf if zipf is not None else 0.0 if demo else MODEL_ZIPF
    if requests < 1 or pool < 1 or workers < 1 or snapshot_every < 0:
        raise OpscopeError(
            f"live: requests, pool and workers must be >= 1 and snapshot-every >= 0, got requests "
            f"{requests}, pool {pool}, workers {workers}, snapshot-every {snapshot_every}"
        )
    if zipf < 0:
        raise OpscopeError(f"live: the Zipf exponent must be >= 0 (0: uniform), got {zipf}")
    spec = pool_spec(dask, workers)
    csv, state = _check_out(csv, force, "CSV"), _check_out(state, force, "state file")
    parquet = _check_out(parquet, force, "Parquet file")
    if parquet is not None and csv is None:
        raise OpscopeError("live: --parquet converts the tidy CSV: give --csv too")
    held = None  # the temporary folder of the model's parameter file, kept while the builds run
    if demo:
        module, trace = demo_trace(requests, pool, DEMO_SEED + seed, zipf)  # seed 0: the reference's
        name = "reference live demo (4-layer MLP, [16,64])"
    else:
        model, trace, held = model_trace(source, requests, pool, zipf, seed, parameters)
        module, name = model.module, model.name
    single = spec is None
    sampler = LiveSampler.build(
        module,
        every,
        target,
        name=name,
        csv=csv if single else None,
        state=state if single else None,
        snapshot_every=snapshot_every if single else 0,
        sites=sites,
        config=config,
    )
    if single:
        served = serve(sampler, trace, progress)
        sampler.close(parquet)
    else:
        served = serve_jobs(sampler, trace, workers, spec, say)
        _write_merged(served, sampler, csv, parquet, state)
    del sampler, held  # the builds, then their parameter file
    return LiveRun(name, trace, every, workers, served, live_report(served.sketch))


def pool_spec(dask: str | None, workers: int) -> str | None:
    """Where the shares run: `dask`, or "local:K" for `workers` K > 1, or None (this process); a bad
    value or a missing Dask extra is one line, before anything is compiled."""
    if dask is None and workers == 1:
        return None
    spec = dask if dask is not None else f"local:{workers}"
    parse_spec(spec)
    try:
        require_dask()
    except OpscopeError:
        if dask is not None:
            raise
        raise OpscopeError(
            f"live --workers {workers} serves its shares as Dask jobs: pip install 'opscope[dask]' (or --workers 1)"
        ) from None
    return spec


def _write_merged(
    served: Served, sampler: LiveSampler, csv: Path | None, parquet: Path | None, state: Path | None
) -> None:
    """The workers' merged sketches: one tidy step of their aggregate, and the sketch file."""
    if csv is not None:
        with sampler.open_tidy(csv) as rec:
            sampler.record_period(rec, served.sketch)
        if parquet is not None:
            write_parquet(csv, parquet)
    if state is not None:
        save(served.sketch, state)


def merge_saved(paths: list[str | Path]) -> LiveReport:
    """The report of saved sketches merged (workers or machines that served the same model)."""
    from opscope.online.snapshot import load

    if not paths:
        raise OpscopeError("live: --merge needs at least one saved sketch (--state FILE of a run)")
    sketches = [load(p) for p in paths]
    merged = sketches[0]
    for other in sketches[1:]:
        merged = merged.merge(other)
    return live_report(merged)
