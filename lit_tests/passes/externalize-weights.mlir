// RUN: not opscope-opt %s -p externalize-weights 2>&1 | filecheck %s --check-prefix=NOPATH
// RUN: rm -f %t.irpa
// RUN: opscope-opt %s -p 'externalize-weights{path=%t.irpa min-bytes=16}' | filecheck %s
// RUN: %PYTHON -c "import iree.runtime as rt; i = rt.ParameterIndex(); i.load('%t.irpa'); print(sorted(i[k].key for k in range(len(i))), sorted(i[k].length for k in range(len(i))))" | filecheck %s --check-prefix=FILE

// A stored constant of 16 bytes or more becomes an immutable global named by a parameter; the
// same value read twice is one global; a splat and a 12-byte constant stay as they are. The
// module says where its parameters are.

// CHECK:       module attributes {opscope.parameters = {model = "{{.*}}.irpa"}}
// CHECK-DAG:   util.global private @weight_0 = #flow.parameter.named<"model"::"weight_0"> : tensor<2x4xf32>
// CHECK-DAG:   util.global private @weight_1 = #flow.parameter.named<"model"::"weight_1"> : tensor<4x2xf32>
// CHECK-NOT:   util.global
// CHECK-LABEL: func.func @main(
// CHECK:         %[[A:.+]] = util.global.load immutable @weight_0 : tensor<2x4xf32>
// CHECK:         %[[B:.+]] = util.global.load immutable @weight_1 : tensor<4x2xf32>
// CHECK:         %[[A2:.+]] = util.global.load immutable @weight_0 : tensor<2x4xf32>
// CHECK:         arith.constant dense<1.000000e+00> : tensor<2x4xf32>
// CHECK:         arith.constant dense<[1.000000e+00, 2.000000e+00, 3.000000e+00]> : tensor<3xf32>
// CHECK:         linalg.matmul ins(%arg0, %[[A]] :

// FILE: ['weight_0', 'weight_1'] [32, 32]

// NOPATH: externalize-weights: option 'path' (the .irpa file to write) is required

func.func @main(%x: tensor<3x2xf32>) -> (tensor<3x4xf32>, tensor<4x2xf32>, tensor<2x4xf32>, tensor<2x4xf32>, tensor<3xf32>) {
  %a = arith.constant dense<[[1.0, 2.0, 3.0, 4.0], [5.0, 6.0, 7.0, 8.0]]> : tensor<2x4xf32>
  %b = arith.constant dense<[[1.0, 2.0], [3.0, 4.0], [5.0, 6.0], [7.0, 8.0]]> : tensor<4x2xf32>
  %a2 = arith.constant dense<[[1.0, 2.0, 3.0, 4.0], [5.0, 6.0, 7.0, 8.0]]> : tensor<2x4xf32>
  %s = arith.constant dense<1.0> : tensor<2x4xf32>
  %small = arith.constant dense<[1.0, 2.0, 3.0]> : tensor<3xf32>
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<3x4xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<3x4xf32>) -> tensor<3x4xf32>
  %r = linalg.matmul ins(%x, %a : tensor<3x2xf32>, tensor<2x4xf32>) outs(%z : tensor<3x4xf32>) -> tensor<3x4xf32>
  return %r, %b, %a2, %s, %small : tensor<3x4xf32>, tensor<4x2xf32>, tensor<2x4xf32>, tensor<2x4xf32>, tensor<3xf32>
}
