// RUN: opscope-opt %s -p 'extract-site{site=0}' --split-input-file --verify-diagnostics

// Refusals of extract-site as IR: a site is outlined at its real shapes, so one with a
// dynamic shape is refused naming the site (nothing is rewritten).

func.func @dynamic_rows(%a: tensor<?x8xf32>, %b: tensor<8x3xf32>, %z: tensor<?x3xf32>) -> tensor<?x3xf32> {
  // expected-error @+1 {{extract-site: site 'd' at loc("d") has a dynamic shape (tensor<?x8xf32> x tensor<8x3xf32> -> tensor<?x3xf32>): only static-shaped sites are outlined}}
  %0 = linalg.matmul ins(%a, %b : tensor<?x8xf32>, tensor<8x3xf32>) outs(%z : tensor<?x3xf32>) -> tensor<?x3xf32> loc("d")
  return %0 : tensor<?x3xf32>
}

// -----

// A refusal of the whole module names no op, so no line: it is expected @unknown.
// expected-error @unknown {{extract-site: no matmul site '0' in this module (valid: none: this module has no matmul or convolution site)}}
func.func @no_site(%a: tensor<4xf32>) -> tensor<4xf32> {
  return %a : tensor<4xf32>
}
