"""Each job's result as a file of its own, named by the job's id, written atomically.

A job id is a hash of what the job computes (its kind and parameters, as canonical JSON), so
the same job run again, by a resumed client or on another worker after one died, writes the
same file: a shard is either whole or absent (written beside, fsynced, renamed), and `done`
lists the jobs a resume skips. Merging reads the shards in the order the caller documents.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping
from pathlib import Path

from opscope.errors import OpscopeError


def job_id(kind: str, params: Mapping) -> str:
    """`kind-<16 hex digits>`: a stable name for the job `params` describe (JSON-able values)."""
    try:
        text = json.dumps(params, sort_keys=True, separators=(",", ":"), default=list)
    except TypeError as e:
        raise OpscopeError(f"job {kind}: parameters that cannot name a job ({e})") from None
    return f"{kind}-{hashlib.blake2b(text.encode(), digest_size=8).hexdigest()}"


class Shards:
    """A folder of job results, one `<job id><suffix>` file each."""

    def __init__(self, folder: str | Path, suffix: str):
        self.folder = Path(folder)
        self.suffix = suffix

    def path(self, job: str) -> Path:
        return self.folder / f"{job}{self.suffix}"

    def done(self) -> set[str]:
        """The ids of the jobs whose shard is whole (a half-written one is never under its name)."""
        if not self.folder.is_dir():
            return set()
        return {p.name[: -len(self.suffix)] for p in self.folder.iterdir() if p.name.endswith(self.suffix)}

    def write(self, job: str, data: bytes) -> Path:
        """The shard of `job`, atomically: written beside under a name of this process's, fsynced, renamed."""
        self.folder.mkdir(parents=True, exist_ok=True)
        final = self.path(job)
        part = final.with_name(f".{final.name}.{os.getpid()}.part")
        with open(part, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(part, final)
        return final

    def read(self, job: str) -> bytes:
        return self.path(job).read_bytes()

    def remove(self) -> None:
        """Every shard and the folder, once their union is recorded; leftovers of dead writers too."""
        if not self.folder.is_dir():
            return
        for p in self.folder.iterdir():
            p.unlink(missing_ok=True)
        self.folder.rmdir()
