"""Measured time, and what it says: the empirical roofline, offload economics, region shares.

The reference's `timing` module (§3.16): a median timer, host copy-bandwidth probes (the
measured ceiling a memory-bound kernel can reach), the roofline of one measured run
(achieved GFLOP/s and GB/s, the share of the measured bandwidth, the bound class), when
moving a model to a device pays off, and a region's share of a whole call: each dispatch
call is attributed to the region (layer, block: `region_of`) of the op IREE formed it from
(the `flow.dispatch`'s location; executables shared by six layers are timed once and counted
per call), next to the region's share of the weight bytes. The static
cost of the same work (`opscope.analysis.cost`, per dispatch) supplies the FLOPs and
bytes; these functions turn a measured time into where the work sits on the roofline.
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field

import numpy as np

from opscope.analysis.roofline import DEFAULT_RIDGE
from opscope.errors import OpscopeError
from opscope.text.numbers import count, nbytes
from opscope.text.table import table

PROBE_MB = 96  # each buffer of a bandwidth probe: far beyond any last-level cache
PROBE_PASSES = 8  # best of
IMPLAUSIBLE_GBPS = 2000.0  # a host copy faster than 2 TB/s is a timer artefact: discarded
FLOOR_GBPS = 1.0
BANDWIDTH_BOUND = 0.5  # achieved / measured bandwidth at or above: bandwidth-bound
COMPUTE_BOUND = 0.5  # achieved / measured compute ceiling at or above (and above the ridge): compute-bound


def median_ms(fn: Callable[[], object], warmup: int = 1, runs: int = 5) -> float:
    """Run `fn` `warmup` times untimed, then max(runs, 1) times; the median (upper, as the reference) in ms."""
    for _ in range(max(warmup, 0)):
        fn()
    times = []
    for _ in range(max(runs, 1)):
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1e3)
    return sorted(times)[len(times) // 2]


def _copy_gbps(dtype: str, mb: int, passes: int) -> float:
    """Best-of-`passes` copy bandwidth (read + write bytes per second) between two `mb` MB buffers."""
    n = max(1, mb * 10**6 // np.dtype(dtype).itemsize)
    src = np.ones(n, dtype=dtype)
    dst = np.empty_like(src)
    best = 0.0
    for i in range(max(passes, 1)):
        src[i % n] += 1  # a fresh source each pass: nothing to reuse from the last copy
        start = time.perf_counter()
        np.copyto(dst, src)
        seconds = time.perf_counter() - start
        if dst[i % n] != src[i % n]:  # the copy must have happened (and cannot be skipped)
            raise RuntimeError("copy probe: destination does not hold the source")
        gbps = 2 * src.nbytes / max(seconds, 1e-12) / 1e9
        if gbps <= IMPLAUSIBLE_GBPS:
            best = max(best, gbps)
    return max(best, FLOOR_GBPS)


def measure_bandwidth_gbps(mb: int = PROBE_MB, passes: int = PROBE_PASSES) -> float:
    """Host memory bandwidth in GB/s: best f32 buffer copy (bytes read + written), floored at 1."""
    return _copy_gbps("float32", mb, passes)


def measure_memcpy_gbps(mb: int = PROBE_MB, passes: int = PROBE_PASSES) -> float:
    """Host memcpy bandwidth in GB/s over byte buffers (the host→device staging proxy), floored at 1."""
    return _copy_gbps("uint8", mb, passes)


@dataclass(frozen=True)
class Roofline:
    """Where one measured run sits: achieved rates, intensity, share of each measured ceiling, bound."""

    ms: float
    achieved_gflops: float
    achieved_gbps: float
    intensity: float  # FLOP per byte (0 when no bytes)
    bw_frac: float  # achieved / peak bandwidth (0 when the peak is unknown)
    bound: str
    flop_frac: float | None = None  # achieved / the measured compute ceiling (None: none measured)


def empirical_roofline(
    ms: float,
    flops: float,
    bytes_moved: float,
    peak_gbps: float,
    ridge: float = DEFAULT_RIDGE,
    peak_gflops: float | None = None,
) -> Roofline:
    """The measured roofline of work of `flops` and `bytes_moved` that took `ms`: bandwidth-bound when it
    reaches half the measured bandwidth, else compute-bound above the ridge, else latency/overhead-bound.
    With a measured compute ceiling (`peak_gflops`), compute-bound also asks for half of it: work that
    reaches half of neither ceiling is waiting on something else (launches, occupancy, overhead)."""
    seconds = max(ms / 1e3, 1e-12)
    gflops = flops / seconds / 1e9
    gbps = bytes_moved / seconds / 1e9
    frac = gbps / peak_gbps if peak_gbps > 0 else 0.0
    flop_frac = gflops / peak_gflops if peak_gflops else None
    intensity = flops / bytes_moved if bytes_moved else 0.0
    if frac >= BANDWIDTH_BOUND:
        bound = "bandwidth-bound (measured)"
    elif intensity >= ridge and (flop_frac is None or flop_frac >= COMPUTE_BOUND):
        bound = "compute-bound (measured)"
    else:
        bound = "latency/overhead-bound (measured)"
    return Roofline(ms, gflops, gbps, intensity, frac, bound, flop_frac)


@dataclass(frozen=True)
class OffloadRoofline:
    """Host step vs device step (compute + per-step transfer), the one-time weight upload, break-even."""

    host_step_ms: float
    device_step_ms: float
    upload_ms: float
    transfer_ms: float  # per step
    steady_speedup: float
    break_even_steps: float  # inf: the device never pays


def offload_roofline(
    host_step_ms: float, device_compute_ms: float, weight_bytes: float, per_step_bytes: float, transfer_gbps: float
) -> OffloadRoofline:
    """When moving the work to a device pays: per-step transfer and the weights' upload at `transfer_gbps`."""
    bytes_per_ms = max(transfer_gbps * 1e9, 1.0) / 1e3
    transfer = per_step_bytes / bytes_per_ms
    upload = weight_bytes / bytes_per_ms
    device_step = device_compute_ms + transfer
    speedup = host_step_ms / device_step if device_step > 0 else math.inf
    gain = host_step_ms - device_step
    break_even = upload / gain if gain > 0 else math.inf
    return OffloadRoofline(host_step_ms, device_step, upload, transfer, speedup, break_even)


