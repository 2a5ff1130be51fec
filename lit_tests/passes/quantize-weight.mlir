// RUN: opscope-opt %s -p quantize-weight --split-input-file | filecheck %s
// RUN: opscope-opt %s -p 'quantize-weight{bits=4}' --split-input-file | filecheck %s --check-prefix=BITS4
// RUN: opscope-opt %s -p 'quantize-weight{group=4}' --split-input-file | filecheck %s --check-prefix=GROUP
// RUN: opscope-opt %s -p 'quantize-weight{activations=true}' --split-input-file | filecheck %s --check-prefix=W8A8
// RUN: opscope-opt %s -p quantize-weight --split-input-file --print-debuginfo | filecheck %s --check-prefix=LOC
// RUN: opscope-opt %s -p quantize-weight --split-input-file -o %t 2>&1 | filecheck %s --check-prefix=WARN
// RUN: %PYTHON -c "import numpy as n; n.savez('%t.npz', fc1=n.array([4, 1, 1, 1, 1, 1, 1, 64], 'f4'))"
// RUN: opscope-opt %s -p 'quantize-weight{activations=true smooth=0.5 calibration=%t.npz}' --split-input-file | filecheck %s --check-prefix=SMOOTH
// RUN: opscope-opt %s -p 'quantize-weight{activations=true static=true calibration=%t.npz}' --split-input-file | filecheck %s --check-prefix=STATIC

// An importer's Linear: W [N, K] = [4, 8] fed to a matmul as its transpose. W is stored as
// i8 codes [K, N] = [8, 4], transposed on the host (a matmul rhs' layout, which IREE's
// contraction codegen reads in vectors along N; read along K it is 3x slower), with one
// scale per output channel (amax/127; the all-zero channel gets scale 0). The scales are
// factored out of the K sum: the matmul becomes a mixed-type contraction of x with the
// codes, Σ_k x·sitofp(q) into zeros (two inputs and a multiply-add body: IREE tiles it as a
// matmul), then one elementwise generic out + acc·scale into the matmul's outs. No
// transpose and no standalone dequantization is left for IREE to fold back into an f32
// constant.

// CHECK-DAG:   #[[$X:.+]] = affine_map<(d0, d1, d2) -> (d0, d2)>
// CHECK-DAG:   #[[$CODES:.+]] = affine_map<(d0, d1, d2) -> (d2, d1)>
// CHECK-DAG:   #[[$OUT:.+]] = affine_map<(d0, d1, d2) -> (d0, d1)>
// CHECK-DAG:   #[[$ID:.+]] = affine_map<(d0, d1) -> (d0, d1)>
// CHECK-DAG:   #[[$SCALE:.+]] = affine_map<(d0, d1) -> (d1)>
// CHECK-LABEL: func.func @per_channel_codes_of_a_transposed_weight(
// CHECK-SAME:      %[[X:.+]]: tensor<3x8xf32>, %[[C:.+]]: tensor<3x4xf32>)
// CHECK-NOT:   linalg.transpose
// CHECK:       %[[Q:.+]] = arith.constant dense_resource<opscope.fc1.codes> : tensor<8x4xi8>
// CHECK-NEXT:  %[[S:.+]] = arith.constant dense<[0.0314960629, 0.0314960629, 0.000000e+00, 0.0354330689]> : tensor<4xf32>
// CHECK:       %[[Z:.+]] = linalg.fill ins(%{{.+}} : f32) outs(%{{.+}} : tensor<3x4xf32>)
// CHECK-NEXT:  %[[ACC:.+]] = linalg.generic {indexing_maps = [#[[$X]], #[[$CODES]], #[[$OUT]]], iterator_types = ["parallel", "parallel", "reduction"]}
// CHECK-SAME:      ins(%[[X]], %[[Q]] : tensor<3x8xf32>, tensor<8x4xi8>) outs(%[[Z]] : tensor<3x4xf32>)
// CHECK-NEXT:  ^bb0(%[[A:.+]]: f32, %[[QI:.+]]: i8, %[[SUM:.+]]: f32):
// CHECK-NEXT:    %[[D:.+]] = arith.sitofp %[[QI]] : i8 to f32
// CHECK-NEXT:    %[[P:.+]] = arith.mulf %[[A]], %[[D]] : f32
// CHECK-NEXT:    %[[R:.+]] = arith.addf %[[SUM]], %[[P]] : f32
// CHECK-NEXT:    linalg.yield %[[R]] : f32
// CHECK:       %[[Y:.+]] = linalg.generic {indexing_maps = [#[[$ID]], #[[$SCALE]], #[[$ID]]], iterator_types = ["parallel", "parallel"]}
// CHECK-SAME:      ins(%[[ACC]], %[[S]] : tensor<3x4xf32>, tensor<4xf32>) outs(%[[C]] : tensor<3x4xf32>)
// CHECK-NEXT:  ^bb0(%[[AI:.+]]: f32, %[[SI:.+]]: f32, %[[O:.+]]: f32):
// CHECK-NEXT:    %[[T:.+]] = arith.mulf %[[AI]], %[[SI]] : f32
// CHECK-NEXT:    %[[U:.+]] = arith.addf %[[O]], %[[T]] : f32
// CHECK-NEXT:    linalg.yield %[[U]] : f32
// CHECK:       return %[[Y]]
// CHECK-NOT:   linalg.matmul
// CHECK:       opscope.fc1.codes: "0x010000002020001CC04000385F5F0055107F00710820001C40400038A15F00557F7F0081"

