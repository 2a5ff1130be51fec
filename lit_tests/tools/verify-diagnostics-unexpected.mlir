// RUN: not opscope-opt %s -p lower-opscope --verify-diagnostics 2>&1 | filecheck %s

// An error that no expected-error names fails the run, at the line it is at.

// CHECK:      {{^}}{{.*}}verify-diagnostics-unexpected.mlir:[[# @LINE + 4]]: error: unexpected error: lower-opscope: duplicate 'min' for site 's' role lhs at loc("{{.*}}verify-diagnostics-unexpected.mlir":[[# @LINE + 4]]:3){{$}}
// CHECK-NOT:  {{.}}
func.func @duplicate_stat(%x: tensor<4x8xf32>) {
  "opscope.stat"(%x) {kind = "min", options = {}, role = "lhs", site = "s"} : (tensor<4x8xf32>) -> ()
  "opscope.stat"(%x) {kind = "min", options = {}, role = "lhs", site = "s"} : (tensor<4x8xf32>) -> ()
  return
}
