// RUN: opscope-opt %s -p 'inject-matmul-stats{hist-bins=0},lower-opscope,canonicalize,cse' | filecheck %s
// RUN: opscope-opt %s -p 'builtin.module(inject-matmul-stats{hist-bins=0 per-position=false},func.func(cse),lower-opscope)' | filecheck %s --check-prefix=NESTED
// RUN: opscope-opt %s -p 'inject-matmul-stats,canonicalize' --print-ir-after-all -o %t 2>&1 | filecheck %s --check-prefix=DUMP

// opscope passes and MLIR passes interleave in one textual pipeline; opscope options are
// parsed by opscope-opt, everything else goes to the MLIR pass manager as written.

// 4x8 lhs without hist: 7 scalars + elemsig 16 + chan_maxabs 8 + chan_outlier 1 +
// pos_sumsq 4 + adj_sumsq 3 = 39; 8x3 rhs: 7 + 16 + 3 + 1 + 8 + 7 = 42; 4x3 out:
// 7 + 12 + 3 + 1 + 4 + 3 = 30.

// CHECK-LABEL: func.func @main(
// CHECK-SAME:      -> (tensor<4x3xf32>, tensor<39xf32> {opscope.pack = [{{.+}}]}, tensor<42xf32> {opscope.pack = [{{.+}}]}, tensor<30xf32> {opscope.pack = [{{.+}}]})
// CHECK-SAME:      attributes {opscope.sites = [{{{.+}}name = "fc1"}]}
// The three tensors differ in type, so each has its own call and kernel. The lhs and rhs
// are function arguments: their calls open the block; the out call follows the matmul.
// CHECK-NOT:   opscope.stat
// CHECK-DAG:   %[[S0:.+]] = call @opscope_stats_4x8xf32_{{[0-9a-f]+}}(
// CHECK-DAG:   %[[S1:.+]] = call @opscope_stats_8x3xf32_{{[0-9a-f]+}}(
// CHECK:       %[[OUT:.+]] = linalg.matmul
// CHECK:       %[[S2:.+]] = call @opscope_stats_4x3xf32_{{[0-9a-f]+}}(
// CHECK:       return %[[OUT]], %[[S0]], %[[S1]], %[[S2]] : tensor<4x3xf32>, tensor<39xf32>, tensor<42xf32>, tensor<30xf32>
// CHECK-DAG:   func.func private @opscope_stats_4x8xf32_{{[0-9a-f]+}}({{.+}}) -> tensor<39xf32> attributes {noinline}
// CHECK-DAG:   func.func private @opscope_stats_8x3xf32_{{[0-9a-f]+}}({{.+}}) -> tensor<42xf32> attributes {noinline}
// CHECK-DAG:   func.func private @opscope_stats_4x3xf32_{{[0-9a-f]+}}({{.+}}) -> tensor<30xf32> attributes {noinline}
// CHECK-NOT:   opscope.stat

// Without pos_sumsq: 39 - 4, 42 - 8, 30 - 4.
// NESTED-LABEL: func.func @main(
// NESTED-SAME:      -> (tensor<4x3xf32>, tensor<35xf32> {{.+}}, tensor<34xf32> {{.+}}, tensor<26xf32> {{.+}})

// IR is printed after every pass, opscope's and MLIR's, under the pass's name.
// DUMP:      // -----// IR Dump After InjectMatmulStats: inject-matmul-stats //----- //
// DUMP:      "opscope.stat"
// DUMP:      // -----// IR Dump After CanonicalizerPass: canonicalize
func.func @main(%a: tensor<4x8xf32>, %b: tensor<8x3xf32>) -> tensor<4x3xf32> {
  %zero = arith.constant 0.0 : f32
  %empty = tensor.empty() : tensor<4x3xf32>
  %init = linalg.fill ins(%zero : f32) outs(%empty : tensor<4x3xf32>) -> tensor<4x3xf32>
  %0 = linalg.matmul ins(%a, %b : tensor<4x8xf32>, tensor<8x3xf32>) outs(%init : tensor<4x3xf32>) -> tensor<4x3xf32> loc("fc1")
  return %0 : tensor<4x3xf32>
}