def region_pct(region_ms: float, total_ms: float) -> float:
    """A region's share of the total in percent, clamped to [0, 100] (a differential attribution,
    full − without, can go negative or past the total on noise); 0 when the total is not positive."""
    if total_ms <= 0:
        return 0.0
    return min(max(100.0 * region_ms / total_ms, 0.0), 100.0)


@dataclass(frozen=True)
class RegionTime:
    """A region's time and its share of the time and of the weight bytes: time that follows the
    bytes says the region is memory-bound."""

    name: str
    ms: float
    time_pct: float
    byte_pct: float
    calls: int = 0  # dispatch calls attributed to it


_LAYER = re.compile(r"^(.*?(?:^|\.)[A-Za-z_]*\d+)(?:\.|$)")


def region_of(name: str | None) -> str:
    """The region a module path belongs to: up to its first numbered component (`model.layers.3`,
    `layer0`, `encoder.layer.0`), else its first component (`embeddings`); `(no op)` without one
    (a dispatch IREE added after forming them: a data-layout relayout)."""
    if not name:
        return "(no op)"
    found = _LAYER.match(name)
    return found.group(1) if found else name.split(".")[0]


def region_times(calls: Iterable[tuple[str | None, float]], weights: Iterable[tuple[str, int]]) -> list[RegionTime]:
    """Per region (`region_of`), in first-seen order: the measured time of the dispatch calls formed
    from its ops (`calls`: (module path, ms) per call), its share of their sum (`region_pct`), and its
    share of the weight bytes (`weights`: (module path, bytes) per op)."""
    ms: dict[str, float] = {}
    n: dict[str, int] = {}
    for name, t in calls:
        key = region_of(name)
        ms[key] = ms.get(key, 0.0) + t
        n[key] = n.get(key, 0) + 1
    by: dict[str, int] = {}
    for name, b in weights:
        by[region_of(name)] = by.get(region_of(name), 0) + b
    total_ms, total_bytes = sum(ms.values()), sum(by.values())
    return [
        RegionTime(key, ms[key], region_pct(ms[key], total_ms), region_pct(by.get(key, 0), total_bytes), n[key])
        for key in ms
    ]


