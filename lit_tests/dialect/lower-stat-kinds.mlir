// RUN: opscope-opt %s -p lower-opscope --split-input-file | filecheck %s

// How each opscope.stat kind lowers: the packed length, the kernel's signature, and the
// ops that make each statistic what it is, followed through their operands from the
// stacked input %[[X]] ([1, 4, 8]) to the packed result (a min is a minimumf of x from
// +inf, a mean a sum divided by numel, ...). Replacing any of these ops fails the case.
// Left free, because the kernels are tuned for IREE's dispatch formation and change:
// SSA names, constants and ops that define nothing, the order of independent ops, and
// the operand order of a commutative op with an accumulator (`{{(.*, )?}}%[[V]]{{(,| :)}}`
// reads "one operand is %[[V]]"). Values are checked against numpy in pytest.
//
// Every case taps one tensor<4x8xf32> (rows R = 4, channels C = 8, numel 32) unless it
// says otherwise.

// CHECK-LABEL: func.func @lower_min(
// CHECK-SAME:      -> (tensor<1xf32> {opscope.pack = [{length = 1 : i64, numel = 32 : i64, offset = 0 : i64, role = "lhs", site = "s", stat = "min"}]})
// CHECK:       call @[[KERNEL:opscope_stats_[0-9a-z]+_[0-9a-f]+]](
// CHECK:       func.func private @[[KERNEL]](%{{.+}}: tensor<4x8xf32>) -> tensor<1xf32>
// CHECK:       %[[X:.+]] = tensor.expand_shape %arg0 {{\[\[}}0, 1], [2]] output_shape [1, 4, 8] : tensor<4x8xf32> into tensor<1x4x8xf32>
// CHECK:       %[[ID:.+]] = arith.constant 0x7F800000 : f32
// CHECK:       %[[INIT:.+]] = linalg.fill ins(%[[ID]] : f32) outs(%{{.+}} : tensor<1x4xf32>)
// CHECK:       %[[ROWS:.+]] = linalg.generic {{.*}}iterator_types = ["parallel", "parallel", "reduction"]} ins(%[[X]] : tensor<1x4x8xf32>) outs(%[[INIT]] : tensor<1x4xf32>)
// CHECK-NEXT:  ^bb0(%[[V:[^:]+]]: f32, %{{[^:]+}}: f32):
// CHECK:         %[[R:.+]] = arith.minimumf {{(.*, )?}}%[[V]]{{(,| :)}}
// CHECK:         linalg.yield %[[R]] : f32
// CHECK:       %[[ID2:.+]] = arith.constant 0x7F800000 : f32
// CHECK:       %[[INIT2:.+]] = linalg.fill ins(%[[ID2]] : f32) outs(%{{.+}} : tensor<1xf32>)
// CHECK:       %[[TOTAL:.+]] = linalg.generic {{.*}}iterator_types = ["parallel", "reduction"]} ins(%[[ROWS]] : tensor<1x4xf32>) outs(%[[INIT2]] : tensor<1xf32>)
// CHECK-NEXT:  ^bb0(%[[P:[^:]+]]: f32, %{{[^:]+}}: f32):
// CHECK:         %[[T:.+]] = arith.minimumf {{(.*, )?}}%[[P]]{{(,| :)}}
// CHECK:         linalg.yield %[[T]] : f32
// CHECK:       tensor.insert_slice %[[TOTAL]] into
func.func @lower_min(%x: tensor<4x8xf32>) {
  "opscope.stat"(%x) {kind = "min", options = {}, role = "lhs", site = "s"} : (tensor<4x8xf32>) -> ()
  return
}

// -----

// CHECK-LABEL: func.func @lower_max(
// CHECK-SAME:      -> (tensor<1xf32> {opscope.pack = [{length = 1 : i64, numel = 32 : i64, offset = 0 : i64, role = "lhs", site = "s", stat = "max"}]})
// CHECK:       call @[[KERNEL:opscope_stats_[0-9a-z]+_[0-9a-f]+]](
// CHECK:       func.func private @[[KERNEL]](%{{.+}}: tensor<4x8xf32>) -> tensor<1xf32>
// CHECK:       %[[X:.+]] = tensor.expand_shape %arg0 {{\[\[}}0, 1], [2]] output_shape [1, 4, 8] : tensor<4x8xf32> into tensor<1x4x8xf32>
// CHECK:       %[[ID:.+]] = arith.constant 0xFF800000 : f32
// CHECK:       %[[INIT:.+]] = linalg.fill ins(%[[ID]] : f32) outs(%{{.+}} : tensor<1x4xf32>)
// CHECK:       %[[ROWS:.+]] = linalg.generic {{.*}}iterator_types = ["parallel", "parallel", "reduction"]} ins(%[[X]] : tensor<1x4x8xf32>) outs(%[[INIT]] : tensor<1x4xf32>)
// CHECK-NEXT:  ^bb0(%[[V:[^:]+]]: f32, %{{[^:]+}}: f32):
// CHECK:         %[[R:.+]] = arith.maximumf {{(.*, )?}}%[[V]]{{(,| :)}}
// CHECK:         linalg.yield %[[R]] : f32
// CHECK:       %[[ID2:.+]] = arith.constant 0xFF800000 : f32
// CHECK:       %[[INIT2:.+]] = linalg.fill ins(%[[ID2]] : f32) outs(%{{.+}} : tensor<1xf32>)
// CHECK:       %[[TOTAL:.+]] = linalg.generic {{.*}}iterator_types = ["parallel", "reduction"]} ins(%[[ROWS]] : tensor<1x4xf32>) outs(%[[INIT2]] : tensor<1xf32>)
// CHECK-NEXT:  ^bb0(%[[P:[^:]+]]: f32, %{{[^:]+}}: f32):
// CHECK:         %[[T:.+]] = arith.maximumf {{(.*, )?}}%[[P]]{{(,| :)}}
// CHECK:         linalg.yield %[[T]] : f32
// CHECK:       tensor.insert_slice %[[TOTAL]] into
func.func @lower_max(%x: tensor<4x8xf32>) {
  "opscope.stat"(%x) {kind = "max", options = {}, role = "lhs", site = "s"} : (tensor<4x8xf32>) -> ()
  return
}

// -----

