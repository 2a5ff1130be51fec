"""Fusion parity (the reference's `fusion_output_parity`): a model as IREE fuses it against the same
model with every op its own dispatch (`unfuse`), compared at the outputs only, within 1e-4.

A two-layer MLP with biases and ReLUs (five compute ops) is built both ways: the unfused build
forms exactly one dispatch per op, the fused one fewer, and both equal numpy's float64 forward
within 1e-5 of the output's scale (so the comparison is between two right answers, not two equal
wrong ones). `opscope parity --fusion` reports the outputs only, with both builds' dispatch counts;
`--outputs-only` compares two pipelines the same way (a fake-quantized weight is beyond the
default tolerance: exit 1); asking to expose ops in an outputs-only comparison is one line.
"""

from __future__ import annotations

import numpy as np
import pytest

import opscope
from opscope.act.parity import FUSION_TOL, exposed_run
from opscope.cli import main

F32 = np.float32
M, D = 8, 16
rng = np.random.default_rng(2)
W0, W1 = (rng.standard_normal((D, D)).astype(F32) / 4 for _ in range(2))
B0, B1 = (rng.standard_normal(D).astype(F32) for _ in range(2))
X = rng.standard_normal((M, D)).astype(F32)
ID, ROW = "affine_map<(d0, d1) -> (d0, d1)>", "affine_map<(d0, d1) -> (d1)>"


def _dense(a: np.ndarray) -> str:
    return f"dense<{np.array2string(a, separator=', ', threshold=10**6, floatmode='unique')}>"


def _layer(i: int, x: str, relu: bool) -> str:
    t = f"tensor<{M}x{D}xf32>"
    act = (
        f"""
  %a{i} = linalg.generic {{indexing_maps = [{ID}, {ID}], iterator_types = ["parallel", "parallel"]}}
      ins(%y{i} : {t}) outs(%e : {t}) {{
    ^bb0(%v: f32, %o: f32):
      %r = arith.maximumf %v, %zero : f32
      linalg.yield %r : f32
  }} -> {t} loc("act{i}")"""
        if relu
        else ""
    )
    return f"""
  %w{i} = arith.constant {_dense((W0, W1)[i])} : tensor<{D}x{D}xf32>
  %b{i} = arith.constant {_dense((B0, B1)[i])} : tensor<{D}xf32>
  %m{i} = linalg.matmul ins({x}, %w{i} : {t}, tensor<{D}x{D}xf32>) outs(%z : {t}) -> {t} loc("fc{i}")
  %y{i} = linalg.generic {{indexing_maps = [{ID}, {ROW}, {ID}], iterator_types = ["parallel", "parallel"]}}
      ins(%m{i}, %b{i} : {t}, tensor<{D}xf32>) outs(%e : {t}) {{
    ^bb0(%v: f32, %c: f32, %o: f32):
      %r = arith.addf %v, %c : f32
      linalg.yield %r : f32
  }} -> {t} loc("bias{i}"){act}"""


SOURCE = f"""
func.func @main(%x: tensor<{M}x{D}xf32>) -> tensor<{M}x{D}xf32> {{
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<{M}x{D}xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<{M}x{D}xf32>) -> tensor<{M}x{D}xf32>
  {_layer(0, "%x", True)}
  {_layer(1, "%a0", False)}
  return %y1 : tensor<{M}x{D}xf32>
}}
"""


@pytest.fixture(scope="module")
def mlp(tmp_path_factory):
    path = tmp_path_factory.mktemp("fusion") / "mlp.mlir"
    path.write_text(SOURCE)
    return path


def test_the_unfused_build_is_one_dispatch_per_op_and_both_are_right(mlp):
    fused, _ = exposed_run(str(mlp), outputs_only=True, inputs=[X])
    unfused, _ = exposed_run(str(mlp), pipeline="unfuse", outputs_only=True, inputs=[X])
    assert unfused.dispatches == 5  # fc0, bias0, act0, fc1, bias1
    assert fused.dispatches is not None and fused.dispatches < unfused.dispatches
    x = X.astype(np.float64)
    want = np.maximum(x @ W0 + B0, 0) @ W1 + B1
    for build in (fused, unfused):
        (out,) = [t.value for t in build.tensors]
        assert np.abs(out - want).max() <= 1e-5 * np.abs(want).max(), build


def test_parity_fusion_compares_the_outputs_within_1e_4(mlp, capsys):
    report = opscope.parity(str(mlp), fusion=True, inputs=[X])
    assert report.tol == FUSION_TOL == 1e-4
    assert [d.name for d in report.ops] == ["output#0"] and report.within()
    assert "1 output," in report.a and "pipeline 'unfuse'" in report.b and "5 dispatches" in report.b

    assert main(["parity", str(mlp), "--fusion"]) == 0
    out = capsys.readouterr().out
    assert "1 ops compared" in out and "5 dispatches" in out and "first beyond tol 0.0001: none" in out


def test_outputs_only_judges_two_pipelines_by_the_tolerance(mlp, capsys):
    code = main(["parity", str(mlp), "--outputs-only", "--b-pipeline", "fakequant-weights{bits=4}"])
    assert code == 1  # int4 weights move the output by more than 1e-3 of its scale
    assert "output#0" in capsys.readouterr().out


def test_exposing_ops_in_an_outputs_only_comparison_is_one_line(mlp, capsys):
    assert main(["parity", str(mlp), "--fusion", "--ops", "fc"]) == 1
    err = capsys.readouterr().err.strip()
    assert err == (
        "opscope: error: parity: ops/constants choose the ops to expose, and outputs_only (or fusion) "
        "exposes none: drop one"
    )
