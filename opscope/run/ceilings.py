"""The roofline's two ceilings, measured on the target itself through IREE.

A dispatch's place on the roofline is only as true as the ceilings it is drawn under. A
host-side probe (numpy copying a buffer on one thread) is neither the device a GPU target
runs on nor what IREE's many threads reach on a CPU (here: numpy 25 GB/s, IREE's
two-thread dispatch 42 GB/s). So both ceilings are measured the way the dispatches
themselves are (`opscope.run.dispatch_timing`: IREE's own per-dispatch benchmark):

* **bandwidth**: a streaming kernel `y = 2x` over STREAM_MB MB of f32 (read once, written
  once: far beyond any last-level cache), bytes read + written per second;
* **compute**: one f32 matmul, n × n × n, 2n³ FLOP per second, n by how fast the target
  usually is (MATMUL_N).

Both are what IREE's own code reaches on this target, not the device's datasheet peak, and
the reports say so: a dispatch at 100 % of them is as fast as IREE makes such work, and a
hand-written or vendor kernel may go further. On an NVIDIA H200 (2026-12-04, `sm_80` code),
IREE streamed 1,378 GB/s where PyTorch's own `y = 2x` over the same 256 MB reached 3,863, and
its f32 matmul ran 3,952 GFLOP/s where cuBLAS (TF32 off) ran 49,600; on that machine's 16 CPU
cores IREE streamed 223 GB/s and ran an f32 matmul at 1,245 GFLOP/s, where numpy's
one-thread copy (the host probe this replaced) reached 12 GB/s. Dispatches in bf16 or int8
can sit above the f32 line, and the benchmark's buffers are zero-filled.

Measured once per target per process (`measure_ceilings` keeps what it measured).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from opscope.errors import OpscopeError

STREAM_MB = 256  # each buffer of the streaming kernel
MATMUL_N = {"cuda": 4096, "hip": 4096, "metal": 2048, "local-task": 2048, "local-sync": 2048}
MATMUL_N_DEFAULT = 512  # vulkan: Mesa's lavapipe runs on the CPU and is slow; a real GPU reaches more
REPETITIONS = 3
MIN_TIME_S = 0.1  # each repetition runs at least this long (the probes' dispatches take milliseconds)


@dataclass(frozen=True)
class Ceilings:
    """A target's measured bandwidth and f32 matmul rate, and how each was measured."""

    target: str
    gbps: float
    gflops: float
    stream_bytes: int  # read + written by one streaming dispatch
    matmul_n: int

    @property
    def ridge(self) -> float:
        """The measured ridge: FLOP per byte where the two ceilings meet."""
        return self.gflops / self.gbps

    @property
    def how(self) -> str:
        """One line saying what was measured."""
        return (
            f"measured on {self.target} through IREE: streaming {self.stream_bytes / 1e6:,.0f} MB "
            f"{self.gbps:,.1f} GB/s, f32 matmul {self.matmul_n}³ {self.gflops:,.1f} GFLOP/s "
            f"(ridge {self.ridge:.1f} FLOP/B); what IREE's own code reaches here, not the device's datasheet peak"
        )


def stream_module(n: int) -> str:
    """`y = 2x` over n f32 values: one read and one write of each."""
    return f"""#map = affine_map<(d0) -> (d0)>
func.func @stream(%a: tensor<{n}xf32>) -> tensor<{n}xf32> {{
  %e = tensor.empty() : tensor<{n}xf32>
  %c = arith.constant 2.0 : f32
  %r = linalg.generic {{indexing_maps = [#map, #map], iterator_types = ["parallel"]}}
      ins(%a : tensor<{n}xf32>) outs(%e : tensor<{n}xf32>) {{
  ^bb0(%x: f32, %o: f32):
    %y = arith.mulf %x, %c : f32
    linalg.yield %y : f32
  }} -> tensor<{n}xf32>
  return %r : tensor<{n}xf32>
}}
"""


def matmul_module(n: int) -> str:
    """One n × n × n f32 matmul."""
    t = f"tensor<{n}x{n}xf32>"
    return f"""func.func @matmul(%a: {t}, %b: {t}) -> {t} {{
  %z = arith.constant 0.0 : f32
  %e = tensor.empty() : {t}
  %f = linalg.fill ins(%z : f32) outs(%e : {t}) -> {t}
  %r = linalg.matmul ins(%a, %b : {t}, {t}) outs(%f : {t}) -> {t}
  return %r : {t}
}}
"""


_MEASURED: dict[str, Ceilings] = {}


def measure_ceilings(target: str, progress: Callable[[str], None] | None = None) -> Ceilings:
    """`target`'s bandwidth and f32 matmul ceilings: each the median of IREE's own benchmark of the
    dispatch that matters (the matmul's output fill left out); measured once per process."""
    if target not in _MEASURED:
        _MEASURED[target] = _measure(target, progress)
    return _MEASURED[target]


def _measure(target: str, progress: Callable[[str], None] | None) -> Ceilings:
    from opscope.run.dispatch_timing import time_dispatches
    from opscope.run.targets import get_target

    tgt = get_target(target)
    n = STREAM_MB * 2**20 // 4
    m = MATMUL_N.get(tgt.driver, MATMUL_N_DEFAULT)
    if progress is not None:
        progress(f"measuring {target}'s ceilings: streaming {2 * STREAM_MB} MB, an f32 matmul {m}³")
    options = {"batch": 1, "repetitions": REPETITIONS, "min_time_s": MIN_TIME_S, "select": _not_encoding}
    stream = _slowest(time_dispatches(stream_module(n), tgt, **options))
    matmul = _slowest(time_dispatches(matmul_module(m), tgt, **options))
    return Ceilings(target, 2 * n * 4 / stream / 1e3, 2 * m**3 / matmul / 1e3, 2 * n * 4, m)


def _not_encoding(name: str) -> bool:
    """Whether a dispatch is the probe's own work, not IREE's re-layout of its arguments (`_encoding_N`)."""
    from opscope.run.dispatch_timing import ENCODING

    return not name.startswith(ENCODING)


def _slowest(times) -> float:
    """The time of the probe's main dispatch, µs: the slowest it timed (a matmul's output fill is quicker)."""
    timed = [t.us for t in times if t.us is not None]
    if not timed:
        raise OpscopeError(f"IREE could not time the ceiling probe: {times[0].untimed if times else 'no dispatch'}")
    return max(timed)