// CHECK-LABEL: func.func @lower_mean(
// CHECK-SAME:      -> (tensor<1xf32> {opscope.pack = [{length = 1 : i64, numel = 32 : i64, offset = 0 : i64, role = "lhs", site = "s", stat = "mean"}]})
// CHECK:       call @[[KERNEL:opscope_stats_[0-9a-z]+_[0-9a-f]+]](
// CHECK:       func.func private @[[KERNEL]](%{{.+}}: tensor<4x8xf32>) -> tensor<1xf32>
// CHECK:       %[[X:.+]] = tensor.expand_shape %arg0 {{\[\[}}0, 1], [2]] output_shape [1, 4, 8] : tensor<4x8xf32> into tensor<1x4x8xf32>
// CHECK:       %[[ROWS:.+]] = linalg.generic {{.*}}iterator_types = ["parallel", "parallel", "reduction"]} ins(%[[X]] : tensor<1x4x8xf32>) outs(%{{.+}} : tensor<1x4xf32>)
// CHECK-NEXT:  ^bb0(%[[V:[^:]+]]: f32, %{{[^:]+}}: f32):
// CHECK:         %[[R:.+]] = arith.addf {{(.*, )?}}%[[V]]{{(,| :)}}
// CHECK:         linalg.yield %[[R]] : f32
// CHECK:       %[[TOTAL:.+]] = linalg.generic {{.*}}iterator_types = ["parallel", "reduction"]} ins(%[[ROWS]] : tensor<1x4xf32>) outs(%{{.+}} : tensor<1xf32>)
// CHECK-NEXT:  ^bb0(%[[P:[^:]+]]: f32, %{{[^:]+}}: f32):
// CHECK:         %[[T:.+]] = arith.addf {{(.*, )?}}%[[P]]{{(,| :)}}
// CHECK:         linalg.yield %[[T]] : f32
// CHECK:       %[[MEAN:.+]] = linalg.generic {{.*}}iterator_types = ["parallel"]} ins(%[[TOTAL]] : tensor<1xf32>)
// CHECK-NEXT:  ^bb0(%[[S:[^:]+]]: f32, %{{[^:]+}}: f32):
// CHECK:         %[[N:.+]] = arith.constant 3.200000e+01 : f32
// CHECK:         %[[M:.+]] = arith.divf %[[S]], %[[N]] : f32
// CHECK:         linalg.yield %[[M]] : f32
// CHECK:       tensor.insert_slice %[[MEAN]] into
func.func @lower_mean(%x: tensor<4x8xf32>) {
  "opscope.stat"(%x) {kind = "mean", options = {}, role = "lhs", site = "s"} : (tensor<4x8xf32>) -> ()
  return
}

// -----

// CHECK-LABEL: func.func @lower_l1(
// CHECK-SAME:      -> (tensor<1xf32> {opscope.pack = [{length = 1 : i64, numel = 32 : i64, offset = 0 : i64, role = "lhs", site = "s", stat = "l1"}]})
// CHECK:       call @[[KERNEL:opscope_stats_[0-9a-z]+_[0-9a-f]+]](
// CHECK:       func.func private @[[KERNEL]](%{{.+}}: tensor<4x8xf32>) -> tensor<1xf32>
// CHECK:       %[[X:.+]] = tensor.expand_shape %arg0 {{\[\[}}0, 1], [2]] output_shape [1, 4, 8] : tensor<4x8xf32> into tensor<1x4x8xf32>
// CHECK:       %[[ROWS:.+]] = linalg.generic {{.*}}iterator_types = ["parallel", "parallel", "reduction"]} ins(%[[X]] : tensor<1x4x8xf32>) outs(%{{.+}} : tensor<1x4xf32>)
// CHECK-NEXT:  ^bb0(%[[V:[^:]+]]: f32, %{{[^:]+}}: f32):
// CHECK:         %[[ABS:.+]] = math.absf %[[V]] : f32
// CHECK:         %[[R:.+]] = arith.addf {{(.*, )?}}%[[ABS]]{{(,| :)}}
// CHECK:         linalg.yield %[[R]] : f32
// CHECK:       %[[TOTAL:.+]] = linalg.generic {{.*}}iterator_types = ["parallel", "reduction"]} ins(%[[ROWS]] : tensor<1x4xf32>) outs(%{{.+}} : tensor<1xf32>)
// CHECK-NEXT:  ^bb0(%[[P:[^:]+]]: f32, %{{[^:]+}}: f32):
// CHECK:         %[[T:.+]] = arith.addf {{(.*, )?}}%[[P]]{{(,| :)}}
// CHECK:         linalg.yield %[[T]] : f32
// CHECK:       tensor.insert_slice %[[TOTAL]] into
func.func @lower_l1(%x: tensor<4x8xf32>) {
  "opscope.stat"(%x) {kind = "l1", options = {}, role = "lhs", site = "s"} : (tensor<4x8xf32>) -> ()
  return
}

// -----

// CHECK-LABEL: func.func @lower_sumsq(
// CHECK-SAME:      -> (tensor<1xf32> {opscope.pack = [{length = 1 : i64, numel = 32 : i64, offset = 0 : i64, role = "lhs", site = "s", stat = "sumsq"}]})
// CHECK:       call @[[KERNEL:opscope_stats_[0-9a-z]+_[0-9a-f]+]](
// CHECK:       func.func private @[[KERNEL]](%{{.+}}: tensor<4x8xf32>) -> tensor<1xf32>
// CHECK:       %[[X:.+]] = tensor.expand_shape %arg0 {{\[\[}}0, 1], [2]] output_shape [1, 4, 8] : tensor<4x8xf32> into tensor<1x4x8xf32>
// CHECK:       %[[ROWS:.+]] = linalg.generic {{.*}}iterator_types = ["parallel", "parallel", "reduction"]} ins(%[[X]] : tensor<1x4x8xf32>) outs(%{{.+}} : tensor<1x4xf32>)
// CHECK-NEXT:  ^bb0(%[[V:[^:]+]]: f32, %{{[^:]+}}: f32):
// CHECK:         %[[SQ:.+]] = arith.mulf %[[V]], %[[V]] : f32
// CHECK:         %[[R:.+]] = arith.addf {{(.*, )?}}%[[SQ]]{{(,| :)}}
// CHECK:         linalg.yield %[[R]] : f32
// CHECK:       %[[TOTAL:.+]] = linalg.generic {{.*}}iterator_types = ["parallel", "reduction"]} ins(%[[ROWS]] : tensor<1x4xf32>) outs(%{{.+}} : tensor<1xf32>)
// CHECK-NEXT:  ^bb0(%[[P:[^:]+]]: f32, %{{[^:]+}}: f32):
// CHECK:         %[[T:.+]] = arith.addf {{(.*, )?}}%[[P]]{{(,| :)}}
// CHECK:         linalg.yield %[[T]] : f32
// CHECK:       tensor.insert_slice %[[TOTAL]] into
func.func @lower_sumsq(%x: tensor<4x8xf32>) {
  "opscope.stat"(%x) {kind = "sumsq", options = {}, role = "lhs", site = "s"} : (tensor<4x8xf32>) -> ()
  return
}

// -----

