"""`opscope.run.index_remainders`: a loop index modulo a bound it never reaches is written as the index
on the compiler's copy, so IREE 3.13 compiles the gather torch-mlir writes for a scatter-add's
coordinates (found by the long run: an ONNX MoE failed at LLVM translation once one site was tapped)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import opscope
from opscope.ir.loading import new_context, parse_module
from opscope.run.compile import CompileFailed, compile_module
from opscope.run.index_remainders import index_remainders, plain_indices
from opscope.run.runtime import load

MOE = Path(__file__).parent / "regressions" / "onnx_moe_scatter_add.mlir"


def rolled(bound: int) -> str:
    """y[i] = x[i mod bound] over 6 elements."""
    return f"""
func.func @main(%x: tensor<6xf32>) -> tensor<6xf32> {{
  %b = arith.constant {bound} : index
  %e = tensor.empty() : tensor<6xf32>
  %y = linalg.generic {{indexing_maps = [affine_map<(d0) -> (d0)>], iterator_types = ["parallel"]}} outs(%e : tensor<6xf32>) {{
  ^bb0(%o: f32):
    %i = linalg.index 0 : index
    %j = arith.remsi %i, %b : index
    %v = tensor.extract %x[%j] : tensor<6xf32>
    linalg.yield %v : f32
  }} -> tensor<6xf32>
  return %y : tensor<6xf32>
}}"""


@pytest.mark.parametrize("bound,plain", [(6, True), (13, True), (4, False)])
def test_only_a_remainder_the_index_never_reaches_is_dropped(bound, plain):
    module = parse_module(rolled(bound), new_context())
    assert len(index_remainders(module)) == int(plain)
    assert plain_indices(module) == int(plain)
    assert module.operation.verify()
    x = np.arange(6, dtype=np.float32) + 1
    got = load(compile_module(module, "llvm-cpu")).invoke("main", x)[0]
    assert np.array_equal(got, x[np.arange(6) % bound])


def one_site(name: str):
    return opscope.inject(MOE.read_text(), target="llvm-cpu", taps="matmul", keep=lambda s: s.name == name)[0]


def test_an_onnx_moe_with_one_site_tapped_compiles_and_keeps_its_results():
    """Its untapped build and the build with only its expert matmul tapped compile, and the tapped
    build's result is the untapped one's bit for bit."""
    text = MOE.read_text()
    assert len(index_remainders(parse_module(text, new_context()))) == 1
    x = np.random.default_rng(0).standard_normal((13, 12)).astype(np.float32)
    base = load(compile_module(text, "llvm-cpu")).invoke("main", x)
    got = load(compile_module(one_site("batch_matmul#0"), "llvm-cpu")).invoke("main", x)[: len(base)]
    assert all(np.array_equal(a, b) for a, b in zip(got, base))


@pytest.mark.xfail(strict=True, raises=CompileFailed, reason="IREE 3.13: a vectorized gather of a strided slice")
def test_iree_still_fails_on_the_moe_without_the_rewrite(monkeypatch):
    """Pins the IREE bug: when an upgrade fixes it this passes, the strict xfail fails, and
    `index_remainders` can go."""
    import opscope.run.compile as compile_

    monkeypatch.setattr(compile_, "_workarounds", lambda data_tiled, spirv: [])
    compile_module(one_site("batch_matmul#0"), "llvm-cpu", use_cache=False)
