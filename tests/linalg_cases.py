"""Small modules (linalg, one StableHLO) the end-to-end tests share (one site each, named by its location).

Each entry of `CASES` is (MLIR text, argument shapes, element type). Sources are plain
strings, so `ModuleCache` compiles each one once per session and target.
"""

from __future__ import annotations

from opscope.models.demo import matmul_module

BATCH_MATMUL = """
func.func @main(%a: tensor<2x8x12xf32>, %b: tensor<2x12x10xf32>) -> tensor<2x8x10xf32> {
  %c = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<2x8x10xf32>
  %z = linalg.fill ins(%c : f32) outs(%e : tensor<2x8x10xf32>) -> tensor<2x8x10xf32>
  %r = linalg.batch_matmul ins(%a, %b : tensor<2x8x12xf32>, tensor<2x12x10xf32>)
                           outs(%z : tensor<2x8x10xf32>) -> tensor<2x8x10xf32> loc("bmm")
  return %r : tensor<2x8x10xf32>
}
"""

# A contraction written as linalg.generic with a 3-D lhs [B, S, K] x [K, N] -> [B, S, N].
GENERIC_3D = """
func.func @main(%a: tensor<2x6x12xf32>, %b: tensor<12x10xf32>) -> tensor<2x6x10xf32> {
  %c = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<2x6x10xf32>
  %z = linalg.fill ins(%c : f32) outs(%e : tensor<2x6x10xf32>) -> tensor<2x6x10xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(b, m, n, k) -> (b, m, k)>,
                                        affine_map<(b, m, n, k) -> (k, n)>,
                                        affine_map<(b, m, n, k) -> (b, m, n)>],
                       iterator_types = ["parallel", "parallel", "parallel", "reduction"]}
      ins(%a, %b : tensor<2x6x12xf32>, tensor<12x10xf32>) outs(%z : tensor<2x6x10xf32>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %p = arith.mulf %x, %y : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  } -> tensor<2x6x10xf32> loc("proj3d")
  return %r : tensor<2x6x10xf32>
}
"""

# rhs and out are rank 1: 9 statistics each.
MATVEC = """
func.func @main(%a: tensor<16x24xf32>, %b: tensor<24xf32>) -> tensor<16xf32> {
  %c = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<16xf32>
  %z = linalg.fill ins(%c : f32) outs(%e : tensor<16xf32>) -> tensor<16xf32>
  %r = linalg.matvec ins(%a, %b : tensor<16x24xf32>, tensor<24xf32>)
                     outs(%z : tensor<16xf32>) -> tensor<16xf32> loc("mv")
  return %r : tensor<16xf32>
}
"""

# lhs [M, K] x rhs [N, K] -> [M, N] through linalg.matmul's indexing_maps.
TRANSPOSED = """
func.func @main(%a: tensor<16x24xf32>, %b: tensor<8x24xf32>) -> tensor<16x8xf32> {
  %c = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<16x8xf32>
  %z = linalg.fill ins(%c : f32) outs(%e : tensor<16x8xf32>) -> tensor<16x8xf32>
  %r = linalg.matmul indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d2)>,
                                      affine_map<(d0, d1, d2) -> (d1, d2)>,
                                      affine_map<(d0, d1, d2) -> (d0, d1)>]
       ins(%a, %b : tensor<16x24xf32>, tensor<8x24xf32>) outs(%z : tensor<16x8xf32>) -> tensor<16x8xf32> loc("qk")
  return %r : tensor<16x8xf32>
}
"""

# The same batched contraction as StableHLO (sites also match stablehlo.dot_general).
DOT_GENERAL = """
func.func @main(%a: tensor<2x8x12xf32>, %b: tensor<2x12x10xf32>) -> tensor<2x8x10xf32> {
  %0 = stablehlo.dot_general %a, %b, batching_dims = [0] x [0], contracting_dims = [2] x [1]
      : (tensor<2x8x12xf32>, tensor<2x12x10xf32>) -> tensor<2x8x10xf32> loc("hlo.bmm")
  return %0 : tensor<2x8x10xf32>
}
"""

