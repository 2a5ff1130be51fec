// A reader that closes the pipe early (`| head`, here `| true`, which reads nothing) is
// no error: opscope-opt exits 0 without a traceback (lit runs pipelines with pipefail).
// RUN: opscope-opt %s -p 'inject-matmul-stats,lower-opscope' 2> %t.err | true
// RUN: filecheck %s --check-prefix=ERR --allow-empty < %t.err

// ERR-NOT: Traceback
// ERR-NOT: BrokenPipeError
func.func @f(%a: tensor<8x64xf32>, %b: tensor<64x4xf32>, %c: tensor<8x4xf32>) -> tensor<8x4xf32> {
  %r = linalg.matmul ins(%a, %b : tensor<8x64xf32>, tensor<64x4xf32>) outs(%c : tensor<8x4xf32>) -> tensor<8x4xf32>
  return %r : tensor<8x4xf32>
}
