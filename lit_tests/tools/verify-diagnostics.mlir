// RUN: opscope-opt %s -p lower-opscope --split-input-file --verify-diagnostics

// Every way of designating the line of an expected error, each met exactly (a wrong line
// fails: verify-diagnostics-wrong-line.mlir). lower-opscope refuses a second stat of one
// kind on one tensor, at that op's location.

func.func @next_line(%x: tensor<4x8xf32>) {
  "opscope.stat"(%x) {kind = "min", options = {}, role = "lhs", site = "s"} : (tensor<4x8xf32>) -> ()
  // expected-error @+1 {{lower-opscope: duplicate 'min' for site 's' role lhs}}
  "opscope.stat"(%x) {kind = "min", options = {}, role = "lhs", site = "s"} : (tensor<4x8xf32>) -> ()
  return
}

// -----

func.func @below(%x: tensor<4x8xf32>) {
  "opscope.stat"(%x) {kind = "max", options = {}, role = "lhs", site = "s"} : (tensor<4x8xf32>) -> ()
  // expected-error @below {{duplicate 'max'}}
  "opscope.stat"(%x) {kind = "max", options = {}, role = "lhs", site = "s"} : (tensor<4x8xf32>) -> ()
  return
}

// -----

func.func @above(%x: tensor<4x8xf32>) {
  "opscope.stat"(%x) {kind = "l1", options = {}, role = "lhs", site = "s"} : (tensor<4x8xf32>) -> ()
  "opscope.stat"(%x) {kind = "l1", options = {}, role = "lhs", site = "s"} : (tensor<4x8xf32>) -> ()
  // expected-error @above {{duplicate 'l1'}}
  return
}

// -----

func.func @lines_below_and_above(%x: tensor<4x8xf32>) {
  // expected-error @+3 {{duplicate 'nnz'}}
  "opscope.stat"(%x) {kind = "nnz", options = {}, role = "lhs", site = "s"} : (tensor<4x8xf32>) -> ()

  "opscope.stat"(%x) {kind = "nnz", options = {}, role = "lhs", site = "s"} : (tensor<4x8xf32>) -> ()
  return
}

// -----

func.func @lines_above(%x: tensor<4x8xf32>) {
  "opscope.stat"(%x) {kind = "nnz", options = {}, role = "lhs", site = "s"} : (tensor<4x8xf32>) -> ()
  "opscope.stat"(%x) {kind = "nnz", options = {}, role = "lhs", site = "s"} : (tensor<4x8xf32>) -> ()
  return
  // expected-error @-2 {{duplicate 'nnz'}}
}

// -----

func.func @same_line(%x: tensor<4x8xf32>) {
  "opscope.stat"(%x) {kind = "sumsq", options = {}, role = "lhs", site = "s"} : (tensor<4x8xf32>) -> ()
  "opscope.stat"(%x) {kind = "sumsq", options = {}, role = "lhs", site = "s"} : (tensor<4x8xf32>) -> () // expected-error {{duplicate 'sumsq'}}
  return
}

// -----

// An op located by name only (no file:line): its error is at the one line carrying that
// location, directly or through an alias.

func.func @named_location(%x: tensor<4x8xf32>) {
  "opscope.stat"(%x) {kind = "min", options = {}, role = "lhs", site = "s"} : (tensor<4x8xf32>) -> () loc("first")
  // expected-error @+1 {{duplicate 'min' for site 's' role lhs at loc("second")}}
  "opscope.stat"(%x) {kind = "min", options = {}, role = "lhs", site = "s"} : (tensor<4x8xf32>) -> () loc("second")
  return
}

// -----

func.func @aliased_named_location(%x: tensor<4x8xf32>) {
  "opscope.stat"(%x) {kind = "min", options = {}, role = "lhs", site = "s"} : (tensor<4x8xf32>) -> ()
  // expected-error @+1 {{duplicate 'min' for site 's' role lhs at loc("second")}}
  "opscope.stat"(%x) {kind = "min", options = {}, role = "lhs", site = "s"} : (tensor<4x8xf32>) -> () loc(#second)
  return
}
#second = loc("second")

// -----

// An error naming a function is at the line defining it.

// expected-error @+1 {{lower-opscope: @callee is called by other functions}}
func.func @callee(%t: tensor<4x8xf32>) {
  "opscope.stat"(%t) {kind = "min", options = {}, role = "lhs", site = "s"} : (tensor<4x8xf32>) -> ()
  return
}
func.func @caller(%t: tensor<4x8xf32>) {
  func.call @callee(%t) : (tensor<4x8xf32>) -> ()
  return
}