# -- a module's dispatches, measured: the static per-dispatch cost joined with IREE's own times ----------------------


@dataclass(frozen=True)
class TimedDispatch:
    """One dispatch: its static cost per call, its measured time per call and where that puts it."""

    name: str
    calls: int | None  # per model call (a data-layout encoding: counted in IREE's stream IR; None: unknown)
    us: float | None  # None: IREE could not rebuild its benchmark, so it is not timed
    flops: int | None
    bytes: int | None  # to and from memory
    roofline: Roofline | None  # None when its FLOPs or bytes are unknown
    untimed: str | None = None  # why `us` is None (IREE's error rebuilding its benchmark)
    rebuilt: str | None = None  # how its benchmark was rebuilt when IREE's own dump did not compile


@dataclass
class TimingReport:
    """Every dispatch measured, the whole call measured, and how well the parts add up."""

    model: str
    target: str
    peak_gbps: float  # the bandwidth ceiling: the target's streaming dispatch, measured (`opscope.run.ceilings`)
    dispatches: list[TimedDispatch]
    call_ms: float  # the whole call, median, through the runtime: numpy inputs in, results back on the host
    resident_ms: float | None = None  # the same call with its inputs already on the device, results left there
    peak_gflops: float | None = None  # the compute ceiling: the target's f32 matmul, measured (None: not measured)
    ceilings: str = ""  # how the ceilings were measured, one line (empty: given by the caller)
    regions: list[RegionTime] = field(default_factory=list)  # time per named region (layer, block)

    @property
    def upload_ms(self) -> float | None:
        """What the whole call spends outside the device program: copying inputs in, results out."""
        return None if self.resident_ms is None else max(self.call_ms - self.resident_ms, 0.0)

    @property
    def dispatch_ms(self) -> float:
        """Σ calls × time over the timed dispatches (one whose calls are unknown: once)."""
        return sum((d.calls or 1) * d.us for d in self.dispatches if d.us is not None) / 1e3

    @property
    def untimed(self) -> list[TimedDispatch]:
        """The dispatches IREE could not rebuild a benchmark of (not in `dispatch_ms`)."""
        return [d for d in self.dispatches if d.us is None]

    def to_dict(self) -> dict:
        return {
            "schema": "opscope-timing/1",
            "model": self.model,
            "target": self.target,
            "peak_gbps": self.peak_gbps,
            "peak_gflops": self.peak_gflops,
            "ceilings": self.ceilings,
            "call_ms": self.call_ms,
            "resident_ms": self.resident_ms,
            "dispatch_ms": self.dispatch_ms,
            "regions": [asdict(r) for r in self.regions],
            "dispatches": [
                {
                    "name": d.name,
                    "calls": d.calls,
                    "us": d.us,
                    "flops": d.flops,
                    "bytes": d.bytes,
                    **({} if d.untimed is None else {"untimed": d.untimed}),
                    **({} if d.rebuilt is None else {"rebuilt": d.rebuilt}),
                    **(
                        {}
                        if d.roofline is None
                        else {
                            "gflops": d.roofline.achieved_gflops,
                            "gbps": d.roofline.achieved_gbps,
                            "bw_frac": d.roofline.bw_frac,
                            "flop_frac": d.roofline.flop_frac,
                            "intensity": d.roofline.intensity,
                            "bound": d.roofline.bound,
                        }
                    ),
                }
                for d in self.dispatches
            ],
        }


