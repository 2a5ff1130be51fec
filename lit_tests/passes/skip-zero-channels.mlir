// RUN: opscope-opt %s -p skip-zero-channels{channels='"0,5-7"'} --split-input-file | filecheck %s
// RUN: opscope-opt %s -p 'skip-zero-channels{channels="0,5-7" guard=false}' --split-input-file | filecheck %s --check-prefix=NOGUARD
// RUN: opscope-opt %s -p 'skip-zero-channels{channels="0-7"}' --split-input-file | filecheck %s --check-prefix=ALL
// RUN: not opscope-opt %s -p 'skip-zero-channels{sites=fc2 channels=1}' --split-input-file 2>&1 | filecheck %s --check-prefix=NONE

// K channels 0, 5, 6, 7 of the lhs are checked at run time (max |x| over them == 0) and
// sliced out of both operands: the lhs keeps columns 1..4, the weight (an argument, so
// gathered inside the guarded branch) rows 1..4; the else branch is the dense op, renamed
// fc1.dense. NaN in a skipped column fails the guard (max propagates NaN, oeq is false).

// CHECK-LABEL: func.func @argument_weight(
// CHECK-SAME:      %[[X:.+]]: tensor<4x8xf32>, %[[W:.+]]: tensor<8x3xf32>)
// CHECK:       %[[INIT:.+]] = linalg.fill
// CHECK-DAG:   %[[ZERO:.+]] = arith.constant 0.000000e+00 : f32
// CHECK-DAG:   %[[SKIP:.+]] = arith.constant dense<[0, 5, 6, 7]> : tensor<4xi32>
// CHECK-DAG:   %[[KEEP:.+]] = arith.constant dense<[1, 2, 3, 4]> : tensor<4xi32>
// CHECK:       %[[S:.+]] = linalg.generic {{.+}} ins(%[[SKIP]] : tensor<4xi32>) outs(%{{.+}} : tensor<4x4xf32>)
// CHECK:         linalg.index 0
// CHECK:         arith.index_cast
// CHECK:         tensor.extract %[[X]]
// CHECK:       %[[M:.+]] = linalg.generic {{.+}} iterator_types = ["reduction", "reduction"]} ins(%[[S]] : tensor<4x4xf32>) outs(%{{.+}} : tensor<f32>)
// CHECK:         math.absf
// CHECK:         arith.maximumf
// CHECK:       %[[V:.+]] = tensor.extract %[[M]][] : tensor<f32>
// CHECK:       %[[OK:.+]] = arith.cmpf oeq, %[[V]], %[[ZERO]] : f32
// CHECK:       %[[R:.+]] = scf.if %[[OK]] -> (tensor<4x3xf32>) {
// CHECK:         %[[XK:.+]] = linalg.generic {{.+}} ins(%[[KEEP]] : tensor<4xi32>) outs(%{{.+}} : tensor<4x4xf32>)
// CHECK:           tensor.extract %[[X]]
// CHECK:         %[[WK:.+]] = linalg.generic {{.+}} ins(%[[KEEP]] : tensor<4xi32>) outs(%{{.+}} : tensor<4x3xf32>)
// CHECK:           tensor.extract %[[W]]
// CHECK:         %[[SL:.+]] = linalg.matmul ins(%[[XK]], %[[WK]] : tensor<4x4xf32>, tensor<4x3xf32>) outs(%[[INIT]] : tensor<4x3xf32>)
// CHECK:         scf.yield %[[SL]]
// CHECK:       } else {
// CHECK:         %[[D:.+]] = linalg.matmul ins(%[[X]], %[[W]] : tensor<4x8xf32>, tensor<8x3xf32>) outs(%[[INIT]] : tensor<4x3xf32>)
// CHECK:         scf.yield %[[D]]
// CHECK:       return %[[R]]

// guard=false: no check; the branch condition is a constant true (folded by IREE).
// NOGUARD-LABEL: func.func @argument_weight(
// NOGUARD-NOT:   math.absf
// NOGUARD:       %[[T:.+]] = arith.constant true
// NOGUARD:       scf.if %[[T]]

// Every channel skipped: the guarded branch yields the init, the product of nothing.
// ALL-LABEL: func.func @argument_weight(
// ALL:       %[[INIT:.+]] = linalg.fill
// ALL:       scf.if
// ALL-NEXT:    scf.yield %[[INIT]] : tensor<4x3xf32>

// NONE: opscope-opt: error: skip-zero-channels: sites='fc2' names no matmul site of this module (valid: fc1)
func.func @argument_weight(%x: tensor<4x8xf32>, %w: tensor<8x3xf32>) -> tensor<4x3xf32> {
  %z = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<4x3xf32>
  %c = linalg.fill ins(%z : f32) outs(%e : tensor<4x3xf32>) -> tensor<4x3xf32>
  %0 = linalg.matmul ins(%x, %w : tensor<4x8xf32>, tensor<8x3xf32>) outs(%c : tensor<4x3xf32>) -> tensor<4x3xf32> loc("fc1")
  return %0 : tensor<4x3xf32>
}

// -----

// A constant weight is gathered before the branch, where IREE's const-eval folds the slice
// into a constant of the kept rows.
// CHECK-LABEL: func.func @constant_weight(
// CHECK:       %[[W:.+]] = arith.constant dense<{{.+}}> : tensor<8x3xf32>
// CHECK:       %[[WK:.+]] = linalg.generic {{.+}} outs(%{{.+}} : tensor<4x3xf32>)
// CHECK:         tensor.extract %[[W]]
// CHECK:       scf.if
// CHECK:         linalg.matmul ins(%{{.+}}, %[[WK]] : tensor<4x4xf32>, tensor<4x3xf32>)
// CHECK:       } else {
// CHECK:         linalg.matmul ins(%{{.+}}, %[[W]] : tensor<4x8xf32>, tensor<8x3xf32>)
func.func @constant_weight(%x: tensor<4x8xf32>) -> tensor<4x3xf32> {
  %w = arith.constant dense<[[1.0, 2.0, 3.0], [4.0, 5.0, 6.0], [7.0, 8.0, 9.0], [1.0, 2.0, 3.0],
                             [4.0, 5.0, 6.0], [7.0, 8.0, 9.0], [1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]> : tensor<8x3xf32>
  %z = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<4x3xf32>
  %c = linalg.fill ins(%z : f32) outs(%e : tensor<4x3xf32>) -> tensor<4x3xf32>
  %0 = linalg.matmul ins(%x, %w : tensor<4x8xf32>, tensor<8x3xf32>) outs(%c : tensor<4x3xf32>) -> tensor<4x3xf32> loc("fc1")
  return %0 : tensor<4x3xf32>
}
