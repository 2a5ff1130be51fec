"""One writer per run folder: a second `opscope` process writing into a folder another is still
writing is refused in one line, before it writes anything, so neither run is mixed into the other.

The lock is a file in the folder, `.opscope-writing`, created exclusively (O_EXCL) and holding the
writer's pid; it goes when the writer finishes or fails (and the folder too, when the writer made it
and failed before writing anything). A lock whose process is gone (killed, crashed) is stale: the
next writer takes it over, and says so.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Iterator
from pathlib import Path

from opscope.errors import OpscopeError

LOCK_NAME = ".opscope-writing"


def _alive(pid: int) -> bool:
    """Whether a process with `pid` exists on this machine."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, another user's
        return True
    return True


@contextlib.contextmanager
def writing(folder: str | Path) -> Iterator[Path]:
    """Hold `folder`'s writer lock while the block runs (the folder is created); a stale lock taken
    over is said as a warning of the `opscope` logger."""
    folder = Path(folder)
    created = not folder.exists()
    folder.mkdir(parents=True, exist_ok=True)
    lock = folder / LOCK_NAME
    for _ in range(2):  # a second try after a stale lock is removed
        try:
            fd = os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
            break
        except FileExistsError:
            text = lock.read_text(errors="replace").strip() if lock.exists() else ""
            pid = int(text) if text.isdigit() else None
            if pid is not None and pid != os.getpid() and _alive(pid):
                raise OpscopeError(
                    f"{folder} is being written by another opscope process (pid {pid}): "
                    "wait for it to finish, or choose another --out"
                ) from None
            logging.getLogger("opscope").warning(
                f"{lock}: left by a writer that is gone (pid {text or '?'}): taken over"
            )
            lock.unlink(missing_ok=True)
    else:
        raise OpscopeError(f"{folder}: could not take its writer lock {lock}; remove it if no opscope is running")
    try:
        os.write(fd, str(os.getpid()).encode())
        os.close(fd)
        yield folder
    finally:
        lock.unlink(missing_ok=True)
        if created and not any(folder.iterdir()):  # a writer that failed before writing leaves no folder
            folder.rmdir()
