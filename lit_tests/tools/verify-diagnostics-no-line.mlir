// RUN: not opscope-opt %s -p 'extract-site{site=0}' --split-input-file --verify-diagnostics 2>&1 | filecheck %s

// An error that names no line of the input (here a refusal of the whole module) matches
// only `expected-error @unknown`, and an error at a line never matches @unknown. The
// last case is met and prints nothing.

// CHECK:      {{^}}{{.*}}verify-diagnostics-no-line.mlir: error: unexpected error at no line: extract-site: no matmul site '0' in this module {{.*}} (an error naming no line of the input matches only 'expected-error @unknown'){{$}}
// CHECK-NEXT: {{^}}{{.*}}verify-diagnostics-no-line.mlir:[[# @LINE + 2]]: error: expected error "extract-site: no matmul site '0'" was not produced{{$}}
// expected-error @+1 {{extract-site: no matmul site '0'}}
func.func @no_site_expected_on_a_line(%a: tensor<4xf32>) -> tensor<4xf32> {
  return %a : tensor<4xf32>
}

// -----

// CHECK-NEXT: {{^}}{{.*}}verify-diagnostics-no-line.mlir:[[# @LINE + 4]]: error: unexpected error: extract-site: site 'd' at loc("d") has a dynamic shape {{.*}} (the expected-error with this text says @unknown, but the error is at this line){{$}}
// CHECK-NEXT: {{^}}{{.*}}verify-diagnostics-no-line.mlir:[[# @LINE + 2]]: error: expected error @unknown "extract-site: site 'd'" was not produced{{$}}
func.func @site_error_expected_at_no_line(%a: tensor<?x8xf32>, %b: tensor<8x3xf32>, %z: tensor<?x3xf32>) -> tensor<?x3xf32> {
  // expected-error @unknown {{extract-site: site 'd'}}
  %0 = linalg.matmul ins(%a, %b : tensor<?x8xf32>, tensor<8x3xf32>) outs(%z : tensor<?x3xf32>) -> tensor<?x3xf32> loc("d")
  return %0 : tensor<?x3xf32>
}

// -----

// expected-error @unknown {{extract-site: no matmul site '0'}}
func.func @no_site_expected_at_no_line(%a: tensor<4xf32>) -> tensor<4xf32> {
  return %a : tensor<4xf32>
}
// CHECK-NOT:  {{.}}
