"""Op labels: named ops by name, generics by what their body computes."""

from __future__ import annotations

import pytest

from opscope.ir.labels import op_label, value_label
from opscope.ir.loading import parse_module

MODULE = """
#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>
#lhs = affine_map<(d0, d1, d2) -> (d0, d2)>
#rhs = affine_map<(d0, d1, d2) -> (d2, d1)>
#out = affine_map<(d0, d1, d2) -> (d0, d1)>
func.func @main(%x: tensor<4x8xf32>, %w: tensor<8x8xf32>) -> tensor<4x8xf32> {
  %c0 = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<4x8xf32>
  %z = linalg.fill ins(%c0 : f32) outs(%e : tensor<4x8xf32>) -> tensor<4x8xf32>
  %mm = linalg.matmul ins(%x, %w : tensor<4x8xf32>, tensor<8x8xf32>) outs(%z : tensor<4x8xf32>) -> tensor<4x8xf32>
  %exp = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%mm : tensor<4x8xf32>) outs(%e : tensor<4x8xf32>) {
    ^bb0(%a: f32, %b: f32):
      %s = arith.subf %a, %c0 : f32
      %x1 = math.exp %s : f32
      %x2 = math.exp %x1 : f32
      linalg.yield %x2 : f32
  } -> tensor<4x8xf32>
  %r0 = tensor.empty() : tensor<4xf32>
  %max = linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "reduction"]}
      ins(%exp : tensor<4x8xf32>) outs(%r0 : tensor<4xf32>) {
    ^bb0(%a: f32, %b: f32):
      %m = arith.maximumf %a, %b : f32
      linalg.yield %m : f32
  } -> tensor<4xf32>
  %gmm = linalg.generic {indexing_maps = [#lhs, #rhs, #out], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%x, %w : tensor<4x8xf32>, tensor<8x8xf32>) outs(%z : tensor<4x8xf32>) {
    ^bb0(%a: f32, %b: f32, %c: f32):
      %p = arith.mulf %a, %b : f32
      %q = arith.addf %c, %p : f32
      linalg.yield %q : f32
  } -> tensor<4x8xf32>
  %cp = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%gmm : tensor<4x8xf32>) outs(%e : tensor<4x8xf32>) {
    ^bb0(%a: f32, %b: f32):
      linalg.yield %a : f32
  } -> tensor<4x8xf32>
  %sm = linalg.softmax dimension(1) ins(%cp : tensor<4x8xf32>) outs(%e : tensor<4x8xf32>) -> tensor<4x8xf32>
  return %sm : tensor<4x8xf32>
}
"""


@pytest.fixture(scope="module")
def labels():
    module = parse_module(MODULE)
    fn = next(iter(module.body.operations))
    return [op_label(op) for op in fn.regions[0].blocks[0].operations]


def test_labels_name_named_ops_and_describe_generic_bodies(labels):
    assert labels == [
        "const",
        "empty",
        "fill",
        "matmul",
        "generic<subf,exp>",
        "empty",
        "reduce<maximumf>",
        "contract<mulf,addf>",
        "generic<copy>",
        "softmax",
        "return",
    ]


def test_value_labels():
    module = parse_module(MODULE)
    fn = next(iter(module.body.operations))
    ops = list(fn.regions[0].blocks[0].operations)
    mm = ops[3]
    assert [value_label(v) for v in mm.operands] == ["in", "in", "fill"]