// bits=4: codes in [-7, 7], rounded half away from zero (W's row 0, now column 0: 3.5 -> 4,
// -3.5 -> -4), in an i4 global IREE packs two to a byte; inline.never keeps IREE from
// copying a small i4 constant into the dispatch, which llvm-cpu cannot lower.
// BITS4:       util.global private @opscope.fc1.codes <inlining_policy = #util.inline.never> = dense<{{\[}}[2, 2, 0, 2], [-4, 4, 0, 3], [5, 5, 0, 5], [1, 7, 0, 6], [0, 2, 0, 2], [4, 4, 0, 3], [-5, 5, 0, 5], [7, 7, 0, -7]]> : tensor<8x4xi4>
// BITS4-LABEL: func.func @per_channel_codes_of_a_transposed_weight(
// BITS4:       %[[Q:.+]] = util.global.load immutable @opscope.fc1.codes : tensor<8x4xi4>
// BITS4-NEXT:  %[[S:.+]] = arith.constant dense<[0.571428597, 0.571428597, 0.000000e+00, 0.642857194]> : tensor<4xf32>
// BITS4:       linalg.generic {{.+}} ins(%{{.+}}, %[[Q]] : tensor<3x8xf32>, tensor<8x4xi4>)
// BITS4:         arith.sitofp %{{.+}} : i4 to f32
// BITS4:       linalg.generic {{.+}} ins(%{{.+}}, %[[S]] : tensor<3x4xf32>, tensor<4xf32>)

