"""A `TimingReport` as Chrome trace-event JSON: the dispatches on a timeline Perfetto opens.

The trace-event format (the JSON object form, which Perfetto's UI and chrome://tracing both
load): one complete event (`"ph": "X"`) per timed dispatch, laid end to end in the report's
dispatch order on one track, `ts` the sum of the durations before it and `dur` its measured
time per call (`TimedDispatch.us`, µs, the trace format's unit); its FLOPs, bytes, calls per
model call and, where both are known, achieved GFLOP/s, GB/s, FLOP/byte and bound as `args`.
A counter track (`"ph": "C"`, "achieved GFLOP/s") steps to each dispatch's achieved rate at
its start (0 where its FLOPs are unknown) and back to 0 after the last. Each dispatch appears
once: a dispatch a model call runs `calls` times says so in its args. Dispatches IREE could
not time have no duration and no event; `otherData` lists them with why, beside the model,
target, whole-call time and measured bandwidth. Every number is the report's.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

from opscope.errors import OpscopeError

if TYPE_CHECKING:
    from opscope.act.timing import TimingReport

PID, TID = 1, 1
COUNTER = "achieved GFLOP/s"


def trace_events(report: TimingReport) -> dict:
    """The report as a trace-event JSON object (see the module docstring)."""
    events: list[dict] = [
        {"name": "process_name", "ph": "M", "pid": PID, "args": {"name": f"{report.model} on {report.target}"}},
        {"name": "thread_name", "ph": "M", "pid": PID, "tid": TID, "args": {"name": "dispatches (one call each)"}},
    ]
    ts = 0.0
    for d in report.dispatches:
        if d.us is None:
            continue
        args: dict = {"calls": d.calls, "flops": d.flops, "bytes": d.bytes}
        r = d.roofline
        if r is not None:
            args |= {
                "gflops": r.achieved_gflops,
                "gbps": r.achieved_gbps,
                "intensity": r.intensity,
                "bound": r.bound,
            }
        if d.rebuilt is not None:
            args["rebuilt"] = d.rebuilt
        events.append({"name": d.name, "cat": "dispatch", "ph": "X", "ts": ts, "dur": d.us, "pid": PID, "tid": TID})
        events[-1]["args"] = args
        events.append(
            {
                "name": COUNTER,
                "ph": "C",
                "ts": ts,
                "pid": PID,
                "args": {"GFLOP/s": 0.0 if r is None else r.achieved_gflops},
            }
        )
        ts += d.us
    events.append({"name": COUNTER, "ph": "C", "ts": ts, "pid": PID, "args": {"GFLOP/s": 0.0}})
    return {
        "traceEvents": events,
        "displayTimeUnit": "ms",
        "otherData": {
            "schema": "opscope-trace/1",
            "model": report.model,
            "target": report.target,
            "call_ms": report.call_ms,
            "resident_ms": report.resident_ms,
            "dispatch_ms": report.dispatch_ms,
            "peak_gbps": report.peak_gbps,
            "peak_gflops": report.peak_gflops,
            "ceilings": report.ceilings,
            "untimed": {d.name: d.untimed for d in report.untimed},
        },
    }


def trace_path(path: str | Path) -> Path:
    """Where a trace may be written: any file path, not a folder (a one-line error)."""
    path = Path(path)
    if path.is_dir():
        raise OpscopeError(f"{path} is a folder: give a file for the trace, e.g. {path / 'trace.json'}")
    return path


def write_trace(report: TimingReport, path: str | Path) -> Path:
    """`trace_events(report)` written to `path` (its folder created)."""
    path = trace_path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(trace_events(report), allow_nan=False) + "\n")
    return path
