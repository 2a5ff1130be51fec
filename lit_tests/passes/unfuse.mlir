// RUN: opscope-opt %s -p unfuse | filecheck %s

// Every computed tensor goes through an optimization barrier right after its op, so IREE forms
// one dispatch per op; the weight and its transpose (a constant expression IREE hoists), the
// empty tensor and the fill (an op's initial value) are left alone, and the function's result
// is the last op's barrier.

// CHECK-LABEL: func.func @mlp(
// CHECK-SAME:      %[[X:.+]]: tensor<2x4xf32>
// CHECK:       %[[W:.+]] = arith.constant
// CHECK-NOT:   util.optimization_barrier %[[W]]
// CHECK:       %[[T:.+]] = linalg.transpose
// CHECK-NOT:   util.optimization_barrier %[[T]]
// CHECK:       %[[Z:.+]] = linalg.fill
// CHECK-NOT:   util.optimization_barrier %[[Z]]
// CHECK:       %[[M:.+]] = linalg.matmul ins(%[[X]], %[[T]] : tensor<2x4xf32>, tensor<4x3xf32>) outs(%[[Z]] : tensor<2x3xf32>)
// CHECK-NEXT:  %[[MB:.+]] = util.optimization_barrier %[[M]] : tensor<2x3xf32>
// CHECK:       %[[R:.+]] = linalg.generic {{.+}} ins(%[[MB]] : tensor<2x3xf32>)
// CHECK:       } -> tensor<2x3xf32>
// CHECK-NEXT:  %[[RB:.+]] = util.optimization_barrier %[[R]] : tensor<2x3xf32>
// CHECK-NEXT:  return %[[RB]]

func.func @mlp(%x: tensor<2x4xf32>) -> tensor<2x3xf32> {
  %w = arith.constant dense<1.0> : tensor<3x4xf32>
  %et = tensor.empty() : tensor<4x3xf32>
  %t = linalg.transpose ins(%w : tensor<3x4xf32>) outs(%et : tensor<4x3xf32>) permutation = [1, 0]
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<2x3xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<2x3xf32>) -> tensor<2x3xf32>
  %m = linalg.matmul ins(%x, %t : tensor<2x4xf32>, tensor<4x3xf32>) outs(%z : tensor<2x3xf32>) -> tensor<2x3xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>],
                       iterator_types = ["parallel", "parallel"]} ins(%m : tensor<2x3xf32>) outs(%e : tensor<2x3xf32>) {
  ^bb0(%v: f32, %o: f32):
    %y = arith.maximumf %v, %zero : f32
    linalg.yield %y : f32
  } -> tensor<2x3xf32>
  return %r : tensor<2x3xf32>
}
