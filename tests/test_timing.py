"""The measured-timing arithmetic (`opscope.act.timing`): the reference's eight tests (§3.16), as ours.

The arithmetic ones are exact; the probes are only checked to be plausible (they measure
this machine), on smaller buffers than the default to keep the test fast.
"""

from __future__ import annotations

import html
import math

import pytest

from opscope.act import timing
from opscope.act.timing import (
    empirical_roofline,
    measure_bandwidth_gbps,
    measure_memcpy_gbps,
    median_ms,
    offload_roofline,
    region_pct,
)
from tests.pictures import keep_file


def test_median_ms_is_positive_and_ignores_warmup():
    calls = []

    def work():
        calls.append(1)
        sum(range(20_000))

    ms = median_ms(work, warmup=3, runs=5)
    assert len(calls) == 8
    assert 0 < ms < 1e4 and math.isfinite(ms)
    assert median_ms(lambda: None, warmup=0, runs=0) >= 0  # at least one timed run


class ScriptedWork:
    """A call that takes a scripted time on a fake clock: the i-th call advances it by `durations[i]`
    seconds; `clock` is what `time.perf_counter` reads (each read logged with the calls made so far)."""

    def __init__(self, durations: list[float]):
        self.durations, self.now, self.calls, self.reads = list(durations), 1000.0, 0, []

    def __call__(self) -> None:
        self.now += self.durations[self.calls]
        self.calls += 1

    def clock(self) -> float:
        self.reads.append(self.calls)
        return self.now


def _scripted(monkeypatch, durations: list[float]) -> ScriptedWork:
    work = ScriptedWork(durations)
    monkeypatch.setattr(timing.time, "perf_counter", work.clock)
    return work


def test_median_ms_on_a_scripted_clock_is_the_median_of_the_timed_runs(monkeypatch):
    """Warmup calls of 10 s each (timed, they would dominate), then runs of 5, 1, 4, 2, 3 ms: the median
    is 3 ms (the minimum would be 1, the mean 3 too, so the even case below tells them apart)."""
    work = _scripted(monkeypatch, [10.0, 10.0] + [0.005, 0.001, 0.004, 0.002, 0.003])
    assert median_ms(work, warmup=2, runs=5) == pytest.approx(3.0, rel=1e-9)
    assert work.calls == 7
    assert work.reads == [2, 3, 3, 4, 4, 5, 5, 6, 6, 7]  # the clock is read around each timed call only


def test_median_ms_takes_the_upper_median_of_an_even_count(monkeypatch):
    """Runs of 8, 1, 2, 6 ms (sorted 1, 2, 6, 8): the upper median is 6 ms (the lower 2, their mean 4,
    the minimum 1, the mean of all 4.25)."""
    work = _scripted(monkeypatch, [0.5, 0.008, 0.001, 0.002, 0.006])
    assert median_ms(work, warmup=1, runs=4) == pytest.approx(6.0, rel=1e-9)
    assert work.calls == 5 and work.reads[0] == 1
    one = _scripted(monkeypatch, [0.007])
    assert median_ms(one, warmup=-3, runs=0) == pytest.approx(7.0, rel=1e-9)  # no warmup, one timed run
    assert one.calls == 1


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


def test_empirical_roofline_bounds_at_their_thresholds():
    """The classes' edges, in exact binary arithmetic (1 s, so GB/s is bytes / 1e9): exactly half the
    peak bandwidth is bandwidth-bound ("reaches half"), a byte less is not; an intensity exactly at the
    ridge is compute-bound, a little under it latency-bound."""
    assert empirical_roofline(1000.0, 0.0, 5e9, 10.0).bound == "bandwidth-bound (measured)"  # frac 0.5
    assert empirical_roofline(1000.0, 0.0, 5e9 - 1, 10.0).bound == "latency/overhead-bound (measured)"
    ridge = 8.0
    assert empirical_roofline(1000.0, ridge * 1e6, 1e6, 1e9, ridge).bound == "compute-bound (measured)"
    assert empirical_roofline(1000.0, ridge * 1e6 - 1, 1e6, 1e9, ridge).bound == "latency/overhead-bound (measured)"


