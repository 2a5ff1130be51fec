// RUN: not opscope-opt %s -p lower-opscope --split-input-file --verify-diagnostics 2>&1 | filecheck %s

// An expected error whose text matches but whose line does not fails the run, whatever
// locates the error: a file:line:col, a name written on one line (`loc("second")`), a
// function's symbol. A name written on two lines locates nothing, so an error at it has
// no line and a line cannot be expected for it. Each case prints the error where it is,
// then the expectation it did not meet.

// CHECK:      {{^}}{{.*}}verify-diagnostics-wrong-line.mlir:[[# @LINE + 5]]: error: unexpected error: lower-opscope: duplicate 'min' {{.*}} (the expected-error with this text designates line [[# @LINE + 6]]){{$}}
// CHECK-NEXT: {{^}}{{.*}}verify-diagnostics-wrong-line.mlir:[[# @LINE + 5]]: error: expected error "lower-opscope: duplicate 'min'" was not produced{{$}}
func.func @file_location(%x: tensor<4x8xf32>) {
  "opscope.stat"(%x) {kind = "min", options = {}, role = "lhs", site = "s"} : (tensor<4x8xf32>) -> ()
  // expected-error @+2 {{lower-opscope: duplicate 'min'}}
  "opscope.stat"(%x) {kind = "min", options = {}, role = "lhs", site = "s"} : (tensor<4x8xf32>) -> ()
  return
}

// -----

// CHECK-NEXT: {{^}}{{.*}}verify-diagnostics-wrong-line.mlir:[[# @LINE + 5]]: error: unexpected error: lower-opscope: duplicate 'min' for site 's' role lhs at loc("second") (the expected-error with this text designates line [[# @LINE + 3]]){{$}}
// CHECK-NEXT: {{^}}{{.*}}verify-diagnostics-wrong-line.mlir:[[# @LINE + 2]]: error: expected error "at loc("second")" was not produced{{$}}
func.func @named_location(%x: tensor<4x8xf32>) {
  "opscope.stat"(%x) {kind = "min", options = {}, role = "lhs", site = "s"} : (tensor<4x8xf32>) -> () loc("first")
  // expected-error @-1 {{at loc("second")}}
  "opscope.stat"(%x) {kind = "min", options = {}, role = "lhs", site = "s"} : (tensor<4x8xf32>) -> () loc("second")
  return
}

// -----

// CHECK-NEXT: {{^}}{{.*}}verify-diagnostics-wrong-line.mlir:[[# @LINE + 3]]: error: unexpected error: lower-opscope: @callee is called by other functions; {{.*}} (the expected-error with this text designates line [[# @LINE + 4]]){{$}}
// CHECK-NEXT: {{^}}{{.*}}verify-diagnostics-wrong-line.mlir:[[# @LINE + 3]]: error: expected error "@callee is called by other functions" was not produced{{$}}
// expected-error @+2 {{@callee is called by other functions}}
func.func @callee(%t: tensor<4x8xf32>) {
  "opscope.stat"(%t) {kind = "min", options = {}, role = "lhs", site = "s"} : (tensor<4x8xf32>) -> ()
  return
}
func.func @caller(%t: tensor<4x8xf32>) {
  func.call @callee(%t) : (tensor<4x8xf32>) -> ()
  return
}

// -----

// CHECK-NEXT: {{^}}{{.*}}verify-diagnostics-wrong-line.mlir: error: unexpected error at no line: lower-opscope: duplicate 'min' for site 's' role lhs at loc("same") (an error naming no line of the input matches only 'expected-error @unknown'){{$}}
// CHECK-NEXT: {{^}}{{.*}}verify-diagnostics-wrong-line.mlir:[[# @LINE + 4]]: error: expected error "at loc("same")" was not produced{{$}}
func.func @name_on_two_lines(%x: tensor<4x8xf32>) {
  "opscope.stat"(%x) {kind = "min", options = {}, role = "lhs", site = "s"} : (tensor<4x8xf32>) -> () loc("same")
  // expected-error @+1 {{at loc("same")}}
  "opscope.stat"(%x) {kind = "min", options = {}, role = "lhs", site = "s"} : (tensor<4x8xf32>) -> () loc("same")
  return
}
// CHECK-NOT:  {{.}}
