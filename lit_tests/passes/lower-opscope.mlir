// RUN: opscope-opt %s -p lower-opscope --split-input-file | filecheck %s
// RUN: opscope-opt %s -p 'lower-opscope{pack=false}' --split-input-file | filecheck %s --check-prefix=UNPACKED
// RUN: opscope-opt %s -p 'lower-opscope{outline=false}' --split-input-file | filecheck %s --check-prefix=INLINE

// Kernel bodies are an implementation detail (they are tuned for IREE's dispatch
// formation); these tests pin the contract: no opscope op is left, each tapped
// (value, site, role) becomes one call to a private stats kernel, its result is appended
// after the original results (which keep their indices and attributes), and result
// attributes say what every element holds.

// CHECK-LABEL: func.func @packs_stats_after_original_results(
// CHECK-SAME:      %[[X:.+]]: tensor<4x8xf32>, %{{.+}}: tensor<8x3xf32>, %{{.+}}: tensor<4x3xf32>)
// CHECK-SAME:      -> (tensor<4x3xf32>,
// CHECK-SAME:      tensor<2xf32> {opscope.pack = [{length = 1 : i64, numel = 32 : i64, offset = 0 : i64, role = "lhs", site = "fc1", stat = "min"}, {length = 1 : i64, numel = 32 : i64, offset = 1 : i64, role = "lhs", site = "fc1", stat = "max"}]},
// CHECK-SAME:      tensor<16xf32> {opscope.pack = [{length = 4 : i64, numel = 12 : i64, offset = 0 : i64, role = "out", site = "fc1", stat = "hist"}, {length = 12 : i64, numel = 12 : i64, offset = 4 : i64, role = "out", site = "fc1", stat = "elemsig"}]})
// CHECK-NOT:   opscope.stat
// CHECK:       %[[OUT:.+]] = linalg.matmul
// CHECK:       %[[LHS:.+]] = call @[[LHS_KERNEL:opscope_stats_4x8xf32_[0-9a-f]+]](%{{.+}}) : (tensor<4x8xf32>) -> tensor<2xf32>
// CHECK:       %[[OUTS:.+]] = call @[[OUT_KERNEL:opscope_stats_4x3xf32_[0-9a-f]+]](%{{.+}}) : (tensor<4x3xf32>) -> tensor<16xf32>
// CHECK:       return %[[OUT]], %[[LHS]], %[[OUTS]] : tensor<4x3xf32>, tensor<2xf32>, tensor<16xf32>
// CHECK:       func.func private @[[LHS_KERNEL]](%{{.+}}: tensor<4x8xf32>) -> tensor<2xf32> attributes {noinline}
// CHECK:       linalg.generic
// CHECK:       return %{{.+}} : tensor<2xf32>
// CHECK:       func.func private @[[OUT_KERNEL]](%{{.+}}: tensor<4x3xf32>) -> tensor<16xf32> attributes {noinline}
// CHECK:       linalg.generic
// CHECK:       return %{{.+}} : tensor<16xf32>
// CHECK-NOT:   opscope.stat

// UNPACKED-LABEL: func.func @packs_stats_after_original_results(
// UNPACKED-SAME:      -> (tensor<4x3xf32>,
// UNPACKED-SAME:      tensor<1xf32> {opscope.numel = 32 : i64, opscope.role = "lhs", opscope.site = "fc1", opscope.stat = "min"},
// UNPACKED-SAME:      tensor<1xf32> {opscope.numel = 32 : i64, opscope.role = "lhs", opscope.site = "fc1", opscope.stat = "max"},
// UNPACKED-SAME:      tensor<4xf32> {opscope.numel = 12 : i64, opscope.role = "out", opscope.site = "fc1", opscope.stat = "hist"},
// UNPACKED-SAME:      tensor<12xf32> {opscope.numel = 12 : i64, opscope.role = "out", opscope.site = "fc1", opscope.stat = "elemsig"})
// UNPACKED-NOT:   opscope.pack
// UNPACKED:       %[[OUT:.+]] = linalg.matmul
// UNPACKED:       %[[LHS:.+]]:2 = call @[[LHS_KERNEL:opscope_stats_4x8xf32_[0-9a-f]+]](%{{.+}}) : (tensor<4x8xf32>) -> (tensor<1xf32>, tensor<1xf32>)
// UNPACKED:       %[[OUTS:.+]]:2 = call @{{.+}}(%{{.+}}) : (tensor<4x3xf32>) -> (tensor<4xf32>, tensor<12xf32>)
// UNPACKED:       return %[[OUT]], %[[LHS]]#0, %[[LHS]]#1, %[[OUTS]]#0, %[[OUTS]]#1 :
// UNPACKED:       func.func private @[[LHS_KERNEL]](%{{.+}}: tensor<4x8xf32>) -> (tensor<1xf32>, tensor<1xf32>) attributes {noinline}

