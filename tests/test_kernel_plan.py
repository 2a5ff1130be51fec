"""`opscope plan` on the digits run: the border-pixel channel skip proposed from the sketches,
measured on the outlined site, bit-identical, decided from the measurement; --apply writes a
module plain iree-compile builds; bad run folders are one-line errors.

The zero channels are checked against numpy: the pixels that are 0 in every image of the four
recorded batches. Timings are not asserted (the machine is shared): only that the decision
follows from them.
"""

from __future__ import annotations

import json
import subprocess

import numpy as np
import polars as pl
import pytest

import opscope
from opscope.act.candidates import STABLE_SIGMA, Guard, zero_channels
from opscope.act.specialize import MIN_SPEEDUP
from opscope.cli import main
from opscope.errors import OpscopeError
from opscope.models.demo import bias_mlp_module, matmul_module
from opscope.models.digits import BATCH, digits_batches
from opscope.run.targets import get_target
from opscope.run.tools import find_tool

STEPS = 4


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    return opscope.profile("digits", out=tmp_path_factory.mktemp("plan") / "run", steps=STEPS).out_dir


@pytest.fixture(scope="module")
def applied(run, tmp_path_factory):
    out = tmp_path_factory.mktemp("spec") / "specialized.mlir"
    # min_speedup 0: every bit-identical candidate is accepted, so --apply has rewrites to build
    return opscope.kernel_plan(run, apply=True, out=out, rounds=1, min_speedup=0.0), out


def test_run_folder_says_what_it_profiled(run):
    record = json.loads((run / "run.json").read_text())
    histogram = {"min": -6.0, "max": 6.0, "bins": 32}  # the pictures label the bins with it
    assert record == {
        "target": "llvm-cpu",
        "steps": STEPS,
        "dist": "digits",
        "source": "digits",
        "histogram": histogram,
    }


def test_zero_channels_are_numpy_count(run, applied):
    images = np.concatenate([b[0] for b in digits_batches(BATCH, STEPS)])
    per_step = images.reshape(STEPS, BATCH, -1)
    expected = tuple(int(i) for i in np.flatnonzero(np.abs(images).max(axis=0) == 0))
    tidy = opscope.read_sketches(run / "sketches.csv")
    skip, width, shares = zero_channels(tidy, "fc1")
    assert (skip, width) == (expected, 64)
    np.testing.assert_allclose(shares, [(np.abs(s).max(axis=0) == 0).mean() for s in per_step], rtol=1e-12)
    plan, _ = applied
    fc1 = next(c for c in plan.candidates if c.site == "fc1")
    assert fc1.kind == "skip-zero-channels" and f"{len(expected)} of 64" in fc1.proposal.why
    assert fc1.options == f'channels="{",".join(map(str, expected))}"'
    assert fc1.guard.sigma == pytest.approx(np.std(shares))
    assert fc1.estimated > 0


def test_every_candidate_is_measured_bit_identical(applied):
    plan, _ = applied
    assert {c.site for c in plan.candidates} >= {"fc1"}
    for c in plan.candidates:
        m = c.measured
        assert m.original_us > 0 and m.rewritten_us > 0 and m.unguarded_us > 0
        assert c.parity == "bit-identical" and c.accepted  # min_speedup 0: a bit-identical rewrite is taken
    assert all(c.kind == "skip-zero-channels" for c in plan.candidates)  # the digits' weights are arguments
    text = opscope.render(plan)
    assert "fc1" in text and "the guard (check, readback, branch) costs" in text


def _judged(exact: bool, parity: str, rel: float, floor: float, median: float) -> str:
    from opscope.act.candidates import Proposal
    from opscope.act.site_bench import Measured
    from opscope.act.specialize import Candidate, decide

    kind = "skip-zero-channels" if exact else "quantize-weight"
    p = Proposal("fc", kind, "x", "", "", Guard("p", (), 0.0))
    m = Measured(100.0, 100.0 / floor, None, 3, 100.0, 100.0 / median)
    return decide(Candidate(p, 1.0, m, parity, rel), MIN_SPEEDUP, 0.01)