// CHECK-LABEL: func.func @lower_nnz(
// CHECK-SAME:      -> (tensor<1xf32> {opscope.pack = [{length = 1 : i64, numel = 32 : i64, offset = 0 : i64, role = "lhs", site = "s", stat = "nnz"}]})
// CHECK:       call @[[KERNEL:opscope_stats_[0-9a-z]+_[0-9a-f]+]](
// CHECK:       func.func private @[[KERNEL]](%{{.+}}: tensor<4x8xf32>) -> tensor<1xf32>
// CHECK:       %[[X:.+]] = tensor.expand_shape %arg0 {{\[\[}}0, 1], [2]] output_shape [1, 4, 8] : tensor<4x8xf32> into tensor<1x4x8xf32>
// CHECK:       %[[ROWS:.+]] = linalg.generic {{.*}}iterator_types = ["parallel", "parallel", "reduction"]} ins(%[[X]] : tensor<1x4x8xf32>) outs(%{{.+}} : tensor<1x4xf32>)
// CHECK-NEXT:  ^bb0(%[[V:[^:]+]]: f32, %{{[^:]+}}: f32):
// CHECK-DAG:     %[[ZERO:.+]] = arith.constant 0.000000e+00 : f32
// CHECK-DAG:     %[[ONE:.+]] = arith.constant 1.000000e+00 : f32
// CHECK:         %[[NZ:.+]] = arith.cmpf une, %[[V]], %[[ZERO]] : f32
// CHECK:         %[[C:.+]] = arith.select %[[NZ]], %[[ONE]], %[[ZERO]] : f32
// CHECK:         %[[R:.+]] = arith.addf {{(.*, )?}}%[[C]]{{(,| :)}}
// CHECK:         linalg.yield %[[R]] : f32
// CHECK:       %[[TOTAL:.+]] = linalg.generic {{.*}}iterator_types = ["parallel", "reduction"]} ins(%[[ROWS]] : tensor<1x4xf32>) outs(%{{.+}} : tensor<1xf32>)
// CHECK-NEXT:  ^bb0(%[[P:[^:]+]]: f32, %{{[^:]+}}: f32):
// CHECK:         %[[T:.+]] = arith.addf {{(.*, )?}}%[[P]]{{(,| :)}}
// CHECK:         linalg.yield %[[T]] : f32
// CHECK:       tensor.insert_slice %[[TOTAL]] into
func.func @lower_nnz(%x: tensor<4x8xf32>) {
  "opscope.stat"(%x) {kind = "nnz", options = {}, role = "lhs", site = "s"} : (tensor<4x8xf32>) -> ()
  return
}

// -----

// kurtosis needs the mean first: a second pass over x (a stack of one, [1, 4, 8]) takes
// the sum per tensor ([1]) and divides it by n in its body, then sums the centred second
// and fourth powers; m4 / (m2² + eps) follows, each moment divided by n.

// CHECK-LABEL: func.func @lower_kurtosis(
// CHECK-SAME:      -> (tensor<1xf32> {opscope.pack = [{length = 1 : i64, numel = 32 : i64, offset = 0 : i64, role = "lhs", site = "s", stat = "kurtosis"}]})
// CHECK:       call @[[KERNEL:opscope_stats_[0-9a-z]+_[0-9a-f]+]](
// CHECK:       func.func private @[[KERNEL]](%{{.+}}: tensor<4x8xf32>) -> tensor<1xf32>
// CHECK:       %[[X:.+]] = tensor.expand_shape %arg0 {{\[\[}}0, 1], [2]] output_shape [1, 4, 8] : tensor<4x8xf32> into tensor<1x4x8xf32>
// CHECK:       %[[ROWS:.+]] = linalg.generic {{.*}}iterator_types = ["parallel", "parallel", "reduction"]} ins(%[[X]] : tensor<1x4x8xf32>) outs(%{{.+}} : tensor<1x4xf32>)
// CHECK-NEXT:  ^bb0(%[[V:[^:]+]]: f32, %{{[^:]+}}: f32):
// CHECK:         %[[R:.+]] = arith.addf {{(.*, )?}}%[[V]]{{(,| :)}}
// CHECK:         linalg.yield %[[R]] : f32
// CHECK:       %[[TOTAL:.+]] = linalg.generic {{.*}}iterator_types = ["parallel", "reduction"]} ins(%[[ROWS]] : tensor<1x4xf32>) outs(%{{.+}} : tensor<1xf32>)
// CHECK-NEXT:  ^bb0(%[[P:[^:]+]]: f32, %{{[^:]+}}: f32):
// CHECK:         %[[T:.+]] = arith.addf {{(.*, )?}}%[[P]]{{(,| :)}}
// CHECK:         linalg.yield %[[T]] : f32
// CHECK:       %[[MOM:[0-9a-z_]+]]:2 = linalg.generic {{.*}}ins(%[[X]], %[[TOTAL]] : tensor<1x4x8xf32>, tensor<1xf32>)
// CHECK-NEXT:  ^bb0(%[[V2:[^:]+]]: f32, %[[SUM:[^:]+]]: f32, %{{[^:]+}}: f32, %{{[^:]+}}: f32):
// CHECK:         %[[N:.+]] = arith.constant 3.200000e+01 : f32
// CHECK:         %[[MU:.+]] = arith.divf %[[SUM]], %[[N]] : f32
// CHECK:         %[[D:.+]] = arith.subf %[[V2]], %[[MU]] : f32
// CHECK:         %[[D2:.+]] = arith.mulf %[[D]], %[[D]] : f32
// CHECK:         %[[D4:.+]] = arith.mulf %[[D2]], %[[D2]] : f32
// CHECK:         %[[A2:.+]] = arith.addf {{(.*, )?}}%[[D2]]{{(,| :)}}
// CHECK:         %[[A4:.+]] = arith.addf {{(.*, )?}}%[[D4]]{{(,| :)}}
// CHECK:         linalg.yield %[[A2]], %[[A4]] : f32, f32
// CHECK:       %[[MOMT:[0-9a-z_]+]]:2 = linalg.generic {{.*}}ins(%[[MOM]]#0, %[[MOM]]#1 : tensor<1x4xf32>, tensor<1x4xf32>)
// CHECK-NEXT:  ^bb0(%[[Q2:[^:]+]]: f32, %[[Q4:[^:]+]]: f32, %{{[^:]+}}: f32, %{{[^:]+}}: f32):
// CHECK:         %[[T2:.+]] = arith.addf {{(.*, )?}}%[[Q2]]{{(,| :)}}
// CHECK:         %[[T4:.+]] = arith.addf {{(.*, )?}}%[[Q4]]{{(,| :)}}
// CHECK:         linalg.yield %[[T2]], %[[T4]] : f32, f32
// CHECK:       %[[KURT:.+]] = linalg.generic {{.*}}ins(%[[MOMT]]#0, %[[MOMT]]#1 : tensor<1xf32>, tensor<1xf32>)
// CHECK-NEXT:  ^bb0(%[[S2:[^:]+]]: f32, %[[S4:[^:]+]]: f32, %{{[^:]+}}: f32):
// CHECK:         %[[N2:.+]] = arith.constant 3.200000e+01 : f32
// CHECK:         %[[M2:.+]] = arith.divf %[[S2]], %[[N2]] : f32
// CHECK:         %[[M4:.+]] = arith.divf %[[S4]], %[[N2]] : f32
// CHECK:         %[[M22:.+]] = arith.mulf %[[M2]], %[[M2]] : f32
// CHECK:         %[[DEN:.+]] = arith.addf {{(.*, )?}}%[[M22]]{{(,| :)}}
// CHECK:         %[[K:.+]] = arith.divf %[[M4]], %[[DEN]] : f32
// CHECK:         linalg.yield %[[K]] : f32
// CHECK:       tensor.insert_slice %[[KURT]] into
func.func @lower_kurtosis(%x: tensor<4x8xf32>) {
  "opscope.stat"(%x) {kind = "kurtosis", options = {}, role = "lhs", site = "s"} : (tensor<4x8xf32>) -> ()
  return
}