// INLINE-LABEL: func.func @packs_stats_after_original_results(
// INLINE:       call @[[KERNEL:opscope_stats_4x8xf32_[0-9a-f]+]](
// INLINE-NOT:   noinline
// INLINE:       func.func private @[[KERNEL]](%{{.+}}: tensor<4x8xf32>) -> tensor<2xf32> {
// INLINE-NOT:   noinline
func.func @packs_stats_after_original_results(%x: tensor<4x8xf32>, %w: tensor<8x3xf32>, %c: tensor<4x3xf32>) -> tensor<4x3xf32> {
  %0 = linalg.matmul ins(%x, %w : tensor<4x8xf32>, tensor<8x3xf32>) outs(%c : tensor<4x3xf32>) -> tensor<4x3xf32> loc("fc1")
  "opscope.stat"(%x) {kind = "min", options = {}, role = "lhs", site = "fc1"} : (tensor<4x8xf32>) -> ()
  "opscope.stat"(%x) {kind = "max", options = {}, role = "lhs", site = "fc1"} : (tensor<4x8xf32>) -> ()
  "opscope.stat"(%0) {kind = "hist", options = {bins = 4 : i64, hi = 1.0 : f32, lo = -1.0 : f32, normalize = true}, role = "out", site = "fc1"} : (tensor<4x3xf32>) -> ()
  "opscope.stat"(%0) {kind = "elemsig", options = {}, role = "out", site = "fc1"} : (tensor<4x3xf32>) -> ()
  return %0 : tensor<4x3xf32>
}

// -----

// Original results keep their index and their attributes.

// CHECK-LABEL: func.func @keeps_original_results_and_their_attrs(
// CHECK-SAME:      %[[A:.+]]: tensor<4x8xf32>, %[[B:.+]]: tensor<8xf32>)
// CHECK-SAME:      -> (tensor<4x8xf32> {test.kept = 1 : i64}, tensor<8xf32>, tensor<1xf32> {opscope.pack = [{length = 1 : i64, numel = 32 : i64, offset = 0 : i64, role = "out", site = "act", stat = "nnz"}]})
// CHECK:       %[[STAT:.+]] = call @opscope_stats_4x8xf32_{{[0-9a-f]+}}(
// CHECK:       return %[[A]], %[[B]], %[[STAT]] : tensor<4x8xf32>, tensor<8xf32>, tensor<1xf32>
func.func @keeps_original_results_and_their_attrs(%a: tensor<4x8xf32>, %b: tensor<8xf32>) -> (tensor<4x8xf32> {test.kept = 1 : i64}, tensor<8xf32>) {
  "opscope.stat"(%a) {kind = "nnz", options = {}, role = "out", site = "act"} : (tensor<4x8xf32>) -> ()
  return %a, %b : tensor<4x8xf32>, tensor<8xf32>
}

// -----

// Taps of the same tensor type and stat list share one kernel, across sites and across
// functions; each tap is still its own call and its own result.

// CHECK-LABEL: func.func @shares_one_kernel_per_type_and_stats(
// CHECK-SAME:      -> (tensor<1xf32> {opscope.pack = [{{.+}}site = "a", stat = "sumsq"}]}, tensor<1xf32> {opscope.pack = [{{.+}}site = "b", stat = "sumsq"}]})
// CHECK:       call @[[KERNEL:opscope_stats_4x8xf32_[0-9a-f]+]](
// CHECK:       call @[[KERNEL]](
// CHECK-LABEL: func.func @shares_kernel_with_another_function(
// CHECK-SAME:      -> (tensor<1xf32> {opscope.pack = [{{.+}}site = "c", stat = "sumsq"}]})
// CHECK:       call @[[KERNEL]](
// CHECK:       func.func private @[[KERNEL]](
// CHECK-NOT:   func.func private
func.func @shares_one_kernel_per_type_and_stats(%x: tensor<4x8xf32>, %y: tensor<4x8xf32>) {
  "opscope.stat"(%x) {kind = "sumsq", options = {}, role = "lhs", site = "a"} : (tensor<4x8xf32>) -> ()
  "opscope.stat"(%y) {kind = "sumsq", options = {}, role = "lhs", site = "b"} : (tensor<4x8xf32>) -> ()
  return
}
func.func @shares_kernel_with_another_function(%z: tensor<4x8xf32>) {
  "opscope.stat"(%z) {kind = "sumsq", options = {}, role = "rhs", site = "c"} : (tensor<4x8xf32>) -> ()
  return
}

// -----

// One tensor tapped under two roles (a weight shared by two sites) is two groups.

// CHECK-LABEL: func.func @groups_by_value_site_and_role(
// CHECK-SAME:      tensor<1xf32> {opscope.pack = [{length = 1 : i64, numel = 24 : i64, offset = 0 : i64, role = "rhs", site = "q", stat = "max"}]}
// CHECK-SAME:      tensor<1xf32> {opscope.pack = [{length = 1 : i64, numel = 24 : i64, offset = 0 : i64, role = "rhs", site = "k", stat = "max"}]}
func.func @groups_by_value_site_and_role(%w: tensor<8x3xf32>) {
  "opscope.stat"(%w) {kind = "max", options = {}, role = "rhs", site = "q"} : (tensor<8x3xf32>) -> ()
  "opscope.stat"(%w) {kind = "max", options = {}, role = "rhs", site = "k"} : (tensor<8x3xf32>) -> ()
  return
}

// -----

// CHECK-LABEL: func.func @function_without_stats_is_untouched(
// CHECK-SAME:      %{{.+}}: tensor<4x8xf32>) -> tensor<4x8xf32> {
// CHECK-NOT:   call
// CHECK-NOT:   opscope
func.func @function_without_stats_is_untouched(%a: tensor<4x8xf32>) -> tensor<4x8xf32> {
  return %a : tensor<4x8xf32>
}
