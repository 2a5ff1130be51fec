"""Live sampling: the reference's demo, exact counts, the sampler against the plain model and numpy,
merging, shares as Dask jobs (a worker killed mid-share), snapshots (tidy and sketch), drift, loads, and bad input.

Tolerances: HyperLogLog at p = 12 in its linear-counting range (under ~10,000 distinct) is within
1 % of the truth for these few distinct inputs; recurrence estimates are compared with the trace's
exact values within the errors stated per test.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time

import datasketches
import numpy as np
import pytest

import opscope
from opscope.drive.inputs import generate
from opscope.drive.live import LiveSampler
from opscope.drive.live_run import run_live
from opscope.drive.serve import serve, serve_jobs
from opscope.drive.trace import Trace, demo_trace, zipf_order
from opscope.errors import OpscopeError
from opscope.ir.arguments import arguments
from opscope.ir.loading import module_bytecode, new_context, parse_module
from opscope.ir.stat_config import StatConfig
from opscope.models.corpus import sentences
from opscope.models.demo import moe_module, transformer_module
from opscope.online.report import live_report
from opscope.online.snapshot import load, to_dict
from opscope.online.stream import StreamSketch, config_fields
from opscope.pipeline.textual import run_pipeline
from opscope.run.instrumented import InstrumentedModel


@pytest.fixture(scope="module")
def demo():
    """The reference's live demo model and trace, one sampler factory sharing its two builds."""
    module, trace = demo_trace()
    base = LiveSampler.build(module, 5, name="demo")
    return base, trace


def fresh(base: LiveSampler, every: int, **kw) -> LiveSampler:
    return LiveSampler(base.manifest, base.tapped, base.plain, every, name="demo", **kw)


def test_reference_demo_500_requests_pool_8_every_5():
    run = run_live()
    r = run.report
    assert (r.calls, r.samples, r.every) == (500, 100, 5)
    assert len(r.sites) == 4 and all(s.samples == 100 for s in r.sites)
    for s in r.sites:  # ≈ 8 distinct → recurrence ≈ 0.92, the reference's numbers
        assert abs(s.distinct - 8) < 0.1
        assert abs(s.sampled - 0.92) < 0.005
        assert abs(s.stream - 0.984) < 0.005
        assert s.verdict.startswith("memoize")
    assert run.truth() == {"stream": pytest.approx(0.984), "sampled": pytest.approx(0.92)}
    assert "memoize — inputs repeat" in opscope.render(run)


def test_reference_demo_on_vulkan(vulkan):
    """The same sketches from the device's own kernels (lavapipe here): the demo's numbers hold."""
    r = run_live(target=vulkan).report
    assert (r.calls, r.samples) == (500, 100)
    assert all(abs(s.distinct - 8) < 0.1 and abs(s.sampled - 0.92) < 0.005 for s in r.sites)


def test_sampled_and_plain_calls_return_the_models_results(demo):
    base, trace = demo
    s = fresh(base, 3)
    for inputs, label in list(trace.requests())[:9]:
        got = s(*inputs, label=label)
        want = base.plain.invoke(base.manifest.function, *inputs)
        assert len(got) == len(want) == base.manifest.num_original_results
        for g, w in zip(got, want):
            np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)
    assert (s.sketch.calls, s.sketch.samples) == (9, 3)  # calls 3, 6, 9


def test_tidy_snapshot_matches_numpy_on_the_sampled_inputs(demo, tmp_path):
    """fc0's lhs is the request itself: the CSV's max, min and mean of each period are numpy's over the
    period's sampled inputs (f32 tolerance)."""
    base, trace = demo
    csv = tmp_path / "live.csv"
    s = fresh(base, 5, csv=csv, snapshot_every=10)
    reqs = list(trace.requests())
    for inputs, label in reqs:
        s(*inputs, label=label)
    s.close()
    frame = opscope.read_sketches(csv)
    assert sorted(frame["step"].unique().to_list()) == list(range(10))  # 100 samples, 10 per snapshot
    sampled = [reqs[i][0][0] for i in range(4, 500, 5)]
    for step in (0, 9):
        xs = np.stack(sampled[10 * step : 10 * step + 10])
        rows = frame.filter((frame["site"] == "fc0") & (frame["role"] == "lhs") & (frame["step"] == step))
        value = {st: rows.filter(rows["stat"] == st)["value"][0] for st in ("max", "min", "mean")}
        assert value["max"] == pytest.approx(xs.max(axis=(1, 2)).max(), rel=1e-6)
        assert value["min"] == pytest.approx(xs.min(axis=(1, 2)).min(), rel=1e-6)
        assert value["mean"] == pytest.approx(xs.mean(axis=(1, 2)).mean(), abs=1e-5)
    report = opscope.mine(csv)
    assert "fc0" in opscope.render(report)


