// RUN: opscope-opt %s -p expose-all-ops --split-input-file | filecheck %s
// RUN: opscope-opt %s -p 'expose-all-ops{ops=matmul}' --split-input-file | filecheck %s --check-prefix=FILTER
// RUN: opscope-opt %s -p 'expose-all-ops{constants=true}' --split-input-file | filecheck %s --check-prefix=CONST
// RUN: opscope-opt %s -p expose-all-ops,inject-matmul-stats,lower-opscope --split-input-file | filecheck %s --check-prefix=INJECT
// RUN: opscope-opt %s -p expose-all-ops,expose-all-ops --split-input-file | filecheck %s

// The contract: every op of the entry block with operands and a ranked-tensor result that
// something reads, not a constant expression (unless constants=true) and not tensor.empty,
// has each such result appended after the original results (which keep their indices),
// in program order, described by `opscope.expose = {index, name, op[, site]}`: name is
// `<site>#<k>` (k: ordinal among the matched ops of that NameLoc path) or `<op label>#<k>`
// without a location, `:<i>` for result i > 0. ops=<regex> keeps the names and indices of
// an unfiltered run. Injecting afterwards appends the taps after the exposed results; a
// second run leaves an exposed function alone.

#map = affine_map<(d0, d1) -> (d0, d1)>
// CHECK-LABEL: func.func @exposes_ops_after_original_results(
// CHECK-SAME:      -> (tensor<4x3xf32>,
// CHECK-SAME:      tensor<4x8xf32> {opscope.expose = {index = 0 : i64, name = "fc1#0", op = "generic<exp>", site = "fc1"}},
// CHECK-SAME:      tensor<4x3xf32> {opscope.expose = {index = 1 : i64, name = "fc1#1", op = "matmul", site = "fc1"}},
// CHECK-SAME:      tensor<4x3xf32> {opscope.expose = {index = 2 : i64, name = "generic<tanh>#0", op = "generic<tanh>"}})
// CHECK:         %[[EXP:.+]] = linalg.generic
// CHECK:         %[[MM:.+]] = linalg.matmul
// CHECK:         %[[TANH:.+]] = linalg.generic
// CHECK:         return %[[TANH]], %[[EXP]], %[[MM]], %[[TANH]] :

// FILTER-LABEL: func.func @exposes_ops_after_original_results(
// FILTER-SAME:      -> (tensor<4x3xf32>, tensor<4x3xf32> {opscope.expose = {index = 1 : i64, name = "fc1#1", op = "matmul", site = "fc1"}})
// FILTER:           return %{{.+}}, %{{.+}} : tensor<4x3xf32>, tensor<4x3xf32>

// INJECT-LABEL: func.func @exposes_ops_after_original_results(
// INJECT-SAME:      -> (tensor<4x3xf32>,
// INJECT-SAME:      {opscope.expose = {index = 0 : i64, name = "fc1#0"
// INJECT-SAME:      {opscope.expose = {index = 1 : i64, name = "fc1#1"
// INJECT-SAME:      {opscope.expose = {index = 2 : i64, name = "generic<tanh>#0"
// INJECT-SAME:      {opscope.pack = [
// INJECT-NOT:       opscope.stat
func.func @exposes_ops_after_original_results(%x: tensor<4x8xf32>, %w: tensor<8x3xf32>) -> tensor<4x3xf32> {
  %c = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<4x8xf32>
  %0 = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel"]}
      ins(%x : tensor<4x8xf32>) outs(%e : tensor<4x8xf32>) {
  ^bb0(%in: f32, %out: f32):
    %1 = math.exp %in : f32
    linalg.yield %1 : f32
  } -> tensor<4x8xf32> loc("fc1")
  %e2 = tensor.empty() : tensor<4x3xf32>
  %f = linalg.fill ins(%c : f32) outs(%e2 : tensor<4x3xf32>) -> tensor<4x3xf32>
  %m = linalg.matmul ins(%0, %w : tensor<4x8xf32>, tensor<8x3xf32>) outs(%f : tensor<4x3xf32>) -> tensor<4x3xf32> loc("fc1")
  %t = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel"]}
      ins(%m : tensor<4x3xf32>) outs(%e2 : tensor<4x3xf32>) {
  ^bb0(%in: f32, %out: f32):
    %1 = math.tanh %in : f32
    linalg.yield %1 : f32
  } -> tensor<4x3xf32>
  return %t : tensor<4x3xf32>
}

