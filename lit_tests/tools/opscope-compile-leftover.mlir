// RUN: rm -f %t.vmfb %t.vmfb.opscope.json
// RUN: not opscope-compile %s --opscope-pipeline=inject-matmul-stats --iree-hal-target-device=local --iree-hal-local-target-device-backends=llvm-cpu -o %t.vmfb 2>&1 | filecheck %s
// RUN: %PYTHON -c "import os, sys; sys.exit(any(os.path.exists(p) for p in sys.argv[1:]))" %t.vmfb %t.vmfb.opscope.json

// A pipeline that taps but does not lower leaves opscope.stat ops iree-compile cannot
// take: opscope-compile refuses before compiling, in one line that names the op, the
// site's location and the missing pass, and writes no output.

// CHECK:     {{^}}opscope-compile: error: left-over 'opscope.stat' at loc("fc1"): run the lower-opscope pass before compiling{{$}}
// CHECK-NOT: {{.}}
func.func @main(%a: tensor<4x8xf32>, %b: tensor<8x3xf32>, %c: tensor<4x3xf32>) -> tensor<4x3xf32> {
  %0 = linalg.matmul ins(%a, %b : tensor<4x8xf32>, tensor<8x3xf32>) outs(%c : tensor<4x3xf32>) -> tensor<4x3xf32> loc("fc1")
  return %0 : tensor<4x3xf32>
}