// group=4: K = 8 in 2 groups of 4 consecutive elements, one scale per (group, output
// channel): the codes are stored [K/4, 4, N], the lhs is expanded to [M, K/4, 4]. The
// contraction sums each group on its own into p [K/4, M, N] (the group a batch loop, the
// first), an elementwise generic scales p, and a reduction sums the groups into the
// matmul's outs. Between the two, iree_tensor_ext.compute_barrier.start keeps IREE from
// fusing the scaling into the sum, a multiply-add it would data-tile as a second (slow)
// contraction.
// GROUP-DAG:   #[[$GX:.+]] = affine_map<(d0, d1, d2, d3) -> (d1, d0, d3)>
// GROUP-DAG:   #[[$GQ:.+]] = affine_map<(d0, d1, d2, d3) -> (d0, d3, d2)>
// GROUP-DAG:   #[[$GP:.+]] = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>
// GROUP-DAG:   #[[$GSUM:.+]] = affine_map<(d0, d1, d2) -> (d2, d0, d1)>
// GROUP-LABEL: func.func @per_channel_codes_of_a_transposed_weight(
// GROUP-SAME:      %[[X:.+]]: tensor<3x8xf32>, %[[C:.+]]: tensor<3x4xf32>)
// GROUP:       %[[Q:.+]] = arith.constant dense_resource<opscope.fc1.codes> : tensor<2x4x4xi8>
// GROUP-NEXT:  %[[S:.+]] = arith.constant dense<{{\[}}[0.0236220472, 0.0314960629, 0.000000e+00, 0.0314960629], [0.0314960629, 0.0314960629, 0.000000e+00, 0.0354330689]]> : tensor<2x4xf32>
// GROUP-NEXT:  %[[E:.+]] = tensor.expand_shape %[[X]] {{\[}}[0], [1, 2]] output_shape [3, 2, 4] : tensor<3x8xf32> into tensor<3x2x4xf32>
// GROUP:       %[[P:.+]] = linalg.generic {indexing_maps = [#[[$GX]], #[[$GQ]], #[[$GP]]], iterator_types = ["parallel", "parallel", "parallel", "reduction"]}
// GROUP-SAME:      ins(%[[E]], %[[Q]] : tensor<3x2x4xf32>, tensor<2x4x4xi8>) outs(%{{.+}} : tensor<2x3x4xf32>)
// GROUP:       %[[PS:.+]] = linalg.generic {{.+}} ins(%[[P]], %[[S]] : tensor<2x3x4xf32>, tensor<2x4xf32>)
// GROUP:       %[[B:.+]] = iree_tensor_ext.compute_barrier.start %[[PS]] : tensor<2x3x4xf32> -> tensor<2x3x4xf32>
// GROUP-NEXT:  %[[Y:.+]] = linalg.generic {indexing_maps = [#[[$GSUM]], #{{.+}}], iterator_types = ["parallel", "parallel", "reduction"]} ins(%[[B]] : tensor<2x3x4xf32>) outs(%[[C]] : tensor<3x4xf32>)
// GROUP-NEXT:  ^bb0(%[[PI:.+]]: f32, %[[O:.+]]: f32):
// GROUP-NEXT:    arith.addf %[[O]], %[[PI]] : f32
// GROUP:       return %[[Y]]

// activations=true (W8A8): x quantized per row at run time (amax over K, the same round and
// clamp as fakequant-activations, then fptosi to i8), an i8 x i8 -> i32 contraction with the
// codes, and one elementwise generic that scales the i32 sums back into the original outs:
// out + f32(acc)·(amax_x·(1/127))·scale, read through a compute barrier (a consumer that
// permutes the output, fused into the contraction's dispatch, keeps IREE from data-tiling it).
// W8A8-LABEL: func.func @per_channel_codes_of_a_transposed_weight(
// W8A8-SAME:      %[[X:.+]]: tensor<3x8xf32>, %[[C:.+]]: tensor<3x4xf32>)
// W8A8:       %[[Q:.+]] = arith.constant dense_resource<opscope.fc1.codes> : tensor<8x4xi8>
// W8A8:       %[[S:.+]] = arith.constant dense<[0.0314960629, 0.0314960629, 0.000000e+00, 0.0354330689]> : tensor<4xf32>
// W8A8:       %[[AMAX:.+]] = linalg.generic {{{.+}} iterator_types = ["parallel", "reduction"]} ins(%[[X]] : tensor<3x8xf32>) outs(%{{.+}} : tensor<3xf32>)
// W8A8:       %[[XQ:.+]] = linalg.generic {{{.+}} iterator_types = ["parallel", "parallel"]} ins(%[[X]], %[[AMAX]] : tensor<3x8xf32>, tensor<3xf32>) outs(%{{.+}} : tensor<3x8xi8>)
// W8A8:         math.round
// W8A8-NEXT:    arith.maximumf
// W8A8-NEXT:    arith.minimumf
// W8A8-NEXT:    arith.fptosi %{{.+}} : f32 to i8
// W8A8:       %[[ACC:.+]] = linalg.generic {{{.+}} iterator_types = ["parallel", "parallel", "reduction"]} ins(%[[XQ]], %[[Q]] : tensor<3x8xi8>, tensor<8x4xi8>) outs(%{{.+}} : tensor<3x4xi32>)
// W8A8-NEXT:  ^bb0(%{{.+}}: i8, %{{.+}}: i8, %{{.+}}: i32):
// W8A8-NEXT:    arith.extsi
// W8A8-NEXT:    arith.extsi
// W8A8-NEXT:    arith.muli
// W8A8-NEXT:    arith.addi
// W8A8:       %[[R:.+]] = linalg.generic {{{.+}} iterator_types = ["parallel", "parallel"]} ins(%[[ACC]], %[[AMAX]], %[[S]] : tensor<3x4xi32>, tensor<3xf32>, tensor<4xf32>) outs(%[[C]] : tensor<3x4xf32>)
// W8A8:         arith.constant 0.00787401571 : f32
// W8A8:         arith.sitofp %{{.+}} : i32 to f32
// W8A8-NEXT:    arith.mulf
// W8A8-NEXT:    arith.mulf
// W8A8-NEXT:    arith.addf
// W8A8:       %[[RB:.+]] = iree_tensor_ext.compute_barrier.start %[[R]] : tensor<3x4xf32> -> tensor<3x4xf32>
// W8A8-NEXT:  return %[[RB]]

