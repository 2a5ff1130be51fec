"""The process's anonymous resident memory, read cheaply enough to check around every call.

`/proc/self/statm` gives resident and file-backed ("shared") pages; their difference is the
memory the process allocated itself (heap, IREE's pools), without the pages of a mapped
parameter file. One `pread` of an open descriptor: a few microseconds. None off Linux.
"""

from __future__ import annotations

import os

_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096
_open: tuple[int, int] | None = None  # (pid, descriptor): a forked child opens its own


def anon_bytes() -> int | None:
    """Resident bytes not backed by a file (None where /proc/self/statm cannot be read)."""
    global _open
    try:
        if _open is None or _open[0] != os.getpid():
            _open = (os.getpid(), os.open("/proc/self/statm", os.O_RDONLY))
        fields = os.pread(_open[1], 128, 0).split()
        return (int(fields[1]) - int(fields[2])) * _PAGE
    except (OSError, IndexError, ValueError):
        return None
