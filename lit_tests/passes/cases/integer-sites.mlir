// RUN: opscope-opt %s -p 'inject-matmul-stats{hist-bins=0 per-channel=false per-position=false adjacency=false dequantize-codes=true}' --split-input-file | filecheck %s
// RUN: opscope-opt %s -p 'inject-matmul-stats{hist-bins=0 per-channel=false per-position=false adjacency=false}' --split-input-file | filecheck %s --check-prefix=DEFAULT
// RUN: opscope-opt %s -p inject-matmul-stats --split-input-file -o %t 2>&1 | filecheck %s --check-prefix=WARN
// RUN: opscope-opt %s -p 'inject-matmul-stats{dequantize-codes=true}' --split-input-file -o %t 2>&1 | filecheck %s --check-prefix=DEQ

// A site quantize-weight rewrote (its ops carry the site's location) is an integer
// contraction; its taps read the tensors it stands for: lhs the float activation before
// W8A8's per-row quantizer, out the float result after the scales, and (dequantize_codes)
// rhs the codes read through their per-channel scales, sitofp(q)·s in the codes' [K, N].

// CHECK-LABEL: func.func @w8a8(
// CHECK-SAME:      %[[X:.+]]: tensor<2x4xf32>
// CHECK:       %[[ACC:.+]] = linalg.generic {{.+}} ins(%{{.+}}, %[[Q:.+]] : tensor<2x4xi8>, tensor<4x2xi8>) outs(%{{.+}} : tensor<2x2xi32>)
// CHECK:       "opscope.stat"(%[[X]]) {kind = "min", options = {}, role = "lhs", site = "fc1"} : (tensor<2x4xf32>) -> ()
// CHECK:       %[[W:.+]] = linalg.generic {indexing_maps = [#{{.+}}, #[[$N:.+]], #{{.+}}], iterator_types = ["parallel", "parallel"]} ins(%[[Q]], %[[S:.+]] : tensor<4x2xi8>, tensor<2xf32>) outs(%{{.+}} : tensor<4x2xf32>)
// CHECK-NEXT:  ^bb0(%[[QI:.+]]: i8, %[[SI:.+]]: f32, %{{.+}}: f32):
// CHECK-NEXT:    %[[D:.+]] = arith.sitofp %[[QI]] : i8 to f32
// CHECK-NEXT:    %[[V:.+]] = arith.mulf %[[D]], %[[SI]] : f32
// CHECK-NEXT:    linalg.yield %[[V]] : f32
// CHECK:       "opscope.stat"(%[[W]]) {kind = "min", options = {}, role = "rhs", site = "fc1"} : (tensor<4x2xf32>) -> ()
// CHECK:       %[[Y:.+]] = linalg.generic {{.+}} ins(%[[ACC]], %{{.+}}, %[[S]] : tensor<2x2xi32>, tensor<2xf32>, tensor<2xf32>) outs(%{{.+}} : tensor<2x2xf32>)
// CHECK:       "opscope.stat"(%[[Y]]) {kind = "min", options = {}, role = "out", site = "fc1"} : (tensor<2x2xf32>) -> ()
// CHECK:       return %[[Y]]

// Without dequantize_codes the codes are not tapped.
// DEFAULT-LABEL: func.func @w8a8(
// DEFAULT-NOT:   role = "rhs"
// DEFAULT:       role = "lhs"
// DEFAULT-NOT:   role = "rhs"
// DEFAULT:       role = "out"
// WARN: warning: inject-matmul-stats: integer site 'fc1' (i8, i8, i32) at loc("fc1"): rhs: integer codes, not tapped
// WARN-SAME: (the dequantize-codes option reads them through their scales)
// WARN-NEXT: warning: inject-matmul-stats: integer site 'fc1' (f32, i4, f32) at loc("fc1"): rhs: integer codes, not tapped