// smooth=0.5 with a calibration (max|x| per K channel: 4, 1, ..., 1, 64): SmoothQuant's
// s_k = sqrt(max|x_k|) / sqrt(max|w_k|) (max|w_k| over W's rows: 1, 2, 3, 4, 1, 2, 3, 4.5).
// The weight's K rows are multiplied by s before its codes are taken; x is multiplied by
// 1/s (0.5 for channel 0, 1/3.77 = 0.265 for the outlier channel 7) in one elementwise
// generic that the row quantization reads, marked opscope.smoothing (a profile of the
// quantized model taps x, before it, as the site's lhs).
// SMOOTH-LABEL: func.func @per_channel_codes_of_a_transposed_weight(
// SMOOTH-SAME:      %[[X:.+]]: tensor<3x8xf32>, %[[C:.+]]: tensor<3x4xf32>)
// SMOOTH:       %[[INV:.+]] = arith.constant dense<[5.000000e-01, 1.41421354, 1.7320509, 2.000000e+00, 1.000000e+00, 1.41421354, 1.7320509, 0.265165031]> : tensor<8xf32>
// SMOOTH:       %[[XS:.+]] = linalg.generic {{{.+}} iterator_types = ["parallel", "parallel"]} ins(%[[X]], %[[INV]] : tensor<3x8xf32>, tensor<8xf32>) outs(%{{.+}} : tensor<3x8xf32>) attrs = {opscope.smoothing}
// SMOOTH-NEXT:  ^bb0(%{{.+}}: f32, %{{.+}}: f32, %{{.+}}: f32):
// SMOOTH-NEXT:    arith.mulf
// SMOOTH:       %[[Q:.+]] = arith.constant dense_resource<opscope.fc1.codes> : tensor<8x4xi8>
// SMOOTH:       %[[AMAX:.+]] = linalg.generic {{{.+}} iterator_types = ["parallel", "reduction"]} ins(%[[XS]] : tensor<3x8xf32>) outs(%{{.+}} : tensor<3xf32>)
// SMOOTH:       linalg.generic {{{.+}}} ins(%[[XS]], %[[AMAX]] : tensor<3x8xf32>, tensor<3xf32>) outs(%{{.+}} : tensor<3x8xi8>)

// static=true (without smoothing): every row's int8 scale is the calibration's max|x| (64), a
// constant; no reduction over the row runs. x is read through a compute barrier: without it
// IREE 3.13 fuses the codes into the dispatch of x's producer (a layer norm) with its data
// tiling's packing, and LLVM takes minutes on that dispatch (MiniLM: >200 s against 11 s).
// STATIC-LABEL: func.func @per_channel_codes_of_a_transposed_weight(
// STATIC-SAME:      %[[X:.+]]: tensor<3x8xf32>, %[[C:.+]]: tensor<3x4xf32>)
// STATIC-NOT:   iterator_types = ["parallel", "reduction"]
// STATIC:       %[[AMAX:.+]] = arith.constant dense<6.400000e+01> : tensor<3xf32>
// STATIC-NEXT:  %[[B:.+]] = iree_tensor_ext.compute_barrier.start %[[X]] : tensor<3x8xf32> -> tensor<3x8xf32>
// STATIC-NEXT:  %{{.+}} = tensor.empty() : tensor<3x8xi8>
// STATIC-NEXT:  linalg.generic {{{.+}}} ins(%[[B]], %[[AMAX]] : tensor<3x8xf32>, tensor<3xf32>) outs(%{{.+}} : tensor<3x8xi8>)