def test_more_roles_and_a_fixed_range_histogram_match_numpy(tmp_path):
    """`--roles lhs,out --hist-bins 8`: every site's out is sketched too, and fc0's lhs (the request
    itself) gets numpy's 8-bin histogram over [-6, 6], the period's mean over its sampled calls; the
    state keeps the config, and a sketch recorded with other settings refuses to merge with it."""
    module, trace = demo_trace()
    config = StatConfig.live().replace(roles=("lhs", "out"), hist_bins=8, hist_normalize=False)
    csv, state = tmp_path / "live.csv", tmp_path / "live.json"
    s = LiveSampler.build(module, 5, name="demo", config=config, csv=csv, state=state, snapshot_every=10)
    reqs = list(trace.requests())[:100]
    for inputs, label in reqs:
        s(*inputs, label=label)
    s.close()
    frame = opscope.read_sketches(csv)
    assert set(frame["role"].unique().to_list()) == {"lhs", "out"}
    assert sorted(frame.filter(frame["role"] == "out")["site"].unique().to_list()) == ["fc0", "fc1", "fc2", "fc3"]
    sampled = [reqs[i][0][0] for i in range(4, 100, 5)]
    for step in (0, 1):
        want = np.mean([np.histogram(x, bins=8, range=(-6.0, 6.0))[0] for x in sampled[10 * step : 10 * step + 10]], 0)
        rows = frame.filter(
            (frame["site"] == "fc0") & (frame["role"] == "lhs") & (frame["stat"] == "hist") & (frame["step"] == step)
        ).sort("idx")
        np.testing.assert_allclose(rows["value"].to_numpy(), want, rtol=1e-6)  # the CSV holds float32
    saved = load(state)
    assert saved.config["roles"] == ["lhs", "out"] and saved.config["hist_bins"] == 8
    with pytest.raises(OpscopeError, match=r"different sketch settings \(hist_bins, roles\)"):
        saved.merge(StreamSketch(5, config=config_fields(StatConfig.live())))
    with pytest.raises(OpscopeError, match="keep lhs among the roles"):
        LiveSampler.build(module, 5, config=StatConfig.live().replace(roles=("out",)))


def test_a_version_1_state_file_still_loads(demo, tmp_path):
    """Sketches saved before the config was kept (version 1) load, their config unknown."""
    from opscope.online.snapshot import from_dict

    base, trace = demo
    s = fresh(base, 5)
    for inputs, label in list(trace.requests())[:20]:
        s(*inputs, label=label)
    data = to_dict(s.sketch)
    assert data["version"] == 2
    data["version"] = 1
    del data["config"]
    old = from_dict(json.loads(json.dumps(data)))
    assert old.config is None and old.samples == 4
    assert old.merge(s.sketch).samples == 8


def test_concurrent_callers_count_exactly(demo):
    base, trace = demo
    s = fresh(base, 5)
    reqs = list(trace.requests())[:200]

    def worker(k: int) -> None:
        for inputs, label in reqs[k::4]:
            s(*inputs, label=label)

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert (s.sketch.calls, s.sketch.samples, s.sketch.fingerprinted) == (200, 40, 200)
    assert all(site.samples == 40 for site in s.sketch.sites.values())
    assert abs(s.sketch.inputs.estimate() - len({id(r[0]) for r in reqs})) < 0.1


