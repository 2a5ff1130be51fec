// RUN: opscope-opt %s -p inject-residual-stats | filecheck %s
// RUN: opscope-opt %s -p 'inject-residual-stats{every-add=true}' | filecheck %s --check-prefix=EVERY
// RUN: opscope-opt %s -p 'inject-residual-stats{sites=ffn}' | filecheck %s --check-prefix=SITES
// RUN: opscope-opt %s -p inject-residual-stats,lower-opscope | filecheck %s --check-prefix=LOWERED

// A residual add is an add of the stream h and the output d of a block that reads h (the
// cone miner's skip-connection rule). Its taps read the pair (h, d): Σh², Σd² and the mean
// over tokens of cos(h, h + d). The block that attends (softmax of q·kᵀ) is `.attn`, the
// other `.ffn`, after the add's own location ("layers.0"). The bias add inside the MLP is
// no residual.

// CHECK-LABEL: func.func @two_blocks(
// CHECK-SAME:      %[[H:[^:]+]]: tensor<8x16xf32>
// CHECK-SAME:      attributes {opscope.sites = [{batch = 1 : i64, flops = 0 : i64, k = 0 : i64, kind = "residual", m = 8 : i64, n = 16 : i64, name = "layers.0.attn"}, {batch = 1 : i64, flops = 0 : i64, k = 0 : i64, kind = "residual", m = 8 : i64, n = 16 : i64, name = "layers.0.ffn"}]}
// CHECK:       %[[O:.+]] = linalg.matmul ins(%{{.+}}, %{{.+}} : tensor<8x8xf32>, tensor<8x16xf32>)
// CHECK:       %[[H1:.+]] = linalg.generic {{.+}} ins(%[[H]], %[[O]] :
// CHECK:       "opscope.stat"(%[[H]], %[[O]]) {kind = "res_a_sumsq", options = {}, role = "residual", site = "layers.0.attn"} : (tensor<8x16xf32>, tensor<8x16xf32>) -> ()
// CHECK-NEXT:  "opscope.stat"(%[[H]], %[[O]]) {kind = "res_b_sumsq", options = {}, role = "residual", site = "layers.0.attn"}
// CHECK-NEXT:  "opscope.stat"(%[[H]], %[[O]]) {kind = "res_cos", options = {}, role = "residual", site = "layers.0.attn"}
// CHECK:       %[[D:.+]] = linalg.matmul ins(%{{.+}}, %{{.+}} : tensor<8x32xf32>, tensor<32x16xf32>)
// CHECK:       %[[H2:.+]] = linalg.generic {{.+}} ins(%[[D]], %[[H1]] :
// The stream comes first whichever operand it is.
// CHECK:       "opscope.stat"(%[[H1]], %[[D]]) {kind = "res_a_sumsq", options = {}, role = "residual", site = "layers.0.ffn"}
// CHECK-NEXT:  "opscope.stat"(%[[H1]], %[[D]]) {kind = "res_b_sumsq"
// CHECK-NEXT:  "opscope.stat"(%[[H1]], %[[D]]) {kind = "res_cos"
// CHECK-NEXT:  return %[[H2]]

// The reference's rule: every add of two tensors of the result's type, in operand order,
// named `.add` (the bias add broadcasts, so it is still left out).
// EVERY-LABEL: func.func @two_blocks(
// EVERY-SAME:      name = "layers.0.add"}, {{.+}} name = "layers.0.add#1"}]}
// EVERY-COUNT-3: "opscope.stat"(%arg0, %{{.+}}) {kind = "res_{{[a-z_]+}}", options = {}, role = "residual", site = "layers.0.add"}
// EVERY-COUNT-3: "opscope.stat"(%{{.+}}, %{{.+}}) {kind = "res_{{[a-z_]+}}", options = {}, role = "residual", site = "layers.0.add#1"}
// EVERY-NEXT:  return

// SITES-LABEL: func.func @two_blocks(
// SITES-NOT:   site = "layers.0.attn"
// SITES-COUNT-3: site = "layers.0.ffn"
// SITES-NEXT:  return