// The new ops keep the site's location (its name survives).
// LOC:         [[FC1:#loc[0-9]+]] = loc("fc1")
// LOC:         func.func @per_channel_codes_of_a_transposed_weight(
// LOC:         arith.constant dense_resource<opscope.fc1.codes> : tensor<8x4xi8> loc([[FC1]])
// LOC:         } -> tensor<3x4xf32> loc([[FC1]])
// LOC:         } -> tensor<3x4xf32> loc([[FC1]])
func.func @per_channel_codes_of_a_transposed_weight(%x: tensor<3x8xf32>, %c: tensor<3x4xf32>) -> tensor<3x4xf32> {
  %w = arith.constant dense<[[1.0, -2.0, 3.0, 0.5, 0.25, 2.0, -3.0, 4.0], [1.0, 2.0, 3.0, 4.0, 1.0, 2.0, 3.0, 4.0],
                             [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0], [1.0, 2.0, 3.0, 4.0, 1.0, 2.0, 3.0, -4.5]]> : tensor<4x8xf32>
  %e = tensor.empty() : tensor<8x4xf32>
  %t = linalg.transpose ins(%w : tensor<4x8xf32>) outs(%e : tensor<8x4xf32>) permutation = [1, 0]
  %0 = linalg.matmul ins(%x, %t : tensor<3x8xf32>, tensor<8x4xf32>) outs(%c : tensor<3x4xf32>) -> tensor<3x4xf32> loc("fc1")
  return %0 : tensor<3x4xf32>
}

// -----

// A 3-D Linear: batch_matmul reading broadcast(transpose(W)) of a global W [4, 8]. The codes
// are stored [K, N] and indexed (b, m, n, k) -> (k, n): the batch broadcast lives in the
// map, so the codes are stored once, not per batch. The f32 global is no longer read.

// CHECK-DAG:   #[[$BCODES:.+]] = affine_map<(d0, d1, d2, d3) -> (d3, d2)>
// CHECK-LABEL: func.func @batch_matmul_reads_codes_through_transpose_and_broadcast(
// CHECK-NOT:   util.global.load @w
// CHECK:       %[[Q:.+]] = arith.constant dense_resource<opscope.proj.codes> : tensor<8x4xi8>
// CHECK:       linalg.generic {indexing_maps = [#{{.+}}, #[[$BCODES]], #{{.+}}], iterator_types = ["parallel", "parallel", "parallel", "reduction"]}
// CHECK-SAME:      ins(%{{.+}}, %[[Q]] : tensor<2x3x8xf32>, tensor<8x4xi8>)
// CHECK:       linalg.generic {{.+}} ins(%{{.+}}, %{{.+}} : tensor<2x3x4xf32>, tensor<4xf32>)
// CHECK-NOT:   linalg.batch_matmul
// GROUP-LABEL: func.func @batch_matmul_reads_codes_through_transpose_and_broadcast(
// GROUP:       tensor.expand_shape %{{.+}} {{\[}}[0], [1], [2, 3]] output_shape [2, 3, 2, 4] : tensor<2x3x8xf32> into tensor<2x3x2x4xf32>
// GROUP:       linalg.generic {{.+}} ins(%{{.+}}, %{{.+}} : tensor<2x3x2x4xf32>, tensor<2x4x4xi8>) outs(%{{.+}} : tensor<2x2x3x4xf32>)
// GROUP:       linalg.generic {{.+}} ins(%{{.+}}, %{{.+}} : tensor<2x2x3x4xf32>, tensor<2x4xf32>)
// W8A8-LABEL: func.func @batch_matmul_reads_codes_through_transpose_and_broadcast(
// W8A8:       linalg.generic {{{.+}} iterator_types = ["parallel", "parallel", "reduction"]} ins(%{{.+}} : tensor<2x3x8xf32>) outs(%{{.+}} : tensor<2x3xf32>)
// W8A8:       linalg.generic {{.+}} ins(%{{.+}}, %{{.+}} : tensor<2x3x8xi8>, tensor<8x4xi8>) outs(%{{.+}} : tensor<2x3x4xi32>)
func.func @batch_matmul_reads_codes_through_transpose_and_broadcast(%x: tensor<2x3x8xf32>, %c: tensor<2x3x4xf32>) -> tensor<2x3x4xf32> {
  %w = util.global.load @w : tensor<4x8xf32>
  %e = tensor.empty() : tensor<8x4xf32>
  %t = linalg.transpose ins(%w : tensor<4x8xf32>) outs(%e : tensor<8x4xf32>) permutation = [1, 0]
  %e2 = tensor.empty() : tensor<2x8x4xf32>
  %b = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d1, d2)>, affine_map<(d0, d1, d2) -> (d0, d1, d2)>], iterator_types = ["parallel", "parallel", "parallel"]} ins(%t : tensor<8x4xf32>) outs(%e2 : tensor<2x8x4xf32>) {
  ^bb0(%in: f32, %out: f32):
    linalg.yield %in : f32
  } -> tensor<2x8x4xf32>
  %0 = linalg.batch_matmul ins(%x, %b : tensor<2x3x8xf32>, tensor<2x8x4xf32>) outs(%c : tensor<2x3x4xf32>) -> tensor<2x3x4xf32> loc("proj")
  return %0 : tensor<2x3x4xf32>
}
util.global private @w = dense<[[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0], [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0],
                                [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0], [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0]]> : tensor<4x8xf32>

