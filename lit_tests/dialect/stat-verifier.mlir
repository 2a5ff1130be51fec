// RUN: opscope-opt %s -p lower-opscope --split-input-file --verify-diagnostics

// What `verify_stat` (dialect/ops.py) refuses, seen through lower-opscope.

func.func @unknown_kind(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{opscope.stat: unknown kind 'median' (expected one of min, max, mean, l1, sumsq, nnz, kurtosis, hist, elemsig, chan_maxabs, chan_outlier, pos_sumsq, adj_sumsq, attn_qmax, attn_krecv, attn_entropy, gate_top2, route_load, res_a_sumsq, res_b_sumsq, res_cos)}}
  "opscope.stat"(%x) {kind = "median", options = {}, role = "lhs", site = "s"} : (tensor<4x8xf32>) -> ()
  return
}

// -----

func.func @unknown_role(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{opscope.stat: unknown role 'weight' (expected one of lhs, rhs, out, attn, gate, route, residual)}}
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

// -----

// Inference-dynamics statistics: a residual statistic reads two tensors of one type, the
// others one; route_load counts integer indices into `experts` bins.

func.func @residual_needs_two(%h: tensor<4x8xf32>) {
  // expected-error @+1 {{opscope.stat: res_cos expects two operands and no results}}
  "opscope.stat"(%h) {kind = "res_cos", options = {}, role = "residual", site = "s"} : (tensor<4x8xf32>) -> ()
  return
}

// -----

func.func @residual_types_differ(%h: tensor<4x8xf32>, %d: tensor<4x8xf16>) {
  // expected-error @+1 {{opscope.stat: res_a_sumsq needs two tensors of one type, got tensor<4x8xf32> and tensor<4x8xf16>}}
  "opscope.stat"(%h, %d) {kind = "res_a_sumsq", options = {}, role = "residual", site = "s"} : (tensor<4x8xf32>, tensor<4x8xf16>) -> ()
  return
}

// -----

func.func @route_load_needs_experts(%i: tensor<8x2xi64>) {
  // expected-error @+1 {{opscope.stat: route_load needs options {experts = E} with E > 0}}
  "opscope.stat"(%i) {kind = "route_load", options = {}, role = "route", site = "s"} : (tensor<8x2xi64>) -> ()
  return
}

// -----

func.func @route_load_of_floats(%i: tensor<8x2xf32>) {
  // expected-error @+1 {{opscope.stat: route_load counts integer expert indices, or a mask's nonzeros with options axis = its experts' dim, got tensor<8x2xf32>}}
  "opscope.stat"(%i) {kind = "route_load", options = {experts = 4}, role = "route", site = "s"} : (tensor<8x2xf32>) -> ()
  return
}

// -----

func.func @attention_of_a_vector(%p: tensor<8xf32>) {
  // expected-error @+1 {{opscope.stat: attn_qmax needs probabilities of rank >= 2, got tensor<8xf32>}}
  "opscope.stat"(%p) {kind = "attn_qmax", options = {}, role = "attn", site = "s"} : (tensor<8xf32>) -> ()
  return
}

// -----

func.func @mixed_on_one_tensor(%p: tensor<8x8xf32>) {
  "opscope.stat"(%p) {kind = "max", options = {}, role = "attn", site = "s"} : (tensor<8x8xf32>) -> ()
  // expected-error @+1 {{lower-opscope: site 's' role attn mixes sketch and inference-dynamics statistics of one tensor}}
  "opscope.stat"(%p) {kind = "attn_qmax", options = {}, role = "attn", site = "s"} : (tensor<8x8xf32>) -> ()
  return
}
