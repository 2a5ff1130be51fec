// RUN: opscope-opt %s -p 'fakequant-weights{group=5}' --split-input-file --verify-diagnostics
// RUN: not opscope-opt %s -p 'fakequant-weights{bits=17}' 2>&1 | filecheck %s --check-prefix=BITS
// RUN: not opscope-opt %s -p 'fakequant-weights{scope=per-token}' 2>&1 | filecheck %s --check-prefix=SCOPE
// RUN: not opscope-opt %s -p 'fakequant-weights{group=-1}' 2>&1 | filecheck %s --check-prefix=NEG

// Refusals of fakequant-weights. As IR: groups of g consecutive K elements need K % g == 0,
// and the pass refuses (naming the site) before it rewrites anything. As options: bits in
// 2..16, a known scope, a group size >= 0.

// BITS: opscope-opt: error: fakequant-weights: option 'bits' expects an integer in 2..16, got 17
// SCOPE: opscope-opt: error: fakequant-weights: option 'scope' expects one of per-channel, per-tensor, got 'per-token'
// NEG: opscope-opt: error: fakequant-weights: option 'group' expects a group size >= 0 (0: all of K), got -1

func.func @k_not_a_multiple_of_group(%x: tensor<3x8xf32>, %c: tensor<3x4xf32>) -> tensor<3x4xf32> {
  %w = arith.constant dense<[[1.0, 2.0, 3.0, 4.0], [1.0, 2.0, 3.0, 4.0], [1.0, 2.0, 3.0, 4.0], [1.0, 2.0, 3.0, 4.0],
                             [1.0, 2.0, 3.0, 4.0], [1.0, 2.0, 3.0, 4.0], [1.0, 2.0, 3.0, 4.0], [1.0, 2.0, 3.0, -4.5]]> : tensor<8x4xf32>
  // expected-error @+1 {{fakequant-weights: site 'fc1' at loc("fc1"): K = 8 is not a multiple of group=5}}
  %0 = linalg.matmul ins(%x, %w : tensor<3x8xf32>, tensor<8x4xf32>) outs(%c : tensor<3x4xf32>) -> tensor<3x4xf32> loc("fc1")
  return %0 : tensor<3x4xf32>
}

// -----

func.func @unnamed_conv_site_is_named_by_kind(%x: tensor<1x2x4x4xf32>, %o: tensor<1x4x2x2xf32>) -> tensor<1x4x2x2xf32> {
  %w = util.global.load @f : tensor<4x2x3x3xf32>
  // expected-error @+1 {{fakequant-weights: site 'conv_2d_nchw_fchw#0' at loc(}}
  %0 = linalg.conv_2d_nchw_fchw {dilations = dense<1> : tensor<2xi64>, strides = dense<1> : tensor<2xi64>} ins(%x, %w : tensor<1x2x4x4xf32>, tensor<4x2x3x3xf32>) outs(%o : tensor<1x4x2x2xf32>) -> tensor<1x4x2x2xf32>
  return %0 : tensor<1x4x2x2xf32>
}
util.global private @f = dense<1.0> : tensor<4x2x3x3xf32>
