// RUN: opscope-opt %s -p inject-attention-stats --split-input-file | filecheck %s
// RUN: opscope-opt %s -p 'inject-attention-stats{entropy=false}' --split-input-file | filecheck %s --check-prefix=NOENT
// RUN: opscope-opt %s -p inject-attention-stats --split-input-file -o %t 2>&1 | filecheck %s --check-prefix=WARN
// RUN: opscope-opt %s -p inject-attention-stats,lower-opscope --split-input-file | iree-opt --split-input-file | filecheck %s --check-prefix=LOWERED

// A fused attention (SDPA) never materializes its probabilities: the pass rebuilds them
// beside it, softmax(Q·Kᵀ·scale + mask) from the op's own operands and maps (a boolean
// mask keeps where true, -inf elsewhere; read as i8 behind a barrier: IREE 3.13 cannot
// data-tile a padded i1 operand), and taps them like an eager softmax. The fused op itself
// is untouched.

// CHECK-LABEL: func.func @fused_attention_boolean_mask(
// CHECK-SAME:      %[[Q:[^:]+]]: tensor<4x8x16xf32>, %[[K:[^:]+]]: tensor<4x8x16xf32>, %[[V:[^:]+]]: tensor<4x8x16xf32>, %[[M:[^:]+]]: tensor<4x8x8xi1>
// CHECK-SAME:      {batch = 4 : i64, flops = 0 : i64, k = 4 : i64, kind = "attention", m = 8 : i64, n = 8 : i64, name = "layers.0.self_attn.attention"}
// CHECK:       %[[SCALE:.+]] = arith.constant 2.500000e-01 : f32
// CHECK:       %[[O:.+]] = iree_linalg_ext.attention {{.+}} ins(%[[Q]], %[[K]], %[[V]], %[[SCALE]], %[[M]] :
// CHECK:       %[[P:.+]] = call @[[SHADOW:opscope_attention_probs_[0-9a-f]+]](%[[Q]], %[[K]], %[[SCALE]], %[[M]]) : (tensor<4x8x16xf32>, tensor<4x8x16xf32>, f32, tensor<4x8x8xi1>) -> tensor<4x8x8xf32>
// CHECK-NEXT:  "opscope.stat"(%[[P]]) {kind = "attn_qmax", options = {}, role = "attn", site = "layers.0.self_attn.attention"} : (tensor<4x8x8xf32>) -> ()
// CHECK-NEXT:  "opscope.stat"(%[[P]]) {kind = "attn_krecv", options = {}, role = "attn", site = "layers.0.self_attn.attention"}
// CHECK-NEXT:  "opscope.stat"(%[[P]]) {kind = "attn_entropy", options = {}, role = "attn", site = "layers.0.self_attn.attention"}
// CHECK-NEXT:  return %[[O]]
// CHECK:       func.func private @[[SHADOW]](%[[SQ:.+]]: tensor<4x8x16xf32>, %[[SK:.+]]: tensor<4x8x16xf32>, %[[SS:.+]]: f32, %[[SM:.+]]: tensor<4x8x8xi1>) -> tensor<4x8x8xf32>
// CHECK:         %[[S:.+]] = linalg.generic {{.+}} iterator_types = ["parallel", "parallel", "reduction", "parallel"]} ins(%[[SQ]], %[[SK]] :
// CHECK:           arith.mulf
// CHECK-NEXT:      arith.addf
// CHECK:         %[[W:.+]] = linalg.generic {{.+}} ins(%[[SM]] : tensor<4x8x8xi1>) outs(%{{.+}} : tensor<4x8x8xi8>)
// CHECK:           arith.extui %{{.+}} : i1 to i8
// CHECK:         %[[WB:.+]] = util.optimization_barrier %[[W]] : tensor<4x8x8xi8>
// CHECK:         %[[T:.+]] = linalg.generic {{.+}} ins(%[[S]], %[[WB]] : tensor<4x8x8xf32>, tensor<4x8x8xi8>)
// CHECK:           %[[X:.+]] = arith.mulf %{{.+}}, %[[SS]] : f32
// CHECK-NEXT:      %[[NINF:.+]] = arith.constant 0xFF800000 : f32
// CHECK:           %[[KEEP:.+]] = arith.cmpi ne, %{{.+}}, %{{.+}} : i8
// CHECK-NEXT:      arith.select %[[KEEP]], %[[X]], %[[NINF]] : f32
// CHECK:         %[[SP:.+]] = linalg.softmax dimension(2) ins(%[[T]] : tensor<4x8x8xf32>)
// CHECK-NEXT:    return %[[SP]]

// NOENT-LABEL: func.func @fused_attention_boolean_mask(
// NOENT:       "opscope.stat"(%{{.+}}) {kind = "attn_qmax"
// NOENT-NEXT:  "opscope.stat"(%{{.+}}) {kind = "attn_krecv"
// NOENT-NEXT:  return

