"""`opscope report RUN` and `render(report, "html")`: one self-contained page per report.

Without a browser: the page fetches nothing, the numbers it draws are the run's (checked
against the tidy table with numpy), the layer of a site is read from its name. In headless
Chromium (Debian's, driven by Playwright): each kind of page loads from disk with no console
error and no request, every chart draws points, the findings filter and sort; a screenshot of
each is saved under the test's tmp dir."""

from __future__ import annotations

import dataclasses
import json
import re
import shutil

import numpy as np
import pytest

import opscope
from opscope.html.page import DATA_ID
from opscope.mining.run_view import anchor, layer_of
from tests.pictures import keep

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.fixture(scope="module")
def digits_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("digits") / "run"
    opscope.profile("digits", steps=2, out=out)
    return out


@pytest.fixture(scope="module")
def builtin_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("builtin") / "run"
    opscope.profile(steps=2, out=out, taps="all")
    return out


def _charts(page: str) -> dict:
    data = re.search(rf'<script type="application/json" id="{DATA_ID}">(.*?)</script>', page, re.S).group(1)
    return json.loads(data.replace("<\\/", "</"))["charts"]


@pytest.mark.parametrize(
    "name, kind, layer",
    [
        ("model.layers.3.mlp.down_proj", "model.layers.#.mlp.down_proj", 3),
        ("/encoder/layer.0/attention/self/query/MatMul", "/encoder/layer.#/attention/self/query/MatMul", 0),
        ("layer11.attn.q", "layer#.attn.q", 11),
        ("h.2.attn.c_attn", "h.#.attn.c_attn", 2),
        ("conv2d", "conv2d", None),
        ("q_proj", "q_proj", None),
    ],
)
def test_a_sites_layer_is_the_first_number_ending_a_part_of_its_name(name, kind, layer):
    assert layer_of(name) == (kind, layer)


def test_the_page_fetches_nothing_and_draws_the_runs_numbers(digits_run):
    view = opscope.report(digits_run)
    page = opscope.render(view, "html")
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:|//)|<link\b|@import|url\(""", page)
    charts = _charts(page)
    df = opscope.read_sketches(digits_run)
    hist = df.filter((df["site"] == "fc1") & (df["role"] == "lhs") & (df["stat"] == "hist"))
    by_bin = {}
    for idx, v in hist.select("idx", "value").iter_rows():
        by_bin.setdefault(idx, []).append(v)
    expected = [float(np.mean(by_bin[i])) for i in sorted(by_bin)]
    drawn = [c["y"] for c in charts.values() if c["kind"] == "bars" and len(c["y"]) == 32]
    assert any(np.allclose(y, expected, rtol=1e-5) for y in drawn)  # the page rounds to 6 digits
    chan = df.filter((df["site"] == "fc2") & (df["role"] == "rhs") & (df["stat"] == "chan_maxabs"))
    peaks = {}
    for idx, v in chan.select("idx", "value").iter_rows():
        peaks[idx] = max(peaks.get(idx, 0.0), abs(v))
    peaks = [peaks[i] for i in sorted(peaks)]
    assert any(
        c["kind"] == "bars" and len(c["y"]) == len(peaks) and np.allclose(c["y"], peaks, rtol=1e-5)
        for c in charts.values()
    )
    assert view.hist_range == (-6.0, 6.0) and not view.notes  # the profile records its histogram range
    ranked = view.report.ranked
    for r in ranked.iter_rows(named=True):
        assert f'href="#{anchor(r["site"], r["role"])}"' in page and f'id="{anchor(r["site"], r["role"])}"' in page


def test_the_cli_writes_the_page_into_the_run_folder(digits_run, capsys):
    from opscope.cli import main

    assert main(["report", str(digits_run)]) == 0
    out = digits_run / "report.html"
    assert f"wrote {out}" in capsys.readouterr().out
    assert out.read_text().startswith("<!DOCTYPE html>")


def test_a_report_without_pictures_of_its_own_is_its_text_in_a_page():
    shapes = opscope.shapes("mlp", layers=2)
    page = opscope.render(shapes, "html", top=2)
    assert "<pre>" in page and "GEMM shapes" in page and not _charts(page)


@pytest.fixture(scope="module")
def browser():
    if CHROMIUM is None:
        pytest.skip("no chromium here (.ci/run installs Debian's)")
    sync_playwright = pytest.importorskip("playwright.sync_api").sync_playwright
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        yield b
        b.close()