#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>
#col = affine_map<(d0, d1) -> (d1)>
func.func @w8a8(%x: tensor<2x4xf32>, %c: tensor<2x2xf32>) -> tensor<2x2xf32> {
  %q = arith.constant dense<[[42, 32], [-85, 64], [127, 95], [21, 127]]> : tensor<4x2xi8> loc("fc1")
  %s = arith.constant dense<[0.0236220472, 0.0314960629]> : tensor<2xf32> loc("fc1")
  %zero = arith.constant 0.000000e+00 : f32 loc("fc1")
  %e0 = tensor.empty() : tensor<2xf32> loc("fc1")
  %z0 = linalg.fill ins(%zero : f32) outs(%e0 : tensor<2xf32>) -> tensor<2xf32> loc("fc1")
  %amax = linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "reduction"]}
      ins(%x : tensor<2x4xf32>) outs(%z0 : tensor<2xf32>) {
  ^bb0(%in: f32, %out: f32):
    %a = math.absf %in : f32
    %m = arith.maximumf %out, %a : f32
    linalg.yield %m : f32
  } -> tensor<2xf32> loc("fc1")
  %e1 = tensor.empty() : tensor<2x4xi8> loc("fc1")
  %xq = linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x, %amax : tensor<2x4xf32>, tensor<2xf32>) outs(%e1 : tensor<2x4xi8>) {
  ^bb0(%in: f32, %in_2: f32, %out: i8):
    %qmax = arith.constant 1.270000e+02 : f32
    %v = arith.divf %in, %in_2 : f32
    %w = arith.mulf %v, %qmax : f32
    %r = math.round %w : f32
    %i = arith.fptosi %r : f32 to i8
    linalg.yield %i : i8
  } -> tensor<2x4xi8> loc("fc1")
  %c0 = arith.constant 0 : i32 loc("fc1")
  %e2 = tensor.empty() : tensor<2x2xi32> loc("fc1")
  %z2 = linalg.fill ins(%c0 : i32) outs(%e2 : tensor<2x2xi32>) -> tensor<2x2xi32> loc("fc1")
  %acc = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d2)>, affine_map<(d0, d1, d2) -> (d2, d1)>, affine_map<(d0, d1, d2) -> (d0, d1)>],
                         iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%xq, %q : tensor<2x4xi8>, tensor<4x2xi8>) outs(%z2 : tensor<2x2xi32>) {
  ^bb0(%in: i8, %in_2: i8, %out: i32):
    %a = arith.extsi %in : i8 to i32
    %b = arith.extsi %in_2 : i8 to i32
    %p = arith.muli %a, %b : i32
    %t = arith.addi %out, %p : i32
    linalg.yield %t : i32
  } -> tensor<2x2xi32> loc("fc1")
  %y = linalg.generic {indexing_maps = [#id, #row, #col, #id], iterator_types = ["parallel", "parallel"]}
      ins(%acc, %amax, %s : tensor<2x2xi32>, tensor<2xf32>, tensor<2xf32>) outs(%c : tensor<2x2xf32>) {
  ^bb0(%in: i32, %in_2: f32, %in_3: f32, %out: f32):
    %k = arith.constant 0.00787401571 : f32
    %sx = arith.mulf %in_2, %k : f32
    %f = arith.sitofp %in : i32 to f32
    %u = arith.mulf %f, %sx : f32
    %v = arith.mulf %u, %in_3 : f32
    %o = arith.addf %out, %v : f32
    linalg.yield %o : f32
  } -> tensor<2x2xf32> loc("fc1")
  return %y : tensor<2x2xf32>
}

// -----

// W4A16 in groups (here groups of 2 of K = 4): x regrouped [M, K/g, g], per-group sums
// p[K/g, M, N] scaled per (group, channel), summed behind a compute barrier. lhs is x before
// the regrouping, out the groups' sum, rhs the codes [K/g, g, N] times the group's scale,
// merged back into [K, N].

// CHECK-LABEL: func.func @grouped(
// CHECK-SAME:      %[[X:.+]]: tensor<2x4xf32>
// CHECK:       "opscope.stat"(%[[X]]) {kind = "min", options = {}, role = "lhs", site = "fc1"} : (tensor<2x4xf32>) -> ()
// CHECK:       %[[W:.+]] = linalg.generic {{.+}} ins(%{{.+}}, %{{.+}} : tensor<2x2x2xi4>, tensor<2x2xf32>) outs(%{{.+}} : tensor<2x2x2xf32>)
// CHECK:       %[[K:.+]] = tensor.collapse_shape %[[W]] {{\[}}[0, 1], [2]] : tensor<2x2x2xf32> into tensor<4x2xf32>
// CHECK:       "opscope.stat"(%[[K]]) {kind = "min", options = {}, role = "rhs", site = "fc1"} : (tensor<4x2xf32>) -> ()
// CHECK:       iree_tensor_ext.compute_barrier.start
// CHECK:       %[[Y:.+]] = linalg.generic {{.+}} iterator_types = ["parallel", "parallel", "reduction"]} ins(%{{.+}} : tensor<2x2x2xf32>) outs(%{{.+}} : tensor<2x2xf32>)
// CHECK:       "opscope.stat"(%[[Y]]) {kind = "min", options = {}, role = "out", site = "fc1"} : (tensor<2x2xf32>) -> ()
// CHECK:       return %[[Y]]

func.func @grouped(%x: tensor<2x4xf32>, %c: tensor<2x2xf32>) -> tensor<2x2xf32> {
  %q = arith.constant dense<[[[4, 4], [-7, 7]], [[7, 5], [1, 7]]]> : tensor<2x2x2xi4> loc("fc1")
  %s = arith.constant dense<[[0.0157480314, 0.0157480314], [0.0236220472, 0.0314960629]]> : tensor<2x2xf32> loc("fc1")
  %xg = tensor.expand_shape %x [[0], [1, 2]] output_shape [2, 2, 2] : tensor<2x4xf32> into tensor<2x2x2xf32> loc("fc1")
  %zero = arith.constant 0.000000e+00 : f32 loc("fc1")
  %e0 = tensor.empty() : tensor<2x2x2xf32> loc("fc1")
  %z0 = linalg.fill ins(%zero : f32) outs(%e0 : tensor<2x2x2xf32>) -> tensor<2x2x2xf32> loc("fc1")
  %p = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d1, d0, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d3, d2)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>],
                       iterator_types = ["parallel", "parallel", "parallel", "reduction"]}
      ins(%xg, %q : tensor<2x2x2xf32>, tensor<2x2x2xi4>) outs(%z0 : tensor<2x2x2xf32>) {
  ^bb0(%in: f32, %in_2: i4, %out: f32):
    %d = arith.sitofp %in_2 : i4 to f32
    %m = arith.mulf %in, %d : f32
    %t = arith.addf %out, %m : f32
    linalg.yield %t : f32
  } -> tensor<2x2x2xf32> loc("fc1")
  %e1 = tensor.empty() : tensor<2x2x2xf32> loc("fc1")
  %ps = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d1, d2)>, affine_map<(d0, d1, d2) -> (d0, d2)>, affine_map<(d0, d1, d2) -> (d0, d1, d2)>],
                        iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%p, %s : tensor<2x2x2xf32>, tensor<2x2xf32>) outs(%e1 : tensor<2x2x2xf32>) {
  ^bb0(%in: f32, %in_2: f32, %out: f32):
    %m = arith.mulf %in, %in_2 : f32
    linalg.yield %m : f32
  } -> tensor<2x2x2xf32> loc("fc1")
  %b = iree_tensor_ext.compute_barrier.start %ps : tensor<2x2x2xf32> -> tensor<2x2x2xf32> loc("fc1")
  %y = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d2, d0, d1)>, affine_map<(d0, d1, d2) -> (d0, d1)>],
                       iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%b : tensor<2x2x2xf32>) outs(%c : tensor<2x2xf32>) {
  ^bb0(%in: f32, %out: f32):
    %t = arith.addf %out, %in : f32
    linalg.yield %t : f32
  } -> tensor<2x2xf32> loc("fc1")
  return %y : tensor<2x2xf32>
}

