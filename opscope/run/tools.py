"""The IREE command-line tools opscope runs, found inside the installed `iree` packages.

`iree-compile` ships in `iree-base-compiler`; `iree-benchmark-module`, `iree-run-module` and
the parameter tools ship in `iree-base-runtime` (`iree/_runtime_libs/`). Both are looked up
there, never on PATH: a venv's `bin/` need not be on PATH when `opscope` is called by its
full path. `IREE_TOOL_PATH` (IREE's own override) still wins for the compiler's tools.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from opscope.errors import OpscopeError

COMPILER_PACKAGE, RUNTIME_PACKAGE = "iree-base-compiler", "iree-base-runtime"
COMPILER_TOOLS = ("iree-compile", "iree-opt", "iree-link", "iree-lld")
RUNTIME_TOOLS = (
    "iree-benchmark-module",
    "iree-run-module",
    "iree-create-parameters",
    "iree-convert-parameters",
    "iree-dump-parameters",
    "iree-dump-module",
    "iree-cpuinfo",
)


def find_tool(name: str) -> str:
    """The absolute path of IREE tool `name`; a one-line OpscopeError naming the package to install."""
    if name in COMPILER_TOOLS:
        return _compiler_tool(name)
    if name in RUNTIME_TOOLS:
        return _runtime_tool(name)
    raise OpscopeError(
        f"'{name}' is not an IREE tool opscope knows (known: {', '.join(COMPILER_TOOLS + RUNTIME_TOOLS)})"
    )


def _missing(name: str, package: str, detail: str) -> OpscopeError:
    return OpscopeError(
        f"{name} not found ({detail}): it ships in the {package} package; pip install '{package}==3.13.*'"
    )


def _compiler_tool(name: str) -> str:
    try:
        from iree.compiler.tools.binaries import find_tool as iree_find_tool
    except ImportError:
        raise _missing(name, COMPILER_PACKAGE, "iree.compiler does not import") from None
    try:
        return iree_find_tool(name)
    except ValueError as e:
        raise _missing(name, COMPILER_PACKAGE, str(e).splitlines()[0]) from None


def _runtime_tool(name: str) -> str:
    try:
        from iree._runtime import libs  # the runtime package's own trampoline (honours IREE_PY_RUNTIME)
    except ImportError:
        raise _missing(name, RUNTIME_PACKAGE, "iree._runtime does not import") from None
    path = Path(libs.library_path) / name
    if not (path.is_file() and os.access(path, os.X_OK)):
        raise _missing(name, RUNTIME_PACKAGE, f"no executable {path}")
    return str(path)


class ToolFailed(OpscopeError):
    """An IREE tool exited non-zero: `what` failed, with the tool's first error line (`first`)."""

    def __init__(self, what: str, first: str):
        self.what, self.first = what, first
        super().__init__(f"{what} failed: {first}")


def run_tool(argv: list[str], what: str) -> str:
    """Run IREE tool `argv[0]` (a name, found by `find_tool`) with the rest as arguments; its
    stdout, or its first error line as a one-line ToolFailed naming what failed."""
    proc = subprocess.run([find_tool(argv[0]), *argv[1:]], capture_output=True, text=True)
    if proc.returncode != 0:
        lines = (proc.stderr or proc.stdout).strip().splitlines()
        first = next((line for line in lines if "error" in line.lower()), lines[0] if lines else "no diagnostic")
        raise ToolFailed(what, first)
    return proc.stdout


_UNIT_US = {"ns": 1e-3, "us": 1.0, "ms": 1e3, "s": 1e6}


def benchmark_us(vmfb: Path, function: str, driver: str, options: list[str]) -> list[float]:
    """Microseconds per iteration of each repetition `iree-benchmark-module` reports for `function`
    of `vmfb` on `driver` (`options`: its inputs, batch size, repetitions or minimum time)."""
    argv = ["iree-benchmark-module", f"--module={vmfb}", f"--device={driver}", f"--function={function}"]
    stdout = run_tool([*argv, *options, "--benchmark_format=json"], f"benchmarking {function}")
    runs = [b for b in json.loads(stdout)["benchmarks"] if b.get("run_type", "iteration") == "iteration"]
    if not runs:
        raise OpscopeError(f"benchmarking {function}: iree-benchmark-module reported no runs")
    return [b["real_time"] * _UNIT_US[b.get("time_unit", "ns")] for b in runs]
