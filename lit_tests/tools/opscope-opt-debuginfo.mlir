// RUN: opscope-opt %s -p inject-matmul-stats --print-debuginfo | filecheck %s
// RUN: opscope-opt %s -p inject-matmul-stats,lower-opscope --print-debuginfo | filecheck %s --check-prefix=LOWERED
// RUN: opscope-opt %s -p inject-matmul-stats | filecheck %s --check-prefix=NODEBUG

// --print-debuginfo keeps locations: the taps and, after lowering, the stats calls
// carry the location of the matmul they describe, loc("fc1") included. Default printing
// drops every location.

// CHECK-LABEL: func.func @taps_carry_the_site_location(
// CHECK:       linalg.matmul {{.+}} loc(#[[FC1:loc[0-9]+]])
// CHECK-NEXT:  "opscope.stat"({{.+}}) {kind = "min", {{.+}} loc(#[[FC1]])
// CHECK:       #[[FC1]] = loc("fc1")

// The lhs and rhs are function arguments: their calls open the block, before the matmul;
// the out call follows the matmul.
// LOWERED-LABEL: func.func @taps_carry_the_site_location(
// LOWERED:       call @opscope_stats_{{.+}} loc(#[[FC1:loc[0-9]+]])
// LOWERED:       call @opscope_stats_{{.+}} loc(#[[FC1]])
// LOWERED:       %[[OUT:.+]] = linalg.matmul {{.+}} loc(#[[FC1]])
// LOWERED:       call @opscope_stats_4x3xf32_{{.+}}(%[[OUT]]) {{.+}} loc(#[[FC1]])
// LOWERED:       #[[FC1]] = loc("fc1")

// NODEBUG-NOT:   loc(
func.func @taps_carry_the_site_location(%a: tensor<4x8xf32>, %b: tensor<8x3xf32>, %c: tensor<4x3xf32>) -> tensor<4x3xf32> {
  %0 = linalg.matmul ins(%a, %b : tensor<4x8xf32>, tensor<8x3xf32>) outs(%c : tensor<4x3xf32>) -> tensor<4x3xf32> loc("fc1")
  return %0 : tensor<4x3xf32>
}