def test_calibration_is_each_channels_largest_input_over_every_step(run):
    """`write_calibration`: fc1's lhs (the images) max|x| per pixel over the four recorded steps,
    as numpy takes it from the same images; fc2's is as wide as its K."""
    images = np.concatenate([b[0] for b in digits_batches(BATCH, STEPS)])
    path = opscope.write_calibration(run, run.parent / "cal.npz")
    with np.load(path) as cal:
        assert sorted(cal.files) == ["fc1", "fc2"]
        np.testing.assert_array_equal(cal["fc1"], np.abs(images).max(axis=0).astype(np.float32))
        assert cal["fc2"].shape == (64,) and cal["fc2"].dtype == np.float32 and cal["fc2"].max() > 0


def test_of_equally_fast_rewrites_the_one_that_loses_least_is_kept():
    """Within `min_speedup` of the fastest (noise), the smallest error wins; a clearly faster one wins outright."""
    from opscope.act.candidates import Proposal
    from opscope.act.site_bench import Measured
    from opscope.act.specialize import ACCEPT, Candidate, keep_fastest

    def cand(label, speedup, err):
        p = Proposal("fc", "quantize-weight", label, "", "", Guard("weights constant", (), 0.0))
        return Candidate(p, 1.0, Measured(100.0, 100.0 / speedup), "max |Δ| 1", err, ACCEPT)

    kept = keep_fastest([cand("W8A8", 2.00, 0.02), cand("W8A8 SQ 0.5", 1.97, 0.005), cand("W8A16", 1.2, 0.004)])
    assert [c.decision for c in kept] == [
        "accept, but W8A8 SQ 0.5 is as fast with less error (0.005)",
        ACCEPT,
        "accept, but W8A8 SQ 0.5 is faster (1.97×)",
    ]
    kept = keep_fastest([cand("W8A8", 2.5, 0.02), cand("W8A8 SQ 0.5", 1.97, 0.005)])
    assert [c.decision for c in kept] == [ACCEPT, "accept, but W8A8 is faster (2.50×)"]
    kept = keep_fastest([cand("W8A8", 2.5, 0.02), cand("W8A8 SQ 0.5", 1.97, 0.005)], min_speedup=0.0)
    assert kept[0].accepted  # min_speedup 0 (take anything): ties are exact ties


def test_the_decision_follows_the_measurement_and_the_promise():
    assert _judged(True, "bit-identical", 0.0, 1.5, 1.4) == "accept"
    assert _judged(True, "bit-identical", 0.0, 0.44, 0.5) == "no gain (measured 0.44×)"
    assert _judged(True, "bit-identical", 0.0, 1.2, 0.9) == "no gain (noisy: 1.20× at the floor, 0.90× at the median)"
    assert _judged(True, "max |Δ| 1e-07", 1e-9, 3.0, 3.0) == "reject: not bit-identical (max |Δ| 1e-07)"
    assert _judged(False, "max |Δ| 0.1", 0.005, 2.0, 2.0) == "accept"  # lossy within the bound
    assert _judged(False, "max |Δ| 0.4", 0.02, 2.0, 2.0) == "reject: error 0.02 > 0.01"


def test_apply_writes_a_module_plain_iree_compile_builds(applied, tmp_path):
    plan, out = applied
    assert plan.accepted and plan.applied.path == out
    body = out.read_text()
    assert body.count("scf.if") == len(plan.accepted)
    assert plan.applied.parity == "bit-identical" and plan.applied.steps == STEPS
    flags = list(get_target("llvm-cpu").flags)
    subprocess.run(
        [find_tool("iree-compile"), str(out), *flags, "-o", str(tmp_path / "m.vmfb")], check=True, capture_output=True
    )
    assert "whole model:" in opscope.render(plan)
    d = json.loads(opscope.render(plan, "json"))
    assert d["applied"]["path"] == str(out) and d["candidates"][0]["guard"]["stability"] in ("stable", "watch drift")
    assert d["candidates"][0]["pipeline"].startswith('skip-zero-channels{sites="^fc1$" channels=')


def test_guard_stability_threshold():
    assert Guard("p", (0.1, 0.1, 0.1), 0.0).stability == "stable"
    assert Guard("p", (0.0, 0.1, 0.05), STABLE_SIGMA).stability == "watch drift"
    assert Guard("p", (0.1, 0.1), 0.0).stability == "too few steps (2 < 3)"  # no verdict from two samples


