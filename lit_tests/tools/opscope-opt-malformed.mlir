// RUN: not opscope-opt %s -p inject-matmul-stats 2>&1 | filecheck %s
// RUN: not opscope-opt %s -p inject-matmul-stats --split-input-file 2>&1 | filecheck %s

// Malformed MLIR is one line naming the file, line and column, never a traceback; with
// --split-input-file, line numbers stay those of the whole file.

// CHECK:     {{^}}opscope-opt: error: malformed MLIR at {{.*}}opscope-opt-malformed.mlir:[[# @LINE + 10]]:23: use of undeclared SSA value name{{$}}
// CHECK-NOT: {{.}}

func.func @fine(%a: tensor<4x8xf32>) -> tensor<4x8xf32> {
  return %a : tensor<4x8xf32>
}

// -----

func.func @undeclared_value(%a: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %0 = arith.addf %a, %b : tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}