// -----

// hist takes one bin index per element, floor((x - lo) / width) corrected against the
// bin's edges, -1 outside [lo, hi]; then counts per bin in a 3-loop generic that reads
// the bin from linalg.index, and sums the counts over rows. The range [-1, 3] keeps lo,
// hi and 1/width distinct constants.

// CHECK-LABEL: func.func @lower_hist(
// CHECK-SAME:      -> (tensor<8xf32> {opscope.pack = [{length = 8 : i64, numel = 32 : i64, offset = 0 : i64, role = "lhs", site = "s", stat = "hist"}]})
// CHECK:       call @[[KERNEL:opscope_stats_[0-9a-z]+_[0-9a-f]+]](
// CHECK:       func.func private @[[KERNEL]](%{{.+}}: tensor<4x8xf32>) -> tensor<8xf32>
// CHECK:       %[[X:.+]] = tensor.expand_shape %arg0 {{\[\[}}0, 1], [2]] output_shape [1, 4, 8] : tensor<4x8xf32> into tensor<1x4x8xf32>
// CHECK:       %[[BINS:.+]] = linalg.generic {{.*}}iterator_types = ["parallel", "parallel", "parallel"]} ins(%[[X]] : tensor<1x4x8xf32>) outs(%{{.+}} : tensor<1x4x8xi32>)
// CHECK-NEXT:  ^bb0(%[[V:[^:]+]]: f32, %{{[^:]+}}: i32):
// CHECK-DAG:     %[[LO:.+]] = arith.constant -1.000000e+00 : f32
// CHECK-DAG:     %[[HI:.+]] = arith.constant 3.000000e+00 : f32
// CHECK-DAG:     %[[INVW:.+]] = arith.constant 2.000000e+00 : f32
// CHECK-DAG:     %[[DROP:.+]] = arith.constant -1 : i32
// CHECK:         %[[T0:.+]] = arith.subf %[[V]], %[[LO]] : f32
// CHECK:         %[[T1:.+]] = arith.mulf %[[T0]], %[[INVW]] : f32
// CHECK:         %[[FL:.+]] = math.floor %[[T1]] : f32
// CHECK:         %[[CL0:.+]] = arith.maximumf {{(.*, )?}}%[[FL]]{{(,| :)}}
// CHECK:         %[[CL1:.+]] = arith.minimumf {{(.*, )?}}%[[CL0]]{{(,| :)}}
// CHECK:         %[[K0:.+]] = arith.fptosi %[[CL1]] : f32 to i32
// CHECK:         arith.cmpf olt, %[[V]], %{{.+}} : f32
// CHECK:         arith.cmpf oge, %[[V]], %{{.+}} : f32
// CHECK:         %[[GE:.+]] = arith.cmpf oge, %[[V]], %[[LO]] : f32
// CHECK:         %[[LE:.+]] = arith.cmpf ole, %[[V]], %[[HI]] : f32
// CHECK:         %[[INR:.+]] = arith.andi {{(.*, )?}}%[[GE]]{{(,| :)}}
// CHECK:         %[[K:.+]] = arith.select %[[INR]], %{{.+}}, %[[DROP]] : i32
// CHECK:         linalg.yield %[[K]] : i32
// CHECK:       %[[COUNTS:.+]] = linalg.generic {{.*}}iterator_types = ["parallel", "parallel", "reduction", "parallel"]} ins(%[[BINS]] : tensor<1x4x8xi32>) outs(%{{.+}} : tensor<1x4x8xi32>)
// CHECK-NEXT:  ^bb0(%[[KI:[^:]+]]: i32, %{{[^:]+}}: i32):
// CHECK:         %[[B:.+]] = linalg.index 3 : index
// CHECK:         %[[BI:.+]] = arith.index_cast %[[B]] : index to i32
// CHECK:         %[[HIT:.+]] = arith.cmpi eq, {{(.*, )?}}%[[BI]]{{(,| :)}}
// CHECK:         %[[ONE:.+]] = arith.extui %[[HIT]] : i1 to i32
// CHECK:         %[[NEXT:.+]] = arith.addi {{(.*, )?}}%[[ONE]]{{(,| :)}}
// CHECK:         linalg.yield %[[NEXT]] : i32
// CHECK:       %[[HIST:.+]] = linalg.generic {{.*}}iterator_types = ["parallel", "reduction", "parallel"]} ins(%[[COUNTS]] : tensor<1x4x8xi32>) outs(%{{.+}} : tensor<1x8xf32>)
// CHECK-NEXT:  ^bb0(%[[C:[^:]+]]: i32, %{{[^:]+}}: f32):
// CHECK:         %[[CF:.+]] = arith.sitofp %[[C]] : i32 to f32
// CHECK:         %[[S:.+]] = arith.addf {{(.*, )?}}%[[CF]]{{(,| :)}}
// CHECK:         linalg.yield %[[S]] : f32
// CHECK:       tensor.collapse_shape %[[HIST]]
func.func @lower_hist(%x: tensor<4x8xf32>) {
  "opscope.stat"(%x) {kind = "hist", options = {bins = 8 : i64, hi = 3.0 : f32, lo = -1.0 : f32, normalize = false}, role = "lhs", site = "s"} : (tensor<4x8xf32>) -> ()
  return
}

// -----

