"""Jobs submitted to a pool, their results handed back as each finishes, with progress.

Every job's function runs on a worker (`opscope.jobs.executor`); the caller's `on_done`
records each result in this process as it arrives (a job that failed is reported once all the
others are recorded: nothing finished is lost to one failure). A worker that dies mid-job is
Dask's to handle: the scheduler runs the job again on another worker, and since a job writes
only its own shard under its id, nothing is recorded twice.
"""

from __future__ import annotations

import concurrent.futures as cf
import time
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from opscope.errors import OpscopeError
from opscope.jobs.executor import Pool

T = TypeVar("T")
_ONCE: dict[Hashable, Any] = {}  # what this process built for its jobs, by key (`once_per_worker`)


@dataclass(frozen=True)
class Job:
    """One unit of work: its id (`opscope.jobs.shards.job_id`), a label for progress, its call."""

    id: str
    label: str
    fn: Callable
    args: tuple = ()


@dataclass
class JobsDone:
    """What a pool did with the jobs: finished ids in completion order, failures, seconds each."""

    finished: list[str] = field(default_factory=list)
    failed: list[tuple[str, str]] = field(default_factory=list)  # (label, the error's line)
    seconds: dict[str, float] = field(default_factory=dict)  # job id -> seconds it ran on its worker


def run_jobs(
    pool: Pool,
    jobs: Sequence[Job],
    on_done: Callable[[Job, Any], None],
    progress: Callable[[str], None] | None = None,
) -> JobsDone:
    """Submit every job to `pool`; call `on_done(job, result)` here as each finishes; raise one
    `OpscopeError` naming the failed jobs after every other result is handed over."""
    say = progress or (lambda line: None)
    outcome = JobsDone()
    futures = {pool.executor.submit(timed, job.fn, *job.args): job for job in jobs}
    total = len(jobs)
    for future in cf.as_completed(futures):
        job = futures[future]
        error = future.exception()
        if error is None:
            outcome.seconds[job.id], result = future.result()
            on_done(job, result)
            outcome.finished.append(job.id)
        else:
            outcome.failed.append((job.label, _line(error)))
        done = len(outcome.finished) + len(outcome.failed)
        took = f": {outcome.seconds[job.id]:.1f} s" if error is None else f" failed: {_line(error)}"
        say(
            f"{done}/{total} jobs done, {total - done} running or queued, {len(outcome.failed)} failed; {job.label}{took}"
        )
    if outcome.failed:
        label, line = outcome.failed[0]
        more = f" and {len(outcome.failed) - 1} more" if len(outcome.failed) > 1 else ""
        raise OpscopeError(
            f"{len(outcome.failed)} of {total} jobs failed: {label}: {line}{more}; the rest are recorded"
        )
    return outcome


def worker_name() -> str:
    """host:pid of the process a job runs in: which worker measured what (timings compare within one)."""
    import os
    import socket

    return f"{socket.gethostname()}:{os.getpid()}"


def once_per_worker(key: Hashable, make: Callable[[], T]) -> T:
    """`make()` the first time this process is asked for `key`, the same object after: what a worker
    builds once (a compiled model, the original's run) for every job it is given."""
    if key not in _ONCE:
        _ONCE[key] = make()
    return _ONCE[key]


def timed(fn: Callable, *args) -> tuple[float, Any]:
    """(seconds `fn(*args)` took where it ran, its result): a job's own time, not its wait in the queue."""
    start = time.perf_counter()
    result = fn(*args)
    return time.perf_counter() - start, result


def _line(error: BaseException) -> str:
    """An exception as one line: an OpscopeError's message, else its type and message."""
    text = str(error).strip().splitlines()[0] if str(error).strip() else ""
    return text if isinstance(error, OpscopeError) else f"{type(error).__name__}: {text}".rstrip(": ")
