// RUN: opscope-opt %s --emit-bytecode -o %t.mlirbc
// RUN: opscope-opt %t.mlirbc -p inject-matmul-stats | filecheck %s
// RUN: opscope-opt %s -p inject-matmul-stats --emit-bytecode | opscope-opt -p lower-opscope --print-debuginfo | filecheck %s --check-prefix=PIPED

// MLIR bytecode in and out, from a file or through a pipe, keeps locations, so sites
// keep the names their locations give them.

// CHECK-LABEL: func.func @bytecode_keeps_site_names(
// CHECK-SAME:      name = "fc1"
// CHECK:       linalg.matmul
// CHECK-NEXT:  "opscope.stat"(%{{.+}}) {kind = "min", options = {}, role = "lhs", site = "fc1"}

// PIPED-LABEL: func.func @bytecode_keeps_site_names(
// PIPED-SAME:      {opscope.pack = [{length = 1 : i64, numel = 32 : i64, offset = 0 : i64, role = "lhs", site = "fc1", stat = "min"}
// PIPED:       linalg.matmul {{.+}} loc(#[[FC1:loc[0-9]+]])
// PIPED:       call @opscope_stats_{{.+}} loc(#[[FC1]])
// PIPED:       #[[FC1]] = loc("fc1")
func.func @bytecode_keeps_site_names(%a: tensor<4x8xf32>, %b: tensor<8x3xf32>, %c: tensor<4x3xf32>) -> tensor<4x3xf32> {
  %0 = linalg.matmul ins(%a, %b : tensor<4x8xf32>, tensor<8x3xf32>) outs(%c : tensor<4x3xf32>) -> tensor<4x3xf32> loc("fc1")
  return %0 : tensor<4x3xf32>
}
