// RUN: opscope-opt %s -p inject-infer-stats --split-input-file | filecheck %s
// RUN: opscope-opt %s -p 'inject-infer-stats{entropy=false}' --split-input-file | filecheck %s --check-prefix=NOENT
// RUN: opscope-opt %s -p 'inject-infer-stats{routing=false}' --split-input-file | filecheck %s --check-prefix=NOROUTE
// RUN: opscope-opt %s -p 'inject-infer-stats{softmax=false}' --split-input-file | filecheck %s --check-prefix=NOSOFT
// RUN: opscope-opt %s -p 'inject-infer-stats{sites=topk}' --split-input-file | filecheck %s --check-prefix=NOSOFT
// RUN: opscope-opt %s -p inject-infer-stats --split-input-file -o %t 2>&1 | filecheck %s --check-prefix=WARN
// RUN: opscope-opt %s -p inject-infer-stats,lower-opscope --split-input-file | filecheck %s --check-prefix=LOWERED

// A softmax over q·kᵀ (a product of two computed tensors) is attention: role attn, per
// query its peak (attn_qmax) and entropy, per key the mass it receives (attn_krecv). The
// site is named by the location plus ".softmax"; its table row has no FLOPs of its own.

// CHECK-LABEL: func.func @softmax_over_scores(
// CHECK-SAME:      attributes {opscope.sites = [{batch = 1 : i64, flops = 0 : i64, k = 1 : i64, kind = "softmax", m = 8 : i64, n = 8 : i64, name = "layer.softmax"}]}
// CHECK:       %[[P:.+]] = linalg.softmax dimension(1)
// CHECK-NEXT:  "opscope.stat"(%[[P]]) {kind = "attn_qmax", options = {}, role = "attn", site = "layer.softmax"} : (tensor<8x8xf32>) -> ()
// CHECK-NEXT:  "opscope.stat"(%[[P]]) {kind = "attn_krecv", options = {}, role = "attn", site = "layer.softmax"}
// CHECK-NEXT:  "opscope.stat"(%[[P]]) {kind = "attn_entropy", options = {}, role = "attn", site = "layer.softmax"}
// CHECK-NEXT:  return %[[P]]

// NOENT-LABEL: func.func @softmax_over_scores(
// NOENT:       "opscope.stat"(%{{.+}}) {kind = "attn_qmax"
// NOENT-NEXT:  "opscope.stat"(%{{.+}}) {kind = "attn_krecv"
// NOENT-NEXT:  return

// NOSOFT-LABEL: func.func @softmax_over_scores(
// NOSOFT-NOT:   opscope.stat
// NOSOFT:       return

// The lowering appends one packed result: 8 peaks, 8 key masses, 8 entropies.
// LOWERED-LABEL: func.func @softmax_over_scores(
// LOWERED-SAME:      -> (tensor<8x8xf32>, tensor<24xf32> {opscope.pack = [{length = 8 : i64, numel = 64 : i64, offset = 0 : i64, role = "attn", site = "layer.softmax", stat = "attn_qmax"}, {length = 8 : i64, numel = 64 : i64, offset = 8 : i64, role = "attn", site = "layer.softmax", stat = "attn_krecv"}, {length = 8 : i64, numel = 64 : i64, offset = 16 : i64, role = "attn", site = "layer.softmax", stat = "attn_entropy"}]})
// LOWERED-NOT:   opscope.stat
// LOWERED:       call @opscope_stats_8x8xf32_{{[0-9a-f]+}}
func.func @softmax_over_scores(%x: tensor<8x16xf32>, %wq: tensor<16x16xf32>, %wk: tensor<16x16xf32>) -> tensor<8x8xf32> {
  %z = tensor.empty() : tensor<8x16xf32>
  %q = linalg.matmul ins(%x, %wq : tensor<8x16xf32>, tensor<16x16xf32>) outs(%z : tensor<8x16xf32>) -> tensor<8x16xf32> loc("layer.q")
  %k = linalg.matmul ins(%x, %wk : tensor<8x16xf32>, tensor<16x16xf32>) outs(%z : tensor<8x16xf32>) -> tensor<8x16xf32> loc("layer.k")
  %e = tensor.empty() : tensor<16x8xf32>
  %kt = linalg.transpose ins(%k : tensor<8x16xf32>) outs(%e : tensor<16x8xf32>) permutation = [1, 0]
  %z2 = tensor.empty() : tensor<8x8xf32>
  %s = linalg.matmul ins(%q, %kt : tensor<8x16xf32>, tensor<16x8xf32>) outs(%z2 : tensor<8x8xf32>) -> tensor<8x8xf32> loc("layer")
  %p = linalg.softmax dimension(1) ins(%s : tensor<8x8xf32>) outs(%z2 : tensor<8x8xf32>) -> tensor<8x8xf32> loc("layer")
  return %p : tensor<8x8xf32>
}

