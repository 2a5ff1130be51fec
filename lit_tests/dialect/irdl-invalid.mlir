// RUN: not iree-opt --irdl-file=%irdl --split-input-file %s 2>&1 | filecheck %s

// The IRDL definition rejects what the Python verifier (dialect/ops.py) rejects in the
// op's attributes: an unknown kind or role, a missing attribute, a result.

// CHECK: irdl-invalid.mlir:[[# @LINE + 2]]:3: error: '"median"' does not satisfy the constraint
func.func @unknown_kind(%a: tensor<4x8xf32>) {
  "opscope.stat"(%a) {kind = "median", options = {}, role = "lhs", site = "fc1"} : (tensor<4x8xf32>) -> ()
  return
}

// -----

// CHECK: irdl-invalid.mlir:[[# @LINE + 2]]:3: error: '"weight"' does not satisfy the constraint
func.func @unknown_role(%a: tensor<4x8xf32>) {
  "opscope.stat"(%a) {kind = "min", options = {}, role = "weight", site = "fc1"} : (tensor<4x8xf32>) -> ()
  return
}

// -----

// CHECK: irdl-invalid.mlir:[[# @LINE + 2]]:3: error: 'opscope.stat' op attribute "options" is expected but not provided
func.func @missing_options(%a: tensor<4x8xf32>) {
  "opscope.stat"(%a) {kind = "min", role = "lhs", site = "fc1"} : (tensor<4x8xf32>) -> ()
  return
}

// -----

// CHECK: irdl-invalid.mlir:[[# @LINE + 2]]:8: error:
func.func @stat_has_no_result(%a: tensor<4x8xf32>) {
  %0 = "opscope.stat"(%a) {kind = "min", options = {}, role = "lhs", site = "fc1"} : (tensor<4x8xf32>) -> i32
  return
}

// -----

// CHECK: irdl-invalid.mlir:[[# @LINE + 2]]:3: error:
func.func @site_is_a_string(%a: tensor<4x8xf32>) {
  "opscope.stat"(%a) {kind = "min", options = {}, role = "lhs", site = 3 : i64} : (tensor<4x8xf32>) -> ()
  return
}
