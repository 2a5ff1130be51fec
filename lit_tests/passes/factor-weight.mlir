// RUN: opscope-opt %s -p factor-weight --split-input-file | filecheck %s
// RUN: opscope-opt %s -p 'factor-weight{rank=1}' --split-input-file | filecheck %s --check-prefix=RANK1
// RUN: opscope-opt %s -p factor-weight --split-input-file --print-debuginfo | filecheck %s --check-prefix=LOC
// RUN: opscope-opt %s -p factor-weight --split-input-file -o %t 2>&1 | filecheck %s --check-prefix=WARN

// A 2-D nn.Linear as the torch importer gives it: x @ transpose(W), W [N=6, K=8] of exact
// rank 2. Rank reveal (energy 0.99) keeps r = 2: U [8, 2], V [2, 6] become constants, the
// matmul two named matmuls (the first from zeros, the second into the site's own init), and
// the transpose goes (U is stored [K, r]). The second matmul keeps the site's location.

// CHECK-LABEL: func.func @linear_weight_under_transpose_becomes_two_matmuls(
// CHECK-SAME:      %[[X:.+]]: tensor<3x8xf32>, %[[C:.+]]: tensor<3x6xf32>)
// CHECK-NOT:   linalg.transpose
// CHECK-DAG:   %[[U:.+]] = arith.constant dense_resource<opscope.fc.u> : tensor<8x2xf32>
// CHECK-DAG:   %[[V:.+]] = arith.constant dense_resource<opscope.fc.v> : tensor<2x6xf32>
// CHECK:       %[[Z:.+]] = linalg.fill ins(%{{.+}} : f32) outs(%{{.+}} : tensor<3x2xf32>)
// CHECK:       %[[T:.+]] = linalg.matmul ins(%[[X]], %[[U]] : tensor<3x8xf32>, tensor<8x2xf32>) outs(%[[Z]] : tensor<3x2xf32>)
// CHECK-NEXT:  %[[OUT:.+]] = linalg.matmul ins(%[[T]], %[[V]] : tensor<3x2xf32>, tensor<2x6xf32>) outs(%[[C]] : tensor<3x6xf32>)
// CHECK-NEXT:  return %[[OUT]]
// RANK1-LABEL: func.func @linear_weight_under_transpose_becomes_two_matmuls(
// RANK1:       arith.constant dense_resource<opscope.fc.u> : tensor<8x1xf32>
// RANK1:       arith.constant dense_resource<opscope.fc.v> : tensor<1x6xf32>
// LOC-LABEL:   func.func @linear_weight_under_transpose_becomes_two_matmuls(
// LOC:         linalg.matmul {{.+}} -> tensor<3x2xf32> loc(#[[ULOC:loc[0-9]+]])
// LOC-NEXT:    linalg.matmul {{.+}} -> tensor<3x6xf32> loc(#[[SITE:loc[0-9]+]])
// LOC-DAG:     #[[SITE]] = loc("fc")
// LOC-DAG:     #[[ULOC]] = loc("fc.u"(#[[SITE]]))
func.func @linear_weight_under_transpose_becomes_two_matmuls(%x: tensor<3x8xf32>, %c: tensor<3x6xf32>) -> tensor<3x6xf32> {
  %w = util.global.load @w : tensor<6x8xf32>
  %e = tensor.empty() : tensor<8x6xf32>
  %t = linalg.transpose ins(%w : tensor<6x8xf32>) outs(%e : tensor<8x6xf32>) permutation = [1, 0]
  %0 = linalg.matmul ins(%x, %t : tensor<3x8xf32>, tensor<8x6xf32>) outs(%c : tensor<3x6xf32>) -> tensor<3x6xf32> loc("fc")
  return %0 : tensor<3x6xf32>
}
util.global private @w = dense<[[1.0, 2.0, 3.0, 4.0, 4.0, 3.0, 2.0, 1.0], [2.0, -2.0, 2.0, -2.0, 2.0, -2.0, 2.0, -2.0],
                                [3.0, 0.0, 5.0, 2.0, 6.0, 1.0, 4.0, -1.0], [0.0, 6.0, 4.0, 10.0, 6.0, 8.0, 2.0, 4.0],
                                [3.0, 0.0, 5.0, 2.0, 6.0, 1.0, 4.0, -1.0], [2.0, -2.0, 2.0, -2.0, 2.0, -2.0, 2.0, -2.0]]> : tensor<6x8xf32>

// -----

// A 3-D nn.Linear: batch_matmul of broadcast(transpose(W)). Both contractions are
// generics over the site's loops; U and V carry no batch dim (the broadcast is in the maps),
// and the copies are erased.