// One packed result per residual add: Σh², Σd², mean cos.
// LOWERED-LABEL: func.func @two_blocks(
// LOWERED-SAME:  -> (tensor<8x16xf32>, tensor<3xf32> {opscope.pack = [{length = 1 : i64, numel = 128 : i64, offset = 0 : i64, role = "residual", site = "layers.0.attn", stat = "res_a_sumsq"}, {length = 1 : i64, numel = 128 : i64, offset = 1 : i64, role = "residual", site = "layers.0.attn", stat = "res_b_sumsq"}, {length = 1 : i64, numel = 128 : i64, offset = 2 : i64, role = "residual", site = "layers.0.attn", stat = "res_cos"}]}, tensor<3xf32> {opscope.pack = [{{.+}} site = "layers.0.ffn", stat = "res_a_sumsq"}, {{.+}}, {{.+}} site = "layers.0.ffn", stat = "res_cos"}]})
// LOWERED-NOT:   opscope.stat
// LOWERED:       func.func private @opscope_stats_8x16xf32_{{[0-9a-f]+}}(%{{.+}}: tensor<8x16xf32>, %{{.+}}: tensor<8x16xf32>) -> tensor<3xf32> attributes {noinline}
#id = affine_map<(d0, d1) -> (d0, d1)>
#bias = affine_map<(d0, d1) -> (d1)>
func.func @two_blocks(%h: tensor<8x16xf32>, %wq: tensor<16x16xf32>, %wk: tensor<16x16xf32>, %wv: tensor<16x16xf32>, %w1: tensor<16x32xf32>, %b1: tensor<32xf32>, %w2: tensor<32x16xf32>) -> tensor<8x16xf32> {
  %z = tensor.empty() : tensor<8x16xf32>
  %q = linalg.matmul ins(%h, %wq : tensor<8x16xf32>, tensor<16x16xf32>) outs(%z : tensor<8x16xf32>) -> tensor<8x16xf32> loc("layers.0.self_attn.q")
  %k = linalg.matmul ins(%h, %wk : tensor<8x16xf32>, tensor<16x16xf32>) outs(%z : tensor<8x16xf32>) -> tensor<8x16xf32> loc("layers.0.self_attn.k")
  %v = linalg.matmul ins(%h, %wv : tensor<8x16xf32>, tensor<16x16xf32>) outs(%z : tensor<8x16xf32>) -> tensor<8x16xf32> loc("layers.0.self_attn.v")
  %e = tensor.empty() : tensor<16x8xf32>
  %kt = linalg.transpose ins(%k : tensor<8x16xf32>) outs(%e : tensor<16x8xf32>) permutation = [1, 0]
  %z2 = tensor.empty() : tensor<8x8xf32>
  %s = linalg.matmul ins(%q, %kt : tensor<8x16xf32>, tensor<16x8xf32>) outs(%z2 : tensor<8x8xf32>) -> tensor<8x8xf32> loc("layers.0.self_attn")
  %p = linalg.softmax dimension(1) ins(%s : tensor<8x8xf32>) outs(%z2 : tensor<8x8xf32>) -> tensor<8x8xf32> loc("layers.0.self_attn")
  %o = linalg.matmul ins(%p, %v : tensor<8x8xf32>, tensor<8x16xf32>) outs(%z : tensor<8x16xf32>) -> tensor<8x16xf32> loc("layers.0.self_attn")
  %h1 = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]} ins(%h, %o : tensor<8x16xf32>, tensor<8x16xf32>) outs(%z : tensor<8x16xf32>) {
  ^bb0(%a: f32, %b: f32, %c: f32):
    %r = arith.addf %a, %b : f32
    linalg.yield %r : f32
  } -> tensor<8x16xf32> loc("layers.0")
  %z3 = tensor.empty() : tensor<8x32xf32>
  %u = linalg.matmul ins(%h1, %w1 : tensor<8x16xf32>, tensor<16x32xf32>) outs(%z3 : tensor<8x32xf32>) -> tensor<8x32xf32> loc("layers.0.mlp.up")
  %ub = linalg.generic {indexing_maps = [#id, #bias, #id], iterator_types = ["parallel", "parallel"]} ins(%u, %b1 : tensor<8x32xf32>, tensor<32xf32>) outs(%z3 : tensor<8x32xf32>) {
  ^bb0(%a: f32, %b: f32, %c: f32):
    %r = arith.addf %a, %b : f32
    linalg.yield %r : f32
  } -> tensor<8x32xf32> loc("layers.0.mlp.up")
  %d = linalg.matmul ins(%ub, %w2 : tensor<8x32xf32>, tensor<32x16xf32>) outs(%z : tensor<8x16xf32>) -> tensor<8x16xf32> loc("layers.0.mlp.down")
  %h2 = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]} ins(%d, %h1 : tensor<8x16xf32>, tensor<8x16xf32>) outs(%z : tensor<8x16xf32>) {
  ^bb0(%a: f32, %b: f32, %c: f32):
    %r = arith.addf %a, %b : f32
    linalg.yield %r : f32
  } -> tensor<8x16xf32> loc("layers.0")
  return %h2 : tensor<8x16xf32>
}