// CHECK-LABEL: func.func @lower_hist_normalized(
// CHECK-SAME:      -> (tensor<32xf32> {opscope.pack = [{length = 32 : i64, numel = 32 : i64, offset = 0 : i64, role = "lhs", site = "s", stat = "hist"}]})
// CHECK:       call @[[KERNEL:opscope_stats_[0-9a-z]+_[0-9a-f]+]](
// CHECK:       func.func private @[[KERNEL]](%{{.+}}: tensor<4x8xf32>) -> tensor<32xf32>
// CHECK:       %[[X:.+]] = tensor.expand_shape %arg0 {{\[\[}}0, 1], [2]] output_shape [1, 4, 8] : tensor<4x8xf32> into tensor<1x4x8xf32>
// CHECK:       %[[ROWS:[0-9a-z_]+]]:2 = linalg.generic {{.*}}ins(%[[X]] : tensor<1x4x8xf32>)
// CHECK-NEXT:  ^bb0(%[[V:[^:]+]]: f32, %{{[^:]+}}: f32, %{{[^:]+}}: f32):
// CHECK:         %[[RMIN:.+]] = arith.minimumf {{(.*, )?}}%[[V]]{{(,| :)}}
// CHECK:         %[[RMAX:.+]] = arith.maximumf {{(.*, )?}}%[[V]]{{(,| :)}}
// CHECK:         linalg.yield %[[RMIN]], %[[RMAX]] : f32, f32
// CHECK:       %[[TOT:[0-9a-z_]+]]:2 = linalg.generic {{.*}}ins(%[[ROWS]]#0, %[[ROWS]]#1 : tensor<1x4xf32>, tensor<1x4xf32>)
// CHECK-NEXT:  ^bb0(%[[P0:[^:]+]]: f32, %[[P1:[^:]+]]: f32, %{{[^:]+}}: f32, %{{[^:]+}}: f32):
// CHECK:         %[[TMIN:.+]] = arith.minimumf {{(.*, )?}}%[[P0]]{{(,| :)}}
// CHECK:         %[[TMAX:.+]] = arith.maximumf {{(.*, )?}}%[[P1]]{{(,| :)}}
// CHECK:         linalg.yield %[[TMIN]], %[[TMAX]] : f32, f32
// CHECK:       %[[BINS:.+]] = linalg.generic {{.*}}ins(%[[X]], %[[TOT]]#0, %[[TOT]]#1 : tensor<1x4x8xf32>, tensor<1xf32>, tensor<1xf32>) outs(%{{.+}} : tensor<1x4x8xi32>)
// CHECK-NEXT:  ^bb0(%[[V2:[^:]+]]: f32, %[[MIN:[^:]+]]: f32, %[[MAX:[^:]+]]: f32, %{{[^:]+}}: i32):
// CHECK-DAG:     %[[LO:.+]] = arith.constant -1.000000e+00 : f32
// CHECK-DAG:     %[[HI:.+]] = arith.constant 1.000000e+00 : f32
// CHECK-DAG:     %[[INVW:.+]] = arith.constant 1.600000e+01 : f32
// CHECK-DAG:     %[[DROP:.+]] = arith.constant -1 : i32
// CHECK:         %[[NMIN:.+]] = arith.negf %[[MIN]] : f32
// CHECK:         %[[MAXABS:.+]] = arith.maximumf %[[NMIN]], %[[MAX]] : f32
// CHECK:         %[[SCALE:.+]] = arith.addf {{(.*, )?}}%[[MAXABS]]{{(,| :)}}
// CHECK:         %[[U:.+]] = arith.divf %[[V2]], %[[SCALE]] : f32
// CHECK:         %[[T0:.+]] = arith.subf %[[U]], %[[LO]] : f32
// CHECK:         %[[T1:.+]] = arith.mulf %[[T0]], %[[INVW]] : f32
// CHECK:         %[[FL:.+]] = math.floor %[[T1]] : f32
// CHECK:         %[[CL0:.+]] = arith.maximumf {{(.*, )?}}%[[FL]]{{(,| :)}}
// CHECK:         %[[CL1:.+]] = arith.minimumf {{(.*, )?}}%[[CL0]]{{(,| :)}}
// CHECK:         %[[K0:.+]] = arith.fptosi %[[CL1]] : f32 to i32
// CHECK:         arith.cmpf olt, %[[U]], %{{.+}} : f32
// CHECK:         arith.cmpf oge, %[[U]], %{{.+}} : f32
// CHECK:         %[[GE:.+]] = arith.cmpf oge, %[[U]], %[[LO]] : f32
// CHECK:         %[[LE:.+]] = arith.cmpf ole, %[[U]], %[[HI]] : f32
// CHECK:         %[[INR:.+]] = arith.andi {{(.*, )?}}%[[GE]]{{(,| :)}}
// CHECK:         %[[K:.+]] = arith.select %[[INR]], %{{.+}}, %[[DROP]] : i32
// CHECK:         linalg.yield %[[K]] : i32
// CHECK:       %[[COUNTS:.+]] = linalg.generic {{.*}}iterator_types = ["parallel", "parallel", "reduction", "parallel"]} ins(%[[BINS]] : tensor<1x4x8xi32>) outs(%{{.+}} : tensor<1x4x32xi32>)
// CHECK-NEXT:  ^bb0(%[[KI:[^:]+]]: i32, %{{[^:]+}}: i32):
// CHECK:         %[[B:.+]] = linalg.index 3 : index
// CHECK:         %[[BI:.+]] = arith.index_cast %[[B]] : index to i32
// CHECK:         %[[HIT:.+]] = arith.cmpi eq, {{(.*, )?}}%[[BI]]{{(,| :)}}
// CHECK:         %[[ONE:.+]] = arith.extui %[[HIT]] : i1 to i32
// CHECK:         %[[NEXT:.+]] = arith.addi {{(.*, )?}}%[[ONE]]{{(,| :)}}
// CHECK:         linalg.yield %[[NEXT]] : i32
// CHECK:       %[[HIST:.+]] = linalg.generic {{.*}}iterator_types = ["parallel", "reduction", "parallel"]} ins(%[[COUNTS]] : tensor<1x4x32xi32>) outs(%{{.+}} : tensor<1x32xf32>)
// CHECK-NEXT:  ^bb0(%[[C:[^:]+]]: i32, %{{[^:]+}}: f32):
// CHECK:         %[[CF:.+]] = arith.sitofp %[[C]] : i32 to f32
// CHECK:         %[[S:.+]] = arith.addf {{(.*, )?}}%[[CF]]{{(,| :)}}
// CHECK:         linalg.yield %[[S]] : f32
// CHECK:       tensor.collapse_shape %[[HIST]]
func.func @lower_hist_normalized(%x: tensor<4x8xf32>) {
  "opscope.stat"(%x) {kind = "hist", options = {bins = 32 : i64, hi = 1.0 : f32, lo = -1.0 : f32, normalize = true}, role = "lhs", site = "s"} : (tensor<4x8xf32>) -> ()
  return
}

// -----

// elemsig gathers 16 evenly spaced elements with tensor.extract: element j sits at flat
// index j·n/16 + (j·37 mod n/16), read at (flat / C, flat mod C).