def test_compute_bound_asks_for_half_the_measured_compute_ceiling():
    """With a measured compute ceiling, work above the ridge is compute-bound only at half of it or more
    (an H200's small dispatches: 1 % of IREE's f32 matmul rate, waiting on launches, not on compute)."""
    at_half = empirical_roofline(1000.0, 50e9, 1e6, 1e9, 8.0, peak_gflops=100.0)  # 50 GFLOP/s of 100
    assert at_half.flop_frac == pytest.approx(0.5) and at_half.bound == "compute-bound (measured)"
    below = empirical_roofline(1000.0, 50e9 - 1e3, 1e6, 1e9, 8.0, peak_gflops=100.0)
    assert below.bound == "latency/overhead-bound (measured)"
    assert empirical_roofline(1000.0, 1e9, 1e6, 1e9, 8.0).flop_frac is None  # none measured: the reference's rule


def test_empirical_roofline_compute_vs_latency():
    assert empirical_roofline(10.0, 1e12, 1e6, 100.0).bound == "compute-bound (measured)"
    assert empirical_roofline(1000.0, 10.0, 1e6, 100.0).bound == "latency/overhead-bound (measured)"


def test_region_pct_clamps():
    assert region_pct(5, 10) == 50.0
    assert region_pct(-1, 10) == 0.0
    assert region_pct(20, 10) == 100.0
    assert region_pct(1, 0) == 0.0


def test_region_times_attribute_each_call_and_share_the_weight_bytes():
    """Each call counts for the region of its op (its layer), shares are of the sums, clamped."""
    from opscope.act.timing import RegionTime, region_of, region_times

    names = ["model.layers.3.self_attn.q_proj", "layer0", "encoder.layer.0.attention.self", "embeddings.word", None]
    assert [region_of(n) for n in names] == ["model.layers.3", "layer0", "encoder.layer.0", "embeddings", "(no op)"]
    calls = [("h.0.attn", 1.0), ("h.0.mlp", 2.0), ("h.1.attn", 1.0), (None, 0.5), ("wte", 0.5)]
    weights = [("h.0.attn", 30), ("h.0.mlp", 50), ("h.1.attn", 20), ("wte", 0)]
    assert region_times(calls, weights) == [
        RegionTime("h.0", 3.0, 60.0, 80.0, 2),
        RegionTime("h.1", 1.0, 20.0, 20.0, 1),
        RegionTime("(no op)", 0.5, 10.0, 0.0, 1),
        RegionTime("wte", 0.5, 10.0, 0.0, 1),
    ]


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


def test_timing_joins_every_dispatch_with_its_static_cost(capsys, tmp_path):
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
    # every timed call in one region: the layer IREE formed it from, or (no op) for its relayouts
    assert {r.name for r in report.regions} <= {"fc0", "fc1", "(no op)"} and {"fc0", "fc1"} <= {
        r.name for r in report.regions
    }
    assert sum(r.ms for r in report.regions) == pytest.approx(report.dispatch_ms)
    assert sum(r.time_pct for r in report.regions) == pytest.approx(100.0)
    assert "regions (each dispatch call by the op it was formed from" in opscope.render(report)
    assert report.peak_gflops > 1 and report.ceilings.startswith("measured on llvm-cpu through IREE: streaming")
    assert f"ceilings: {report.ceilings}" in opscope.render(report)
    for d in report.dispatches:  # every bound class read against the measured ceilings
        if d.roofline is not None:
            assert d.roofline.flop_frac == pytest.approx(d.roofline.achieved_gflops / report.peak_gflops)
    assert 0 < report.resident_ms and report.upload_ms == pytest.approx(max(report.call_ms - report.resident_ms, 0))
    assert "with its inputs already on the device" in opscope.render(report)
    page = tmp_path / "timing.html"
    assert main(["timing", source, "--repetitions", "1", "--json", "--html", str(page)]) == 0
    data = json.loads(capsys.readouterr().out)
    assert html.escape(data["ceilings"]) in page.read_text()  # the page's ceilings are the report's
    keep_file(page, "timing")
    assert data["schema"] == "opscope-timing/1" and {d["name"] for d in data["dispatches"]} >= set(static)
    assert data["resident_ms"] > 0
    assert main(["timing", source, "--repetitions", "0"]) == 1
    assert "repetitions must be >= 1" in capsys.readouterr().err
