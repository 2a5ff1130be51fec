"""Residual-block skips and gates, and what-if measurements, against numpy and PyTorch.

A skip must compute what the model computes without the block: on hand-written IR against
numpy (bit for bit where the branch is exactly zero), on MiniLM against PyTorch with the
block's output zeroed by a forward hook, and with every block of a Llama skipped against its
embedding path. Gates of 1 must reproduce the original and gates of 0 the skip, bit for bit.
The quality metrics are checked against an independent float64 computation (scipy), and
the sweep's greedy answer against a build of the real skip. Tolerances are stated where used.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import opscope
from opscope.act.quality import compare, own, summary
from opscope.ir.loading import new_context, parse_module
from opscope.models.zoo import missing_extra, missing_message
from opscope.pipeline.textual import run_pipeline
from opscope.run.compile import compile_module
from opscope.run.runtime import load

needs_torch = pytest.mark.skipif(missing_extra("torch"), reason=missing_message("this test", "torch"))
LIT_BLOCKS = Path(__file__).resolve().parents[1] / "lit_tests" / "passes" / "skip-residual-blocks.mlir"
BIN = Path(sys.executable).parent
ENTRY_POINTS = {"opscope": [str(BIN / "opscope")], "python -m opscope": [sys.executable, "-m", "opscope"]}


def block_ir() -> str:
    """The attention + MLP layer of the skip pass's lit test (weights are arguments)."""
    return "\n".join(line for line in LIT_BLOCKS.read_text().splitlines() if not line.startswith("//"))


def build(source, pipeline: str = ""):
    """`source` rewritten by `pipeline`, compiled for llvm-cpu and loaded: a function of numpy inputs."""
    module = parse_module(source, new_context()) if isinstance(source, (str, bytes)) else source
    if pipeline:
        run_pipeline(module, pipeline)
    loaded = load(compile_module(module, "llvm-cpu"))
    return lambda *inputs: loaded.invoke(
        "attn_and_ffn" if "attn_and_ffn" in loaded.function_names() else "main", *inputs
    )


def layer_inputs(seed: int = 0, zero_ffn: bool = False) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    h, wq, wk = (rng.standard_normal(s).astype(np.float32) for s in ((8, 16), (16, 16), (16, 16)))
    w3, w4 = rng.standard_normal((16, 32)).astype(np.float32), rng.standard_normal((32, 16)).astype(np.float32)
    return [h, wq, wk, w3, np.zeros_like(w4) if zero_ffn else w4]


def numpy_layer(h, wq, wk, w3, w4, attn: bool = True, ffn: bool = True) -> np.ndarray:
    """The lit layer in float64: h1 = h + softmax(q·kᵀ)·h, out = h1 + (h1·w3)·w4, blocks optional."""
    h = h.astype(np.float64)
    h1 = h
    if attn:
        s = (h @ wq) @ (h @ wk).T
        p = np.exp(s - s.max(axis=1, keepdims=True))
        h1 = h + (p / p.sum(axis=1, keepdims=True)) @ h
    return h1 + (h1 @ w3) @ w4 if ffn else h1


def test_skipping_a_block_whose_branch_is_zero_changes_nothing():
    inputs = layer_inputs(zero_ffn=True)  # the MLP's down projection is 0: its output is exactly 0
    original = build(block_ir())(*inputs)[0]
    skipped = build(block_ir(), "skip-residual-blocks{blocks=layers.0.ffn}")(*inputs)[0]
    assert np.array_equal(original, skipped)


@pytest.mark.parametrize(
    "blocks, attn, ffn", [("layers.0.attn", False, True), ("1", True, False), ('"0,1"', False, False)]
)
def test_skips_compute_the_model_without_the_block(blocks, attn, ffn):
    inputs = layer_inputs(1)
    got = build(block_ir(), f"skip-residual-blocks{{blocks={blocks}}}")(*inputs)[0]
    want = numpy_layer(*inputs, attn=attn, ffn=ffn)
    full = numpy_layer(*inputs)
    assert np.abs(got - want).max() <= 1e-4 * np.abs(want).max()  # f32 device vs float64
    assert np.abs(got - full).max() > 1e-2 * np.abs(full).max()  # the block mattered: the check can fail