// CHECK-LABEL: func.func @batch_matmul_over_broadcast_weight(
// CHECK-SAME:      %[[X:.+]]: tensor<2x3x8xf32>, %[[C:.+]]: tensor<2x3x6xf32>)
// CHECK-DAG:   %[[U:.+]] = arith.constant dense_resource<opscope.proj.u> : tensor<8x2xf32>
// CHECK-DAG:   %[[V:.+]] = arith.constant dense_resource<opscope.proj.v> : tensor<2x6xf32>
// CHECK:       %[[T:.+]] = linalg.generic {{{.+}} iterator_types = ["parallel", "parallel", "reduction", "parallel"]} ins(%[[X]], %[[U]] : tensor<2x3x8xf32>, tensor<8x2xf32>) outs(%{{.+}} : tensor<2x3x2xf32>)
// CHECK:         arith.mulf
// CHECK-NEXT:    arith.addf
// CHECK:       linalg.generic {{{.+}} iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%[[T]], %[[V]] : tensor<2x3x2xf32>, tensor<2x6xf32>) outs(%[[C]] : tensor<2x3x6xf32>)
// CHECK-NOT:   linalg.batch_matmul
// CHECK-NOT:   linalg.transpose
func.func @batch_matmul_over_broadcast_weight(%x: tensor<2x3x8xf32>, %c: tensor<2x3x6xf32>) -> tensor<2x3x6xf32> {
  %w = util.global.load @w : tensor<6x8xf32>
  %e = tensor.empty() : tensor<8x6xf32>
  %t = linalg.transpose ins(%w : tensor<6x8xf32>) outs(%e : tensor<8x6xf32>) permutation = [1, 0]
  %e2 = tensor.empty() : tensor<2x8x6xf32>
  %b = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d1, d2)>, affine_map<(d0, d1, d2) -> (d0, d1, d2)>], iterator_types = ["parallel", "parallel", "parallel"]} ins(%t : tensor<8x6xf32>) outs(%e2 : tensor<2x8x6xf32>) {
  ^bb0(%in: f32, %out: f32):
    linalg.yield %in : f32
  } -> tensor<2x8x6xf32>
  %0 = linalg.batch_matmul ins(%x, %b : tensor<2x3x8xf32>, tensor<2x8x6xf32>) outs(%c : tensor<2x3x6xf32>) -> tensor<2x3x6xf32> loc("proj")
  return %0 : tensor<2x3x6xf32>
}
util.global private @w = dense<[[1.0, 2.0, 3.0, 4.0, 4.0, 3.0, 2.0, 1.0], [2.0, -2.0, 2.0, -2.0, 2.0, -2.0, 2.0, -2.0],
                                [3.0, 0.0, 5.0, 2.0, 6.0, 1.0, 4.0, -1.0], [0.0, 6.0, 4.0, 10.0, 6.0, 8.0, 2.0, 4.0],
                                [3.0, 0.0, 5.0, 2.0, 6.0, 1.0, 4.0, -1.0], [2.0, -2.0, 2.0, -2.0, 2.0, -2.0, 2.0, -2.0]]> : tensor<6x8xf32>

// -----

// A contraction generic as JAX/StableHLO give a dense layer: K last in lhs, W [N, K] read
// directly (a constant). U is still [K, r], V [r, N].

