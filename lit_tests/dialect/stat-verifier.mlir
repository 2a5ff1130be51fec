// RUN: opscope-opt %s -p lower-opscope --split-input-file --verify-diagnostics

// What `verify_stat` (dialect/ops.py) refuses, seen through lower-opscope.

func.func @unknown_kind(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{opscope.stat: unknown kind 'median' (expected one of min, max, mean, l1, sumsq, nnz, kurtosis, hist, elemsig, chan_maxabs, chan_outlier, pos_sumsq, adj_sumsq)}}
  "opscope.stat"(%x) {kind = "median", options = {}, role = "lhs", site = "s"} : (tensor<4x8xf32>) -> ()
  return
}

// -----

func.func @unknown_role(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{opscope.stat: unknown role 'weight' (expected one of lhs, rhs, out)}}
  "opscope.stat"(%x) {kind = "min", options = {}, role = "weight", site = "s"} : (tensor<4x8xf32>) -> ()
  return
}

// -----

func.func @missing_attribute(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{opscope.stat: missing attribute 'options'}}
  "opscope.stat"(%x) {kind = "min", role = "lhs", site = "s"} : (tensor<4x8xf32>) -> ()
  return
}

// -----

func.func @dynamic_shape(%x: tensor<?x8xf32>) {
  // expected-error @+1 {{opscope.stat: dynamic shape tensor<?x8xf32> is not supported}}
  "opscope.stat"(%x) {kind = "min", options = {}, role = "lhs", site = "s"} : (tensor<?x8xf32>) -> ()
  return
}

// -----

func.func @integer_tensor(%x: tensor<4x8xi32>) {
  // expected-error @+1 {{opscope.stat: unsupported element type i32 (expected f32, f16 or bf16)}}
  "opscope.stat"(%x) {kind = "min", options = {}, role = "lhs", site = "s"} : (tensor<4x8xi32>) -> ()
  return
}

// -----

func.func @hist_without_options(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{opscope.stat: hist needs options ['bins', 'hi', 'lo', 'normalize']}}
  "opscope.stat"(%x) {kind = "hist", options = {}, role = "lhs", site = "s"} : (tensor<4x8xf32>) -> ()
  return
}

// -----

func.func @hist_with_empty_range(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{opscope.stat: hist needs bins > 0 and lo < hi}}
  "opscope.stat"(%x) {kind = "hist", options = {bins = 8 : i64, hi = 1.0 : f32, lo = 1.0 : f32, normalize = false}, role = "lhs", site = "s"} : (tensor<4x8xf32>) -> ()
  return
}

// -----

func.func @duplicate_kind(%x: tensor<4x8xf32>) {
  "opscope.stat"(%x) {kind = "min", options = {}, role = "lhs", site = "s"} : (tensor<4x8xf32>) -> ()
  // expected-error @+1 {{lower-opscope: duplicate 'min' for site 's' role lhs}}
  "opscope.stat"(%x) {kind = "min", options = {}, role = "lhs", site = "s"} : (tensor<4x8xf32>) -> ()
  return
}