// -----

// An integer matmul no op of the site quantized or scales (an importer's i8 x i8 -> i32 of an
// integer input): each role is read as f32 of its integers, and said so.

// CHECK-LABEL: func.func @raw_integers(
// CHECK-SAME:      %[[X:.+]]: tensor<2x4xi8>
// CHECK:       %[[ACC:.+]] = linalg.matmul
// CHECK:       %[[XF:.+]] = linalg.generic {{.+}} ins(%[[X]] : tensor<2x4xi8>) outs(%{{.+}} : tensor<2x4xf32>)
// CHECK:       "opscope.stat"(%[[XF]]) {kind = "min", options = {}, role = "lhs", site = "mm"} : (tensor<2x4xf32>) -> ()
// CHECK:       "opscope.stat"(%{{.+}}) {kind = "min", options = {}, role = "rhs", site = "mm"} : (tensor<4x2xf32>) -> ()
// CHECK:       %[[OF:.+]] = linalg.generic {{.+}} ins(%[[ACC]] : tensor<2x2xi32>) outs(%{{.+}} : tensor<2x2xf32>)
// CHECK:       "opscope.stat"(%[[OF]]) {kind = "min", options = {}, role = "out", site = "mm"} : (tensor<2x2xf32>) -> ()
// CHECK:       return %[[ACC]]
// WARN-NEXT: warning: inject-matmul-stats: integer site 'mm' (i8, i8, i32) at loc("mm"): lhs: f32 of its integers (no float source)
// WARN-NEXT: warning: inject-matmul-stats: integer site 'mm' (i8, i8, i32) at loc("mm"): out: f32 of the integer accumulator (no op of the site scales it back)
// WARN-NEXT: warning: inject-matmul-stats: integer site 'mm' (i8, i8, i32) at loc("mm"): rhs: integer codes, not tapped
// WARN-NOT: warning
// DEQ-NOT: warning: {{.+}} 'fc1'
// DEQ: warning: inject-matmul-stats: integer site 'mm' (i8, i8, i32) at loc("mm"): lhs: f32 of its integers (no float source)
// DEQ-NEXT: warning: inject-matmul-stats: integer site 'mm' (i8, i8, i32) at loc("mm"): rhs: codes without scales (no constant scale scales its accumulator): f32 of the integers
// DEQ-NEXT: warning: inject-matmul-stats: integer site 'mm' (i8, i8, i32) at loc("mm"): out: f32 of the integer accumulator (no op of the site scales it back)

func.func @raw_integers(%x: tensor<2x4xi8>) -> tensor<2x2xi32> {
  %w = arith.constant dense<[[1, 2], [3, 4], [5, 6], [7, 8]]> : tensor<4x2xi8>
  %c0 = arith.constant 0 : i32
  %e = tensor.empty() : tensor<2x2xi32>
  %z = linalg.fill ins(%c0 : i32) outs(%e : tensor<2x2xi32>) -> tensor<2x2xi32>
  %0 = linalg.matmul ins(%x, %w : tensor<2x4xi8>, tensor<4x2xi8>) outs(%z : tensor<2x2xi32>) -> tensor<2x2xi32> loc("mm")
  return %0 : tensor<2x2xi32>
}