def test_merge_of_two_halves_is_the_sketch_of_the_whole(demo):
    base, trace = demo
    reqs = list(trace.requests())
    whole, a, b = fresh(base, 5), fresh(base, 5), fresh(base, 5)
    for i, (inputs, label) in enumerate(reqs):
        whole(*inputs, label=label)
        (a if i < 250 else b)(*inputs, label=label)
    merged = a.sketch.merge(b.sketch)
    assert (merged.calls, merged.samples) == (whole.sketch.calls, whole.sketch.samples)
    assert merged.inputs == whole.sketch.inputs  # HyperLogLog registers: exactly the union's
    for name, site in whole.sketch.sites.items():
        assert merged.sites[name].distinct == site.distinct
        assert merged.sites[name].samples == site.samples
        assert merged.sites[name].values.n == site.values.n
    assert live_report(merged).sites[0].sampled == pytest.approx(live_report(whole.sketch).sites[0].sampled)
    with pytest.raises(OpscopeError, match="1 in 5 and 1 in 4"):
        a.sketch.merge(StreamSketch(4))


def test_sketch_snapshot_round_trips_and_corrupt_files_are_one_line_errors(demo, tmp_path):
    base, trace = demo
    s = fresh(base, 5, state=tmp_path / "state.json", snapshot_every=7)
    for inputs, label in trace.requests():
        s(*inputs, label=label)
    s.close()
    back = load(tmp_path / "state.json")
    assert live_report(back) == live_report(s.sketch)
    good = json.loads((tmp_path / "state.json").read_text())
    cases = {
        "truncated": (tmp_path / "state.json").read_text()[:200],
        "not json": "\x00garbage",
        "wrong format": json.dumps({**good, "format": "other"}),
        "bad base64": json.dumps({**good, "inputs": "!!!"}),
        "bad sketch": json.dumps({**good, "hot": "AAAA"}),
        "missing field": json.dumps({k: v for k, v in good.items() if k != "sites"}),
    }
    for what, text in cases.items():
        bad = tmp_path / f"{what.replace(' ', '_')}.json"
        bad.write_text(text)
        with pytest.raises(OpscopeError) as e:
            load(bad)
        assert "\n" not in str(e.value) and str(bad) in str(e.value), what
    with pytest.raises(OpscopeError, match="no live snapshot"):
        load(tmp_path / "missing.json")


def test_memory_is_constant_in_stream_length():
    """10x more sampled calls: the saved sketch grows by the KLL's logarithmic term only."""
    rng = np.random.default_rng(0)
    numel = {("s", "lhs"): 1024}
    sizes = []
    sk = StreamSketch(1)
    for total in (2000, 20000):
        while sk.calls < total:
            x = rng.standard_normal(16).astype(np.float32)
            sk.fold_call(int(rng.integers(0, 2**63)), f"request {sk.calls}")
            sk.fold_sample(
                {
                    ("s", "lhs", "elemsig"): x,
                    ("s", "lhs", "nnz"): np.array([1024.0]),
                    ("s", "lhs", "sumsq"): np.array([1024.0]),
                    ("s", "lhs", "min"): np.array([-3.0]),
                    ("s", "lhs", "max"): np.array([3.0]),
                },
                numel,
            )
        sizes.append(len(json.dumps(to_dict(sk))))
    assert len(sk.labels) <= 256 and len(sk.requests.items) == 32
    assert len(sk.sites["s"].drift.epochs) <= 32
    assert sizes[1] < 1.3 * sizes[0], sizes


def _rank_interval(data: np.ndarray, v: float) -> tuple[float, float]:
    """The normalized ranks v takes among `data`: (share below v, share at or below v)."""
    return float(np.mean(data < v)), float(np.mean(data <= v))


