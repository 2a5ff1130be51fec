// RUN: not opscope-opt %s -p lower-opscope --verify-diagnostics 2>&1 | filecheck %s

// An expected error on the right line but with text the error does not contain fails the
// run twice over: the error is unexpected, the expectation unmet.

// CHECK:      {{^}}{{.*}}verify-diagnostics-wrong-text.mlir:[[# @LINE + 6]]: error: unexpected error: lower-opscope: duplicate 'min' for site 's' role lhs at loc("{{.*}}":[[# @LINE + 6]]:3){{$}}
// CHECK-NEXT: {{^}}{{.*}}verify-diagnostics-wrong-text.mlir:[[# @LINE + 5]]: error: expected error "lower-opscope: duplicate 'max'" was not produced{{$}}
// CHECK-NOT:  {{.}}
func.func @duplicate_stat(%x: tensor<4x8xf32>) {
  "opscope.stat"(%x) {kind = "min", options = {}, role = "lhs", site = "s"} : (tensor<4x8xf32>) -> ()
  // expected-error @+1 {{lower-opscope: duplicate 'max'}}
  "opscope.stat"(%x) {kind = "min", options = {}, role = "lhs", site = "s"} : (tensor<4x8xf32>) -> ()
  return
}