// After lowering, the shadow and the statistics kernel are plain linalg, and the attention
// result is still returned first.
// LOWERED-LABEL: func.func @fused_attention_boolean_mask(
// LOWERED-SAME:  -> (tensor<4x8x16xf32>, tensor<96xf32> {opscope.pack = [{length = 32 : i64, numel = 256 : i64, offset = 0 : i64, role = "attn", site = "layers.0.self_attn.attention", stat = "attn_qmax"}, {length = 32 : i64, numel = 256 : i64, offset = 32 : i64, role = "attn", site = "layers.0.self_attn.attention", stat = "attn_krecv"}, {length = 32 : i64, numel = 256 : i64, offset = 64 : i64, role = "attn", site = "layers.0.self_attn.attention", stat = "attn_entropy"}]})
// LOWERED-NOT:   opscope.stat
#q = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d3)>
#k = affine_map<(d0, d1, d2, d3, d4) -> (d0, d4, d3)>
#v = affine_map<(d0, d1, d2, d3, d4) -> (d0, d4, d2)>
#s = affine_map<(d0, d1, d2, d3, d4) -> ()>
#m = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d4)>
#o = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2)>
func.func @fused_attention_boolean_mask(%q: tensor<4x8x16xf32>, %k: tensor<4x8x16xf32>, %v: tensor<4x8x16xf32>, %mask: tensor<4x8x8xi1>) -> tensor<4x8x16xf32> {
  %scale = arith.constant 0.25 : f32
  %e = tensor.empty() : tensor<4x8x16xf32>
  %o = iree_linalg_ext.attention <indexing_maps = [#q, #k, #v, #s, #m, #o]> ins(%q, %k, %v, %scale, %mask : tensor<4x8x16xf32>, tensor<4x8x16xf32>, tensor<4x8x16xf32>, f32, tensor<4x8x8xi1>) outs(%e : tensor<4x8x16xf32>) {
  ^bb0(%score: f32):
    iree_linalg_ext.yield %score : f32
  } -> tensor<4x8x16xf32> loc("layers.0.self_attn")
  return %o : tensor<4x8x16xf32>
}

// -----

// f16 operands, an additive f16 mask in a [B, H, S, S] layout with a broadcast over heads,
// batch and heads as separate dims: the shadow extends to f32 and reads the mask through
// its own map.

// CHECK-LABEL: func.func @fused_attention_f16_float_mask(
// CHECK-SAME:      {batch = 4 : i64, flops = 0 : i64, k = 2 : i64, kind = "attention", m = 8 : i64, n = 6 : i64, name = "enc.attention"}
// CHECK:       call @[[SHADOW:opscope_attention_probs_[0-9a-f]+]](%{{.+}}) : (tensor<2x2x8x4xf16>, tensor<2x2x6x4xf16>, f16, tensor<2x8x6xf16>) -> tensor<2x2x8x6xf32>
// CHECK:       func.func private @[[SHADOW]](
// CHECK:         arith.extf %{{.+}} : f16 to f32
// CHECK:         linalg.generic {indexing_maps = [#{{.+}}, #[[MASKMAP:.+]], #{{.+}}], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%{{.+}}, %{{.+}} : tensor<2x2x8x6xf32>, tensor<2x8x6xf16>)
// CHECK:           %[[MK:.+]] = arith.extf %{{.+}} : f16 to f32
// CHECK-NEXT:      arith.addf %{{.+}}, %[[MK]] : f32
// CHECK:         linalg.softmax dimension(3)
#q4 = affine_map<(b, h, m, n, k1, k2) -> (b, h, m, k1)>
#k4 = affine_map<(b, h, m, n, k1, k2) -> (b, h, k2, k1)>
#v4 = affine_map<(b, h, m, n, k1, k2) -> (b, h, k2, n)>
#s4 = affine_map<(b, h, m, n, k1, k2) -> ()>
#m4 = affine_map<(b, h, m, n, k1, k2) -> (b, m, k2)>
#o4 = affine_map<(b, h, m, n, k1, k2) -> (b, h, m, n)>
func.func @fused_attention_f16_float_mask(%q: tensor<2x2x8x4xf16>, %k: tensor<2x2x6x4xf16>, %v: tensor<2x2x6x4xf16>, %mask: tensor<2x8x6xf16>) -> tensor<2x2x8x4xf16> {
  %scale = arith.constant 0.5 : f16
  %e = tensor.empty() : tensor<2x2x8x4xf16>
  %o = iree_linalg_ext.attention <indexing_maps = [#q4, #k4, #v4, #s4, #m4, #o4]> ins(%q, %k, %v, %scale, %mask : tensor<2x2x8x4xf16>, tensor<2x2x6x4xf16>, tensor<2x2x6x4xf16>, f16, tensor<2x8x6xf16>) outs(%e : tensor<2x2x8x4xf16>) {
  ^bb0(%score: f32):
    iree_linalg_ext.yield %score : f32
  } -> tensor<2x2x8x4xf16> loc("enc")
  return %o : tensor<2x2x8x4xf16>
}

// -----

// A score modifier in the op's region (here a soft cap) is not replayed: skipped, with a
// warning naming the op.

// CHECK-LABEL: func.func @score_modifier(
// CHECK-NOT:   opscope
// WARN: warning: inject-attention-stats: attention 'capped.attention' at {{.+}} skipped: its region modifies the scores (not replayed)
#q = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d3)>
#k = affine_map<(d0, d1, d2, d3, d4) -> (d0, d4, d3)>
#v = affine_map<(d0, d1, d2, d3, d4) -> (d0, d4, d2)>
#s = affine_map<(d0, d1, d2, d3, d4) -> ()>
#o = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2)>
func.func @score_modifier(%q: tensor<4x8x16xf32>, %k: tensor<4x8x16xf32>, %v: tensor<4x8x16xf32>) -> tensor<4x8x16xf32> {
  %scale = arith.constant 0.25 : f32
  %e = tensor.empty() : tensor<4x8x16xf32>
  %o = iree_linalg_ext.attention <indexing_maps = [#q, #k, #v, #s, #o]> ins(%q, %k, %v, %scale : tensor<4x8x16xf32>, tensor<4x8x16xf32>, tensor<4x8x16xf32>, f32) outs(%e : tensor<4x8x16xf32>) {
  ^bb0(%score: f32):
    %t = math.tanh %score : f32
    iree_linalg_ext.yield %t : f32
  } -> tensor<4x8x16xf32> loc("capped")
  return %o : tensor<4x8x16xf32>
}