// -----

// A 4-D Linear: the importer broadcasts Wᵀ over both batch dims and collapses them for
// batch_matmul; the collapsed batch dim is merged only from broadcast dims, so the codes
// are still read (b, m, n, k) -> (k, n).

// CHECK-LABEL: func.func @four_d_linear_reads_codes_through_collapse_shape(
// CHECK-NOT:   tensor.collapse_shape
// CHECK:       linalg.generic {{.+}} ins(%{{.+}}, %{{.+}} : tensor<4x3x8xf32>, tensor<8x4xi8>)
func.func @four_d_linear_reads_codes_through_collapse_shape(%x: tensor<4x3x8xf32>, %c: tensor<4x3x4xf32>) -> tensor<4x3x4xf32> {
  %w = util.global.load @w4 : tensor<4x8xf32>
  %e = tensor.empty() : tensor<8x4xf32>
  %t = linalg.transpose ins(%w : tensor<4x8xf32>) outs(%e : tensor<8x4xf32>) permutation = [1, 0]
  %e2 = tensor.empty() : tensor<2x2x8x4xf32>
  %b = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%t : tensor<8x4xf32>) outs(%e2 : tensor<2x2x8x4xf32>) {
  ^bb0(%in: f32, %out: f32):
    linalg.yield %in : f32
  } -> tensor<2x2x8x4xf32>
  %bc = tensor.collapse_shape %b [[0, 1], [2], [3]] : tensor<2x2x8x4xf32> into tensor<4x8x4xf32>
  %0 = linalg.batch_matmul ins(%x, %bc : tensor<4x3x8xf32>, tensor<4x8x4xf32>) outs(%c : tensor<4x3x4xf32>) -> tensor<4x3x4xf32> loc("proj4")
  return %0 : tensor<4x3x4xf32>
}
util.global private @w4 = dense<1.0> : tensor<4x8xf32>

// -----

// One weight read by two sites (tied) is quantized once; two sites reading one x (q and k
// projections) share one row quantization under W8A8.

