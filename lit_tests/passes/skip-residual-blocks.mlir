// RUN: opscope-opt %s -p skip-residual-blocks{blocks=layers.0.attn} | filecheck %s
// RUN: opscope-opt %s -p 'skip-residual-blocks{blocks=1}' | filecheck %s --check-prefix=ORDINAL
// RUN: opscope-opt %s -p 'skip-residual-blocks{blocks="layers.0.ffn,0"}' | filecheck %s --check-prefix=BOTH
// RUN: not opscope-opt %s -p 'skip-residual-blocks{blocks=layers.9.ffn}' 2>&1 | filecheck %s --check-prefix=UNKNOWN
// RUN: not opscope-opt %s -p 'skip-residual-blocks{blocks=2}' 2>&1 | filecheck %s --check-prefix=UNKNOWN-ORDINAL
// RUN: not opscope-opt %s -p skip-residual-blocks 2>&1 | filecheck %s --check-prefix=NONE

// A residual block is the add of the stream h and a block's output (the residual taps'
// rule and names: `layers.0.attn` attends, `layers.0.ffn` does not). Skipping one makes
// the add's users read h, and its branch (q, k, scores, softmax, p·v) is erased with it,
// weights' reads and all, so the static cost of the result is what the skip saves.

// CHECK-LABEL: func.func @attn_and_ffn(
// CHECK-SAME:      %[[H:[^:]+]]: tensor<8x16xf32>
// CHECK-NOT:   linalg.softmax
// CHECK-NOT:   linalg.transpose
// CHECK:       %[[U:.+]] = linalg.matmul ins(%[[H]], %{{.+}} : tensor<8x16xf32>, tensor<16x32xf32>)
// CHECK:       %[[D:.+]] = linalg.matmul ins(%[[U]], %{{.+}} : tensor<8x32xf32>, tensor<32x16xf32>)
// CHECK:       %[[H2:.+]] = linalg.generic {{.+}} ins(%[[D]], %[[H]] :
// CHECK:       return %[[H2]]

// Ordinal 1 is the second block in IR order, the MLP: its add is gone and the function
// returns the attention block's sum; the attention block stays.
// ORDINAL-LABEL: func.func @attn_and_ffn(
// ORDINAL:       linalg.softmax
// ORDINAL:       %[[H1:.+]] = linalg.generic {{.+}} ins(%arg0, %{{.+}} :
// ORDINAL-NOT:   linalg.matmul
// ORDINAL:       return %[[H1]]

// Both blocks gone: only the embedding path (here the argument) is left.
// BOTH-LABEL: func.func @attn_and_ffn(
// BOTH-NEXT:    return %arg0 : tensor<8x16xf32>

// UNKNOWN: {{^}}opscope-opt: error: skip-residual-blocks: no residual block 'layers.9.ffn' in this module (valid: layers.0.attn, layers.0.ffn, or their ordinals 0..1){{$}}
// UNKNOWN-ORDINAL: {{^}}opscope-opt: error: skip-residual-blocks: no residual block '2' in this module (valid: layers.0.attn, layers.0.ffn, or their ordinals 0..1){{$}}
// NONE: {{^}}opscope-opt: error: skip-residual-blocks: name the blocks to rewrite with blocks=<names or ordinals> (valid: layers.0.attn, layers.0.ffn, or their ordinals 0..1){{$}}

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