// CHECK-LABEL: func.func @lower_elemsig(
// CHECK-SAME:      -> (tensor<16xf32> {opscope.pack = [{length = 16 : i64, numel = 32 : i64, offset = 0 : i64, role = "lhs", site = "s", stat = "elemsig"}]})
// CHECK:       call @[[KERNEL:opscope_stats_[0-9a-z]+_[0-9a-f]+]](
// CHECK:       func.func private @[[KERNEL]](%{{.+}}: tensor<4x8xf32>) -> tensor<16xf32>
// CHECK:       %[[X:.+]] = tensor.expand_shape %arg0 {{\[\[}}0, 1], [2]] output_shape [1, 4, 8] : tensor<4x8xf32> into tensor<1x4x8xf32>
// CHECK:       %[[SIG:.+]] = linalg.generic {{.*}}iterator_types = ["parallel", "parallel"]} outs(%{{.+}} : tensor<1x16xf32>)
// CHECK-NEXT:  ^bb0(%{{[^:]+}}: f32):
// CHECK-DAG:     %[[T:.+]] = linalg.index 0 : index
// CHECK-DAG:     %[[J:.+]] = linalg.index 1 : index
// CHECK-DAG:     %[[N:.+]] = arith.constant 32 : index
// CHECK-DAG:     %[[K:.+]] = arith.constant 16 : index
// CHECK-DAG:     %[[COLS:.+]] = arith.constant 8 : index
// CHECK-DAG:     %[[SKEW:.+]] = arith.constant 37 : index
// CHECK-DAG:     %[[WIN:.+]] = arith.constant 2 : index
// CHECK:         %[[JN:.+]] = arith.muli %[[J]], %[[N]] : index
// CHECK:         %[[START:.+]] = arith.divui %[[JN]], %[[K]] : index
// CHECK:         %[[JS:.+]] = arith.muli %[[J]], %[[SKEW]] : index
// CHECK:         %[[INTO:.+]] = arith.remui %[[JS]], %[[WIN]] : index
// CHECK:         %[[FLAT:.+]] = arith.addi %[[START]], %[[INTO]] : index
// CHECK:         %[[R:.+]] = arith.divui %[[FLAT]], %[[COLS]] : index
// CHECK:         %[[C:.+]] = arith.remui %[[FLAT]], %[[COLS]] : index
// CHECK:         %[[E:.+]] = tensor.extract %[[X]][%[[T]], %[[R]], %[[C]]] : tensor<1x4x8xf32>
// CHECK:         linalg.yield %[[E]] : f32
// CHECK:       tensor.collapse_shape %[[SIG]]
func.func @lower_elemsig(%x: tensor<4x8xf32>) {
  "opscope.stat"(%x) {kind = "elemsig", options = {}, role = "lhs", site = "s"} : (tensor<4x8xf32>) -> ()
  return
}

// -----

// A tensor of fewer than 16 elements gives all of them.

// CHECK-LABEL: func.func @lower_elemsig_of_small_tensor(
// CHECK-SAME:      -> (tensor<6xf32> {opscope.pack = [{length = 6 : i64, numel = 6 : i64, offset = 0 : i64, role = "lhs", site = "s", stat = "elemsig"}]})
// CHECK:       call @[[KERNEL:opscope_stats_[0-9a-z]+_[0-9a-f]+]](
// CHECK:       func.func private @[[KERNEL]](%{{.+}}: tensor<2x3xf32>) -> tensor<6xf32>
// CHECK:       tensor.extract %
func.func @lower_elemsig_of_small_tensor(%x: tensor<2x3xf32>) {
  "opscope.stat"(%x) {kind = "elemsig", options = {}, role = "lhs", site = "s"} : (tensor<2x3xf32>) -> ()
  return
}

// -----

// One max|x| per channel (last axis): C = 8 values.

// CHECK-LABEL: func.func @lower_chan_maxabs(
// CHECK-SAME:      -> (tensor<8xf32> {opscope.pack = [{length = 8 : i64, numel = 32 : i64, offset = 0 : i64, role = "lhs", site = "s", stat = "chan_maxabs"}]})
// CHECK:       call @[[KERNEL:opscope_stats_[0-9a-z]+_[0-9a-f]+]](
// CHECK:       func.func private @[[KERNEL]](%{{.+}}: tensor<4x8xf32>) -> tensor<8xf32>
// CHECK:       %[[X:.+]] = tensor.expand_shape %arg0 {{\[\[}}0, 1], [2]] output_shape [1, 4, 8] : tensor<4x8xf32> into tensor<1x4x8xf32>
// CHECK:       %[[CHAN:.+]] = linalg.generic {{.*}}iterator_types = ["parallel", "reduction", "parallel"]} ins(%[[X]] : tensor<1x4x8xf32>) outs(%{{.+}} : tensor<1x8xf32>)
// CHECK-NEXT:  ^bb0(%[[V:[^:]+]]: f32, %{{[^:]+}}: f32):
// CHECK:         %[[ABS:.+]] = math.absf %[[V]] : f32
// CHECK:         %[[M:.+]] = arith.maximumf {{(.*, )?}}%[[ABS]]{{(,| :)}}
// CHECK:         linalg.yield %[[M]] : f32
// CHECK:       tensor.collapse_shape %[[CHAN]]
func.func @lower_chan_maxabs(%x: tensor<4x8xf32>) {
  "opscope.stat"(%x) {kind = "chan_maxabs", options = {}, role = "lhs", site = "s"} : (tensor<4x8xf32>) -> ()
  return
}

// -----

// max over channels of max|x|, divided by their mean.

// CHECK-LABEL: func.func @lower_chan_outlier(
// CHECK-SAME:      -> (tensor<1xf32> {opscope.pack = [{length = 1 : i64, numel = 32 : i64, offset = 0 : i64, role = "lhs", site = "s", stat = "chan_outlier"}]})
// CHECK:       call @[[KERNEL:opscope_stats_[0-9a-z]+_[0-9a-f]+]](
// CHECK:       func.func private @[[KERNEL]](%{{.+}}: tensor<4x8xf32>) -> tensor<1xf32>
// CHECK:       %[[X:.+]] = tensor.expand_shape %arg0 {{\[\[}}0, 1], [2]] output_shape [1, 4, 8] : tensor<4x8xf32> into tensor<1x4x8xf32>
// CHECK:       %[[CHAN:.+]] = linalg.generic {{.*}}iterator_types = ["parallel", "reduction", "parallel"]} ins(%[[X]] : tensor<1x4x8xf32>) outs(%{{.+}} : tensor<1x8xf32>)
// CHECK-NEXT:  ^bb0(%[[V:[^:]+]]: f32, %{{[^:]+}}: f32):
// CHECK:         %[[ABS:.+]] = math.absf %[[V]] : f32
// CHECK:         %[[M:.+]] = arith.maximumf {{(.*, )?}}%[[ABS]]{{(,| :)}}
// CHECK:         linalg.yield %[[M]] : f32
// CHECK:       %[[RED:[0-9a-z_]+]]:2 = linalg.generic {{.*}}iterator_types = ["parallel", "reduction"]} ins(%[[CHAN]] : tensor<1x8xf32>)
// CHECK-NEXT:  ^bb0(%[[C:[^:]+]]: f32, %{{[^:]+}}: f32, %{{[^:]+}}: f32):
// CHECK:         %[[CMAX:.+]] = arith.maximumf {{(.*, )?}}%[[C]]{{(,| :)}}
// CHECK:         %[[CSUM:.+]] = arith.addf {{(.*, )?}}%[[C]]{{(,| :)}}
// CHECK:         linalg.yield %[[CMAX]], %[[CSUM]] : f32, f32
// CHECK:       %[[OUT:.+]] = linalg.generic {{.*}}ins(%[[RED]]#0, %[[RED]]#1 : tensor<1xf32>, tensor<1xf32>)
// CHECK-NEXT:  ^bb0(%[[PEAK:[^:]+]]: f32, %[[SUM:[^:]+]]: f32, %{{[^:]+}}: f32):
// CHECK:         %[[CHANS:.+]] = arith.constant 8.000000e+00 : f32
// CHECK:         %[[MEAN:.+]] = arith.divf %[[SUM]], %[[CHANS]] : f32
// CHECK:         %[[DEN:.+]] = arith.addf {{(.*, )?}}%[[MEAN]]{{(,| :)}}
// CHECK:         %[[R:.+]] = arith.divf %[[PEAK]], %[[DEN]] : f32
// CHECK:         linalg.yield %[[R]] : f32
// CHECK:       tensor.insert_slice %[[OUT]] into
func.func @lower_chan_outlier(%x: tensor<4x8xf32>) {
  "opscope.stat"(%x) {kind = "chan_outlier", options = {}, role = "lhs", site = "s"} : (tensor<4x8xf32>) -> ()
  return
}

