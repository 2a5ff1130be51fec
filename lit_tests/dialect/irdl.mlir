// RUN: opscope-opt %s -p inject-matmul-stats | iree-opt --irdl-file=%irdl | filecheck %s
// RUN: opscope-opt %s -p inject-matmul-stats | not iree-opt 2>&1 | filecheck %s --check-prefix=NO-IRDL
// RUN: opscope-opt %s -p inject-matmul-stats,lower-opscope | iree-opt | filecheck %s --check-prefix=LOWERED

// Stock iree-opt, given only the IRDL definition (dialect/opscope.irdl.mlir), parses and
// verifies every op inject-matmul-stats writes: all 13 kinds, all three roles, hist's
// options. After lower-opscope the IR needs no definition at all.

// CHECK-LABEL: func.func @taps_verify_against_irdl(
// CHECK-COUNT-13: "opscope.stat"(%{{.+}}) {kind = "{{[a-z_0-9]+}}", options = {{.+}}, role = "lhs", site = "fc1"} : (tensor<4x8xf32>) -> ()
// CHECK-COUNT-13: "opscope.stat"(%{{.+}}) {kind = "{{[a-z_0-9]+}}", options = {{.+}}, role = "rhs", site = "fc1"} : (tensor<8x3xf32>) -> ()
// CHECK-COUNT-13: "opscope.stat"(%{{.+}}) {kind = "{{[a-z_0-9]+}}", options = {{.+}}, role = "out", site = "fc1"} : (tensor<4x3xf32>) -> ()
// CHECK-NEXT:   return

// Without the definition, the same IR is rejected.
// NO-IRDL: error: operation being parsed with an unregistered dialect

// LOWERED-LABEL: func.func @taps_verify_against_irdl(
// LOWERED-NOT:   opscope.stat
// LOWERED:       return
func.func @taps_verify_against_irdl(%a: tensor<4x8xf32>, %b: tensor<8x3xf32>, %c: tensor<4x3xf32>) -> tensor<4x3xf32> {
  %0 = linalg.matmul ins(%a, %b : tensor<4x8xf32>, tensor<8x3xf32>) outs(%c : tensor<4x3xf32>) -> tensor<4x3xf32> loc("fc1")
  return %0 : tensor<4x3xf32>
}