// CHECK-LABEL: func.func @tied_weight_and_shared_lhs(
// CHECK:       %[[Q:.+]] = arith.constant dense_resource<opscope.a.codes> : tensor<8x4xi8>
// CHECK-NEXT:  %[[S:.+]] = arith.constant dense<{{.+}}> : tensor<4xf32>
// CHECK:       linalg.generic {{.+}} ins(%{{.+}}, %[[Q]] :
// CHECK:       linalg.generic {{.+}} ins(%{{.+}}, %[[S]] :
// CHECK:       linalg.generic {{.+}} ins(%{{.+}}, %[[Q]] :
// CHECK:       linalg.generic {{.+}} ins(%{{.+}}, %[[S]] :
// CHECK-NOT:   dense_resource<opscope.b.codes>
// W8A8-LABEL:   func.func @tied_weight_and_shared_lhs(
// W8A8-COUNT-1: math.round
// W8A8-NOT:     math.round
func.func @tied_weight_and_shared_lhs(%x: tensor<3x8xf32>, %c: tensor<3x4xf32>) -> (tensor<3x4xf32>, tensor<3x4xf32>) {
  %w = util.global.load @wt : tensor<8x4xf32>
  %0 = linalg.matmul ins(%x, %w : tensor<3x8xf32>, tensor<8x4xf32>) outs(%c : tensor<3x4xf32>) -> tensor<3x4xf32> loc("a")
  %1 = linalg.matmul ins(%x, %w : tensor<3x8xf32>, tensor<8x4xf32>) outs(%c : tensor<3x4xf32>) -> tensor<3x4xf32> loc("b")
  return %0, %1 : tensor<3x4xf32>, tensor<3x4xf32>
}
util.global private @wt = dense<2.0> : tensor<8x4xf32>

// -----

// A weight the model takes as an argument, and a computed rhs (k in q·kᵀ), hold no stored
// weight: with the default `sites` they are skipped quietly (an info log; naming them in
// `sites` is an error, lit_tests/passes/invalid/quantize-weight.mlir).

// CHECK-LABEL: func.func @argument_and_computed_rhs_are_left_alone(
// CHECK-NOT:   linalg.generic
// CHECK:       linalg.batch_matmul
// CHECK-NEXT:  linalg.batch_matmul
// WARN-NOT:    skipping site 'attn.
// WARN:        warning: quantize-weight: no matmul site with a constant weight to quantize in this module
func.func @argument_and_computed_rhs_are_left_alone(%q: tensor<2x4x8xf32>, %xt: tensor<2x8x8xf32>, %wk: tensor<2x8x4xf32>, %c8: tensor<2x8x4xf32>, %c: tensor<2x4x4xf32>) -> tensor<2x4x4xf32> {
  %kt = linalg.batch_matmul ins(%xt, %wk : tensor<2x8x8xf32>, tensor<2x8x4xf32>) outs(%c8 : tensor<2x8x4xf32>) -> tensor<2x8x4xf32> loc("attn.k")
  %0 = linalg.batch_matmul ins(%q, %kt : tensor<2x4x8xf32>, tensor<2x8x4xf32>) outs(%c : tensor<2x4x4xf32>) -> tensor<2x4x4xf32> loc("attn.scores")
  return %0 : tensor<2x4x4xf32>
}

// -----

// A convolution is no contraction: left as it is, with a warning naming the site.

// WARN: warning: quantize-weight: skipping site 'conv1' at loc("conv1"): a convolution: only contractions are rewritten (fakequant-weights simulates a filter's codes)
// CHECK-LABEL: func.func @convolution_is_skipped_with_a_warning(
// CHECK:       linalg.conv_2d_nchw_fchw
func.func @convolution_is_skipped_with_a_warning(%x: tensor<2x2x5x5xf32>, %o: tensor<2x8x4x4xf32>) -> tensor<2x8x4x4xf32> {
  %w = util.global.load @f : tensor<8x2x2x2xf32>
  %0 = linalg.conv_2d_nchw_fchw {dilations = dense<1> : tensor<2xi64>, strides = dense<1> : tensor<2xi64>} ins(%x, %w : tensor<2x2x5x5xf32>, tensor<8x2x2x2xf32>) outs(%o : tensor<2x8x4x4xf32>) -> tensor<2x8x4x4xf32> loc("conv1")
  return %0 : tensor<2x8x4x4xf32>
}
util.global private @f = dense<1.0> : tensor<8x2x2x2xf32>
