// RUN: not opscope-opt %s -p lower-opscope --verify-diagnostics 2>&1 | filecheck %s

// A directive that cannot be checked fails the run rather than being skipped: a malformed
// one (an empty text matches every error; a designator needs its sign), one designating
// no line, and warnings, remarks and notes, which opscope-opt never produces. The IR is
// valid, so these are the only problems.

func.func @valid_stat(%x: tensor<4x8xf32>) {
  // CHECK:      {{^}}{{.*}}verify-diagnostics-directives.mlir:[[# @LINE + 1]]: error: malformed directive: write '// expected-error [@+N|@-N|@above|@below|@unknown] {{[{][{]}}text{{[}][}]}}' with a non-empty text{{$}}
  // expected-error @+1 {{}}
  // CHECK-NEXT: {{^}}{{.*}}verify-diagnostics-directives.mlir:[[# @LINE + 1]]: error: malformed directive: {{.*}}
  // expected-error @1 {{duplicate}}
  // CHECK-NEXT: {{^}}{{.*}}verify-diagnostics-directives.mlir:[[# @LINE + 1]]: error: malformed directive: {{.*}}
  // expected-error @+1 duplicate
  // CHECK-NEXT: {{^}}{{.*}}verify-diagnostics-directives.mlir:[[# @LINE + 1]]: error: expected-error @+100 designates no line of the input{{$}}
  // expected-error @+100 {{duplicate}}
  // CHECK-NEXT: {{^}}{{.*}}verify-diagnostics-directives.mlir:[[# @LINE + 1]]: error: expected-warning cannot be checked: opscope-opt produces only errors{{$}}
  // expected-warning @+1 {{duplicate}}
  // CHECK-NEXT: {{^}}{{.*}}verify-diagnostics-directives.mlir:[[# @LINE + 1]]: error: expected-remark cannot be checked: opscope-opt produces only errors{{$}}
  // expected-remark @+1 {{duplicate}}
  // CHECK-NEXT: {{^}}{{.*}}verify-diagnostics-directives.mlir:[[# @LINE + 1]]: error: expected-note cannot be checked: opscope-opt produces only errors{{$}}
  // expected-note @+1 {{duplicate}}
  "opscope.stat"(%x) {kind = "min", options = {}, role = "lhs", site = "s"} : (tensor<4x8xf32>) -> ()
  return
}
// CHECK-NOT:  {{.}}
