// RUN: opscope-opt %s -p sample-rows{stride=4} --split-input-file | filecheck %s
// RUN: opscope-opt %s -p 'sample-rows' --split-input-file | filecheck %s --check-prefix=EXACT

// A per-call tensor is read on rows 0, 4, 8 (ceil(10 / 4) of its 10 rows, the second-to-last
// dimension); the weight (an immutable global) is read whole; two sketches of one tensor share
// one slice; the function records the stride.

// CHECK-LABEL: func.func @main(
// CHECK-SAME:    opscope.row_stride = 4 : i64
// CHECK:         %[[S:.+]] = tensor.extract_slice %arg0[0, 0, 0] [1, 3, 8] [1, 4, 1] : tensor<1x10x8xf32> to tensor<1x3x8xf32>
// CHECK-NEXT:    "opscope.stat"(%[[S]]) {kind = "min", options = {}, role = "lhs", site = "fc1"} : (tensor<1x3x8xf32>) -> ()
// CHECK-NEXT:    "opscope.stat"(%[[S]]) {kind = "max", options = {}, role = "lhs", site = "fc1"} : (tensor<1x3x8xf32>) -> ()
// CHECK-NEXT:    "opscope.stat"(%{{.+}}) {kind = "min", options = {}, role = "rhs", site = "fc1"} : (tensor<8x3xf32>) -> ()
// CHECK-NOT:     tensor.extract_slice
// CHECK:         return

// The default stride 1 changes nothing.
// EXACT-LABEL: func.func @main(
// EXACT-NOT:     opscope.row_stride
// EXACT-NOT:     tensor.extract_slice
util.global private @w = dense<1.5> : tensor<8x3xf32>
func.func @main(%a: tensor<1x10x8xf32>) -> tensor<1x10x8xf32> {
  %wv = util.global.load @w : tensor<8x3xf32>
  "opscope.stat"(%a) {kind = "min", options = {}, role = "lhs", site = "fc1"} : (tensor<1x10x8xf32>) -> ()
  "opscope.stat"(%a) {kind = "max", options = {}, role = "lhs", site = "fc1"} : (tensor<1x10x8xf32>) -> ()
  "opscope.stat"(%wv) {kind = "min", options = {}, role = "rhs", site = "fc1"} : (tensor<8x3xf32>) -> ()
  return %a : tensor<1x10x8xf32>
}

// -----

// A residual statistic's two tensors are sliced alike; a rank-1 tensor is read whole.

// CHECK-LABEL: func.func @pair(
// CHECK:         %[[H:.+]] = tensor.extract_slice %arg0[0, 0] [2, 4] [4, 1] : tensor<8x4xf32> to tensor<2x4xf32>
// CHECK-NEXT:    %[[D:.+]] = tensor.extract_slice %arg1[0, 0] [2, 4] [4, 1] : tensor<8x4xf32> to tensor<2x4xf32>
// CHECK-NEXT:    "opscope.stat"(%[[H]], %[[D]]) {kind = "res_cos"
// CHECK-NEXT:    "opscope.stat"(%arg2) {kind = "min"
func.func @pair(%h: tensor<8x4xf32>, %d: tensor<8x4xf32>, %v: tensor<5xf32>) {
  "opscope.stat"(%h, %d) {kind = "res_cos", options = {}, role = "residual", site = "layers.0.attn"} : (tensor<8x4xf32>, tensor<8x4xf32>) -> ()
  "opscope.stat"(%v) {kind = "min", options = {}, role = "lhs", site = "v"} : (tensor<5xf32>) -> ()
  return
}
