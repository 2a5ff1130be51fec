"""`dump-tensors` against numpy: the dumped tensors are the sites' activations, whole.

A demo MLP and a demo transformer (weights as arguments, `opscope.models.demo`) are
rewritten, compiled for llvm-cpu and run; every dumped tensor must equal a float64 numpy
computation of the same activation within 1e-5 relative (max |Δ| ≤ 1e-5 · max |ref|), the
original result must be bit-identical to the plain build's, and `dumped_results` must name
each result. The byte budget and a bad role are refused in one line, the module untouched.
"""

from __future__ import annotations

import logging

import numpy as np
import pytest

from opscope.errors import OpscopeError
from opscope.ir.loading import new_context, parse_module
from opscope.models.demo import mlp_module, random_inputs, transformer_module
from opscope.passes.dump_tensors import DumpTensors, dumped_results, dumps
from opscope.pipeline.textual import parse_pipeline, run_pipeline
from opscope.run.compile import compile_module
from opscope.run.runtime import load

TOKENS, WIDTH = 8, 16
RTOL = 1e-5


def mlp():
    return parse_module(mlp_module(2, WIDTH, TOKENS), new_context())


def run(module, inputs):
    return load(compile_module(module, "llvm-cpu")).invoke("main", *inputs)


def close(got, want) -> None:
    """max |got − want| ≤ RTOL · max |want| (want computed in float64)."""
    assert got.shape == want.shape
    assert np.max(np.abs(got.astype(np.float64) - want)) <= RTOL * np.max(np.abs(want))


def test_dumped_lhs_and_out_of_an_mlp_equal_numpy():
    x, w0, w1 = inputs = random_inputs([(TOKENS, WIDTH), (WIDTH, WIDTH), (WIDTH, WIDTH)])
    plain = run(mlp(), inputs)
    module = mlp()
    run_pipeline(module, "dump-tensors,dump-tensors{role=out}")
    shape = (TOKENS, WIDTH)
    assert dumped_results(module) == [
        ("fc0", "lhs", shape),
        ("fc1", "lhs", shape),
        ("fc0", "out", shape),
        ("fc1", "out", shape),
    ]
    assert dumps(module)[0] == "main" and [d.result for d in dumps(module)[1]] == [1, 2, 3, 4]
    outputs = run(module, inputs)
    assert len(outputs) == 5
    np.testing.assert_array_equal(outputs[0], plain[0])  # the original result, untouched
    h = x.astype(np.float64) @ w0
    a = np.maximum(h, 0.0)
    for got, want in zip(outputs[1:], (x.astype(np.float64), a, h, a @ w1)):
        close(got, want)


def test_computed_rhs_of_attention_scores_is_k():
    """scores = q·kᵀ: role=rhs dumps k = x·Wk, a computed activation (transposed by the map)."""
    seq, d = 8, 16
    module = parse_module(transformer_module(1, d, seq), new_context())
    run_pipeline(module, "dump-tensors{role=rhs sites=attn\\.scores}")
    assert dumped_results(module) == [("layer0.attn.scores", "rhs", (seq, d))]
    shapes = [(seq, d)] + [(d, d)] * 4 + [(d, 4 * d), (4 * d, d)]
    inputs = random_inputs(shapes)
    outputs = run(module, inputs)
    x, wk = inputs[0], inputs[2]
    close(outputs[1], x.astype(np.float64) @ wk)


def test_byte_budget_is_refused_in_one_line_before_any_rewrite():
    module = mlp()
    before = str(module)
    with pytest.raises(OpscopeError) as err:
        run_pipeline(module, "dump-tensors{max-bytes=1000}")
    msg = str(err.value)
    assert msg == (
        "dump-tensors: the 2 tapped tensors take 0.000977 MiB per call, over max-bytes=0.000954 MiB: "
        "narrow `sites` (e.g. sites='layers\\.0\\.') or raise max-bytes"
    )
    assert "\n" not in msg
    assert str(module) == before
    run_pipeline(module, "dump-tensors{max-bytes=1024 sites=fc1}")  # 512 bytes: within budget
    assert dumped_results(module) == [("fc1", "lhs", (TOKENS, WIDTH))]


def test_bad_role_is_refused_listing_the_choices():
    with pytest.raises(
        OpscopeError,
        match=r"^dump-tensors: option 'role' expects one of lhs, rhs, out, "
        r"got 'weight'$",
    ):
        DumpTensors(role="weight")
    with pytest.raises(OpscopeError, match="option 'role' expects one of"):
        parse_pipeline("dump-tensors{role=in}")


def test_pipeline_text_round_trips_and_keep_selects():
    text = "dump-tensors{sites=fc role=out max-bytes=4096}"
    p = parse_pipeline(text).elements[0]
    assert p == DumpTensors(sites="fc", role="out", max_bytes=4096)
    assert parse_pipeline(str(parse_pipeline(text))).elements[0] == p
    module = mlp()
    with module.context:
        DumpTensors(keep=lambda s: s.name == "fc1").apply(module)
    assert dumped_results(module) == [("fc1", "lhs", (TOKENS, WIDTH))]


def test_no_site_warns_and_changes_nothing(caplog):
    module = parse_module(
        "func.func @f(%t: tensor<4xf32>) -> tensor<4xf32> {\n"
        "  %0 = arith.negf %t : tensor<4xf32>\n  return %0 : tensor<4xf32>\n}",
        new_context(),
    )
    before = str(module)
    with caplog.at_level(logging.WARNING, logger="opscope"):
        run_pipeline(module, "dump-tensors")
    assert "dump-tensors: no matmul sites to dump in this module" in caplog.text
    assert str(module) == before
    assert dumped_results(module) == []