def timing_text(report: TimingReport) -> str:
    """The whole call's median time, then every dispatch: measured time, FLOP/s, bandwidth, its roofline bound."""

    resident = (
        ""
        if report.resident_ms is None
        else (
            f"; with its inputs already on the device {report.resident_ms:.3f} ms (Σ dispatches "
            f"{report.dispatch_ms / report.resident_ms:.0%} of that; copying inputs in and results out "
            f"{report.upload_ms:.3f} ms)"
        )
    )
    lines = [
        f"timing: {report.model} on {report.target}: whole call {report.call_ms:.3f} ms (median); Σ dispatches "
        f"{report.dispatch_ms:.3f} ms ({report.dispatch_ms / report.call_ms:.0%} of the call){resident}",
        f"ceilings: {report.ceilings or f'bandwidth {report.peak_gbps:.1f} GB/s (given)'}",
        "",
    ]
    head = ["dispatch", "calls", "µs/call", "FLOP", "bytes", "GFLOP/s", "GB/s", "of bw", "of mm", "FLOP/B", "bound"]
    rows = []
    for d in sorted(report.dispatches, key=lambda d: -(d.calls or 1) * (d.us or 0.0)):
        r = d.roofline
        rows.append(
            [
                d.name,
                "-" if d.calls is None else str(d.calls),
                "-" if d.us is None else f"{d.us:.2f}",
                "-" if d.flops is None else count(d.flops),
                "-" if d.bytes is None else nbytes(d.bytes),
                "-" if r is None else f"{r.achieved_gflops:.2f}",
                "-" if r is None else f"{r.achieved_gbps:.2f}",
                "-" if r is None else f"{r.bw_frac:.0%}",
                "-" if r is None or r.flop_frac is None else f"{r.flop_frac:.0%}",
                "-" if r is None else f"{r.intensity:.1f}",
                "-" if r is None else r.bound.replace(" (measured)", ""),
            ]
        )
    lines += table(head, rows, right=lambda i: i not in (0, 10), rule=True)
    if report.regions:
        lines += [
            "",
            "regions (each dispatch call by the op it was formed from; time that follows the weight bytes: memory-bound):",
        ]
        lines += table(
            ["region", "calls", "ms", "of time", "of weight bytes"],
            [[r.name, str(r.calls), f"{r.ms:.3f}", f"{r.time_pct:.1f}%", f"{r.byte_pct:.1f}%"] for r in report.regions],
            right=lambda i: i > 0,
            rule=True,
        )
    if report.untimed:
        lines += [
            "",
            f"not timed: {len(report.untimed)} dispatch{'es' * (len(report.untimed) > 1)} whose benchmark "
            "IREE could not rebuild from its own dump (left out of Σ dispatches):",
        ]
        lines += [f"  {d.name}: {d.untimed}" for d in report.untimed]
    rebuilt = [d for d in report.dispatches if d.rebuilt]
    if rebuilt:
        lines += [
            "",
            f"rebuilt: {len(rebuilt)} dispatch{'es' * (len(rebuilt) > 1)} whose benchmark IREE's own dump "
            "did not compile as written (timed, from the rebuilt benchmark):",
        ]
        lines += [f"  {d.name}: {d.rebuilt}" for d in rebuilt]
    return "\n".join(lines) + "\n"


