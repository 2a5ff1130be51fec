// REQUIRES: iree-run-module
// RUN: opscope-compile %s --iree-hal-target-device=local --iree-hal-local-target-device-backends=llvm-cpu --iree-llvmcpu-target-cpu=host -o %t.vmfb
// RUN: iree-run-module --device=local-task --module=%t.vmfb --function=main --input=4x8xf32=1 --input=8x3xf32=2 | filecheck %s
// RUN: cat %t.vmfb.opscope.json | filecheck %s --check-prefix=MANIFEST

// opscope-compile is iree-compile with the default opscope pipeline
// (inject-matmul-stats,lower-opscope) in front: the module still computes its own
// result first, the statistics come after it, and a sidecar manifest says what each
// element of them is.

// result[0] is the model's own: 8 * (1 * 2) = 16 everywhere.
// CHECK:      EXEC @main
// CHECK-NEXT: result[0]: hal.buffer_view
// CHECK-NEXT: 4x3xf32=[16 16 16][16 16 16][16 16 16][16 16 16]
// The packed sketches of lhs (4x8 ones: min, max, mean, l1, sumsq, nnz = 1 1 1 32 32 32),
// rhs (8x3 twos) and out (4x3 sixteens).
// CHECK-NEXT: result[1]: hal.buffer_view
// CHECK-NEXT: 71xf32=1 1 1 32 32 32 {{.+}}
// CHECK-NEXT: result[2]: hal.buffer_view
// CHECK-NEXT: 74xf32=2 2 2 48 96 24 {{.+}}
// CHECK-NEXT: result[3]: hal.buffer_view
// CHECK-NEXT: 62xf32=16 16 16 192 3072 12 {{.+}}
// CHECK-NOT:  result[4]

// MANIFEST:      "function": "main",
// MANIFEST-NEXT: "num_results": 4,
// MANIFEST-NEXT: "num_original_results": 1,
// MANIFEST:      "result": 1,
// MANIFEST-NEXT: "offset": 0,
// MANIFEST-NEXT: "length": 1,
// MANIFEST-NEXT: "site": "fc1",
// MANIFEST-NEXT: "role": "lhs",
// MANIFEST-NEXT: "stat": "min",
// MANIFEST-NEXT: "numel": 32
// MANIFEST:      "sites": [
// MANIFEST:      "name": "fc1",
// MANIFEST:      "flags": [
// MANIFEST-NEXT: "--iree-hal-target-device=local",
func.func @main(%a: tensor<4x8xf32>, %b: tensor<8x3xf32>) -> tensor<4x3xf32> {
  %zero = arith.constant 0.0 : f32
  %empty = tensor.empty() : tensor<4x3xf32>
  %init = linalg.fill ins(%zero : f32) outs(%empty : tensor<4x3xf32>) -> tensor<4x3xf32>
  %0 = linalg.matmul ins(%a, %b : tensor<4x8xf32>, tensor<8x3xf32>) outs(%init : tensor<4x3xf32>) -> tensor<4x3xf32> loc("fc1")
  return %0 : tensor<4x3xf32>
}