// -----

// One sum of squares per position (row): R = 4 values.

// CHECK-LABEL: func.func @lower_pos_sumsq(
// CHECK-SAME:      -> (tensor<4xf32> {opscope.pack = [{length = 4 : i64, numel = 32 : i64, offset = 0 : i64, role = "lhs", site = "s", stat = "pos_sumsq"}]})
// CHECK:       call @[[KERNEL:opscope_stats_[0-9a-z]+_[0-9a-f]+]](
// CHECK:       func.func private @[[KERNEL]](%{{.+}}: tensor<4x8xf32>) -> tensor<4xf32>
// CHECK:       %[[X:.+]] = tensor.expand_shape %arg0 {{\[\[}}0, 1], [2]] output_shape [1, 4, 8] : tensor<4x8xf32> into tensor<1x4x8xf32>
// CHECK:       %[[ROWS:.+]] = linalg.generic {{.*}}iterator_types = ["parallel", "parallel", "reduction"]} ins(%[[X]] : tensor<1x4x8xf32>) outs(%{{.+}} : tensor<1x4xf32>)
// CHECK-NEXT:  ^bb0(%[[V:[^:]+]]: f32, %{{[^:]+}}: f32):
// CHECK:         %[[SQ:.+]] = arith.mulf %[[V]], %[[V]] : f32
// CHECK:         %[[R:.+]] = arith.addf {{(.*, )?}}%[[SQ]]{{(,| :)}}
// CHECK:         linalg.yield %[[R]] : f32
// CHECK:       %[[POS:.+]] = tensor.collapse_shape %[[ROWS]] {{\[\[}}0, 1]] : tensor<1x4xf32> into tensor<4xf32>
// CHECK:       tensor.insert_slice %[[POS]] into
func.func @lower_pos_sumsq(%x: tensor<4x8xf32>) {
  "opscope.stat"(%x) {kind = "pos_sumsq", options = {}, role = "lhs", site = "s"} : (tensor<4x8xf32>) -> ()
  return
}

// -----

// One squared distance per pair of adjacent rows: R - 1 = 3 values.

// CHECK-LABEL: func.func @lower_adj_sumsq(
// CHECK-SAME:      -> (tensor<3xf32> {opscope.pack = [{length = 3 : i64, numel = 32 : i64, offset = 0 : i64, role = "lhs", site = "s", stat = "adj_sumsq"}]})
// CHECK:       call @[[KERNEL:opscope_stats_[0-9a-z]+_[0-9a-f]+]](
// CHECK:       func.func private @[[KERNEL]](%{{.+}}: tensor<4x8xf32>) -> tensor<3xf32>
// CHECK:       %[[X:.+]] = tensor.expand_shape %arg0 {{\[\[}}0, 1], [2]] output_shape [1, 4, 8] : tensor<4x8xf32> into tensor<1x4x8xf32>
// CHECK-DAG:   %[[NEXT:.+]] = tensor.extract_slice %[[X]][0, 1, 0] [1, 3, 8] [1, 1, 1] : tensor<1x4x8xf32> to tensor<1x3x8xf32>
// CHECK-DAG:   %[[PREV:.+]] = tensor.extract_slice %[[X]][0, 0, 0] [1, 3, 8] [1, 1, 1] : tensor<1x4x8xf32> to tensor<1x3x8xf32>
// CHECK:       %[[ADJ:.+]] = linalg.generic {{.*}}iterator_types = ["parallel", "parallel", "reduction"]} ins(%[[NEXT]], %[[PREV]] : tensor<1x3x8xf32>, tensor<1x3x8xf32>) outs(%{{.+}} : tensor<1x3xf32>)
// CHECK-NEXT:  ^bb0(%[[A:[^:]+]]: f32, %[[B:[^:]+]]: f32, %{{[^:]+}}: f32):
// CHECK:         %[[D:.+]] = arith.subf %[[A]], %[[B]] : f32
// CHECK:         %[[D2:.+]] = arith.mulf %[[D]], %[[D]] : f32
// CHECK:         %[[S:.+]] = arith.addf {{(.*, )?}}%[[D2]]{{(,| :)}}
// CHECK:         linalg.yield %[[S]] : f32
// CHECK:       tensor.collapse_shape %[[ADJ]]
func.func @lower_adj_sumsq(%x: tensor<4x8xf32>) {
  "opscope.stat"(%x) {kind = "adj_sumsq", options = {}, role = "lhs", site = "s"} : (tensor<4x8xf32>) -> ()
  return
}

// -----

// A rank-3 tensor is viewed as rows [2*3, 4]: pos_sumsq has 6 values.

// CHECK-LABEL: func.func @lower_rank3_views_leading_dims_as_rows(
// CHECK-SAME:      -> (tensor<6xf32> {opscope.pack = [{length = 6 : i64, numel = 24 : i64, offset = 0 : i64, role = "lhs", site = "s", stat = "pos_sumsq"}]})
// CHECK:       call @[[KERNEL:opscope_stats_[0-9a-z]+_[0-9a-f]+]](
// CHECK:       func.func private @[[KERNEL]](%{{.+}}: tensor<2x3x4xf32>) -> tensor<6xf32>
// CHECK:       tensor.collapse_shape
func.func @lower_rank3_views_leading_dims_as_rows(%x: tensor<2x3x4xf32>) {
  "opscope.stat"(%x) {kind = "pos_sumsq", options = {}, role = "lhs", site = "s"} : (tensor<2x3x4xf32>) -> ()
  return
}

// -----

// Low-precision tensors are widened to f32 before any arithmetic.