def test_report_quantiles_are_within_the_kll_rank_error_of_numpy():
    """1,200 sampled calls of 16 lhs elements (19,200 values, a shifting heavy-tailed mix, so the KLL
    sketch compacts many times). Each reported quantile q (`QUANTILES`) ranks within ε of q among the
    values that went in, ε = DataSketches' normalized rank error for k = KLL_K (single quantile, 99 %
    confidence: 1.33 % at k = 200), i.e. it lies between np.quantile at q − ε and q + ε. The same for
    the merge of two workers' halves (the second half drawn from another distribution)."""
    import datasketches

    from opscope.online.report import QUANTILES
    from opscope.online.site import KLL_K

    eps = datasketches.kll_floats_sketch.get_normalized_rank_error(KLL_K, False)
    assert 0.005 < eps < 0.02
    rng = np.random.default_rng(5)
    numel = {("s", "lhs"): 16}
    whole, halves, seen = StreamSketch(1), (StreamSketch(1), StreamSketch(1)), []
    for i in range(1200):
        x = (rng.standard_normal(16) if i < 600 else 3.0 + rng.standard_exponential(16) ** 2).astype(np.float32)
        seen.append(x)
        for sk in (whole, halves[i >= 600]):
            sk.fold_call(i)
            sk.fold_sample({("s", "lhs", "elemsig"): x}, numel)
    data = np.concatenate(seen).astype(np.float64)
    merged = halves[0].merge(halves[1])
    for sk in (whole, merged):
        (row,) = live_report(sk).sites
        assert len(row.quantiles) == len(QUANTILES) and list(row.quantiles) == sorted(row.quantiles)
        for q, v in zip(QUANTILES, row.quantiles):
            below, at_or_below = _rank_interval(data, v)
            assert below - eps <= q <= at_or_below + eps, (q, v, below, at_or_below, eps)
            lo, hi = np.quantile(data, [max(q - eps, 0.0), min(q + eps, 1.0)])
            assert lo <= v <= hi, (q, v, lo, hi)
    # the median moved between the halves: a report of one half alone would be far off
    (first,) = live_report(halves[0]).sites
    assert _rank_interval(data, first.quantiles[1])[1] < 0.5 - 10 * eps


def test_drift_is_flagged_on_a_drifting_stream_and_not_on_a_stationary_one(demo):
    base, _ = demo
    rng = np.random.default_rng(1)
    steady, drifting = fresh(base, 2), fresh(base, 2)
    for t in range(400):
        x = rng.standard_normal((16, 64)).astype(np.float32)
        steady(x)
        drifting((x * (1.0 + 3.0 * t / 400)).astype(np.float32))
    assert all(d.verdict == "stable" for d in live_report(steady.sketch).drift)
    moved = {d.site: d.verdict for d in live_report(drifting.sketch).drift}
    assert moved and all("rms" in v for v in moved.values()), moved


def test_attention_and_gate_loads_count_exactly():
    """Each query's (and each token's gate) probabilities sum to 1: the summed loads of n sampled calls
    are n·queries, whatever the inputs; the demo's top-2 mask (a router without a top-k op) sends
    each token to 2 experts: n·tokens·2."""
    seq = 8
    module = moe_module(1, 16, seq, experts=4, top_k=2)
    s = LiveSampler.build(module, 2, name="moe")
    for inputs in generate(arguments(parse_module(module, new_context(), "moe")), 10, 0):
        s(*inputs)
    loads = {k: v for site in s.sketch.sites.values() for k, v in site.loads.items()}
    assert set(loads) == {"attn/attn_krecv", "attn/attn_qmax", "gate/attn_krecv", "gate/attn_qmax", "route/route_load"}
    assert loads["attn/attn_krecv"].shape == (seq,) and loads["gate/attn_krecv"].shape == (4,)
    assert loads["attn/attn_krecv"].sum() == pytest.approx(5 * seq, rel=1e-5)
    assert loads["gate/attn_krecv"].sum() == pytest.approx(5 * seq, rel=1e-5)
    assert loads["route/route_load"].sum() == 5 * seq * 2  # the top-2 mask's tokens: 2 experts each
    summaries = " ".join(ld.summary for ld in live_report(s.sketch).loads)
    assert "keys take" in summaries and "gate probability: hottest expert" in summaries


def test_routing_loads_count_exactly_on_mixtral():
    """Mixtral-tiny routes each of its 8 tokens to 2 of 4 experts: 10 sampled calls route 160 picks per layer."""
    pytest.importorskip("transformers")
    run = run_live("mixtral-tiny", requests=40, pool=8, every=4)
    routed = [v for site in run.served.sketch.sites.values() for k, v in site.loads.items() if k.endswith("route_load")]
    assert len(routed) == 2 and all(v.sum() == 10 * 8 * 2 for v in routed)
    assert sum("routed tokens" in ld.summary for ld in run.report.loads) == 2


SHARED = 400  # requests of the Dask tests' trace: 200 a share, long enough to kill a worker mid-share