def test_gates_of_one_are_the_original_and_gates_of_zero_the_skip():
    inputs = layer_inputs(2)
    gated = build(block_ir(), "gate-residual-blocks")
    assert np.array_equal(gated(*inputs, np.ones(2, np.float32))[0], build(block_ir())(*inputs)[0])
    for gates, blocks in (([0, 1], "0"), ([1, 0], "1"), ([0, 0], '"0,1"')):
        skipped = build(block_ir(), f"skip-residual-blocks{{blocks={blocks}}}")(*inputs)[0]
        assert np.array_equal(gated(*inputs, np.array(gates, np.float32))[0], skipped), gates


def test_bad_block_selections_are_one_line_errors_naming_the_valid_blocks():
    from opscope.errors import OpscopeError

    for pipeline in ("skip-residual-blocks{blocks=layers.3.ffn}", "gate-residual-blocks{blocks=7}"):
        with pytest.raises(
            OpscopeError,
            match=r"no residual block '(layers\.3\.ffn|7)' in this module \(valid: "
            r"layers\.0\.attn, layers\.0\.ffn, or their ordinals 0\.\.1\)$",
        ):
            run_pipeline(parse_module(block_ir(), new_context()), pipeline)


# -- real models against PyTorch -------------------------------------------------------------------
@needs_torch
def test_skipped_minilm_blocks_match_pytorch_with_the_blocks_zeroed():
    import torch

    from opscope.importers.torch_fx import import_torch
    from opscope.models.huggingface import minilm

    model, enc = minilm()
    model.encoder.layer = model.encoder.layer[:3]  # its first 3 of 6 layers: the compile of all 6 is the cost
    kwargs = {k: enc[k] for k in ("input_ids", "attention_mask")}
    module = import_torch(model, (), example_kwargs=kwargs)
    skipped = ("encoder.layer.1.attention.output.attn", "encoder.layer.2.output.ffn")
    run_pipeline(module, 'skip-residual-blocks{blocks="' + ",".join(skipped) + '"}')
    got = build(module)(*(kwargs[k].numpy() for k in ("input_ids", "attention_mask")))[0]
    with torch.no_grad():
        full = model(**kwargs)[0].numpy()

        def zero(mod, args, out):  # the block adds nothing: h + 0 = h
            return torch.zeros_like(out)

        hooks = [
            model.get_submodule(p).register_forward_hook(zero)
            for p in ("encoder.layer.1.attention.output.dense", "encoder.layer.2.output.dense")
        ]
        want = model(**kwargs)[0].numpy()
        for hook in hooks:
            hook.remove()
    assert np.abs(got - want).max() < 1e-4  # layer-normed hidden states, |x| ~ 1
    assert np.abs(want - full).max() > 0.1  # the skip changed the output: the comparison is not vacuous


@needs_torch
def test_skipping_every_llama_block_leaves_the_embedding_path():
    import torch

    from opscope.importers.torch_fx import import_torch
    from opscope.models.huggingface import tiny_llama

    model, enc = tiny_llama(batch=2)
    kwargs = {"input_ids": enc["input_ids"], "attention_mask": torch.ones_like(enc["input_ids"])}
    module = import_torch(model, (), example_kwargs=kwargs)
    run_pipeline(module, "skip-residual-blocks{blocks=*}")
    names = {op.name for op in module.body.operations[0].regions[0].blocks[0].operations}
    assert "linalg.softmax" not in names
    got = build(module)(*(kwargs[k].numpy() for k in ("input_ids", "attention_mask")))[0]
    with torch.no_grad():
        want = model.lm_head(model.model.norm(model.model.embed_tokens(kwargs["input_ids"]))).numpy()
    assert np.abs(got - want).max() < 1e-5 * max(1.0, np.abs(want).max())


# -- quality metrics -----------------------------------------------------------------------------
def test_causal_lm_metrics_against_scipy():
    from scipy.special import log_softmax

    rng = np.random.default_rng(3)
    ids = rng.integers(0, 50, (3, 6))
    mask = np.array([[1] * 6, [1] * 4 + [0] * 2, [1] * 2 + [0] * 4])
    a = rng.standard_normal((3, 6, 50)).astype(np.float32)
    b = a + 0.5 * rng.standard_normal(a.shape).astype(np.float32)
    ra, rb = summary("causal-lm"), summary("causal-lm")
    ra.add([ids, mask], [a])
    rb.add([ids, mask], [b])
    got = compare(ra, rb)
    valid = (mask[:, :-1] == 1) & (mask[:, 1:] == 1)
    assert got["tokens"] == valid.sum() == 5 + 3 + 1
    agree = (a.argmax(-1)[:, :-1] == b.argmax(-1)[:, :-1])[valid].mean()
    logp = np.take_along_axis(log_softmax(b.astype(np.float64), -1)[:, :-1], ids[:, 1:, None], -1)[..., 0]
    assert got["top1_agreement"] == pytest.approx(agree, abs=0)
    assert got["perplexity"] == pytest.approx(np.exp(-logp[valid].mean()), rel=1e-12)
    assert got["accuracy"] == pytest.approx((b.argmax(-1)[:, :-1] == ids[:, 1:])[valid].mean(), abs=0)
    assert compare(ra, ra)["top1_agreement"] == 1.0 and "top1_agreement" not in own(ra)