def test_zero_channels_intersects_steps():
    rows = [(s, i, v) for s, vals in enumerate([[0, 0, 1, 0], [0, 1, 1, 0], [0, 0, 2, 0]]) for i, v in enumerate(vals)]
    tidy = pl.DataFrame(
        {
            "step": [r[0] for r in rows],
            "idx": [r[1] for r in rows],
            "value": [float(r[2]) for r in rows],
            "site": ["fc"] * len(rows),
            "role": ["lhs"] * len(rows),
            "stat": ["chan_maxabs"] * len(rows),
        }
    )
    skip, width, shares = zero_channels(tidy, "fc")
    assert skip == (0, 3) and width == 4 and shares == (0.75, 0.5, 0.75)
    assert zero_channels(tidy, "other") == ((), 0, ())


def test_bad_run_folders_are_one_line_errors(run, tmp_path, capsys):
    with pytest.raises(OpscopeError, match="no such run folder"):
        opscope.kernel_plan(tmp_path / "nope")
    with pytest.raises(OpscopeError, match="holds no sketches.csv"):
        opscope.kernel_plan(tmp_path)
    bare = tmp_path / "bare"
    bare.mkdir()
    (bare / "sketches.csv").write_bytes((run / "sketches.csv").read_bytes())
    with pytest.raises(OpscopeError, match="does not say which model it profiled"):
        opscope.kernel_plan(bare)
    with pytest.raises(OpscopeError, match=r"records sites the model lacks \(fc1, fc2\)"):
        opscope.kernel_plan(run, matmul_module(4, 8, 4))
    assert main(["plan", str(run), "-o", str(tmp_path / "x.mlir")]) == 1
    err = capsys.readouterr().err
    assert err.strip() == "opscope: error: -o is where --apply writes the specialized module: add --apply"


@pytest.fixture(scope="module")
def constant_run(tmp_path_factory):
    """A 2-layer MLP whose weights are constants (globals), profiled from its file."""
    folder = tmp_path_factory.mktemp("const")
    path = folder / "mlp.mlir"
    path.write_text(bias_mlp_module(2, 64, 16))
    return opscope.profile(str(path), out=folder / "run", steps=STEPS).out_dir


