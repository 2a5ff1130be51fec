"""Dispatch timelines for Perfetto (`opscope timing --trace`, `opscope.act.timeline`).

A hand-made `TimingReport` (a dispatch run twice per call, one IREE could not time, one without
FLOPs) gives one complete event per timed dispatch, end to end in the report's order, each with
the report's time, FLOPs and bytes, and the counter track of achieved GFLOP/s; a real timing of a
one-matmul module through the command line writes the trace beside the JSON report it matches.
"""

from __future__ import annotations

import json

import pytest

import opscope
from opscope.act.timeline import COUNTER, trace_events, write_trace
from opscope.act.timing import TimedDispatch, TimingReport, empirical_roofline
from tests.inprocess import opscope as cli

MATMUL = """func.func @main(%a: tensor<64x128xf32>, %b: tensor<128x32xf32>) -> tensor<64x32xf32> {
  %z = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<64x32xf32>
  %f = linalg.fill ins(%z : f32) outs(%e : tensor<64x32xf32>) -> tensor<64x32xf32>
  %r = linalg.matmul ins(%a, %b : tensor<64x128xf32>, tensor<128x32xf32>) outs(%f : tensor<64x32xf32>) -> tensor<64x32xf32>
  return %r : tensor<64x32xf32>
}
"""


def _report() -> TimingReport:
    roof = empirical_roofline(12.5 / 1e3, 1_000_000, 40_000, 20.0)
    return TimingReport(
        "m",
        "llvm-cpu",
        20.0,
        [
            TimedDispatch("main_dispatch_0", 2, 12.5, 1_000_000, 40_000, roof),
            TimedDispatch("main_dispatch_1", 1, None, 10, 10, None, untimed="x.mlir:1:1: error: no"),
            TimedDispatch("_encoding_0", 1, 3.25, None, None, None, rebuilt="configured anew"),
        ],
        call_ms=0.1,
        resident_ms=0.05,
    )


def test_one_event_per_timed_dispatch_with_the_reports_numbers(tmp_path):
    report = _report()
    path = write_trace(report, tmp_path / "deep" / "trace.json")
    trace = json.loads(path.read_text())
    assert trace == json.loads(json.dumps(trace_events(report)))
    spans = [e for e in trace["traceEvents"] if e["ph"] == "X"]
    timed = [d for d in report.dispatches if d.us is not None]
    assert [e["name"] for e in spans] == [d.name for d in timed]
    assert [e["dur"] for e in spans] == [d.us for d in timed]
    assert [e["ts"] for e in spans] == [0.0, 12.5]  # end to end, in the report's order
    assert [(e["args"]["flops"], e["args"]["bytes"], e["args"]["calls"]) for e in spans] == [
        (d.flops, d.bytes, d.calls) for d in timed
    ]
    assert spans[0]["args"]["gflops"] == report.dispatches[0].roofline.achieved_gflops == pytest.approx(80.0)
    assert "gflops" not in spans[1]["args"] and spans[1]["args"]["rebuilt"] == "configured anew"
    counter = [(e["ts"], e["args"]["GFLOP/s"]) for e in trace["traceEvents"] if e["ph"] == "C"]
    assert all(e["name"] == COUNTER for e in trace["traceEvents"] if e["ph"] == "C")
    assert counter == [(0.0, spans[0]["args"]["gflops"]), (12.5, 0.0), (15.75, 0.0)]
    assert trace["otherData"]["untimed"] == {"main_dispatch_1": "x.mlir:1:1: error: no"}
    assert trace["otherData"]["call_ms"] == 0.1 and trace["otherData"]["dispatch_ms"] == report.dispatch_ms


def test_timing_trace_from_the_command_line_matches_its_report(tmp_path):
    model = tmp_path / "mm.mlir"
    model.write_text(MATMUL)
    proc = cli("timing", str(model), "--repetitions", "1", "--trace", str(tmp_path / "t.json"), "--json")
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert f"opscope timing: wrote {tmp_path / 't.json'}: " in proc.stderr
    spans = [e for e in json.loads((tmp_path / "t.json").read_text())["traceEvents"] if e["ph"] == "X"]
    timed = [d for d in report["dispatches"] if d["us"] is not None]
    assert len(spans) == len(timed) >= 1
    assert [(e["name"], e["dur"], e["args"]["flops"], e["args"]["bytes"]) for e in spans] == [
        (d["name"], d["us"], d["flops"], d["bytes"]) for d in timed
    ]
    assert any(e["args"]["flops"] == 2 * 64 * 128 * 32 for e in spans)


def test_a_folder_for_the_trace_is_refused_before_timing(tmp_path):
    with pytest.raises(opscope.OpscopeError, match=r"is a folder: give a file for the trace, e.g. .*trace.json"):
        opscope.timing("no-such-model.onnx", trace=tmp_path)