def test_encoder_and_classifier_metrics():
    rng = np.random.default_rng(4)
    hidden = rng.standard_normal((5, 4, 8)).astype(np.float32)
    mask = np.ones((5, 4), np.int64)
    mask[0, 2:] = 0
    ra, rb = summary("encoder"), summary("encoder")
    ra.add([None, mask], [hidden])
    rb.add([None, mask], [hidden * 3.0])  # a scale moves no normalized embedding
    got = compare(ra, rb)
    assert got["cosine_min"] == pytest.approx(1.0, abs=1e-12) and got["nn_agreement"] == 1.0
    assert got["rank_rho"] == pytest.approx(1.0)
    rc = summary("encoder")
    rc.add([None, mask], [hidden[::-1].copy()])
    assert compare(ra, rc)["cosine_mean"] < 0.9
    ca, cb = summary("classifier"), summary("classifier")
    logits = rng.standard_normal((6, 3))
    labels = logits.argmax(1)
    ca.add([None], [logits], labels)
    flipped = logits.copy()
    flipped[0] = -flipped[0]
    cb.add([None], [flipped], labels)
    assert compare(ca, cb) == {"examples": 6.0, "agreement": pytest.approx(5 / 6), "accuracy": pytest.approx(5 / 6)}


# -- the sweep and the report --------------------------------------------------------------------
@needs_torch
def test_sweep_ranks_blocks_and_builds_its_answer(tmp_path):
    from opscope.act.evalset import eval_set
    from opscope.act.whatif import sweep_skips
    from opscope.analysis.cost import analyze

    evalset = eval_set("llama-tiny", tokens=60)
    assert evalset.task == "causal-lm" and "predicted tokens" in evalset.data
    report = sweep_skips(evalset, keep=0.5, floor=0.0)
    metric = report.headline
    assert len(report.sweep) == 4 and len(report.curve) == 4
    scores = [o.metrics[metric] for o in report.sweep]
    assert scores == sorted(scores, reverse=True)
    assert report.curve[0].metrics == report.sweep[0].metrics  # k = 1 is the least harmful block
    best = report.most_skippable()
    assert best is not None and best.metrics[metric] >= 0.5
    built = report.outcomes[-1]
    assert built.pipeline == best.pipeline and built.metrics == best.metrics  # the gates measured the real skip
    module = parse_module(evalset.module, new_context())
    run_pipeline(module, "skip-residual-blocks{blocks=*}")
    assert report.curve[-1].flops == analyze(module).total_flops < report.flops
    assert 0 < report.saved(report.curve[0]) < report.saved(report.curve[-1]) < 1
    text = opscope.render(report)
    assert "Skip sweep: 4 residual blocks" in text and "Greedy curve" in text and "blocks can go at >= 50%" in text
    assert report.to_dict()["schema"] == "opscope-whatif/1"


@needs_torch
def test_lowest_influence_reads_a_recorded_run(tmp_path):
    import opscope
    from opscope.act.whatif import lowest_influence
    from opscope.errors import OpscopeError

    run = opscope.profile("llama-tiny", out=tmp_path / "run", steps=1, taps="residual")
    table = run.report.dynamics.residual.sort("bi")
    assert lowest_influence(str(run.out_dir), 2) == table["site"].to_list()[:2]
    with pytest.raises(OpscopeError, match="4 residual blocks: k must be 1 to 4, got 9"):
        lowest_influence(str(run.out_dir), 9)


