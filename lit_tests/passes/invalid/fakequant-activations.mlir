// RUN: not opscope-opt %s -p 'fakequant-activations{bits=1}' 2>&1 | filecheck %s --check-prefix=BITS
// RUN: not opscope-opt %s -p 'fakequant-activations{scope=per-row}' 2>&1 | filecheck %s --check-prefix=SCOPE
// RUN: not opscope-opt %s -p 'fakequant-activations{sites=*}' 2>&1 | filecheck %s --check-prefix=REGEX

// Refusals of fakequant-activations: only its options (every site it cannot quantize is
// skipped with a warning, see ../fakequant-activations.mlir).

// BITS: opscope-opt: error: fakequant-activations: option 'bits' expects an integer in 2..16, got 1
// SCOPE: opscope-opt: error: fakequant-activations: option 'scope' expects one of per-token, per-channel, got 'per-row'
// REGEX: opscope-opt: error: fakequant-activations: bad 'sites' regex '*': nothing to repeat at position 0

func.func @any_site(%x: tensor<3x8xf32>, %w: tensor<8x4xf32>, %c: tensor<3x4xf32>) -> tensor<3x4xf32> {
  %0 = linalg.matmul ins(%x, %w : tensor<3x8xf32>, tensor<8x4xf32>) outs(%c : tensor<3x4xf32>) -> tensor<3x4xf32> loc("fc1")
  return %0 : tensor<3x4xf32>
}