def _open(browser, path, shot):
    """The page loaded from disk with every chart drawn: (page, console messages, page errors, requests)."""
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    console, errors, requests = [], [], []
    page.on("console", lambda m: console.append(f"{m.type}: {m.text}"))
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on("request", lambda r: requests.append(r.url))
    page.goto(path.as_uri())
    page.evaluate("window.opscopeDrawAll()")
    page.screenshot(path=shot, full_page=False)
    return page, console, errors, [u for u in requests if u != path.as_uri()]


@pytest.mark.parametrize("run", ["digits_run", "builtin_run"])
def test_each_page_renders_in_chromium_with_every_chart_drawn_and_nothing_fetched(run, browser, request, tmp_path):
    folder = request.getfixturevalue(run)
    html = tmp_path / "report.html"
    html.write_text(opscope.render(opscope.report(folder), "html"))
    page, console, errors, requests = _open(browser, html, tmp_path / "report.png")
    assert console == [] and errors == [] and requests == []
    figures = page.evaluate(
        "Array.from(document.querySelectorAll('figure.chart')).map(f => f.querySelectorAll('svg .pt').length)"
    )
    assert figures and all(n > 0 for n in figures)
    assert (tmp_path / "report.png").stat().st_size > 10_000
    if run == "builtin_run":  # the layers of the built-in transformer: a grid with a column per layer
        assert page.evaluate("document.body.textContent").count("layer#.attn.q · lhs") >= 1
        keep(page, "report-tensor", at="layer1.ffn.down · lhs")


def test_the_findings_filter_and_sort_in_chromium(digits_run, browser, tmp_path):
    html = tmp_path / "report.html"
    html.write_text(opscope.render(opscope.report(digits_run), "html"))
    page, *_ = _open(browser, html, tmp_path / "findings.png")
    rows = "document.querySelectorAll('section:nth-of-type(2) tbody tr')"
    total = page.evaluate(f"{rows}.length")
    assert total == opscope.report(digits_run).report.ranked.height >= 2
    page.fill("section:nth-of-type(2) p.filter input", "fc2")
    visible = page.evaluate(f"Array.from({rows}).filter(r => !r.hidden).map(r => r.cells[0].textContent)")
    assert visible == ["fc2"] * len(visible) and 1 <= len(visible) < total
    assert page.text_content("section:nth-of-type(2) span.shown") == f"{len(visible)} of {total}"
    page.fill("section:nth-of-type(2) p.filter input", "")
    page.click("section:nth-of-type(2) th:has-text('score')")  # ascending: the weakest finding first
    scores = page.evaluate(f"Array.from({rows}).map(r => parseFloat(r.cells[2].textContent))")
    assert scores == sorted(scores)


def _timing_report():
    from opscope.act.timing import TimedDispatch, TimingReport, empirical_roofline

    def dispatch(name, us, flops, nbytes):
        return TimedDispatch(name, 1, us, flops, nbytes, empirical_roofline(us / 1e3, flops, nbytes, 20.0))

    timed = [dispatch("matmul", 10.0, 2_000_000, 40_000), dispatch("add", 4.0, 10_000, 80_000)]
    dispatches = [*timed, TimedDispatch("enc", 1, None, None, None, None)]
    return TimingReport("m", "llvm-cpu", 20.0, dispatches, 0.02, peak_gflops=300.0, ceilings="measured (a test)")


def test_the_timing_page_is_a_roofline_of_the_reports_numbers():
    report = _timing_report()
    charts = _charts(opscope.render(report, "html"))
    (roofline,) = [c for c in charts.values() if c["kind"] == "scatter"]
    timed = [d for d in report.dispatches if d.roofline is not None]
    assert [(p["x"], p["y"]) for p in roofline["points"]] == [
        (pytest.approx(d.roofline.intensity), pytest.approx(d.roofline.achieved_gflops)) for d in timed
    ]
    (x0, y0), (x1, y1) = roofline["lines"][0]["points"]  # the measured bandwidth: GFLOP/s = GB/s × FLOP/B
    assert y0 == pytest.approx(20.0 * x0) and y1 == pytest.approx(20.0 * x1)
    (x2, y2), (_, y3) = roofline["lines"][1]["points"]  # the measured f32 matmul rate, from the ridge on
    assert (x1, y1) == (x2, y2) == (pytest.approx(300.0 / 20.0), 300.0) and y3 == 300.0
    given = dataclasses.replace(report, peak_gflops=None, ceilings="")  # none measured: the fastest dispatch
    (roofline,) = [c for c in _charts(opscope.render(given, "html")).values() if c["kind"] == "scatter"]
    assert roofline["lines"][1]["name"].startswith("fastest dispatch 200.0 GFLOP/s")


