// RUN: opscope-opt %s -p 'factor-weight{rank=7 sites=^fc}' --split-input-file --verify-diagnostics
// RUN: not opscope-opt %s -p 'factor-weight{rank=-1}' 2>&1 | filecheck %s --check-prefix=NEG
// RUN: not opscope-opt %s -p 'factor-weight{energy=1.5}' 2>&1 | filecheck %s --check-prefix=ENERGY

// Refusals of factor-weight. As IR: a rank larger than the weight's smaller side, and a
// site the `sites` regex names whose rhs is no constant weight (an argument, a computed
// tensor): named explicitly, it is an error, not a skip; the pass refuses before it
// rewrites anything. As options: a rank >= 0, an energy in (0, 1] (checked when it runs).

// NEG: opscope-opt: error: factor-weight: option 'rank' expects an integer >= 0 (0: the smallest rank keeping 'energy' of the weight), got -1
// ENERGY: opscope-opt: error: factor-weight: option 'energy' expects a fraction in (0, 1] of the weight's squared Frobenius norm, got 1.5

func.func @rank_exceeds_the_weight(%x: tensor<3x8xf32>, %c: tensor<3x6xf32>) -> tensor<3x6xf32> {
  %w = util.global.load @w : tensor<8x6xf32>
  // expected-error @+1 {{factor-weight: site 'fc' at loc("fc"): rank 7 exceeds the weight's 8×6 matrix; choose rank < min(K,N) = 6}}
  %0 = linalg.matmul ins(%x, %w : tensor<3x8xf32>, tensor<8x6xf32>) outs(%c : tensor<3x6xf32>) -> tensor<3x6xf32> loc("fc")
  return %0 : tensor<3x6xf32>
}
util.global private @w = dense<1.0> : tensor<8x6xf32>

// -----

func.func @argument_weight_named_explicitly(%x: tensor<3x8xf32>, %w: tensor<8x6xf32>, %c: tensor<3x6xf32>) -> tensor<3x6xf32> {
  // expected-error @+1 {{factor-weight: site 'fc.arg' at loc("fc.arg"): its rhs is a function argument, not a constant weight; narrow sites='^fc' to sites with a stored weight}}
  %0 = linalg.matmul ins(%x, %w : tensor<3x8xf32>, tensor<8x6xf32>) outs(%c : tensor<3x6xf32>) -> tensor<3x6xf32> loc("fc.arg")
  return %0 : tensor<3x6xf32>
}

// -----

func.func @computed_rhs_named_explicitly(%q: tensor<2x4x8xf32>, %xt: tensor<2x8x8xf32>, %wk: tensor<2x8x4xf32>, %c8: tensor<2x8x4xf32>, %c: tensor<2x4x4xf32>) -> tensor<2x4x4xf32> {
  %kt = linalg.batch_matmul ins(%xt, %wk : tensor<2x8x8xf32>, tensor<2x8x4xf32>) outs(%c8 : tensor<2x8x4xf32>) -> tensor<2x8x4xf32> loc("k")
  // expected-error @+1 {{factor-weight: site 'fc.scores' at loc("fc.scores"): its rhs is computed (an activation, as attention's k in q·kᵀ), not a constant weight}}
  %0 = linalg.batch_matmul ins(%q, %kt : tensor<2x4x8xf32>, tensor<2x8x4xf32>) outs(%c : tensor<2x4x4xf32>) -> tensor<2x4x4xf32> loc("fc.scores")
  return %0 : tensor<2x4x4xf32>
}