// CHECK-LABEL: func.func @lower_f16_widens_to_f32(
// CHECK-SAME:      -> (tensor<1xf32> {opscope.pack = [{length = 1 : i64, numel = 32 : i64, offset = 0 : i64, role = "lhs", site = "s", stat = "sumsq"}]})
// CHECK:       call @[[KERNEL:opscope_stats_[0-9a-z]+_[0-9a-f]+]](
// CHECK:       func.func private @[[KERNEL]](%{{.+}}: tensor<4x8xf16>) -> tensor<1xf32>
// CHECK:       arith.extf %{{.+}} : f16 to f32
func.func @lower_f16_widens_to_f32(%x: tensor<4x8xf16>) {
  "opscope.stat"(%x) {kind = "sumsq", options = {}, role = "lhs", site = "s"} : (tensor<4x8xf16>) -> ()
  return
}

// -----

// CHECK-LABEL: func.func @lower_bf16_widens_to_f32(
// CHECK-SAME:      -> (tensor<1xf32> {opscope.pack = [{length = 1 : i64, numel = 32 : i64, offset = 0 : i64, role = "lhs", site = "s", stat = "sumsq"}]})
// CHECK:       call @[[KERNEL:opscope_stats_[0-9a-z]+_[0-9a-f]+]](
// CHECK:       func.func private @[[KERNEL]](%{{.+}}: tensor<4x8xbf16>) -> tensor<1xf32>
// CHECK:       arith.extf %{{.+}} : bf16 to f32
func.func @lower_bf16_widens_to_f32(%x: tensor<4x8xbf16>) {
  "opscope.stat"(%x) {kind = "sumsq", options = {}, role = "lhs", site = "s"} : (tensor<4x8xbf16>) -> ()
  return
}

// -----

// CHECK-LABEL: func.func @lower_rank1_tensor(
// CHECK-SAME:      -> (tensor<1xf32> {opscope.pack = [{length = 1 : i64, numel = 8 : i64, offset = 0 : i64, role = "lhs", site = "s", stat = "max"}]})
// CHECK:       call @[[KERNEL:opscope_stats_[0-9a-z]+_[0-9a-f]+]](
// CHECK:       func.func private @[[KERNEL]](%{{.+}}: tensor<8xf32>) -> tensor<1xf32>
// CHECK:       arith.max
func.func @lower_rank1_tensor(%x: tensor<8xf32>) {
  "opscope.stat"(%x) {kind = "max", options = {}, role = "lhs", site = "s"} : (tensor<8xf32>) -> ()
  return
}

// -----

// The 13 kinds of one tensor share one kernel and one packed result, laid out in the
// order of the ops.

// CHECK-LABEL: func.func @lower_all_kinds_into_one_packed_result(
// CHECK-SAME:      -> (tensor<47xf32> {opscope.pack = [{length = 1 : i64, numel = 32 : i64, offset = 0 : i64, role = "lhs", site = "s", stat = "min"}, {length = 1 : i64, numel = 32 : i64, offset = 1 : i64, role = "lhs", site = "s", stat = "max"}, {length = 1 : i64, numel = 32 : i64, offset = 2 : i64, role = "lhs", site = "s", stat = "mean"}, {length = 1 : i64, numel = 32 : i64, offset = 3 : i64, role = "lhs", site = "s", stat = "l1"}, {length = 1 : i64, numel = 32 : i64, offset = 4 : i64, role = "lhs", site = "s", stat = "sumsq"}, {length = 1 : i64, numel = 32 : i64, offset = 5 : i64, role = "lhs", site = "s", stat = "nnz"}, {length = 1 : i64, numel = 32 : i64, offset = 6 : i64, role = "lhs", site = "s", stat = "kurtosis"}, {length = 8 : i64, numel = 32 : i64, offset = 7 : i64, role = "lhs", site = "s", stat = "hist"}, {length = 16 : i64, numel = 32 : i64, offset = 15 : i64, role = "lhs", site = "s", stat = "elemsig"}, {length = 8 : i64, numel = 32 : i64, offset = 31 : i64, role = "lhs", site = "s", stat = "chan_maxabs"}, {length = 1 : i64, numel = 32 : i64, offset = 39 : i64, role = "lhs", site = "s", stat = "chan_outlier"}, {length = 4 : i64, numel = 32 : i64, offset = 40 : i64, role = "lhs", site = "s", stat = "pos_sumsq"}, {length = 3 : i64, numel = 32 : i64, offset = 44 : i64, role = "lhs", site = "s", stat = "adj_sumsq"}]})
// CHECK-COUNT-1: call @opscope_stats_4x8xf32_
// CHECK-NOT:   call @
// CHECK:       return %{{.+}} : tensor<47xf32>
// CHECK:       func.func private @opscope_stats_4x8xf32_{{[0-9a-f]+}}(%{{.+}}: tensor<4x8xf32>) -> tensor<47xf32>
// CHECK-NOT:   func.func private
func.func @lower_all_kinds_into_one_packed_result(%x: tensor<4x8xf32>) {
  "opscope.stat"(%x) {kind = "min", options = {}, role = "lhs", site = "s"} : (tensor<4x8xf32>) -> ()
  "opscope.stat"(%x) {kind = "max", options = {}, role = "lhs", site = "s"} : (tensor<4x8xf32>) -> ()
  "opscope.stat"(%x) {kind = "mean", options = {}, role = "lhs", site = "s"} : (tensor<4x8xf32>) -> ()
  "opscope.stat"(%x) {kind = "l1", options = {}, role = "lhs", site = "s"} : (tensor<4x8xf32>) -> ()
  "opscope.stat"(%x) {kind = "sumsq", options = {}, role = "lhs", site = "s"} : (tensor<4x8xf32>) -> ()
  "opscope.stat"(%x) {kind = "nnz", options = {}, role = "lhs", site = "s"} : (tensor<4x8xf32>) -> ()
  "opscope.stat"(%x) {kind = "kurtosis", options = {}, role = "lhs", site = "s"} : (tensor<4x8xf32>) -> ()
  "opscope.stat"(%x) {kind = "hist", options = {bins = 8 : i64, hi = 1.0 : f32, lo = -1.0 : f32, normalize = true}, role = "lhs", site = "s"} : (tensor<4x8xf32>) -> ()
  "opscope.stat"(%x) {kind = "elemsig", options = {}, role = "lhs", site = "s"} : (tensor<4x8xf32>) -> ()
  "opscope.stat"(%x) {kind = "chan_maxabs", options = {}, role = "lhs", site = "s"} : (tensor<4x8xf32>) -> ()
  "opscope.stat"(%x) {kind = "chan_outlier", options = {}, role = "lhs", site = "s"} : (tensor<4x8xf32>) -> ()
  "opscope.stat"(%x) {kind = "pos_sumsq", options = {}, role = "lhs", site = "s"} : (tensor<4x8xf32>) -> ()
  "opscope.stat"(%x) {kind = "adj_sumsq", options = {}, role = "lhs", site = "s"} : (tensor<4x8xf32>) -> ()
  return
}