@pytest.mark.parametrize("entry", list(ENTRY_POINTS))
def test_whatif_bad_input_is_one_line(entry, tmp_path):
    def fails(*argv: str) -> str:
        proc = subprocess.run(
            ENTRY_POINTS[entry] + ["whatif", *argv], capture_output=True, text=True, cwd=tmp_path, timeout=240
        )
        assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr
        lines = proc.stderr.strip().splitlines()
        assert lines[-1].startswith("opscope: error: "), proc.stderr
        assert all(line.startswith("opscope whatif: model ") for line in lines[:-1]), proc.stderr
        return lines[-1]

    assert "nothing to measure" in fails("digits")
    if entry != "opscope":  # the same code behind both: one round trip through this entry point is enough
        return
    assert "no fake-quant scheme 'w9a9' (choose one of: w8a8, w8a16" in fails("digits", "--fakequant", "w9a9")
    assert "--skip-lowest reads block influence from a recorded run" in fails("digits", "--skip-lowest", "2")
    assert fails("digits", "--skip", "layers.0.ffn").endswith(
        "skip-residual-blocks: no residual block 'layers.0.ffn' in this module (valid: none: this module has no "
        "residual adds)"
    )


def test_the_api_takes_every_option_the_cli_has():
    """The CLI only parses: each `opscope whatif` option is a parameter of `opscope.whatif` (their
    defaults the stage's), and the API refuses bad requests before reading a model, as the CLI does."""
    import argparse
    import inspect

    from opscope.act.evalset import DEFAULT_TOKENS
    from opscope.act.whatif import FLOOR, KEEP
    from opscope.cli import build_parser

    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    dests = {a.dest for a in sub.choices["whatif"]._actions} - {"help", "json", "html", "all", "fn"}  # formats
    params = inspect.signature(opscope.whatif).parameters
    renamed = {"pipeline": "pipelines"}
    assert {renamed.get(d, d) for d in dests} <= set(params), {renamed.get(d, d) for d in dests} - set(params)
    assert (params["keep"].default, params["floor"].default, params["tokens"].default) == (KEEP, FLOOR, DEFAULT_TOKENS)
    with pytest.raises(opscope.OpscopeError, match="^nothing to measure"):
        opscope.whatif("no-such-model.onnx")
    with pytest.raises(opscope.OpscopeError, match="^--skip-lowest reads block influence from a recorded run"):
        opscope.whatif("no-such-model.onnx", skip_lowest=2)
    with pytest.raises(opscope.OpscopeError, match=r"^--sweep and --sweep-layers \(sweep, sweep_layers\) are two runs"):
        opscope.whatif("no-such-model.onnx", sweep=True, sweep_layers="w8a8")


def test_layer_sweep_quantizes_one_layer_at_a_time():
    from opscope.act.evalset import EvalSet
    from opscope.act.whatif import _with_sites, sweep_layers

    assert _with_sites("fakequant-activations,fakequant-weights{bits=4}", r"^layers\.0\.") == (
        r"fakequant-activations{sites=^layers\.0\.},fakequant-weights{bits=4 sites=^layers\.0\.}"
    )
    evalset = EvalSet("the lit layer", "outputs", block_ir(), [layer_inputs(5), layer_inputs(6)])
    report = sweep_layers(evalset, "w8a16")
    assert [o.what for o in report.layers] == ["W8A16 on layers.0"]
    whole, layer = report.outcomes[0], report.layers[0]
    assert "sites=" not in whole.pipeline and r"sites=^layers\.0\." in layer.pipeline
    assert whole.metrics == layer.metrics  # one layer is the whole model here
    # the weights here are arguments: wq, wk, w3, w4, and h, the rhs of p·h (an argument rhs counts as a weight)
    numel = 2 * 16 * 16 + 2 * 16 * 32 + 8 * 16
    assert report.weights == 4 * numel
    assert layer.weights == numel + 4 * (16 + 16 + 32 + 16 + 16)  # int8, an f32 scale per output channel
    assert 0.0 < 1.0 - layer.metrics["rel_l2_max"] < 1.0 and "One layer at a time (1 layers)" in opscope.render(report)


def test_a_rewrite_that_leaves_invalid_ir_is_refused_naming_what_it_rewrote():
    from opscope.errors import OpscopeError
    from opscope.ir.blocks import verify_or_refuse

    module = parse_module(block_ir(), new_context())
    fn = module.body.operations[0]
    block = fn.regions[0].blocks[0]
    ret = list(block.operations)[-1]
    ret.operands[0] = block.arguments[1]  # returns a 16x16 tensor from a function that says 8x16
    with pytest.raises(
        OpscopeError,
        match=r"^skip-residual-blocks: rewriting layers\.0\.ffn leaves invalid IR: "
        r".*type of return operand 0",
    ):
        verify_or_refuse("skip-residual-blocks", module, "layers.0.ffn")
    ret.operands[0] = block.arguments[0]
    verify_or_refuse("skip-residual-blocks", module, "layers.0.ffn")  # valid again: no error