// CHECK-LABEL: func.func @generic_with_k_last_reads_w_as_n_by_k(
// CHECK-DAG:   %[[U:.+]] = arith.constant dense_resource<opscope.dense.u> : tensor<8x2xf32>
// CHECK-DAG:   %[[V:.+]] = arith.constant dense_resource<opscope.dense.v> : tensor<2x6xf32>
// CHECK:       %[[T:.+]] = linalg.generic {{.+}} ins(%{{.+}}, %[[U]] : tensor<2x3x8xf32>, tensor<8x2xf32>) outs(%{{.+}} : tensor<2x3x2xf32>)
// CHECK:       linalg.generic {{.+}} ins(%[[T]], %[[V]] : tensor<2x3x2xf32>, tensor<2x6xf32>) outs(%{{.+}} : tensor<2x3x6xf32>)
func.func @generic_with_k_last_reads_w_as_n_by_k(%x: tensor<2x3x8xf32>, %c: tensor<2x3x6xf32>) -> tensor<2x3x6xf32> {
  %w = arith.constant dense<[[1.0, 2.0, 3.0, 4.0, 4.0, 3.0, 2.0, 1.0], [2.0, -2.0, 2.0, -2.0, 2.0, -2.0, 2.0, -2.0],
                             [3.0, 0.0, 5.0, 2.0, 6.0, 1.0, 4.0, -1.0], [0.0, 6.0, 4.0, 10.0, 6.0, 8.0, 2.0, 4.0],
                             [3.0, 0.0, 5.0, 2.0, 6.0, 1.0, 4.0, -1.0], [2.0, -2.0, 2.0, -2.0, 2.0, -2.0, 2.0, -2.0]]> : tensor<6x8xf32>
  %0 = linalg.generic {indexing_maps = [affine_map<(b, m, n, k) -> (b, m, k)>, affine_map<(b, m, n, k) -> (n, k)>, affine_map<(b, m, n, k) -> (b, m, n)>],
                       iterator_types = ["parallel", "parallel", "parallel", "reduction"]}
      ins(%x, %w : tensor<2x3x8xf32>, tensor<6x8xf32>) outs(%c : tensor<2x3x6xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %p = arith.mulf %a, %b : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  } -> tensor<2x3x6xf32> loc("dense")
  return %0 : tensor<2x3x6xf32>
}

// -----

// A bf16 weight read by a matmul with its transposed map (the demo models' transpose_b),
// accumulating in f32: U and V are stored in bf16, t in the accumulator's f32, and both
// contractions are plain named matmuls.

// CHECK-LABEL: func.func @bf16_weight_through_transposed_map(
// CHECK-DAG:   %[[U:.+]] = arith.constant dense_resource<opscope.q.u> : tensor<8x2xbf16>
// CHECK-DAG:   %[[V:.+]] = arith.constant dense_resource<opscope.q.v> : tensor<2x6xbf16>
// CHECK:       %[[T:.+]] = linalg.matmul ins(%{{.+}}, %[[U]] : tensor<3x8xbf16>, tensor<8x2xbf16>) outs(%{{.+}} : tensor<3x2xf32>)
// CHECK-NEXT:  linalg.matmul ins(%[[T]], %[[V]] : tensor<3x2xf32>, tensor<2x6xbf16>) outs(%{{.+}} : tensor<3x6xf32>)
func.func @bf16_weight_through_transposed_map(%x: tensor<3x8xbf16>, %c: tensor<3x6xf32>) -> tensor<3x6xf32> {
  %w = util.global.load @w : tensor<6x8xbf16>
  %0 = linalg.matmul indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d2)>, affine_map<(d0, d1, d2) -> (d1, d2)>, affine_map<(d0, d1, d2) -> (d0, d1)>]
      ins(%x, %w : tensor<3x8xbf16>, tensor<6x8xbf16>) outs(%c : tensor<3x6xf32>) -> tensor<3x6xf32> loc("q")
  return %0 : tensor<3x6xf32>
}
util.global private @w = dense<[[1.0, 2.0, 3.0, 4.0, 4.0, 3.0, 2.0, 1.0], [2.0, -2.0, 2.0, -2.0, 2.0, -2.0, 2.0, -2.0],
                                [3.0, 0.0, 5.0, 2.0, 6.0, 1.0, 4.0, -1.0], [0.0, 6.0, 4.0, 10.0, 6.0, 8.0, 2.0, 4.0],
                                [3.0, 0.0, 5.0, 2.0, 6.0, 1.0, 4.0, -1.0], [2.0, -2.0, 2.0, -2.0, 2.0, -2.0, 2.0, -2.0]]> : tensor<6x8xbf16>

// -----

// A weight read by two sites (tied) is factored once: one U and one V, four matmuls.