def _exact(sketch: StreamSketch) -> dict:
    """The sketch's JSON with what DataSketches draws at random or orders by history decoded: each
    KLL's retained items (its compactions draw random bits: the same two shares merged twice in one
    process differ there about 1 time in 4) become its n, min and max; the frequent inputs' bytes (their
    hash map's order) become their items and counts. Everything else, exactly."""
    d = to_dict(sketch)
    d["hot"] = sorted(sketch.hot.get_frequent_items(datasketches.frequent_items_error_type.NO_FALSE_NEGATIVES, 0))
    for name, site in sketch.sites.items():
        kll = site.values
        d["sites"][name]["values"] = (kll.n, kll.get_min_value(), kll.get_max_value()) if kll.n else (0,)
    return d


def assert_same_sketch(got: StreamSketch, want: StreamSketch) -> None:
    """`got` is `want`: exactly (`_exact`), and the report's value quantiles (from the KLLs) rank within
    twice the KLL's rank error of their level in `want`'s KLL; the rest of the report, exactly."""
    from opscope.online.report import QUANTILES
    from opscope.online.site import KLL_K

    assert _exact(got) == _exact(want)
    eps = datasketches.kll_floats_sketch.get_normalized_rank_error(KLL_K, False)
    report, reference = live_report(got).to_dict(), live_report(want).to_dict()
    for row, ref in zip(report["sites"], reference["sites"], strict=True):
        kll = want.sites[ref["site"]].values
        for q, v in zip(QUANTILES, row.pop("quantiles"), strict=True):
            assert abs(kll.get_rank(v) - q) <= 2 * eps, (ref["site"], q, v)
        ref.pop("quantiles")
    assert report == reference


@pytest.fixture(scope="module")
def shares_here(demo) -> StreamSketch:
    """What two shares must merge to: the demo's requests 0, 2, 4, ... and 1, 3, 5, ... of a trace of
    `SHARED`, each served by a fresh sampler in this process, merged in share order onto an empty sketch."""
    base, _ = demo
    _, trace = demo_trace(SHARED)
    merged = StreamSketch(5, config=base.sketch.config)
    for w in range(2):
        share = fresh(base, 5, sketch=StreamSketch(5, config=base.sketch.config))
        for inputs, label in trace.requests(w, 2):
            share(*inputs, label=label)
        merged = merged.merge(share.sketch)
    return merged


