"""Job results kept as shards, so a run killed mid-way reads its finished jobs back (`--resume`).

A `Store` is one command's folder of shards and whether this run resumes from it. `Waves` runs
jobs on a pool, wave after wave, and writes each result as its shard as it comes back (this process writes them:
the workers need no shared folder), and when resuming reads the shards that are there instead of
running those jobs. The command says how its results become bytes and back (`Codec`: JSON of its
own types). The folder goes once the command's result is complete (`Store.remove`), so it may hold
that command's shards only (`Store.of` checks, before any work).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from opscope.errors import OpscopeError
from opscope.jobs.executor import Pool
from opscope.jobs.run import Job, run_jobs
from opscope.jobs.shards import Shards

SUFFIX = ".json"


@dataclass(frozen=True)
class Codec:
    """A command's results as shard bytes and back."""

    encode: Callable[[Any], bytes]
    decode: Callable[[bytes], Any]


@dataclass(frozen=True)
class Store:
    """Where a command's job results go as shards (None: nowhere), how they are coded, and whether
    finished ones are read back."""

    shards: Shards | None = None
    resume: bool = False
    codec: Codec | None = None

    @classmethod
    def of(
        cls, folder: str | Path | None, resume: bool, codec: Codec, prefix: str | tuple[str, ...], option: str
    ) -> Store:
        """The store of `folder` (`option` names it in errors; its shards' names start with `prefix`),
        checked: a folder of those shards only, and old ones only when resuming."""
        if folder is None:
            return cls(None, resume, codec)
        check_folder(Path(folder), resume, prefix, option)
        return cls(Shards(folder, SUFFIX), resume, codec)

    def done(self) -> set[str]:
        """The jobs a resumed run reads instead of running."""
        return self.shards.done() if self.shards is not None and self.resume else set()

    def read(self, job: str) -> Any:
        return self.codec.decode(self.shards.read(job))

    def write(self, job: str, result: Any) -> None:
        """`result` as the shard of `job`, if this store keeps shards."""
        if self.shards is not None:
            self.shards.write(job, self.codec.encode(result))

    def remove(self) -> None:
        """The shards and their folder, once the command's result is complete."""
        if self.shards is not None:
            self.shards.remove()


def check_folder(folder: Path, resume: bool, prefix: str | tuple[str, ...], option: str) -> None:
    """A shard folder holds this command's shards only (it is removed at the end), old ones only when resuming."""
    if folder.exists() and not folder.is_dir():
        raise OpscopeError(f"{option} {folder} is a file: name a folder (it is created, and removed at the end)")
    if not folder.is_dir():
        return
    entries = list(folder.iterdir())
    other = [p.name for p in entries if not _is_shard(p.name, prefix)]
    if other:
        raise OpscopeError(
            f"{option} {folder} holds other files ({other[0]}): name a folder of its own (it is removed at the end)"
        )
    if entries and not resume:
        raise OpscopeError(
            f"{option} {folder} holds {len(entries)} shard{'s' if len(entries) != 1 else ''} of an interrupted "
            "run: add --resume to use them, or remove the folder"
        )


def _is_shard(name: str, prefix: str | tuple[str, ...]) -> bool:
    """One of the command's shards (its job ids start with `prefix`, or one of them), or the temporary
    file of one whose writer died."""
    prefixes = (prefix,) if isinstance(prefix, str) else prefix
    return (name.startswith(prefixes) and name.endswith(SUFFIX)) or (
        name.startswith(tuple("." + p for p in prefixes)) and name.endswith(".tmp")
    )


def check_resume(dask: str | None, folder: str | Path | None, resume: bool) -> None:
    """`--resume` and `--shards-dir` where they go (with `--dask`; resume with the folder), or one line
    naming each option and its API argument."""
    if resume and dask is None:
        raise OpscopeError("--resume (resume) reads the shards of a --dask run: give --dask and --shards-dir")
    if resume and folder is None:
        raise OpscopeError(
            "--resume (resume) needs --shards-dir DIR (shards_dir), the folder the run wrote its shards to"
        )
    if folder is not None and dask is None:
        raise OpscopeError("--shards-dir (shards_dir) keeps the results of --dask jobs: give --dask too")


class Waves:
    """One pool and one store: each wave of a command's jobs read from shards or run, its results by job id."""

    def __init__(self, pool: Pool, store: Store, progress: Callable[[str], None] | None = None):
        self.pool, self.store, self.progress = pool, store, progress
        self.first = True

    def run(self, jobs: Sequence[Job], what: str) -> dict[str, Any]:
        """Each job's result by id: read from its shard when resuming, else run on the pool (its shard
        written here as it comes back); `what` heads the wave's progress line (`3 builds`)."""
        done = self.store.done()
        results = {job.id: self.store.read(job.id) for job in jobs if job.id in done}
        self._say(what, len(results))

        def record(job: Job, result: Any) -> None:
            results[job.id] = result
            self.store.write(job.id, result)

        todo = [job for job in jobs if job.id not in results]
        if todo:
            run_jobs(self.pool, todo, record, self.progress)
        return results

    def _say(self, what: str, read: int) -> None:
        """The wave's first line: what runs where (the dashboard once), and how many shards were read."""
        if self.progress is not None:
            self.progress(self.pool.line(what, self.first) + (f"; {read} read from shards (resume)" if read else ""))
        self.first = False
