"""opscope.run.heap: a large buffer freed after one call is reused by the next without faulting
its pages in again (glibc), and `OPSCOPE_MALLOC=system` leaves glibc's settings alone.

malloc settings are process-wide, so each case runs in a fresh child process: it allocates,
fills and frees 40 MiB (above glibc's largest dynamic mmap threshold, 32 MiB) twice and
prints the minor page faults of the second round; 10,240 pages are new memory.
"""

import platform
import subprocess
import sys

import pytest

from opscope.run import heap

PAGES = (40 << 20) // 4096

CHILD = """
import ctypes, resource, sys
{setup}
libc = ctypes.CDLL(None)
libc.malloc.restype, libc.malloc.argtypes = ctypes.c_void_p, [ctypes.c_size_t]
libc.free.argtypes = [ctypes.c_void_p]
libc.memset.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_size_t]
n = 40 << 20
def fill():
    p = libc.malloc(n)
    libc.memset(p, 1, n)
    libc.free(p)
fill()
f0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
fill()
print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - f0)
"""

glibc = pytest.mark.skipif(
    platform.system() != "Linux" or platform.libc_ver()[0] != "glibc",
    reason="the settings are glibc's; elsewhere keep_freed_memory returns False (tested below)",
)


def faults(setup: str, env: dict | None = None) -> int:
    proc = subprocess.run(
        [sys.executable, "-c", CHILD.format(setup=setup)], capture_output=True, text=True, env=env, check=True
    )
    return int(proc.stdout.strip().splitlines()[-1])


@glibc
def test_glibc_faults_a_freed_large_buffer_in_again():
    """The baseline the setting exists for: without it, the second round is fresh memory."""
    assert faults("") >= 0.9 * PAGES


@glibc
def test_kept_memory_is_reused_without_faults():
    assert faults("from opscope.run.heap import keep_freed_memory; assert keep_freed_memory(True)") < 0.05 * PAGES


@glibc
def test_glibc_steady_settings_fault_again():
    """`keep_freed_memory(False)`, the benchmarks' stand-in for glibc, maps 40 MiB afresh every time."""
    assert faults("from opscope.run.heap import keep_freed_memory; assert keep_freed_memory(False)") >= 0.9 * PAGES


@glibc
def test_loading_a_module_keeps_freed_memory(monkeypatch):
    """`runtime.load` applies the setting once per process, before the first call."""
    setup = (
        "from opscope.run.compile import compile_module; from opscope.run.runtime import load; "
        "load(compile_module('func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> { return %x : tensor<4xf32> }', "
        "'llvm-cpu'))"
    )
    monkeypatch.delenv(heap.OPT_OUT, raising=False)
    assert faults(setup) < 0.05 * PAGES


@glibc
def test_opting_out_leaves_glibc_alone(monkeypatch):
    monkeypatch.setenv(heap.OPT_OUT, "system")
    setup = "from opscope.run.heap import keep_freed_memory_once; keep_freed_memory_once()"
    assert faults(setup, env=None) >= 0.9 * PAGES


def test_other_c_libraries_are_left_alone(monkeypatch):
    monkeypatch.setattr(heap.platform, "libc_ver", lambda: ("musl", "1.2"))
    assert heap.keep_freed_memory(True) is False