def time_model(
    module,
    args: list[np.ndarray],
    *,
    name: str = "<model>",
    target: str = "llvm-cpu",
    repetitions: int = 5,
    peak_gbps: float | None = None,
    progress: Callable[[str], None] | None = None,
) -> TimingReport:
    """Time every dispatch of `module` (IREE's dispatch benchmarks) and the whole call on `args`, and put
    each dispatch on the roofline of the target's measured ceilings (`opscope.run.ceilings`; `peak_gbps`
    given: that bandwidth and the nominal ridge instead) with its static FLOPs and bytes
    (`opscope.analysis.dispatch`)."""
    from opscope.analysis.cost import analyze
    from opscope.analysis.dispatch import analyze_dispatches
    from opscope.ir.arguments import function_op, symbol_name
    from opscope.ir.loading import new_context, parse_module
    from opscope.run.ceilings import measure_ceilings
    from opscope.run.dispatch_timing import timed_build
    from opscope.run.runtime import load

    parsed = module if hasattr(module, "operation") else parse_module(module, new_context(), name)
    view = analyze_dispatches(parsed, target)
    static = {d.name: d for d in view.dispatches}
    times, compiled = timed_build(parsed, target, repetitions=repetitions, progress=progress)
    measured = measure_ceilings(target, progress) if peak_gbps is None else None
    peak, ridge, top, how = (
        (measured.gbps, measured.ridge, measured.gflops, measured.how)
        if measured is not None
        else (peak_gbps, DEFAULT_RIDGE, None, "")
    )
    timed = []
    for t in times:
        d = static.get(t.name)
        flops, moved = (d.flops, d.bytes_external) if d is not None else (None, None)
        roof = (
            empirical_roofline(t.us / 1e3, flops, moved, peak, ridge, top)
            if flops is not None and moved and t.us is not None
            else None
        )
        timed.append(
            TimedDispatch(t.name, d.calls if d is not None else t.calls, t.us, flops, moved, roof, t.untimed, t.rebuilt)
        )
    us = {t.name: t.us for t in times if t.us is not None}
    formed = {ex for ex, _ in view.calls}
    calls = [(src, us[ex] / 1e3) for ex, src in view.calls if ex in us]
    calls += [
        (None, t.us / 1e3) for t in times if t.us is not None and t.name not in formed for _ in range(t.calls or 1)
    ]
    regions = region_times(calls, [(c.name, c.bytes_weights or 0) for c in analyze(parsed).ops])
    loaded = load(compiled)
    function = symbol_name(function_op(parsed))
    call = median_ms(lambda: loaded.invoke(function, *args), warmup=2, runs=max(repetitions, 5))
    resident = _resident_ms(loaded, function, args, max(repetitions, 9))
    return TimingReport(name, target, peak, timed, call, resident, top, how, regions)


def _resident_ms(loaded, function: str, args: list[np.ndarray], runs: int) -> float:
    """The call with its inputs uploaded to the device once beforehand and its results left
    there, timed like the whole call (median through the runtime): what the dispatches add up
    to, without the host copies a whole call pays (weights passed as arguments are copied in
    on every call)."""
    import iree.runtime as rt

    on_device = [rt.asdevicearray(loaded.config.device, np.ascontiguousarray(a)) for a in args]
    return median_ms(lambda: loaded.invoke_raw(function, *on_device), warmup=2, runs=runs)  # returns when done


def time_source(
    source,
    *,
    target: str = "llvm-cpu",
    repetitions: int = 5,
    inputs=None,
    progress: Callable[[str], None] | None = None,
) -> TimingReport:
    """`time_model` on a model as a user names it (None: the built-in transformer) and its first
    input batch (its own, `inputs`, or generated); bad numbers and a target that cannot run here
    are refused before anything is imported."""
    from opscope.drive.profile import default_source, resolve_inputs
    from opscope.ir.loading import new_context, parse_module
    from opscope.models.source import open_model
    from opscope.run.targets import get_target, require_runnable

    if repetitions < 1:
        raise OpscopeError(f"repetitions must be >= 1, got {repetitions}")
    require_runnable(get_target(target))
    model = default_source(1) if source is None else open_model(source, 1, progress=progress)
    batches, _ = resolve_inputs(model, 1, inputs)
    module = (
        model.module if hasattr(model.module, "operation") else parse_module(model.module, new_context(), model.name)
    )
    return time_model(module, batches[0], name=model.name, target=target, repetitions=repetitions, progress=progress)
