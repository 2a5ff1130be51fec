"""Measured time of every dispatch of a module, with IREE's own per-dispatch benchmarks.

`iree-compile --iree-hal-dump-executable-benchmarks-to=DIR` writes, for each executable of
the compiled module, a standalone benchmark module that runs only that dispatch with its
real workgroup count and binding sizes (on zero-filled buffers). Each is compiled with
`iree-compile` and timed by `iree-benchmark-module --batch_size=N` (N dispatches per
iteration, the time reported per dispatch), `--benchmark_repetitions` times; the median
repetition is kept. No home-made timer around the whole call: the per-dispatch times are
what IREE's runtime measures for that dispatch alone, launch overhead included.
"""

from __future__ import annotations

import json
import re
import subprocess
import tempfile
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from iree.compiler import ir

from opscope.errors import OpscopeError
from opscope.ir.loading import module_bytecode
from opscope.run.compile import CompiledModule
from opscope.run.targets import Target, get_target, require_runnable

BATCH = 100  # dispatches per benchmark iteration: launch jitter averages out
REPETITIONS = 5
_UNIT_US = {"ns": 1e-3, "us": 1.0, "ms": 1e3, "s": 1e6}
_FUNC = re.compile(r"util\.func public @([\w$.-]+)\([^)]*\)[^\n]*iree\.benchmark = \"dispatch\"")
_DISPATCH = re.compile(r"stream\.cmd\.dispatch @([\w$.-]+)::")
ENCODING = "_encoding_"  # IREE's data-layout dispatches: weights passed as arguments are packed on every call
_NAME = re.compile(r"^module_(.+?)_(?:embedded_elf|vulkan|cuda|metal|rocm|system_elf)")


@dataclass(frozen=True)
class DispatchTime:
    """One dispatch's measured time: its executable's name (as the flow phase names it), the
    benchmark function, and the median over repetitions of the time per dispatch."""

    name: str
    function: str
    us: float | None  # None: IREE could not rebuild this dispatch's benchmark (`untimed` says why)
    repetitions: int
    calls: int | None = None  # per call of the module, counted in IREE's stream IR (set for `_encoding_N`
    # dispatches, which IREE adds to re-lay out arguments and which the static view cannot see)
    untimed: str | None = None  # why `us` is None: IREE's first error compiling the dumped benchmark


def time_dispatches(
    module: ir.Module | str | bytes,
    target: str | Target = "llvm-cpu",
    *,
    batch: int = BATCH,
    repetitions: int = REPETITIONS,
    progress: Callable[[str], None] | None = None,
) -> list[DispatchTime]:
    """The measured time of each dispatch of `module` on `target`, in the order IREE numbers them."""
    return timed_build(module, target, batch=batch, repetitions=repetitions, progress=progress)[0]


def timed_build(
    module: ir.Module | str | bytes,
    target: str | Target = "llvm-cpu",
    *,
    batch: int = BATCH,
    repetitions: int = REPETITIONS,
    progress: Callable[[str], None] | None = None,
) -> tuple[list[DispatchTime], CompiledModule]:
    """`time_dispatches`, and the module itself as the same `iree-compile` run built it (so timing the
    whole call does not compile it again)."""
    from iree.compiler.tools.binaries import find_tool

    tgt = target if isinstance(target, Target) else get_target(target)
    require_runnable(tgt)  # before anything compiles
    source = (
        module_bytecode(module)
        if isinstance(module, ir.Module)
        else (module.encode() if isinstance(module, str) else bytes(module))
    )
    with tempfile.TemporaryDirectory(prefix="opscope-dispatch-") as tmp:
        root = Path(tmp)
        (root / "module.mlirbc").write_bytes(source)
        run_tool(
            [
                find_tool("iree-compile"),
                str(root / "module.mlirbc"),
                *tgt.flags,
                f"--iree-hal-dump-executable-benchmarks-to={root / 'bench'}",
                "-o",
                str(root / "module.vmfb"),
            ],
            "compiling the module",
        )
        files = sorted((root / "bench").glob("*.mlir"), key=_order)
        if not files:
            raise OpscopeError("IREE wrote no dispatch benchmarks for this module (no dispatches to time)")
        out = []
        for i, path in enumerate(files):
            if progress is not None:
                progress(f"dispatch {i + 1}/{len(files)}: {path.stem}")
            text = path.read_text()
            found = _FUNC.search(text)
            if found is None:
                raise OpscopeError(f"{path.name}: no benchmark function in IREE's dispatch benchmark")
            vmfb = path.with_suffix(".vmfb")
            try:
                run_tool([find_tool("iree-compile"), str(path), "-o", str(vmfb)], f"compiling {path.name}")
            except ToolFailed as e:
                # IREE 3.13 cannot rebuild some of its own dumps (a transpose fused with a data-tiling
                # pack: "failed to build pass pipeline"); the rest of the module is still timed.
                why = e.first.replace(str(path), path.name)
                out.append(DispatchTime(_dispatch_name(path.stem), found.group(1), None, 0, untimed=why))
                continue
            us = _benchmark(vmfb, found.group(1), tgt.driver, batch, repetitions)
            out.append(DispatchTime(_dispatch_name(path.stem), found.group(1), us, repetitions))
        if any(t.name.startswith(ENCODING) for t in out):
            counts = _stream_calls(root / "module.mlirbc", tgt)
            out = [replace(t, calls=counts.get(t.name)) if t.name.startswith(ENCODING) else t for t in out]
        return out, CompiledModule((root / "module.vmfb").read_bytes(), tgt, tuple(tgt.flags))