def test_constant_weights_get_lossy_candidates_judged_by_their_error(constant_run, tmp_path):
    """Every lossy candidate measured at its site; --apply under a quality budget (the model's
    outputs within 5 % relative L2 on its evaluation set) keeps one per site, and the quality it
    reports is numpy's relative L2 of the written module's outputs against the original's."""
    plan = opscope.kernel_plan(
        constant_run,
        rounds=1,
        min_speedup=0.0,
        kinds=["quantize-weight", "factor-weight"],
        apply=True,
        out=tmp_path / "q.mlir",
        quality="rel_l2_max<=0.05",
        max_error=0.03,  # given, it still holds under a budget: the static scale (8 % off on held-out step 0) is
    )  # rejected at its site, so which rewrite each site keeps (the fastest, timed once) cannot break the budget
    by = {(c.site, c.proposal.label): c for c in plan.candidates}
    smoothed = ("W8A8 SQ 0.5", "W8A8 SQ 0.8", "W8A8 static SQ 0.8")  # from the run's chan_maxabs
    assert set(by) == {(s, label) for s in ("fc0", "fc1") for label in ("W8A16", "W8A8", "low rank", *smoothed)}
    assert (constant_run / "calibration.npz").is_file()
    for site in ("fc0", "fc1"):
        w8 = by[site, "W8A16"]
        assert w8.parity.startswith("max |Δ|") and 0 < w8.rel_error < 0.02  # int8 per channel: ~0.5 % of the output
        assert by[site, "W8A8"].rel_error < 0.03
        for label in smoothed:  # measured on step 0, calibrated on steps 1-3 (held out from the measurement)
            assert by[site, label].rel_error > 0 and f'calibration="{constant_run}' in by[site, label].pipeline
        for label in smoothed[:2]:  # per-token scales hold on unseen data (no outliers here: no better than plain)
            assert by[site, label].rel_error < 0.05
        # a random 64x64 weight keeps 99 % of its energy only near full rank: no FLOPs to save, nothing rewritten
        assert by[site, "low rank"].decision == "no gain: the rank keeping 99 % of the energy saves no FLOPs"
        kept = [c for c in plan.candidates if c.site == site and c.accepted]
        assert len(kept) == 1  # one rewrite per site: the fastest accepted
        others = [c for c in plan.candidates if c.site == site and c.decision.startswith("accept, but")]
        assert all(kept[0].proposal.label in c.decision for c in others)
    a = plan.applied
    assert a.pipeline.count("quantize-weight") == 2 and a.parity.startswith("max |Δ|") and 0 < a.rel_error < 0.05
    assert "i8" in (tmp_path / "q.mlir").read_text()
    q = a.quality
    assert q["passed"] and q["lossy_kept"] == 2 and q["left_out"] == [] and q["builds"] == 1
    assert q["shared_examples"] == [4 * 16, 4 * 16]  # the run's generated inputs are the evaluation's: said
    text = opscope.render(plan)
    assert "quality budget rel_l2_max<=0.05 on 4 batches of" in text and "not held out: 64 of the run's 64" in text
    from opscope.act.evalset import eval_set

    batches = eval_set(str(constant_run.parent / "mlp.mlir")).batches
    built = [opscope.load(opscope.compile(m)) for m in (bias_mlp_module(2, 64, 16), (tmp_path / "q.mlir").read_text())]
    rel = []
    for batch in batches:
        want, got = (np.asarray(m.invoke("main", *batch)[0], np.float64) for m in built)
        rel.append(np.linalg.norm(got - want) / np.linalg.norm(want))
    assert q["metrics"]["rel_l2_max"] == pytest.approx(max(rel), rel=1e-5)

    # the specialized module profiled again: its integer sites tapped at lhs and out (the codes are
    # not), fc0's lhs the same input as the original run's, bit for bit (test_quantized_sites: numerics)
    assert main(["profile", str(tmp_path / "q.mlir"), "--steps", "1", "--out", str(tmp_path / "again")]) == 0
    again = opscope.read_sketches(tmp_path / "again" / "sketches.csv")
    first = opscope.read_sketches(constant_run / "sketches.csv").filter(pl.col("step") == 0)
    assert set(again.select("site", "role").unique().iter_rows()) == {
        (s, r) for s in ("fc0", "fc1") for r in ("lhs", "out")
    }
    lhs = [t.filter((pl.col("site") == "fc0") & (pl.col("role") == "lhs")).sort("stat", "idx") for t in (first, again)]
    assert lhs[0].height > 0 and lhs[0]["value"].to_list() == lhs[1]["value"].to_list()


def test_a_run_fed_text_is_planned_on_that_text(run, tmp_path, monkeypatch):
    """The sites are measured (and a quality budget's calibration examples compared) on what the run
    read: its text through its tokenizer, not the model's own inputs (before: the zoo's sentences)."""
    import shutil

    import opscope.drive.profile as profile_module

    folder = tmp_path / "text-run"
    shutil.copytree(run, folder)
    record = json.loads((folder / "run.json").read_text())
    (folder / "run.json").write_text(json.dumps({**record, "text": ["one sentence.", "two."], "tokenizer": "tok"}))
    seen = []

    def resolve(model, steps, inputs=None, text=None, tokenizer=None):
        seen.append((inputs, text, tokenizer))
        raise OpscopeError("stop here")

    monkeypatch.setattr(profile_module, "resolve_inputs", resolve)
    with pytest.raises(OpscopeError, match="stop here"):
        opscope.kernel_plan(folder)
    assert seen == [(None, ["one sentence.", "two."], "tok")]


def test_unknown_kind_is_a_one_line_error(run):
    with pytest.raises(OpscopeError, match="unknown candidate kind prune: choose from skip-zero-channels, "):
        opscope.kernel_plan(run, kinds=["prune"])


