"""The measured-timing arithmetic (`opscope.act.timing`): the reference's eight tests (§3.16), as ours.

The arithmetic ones are exact; the probes are only checked to be plausible (they measure
this machine), on smaller buffers than the default to keep the test fast.
"""

from __future__ import annotations

import math

import pytest

from opscope.act.timing import (
    empirical_roofline,
    measure_bandwidth_gbps,
    measure_memcpy_gbps,
    median_ms,
    offload_roofline,
    region_pct,
)


def test_median_ms_is_positive_and_ignores_warmup():
    calls = []

    def work():
        calls.append(1)
        sum(range(20_000))

    ms = median_ms(work, warmup=3, runs=5)
    assert len(calls) == 8
    assert 0 < ms < 1e4 and math.isfinite(ms)
    assert median_ms(lambda: None, warmup=0, runs=0) >= 0  # at least one timed run


def test_bandwidth_probe_is_plausible():
    assert 1 < measure_bandwidth_gbps(mb=16, passes=4) < 100_000


def test_memcpy_probe_is_plausible():
    assert 1 < measure_memcpy_gbps(mb=16, passes=4) < 100_000


def test_empirical_roofline_arithmetic():
    r = empirical_roofline(100.0, 2e9, 8e9, 100.0)  # 2 GFLOP and 8 GB in 100 ms at a 100 GB/s peak
    assert r.achieved_gflops == pytest.approx(20.0)
    assert r.achieved_gbps == pytest.approx(80.0)
    assert r.bw_frac == pytest.approx(0.8)
    assert r.intensity == pytest.approx(0.25)
    assert r.bound == "bandwidth-bound (measured)"
    assert empirical_roofline(1.0, 1.0, 0.0, 0.0).intensity == 0.0  # no bytes, no peak: no division
    assert empirical_roofline(1.0, 1.0, 1.0, 0.0).bw_frac == 0.0


def test_empirical_roofline_compute_vs_latency():
    assert empirical_roofline(10.0, 1e12, 1e6, 100.0).bound == "compute-bound (measured)"
    assert empirical_roofline(1000.0, 10.0, 1e6, 100.0).bound == "latency/overhead-bound (measured)"


def test_region_pct_clamps():
    assert region_pct(5, 10) == 50.0
    assert region_pct(-1, 10) == 0.0
    assert region_pct(20, 10) == 100.0
    assert region_pct(1, 0) == 0.0


def test_offload_pays_when_device_is_faster():
    o = offload_roofline(100.0, 10.0, 1e9, 1e6, 10.0)  # 1 GB weights + 1 MB a step at 10 GB/s
    assert o.upload_ms == pytest.approx(100.0)
    assert o.transfer_ms == pytest.approx(0.1)
    assert o.device_step_ms == pytest.approx(10.1)
    assert o.steady_speedup > 9
    assert 1 < o.break_even_steps < 2


def test_offload_never_pays_when_device_slower():
    o = offload_roofline(10.0, 100.0, 1e9, 1e6, 10.0)
    assert o.steady_speedup < 1
    assert o.break_even_steps == math.inf


def test_timing_joins_every_dispatch_with_its_static_cost(capsys):
    """`opscope timing`: each dispatch the static view knows gets its measured roofline; the whole call too."""
    import json

    import opscope
    from opscope.analysis.dispatch import analyze_dispatches
    from opscope.cli import main
    from opscope.models.demo import mlp_module

    source = mlp_module(2, 64, 32)
    report = opscope.timing(source, repetitions=1)
    static = {d.name: d for d in analyze_dispatches(source).dispatches}
    timed = {d.name: d for d in report.dispatches}
    assert set(static) <= set(timed)
    for name, d in static.items():
        t = timed[name]
        assert (t.calls, t.flops, t.bytes) == (d.calls, d.flops, d.bytes_external)
        assert t.roofline is not None and t.roofline.achieved_gflops == pytest.approx(d.flops / (t.us * 1e3))
    assert report.call_ms > 0 and report.dispatch_ms > 0 and report.peak_gbps >= 1
    assert 0 < report.resident_ms and report.upload_ms == pytest.approx(max(report.call_ms - report.resident_ms, 0))
    assert "with its inputs already on the device" in report.text()
    assert main(["timing", source, "--repetitions", "1", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["schema"] == "opscope-timing/1" and {d["name"] for d in data["dispatches"]} >= set(static)
    assert data["resident_ms"] > 0
    assert main(["timing", source, "--repetitions", "0"]) == 1
    assert "repetitions must be >= 1" in capsys.readouterr().err