def _stream_calls(source: Path, tgt: Target) -> dict[str, int]:
    """How often each executable is dispatched per call: `stream.cmd.dispatch @name` ops of the
    module compiled to IREE's stream phase (one more, partial compile)."""
    from iree.compiler.tools.binaries import find_tool

    text = run_tool(
        [
            find_tool("iree-compile"),
            str(source),
            *tgt.flags,
            "--compile-to=stream",
            # the dispatch ops are all it reads: weights printed in full would be the bulk of the text
            "--mlir-elide-resource-strings-if-larger=16",
            "--mlir-elide-elementsattrs-if-larger=16",
        ],
        "compiling the module to the stream phase",
    )
    return dict(Counter(_DISPATCH.findall(text)))


def _order(path: Path) -> tuple[int, str]:
    """Benchmark files in dispatch order (dispatch_10 after dispatch_9)."""
    m = re.search(r"dispatch_(\d+)", path.stem)
    return (int(m.group(1)) if m else -1, path.stem)


def _dispatch_name(stem: str) -> str:
    """`module_main_dispatch_3_embedded_elf_x86_64_benchmark` -> `main_dispatch_3` (the flow executable's name)."""
    m = _NAME.match(stem)
    return m.group(1) if m else stem


class ToolFailed(OpscopeError):
    """An IREE tool exited non-zero: `what` failed, with the tool's first error line (`first`)."""

    def __init__(self, what: str, first: str):
        self.what, self.first = what, first
        super().__init__(f"{what} failed: {first}")


def run_tool(argv: list[str], what: str) -> str:
    """Run an IREE tool; its first error line as a one-line ToolFailed naming `what` failed."""
    proc = subprocess.run(argv, capture_output=True, text=True)
    if proc.returncode != 0:
        lines = (proc.stderr or proc.stdout).strip().splitlines()
        first = next((line for line in lines if "error" in line.lower()), lines[0] if lines else "no diagnostic")
        raise ToolFailed(what, first)
    return proc.stdout


def benchmark_tool() -> str:
    """The `iree-benchmark-module` to run (the runtime package puts it on PATH next to iree-run-module)."""
    from iree.compiler.tools.binaries import find_tool

    try:
        return find_tool("iree-benchmark-module")
    except Exception:
        return "iree-benchmark-module"


def _benchmark(vmfb: Path, function: str, driver: str, batch: int, repetitions: int) -> float:
    """Median over repetitions of the microseconds per dispatch."""
    stdout = run_tool(
        [
            benchmark_tool(),
            f"--module={vmfb}",
            f"--device={driver}",
            f"--function={function}",
            f"--batch_size={batch}",
            f"--benchmark_repetitions={max(repetitions, 1)}",
            "--benchmark_format=json",
        ],
        f"benchmarking {function}",
    )
    runs = [b for b in json.loads(stdout)["benchmarks"] if b.get("run_type", "iteration") == "iteration"]
    if not runs:
        raise OpscopeError(f"benchmarking {function}: iree-benchmark-module reported no runs")
    times = sorted(b["real_time"] * _UNIT_US[b.get("time_unit", "ns")] for b in runs)
    return times[len(times) // 2]