# Three 8x8 sites whose operands are of every residency IREE distinguishes: an argument,
# constants (splat and dense), intermediates, the returned result; one shared stats kernel.
_ROW = "[" + ", ".join(f"{float(i)}" for i in range(1, 9)) + "]"
CONST_WEIGHTS = f"""
func.func @main(%a: tensor<8x8xf32>) -> tensor<8x8xf32> {{
  %c = arith.constant 0.0 : f32
  %w = arith.constant dense<0.5> : tensor<8x8xf32>
  %w2 = arith.constant dense<[{", ".join([_ROW] * 8)}]> : tensor<8x8xf32>
  %e = tensor.empty() : tensor<8x8xf32>
  %z = linalg.fill ins(%c : f32) outs(%e : tensor<8x8xf32>) -> tensor<8x8xf32>
  %r = linalg.matmul ins(%a, %w : tensor<8x8xf32>, tensor<8x8xf32>) outs(%z : tensor<8x8xf32>) -> tensor<8x8xf32> loc("c1")
  %r2 = linalg.matmul ins(%r, %w2 : tensor<8x8xf32>, tensor<8x8xf32>) outs(%z : tensor<8x8xf32>) -> tensor<8x8xf32> loc("c2")
  %r3 = linalg.matmul ins(%r2, %r : tensor<8x8xf32>, tensor<8x8xf32>) outs(%z : tensor<8x8xf32>) -> tensor<8x8xf32> loc("c3")
  return %r3 : tensor<8x8xf32>
}}
"""

# Two sites whose tensors share types, so the lowering batches them into shared kernel
# calls; every tapped tensor is observable: arguments, returned results, and relu(%h),
# which the host recomputes exactly from the returned %h.
TWO_LAYER = """
func.func @main(%x: tensor<8x16xf32>, %w0: tensor<16x16xf32>, %w1: tensor<16x16xf32>)
    -> (tensor<8x16xf32>, tensor<8x16xf32>) {
  %c = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<8x16xf32>
  %z = linalg.fill ins(%c : f32) outs(%e : tensor<8x16xf32>) -> tensor<8x16xf32>
  %h = linalg.matmul ins(%x, %w0 : tensor<8x16xf32>, tensor<16x16xf32>)
                     outs(%z : tensor<8x16xf32>) -> tensor<8x16xf32> loc("fc0")
  %a = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>],
                       iterator_types = ["parallel", "parallel"]}
      ins(%h : tensor<8x16xf32>) outs(%e : tensor<8x16xf32>) {
  ^bb0(%in: f32, %out: f32):
    %r = arith.maximumf %in, %c : f32
    linalg.yield %r : f32
  } -> tensor<8x16xf32>
  %y = linalg.matmul ins(%a, %w1 : tensor<8x16xf32>, tensor<16x16xf32>)
                     outs(%z : tensor<8x16xf32>) -> tensor<8x16xf32> loc("fc1")
  return %h, %y : tensor<8x16xf32>, tensor<8x16xf32>
}
"""

CASES: dict[str, tuple[str, tuple[tuple[int, ...], ...], str]] = {
    "matmul_16x24x8": (matmul_module(16, 24, 8), ((16, 24), (24, 8)), "f32"),
    "matmul_64x128x32": (matmul_module(64, 128, 32), ((64, 128), (128, 32)), "f32"),
    # i8 histogram lanes at their limit: lhs 510x64 and out 510x96 split into slabs of 255
    # indices per lane (the most an unsigned i8 count holds), rhs 64x96 into one of 96.
    "matmul_510x64x96": (matmul_module(510, 64, 96), ((510, 64), (64, 96)), "f32"),
    "batch_matmul_2x8x12x10": (BATCH_MATMUL, ((2, 8, 12), (2, 12, 10)), "f32"),
    "generic_3d_lhs": (GENERIC_3D, ((2, 6, 12), (12, 10)), "f32"),
    "matvec_16x24": (MATVEC, ((16, 24), (24,)), "f32"),
    "stablehlo_dot_general": (DOT_GENERAL, ((2, 8, 12), (2, 12, 10)), "f32"),
    "matmul_f16_16x24x8": (matmul_module(16, 24, 8, dtype="f16"), ((16, 24), (24, 8)), "f16"),
    "matmul_bf16_16x24x8": (matmul_module(16, 24, 8, dtype="bf16"), ((16, 24), (24, 8)), "bf16"),
}