def test_two_shares_on_dask_merge_to_the_shares_served_here(cluster, shares_here):
    lines: list[str] = []
    run = run_live(requests=SHARED, workers=2, dask=cluster.scheduler_address, say=lines.append)
    assert_same_sketch(run.served.sketch, shares_here)
    assert (run.report.calls, run.report.samples) == (SHARED, SHARED // 5) and run.served.lost == 0
    assert [(w.worker, w.requests, w.calls_saved) for w in run.served.workers] == [(0, 200, 200), (1, 200, 200)]
    assert run.truth()["sampled"] == pytest.approx(run.report.sites[0].sampled, abs=0.005)
    assert run.served.sketch.config == config_fields(StatConfig.live())  # the shares' sketches say what they hold
    assert lines[0] == f"2 shares of {SHARED} requests on {cluster.scheduler_address} (2 workers)"
    assert len(lines) == 3 and lines[-1].startswith("2/2 jobs done, 0 running or queued, 0 failed; share ")
    assert run.to_dict()["lost_requests"] == 0 and len({w.job for w in run.served.workers}) == 2


def test_a_worker_killed_mid_share_loses_and_counts_twice_nothing(cluster, shares_here):
    """A worker SIGKILLed while it serves a share (as the first progress line arrives, once the
    scheduler has handed it a share): Dask serves that share again from its first request elsewhere,
    and the merged sketch is the one the shares served here merge to (`assert_same_sketch`)."""
    from distributed import Client

    killed: list[str] = []
    finished = threading.Event()
    with Client(cluster) as client:
        pids = client.run(os.getpid)  # worker address -> its process

        def kill_a_busy_worker() -> None:
            while not killed and not finished.is_set():
                busy = [address for address, keys in client.processing().items() if keys]
                if busy:
                    os.kill(pids[busy[0]], signal.SIGKILL)
                    killed.append(busy[0])
                time.sleep(0.005)

        watcher = threading.Thread(target=kill_a_busy_worker)

        def on_line(line: str) -> None:
            if watcher.ident is None:  # the first line: the shares are being handed out
                watcher.start()

        start = time.time()
        try:
            run = run_live(requests=SHARED, workers=2, dask=cluster.scheduler_address, say=on_line)
        finally:
            finished.set()
            watcher.join()
        handed = client.run_on_scheduler(_handed_out, start)  # job key -> times the scheduler handed it to a worker
    assert killed and sorted(handed.values()) == [1, 2]  # the busy worker's share was served again
    assert_same_sketch(run.served.sketch, shares_here)
    assert run.served.lost == 0 and run.report.calls == SHARED
    cluster.wait_for_workers(2)  # the nanny starts another worker for the next test


def _handed_out(since: float, dask_scheduler=None) -> dict[str, int]:
    """On the scheduler: how many times each task was handed to a worker (went to processing) since `since`."""
    went: dict[str, int] = {}
    for t in dask_scheduler.transition_log:
        if t.timestamp >= since and t.finish == "processing":
            went[t.key] = went.get(t.key, 0) + 1
    return went


def test_shares_map_the_parameter_file_the_builds_name(tmp_path, cluster):
    """A model whose weights live in a parameter file: each share's job loads both builds on that file
    (its path travels with the builds, not a copy of the weights) and together they count what one process does."""
    text, trace = demo_trace(requests=24, pool=4)
    module = parse_module(text, new_context())
    run_pipeline(module, f"externalize-weights{{path={tmp_path / 'w.irpa'} min-bytes=0}}")
    sampler = LiveSampler.build(module_bytecode(module), 4, name="demo")
    named = (("model", str(tmp_path / "w.irpa")),)
    assert sampler.tapped.compiled.parameters == sampler.plain.compiled.parameters == named
    served = serve_jobs(sampler, trace, 2, cluster.scheduler_address)
    assert served.lost == 0 and served.where == f"{cluster.scheduler_address} (2 workers)"
    alone = serve(LiveSampler(sampler.manifest, sampler.tapped, sampler.plain, 4, name="demo"), trace).sketch
    assert (served.sketch.calls, served.sketch.samples) == (alone.calls, alone.samples) == (24, 6)
    assert served.sketch.sites.keys() == alone.sites.keys()  # (shares sample other calls than one process)
    assert all(0.9 < site.distinct.estimate() < 4.1 for site in served.sketch.sites.values())  # of a pool of 4


def test_workers_without_dask_or_a_bad_dask_is_one_line_before_any_compile(monkeypatch):
    with pytest.raises(OpscopeError) as e:
        run_live(source="no-such-model.onnx", workers=2, dask="cluster")
    assert str(e.value).startswith("--dask expects local, local:N")
    monkeypatch.setitem(sys.modules, "distributed", None)  # `import distributed` raises ImportError
    with pytest.raises(OpscopeError) as e:
        run_live(source="no-such-model.onnx", workers=2)
    assert (
        str(e.value) == "live --workers 2 serves its shares as Dask jobs: pip install 'opscope[dask]' (or --workers 1)"
    )
    with pytest.raises(OpscopeError) as e:
        run_live(source="no-such-model.onnx", dask="local:2")
    assert str(e.value) == "--dask needs Dask: pip install 'opscope[dask]' (or run without --dask)"


def test_zipf_order_and_trace_truth():
    order = zipf_order(64, 5000, 1.1, seed=3)
    counts = np.bincount(order, minlength=64)
    assert counts[0] > counts[1] > counts[8] and counts.sum() == 5000
    assert np.array_equal(zipf_order(64, 100, 1.1, 3), zipf_order(64, 100, 1.1, 3))
    t = Trace([[np.zeros(1)]] * 3, ["a", "b", "c"], np.array([0, 1, 0, 2, 0, 1]), "")
    assert t.exact_recurrence() == pytest.approx(0.5)
    assert t.exact_sampled_recurrence(2) == pytest.approx(1 - 2 / 3)  # requests 2, 4, 6 → 1, 2, 1
    with pytest.raises(OpscopeError, match="Zipf"):
        zipf_order(4, 10, -1.0)


@pytest.mark.parametrize("every", [0, -3, 1.5, True])
def test_bad_every_is_refused_before_any_compile(every):
    with pytest.raises(OpscopeError, match="every must be an integer >= 1"):
        LiveSampler.build("this is not MLIR and is never parsed", every)


def test_a_build_without_lhs_fingerprints_is_refused():
    model = InstrumentedModel.build(transformer_module(1, 16, 8), config=StatConfig(roles=("rhs",)), taps=("matmul",))
    with pytest.raises(OpscopeError, match="elemsig"):
        LiveSampler.from_model(model, 4)


def test_cli_live_bad_input_is_one_line(tmp_path):
    existing = tmp_path / "x.csv"
    existing.write_text("keep me")
    for argv, needle in (
        (["--every", "0"], "every must be"),
        (["--csv", str(existing)], "exists"),
        (["--workers", "0"], "workers must be"),
        (["--dask", "cluster"], "--dask expects local, local:N"),
        (["--zipf", "-1"], "Zipf"),
        (["--parquet", str(tmp_path / "y.parquet")], "--csv too"),
        (["--roles", "out"], "keep lhs among the roles"),
        (["--roles", "lhs,grad"], "roles must be distinct names among lhs, rhs, out"),
        (["--hist-bins", "-1"], "hist_bins must be >= 0"),
    ):
        proc = subprocess.run([sys.executable, "-m", "opscope", "live", *argv], capture_output=True, text=True)
        assert proc.returncode == 1, argv
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("opscope: error:") and needle in lines[0], (argv, proc.stderr)
    assert existing.read_text() == "keep me"


def test_cli_live_demo_prints_the_report():
    proc = subprocess.run([sys.executable, "-m", "opscope", "live", "--json"], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["report"]["samples"] == 100 and out["truth"]["sampled"] == pytest.approx(0.92)


@pytest.fixture(scope="module")
def minilm_run():
    pytest.importorskip("transformers")
    return run_live("minilm", requests=480, pool=64, zipf=1.1, every=16, seed=7)


def test_minilm_zipf_recurrence_against_the_traces_truth(minilm_run):
    """MiniLM, 480 Zipf requests over 64 real sentences, 1 in 16 sampled (30 samples). Stated errors:
    the stream estimate within 0.02 of the exact stream recurrence on every site that tells the
    sentences apart (all but sites whose 16-element fingerprint aliases two sentences), and the
    reference's sampled recurrence within 0.05 of its exact value on the sampled calls."""
    run = minilm_run
    truth = run.truth()
    assert run.report.samples == 30
    assert abs(run.report.input_recurrence - truth["stream"]) < 0.01
    close = [s for s in run.report.sites if abs(s.stream - truth["stream"]) < 0.02]
    assert len(close) >= 0.9 * len(run.report.sites), [(s.site, s.stream) for s in run.report.sites]
    assert all(abs(s.sampled - truth["sampled"]) < 0.05 for s in close)
    assert run.report.hot[0].label == sentences(64)[0]  # Zipf rank 1: the first sentence of the pool


def test_zoo_batch_is_checked():
    pytest.importorskip("sklearn")
    from opscope.models.zoo import get_entry

    with pytest.raises(OpscopeError, match="batch must be >= 1"):
        get_entry("digits").build(1, batch=0)
    source, inputs, _, name = get_entry("digits").build(2, batch=1)
    assert [x[0].shape[0] for x in inputs] == [1, 1] and "1 image per step" in name


def test_cli_merges_saved_sketches(tmp_path):
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    for path, seed in ((a, 1), (b, 2)):
        run_live(requests=100, seed=seed, state=path)
    proc = subprocess.run(
        [sys.executable, "-m", "opscope", "live", "--merge", str(a), str(b), "--json"], capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert (out["calls"], out["samples"]) == (200, 40)
    (tmp_path / "bad.json").write_text("{")
    proc = subprocess.run(
        [sys.executable, "-m", "opscope", "live", "--merge", str(a), str(tmp_path / "bad.json")],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 1 and len(proc.stderr.strip().splitlines()) == 1 and "bad.json" in proc.stderr


def test_a_merge_shares_no_sketch_with_its_inputs(demo):
    base, trace = demo
    a, b = fresh(base, 5), fresh(base, 5)
    reqs = list(trace.requests())
    for inputs, label in reqs[:100]:
        a(*inputs, label=label)
    merged = a.sketch.merge(b.sketch)
    before = {name: (s.samples, s.values.n) for name, s in merged.sites.items()}
    for inputs, label in reqs[100:200]:
        a(*inputs, label=label)
    assert {name: (s.samples, s.values.n) for name, s in merged.sites.items()} == before
