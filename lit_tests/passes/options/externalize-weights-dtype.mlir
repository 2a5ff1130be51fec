// RUN: rm -f %t.irpa
// RUN: opscope-opt %s -p 'externalize-weights{path=%t.irpa min-bytes=16 dtype=bf16}' | filecheck %s
// RUN: %PYTHON -c "import iree.runtime as rt; i = rt.ParameterIndex(); i.load('%t.irpa'); print(sorted((i[k].key, bytes(i[k].file_view).hex()) for k in range(len(i))))" | filecheck %s --check-prefix=FILE
// RUN: not opscope-opt %s -p 'externalize-weights{path=%t.irpa dtype=f8}' 2>&1 | filecheck %s --check-prefix=BAD

// dtype=bf16: a float32 weight is stored as bf16 (rounded to nearest even: 1.00390625 lies
// half-way between 1.0 and 1.0078125 and goes to the even 1.0; 3.0 and -2.5 are exact) and read
// through a widening generic at each load; an integer weight stays as it is.

// CHECK:       util.global private @weight_0 = #flow.parameter.named<"model"::"weight_0"> : tensor<2x2xbf16>
// CHECK:       util.global private @weight_1 = #flow.parameter.named<"model"::"weight_1"> : tensor<4xi32>
// CHECK-LABEL: func.func @main(
// CHECK:         %[[W:.+]] = util.global.load immutable @weight_0 : tensor<2x2xbf16>
// CHECK:         %[[F:.+]] = linalg.generic {{.*}} ins(%[[W]] : tensor<2x2xbf16>) outs({{.*}} : tensor<2x2xf32>)
// CHECK:           arith.extf %{{.*}} : bf16 to f32
// CHECK:         %[[I:.+]] = util.global.load immutable @weight_1 : tensor<4xi32>
// CHECK:         %[[R:.+]] = linalg.matmul ins(%arg0, %[[F]] :
// CHECK:         return %[[R]], %[[I]]

// bf16 bits, little-endian: 1.0 = 3f80, 3.0 = 4040, -2.5 = c020
// FILE: [('weight_0', '803f803f404020c0'), ('weight_1', '01000000020000000300000004000000')]

// BAD: externalize-weights: option 'dtype' must be one of bf16, f16, got 'f8'

func.func @main(%x: tensor<3x2xf32>) -> (tensor<3x2xf32>, tensor<4xi32>) {
  %w = arith.constant dense<[[1.0, 1.00390625], [3.0, -2.5]]> : tensor<2x2xf32>
  %i = arith.constant dense<[1, 2, 3, 4]> : tensor<4xi32>
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<3x2xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<3x2xf32>) -> tensor<3x2xf32>
  %r = linalg.matmul ins(%x, %w : tensor<3x2xf32>, tensor<2x2xf32>) outs(%z : tensor<3x2xf32>) -> tensor<3x2xf32>
  return %r, %i : tensor<3x2xf32>, tensor<4xi32>
}
