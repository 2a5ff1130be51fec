// RUN: opscope-opt %s -p gate-residual-blocks | filecheck %s
// RUN: opscope-opt %s -p 'gate-residual-blocks{blocks=layers.0.ffn}' | filecheck %s --check-prefix=ONE
// RUN: not opscope-opt %s -p 'gate-residual-blocks{blocks=mlp}' 2>&1 | filecheck %s --check-prefix=UNKNOWN

// Every residual add h + d becomes h + g[i]·d, g a new last argument with one gate per
// block (IR order) whose attribute names the blocks: gates of 1 compute the original, 0 a
// skip, so one build serves a whole sweep. Nothing is erased.

// CHECK-LABEL: func.func @attn_and_ffn(
// CHECK-SAME:      %[[H:[^:]+]]: tensor<8x16xf32>
// CHECK-SAME:      %[[G:[^:]+]]: tensor<2xf32> {opscope.gates = ["layers.0.attn", "layers.0.ffn"]}) -> tensor<8x16xf32>
// CHECK:       linalg.softmax
// CHECK:       %[[O:.+]] = linalg.matmul
// CHECK:       %[[C0:.+]] = arith.constant 0 : index
// CHECK:       %[[G0:.+]] = tensor.extract %[[G]][%[[C0]]] : tensor<2xf32>
// CHECK:       %[[H1:.+]] = linalg.generic {{.+}} ins(%[[H]], %[[O]], %[[G0]] : tensor<8x16xf32>, tensor<8x16xf32>, f32)
// CHECK-NEXT:  ^bb0(%[[A:.+]]: f32, %[[B:.+]]: f32, %[[S:.+]]: f32, %{{.+}}: f32):
// CHECK-NEXT:    %[[M:.+]] = arith.mulf %[[S]], %[[B]] : f32
// CHECK-NEXT:    %[[R:.+]] = arith.addf %[[A]], %[[M]] : f32
// CHECK-NEXT:    linalg.yield %[[R]] : f32
// CHECK:       %[[C1:.+]] = arith.constant 1 : index
// CHECK:       %[[G1:.+]] = tensor.extract %[[G]][%[[C1]]] : tensor<2xf32>
// The stream comes first whichever operand it was.
// CHECK:       %[[H2:.+]] = linalg.generic {{.+}} ins(%[[H1]], %{{.+}}, %[[G1]] :
// CHECK:       return %[[H2]]

// ONE-LABEL: func.func @attn_and_ffn(
// ONE-SAME:      tensor<1xf32> {opscope.gates = ["layers.0.ffn"]})
// ONE-COUNT-1: tensor.extract

// UNKNOWN: {{^}}opscope-opt: error: gate-residual-blocks: no residual block 'mlp' in this module (valid: layers.0.attn, layers.0.ffn, or their ordinals 0..1){{$}}

#id = affine_map<(d0, d1) -> (d0, d1)>
func.func @attn_and_ffn(%h: tensor<8x16xf32>, %wq: tensor<16x16xf32>, %wk: tensor<16x16xf32>, %w3: tensor<16x32xf32>, %w4: tensor<32x16xf32>) -> tensor<8x16xf32> {
  %c0 = arith.constant 0.0 : f32
  %e16 = tensor.empty() : tensor<8x16xf32>
  %z16 = linalg.fill ins(%c0 : f32) outs(%e16 : tensor<8x16xf32>) -> tensor<8x16xf32>
  %q = linalg.matmul ins(%h, %wq : tensor<8x16xf32>, tensor<16x16xf32>) outs(%z16 : tensor<8x16xf32>) -> tensor<8x16xf32> loc("layers.0.attn.q")
  %k = linalg.matmul ins(%h, %wk : tensor<8x16xf32>, tensor<16x16xf32>) outs(%z16 : tensor<8x16xf32>) -> tensor<8x16xf32> loc("layers.0.attn.k")
  %et = tensor.empty() : tensor<16x8xf32>
  %kt = linalg.transpose ins(%k : tensor<8x16xf32>) outs(%et : tensor<16x8xf32>) permutation = [1, 0]
  %e8 = tensor.empty() : tensor<8x8xf32>
  %z8 = linalg.fill ins(%c0 : f32) outs(%e8 : tensor<8x8xf32>) -> tensor<8x8xf32>
  %s = linalg.matmul ins(%q, %kt : tensor<8x16xf32>, tensor<16x8xf32>) outs(%z8 : tensor<8x8xf32>) -> tensor<8x8xf32> loc("layers.0.attn.scores")
  %p = linalg.softmax dimension(1) ins(%s : tensor<8x8xf32>) outs(%e8 : tensor<8x8xf32>) -> tensor<8x8xf32> loc("layers.0.attn")
  %o = linalg.matmul ins(%p, %h : tensor<8x8xf32>, tensor<8x16xf32>) outs(%z16 : tensor<8x16xf32>) -> tensor<8x16xf32> loc("layers.0.attn.pv")
  %h1 = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]} ins(%h, %o : tensor<8x16xf32>, tensor<8x16xf32>) outs(%e16 : tensor<8x16xf32>) {
  ^bb0(%a: f32, %b: f32, %c: f32):
    %x = arith.addf %a, %b : f32
    linalg.yield %x : f32
  } -> tensor<8x16xf32> loc("layers.0")
  %e32 = tensor.empty() : tensor<8x32xf32>
  %z32 = linalg.fill ins(%c0 : f32) outs(%e32 : tensor<8x32xf32>) -> tensor<8x32xf32>
  %u = linalg.matmul ins(%h1, %w3 : tensor<8x16xf32>, tensor<16x32xf32>) outs(%z32 : tensor<8x32xf32>) -> tensor<8x32xf32> loc("layers.0.mlp.up")
  %d = linalg.matmul ins(%u, %w4 : tensor<8x32xf32>, tensor<32x16xf32>) outs(%z16 : tensor<8x16xf32>) -> tensor<8x16xf32> loc("layers.0.mlp.down")
  %h2 = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]} ins(%d, %h1 : tensor<8x16xf32>, tensor<8x16xf32>) outs(%e16 : tensor<8x16xf32>) {
  ^bb0(%a: f32, %b: f32, %c: f32):
    %x = arith.addf %a, %b : f32
    linalg.yield %x : f32
  } -> tensor<8x16xf32> loc("layers.0")
  return %h2 : tensor<8x16xf32>
}
