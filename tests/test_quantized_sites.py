"""A module `quantize-weight` specialized is profiled again, site by site (the reference's DequantMatMul).

A two-layer MLP (fc1, ReLU, fc2; constant weights, each site a torch-style Linear) is compiled
as is and after W8A16, W4A16 in groups of 8 and W8A8 (llvm-cpu). The quantized sites are integer
contractions (f32 × i8/i4, i8 × i8 → i32); their taps read the tensors the site stands for:

* lhs: the float activation before W8A8's quantizer and the groups' regrouping: fc1's equals the
  original build's sketches bit for bit (the same input), fc2's host_stats of ReLU(h) from the
  device's own h;
* out: after the scales (and the groups' sum): host_stats of the module's own results h and y;
* rhs, asked for (`dequantize_codes`): the codes read through their scales, in the original
  weight's [K, N] layout, against numpy's fake-quant round trip of the weight
  (`test_quantize_weight.fq_codes`: codes·(amax·(1/qmax)) in float32).

Tolerances are `generated_checks`' (the device's f32 sums against host_stats' float64): the
tensors are the same, only the sketches' summation order differs.
"""

from __future__ import annotations

import logging

import numpy as np
import pytest
from generated_checks import _stat_mismatch
from test_quantize_weight import fq_codes

from opscope.ir.loading import module_text, new_context, parse_module
from opscope.ir.stat_config import StatConfig
from opscope.pipeline.textual import run_pipeline
from opscope.run.host_stats import host_stats

F32 = np.float32
M, K, H, N = 4, 32, 16, 8
rng = np.random.default_rng(11)
W1 = rng.standard_normal((H, K)).astype(F32)
W2 = rng.standard_normal((N, H)).astype(F32)
X = rng.standard_normal((M, K)).astype(F32)


def _resource(name: str, w: np.ndarray) -> str:
    return f'{name}: "0x04000000{w.astype("<f4").tobytes().hex().upper()}"'


SOURCE = f"""
func.func @main(%x: tensor<{M}x{K}xf32>) -> (tensor<{M}x{H}xf32>, tensor<{M}x{N}xf32>) {{
  %zero = arith.constant 0.0 : f32
  %w1 = arith.constant dense_resource<w1> : tensor<{H}x{K}xf32>
  %w2 = arith.constant dense_resource<w2> : tensor<{N}x{H}xf32>
  %e1 = tensor.empty() : tensor<{K}x{H}xf32>
  %t1 = linalg.transpose ins(%w1 : tensor<{H}x{K}xf32>) outs(%e1 : tensor<{K}x{H}xf32>) permutation = [1, 0]
  %eh = tensor.empty() : tensor<{M}x{H}xf32>
  %ih = linalg.fill ins(%zero : f32) outs(%eh : tensor<{M}x{H}xf32>) -> tensor<{M}x{H}xf32>
  %h = linalg.matmul ins(%x, %t1 : tensor<{M}x{K}xf32>, tensor<{K}x{H}xf32>)
      outs(%ih : tensor<{M}x{H}xf32>) -> tensor<{M}x{H}xf32> loc("fc1")
  %a = linalg.generic {{indexing_maps = [affine_map<(m, n) -> (m, n)>, affine_map<(m, n) -> (m, n)>],
                       iterator_types = ["parallel", "parallel"]}}
      ins(%h : tensor<{M}x{H}xf32>) outs(%eh : tensor<{M}x{H}xf32>) {{
    ^bb0(%v: f32, %o: f32):
      %r = arith.maximumf %v, %zero : f32
      linalg.yield %r : f32
  }} -> tensor<{M}x{H}xf32> loc("relu")
  %e2 = tensor.empty() : tensor<{H}x{N}xf32>
  %t2 = linalg.transpose ins(%w2 : tensor<{N}x{H}xf32>) outs(%e2 : tensor<{H}x{N}xf32>) permutation = [1, 0]
  %ey = tensor.empty() : tensor<{M}x{N}xf32>
  %iy = linalg.fill ins(%zero : f32) outs(%ey : tensor<{M}x{N}xf32>) -> tensor<{M}x{N}xf32>
  %y = linalg.matmul ins(%a, %t2 : tensor<{M}x{H}xf32>, tensor<{H}x{N}xf32>)
      outs(%iy : tensor<{M}x{N}xf32>) -> tensor<{M}x{N}xf32> loc("fc2")
  return %h, %y : tensor<{M}x{H}xf32>, tensor<{M}x{N}xf32>
}}
{{-#
  dialect_resources: {{ builtin: {{ {_resource("w1", W1)}, {_resource("w2", W2)} }} }}
#-}}
"""
VARIANTS = {  # name -> (quantize-weight options, bits, group)
    "W8A16": ("", 8, 0),
    "W4A16 g8": ("bits=4 group=8", 4, 8),
    "W8A8": ("activations=true", 8, 0),
}
CONFIG = StatConfig(dequantize_codes=True)


