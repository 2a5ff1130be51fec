"""Compiled modules timed side by side on real inputs, by IREE's own benchmark tool.

`iree-benchmark-module` calls one function of a compiled module on inputs read from `.npy`
files, many times per repetition, and reports the time per call: no Python in the loop,
so a 20 µs site is not buried under the binding's call overhead. A and B variants are
benchmarked in alternating rounds (the machine's noise hits both alike) and each keeps its
minimum over rounds: the floor is what a rewrite changes; the spread is the machine's.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from opscope.errors import OpscopeError
from opscope.run.compile import CompiledModule
from opscope.run.parameters import parameter_flags

ROUNDS = 5
MIN_TIME_S = 0.1  # per repetition: iree-benchmark-module repeats the call until this much time has passed


@dataclass(frozen=True)
class CallTime:
    """One variant's calls: the minimum and median microseconds per call over the rounds."""

    min_us: float
    median_us: float
    rounds: int


def time_calls(
    variants: Sequence[CompiledModule],
    function: str,
    args: Sequence[np.ndarray],
    *,
    rounds: int = ROUNDS,
    progress: Callable[[str], None] | None = None,
) -> list[CallTime]:
    """Each compiled variant's time per call of `function` on `args`, measured in `rounds`
    alternating rounds (variant 0, 1, …, then again)."""
    if not variants:
        return []
    if rounds < 1:
        raise OpscopeError(f"rounds must be >= 1, got {rounds}")
    with tempfile.TemporaryDirectory(prefix="opscope-calls-") as tmp:
        root = Path(tmp)
        inputs = []
        for i, a in enumerate(args):
            path = root / f"arg{i}.npy"
            np.save(path, np.ascontiguousarray(a))
            inputs.append(f"--input=@{path}")
        files = []
        for i, v in enumerate(variants):
            path = root / f"variant{i}.vmfb"
            path.write_bytes(v.vmfb)
            files.append(path)
        times: list[list[float]] = [[] for _ in variants]
        for r in range(rounds):
            if progress is not None:
                progress(f"round {r + 1}/{rounds}")
            for i, (v, path) in enumerate(zip(variants, files)):
                times[i].append(_benchmark(path, function, v.target.driver, [*parameter_flags(v.parameters), *inputs]))
    return [CallTime(min(t), sorted(t)[len(t) // 2], len(t)) for t in times]


def _benchmark(vmfb: Path, function: str, driver: str, inputs: list[str]) -> float:
    """Microseconds per call of one `iree-benchmark-module` repetition (`inputs`: its `--input`s,
    after the `--parameters` of a module whose weights are in a parameter file)."""
    from opscope.run.tools import benchmark_us

    return min(benchmark_us(vmfb, function, driver, [*inputs, f"--benchmark_min_time={MIN_TIME_S}s"]))
