// RUN: opscope-opt %s -p inject-matmul-stats --split-input-file --verify-diagnostics
// RUN: opscope-opt %s -p 'inject-matmul-stats{sites=keep}' --split-input-file | filecheck %s

// Refusals of inject-matmul-stats, as IR: stat kernels are static-shaped, so a dynamic
// site is an error (exclude it with sites=<regex> or specialize shapes first), never a
// silent skip.

func.func @dynamic_matmul_is_refused(%a: tensor<?x8xf32>, %b: tensor<8x3xf32>, %c: tensor<?x3xf32>) -> tensor<?x3xf32> {
  // expected-error @+1 {{inject-matmul-stats: site 'matmul#0' at loc(}}
  %0 = linalg.matmul ins(%a, %b : tensor<?x8xf32>, tensor<8x3xf32>) outs(%c : tensor<?x3xf32>) -> tensor<?x3xf32>
  return %0 : tensor<?x3xf32>
}

// -----

func.func @dynamic_named_site_is_refused(%a: tensor<4x?xf32>, %b: tensor<?x3xf32>, %c: tensor<4x3xf32>) -> tensor<4x3xf32> {
  // expected-error @+1 {{inject-matmul-stats: site 'fc1' at loc("fc1") has a dynamic shape (tensor<4x?xf32> x tensor<?x3xf32>); stat kernels are static-shaped: specialize the shapes first or exclude it with sites=<regex>}}
  %0 = linalg.matmul ins(%a, %b : tensor<4x?xf32>, tensor<?x3xf32>) outs(%c : tensor<4x3xf32>) -> tensor<4x3xf32> loc("fc1")
  return %0 : tensor<4x3xf32>
}

// -----

// With sites=<regex> excluding the dynamic site, the static one is tapped.

// CHECK-LABEL: func.func @sites_regex_excludes_dynamic_site(
// CHECK-SAME:      attributes {opscope.sites = [{{{.+}}name = "keep.me"}]}
// CHECK-NOT:   site = "skip.me"
// CHECK:       site = "keep.me"
// CHECK-NOT:   site = "skip.me"
func.func @sites_regex_excludes_dynamic_site(%a: tensor<?x8xf32>, %b: tensor<8x3xf32>, %c: tensor<?x3xf32>, %d: tensor<4x8xf32>, %e: tensor<4x3xf32>) -> (tensor<?x3xf32>, tensor<4x3xf32>) {
  // expected-error @+1 {{inject-matmul-stats: site 'skip.me' at loc("skip.me") has a dynamic shape}}
  %0 = linalg.matmul ins(%a, %b : tensor<?x8xf32>, tensor<8x3xf32>) outs(%c : tensor<?x3xf32>) -> tensor<?x3xf32> loc("skip.me")
  %1 = linalg.matmul ins(%d, %b : tensor<4x8xf32>, tensor<8x3xf32>) outs(%e : tensor<4x3xf32>) -> tensor<4x3xf32> loc("keep.me")
  return %0, %1 : tensor<?x3xf32>, tensor<4x3xf32>
}