def quantized(options: str) -> str:
    """SOURCE after `quantize-weight{options}` on both sites, as text with its locations."""
    module = parse_module(SOURCE, new_context())
    run_pipeline(module, f"quantize-weight{{{options}}}")
    return module_text(module, debug_info=True)


def dequantized(w: np.ndarray, bits: int, group: int) -> np.ndarray:
    """The weight the codes stand for, [K, N] (a matmul rhs): codes·(amax·(1/qmax)) in float32."""
    n, k = w.shape
    if group:
        codes, amax = fq_codes(w.reshape(n, k // group, group), 2, bits)
        scale = (amax * F32(1 / (2 ** (bits - 1) - 1))).astype(F32)
        return (codes.astype(F32) * scale).astype(F32).reshape(n, k).T
    codes, amax = fq_codes(w, 1, bits)
    return (codes.astype(F32) * (amax * F32(1 / (2 ** (bits - 1) - 1))).astype(F32)).astype(F32).T


def assert_sketches(stats: dict, site: str, role: str, x: np.ndarray) -> None:
    want = host_stats(x, CONFIG)
    got = {stat: v for (s, r, stat), v in stats.items() if (s, r) == (site, role)}
    assert list(got) == list(want), (site, role)
    for stat, w in want.items():
        why = _stat_mismatch(got[stat], w, stat, x)
        assert why is None, f"{site} {role}.{stat}: {why}"


@pytest.fixture(scope="module")
def original(modules):
    return modules.build(SOURCE, "llvm-cpu", config=CONFIG).stats(X)


@pytest.mark.parametrize("variant", VARIANTS)
def test_a_quantized_site_is_tapped_as_the_tensors_it_stands_for(modules, original, variant, caplog):
    options, bits, group = VARIANTS[variant]
    with caplog.at_level(logging.WARNING, logger="opscope"):
        built = modules.build(quantized(options), "llvm-cpu", config=CONFIG)
    assert not [r.message for r in caplog.records if "fc" in r.message], "every role has its float tensor"
    (h, y), stats = built.stats(X)
    assert {(s, r) for s, r, _ in stats} == {(s, r) for s in ("fc1", "fc2") for r in ("lhs", "rhs", "out")}
    _, before = original
    for (s, r, stat), v in before.items():
        if (s, r) == ("fc1", "lhs"):
            np.testing.assert_array_equal(stats[s, r, stat], v, err_msg=f"fc1 lhs.{stat}")
    assert_sketches(stats, "fc2", "lhs", np.maximum(h, 0))
    assert_sketches(stats, "fc1", "out", h)
    assert_sketches(stats, "fc2", "out", y)
    assert_sketches(stats, "fc1", "rhs", dequantized(W1, bits, group))
    assert_sketches(stats, "fc2", "rhs", dequantized(W2, bits, group))


def test_codes_are_not_tapped_unless_asked(modules, caplog):
    """The default taps lhs and out of a quantized site; its codes are named as not tapped."""
    with caplog.at_level(logging.WARNING, logger="opscope"):
        built = modules.build(quantized("activations=true"), "llvm-cpu", config=StatConfig(hist_bins=0))
    assert {(e.site, e.role) for e in built.manifest.entries} == {
        (s, r) for s in ("fc1", "fc2") for r in ("lhs", "out")
    }
    said = [r.message for r in caplog.records if "integer site" in r.message]
    assert len(said) == 2 and all("rhs: integer codes, not tapped (the dequantize-codes option" in m for m in said)