def test_every_report_command_writes_its_page_with_html(digits_run, tmp_path, capsys):
    from opscope.cli import main

    plain = main(["mine", str(digits_run)]), capsys.readouterr().out
    page = tmp_path / "mine.html"
    assert main(["mine", str(digits_run), "--html", str(page)]) == 0
    captured = capsys.readouterr()
    assert (0, captured.out) == plain  # stdout stays the report; the page is said on stderr
    assert f"wrote {page}" in captured.err and _charts(page.read_text())
    assert main(["shapes", "mlp", "--layers", "2", "--html", str(tmp_path / "shapes.html")]) == 0
    assert "<pre>" in (tmp_path / "shapes.html").read_text()
    with pytest.raises(SystemExit):
        main(["shapes", "mlp", "--html", str(tmp_path / "no" / "x.html")])
    assert "no folder" in capsys.readouterr().err


def _whatif_report():
    from opscope.act.whatif import Outcome, WhatIfReport

    def outcome(what, top1, flops):
        return Outcome(what, "", {"agreement": top1}, flops, 0, 100)  # a classifier's headline

    curve = [outcome("skip 1 block", 0.97, 90), outcome("skip 2 blocks", 0.9, 80)]
    sweep = [outcome("skip layers.1", 0.97, 90), outcome("skip layers.0", 0.8, 90)]
    return WhatIfReport(
        "m", "classifier", "llvm-cpu", "held out", {"agreement": 1.0}, 100, 0, 100, sweep=sweep, curve=curve
    )


def test_the_whatif_page_draws_the_skip_curve_from_the_reports_numbers():
    report = _whatif_report()
    charts = _charts(opscope.render(report, "html"))
    (curve,) = [c for c in charts.values() if c["kind"] == "scatter"]
    assert [(p["x"], p["y"]) for p in curve["points"]] == [(10.0, 0.97), (20.0, 0.9)]  # % FLOPs saved, agreement
    assert curve["lines"][0]["points"][0][1] == report.keep
    (sweep,) = [c for c in charts.values() if c["kind"] == "bars"]
    assert sweep["y"] == [0.97, 0.8]


@pytest.fixture(scope="module")
def layers_report():
    return opscope.plan_layers("digits", budget=0.5)


def test_the_layers_page_marks_the_chosen_option_of_each_layer(layers_report):
    charts = _charts(opscope.render(layers_report, "html"))
    options = next(c for c in charts.values() if c["kind"] == "scatter")
    marked = sorted(p["label"] for p in options["points"] if p["marked"])
    plan = layers_report.plan
    chosen = sorted(
        f"{p.name} {p.options[i].label}"
        for p, i in zip(layers_report.profiles, plan.choice)
        if p.options[i].rel_err > 0
    )
    assert marked == chosen


def _kernel_plan():
    from opscope.act.candidates import Guard, Proposal
    from opscope.act.site_bench import Measured
    from opscope.act.specialize import ACCEPT, Candidate, KernelPlan

    def candidate(site, estimated, original, rewritten, decision):
        proposal = Proposal(site, "skip-zero-channels", "skip", "", "zero channels", Guard("x", (0.1,), 0.0))
        return Candidate(proposal, estimated, Measured(original, rewritten), "bit-identical", 0.0, decision)

    candidates = [candidate("fc1", 1.5, 10.0, 8.0, ACCEPT), candidate("fc2", 1.2, 10.0, 11.0, "reject: slower")]
    return KernelPlan("run", "m", "llvm-cpu", 2, candidates)


def test_the_plan_page_puts_each_candidates_measured_speedup_beside_its_estimate():
    plan = _kernel_plan()
    (scatter,) = [c for c in _charts(opscope.render(plan, "html")).values() if c["kind"] == "scatter"]
    assert [(p["x"], p["y"], p["marked"]) for p in scatter["points"]] == [
        (1.5, pytest.approx(1.25), True),
        (1.2, pytest.approx(10 / 11, rel=1e-5), False),
    ]


@pytest.fixture(scope="module")
def live_run():
    return opscope.live(requests=40)


