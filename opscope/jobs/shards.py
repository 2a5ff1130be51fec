"""Each job's result as a file of its own, named by the job's id, written atomically.

A job id is a hash of what the job computes (its kind and parameters, as canonical JSON), so
the same job run again, by a resumed client or on another worker after one died, writes the
same file: a shard is either whole or absent (written beside, fsynced, renamed), and `done`
lists the jobs a resume skips. Merging reads the shards in the order the caller documents.
`atomic_write` is the one atomic writer: tensor files and calibration files use it too.
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import BinaryIO

import numpy as np

from opscope.errors import OpscopeError


def atomic_write(path: Path, write: Callable[[BinaryIO], None]) -> None:
    """Run `write` on a temporary file next to `path`, then move it over `path`; on any
    failure the temporary file is removed and `path` is left as it was."""
    tmp = path.parent / f".{path.name}.{secrets.token_hex(6)}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)  # the umask applies, as to any new file
    try:
        with os.fdopen(fd, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise


def content_digest(parts: Iterable[bytes | np.ndarray]) -> str:
    """A hash of what a job reads (a module's bytes, arrays with their dtype and shape): the part of
    its id its parameters cannot carry as JSON."""
    h = hashlib.blake2b(digest_size=16)
    for part in parts:
        if isinstance(part, np.ndarray):
            arr = np.ascontiguousarray(part)
            h.update(f"{arr.dtype.str}{arr.shape}".encode())
            part = arr.tobytes()
        h.update(part)
    return h.hexdigest()


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
        """The shard of `job`, atomically (`atomic_write`)."""
        self.folder.mkdir(parents=True, exist_ok=True)
        atomic_write(self.path(job), lambda f: f.write(data))
        return self.path(job)

    def read(self, job: str) -> bytes:
        return self.path(job).read_bytes()

    def remove(self) -> None:
        """Every shard and the folder, once their union is recorded; leftovers of dead writers too."""
        if not self.folder.is_dir():
            return
        for p in self.folder.iterdir():
            p.unlink(missing_ok=True)
        self.folder.rmdir()
