// RUN: opscope-opt %s -p fakequant-weights | filecheck %s --check-prefix=FQW
// RUN: opscope-opt %s -p fakequant-activations | filecheck %s --check-prefix=FQA
// RUN: opscope-opt %s -p quantize-weight | filecheck %s --check-prefix=QW
// RUN: opscope-opt %s -p 'quantize-weight{activations=true}' | filecheck %s --check-prefix=W8A8
// RUN: opscope-opt %s -p 'factor-weight{rank=1}' | filecheck %s --check-prefix=FACTOR
// RUN: opscope-opt %s -p 'factor-weight{rank=1}' --print-debuginfo | filecheck %s --check-prefix=LOC
// RUN: opscope-opt %s -p 'extract-site{site=fc only=true}' | filecheck %s --check-prefix=EXTRACT

// A weight on the matmul's lhs (W @ x, as JAX's jnp.dot(W, x) writes it; x is the function's
// input): the weight rewrites find it there (found by the generated-model tests: they left it
// alone). fakequant-weights quantizes W per output channel, its rows (amax over K, dim 1), in
// place; fakequant-activations quantizes x per token, its columns (amax over K, dim 0).
// quantize-weight and factor-weight rewrite the site as x ×_K W (opscope.ir.commute): the codes
// are W's transpose [K, N] = [8, 4] with W's 4 row scales; the factors contract x first.
// extract-site copies the weight in: the site's function takes x alone.

// FQW-LABEL: func.func @main
// FQW: %[[AMAX:.*]] = linalg.generic {{.*}}iterator_types = ["parallel", "reduction"]} ins(%[[W:.*]] : tensor<4x8xf32>) outs({{.*}} : tensor<4xf32>)
// FQW: %[[WQ:.*]] = linalg.generic {{.*}} ins(%[[W]], %[[AMAX]] : tensor<4x8xf32>, tensor<4xf32>)
// FQW: linalg.matmul ins(%[[WQ]], %arg0 : tensor<4x8xf32>, tensor<8x3xf32>)

// FQA-LABEL: func.func @main
// FQA: %[[AMAX:.*]] = linalg.generic {{.*}}iterator_types = ["reduction", "parallel"]} ins(%arg0 : tensor<8x3xf32>) outs({{.*}} : tensor<3xf32>)
// FQA: %[[XQ:.*]] = linalg.generic {{.*}} ins(%arg0, %[[AMAX]] : tensor<8x3xf32>, tensor<3xf32>)
// FQA: linalg.matmul ins(%{{.*}}, %[[XQ]] : tensor<4x8xf32>, tensor<8x3xf32>)

// QW-DAG: #[[X:.*]] = affine_map<(d0, d1, d2) -> (d2, d1)>
// QW-DAG: #[[CODES:.*]] = affine_map<(d0, d1, d2) -> (d2, d0)>
// QW-DAG: #[[OUT:.*]] = affine_map<(d0, d1, d2) -> (d0, d1)>
// QW-LABEL: func.func @main
// QW: %[[Q:.*]] = arith.constant dense_resource<opscope.fc.codes> : tensor<8x4xi8>
// QW: %[[S:.*]] = arith.constant dense<{{.*}}> : tensor<4xf32>
// QW: linalg.generic {indexing_maps = [#[[X]], #[[CODES]], #[[OUT]]], iterator_types = ["parallel", "parallel", "reduction"]} ins(%arg0, %[[Q]] : tensor<8x3xf32>, tensor<8x4xi8>) outs({{.*}} : tensor<4x3xf32>)
// QW-NOT: linalg.matmul

// W8A8: %[[XQ:.*]] = linalg.generic {{.*}} ins(%arg0, %{{.*}} : tensor<8x3xf32>, tensor<3xf32>) outs(%{{.*}} : tensor<8x3xi8>)
// W8A8: linalg.generic {{.*}} ins(%[[XQ]], %{{.*}} : tensor<8x3xi8>, tensor<8x4xi8>) outs(%{{.*}} : tensor<4x3xi32>)
// W8A8: arith.muli

// FACTOR-LABEL: func.func @main
// FACTOR: %[[T:.*]] = linalg.generic {{.*}} ins(%arg0, %{{.*}} : tensor<8x3xf32>, tensor<8x1xf32>) outs(%{{.*}} : tensor<3x1xf32>)
// FACTOR: linalg.generic {{.*}} ins(%[[T]], %{{.*}} : tensor<3x1xf32>, tensor<1x4xf32>) outs(%{{.*}} : tensor<4x3xf32>)
// FACTOR-NOT: linalg.matmul

// LOC-DAG: #[[SITE:loc[0-9]+]] = loc("fc")
// LOC-DAG: #[[U:loc[0-9]+]] = loc("fc.u"(#[[SITE]]))
// LOC: } -> tensor<3x1xf32> loc(#[[U]])
// LOC: } -> tensor<4x3xf32> loc(#[[SITE]])

// EXTRACT: func.func @site_fc(%arg0: tensor<8x3xf32>) -> tensor<4x3xf32> attributes {opscope.site = "fc"}
// EXTRACT: %[[W:.*]] = arith.constant dense<{{.*}}> : tensor<4x8xf32>
// EXTRACT: linalg.matmul ins(%[[W]], %arg0 : tensor<4x8xf32>, tensor<8x3xf32>)

func.func @main(%x: tensor<8x3xf32>) -> tensor<4x3xf32> {
  %w = arith.constant dense<[[1.0, -2.0, 3.0, 0.5, 1.5, -1.0, 2.0, 0.25], [0.1, 0.2, -0.3, 0.4, 0.5, 0.6, 0.7, 0.8], [2.0, 1.0, 0.0, -1.0, -2.0, 1.0, 0.5, 0.5], [1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, -1.0]]> : tensor<4x8xf32>
  %z = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<4x3xf32>
  %c = linalg.fill ins(%z : f32) outs(%e : tensor<4x3xf32>) -> tensor<4x3xf32>
  %y = linalg.matmul ins(%w, %x : tensor<4x8xf32>, tensor<8x3xf32>) outs(%c : tensor<4x3xf32>) -> tensor<4x3xf32> loc("fc")
  %r = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} outs(%y : tensor<4x3xf32>) {
  ^bb0(%o: f32):
    %m = arith.maximumf %o, %z : f32
    linalg.yield %m : f32
  } -> tensor<4x3xf32>
  return %r : tensor<4x3xf32>
}
