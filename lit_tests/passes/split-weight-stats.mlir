// RUN: opscope-opt %s -p split-weight-stats --split-input-file | filecheck %s
// RUN: opscope-opt %s -p 'split-weight-stats,lower-opscope' --split-input-file | filecheck %s --check-prefix=LOWERED
// RUN: opscope-opt %s -p 'inject-matmul-stats{hist-bins=0 per-channel=false per-position=false adjacency=false},split-weight-stats' --split-input-file | filecheck %s --check-prefix=INJECTED

// The weight (an immutable global) keeps its sketches, moved into @main$weights, which
// loads it again and takes no arguments; @main keeps the lhs and out sketches.

// CHECK-LABEL: func.func @main(
// CHECK:         linalg.matmul
// CHECK-NOT:     role = "rhs"
// CHECK:         {kind = "min", options = {}, role = "lhs", site = "fc1"}
// CHECK-NOT:     role = "rhs"
// CHECK:         return
// CHECK-LABEL: func.func @main$weights() {
// CHECK-NEXT:    %[[W:.+]] = util.global.load @w : tensor<8x3xf32>
// CHECK-NEXT:    "opscope.stat"(%[[W]]) {kind = "min", options = {}, role = "rhs", site = "fc1"}
// CHECK-NEXT:    "opscope.stat"(%[[W]]) {kind = "elemsig", options = {}, role = "rhs", site = "fc1"}
// CHECK-NEXT:    return
// CHECK-NEXT:  }

// Through inject-matmul-stats, every rhs sketch moves (its 8 and the 2 written above), none
// of the lhs or out ones.
// INJECTED-LABEL: func.func @main(
// INJECTED-NOT:     role = "rhs"
// INJECTED:         role = "lhs"
// INJECTED-NOT:     role = "rhs"
// INJECTED-LABEL: func.func @main$weights() {
// INJECTED-COUNT-10: role = "rhs", site = "fc1"
// INJECTED-NEXT:    return

// After lowering each function returns its own sketches: @main one packed result of the
// activations (lhs, out), @main$weights one of the weight.
// LOWERED-LABEL: func.func @main(
// LOWERED-SAME:    -> (tensor<4x3xf32>, tensor<{{[0-9]+}}xf32> {opscope.pack = [{{.*}}role = "lhs"{{.*}}role = "out"
// LOWERED-NOT:     role = "rhs"
// LOWERED-LABEL: func.func @main$weights()
// LOWERED-SAME:    -> (tensor<17xf32> {opscope.pack = [{length = 1 : i64, numel = 24 : i64, offset = 0 : i64, role = "rhs", site = "fc1", stat = "min"}
util.global private @w = dense<1.5> : tensor<8x3xf32>
func.func @main(%a: tensor<4x8xf32>) -> tensor<4x3xf32> {
  %zero = arith.constant 0.0 : f32
  %wv = util.global.load @w : tensor<8x3xf32>
  %empty = tensor.empty() : tensor<4x3xf32>
  %init = linalg.fill ins(%zero : f32) outs(%empty : tensor<4x3xf32>) -> tensor<4x3xf32>
  %0 = linalg.matmul ins(%a, %wv : tensor<4x8xf32>, tensor<8x3xf32>) outs(%init : tensor<4x3xf32>) -> tensor<4x3xf32> loc("fc1")
  "opscope.stat"(%a) {kind = "min", options = {}, role = "lhs", site = "fc1"} : (tensor<4x8xf32>) -> ()
  "opscope.stat"(%wv) {kind = "min", options = {}, role = "rhs", site = "fc1"} : (tensor<8x3xf32>) -> ()
  "opscope.stat"(%wv) {kind = "elemsig", options = {}, role = "rhs", site = "fc1"} : (tensor<8x3xf32>) -> ()
  "opscope.stat"(%0) {kind = "min", options = {}, role = "out", site = "fc1"} : (tensor<4x3xf32>) -> ()
  return %0 : tensor<4x3xf32>
}

// -----

// A transposed weight (nn.Linear's W^T) is a constant expression: the transpose and what it
// reads are copied into @lin$weights, once each however many sketches read them.

// CHECK-LABEL: func.func @lin(
// CHECK:         linalg.transpose
// CHECK:         linalg.matmul
// CHECK-NOT:     role = "rhs"
// CHECK:         return
// CHECK-LABEL: func.func @lin$weights() {
// CHECK-NEXT:    util.global.load @wt
// CHECK-NEXT:    tensor.empty
// CHECK-NEXT:    %[[T:.+]] = linalg.transpose
// CHECK-NOT:     linalg.transpose
// CHECK-NEXT:    "opscope.stat"(%[[T]]) {kind = "min", options = {}, role = "rhs", site = "proj"}
// CHECK-NEXT:    "opscope.stat"(%[[T]]) {kind = "max", options = {}, role = "rhs", site = "proj"}
util.global private @wt = dense<0.5> : tensor<3x8xf32>
func.func @lin(%a: tensor<4x8xf32>) -> tensor<4x3xf32> {
  %zero = arith.constant 0.0 : f32
  %w = util.global.load @wt : tensor<3x8xf32>
  %te = tensor.empty() : tensor<8x3xf32>
  %t = linalg.transpose ins(%w : tensor<3x8xf32>) outs(%te : tensor<8x3xf32>) permutation = [1, 0]
  %empty = tensor.empty() : tensor<4x3xf32>
  %init = linalg.fill ins(%zero : f32) outs(%empty : tensor<4x3xf32>) -> tensor<4x3xf32>
  %0 = linalg.matmul ins(%a, %t : tensor<4x8xf32>, tensor<8x3xf32>) outs(%init : tensor<4x3xf32>) -> tensor<4x3xf32> loc("proj")
  "opscope.stat"(%a) {kind = "min", options = {}, role = "lhs", site = "proj"} : (tensor<4x8xf32>) -> ()
  "opscope.stat"(%t) {kind = "min", options = {}, role = "rhs", site = "proj"} : (tensor<8x3xf32>) -> ()
  "opscope.stat"(%t) {kind = "max", options = {}, role = "rhs", site = "proj"} : (tensor<8x3xf32>) -> ()
  return %0 : tensor<4x3xf32>
}

// -----

// Weights passed as arguments are no constants: nothing moves, no new function.

// CHECK-LABEL: func.func @args(
// CHECK:         role = "rhs"
// CHECK-NOT:   func.func @args$weights
func.func @args(%a: tensor<4x8xf32>, %w: tensor<8x3xf32>) -> tensor<4x3xf32> {
  %zero = arith.constant 0.0 : f32
  %empty = tensor.empty() : tensor<4x3xf32>
  %init = linalg.fill ins(%zero : f32) outs(%empty : tensor<4x3xf32>) -> tensor<4x3xf32>
  %0 = linalg.matmul ins(%a, %w : tensor<4x8xf32>, tensor<8x3xf32>) outs(%init : tensor<4x3xf32>) -> tensor<4x3xf32> loc("fc2")
  "opscope.stat"(%w) {kind = "min", options = {}, role = "rhs", site = "fc2"} : (tensor<8x3xf32>) -> ()
  return %0 : tensor<4x3xf32>
}