// CHECK-LABEL: func.func @tied_weight_is_factored_once(
// CHECK-DAG:   %[[U:.+]] = arith.constant dense_resource<opscope.a.u> : tensor<8x2xf32>
// CHECK-DAG:   %[[V:.+]] = arith.constant dense_resource<opscope.a.v> : tensor<2x6xf32>
// CHECK-NOT:   opscope.b.u
// CHECK:       %[[TA:.+]] = linalg.matmul ins(%{{.+}}, %[[U]] :
// CHECK-NEXT:  linalg.matmul ins(%[[TA]], %[[V]] :
// CHECK:       %[[TB:.+]] = linalg.matmul ins(%{{.+}}, %[[U]] :
// CHECK-NEXT:  linalg.matmul ins(%[[TB]], %[[V]] :
func.func @tied_weight_is_factored_once(%x: tensor<3x8xf32>, %y: tensor<3x8xf32>, %c: tensor<3x6xf32>) -> (tensor<3x6xf32>, tensor<3x6xf32>) {
  %w = util.global.load @w : tensor<6x8xf32>
  %e = tensor.empty() : tensor<8x6xf32>
  %t = linalg.transpose ins(%w : tensor<6x8xf32>) outs(%e : tensor<8x6xf32>) permutation = [1, 0]
  %0 = linalg.matmul ins(%x, %t : tensor<3x8xf32>, tensor<8x6xf32>) outs(%c : tensor<3x6xf32>) -> tensor<3x6xf32> loc("a")
  %1 = linalg.matmul ins(%y, %t : tensor<3x8xf32>, tensor<8x6xf32>) outs(%c : tensor<3x6xf32>) -> tensor<3x6xf32> loc("b")
  return %0, %1 : tensor<3x6xf32>, tensor<3x6xf32>
}
util.global private @w = dense<[[1.0, 2.0, 3.0, 4.0, 4.0, 3.0, 2.0, 1.0], [2.0, -2.0, 2.0, -2.0, 2.0, -2.0, 2.0, -2.0],
                                [3.0, 0.0, 5.0, 2.0, 6.0, 1.0, 4.0, -1.0], [0.0, 6.0, 4.0, 10.0, 6.0, 8.0, 2.0, 4.0],
                                [3.0, 0.0, 5.0, 2.0, 6.0, 1.0, 4.0, -1.0], [2.0, -2.0, 2.0, -2.0, 2.0, -2.0, 2.0, -2.0]]> : tensor<6x8xf32>

// -----

// A full-rank weight: rank reveal keeps all 4 singular values, and r·(K+N) = 32 >= K·N = 16
// saves nothing, so the site is left as it is, with a warning. With rank=1 it pays.

// CHECK-LABEL: func.func @full_rank_weight_saves_nothing(
// CHECK-NOT:   dense_resource
// CHECK:       linalg.matmul ins(%{{.+}}, %{{.+}} : tensor<3x4xf32>, tensor<4x4xf32>)
// CHECK-NOT:   linalg.matmul
// RANK1-LABEL: func.func @full_rank_weight_saves_nothing(
// RANK1:       arith.constant dense_resource<opscope.square.u> : tensor<4x1xf32>
// WARN: warning: factor-weight: skipping site 'square' at loc("square"): rank 4 saves no FLOPs on its 4×4 weight (r·(K+N) = 32 >= K·N = 16)
// WARN-NEXT: warning: factor-weight: no matmul site of this module has a constant weight worth factoring
func.func @full_rank_weight_saves_nothing(%x: tensor<3x4xf32>, %c: tensor<3x4xf32>) -> tensor<3x4xf32> {
  %w = arith.constant dense<[[1.0, 0.0, 0.0, 0.0], [0.0, 2.0, 0.0, 0.0], [0.0, 0.0, 3.0, 0.0], [0.0, 0.0, 0.0, 4.0]]> : tensor<4x4xf32>
  %0 = linalg.matmul ins(%x, %w : tensor<3x4xf32>, tensor<4x4xf32>) outs(%c : tensor<3x4xf32>) -> tensor<3x4xf32> loc("square")
  return %0 : tensor<3x4xf32>
}

// -----

// No constant weight: a computed rhs (k in q·kᵀ) and a weight the model takes as an
// argument are left alone, logged at info level only (the empty default `sites`).

// CHECK-LABEL: func.func @computed_and_argument_rhs_are_left_alone(
// CHECK-NOT:   dense_resource
// CHECK-COUNT-2: linalg.batch_matmul
// WARN-NOT:  skipping site 'attn
// WARN:      warning: factor-weight: no matmul site of this module has a constant weight worth factoring
func.func @computed_and_argument_rhs_are_left_alone(%q: tensor<2x4x8xf32>, %xt: tensor<2x8x8xf32>, %wk: tensor<2x8x4xf32>, %c8: tensor<2x8x4xf32>, %c: tensor<2x4x4xf32>) -> tensor<2x4x4xf32> {
  %kt = linalg.batch_matmul ins(%xt, %wk : tensor<2x8x8xf32>, tensor<2x8x4xf32>) outs(%c8 : tensor<2x8x4xf32>) -> tensor<2x8x4xf32> loc("attn.k")
  %0 = linalg.batch_matmul ins(%q, %kt : tensor<2x4x8xf32>, tensor<2x8x4xf32>) outs(%c : tensor<2x4x4xf32>) -> tensor<2x4x4xf32> loc("attn.scores")
  return %0 : tensor<2x4x4xf32>
}