def test_repeated_inputs_get_a_memoized_site_bit_identical(tmp_path):
    """Steps a, a, b, a: 2 of 3 later steps repeat an earlier input (the miner's recur), at every site."""
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((2, 16, 64)).astype(np.float32)
    np.save(tmp_path / "x.npy", np.stack([a, a, b, a]))
    (tmp_path / "mlp.mlir").write_text(bias_mlp_module(2, 64, 16))
    run = opscope.profile(
        str(tmp_path / "mlp.mlir"), out=tmp_path / "run", steps=STEPS, inputs=str(tmp_path / "x.npy")
    ).out_dir
    assert json.loads((run / "run.json").read_text())["inputs"] == [str(tmp_path / "x.npy")]
    plan = opscope.kernel_plan(run, kinds=["memoize"], apply=True, min_speedup=0.0)
    assert [(c.site, c.kind) for c in plan.candidates] == [("fc0", "memoize"), ("fc1", "memoize")]
    for c in plan.candidates:
        assert c.proposal.repeat_rate == pytest.approx(2 / 3) and "2 of 3 steps" in c.proposal.why
        assert c.parity == "bit-identical" and c.accepted
        m = c.measured  # at the recorded rate: r·hit + (1 − r)·(call + hit) ≥ (1 − r)·call, all misses still call
        assert m.rewritten_us >= m.original_us / 3 and c.estimated == pytest.approx(3.0)
    assert plan.applied.pipeline == ""  # host-side: nothing to build into the module
    assert "memoize on the host (not an IR rewrite): opscope.act.memoize.memoize_site(model, 'fc0'" in opscope.render(
        plan
    )


def test_a_model_given_as_text_is_not_recorded_as_a_path(tmp_path):
    run = opscope.profile(matmul_module(8, 16, 4), out=tmp_path / "r", steps=1).out_dir
    assert "source" not in json.loads((run / "run.json").read_text())
    with pytest.raises(OpscopeError, match="does not say which model it profiled"):
        opscope.kernel_plan(run)
    plan = opscope.kernel_plan(run, matmul_module(8, 16, 4), rounds=1)  # given again: a plan (no candidate here)
    assert plan.candidates == [] and "no candidate" in opscope.render(plan)


def test_a_slower_whole_model_is_said_in_words(tmp_path):
    from opscope.act.site_bench import Measured
    from opscope.act.specialize import Applied, KernelPlan

    plan = KernelPlan(tmp_path, "m", "llvm-cpu", 4)
    plan.applied = Applied(None, "quantize-weight{bits=8}", Measured(164.2, 179.2), "max |Δ| 0.0003", 6.4e-5, 4)
    text = opscope.render(plan)
    assert "whole model: 164.2 µs → 179.2 µs (0.92×)" in text and "slower with them" in text
    plan.applied = Applied(None, "quantize-weight{bits=8}", Measured(179.2, 164.2), "bit-identical", 0.0, 4)
    assert "slower with them" not in opscope.render(plan)


def test_a_weight_on_the_lhs_gets_the_lossy_candidates():
    """W @ x (the weight the matmul's lhs, x the input) is proposed the same weight rewrites as x @ W;
    a product of two inputs gets none."""
    from opscope.act.candidates import LOSSY, propose
    from opscope.ir.loading import new_context, parse_module
    from opscope.ir.sites import find_sites

    text = """func.func @main(%x: tensor<8x3xf32>, %y: tensor<4x8xf32>) -> (tensor<4x3xf32>, tensor<4x3xf32>) {
      %w = arith.constant dense<[[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0], [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0],
                                 [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0], [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0]]> : tensor<4x8xf32>
      %z = arith.constant 0.0 : f32
      %e = tensor.empty() : tensor<4x3xf32>
      %c = linalg.fill ins(%z : f32) outs(%e : tensor<4x3xf32>) -> tensor<4x3xf32>
      %a = linalg.matmul ins(%w, %x : tensor<4x8xf32>, tensor<8x3xf32>) outs(%c : tensor<4x3xf32>) -> tensor<4x3xf32> loc("wx")
      %b = linalg.matmul ins(%y, %x : tensor<4x8xf32>, tensor<8x3xf32>) outs(%c : tensor<4x3xf32>) -> tensor<4x3xf32> loc("yx")
      return %a, %b : tensor<4x3xf32>, tensor<4x3xf32>
    }"""
    module = parse_module(text, new_context())  # kept alive: the sites point into it
    sites = {s.name: s for s in find_sites(module)}
    kinds = tuple({kind for kind, _ in LOSSY.values()})
    found = propose(None, sites, kinds)
    assert sorted(p.label for p in found if p.site == "wx") == sorted(LOSSY)
    assert not [p for p in found if p.site == "yx"]
