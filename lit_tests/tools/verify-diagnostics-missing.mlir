// RUN: not opscope-opt %s -p lower-opscope --verify-diagnostics 2>&1 | filecheck %s

// An expected error that is not produced fails the run, naming the line it designates:
// this stat is valid, so lower-opscope refuses nothing.

// CHECK:      {{^}}{{.*}}verify-diagnostics-missing.mlir:[[# @LINE + 4]]: error: expected error "lower-opscope: duplicate 'min'" was not produced{{$}}
// CHECK-NOT:  {{.}}
func.func @valid_stat(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{lower-opscope: duplicate 'min'}}
  "opscope.stat"(%x) {kind = "min", options = {}, role = "lhs", site = "s"} : (tensor<4x8xf32>) -> ()
  return
}