// -----

// Constant expressions (a constant weight's transpose, a fill of a scalar) stay inside;
// constants=true exposes them too, still never arith.constant or tensor.empty.
// CHECK-LABEL: func.func @keeps_constant_expressions_inside(
// CHECK-SAME:      -> (tensor<2x3xf32>, tensor<2x3xf32> {opscope.expose = {index = 0 : i64, name = "fc#0", op = "matmul", site = "fc"}})
// CHECK-NOT:     opscope.expose
// CONST-LABEL: func.func @keeps_constant_expressions_inside(
// CONST-SAME:      -> (tensor<2x3xf32>,
// CONST-SAME:      tensor<4x3xf32> {opscope.expose = {index = 0 : i64, name = "fc#0", op = "transpose", site = "fc"}},
// CONST-SAME:      tensor<2x3xf32> {opscope.expose = {index = 1 : i64, name = "fill#0", op = "fill"}},
// CONST-SAME:      tensor<2x3xf32> {opscope.expose = {index = 2 : i64, name = "fc#1", op = "matmul", site = "fc"}})
func.func @keeps_constant_expressions_inside(%x: tensor<2x4xf32>) -> tensor<2x3xf32> {
  %w = arith.constant dense<1.0> : tensor<3x4xf32> loc("fc")
  %c = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<4x3xf32>
  %wt = linalg.transpose ins(%w : tensor<3x4xf32>) outs(%e : tensor<4x3xf32>) permutation = [1, 0] loc("fc")
  %e2 = tensor.empty() : tensor<2x3xf32>
  %f = linalg.fill ins(%c : f32) outs(%e2 : tensor<2x3xf32>) -> tensor<2x3xf32>
  %m = linalg.matmul ins(%x, %wt : tensor<2x4xf32>, tensor<4x3xf32>) outs(%f : tensor<2x3xf32>) -> tensor<2x3xf32> loc("fc")
  return %m : tensor<2x3xf32>
}

// -----

// Each read result of a multi-result op, `:1` for the second; a result nothing reads is
// not exposed (exposing it would make dead code live).
#map1 = affine_map<(d0) -> (d0)>
// CHECK-LABEL: func.func @exposes_each_read_result(
// CHECK-SAME:      -> (tensor<4xf32>,
// CHECK-SAME:      tensor<4xf32> {opscope.expose = {index = 0 : i64, name = "split#0", op = "generic<negf>", site = "split"}},
// CHECK-SAME:      tensor<4xf32> {opscope.expose = {index = 0 : i64, name = "split#0:1", op = "generic<negf>", site = "split"}})
// CHECK-NOT:     opscope.expose
func.func @exposes_each_read_result(%x: tensor<4xf32>) -> tensor<4xf32> {
  %e = tensor.empty() : tensor<4xf32>
  %0:2 = linalg.generic {indexing_maps = [#map1, #map1, #map1], iterator_types = ["parallel"]}
      ins(%x : tensor<4xf32>) outs(%e, %e : tensor<4xf32>, tensor<4xf32>) {
  ^bb0(%in: f32, %o0: f32, %o1: f32):
    %n = arith.negf %in : f32
    linalg.yield %in, %n : f32, f32
  } -> (tensor<4xf32>, tensor<4xf32>) loc("split")
  %dead = linalg.generic {indexing_maps = [#map1, #map1], iterator_types = ["parallel"]}
      ins(%x : tensor<4xf32>) outs(%e : tensor<4xf32>) {
  ^bb0(%in: f32, %o: f32):
    %n = math.exp %in : f32
    linalg.yield %n : f32
  } -> tensor<4xf32> loc("unused")
  %s = arith.addf %0#0, %0#1 : tensor<4xf32>
  return %x : tensor<4xf32>
}
