"""Keep the buffers IREE's CPU runtime frees after a call for the next call (glibc's malloc).

IREE's local HAL allocates each call's transient and result buffers with malloc and frees
them when the call's results go. glibc serves an allocation above its mmap threshold
(dynamic, at most 32 MiB) with a fresh `mmap` and unmaps it on `free`, so every call of a
module whose buffers pass 32 MiB faults them in page by page again, zero-filled by the
kernel: MiniLM returning its matmul activations (8 × 48 tokens) ran 87 → 59 ms a call with
the thresholds raised (20,342 → 0 minor faults), SmolLM2 296 → 208 ms (`bench/bench_heap.py`).
Raising the mmap and trim thresholds keeps freed memory in the heap, where the next call
reuses it. The cost: the process keeps up to `TRIM` bytes of freed heap instead of returning
them to the OS; `give_back_freed_memory` returns them when a module's device goes (nothing
would reuse them soon). `OPSCOPE_MALLOC=system` leaves glibc's settings alone.
"""

from __future__ import annotations

import ctypes
import os
import platform

M_TRIM_THRESHOLD = -1  # glibc's mallopt parameter numbers (malloc.h)
M_MMAP_THRESHOLD = -3
MMAP = 2**31 - 1  # allocations above this (2 GiB) still get their own mmap
TRIM = 2**30  # freed heap kept at the top before glibc returns it to the OS (1 GiB)
# glibc's dynamic thresholds once a program has freed a large mmapped buffer: mmap above
# 32 MiB, trim above twice that. What `keep_freed_memory(False)` sets, for benchmarks.
GLIBC_STEADY = (32 << 20, 64 << 20)
OPT_OUT = "OPSCOPE_MALLOC"  # =system: leave malloc alone

_applied = False


def _libc():
    """The C library when it is glibc (whose `mallopt` and `malloc_trim` these are), else None."""
    if platform.system() != "Linux" or platform.libc_ver()[0] != "glibc":
        return None
    return ctypes.CDLL(None)


def give_back_freed_memory() -> None:
    """Return the freed memory every malloc arena holds to the OS (glibc's `malloc_trim(0)`):
    what a released device's buffers leave behind, which the kept thresholds would hold."""
    libc = _libc()
    if libc is not None:
        libc.malloc_trim.argtypes, libc.malloc_trim.restype = [ctypes.c_size_t], ctypes.c_int
        libc.malloc_trim(0)


def _mallopt():
    """glibc's `mallopt`, or None where the C library is another one."""
    libc = _libc()
    if libc is None:
        return None
    fn = libc.mallopt
    fn.argtypes, fn.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    return fn


def keep_freed_memory(keep: bool = True) -> bool:
    """Keep large freed buffers in the heap for reuse (`keep`), or set glibc's own steady-state
    thresholds back (False, for side-by-side benchmarks); True when glibc took the settings."""
    mallopt = _mallopt()
    if mallopt is None:
        return False
    mmap, trim = (MMAP, TRIM) if keep else GLIBC_STEADY
    return bool(mallopt(M_MMAP_THRESHOLD, mmap)) and bool(mallopt(M_TRIM_THRESHOLD, trim))


def keep_freed_memory_once() -> None:
    """`keep_freed_memory()` on the first module loaded in this process, unless
    `OPSCOPE_MALLOC=system`."""
    global _applied
    if _applied:
        return
    _applied = True
    if os.environ.get(OPT_OUT, "").strip().lower() != "system":
        keep_freed_memory(True)
