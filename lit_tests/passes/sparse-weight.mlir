// RUN: opscope-opt %s -p sparse-weight --split-input-file | filecheck %s
// RUN: opscope-opt %s -p sparse-weight --split-input-file --print-debuginfo | filecheck %s --check-prefix=LOC
// RUN: opscope-opt %s -p 'sparse-weight{density=0.2}' --split-input-file -o %t 2>&1 | filecheck %s --check-prefix=WARN

// An nn.Linear as the torch importer gives it: x @ transpose(W), W [N=4, K=8] with at most
// two nonzeros per output channel (padded density 2/8). The weight is stored by output
// channel: idx [N=4, L=2] holds each column's nonzero K indices in order (column 2 has one:
// padded with index 0), val the values (padded with 0); the matmul becomes a generic over
// (m, n, l) that gathers x[m, idx[n, l]]; the transpose and the global load go.

// CHECK-LABEL: func.func @linear_weight_under_transpose_is_stored_by_output_channel(
// CHECK-SAME:      %[[X:.+]]: tensor<3x8xf32>, %[[C:.+]]: tensor<3x4xf32>)
// CHECK-NOT:   linalg.transpose
// CHECK-NOT:   util.global.load
// CHECK-DAG:   %[[IDX:.+]] = arith.constant dense<{{\[}}[0, 5], [1, 7], [3, 0], [2, 6]]> : tensor<4x2xi32>
// CHECK-DAG:   %[[VAL:.+]] = arith.constant dense<{{\[}}[1.000000e+00, 2.000000e+00], [-1.000000e+00, 3.000000e+00], [4.000000e+00, 0.000000e+00], [5.000000e+00, -6.000000e+00]]> : tensor<4x2xf32>
// CHECK:       %[[OUT:.+]] = linalg.generic
// CHECK-SAME:      iterator_types = ["parallel", "parallel", "reduction"]
// CHECK-SAME:      ins(%[[IDX]], %[[VAL]] : tensor<4x2xi32>, tensor<4x2xf32>) outs(%[[C]] : tensor<3x4xf32>)
// CHECK-NEXT:  ^bb0(%[[K:.+]]: i32, %[[V:.+]]: f32, %[[ACC:.+]]: f32):
// CHECK-NEXT:    %[[M:.+]] = linalg.index 0 : index
// CHECK-NEXT:    %[[KI:.+]] = arith.index_cast %[[K]] : i32 to index
// CHECK-NEXT:    %[[XV:.+]] = tensor.extract %[[X]][%[[M]], %[[KI]]] : tensor<3x8xf32>
// CHECK-NEXT:    %[[P:.+]] = arith.mulf %[[XV]], %[[V]] : f32
// CHECK-NEXT:    %[[S:.+]] = arith.addf %[[ACC]], %[[P]] : f32
// CHECK-NEXT:    linalg.yield %[[S]] : f32
// CHECK:       return %[[OUT]]
// LOC:         #[[SITE:loc[0-9]+]] = loc("fc")
// LOC:         func.func @linear_weight_under_transpose_is_stored_by_output_channel(
// LOC:         linalg.generic
// LOC:         } -> tensor<3x4xf32> loc(#[[SITE]])
// WARN:        warning: sparse-weight: skipping site 'fc' at loc("fc"): its fullest output channel holds 2 of 8 K weights (25 %), above density=0.2
// WARN-NEXT:   warning: sparse-weight: no matmul site of this module has a constant weight sparse enough
func.func @linear_weight_under_transpose_is_stored_by_output_channel(%x: tensor<3x8xf32>, %c: tensor<3x4xf32>) -> tensor<3x4xf32> {
  %w = util.global.load @w : tensor<4x8xf32>
  %e = tensor.empty() : tensor<8x4xf32>
  %t = linalg.transpose ins(%w : tensor<4x8xf32>) outs(%e : tensor<8x4xf32>) permutation = [1, 0]
  %0 = linalg.matmul ins(%x, %t : tensor<3x8xf32>, tensor<8x4xf32>) outs(%c : tensor<3x4xf32>) -> tensor<3x4xf32> loc("fc")
  return %0 : tensor<3x4xf32>
}
util.global private @w = dense<[[1.0, 0.0, 0.0, 0.0, 0.0, 2.0, 0.0, 0.0], [0.0, -1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 3.0],
                                [0.0, 0.0, 0.0, 4.0, 0.0, 0.0, 0.0, 0.0], [0.0, 0.0, 5.0, 0.0, 0.0, 0.0, -6.0, 0.0]]> : tensor<4x8xf32>

// -----

// A batch_matmul whose weight [K=4, N=2] is broadcast over the batch: the gather reads
// x[b, m, idx[n, l]], the broadcast goes. A weight passed as an argument is left as it is.

// CHECK-LABEL: func.func @broadcast_weight_gathers_per_batch(
// CHECK-NOT:   linalg.broadcast
// CHECK:       arith.constant dense<{{\[}}[1], [3]]> : tensor<2x1xi32>
// CHECK:       linalg.generic
// CHECK-SAME:      iterator_types = ["parallel", "parallel", "parallel", "reduction"]
// CHECK:         tensor.extract %{{.+}}[%{{.+}}, %{{.+}}, %{{.+}}] : tensor<2x3x4xf32>
// CHECK:       linalg.batch_matmul
// CHECK-SAME:      ins(%{{.+}}, %[[ARG:.+]] : tensor<2x3x4xf32>, tensor<2x4x2xf32>)
func.func @broadcast_weight_gathers_per_batch(%x: tensor<2x3x4xf32>, %c: tensor<2x3x2xf32>, %w_arg: tensor<2x4x2xf32>) -> (tensor<2x3x2xf32>, tensor<2x3x2xf32>) {
  %w = arith.constant dense<[[0.0, 0.0], [2.0, 0.0], [0.0, 0.0], [0.0, -1.0]]> : tensor<4x2xf32>
  %e = tensor.empty() : tensor<2x4x2xf32>
  %b = linalg.broadcast ins(%w : tensor<4x2xf32>) outs(%e : tensor<2x4x2xf32>) dimensions = [0]
  %0 = linalg.batch_matmul ins(%x, %b : tensor<2x3x4xf32>, tensor<2x4x2xf32>) outs(%c : tensor<2x3x2xf32>) -> tensor<2x3x2xf32> loc("proj")
  %1 = linalg.batch_matmul ins(%x, %w_arg : tensor<2x3x4xf32>, tensor<2x4x2xf32>) outs(%c : tensor<2x3x2xf32>) -> tensor<2x3x2xf32> loc("arg")
  return %0, %1 : tensor<2x3x2xf32>, tensor<2x3x2xf32>
}