def test_the_live_page_draws_the_reports_recurrence(live_run):
    charts = _charts(opscope.render(live_run, "html"))
    sampled = next(c for c in charts.values() if c["kind"] == "bars")
    assert sampled["y"] == pytest.approx([s.sampled for s in live_run.report.sites], rel=1e-5)


def _parity_report():
    from opscope.act.op_compare import compare

    a = {f"x#{i}": np.full(4, i, np.float32) for i in range(4)}
    b = {**a, "x#2": np.array([2, 2, 2, 2.5], np.float32)}
    return compare(a, b, tol=1e-3)


def test_the_parity_page_marks_the_ops_beyond_the_tolerance():
    report = _parity_report()
    (errors,) = [c for c in _charts(opscope.render(report, "html")).values() if c["kind"] == "scatter"]
    assert [(p["x"], p["marked"]) for p in errors["points"]] == [(d.index, not d.within(1e-3)) for d in report.ops]
    assert [p["y"] for p in errors["points"] if p["marked"]] == [pytest.approx(0.25)]  # |2.5 − 2| / 2


def test_the_probe_page_draws_each_weights_errors():
    report = opscope.probe_tensors("digits")
    charts = list(_charts(opscope.render(report, "html")).values())
    assert charts[0]["x"] == list(report.probes) and charts[0]["y"] == pytest.approx(
        [p.int4_channel for p in report.probes.values()], rel=1e-5
    )


@pytest.mark.parametrize("which", ["timing", "whatif", "layers", "plan", "live", "parity", "probe"])
def test_the_act_pages_render_in_chromium(which, browser, request, tmp_path):
    made = {"timing": _timing_report, "whatif": _whatif_report, "plan": _kernel_plan, "parity": _parity_report}
    if which in made:
        report = made[which]()
    elif which == "probe":
        report = opscope.probe_tensors("digits")
    else:
        report = request.getfixturevalue("layers_report" if which == "layers" else "live_run")
    html = tmp_path / f"{which}.html"
    html.write_text(opscope.render(report, "html"))
    page, console, errors, requests = _open(browser, html, tmp_path / f"{which}.png")
    assert console == [] and errors == [] and requests == []
    figures = page.evaluate(
        "Array.from(document.querySelectorAll('figure.chart')).map(f => f.querySelectorAll('svg .pt').length)"
    )
    assert figures and all(n > 0 for n in figures)
    if which == "timing":
        assert sum(figures) == 2 + 2  # 2 timed dispatches on the roofline, 2 time bars
    if which in ("whatif", "layers", "plan"):
        keep(page, which)


@pytest.fixture(scope="module")
def minilm_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("minilm") / "run"
    opscope.profile("minilm", steps=1, out=out, taps="attention,routing,residual")  # what `opscope infer` taps
    return out


def test_a_minilm_infer_runs_page_lays_its_six_layers_and_twelve_heads_out(minilm_run, browser, tmp_path):
    """The trained MiniLM (6 layers, 12 heads): the grid's columns are its layers, the attention
    heatmaps have a row per head and a column per layer, and the page renders clean in Chromium."""
    view = opscope.report(minilm_run)
    layers = sorted({n for n in view.grid["layer"].to_list() if n is not None})
    assert layers == list(range(6))
    charts = _charts(opscope.render(view, "html"))
    heads = [c for c in charts.values() if c["kind"] == "heatmap" and c["rows"][0] == "head 0"]
    assert heads and all(len(c["rows"]) == 12 and c["cols"] == [str(n) for n in range(6)] for c in heads)
    entropy = heads[0]  # entropy first, then the top-10% mass
    frame = view.report.dynamics.heads
    first = frame.filter(frame["head"] == 0)["entropy"].to_list()  # the report's numbers, one source
    assert entropy["values"][0] == pytest.approx(first, rel=1e-5)
    html = tmp_path / "minilm.html"
    html.write_text(opscope.render(view, "html"))
    page, console, errors, requests = _open(browser, html, tmp_path / "minilm.png")
    assert console == [] and errors == [] and requests == []
    keep(page, "report-findings")
    keep(page, "report-layers", at="Across layers")
    keep(page, "report-attention", at="Inference dynamics")

    assert all(
        n > 0
        for n in page.evaluate(
            "Array.from(document.querySelectorAll('figure.chart')).map(f => f.querySelectorAll('svg .pt').length)"
        )
    )