// -----

// The chain importers emit for a softmax, e / sum(e) with e = exp(s) and the sum over the
// last axis, is recognized too (here rank 3: batch 2, heads = dim -3).

// CHECK-LABEL: func.func @decomposed_softmax(
// CHECK-SAME:      {batch = 2 : i64, flops = 0 : i64, k = 2 : i64, kind = "softmax", m = 4 : i64, n = 4 : i64, name = "blocks.0.attn.softmax"}
// CHECK:       math.exp
// CHECK:       %[[P:.+]] = linalg.generic {{.+}} ins(%{{.+}}, %{{.+}} : tensor<2x4x4xf32>, tensor<2x4x1xf32>)
// CHECK:       arith.divf
// CHECK:       "opscope.stat"(%[[P]]) {kind = "attn_qmax", options = {}, role = "attn", site = "blocks.0.attn.softmax"} : (tensor<2x4x4xf32>) -> ()
// CHECK-NEXT:  "opscope.stat"(%[[P]]) {kind = "attn_krecv"
// CHECK-NEXT:  "opscope.stat"(%[[P]]) {kind = "attn_entropy"
// CHECK-NEXT:  return %[[P]]
#id = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
#bc = affine_map<(d0, d1, d2) -> (d0, d1, 0)>
func.func @decomposed_softmax(%q: tensor<2x4x8xf32>, %k: tensor<2x8x4xf32>) -> tensor<2x4x4xf32> {
  %z = tensor.empty() : tensor<2x4x4xf32>
  %qq = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel", "parallel"]} ins(%q : tensor<2x4x8xf32>) outs(%q : tensor<2x4x8xf32>) {
  ^bb0(%a: f32, %o: f32):
    %n = arith.mulf %a, %a : f32
    linalg.yield %n : f32
  } -> tensor<2x4x8xf32>
  %kk = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel", "parallel"]} ins(%k : tensor<2x8x4xf32>) outs(%k : tensor<2x8x4xf32>) {
  ^bb0(%a: f32, %o: f32):
    %n = arith.mulf %a, %a : f32
    linalg.yield %n : f32
  } -> tensor<2x8x4xf32>
  %s = linalg.batch_matmul ins(%qq, %kk : tensor<2x4x8xf32>, tensor<2x8x4xf32>) outs(%z : tensor<2x4x4xf32>) -> tensor<2x4x4xf32> loc("blocks.0.attn")
  %e = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel", "parallel"]} ins(%s : tensor<2x4x4xf32>) outs(%z : tensor<2x4x4xf32>) {
  ^bb0(%a: f32, %o: f32):
    %x = math.exp %a : f32
    linalg.yield %x : f32
  } -> tensor<2x4x4xf32> loc("blocks.0.attn")
  %zs = tensor.empty() : tensor<2x4x1xf32>
  %c0 = arith.constant 0.0 : f32
  %init = linalg.fill ins(%c0 : f32) outs(%zs : tensor<2x4x1xf32>) -> tensor<2x4x1xf32>
  %sum = linalg.generic {indexing_maps = [#id, #bc], iterator_types = ["parallel", "parallel", "reduction"]} ins(%e : tensor<2x4x4xf32>) outs(%init : tensor<2x4x1xf32>) {
  ^bb0(%a: f32, %o: f32):
    %x = arith.addf %a, %o : f32
    linalg.yield %x : f32
  } -> tensor<2x4x1xf32> loc("blocks.0.attn")
  %p = linalg.generic {indexing_maps = [#id, #bc, #id], iterator_types = ["parallel", "parallel", "parallel"]} ins(%e, %sum : tensor<2x4x4xf32>, tensor<2x4x1xf32>) outs(%z : tensor<2x4x4xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %x = arith.divf %a, %b : f32
    linalg.yield %x : f32
  } -> tensor<2x4x4xf32> loc("blocks.0.attn")
  return %p : tensor<2x4x4xf32>
}

// -----

// A softmax over a router's logits (x·W_gate, a product with a weight) is a gate: role
// gate, with the second gate weight per token (gate_top2); the top-k of it is a routing
// site counting the chosen experts into E = 4 bins (route_load).

// CHECK-LABEL: func.func @router(
// CHECK-SAME:      {batch = 1 : i64, flops = 0 : i64, k = 1 : i64, kind = "softmax", m = 8 : i64, n = 4 : i64, name = "moe.gate.softmax"}, {batch = 1 : i64, flops = 0 : i64, k = 2 : i64, kind = "routing", m = 8 : i64, n = 4 : i64, name = "moe.gate.topk"}
// CHECK:       %[[P:.+]] = linalg.softmax
// CHECK-NEXT:  "opscope.stat"(%[[P]]) {kind = "attn_qmax", options = {}, role = "gate", site = "moe.gate.softmax"}
// CHECK-NEXT:  "opscope.stat"(%[[P]]) {kind = "attn_krecv", options = {}, role = "gate", site = "moe.gate.softmax"}
// CHECK-NEXT:  "opscope.stat"(%[[P]]) {kind = "attn_entropy", options = {}, role = "gate", site = "moe.gate.softmax"}
// CHECK-NEXT:  "opscope.stat"(%[[P]]) {kind = "gate_top2", options = {}, role = "gate", site = "moe.gate.softmax"}
// CHECK:       %[[R:.+]]:2 = iree_linalg_ext.topk dimension(1)
// CHECK:       "opscope.stat"(%[[R]]#1) {kind = "route_load", options = {experts = 4 : i64}, role = "route", site = "moe.gate.topk"} : (tensor<8x2xi32>) -> ()
// CHECK-NEXT:  return

// NOROUTE-LABEL: func.func @router(
// NOROUTE:       "opscope.stat"(%{{.+}}) {kind = "gate_top2"
// NOROUTE-NOT:   route_load
// NOROUTE:       return

// NOSOFT-LABEL: func.func @router(
// NOSOFT-NOT:   role = "gate"
// NOSOFT:       "opscope.stat"(%{{.+}}) {kind = "route_load", options = {experts = 4 : i64}, role = "route", site = "moe.gate.topk"}
// NOSOFT-NEXT:  return

// LOWERED-LABEL: func.func @router(
// LOWERED-SAME:      tensor<28xf32> {opscope.pack = [{length = 8 : i64, numel = 32 : i64, offset = 0 : i64, role = "gate", site = "moe.gate.softmax", stat = "attn_qmax"}, {length = 4 : i64, numel = 32 : i64, offset = 8 : i64, role = "gate", site = "moe.gate.softmax", stat = "attn_krecv"}, {length = 8 : i64, numel = 32 : i64, offset = 12 : i64, role = "gate", site = "moe.gate.softmax", stat = "attn_entropy"}, {length = 8 : i64, numel = 32 : i64, offset = 20 : i64, role = "gate", site = "moe.gate.softmax", stat = "gate_top2"}]}
// LOWERED-SAME:      tensor<4xf32> {opscope.pack = [{length = 4 : i64, numel = 16 : i64, offset = 0 : i64, role = "route", site = "moe.gate.topk", stat = "route_load"}]}
func.func @router(%x: tensor<8x16xf32>, %wg: tensor<16x4xf32>) -> (tensor<8x2xf32>, tensor<8x2xi32>) {
  %z = tensor.empty() : tensor<8x4xf32>
  %g = linalg.matmul ins(%x, %wg : tensor<8x16xf32>, tensor<16x4xf32>) outs(%z : tensor<8x4xf32>) -> tensor<8x4xf32> loc("moe.gate")
  %p = linalg.softmax dimension(1) ins(%g : tensor<8x4xf32>) outs(%z : tensor<8x4xf32>) -> tensor<8x4xf32> loc("moe.gate")
  %v0 = tensor.empty() : tensor<8x2xf32>
  %i0 = tensor.empty() : tensor<8x2xi32>
  %r:2 = iree_linalg_ext.topk dimension(1) ins(%p : tensor<8x4xf32>) outs(%v0, %i0 : tensor<8x2xf32>, tensor<8x2xi32>) {
  ^bb0(%a: f32, %b: f32):
    %c = arith.cmpf ogt, %a, %b : f32
    iree_linalg_ext.yield %c : i1
  } -> tensor<8x2xf32>, tensor<8x2xi32> loc("moe.gate")
  return %r#0, %r#1 : tensor<8x2xf32>, tensor<8x2xi32>
}

// -----

// The top-k the Mixtral import produces: a sort of the scores with their indices, then the
// first k indices sliced off; the taps follow the slice.

// CHECK-LABEL: func.func @sort_based_topk(
// CHECK-SAME:      {batch = 1 : i64, flops = 0 : i64, k = 2 : i64, kind = "routing", m = 8 : i64, n = 4 : i64, name = "moe.router.topk"}
// CHECK:       %[[TOP:.+]] = tensor.extract_slice
// CHECK-NEXT:  "opscope.stat"(%[[TOP]]) {kind = "route_load", options = {experts = 4 : i64}, role = "route", site = "moe.router.topk"} : (tensor<8x2xi64>) -> ()
// CHECK-NEXT:  return
func.func @sort_based_topk(%p: tensor<8x4xf32>, %iota: tensor<8x4xi64>) -> tensor<8x2xi64> {
  %r:2 = iree_linalg_ext.sort dimension(1) outs(%p, %iota : tensor<8x4xf32>, tensor<8x4xi64>) {
  ^bb0(%a: f32, %b: f32, %c: i64, %d: i64):
    %o = arith.cmpf ogt, %a, %b : f32
    iree_linalg_ext.yield %o : i1
  } -> tensor<8x4xf32>, tensor<8x4xi64> loc("moe.router")
  %top = tensor.extract_slice %r#1[0, 0] [8, 2] [1, 1] : tensor<8x4xi64> to tensor<8x2xi64>
  return %top : tensor<8x2xi64>
}

// -----

// A router softmax the sort then sorts in place: its kernel is inlined (no {noinline}
// call), because IREE 3.13 let the in-place sort overwrite the probabilities before an
// outlined kernel read them; the sorted indices' kernel stays outlined.

// LOWERED-LABEL: func.func @softmax_sorted_in_place(
// LOWERED:       %[[P:.+]] = linalg.softmax
// LOWERED:       call @[[GATE:opscope_stats_8x4xf32_[0-9a-f]+]](%[[P]])
// LOWERED:       iree_linalg_ext.sort dimension(1) outs(%[[P]],
// LOWERED:       call @[[ROUTE:opscope_stats_8x2xi64_[0-9a-f]+]](
// LOWERED:       func.func private @[[GATE]](%arg0: tensor<8x4xf32>) -> tensor<28xf32> {{\{$}}
// LOWERED:       func.func private @[[ROUTE]]({{.*}} attributes {noinline}
func.func @softmax_sorted_in_place(%x: tensor<8x16xf32>, %wg: tensor<16x4xf32>, %iota: tensor<8x4xi64>) -> tensor<8x2xi64> {
  %z = tensor.empty() : tensor<8x4xf32>
  %g = linalg.matmul ins(%x, %wg : tensor<8x16xf32>, tensor<16x4xf32>) outs(%z : tensor<8x4xf32>) -> tensor<8x4xf32> loc("moe.gate")
  %p = linalg.softmax dimension(1) ins(%g : tensor<8x4xf32>) outs(%z : tensor<8x4xf32>) -> tensor<8x4xf32> loc("moe.gate")
  %r:2 = iree_linalg_ext.sort dimension(1) outs(%p, %iota : tensor<8x4xf32>, tensor<8x4xi64>) {
  ^bb0(%a: f32, %b: f32, %c: i64, %d: i64):
    %o = arith.cmpf ogt, %a, %b : f32
    iree_linalg_ext.yield %o : i1
  } -> tensor<8x4xf32>, tensor<8x4xi64> loc("moe.gate")
  %top = tensor.extract_slice %r#1[0, 0] [8, 2] [1, 1] : tensor<8x4xi64> to tensor<8x2xi64>
  return %top : tensor<8x2xi64>
}

// -----

// What cannot be tapped is skipped with a warning naming the op and why: a softmax over
// another axis than the last, a sort whose indices are not sliced to a top-k, a top-k of a
// dynamic shape.

// CHECK-LABEL: func.func @skipped(
// CHECK-NOT:   opscope
// WARN: warning: inject-infer-stats: softmax at odd.softmax skipped: it normalizes axis 0, not the last (1)
// WARN: warning: inject-infer-stats: sort at plain.sort skipped: no slice of its first k indices (not a top-k)
// WARN: warning: inject-infer-stats: top-k at dyn.topk skipped: its indices tensor<?x2xi32> have a dynamic shape (stat kernels are static-shaped: specialize the shapes first)
func.func @skipped(%s: tensor<8x8xf32>, %v: tensor<8x4xf32>, %i: tensor<8x4xi64>, %d: tensor<?x4xf32>) -> (tensor<8x8xf32>, tensor<8x4xi64>, tensor<?x2xi32>) {
  %z = tensor.empty() : tensor<8x8xf32>
  %p = linalg.softmax dimension(0) ins(%s : tensor<8x8xf32>) outs(%z : tensor<8x8xf32>) -> tensor<8x8xf32> loc("odd.softmax")
  %r:2 = iree_linalg_ext.sort dimension(1) outs(%v, %i : tensor<8x4xf32>, tensor<8x4xi64>) {
  ^bb0(%a: f32, %b: f32, %c: i64, %e: i64):
    %o = arith.cmpf ogt, %a, %b : f32
    iree_linalg_ext.yield %o : i1
  } -> tensor<8x4xf32>, tensor<8x4xi64> loc("plain.sort")
  %c0 = arith.constant 0 : index
  %n = tensor.dim %d, %c0 : tensor<?x4xf32>
  %v0 = tensor.empty(%n) : tensor<?x2xf32>
  %i0 = tensor.empty(%n) : tensor<?x2xi32>
  %t:2 = iree_linalg_ext.topk dimension(1) ins(%d : tensor<?x4xf32>) outs(%v0, %i0 : tensor<?x2xf32>, tensor<?x2xi32>) {
  ^bb0(%a: f32, %b: f32):
    %c = arith.cmpf ogt, %a, %b : f32
    iree_linalg_ext.yield %c : i1
  } -> tensor<?x2xf32>, tensor<?x2xi32> loc("dyn.topk")
  return %p, %r#1, %t#1 : tensor<8x8xf32>, tensor<8x4xi64>, tensor<?x2xi32>
}
