// RUN: opscope-opt %s -p lower-opscope --split-input-file | filecheck %s
// RUN: opscope-opt %s -p 'lower-opscope{pack=false}' --split-input-file | filecheck %s --check-prefix=UNPACKED
// RUN: opscope-opt %s -p 'lower-opscope{outline=false}' --split-input-file | filecheck %s --check-prefix=INLINE
// RUN: opscope-opt %s -p 'lower-opscope{batch=1}' --split-input-file | filecheck %s --check-prefix=ONE
// RUN: opscope-opt %s -p 'lower-opscope{hoist-constants=true}' --split-input-file | filecheck %s --check-prefix=HOIST
// RUN: opscope-opt %s -p 'lower-opscope{hist-counts=i8}' --split-input-file | filecheck %s --check-prefix=I8
// RUN: opscope-opt %s -p 'lower-opscope{row-lanes=16}' --split-input-file | filecheck %s --check-prefix=LANES

// Kernel bodies are an implementation detail (they are tuned for IREE's dispatch
// formation); these tests pin the contract:
// * no opscope op is left;
// * tapped (value, site, role) groups with the same tensor type and stat list share one
//   call to a private stats kernel (constant expressions apart: they are inlined), each
//   value once; no two calls share a kernel (IREE
//   3.13's iree-util-ipo mis-merges arguments of a kernel called from two places);
//   inside a kernel, the tensors are concatenated into one [B, R, C] stack that every
//   generic reads with B as its leading dimension, `batch` tensors at a time (0, the
//   default: all of them), one at a time above 131072 elements;
// * each call sits right after the latest op defining one of its tensors (at the start
//   of the block when all are function arguments) and takes them directly; with
//   outline=false one util.optimization_barrier per tensor precedes it (an outlined call
//   is opaque to fusion already, and a barrier costs IREE a host sync);
// * histogram lane counts are i32 unless hist-counts=i8 asks for i8 where it fits;
// * row reductions reduce each row straight unless row-lanes=L asks for L (or L/2) lane
//   partials per row where a row holds two vectors of them;
// * the call's results are appended after the original results (which keep their
//   indices and attributes), and result attributes say what every element holds: one
//   packed result per call (`opscope.pack`, entries in call order), or with pack=false
//   one result per statistic of each tensor.

// CHECK-LABEL: func.func @packs_stats_after_original_results(
// CHECK-SAME:      %[[X:[^:]+]]: tensor<4x8xf32>, %{{.+}}: tensor<8x3xf32>, %{{.+}}: tensor<4x3xf32>)
// CHECK-SAME:      -> (tensor<4x3xf32>,
// CHECK-SAME:      tensor<2xf32> {opscope.pack = [{length = 1 : i64, numel = 32 : i64, offset = 0 : i64, role = "lhs", site = "fc1", stat = "min"}, {length = 1 : i64, numel = 32 : i64, offset = 1 : i64, role = "lhs", site = "fc1", stat = "max"}]},
// CHECK-SAME:      tensor<16xf32> {opscope.pack = [{length = 4 : i64, numel = 12 : i64, offset = 0 : i64, role = "out", site = "fc1", stat = "hist"}, {length = 12 : i64, numel = 12 : i64, offset = 4 : i64, role = "out", site = "fc1", stat = "elemsig"}]})
// CHECK-NOT:   opscope.stat
// The lhs is a function argument: its call opens the block.
// CHECK-NEXT:  %[[LHS:.+]] = call @[[LHS_KERNEL:opscope_stats_4x8xf32_[0-9a-f]+]](%[[X]]) : (tensor<4x8xf32>) -> tensor<2xf32>
// The out call follows the matmul that defines it.
// CHECK:       %[[OUT:.+]] = linalg.matmul
// CHECK-NEXT:  %[[OUTS:.+]] = call @[[OUT_KERNEL:opscope_stats_4x3xf32_[0-9a-f]+]](%[[OUT]]) : (tensor<4x3xf32>) -> tensor<16xf32>
// CHECK:       return %[[OUT]], %[[LHS]], %[[OUTS]] : tensor<4x3xf32>, tensor<2xf32>, tensor<16xf32>
// CHECK-DAG:   func.func private @[[LHS_KERNEL]](%{{.+}}: tensor<4x8xf32>) -> tensor<2xf32> attributes {noinline}
// CHECK-DAG:   func.func private @[[OUT_KERNEL]](%{{.+}}: tensor<4x3xf32>) -> tensor<16xf32> attributes {noinline}
// CHECK-NOT:   opscope.stat
// CHECK-NOT:   util.optimization_barrier

// UNPACKED-LABEL: func.func @packs_stats_after_original_results(
// UNPACKED-SAME:      -> (tensor<4x3xf32>,
// UNPACKED-SAME:      tensor<1xf32> {opscope.numel = 32 : i64, opscope.role = "lhs", opscope.site = "fc1", opscope.stat = "min"},
// UNPACKED-SAME:      tensor<1xf32> {opscope.numel = 32 : i64, opscope.role = "lhs", opscope.site = "fc1", opscope.stat = "max"},
// UNPACKED-SAME:      tensor<4xf32> {opscope.numel = 12 : i64, opscope.role = "out", opscope.site = "fc1", opscope.stat = "hist"},
// UNPACKED-SAME:      tensor<12xf32> {opscope.numel = 12 : i64, opscope.role = "out", opscope.site = "fc1", opscope.stat = "elemsig"})
// UNPACKED-NOT:   opscope.pack
// UNPACKED:       %[[LHS:.+]]:2 = call @[[LHS_KERNEL:opscope_stats_4x8xf32_[0-9a-f]+]](%{{.+}}) : (tensor<4x8xf32>) -> (tensor<1xf32>, tensor<1xf32>)
// UNPACKED:       %[[OUT:.+]] = linalg.matmul
// UNPACKED:       %[[OUTS:.+]]:2 = call @{{.+}}(%{{.+}}) : (tensor<4x3xf32>) -> (tensor<4xf32>, tensor<12xf32>)
// UNPACKED:       return %[[OUT]], %[[LHS]]#0, %[[LHS]]#1, %[[OUTS]]#0, %[[OUTS]]#1 :
// UNPACKED:       func.func private @[[LHS_KERNEL]](%{{.+}}: tensor<4x8xf32>) -> (tensor<1xf32>, tensor<1xf32>) attributes {noinline}

// INLINE-LABEL: func.func @packs_stats_after_original_results(
// INLINE-SAME:      %[[X:[^:]+]]: tensor<4x8xf32>,
// INLINE:       %[[XB:.+]] = util.optimization_barrier %[[X]] : tensor<4x8xf32>
// INLINE-NEXT:  call @[[KERNEL:opscope_stats_4x8xf32_[0-9a-f]+]](%[[XB]])
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
// CHECK-SAME:      %[[A:[^:]+]]: tensor<4x8xf32>, %[[B:[^:]+]]: tensor<8xf32>)
// CHECK-SAME:      -> (tensor<4x8xf32> {test.kept = 1 : i64}, tensor<8xf32>, tensor<1xf32> {opscope.pack = [{length = 1 : i64, numel = 32 : i64, offset = 0 : i64, role = "out", site = "act", stat = "nnz"}]})
// CHECK-NEXT:  %[[STAT:.+]] = call @opscope_stats_4x8xf32_{{[0-9a-f]+}}(%[[A]])
// CHECK:       return %[[A]], %[[B]], %[[STAT]] : tensor<4x8xf32>, tensor<8xf32>, tensor<1xf32>
func.func @keeps_original_results_and_their_attrs(%a: tensor<4x8xf32>, %b: tensor<8xf32>) -> (tensor<4x8xf32> {test.kept = 1 : i64}, tensor<8xf32>) {
  "opscope.stat"(%a) {kind = "nnz", options = {}, role = "out", site = "act"} : (tensor<4x8xf32>) -> ()
  return %a, %b : tensor<4x8xf32>, tensor<8xf32>
}

// -----

// Batching: two transient tensors of one type with one stat list share ONE call, placed
// right after the later of their two definitions (not before the return), with one
// packed result whose entries name both, in call order; the values are stat-major (both
// minima, then both maxima: one contiguous slice per statistic). The kernel stacks them: one
// tensor.concat into [2, 4, 3], one row pass over the stack. With batch=1 the call is the
// same, and the kernel computes each tensor in generics of its own (a stack of one, a
// view, no copy).

// CHECK-LABEL: func.func @batches_transient_tensors_after_their_last_definition(
// CHECK-SAME:      -> (tensor<4x3xf32>, tensor<4xf32> {opscope.pack = [
// CHECK-SAME:      {length = 1 : i64, numel = 12 : i64, offset = 0 : i64, role = "out", site = "a", stat = "min"},
// CHECK-SAME:      {length = 1 : i64, numel = 12 : i64, offset = 2 : i64, role = "out", site = "a", stat = "max"},
// CHECK-SAME:      {length = 1 : i64, numel = 12 : i64, offset = 1 : i64, role = "out", site = "b", stat = "min"},
// CHECK-SAME:      {length = 1 : i64, numel = 12 : i64, offset = 3 : i64, role = "out", site = "b", stat = "max"}]})
// CHECK:       %[[A:.+]] = linalg.matmul
// CHECK:       %[[B:.+]] = linalg.matmul
// CHECK-NEXT:  %[[S:.+]] = call @[[KERNEL:opscope_stats_4x3xf32_[0-9a-f]+]](%[[A]], %[[B]]) : (tensor<4x3xf32>, tensor<4x3xf32>) -> tensor<4xf32>
// CHECK-NEXT:  %[[SUM:.+]] = arith.addf %[[A]], %[[B]]
// CHECK:       return %[[SUM]], %[[S]] : tensor<4x3xf32>, tensor<4xf32>
// CHECK:       func.func private @[[KERNEL]](%{{.+}}: tensor<4x3xf32>, %{{.+}}: tensor<4x3xf32>) -> tensor<4xf32> attributes {noinline}
// CHECK:       %[[A1:.+]] = tensor.expand_shape %arg0 {{.+}} into tensor<1x4x3xf32>
// CHECK:       %[[B1:.+]] = tensor.expand_shape %arg1 {{.+}} into tensor<1x4x3xf32>
// CHECK:       %[[STACK:.+]] = tensor.concat dim(0) %[[A1]], %[[B1]] : (tensor<1x4x3xf32>, tensor<1x4x3xf32>) -> tensor<2x4x3xf32>
// CHECK:       linalg.generic {{.+}} ins(%[[STACK]] : tensor<2x4x3xf32>) outs({{.+}} : tensor<2x4xf32>, tensor<2x4xf32>)
// CHECK-NOT:   linalg.generic {{.+}} ins(%{{.+}} : tensor<1x4x3xf32>)
// CHECK-NOT:   func.func private

// UNPACKED-LABEL: func.func @batches_transient_tensors_after_their_last_definition(
// UNPACKED-SAME:      -> (tensor<4x3xf32>,
// UNPACKED-SAME:      tensor<1xf32> {opscope.numel = 12 : i64, opscope.role = "out", opscope.site = "a", opscope.stat = "min"},
// UNPACKED-SAME:      tensor<1xf32> {opscope.numel = 12 : i64, opscope.role = "out", opscope.site = "a", opscope.stat = "max"},
// UNPACKED-SAME:      tensor<1xf32> {opscope.numel = 12 : i64, opscope.role = "out", opscope.site = "b", opscope.stat = "min"},
// UNPACKED-SAME:      tensor<1xf32> {opscope.numel = 12 : i64, opscope.role = "out", opscope.site = "b", opscope.stat = "max"})
// UNPACKED:       %[[A:.+]] = linalg.matmul
// UNPACKED-NEXT:  %[[B:.+]] = linalg.matmul
// UNPACKED-NEXT:  %[[S:.+]]:4 = call @{{.+}}(%[[A]], %[[B]]) : (tensor<4x3xf32>, tensor<4x3xf32>) -> (tensor<1xf32>, tensor<1xf32>, tensor<1xf32>, tensor<1xf32>)
// UNPACKED:       return %{{.+}}, %[[S]]#0, %[[S]]#1, %[[S]]#2, %[[S]]#3 :

// ONE-LABEL: func.func @batches_transient_tensors_after_their_last_definition(
// ONE-SAME:      -> (tensor<4x3xf32>, tensor<4xf32> {opscope.pack = [
// ONE:           %[[A:.+]] = linalg.matmul
// ONE-NEXT:      %[[B:.+]] = linalg.matmul
// ONE-NEXT:      %[[S:.+]] = call @[[KERNEL:opscope_stats_4x3xf32_[0-9a-f]+]](%[[A]], %[[B]]) : (tensor<4x3xf32>, tensor<4x3xf32>) -> tensor<4xf32>
// ONE:           func.func private @[[KERNEL]](%{{.+}}: tensor<4x3xf32>, %{{.+}}: tensor<4x3xf32>) -> tensor<4xf32> attributes {noinline}
// ONE-NOT:       tensor.concat
// ONE:           %[[A1:.+]] = tensor.expand_shape %arg0 {{.+}} into tensor<1x4x3xf32>
// ONE:           linalg.generic {{.+}} ins(%[[A1]] : tensor<1x4x3xf32>)
// ONE:           %[[B1:.+]] = tensor.expand_shape %arg1 {{.+}} into tensor<1x4x3xf32>
// ONE:           linalg.generic {{.+}} ins(%[[B1]] : tensor<1x4x3xf32>)
// ONE-NOT:       func.func private
func.func @batches_transient_tensors_after_their_last_definition(%x: tensor<4x8xf32>, %w1: tensor<8x3xf32>, %w2: tensor<8x3xf32>, %c: tensor<4x3xf32>) -> tensor<4x3xf32> {
  %0 = linalg.matmul ins(%x, %w1 : tensor<4x8xf32>, tensor<8x3xf32>) outs(%c : tensor<4x3xf32>) -> tensor<4x3xf32> loc("a")
  %1 = linalg.matmul ins(%x, %w2 : tensor<4x8xf32>, tensor<8x3xf32>) outs(%c : tensor<4x3xf32>) -> tensor<4x3xf32> loc("b")
  %2 = arith.addf %0, %1 : tensor<4x3xf32>
  "opscope.stat"(%0) {kind = "min", options = {}, role = "out", site = "a"} : (tensor<4x3xf32>) -> ()
  "opscope.stat"(%0) {kind = "max", options = {}, role = "out", site = "a"} : (tensor<4x3xf32>) -> ()
  "opscope.stat"(%1) {kind = "min", options = {}, role = "out", site = "b"} : (tensor<4x3xf32>) -> ()
  "opscope.stat"(%1) {kind = "max", options = {}, role = "out", site = "b"} : (tensor<4x3xf32>) -> ()
  return %2 : tensor<4x3xf32>
}

// -----

// Residency no longer splits calls: the argument %x (external), the intermediate %0
// (transient) and the returned %1 (external) share one call after %1, the last of their
// definitions (each call has a kernel of its own, so no kernel is called with resources
// of both kinds, which IREE 3.13's stream conversion rejects). batch=1 changes no call
// (only how a kernel stacks its tensors).

// CHECK-LABEL: func.func @one_call_for_external_and_transient_tensors(
// CHECK-SAME:      %[[X:[^:]+]]: tensor<4x4xf32>,
// CHECK-SAME:      -> (tensor<4x4xf32>,
// CHECK-SAME:      tensor<3xf32> {opscope.pack = [{length = 1 : i64, numel = 16 : i64, offset = 0 : i64, role = "lhs", site = "a", stat = "sumsq"}, {length = 1 : i64, numel = 16 : i64, offset = 1 : i64, role = "out", site = "a", stat = "sumsq"}, {length = 1 : i64, numel = 16 : i64, offset = 2 : i64, role = "out", site = "b", stat = "sumsq"}]})
// CHECK:       %[[A:.+]] = linalg.matmul
// CHECK-NEXT:  %[[B:.+]] = linalg.matmul
// CHECK-NEXT:  %[[S:.+]] = call @[[KERNEL:opscope_stats_4x4xf32_[0-9a-f]+]](%[[X]], %[[A]], %[[B]]) : (tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<3xf32>
// CHECK:       return %[[B]], %[[S]] : tensor<4x4xf32>, tensor<3xf32>
// CHECK:       func.func private @[[KERNEL]](%{{.+}}: tensor<4x4xf32>, %{{.+}}: tensor<4x4xf32>, %{{.+}}: tensor<4x4xf32>) -> tensor<3xf32> attributes {noinline}
// CHECK-NOT:   func.func private

// ONE-LABEL: func.func @one_call_for_external_and_transient_tensors(
// ONE-SAME:      %[[X:[^:]+]]: tensor<4x4xf32>,
// ONE:           %[[A:.+]] = linalg.matmul
// ONE-NEXT:      %[[B:.+]] = linalg.matmul
// ONE-NEXT:      call @opscope_stats_4x4xf32_{{[0-9a-f]+}}(%[[X]], %[[A]], %[[B]]) : (tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<3xf32>
// ONE-COUNT-1:   func.func private @opscope_stats_4x4xf32_
// ONE-NOT:       func.func private
// ONE:           // -----
func.func @one_call_for_external_and_transient_tensors(%x: tensor<4x4xf32>, %w: tensor<4x4xf32>, %c: tensor<4x4xf32>) -> tensor<4x4xf32> {
  %0 = linalg.matmul ins(%x, %w : tensor<4x4xf32>, tensor<4x4xf32>) outs(%c : tensor<4x4xf32>) -> tensor<4x4xf32> loc("a")
  %1 = linalg.matmul ins(%0, %w : tensor<4x4xf32>, tensor<4x4xf32>) outs(%c : tensor<4x4xf32>) -> tensor<4x4xf32> loc("b")
  "opscope.stat"(%x) {kind = "sumsq", options = {}, role = "lhs", site = "a"} : (tensor<4x4xf32>) -> ()
  "opscope.stat"(%0) {kind = "sumsq", options = {}, role = "out", site = "a"} : (tensor<4x4xf32>) -> ()
  "opscope.stat"(%1) {kind = "sumsq", options = {}, role = "out", site = "b"} : (tensor<4x4xf32>) -> ()
  return %1 : tensor<4x4xf32>
}

// -----

// batch=0 (the default) stacks every tensor of a call: five same-shaped transient
// tensors become one call after e, whose kernel concatenates them into [5, 4, 3] and
// computes all six row partials of all five in one generic (7 bindings whatever the count:
// IREE's 32 bindings per dispatch no longer cap a group); the five nnz values, the last
// statistic, are one slice at 5·5.

// CHECK-LABEL: func.func @stacks_every_tensor_of_a_call(
// CHECK-SAME:      -> (tensor<4x3xf32>,
// CHECK-SAME:      tensor<30xf32> {opscope.pack = [{length = 1 : i64, numel = 12 : i64, offset = 0 : i64, role = "out", site = "a", stat = "min"}, {{.+}}, {length = 1 : i64, numel = 12 : i64, offset = 29 : i64, role = "out", site = "e", stat = "nnz"}]})
// CHECK-COUNT-5: linalg.matmul
// CHECK-NEXT:  %[[S:.+]] = call @[[K:opscope_stats_4x3xf32_[0-9a-f]+]](%{{[^,]+}}, %{{[^,]+}}, %{{[^,]+}}, %{{[^,]+}}, %{{[^,]+}}) : (tensor<4x3xf32>, tensor<4x3xf32>, tensor<4x3xf32>, tensor<4x3xf32>, tensor<4x3xf32>) -> tensor<30xf32>
// CHECK:       return %{{.+}}, %[[S]] : tensor<4x3xf32>, tensor<30xf32>
// CHECK:       func.func private @[[K]](
// CHECK:       %[[STACK:.+]] = tensor.concat dim(0) {{.+}} -> tensor<5x4x3xf32>
// CHECK:       linalg.generic {{.+}} ins(%[[STACK]] : tensor<5x4x3xf32>) outs({{.+}} : tensor<5x4xf32>, tensor<5x4xf32>, tensor<5x4xf32>, tensor<5x4xf32>, tensor<5x4xf32>, tensor<5x4xf32>)
// CHECK:       tensor.insert_slice %{{.+}} into %{{.+}}[25] [5] [1] : tensor<5xf32> into tensor<30xf32>
func.func @stacks_every_tensor_of_a_call(%x: tensor<4x8xf32>, %w: tensor<8x3xf32>, %c: tensor<4x3xf32>) -> tensor<4x3xf32> {
  %0 = linalg.matmul ins(%x, %w : tensor<4x8xf32>, tensor<8x3xf32>) outs(%c : tensor<4x3xf32>) -> tensor<4x3xf32> loc("a")
  %1 = linalg.matmul ins(%x, %w : tensor<4x8xf32>, tensor<8x3xf32>) outs(%c : tensor<4x3xf32>) -> tensor<4x3xf32> loc("b")
  %2 = linalg.matmul ins(%x, %w : tensor<4x8xf32>, tensor<8x3xf32>) outs(%c : tensor<4x3xf32>) -> tensor<4x3xf32> loc("c")
  %3 = linalg.matmul ins(%x, %w : tensor<4x8xf32>, tensor<8x3xf32>) outs(%c : tensor<4x3xf32>) -> tensor<4x3xf32> loc("d")
  %4 = linalg.matmul ins(%x, %w : tensor<4x8xf32>, tensor<8x3xf32>) outs(%c : tensor<4x3xf32>) -> tensor<4x3xf32> loc("e")
  %5 = linalg.matmul ins(%x, %w : tensor<4x8xf32>, tensor<8x3xf32>) outs(%c : tensor<4x3xf32>) -> tensor<4x3xf32> loc("f")
  "opscope.stat"(%0) {kind = "min", options = {}, role = "out", site = "a"} : (tensor<4x3xf32>) -> ()
  "opscope.stat"(%0) {kind = "max", options = {}, role = "out", site = "a"} : (tensor<4x3xf32>) -> ()
  "opscope.stat"(%0) {kind = "mean", options = {}, role = "out", site = "a"} : (tensor<4x3xf32>) -> ()
  "opscope.stat"(%0) {kind = "l1", options = {}, role = "out", site = "a"} : (tensor<4x3xf32>) -> ()
  "opscope.stat"(%0) {kind = "sumsq", options = {}, role = "out", site = "a"} : (tensor<4x3xf32>) -> ()
  "opscope.stat"(%0) {kind = "nnz", options = {}, role = "out", site = "a"} : (tensor<4x3xf32>) -> ()
  "opscope.stat"(%1) {kind = "min", options = {}, role = "out", site = "b"} : (tensor<4x3xf32>) -> ()
  "opscope.stat"(%1) {kind = "max", options = {}, role = "out", site = "b"} : (tensor<4x3xf32>) -> ()
  "opscope.stat"(%1) {kind = "mean", options = {}, role = "out", site = "b"} : (tensor<4x3xf32>) -> ()
  "opscope.stat"(%1) {kind = "l1", options = {}, role = "out", site = "b"} : (tensor<4x3xf32>) -> ()
  "opscope.stat"(%1) {kind = "sumsq", options = {}, role = "out", site = "b"} : (tensor<4x3xf32>) -> ()
  "opscope.stat"(%1) {kind = "nnz", options = {}, role = "out", site = "b"} : (tensor<4x3xf32>) -> ()
  "opscope.stat"(%2) {kind = "min", options = {}, role = "out", site = "c"} : (tensor<4x3xf32>) -> ()
  "opscope.stat"(%2) {kind = "max", options = {}, role = "out", site = "c"} : (tensor<4x3xf32>) -> ()
  "opscope.stat"(%2) {kind = "mean", options = {}, role = "out", site = "c"} : (tensor<4x3xf32>) -> ()
  "opscope.stat"(%2) {kind = "l1", options = {}, role = "out", site = "c"} : (tensor<4x3xf32>) -> ()
  "opscope.stat"(%2) {kind = "sumsq", options = {}, role = "out", site = "c"} : (tensor<4x3xf32>) -> ()
  "opscope.stat"(%2) {kind = "nnz", options = {}, role = "out", site = "c"} : (tensor<4x3xf32>) -> ()
  "opscope.stat"(%3) {kind = "min", options = {}, role = "out", site = "d"} : (tensor<4x3xf32>) -> ()
  "opscope.stat"(%3) {kind = "max", options = {}, role = "out", site = "d"} : (tensor<4x3xf32>) -> ()
  "opscope.stat"(%3) {kind = "mean", options = {}, role = "out", site = "d"} : (tensor<4x3xf32>) -> ()
  "opscope.stat"(%3) {kind = "l1", options = {}, role = "out", site = "d"} : (tensor<4x3xf32>) -> ()
  "opscope.stat"(%3) {kind = "sumsq", options = {}, role = "out", site = "d"} : (tensor<4x3xf32>) -> ()
  "opscope.stat"(%3) {kind = "nnz", options = {}, role = "out", site = "d"} : (tensor<4x3xf32>) -> ()
  "opscope.stat"(%4) {kind = "min", options = {}, role = "out", site = "e"} : (tensor<4x3xf32>) -> ()
  "opscope.stat"(%4) {kind = "max", options = {}, role = "out", site = "e"} : (tensor<4x3xf32>) -> ()
  "opscope.stat"(%4) {kind = "mean", options = {}, role = "out", site = "e"} : (tensor<4x3xf32>) -> ()
  "opscope.stat"(%4) {kind = "l1", options = {}, role = "out", site = "e"} : (tensor<4x3xf32>) -> ()
  "opscope.stat"(%4) {kind = "sumsq", options = {}, role = "out", site = "e"} : (tensor<4x3xf32>) -> ()
  "opscope.stat"(%4) {kind = "nnz", options = {}, role = "out", site = "e"} : (tensor<4x3xf32>) -> ()
  return %5 : tensor<4x3xf32>
}

// -----

// No kernel is called from two places, even with the same signature in two functions:
// IREE 3.13's iree-util-ipo merges a kernel's arguments that are equal at one call site
// (a resource, an offset, a size) for every call site when an earlier one has them
// distinct (MiniLM and GPT-2 crashed iree-compile; where the types agree it would read
// one tensor's statistics at another's offset).

// CHECK-LABEL: func.func @first_function(
// CHECK-SAME:      -> (tensor<2xf32> {opscope.pack = [{{.+}}site = "a", stat = "sumsq"}, {{.+}}site = "b", stat = "sumsq"}]})
// CHECK:       call @[[FIRST:opscope_stats_4x8xf32_[0-9a-f]+]](%{{[^,]+}}, %{{[^,]+}})
// CHECK-LABEL: func.func @second_function(
// CHECK-SAME:      -> (tensor<2xf32> {opscope.pack = [{{.+}}site = "c", stat = "sumsq"}, {{.+}}site = "d", stat = "sumsq"}]})
// CHECK-NOT:   call @[[FIRST]](
// CHECK:       call @[[SECOND:opscope_stats_4x8xf32_[0-9a-f]+_1]](
// CHECK-DAG:   func.func private @[[FIRST]](%{{.+}}: tensor<4x8xf32>, %{{.+}}: tensor<4x8xf32>) -> tensor<2xf32>
// CHECK-DAG:   func.func private @[[SECOND]](%{{.+}}: tensor<4x8xf32>, %{{.+}}: tensor<4x8xf32>) -> tensor<2xf32>
// CHECK-NOT:   func.func private
func.func @first_function(%x: tensor<4x8xf32>, %y: tensor<4x8xf32>) {
  "opscope.stat"(%x) {kind = "sumsq", options = {}, role = "lhs", site = "a"} : (tensor<4x8xf32>) -> ()
  "opscope.stat"(%y) {kind = "sumsq", options = {}, role = "lhs", site = "b"} : (tensor<4x8xf32>) -> ()
  return
}
func.func @second_function(%z: tensor<4x8xf32>, %v: tensor<4x8xf32>) {
  "opscope.stat"(%z) {kind = "sumsq", options = {}, role = "rhs", site = "c"} : (tensor<4x8xf32>) -> ()
  "opscope.stat"(%v) {kind = "sumsq", options = {}, role = "rhs", site = "d"} : (tensor<4x8xf32>) -> ()
  return
}

// -----

// One value tapped under two sites (q and k reading one activation) is one slot of the
// call, computed once: both sites' entries point at it (offset 0 here).

// CHECK-LABEL: func.func @computes_a_value_tapped_twice_once(
// CHECK-SAME:      %[[X:[^:]+]]: tensor<4x8xf32>, %[[Y:[^:]+]]: tensor<4x8xf32>, %[[Z:[^:]+]]: tensor<4x8xf32>)
// CHECK-SAME:      -> (tensor<3xf32> {opscope.pack = [{length = 1 : i64, numel = 32 : i64, offset = 0 : i64, role = "lhs", site = "q", stat = "sumsq"}, {length = 1 : i64, numel = 32 : i64, offset = 0 : i64, role = "lhs", site = "k", stat = "sumsq"}, {length = 1 : i64, numel = 32 : i64, offset = 1 : i64, role = "lhs", site = "v", stat = "sumsq"}, {length = 1 : i64, numel = 32 : i64, offset = 2 : i64, role = "lhs", site = "o", stat = "sumsq"}]})
// CHECK-NEXT:  call @opscope_stats_4x8xf32_{{[0-9a-f]+}}(%[[X]], %[[Y]], %[[Z]]) : (tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<3xf32>

// UNPACKED-LABEL: func.func @computes_a_value_tapped_twice_once(
// UNPACKED-SAME:      -> (tensor<1xf32> {{{.+}}opscope.site = "q"{{.+}}}, tensor<1xf32> {{{.+}}opscope.site = "k"{{.+}}}, tensor<1xf32> {{{.+}}opscope.site = "v"{{.+}}}, tensor<1xf32> {{{.+}}opscope.site = "o"{{.+}}})
// UNPACKED-NEXT:  %[[S:.+]]:3 = call @{{.+}}(%arg0, %arg1, %arg2)
// UNPACKED-NEXT:  return %[[S]]#0, %[[S]]#0, %[[S]]#1, %[[S]]#2 :
func.func @computes_a_value_tapped_twice_once(%x: tensor<4x8xf32>, %y: tensor<4x8xf32>, %z: tensor<4x8xf32>) {
  "opscope.stat"(%x) {kind = "sumsq", options = {}, role = "lhs", site = "q"} : (tensor<4x8xf32>) -> ()
  "opscope.stat"(%x) {kind = "sumsq", options = {}, role = "lhs", site = "k"} : (tensor<4x8xf32>) -> ()
  "opscope.stat"(%y) {kind = "sumsq", options = {}, role = "lhs", site = "v"} : (tensor<4x8xf32>) -> ()
  "opscope.stat"(%z) {kind = "sumsq", options = {}, role = "lhs", site = "o"} : (tensor<4x8xf32>) -> ()
  return
}

// -----

// Statistics of a constant expression (a load of an immutable global, an
// arith.constant, what is computed from them only) get a kernel of their own that IREE
// inlines (no noinline): an outlined kernel called with a constant fails IREE 3.13's
// stream conversion. By default a barrier keeps the weight from being hoisted (its
// statistics are computed every call); with hoist-constants there is none, so IREE's
// const-expr hoisting evaluates them at compile time. A mutable global is not constant.

// CHECK-LABEL: func.func @inlines_stats_of_constants(
// CHECK:       %[[G:.+]] = util.global.load @weight : tensor<4x4xf32>
// CHECK-NEXT:  %[[B:.+]] = util.optimization_barrier %[[G]] : tensor<4x4xf32>
// CHECK-NEXT:  %{{.+}} = call @[[CONST:opscope_stats_4x4xf32_[0-9a-f]+]](%[[B]])
// CHECK:       %[[M:.+]] = util.global.load @state : tensor<4x4xf32>
// CHECK-NEXT:  %{{.+}} = call @[[OUTLINED:opscope_stats_4x4xf32_[0-9a-f]+]](%[[M]])
// CHECK-DAG:   func.func private @[[CONST]](%{{.+}}: tensor<4x4xf32>) -> tensor<1xf32> {
// CHECK-DAG:   func.func private @[[OUTLINED]](%{{.+}}: tensor<4x4xf32>) -> tensor<1xf32> attributes {noinline}

// HOIST-LABEL: func.func @inlines_stats_of_constants(
// HOIST:       %[[G:.+]] = util.global.load @weight : tensor<4x4xf32>
// HOIST-NEXT:  %[[SG:.+]] = call @[[CONST:opscope_stats_4x4xf32_[0-9a-f]+]](%[[G]])
// HOIST:       %[[M:.+]] = util.global.load @state : tensor<4x4xf32>
// HOIST-NEXT:  %[[SM:.+]] = call @[[OUTLINED:opscope_stats_4x4xf32_[0-9a-f]+]](%[[M]])
// HOIST-NOT:   util.optimization_barrier
// HOIST-DAG:   func.func private @[[CONST]](%{{.+}}: tensor<4x4xf32>) -> tensor<1xf32> {
// HOIST-DAG:   func.func private @[[OUTLINED]](%{{.+}}: tensor<4x4xf32>) -> tensor<1xf32> attributes {noinline}
util.global private @weight = dense<1.0> : tensor<4x4xf32>
util.global private mutable @state = dense<2.0> : tensor<4x4xf32>
func.func @inlines_stats_of_constants() {
  %g = util.global.load @weight : tensor<4x4xf32>
  "opscope.stat"(%g) {kind = "sumsq", options = {}, role = "rhs", site = "a"} : (tensor<4x4xf32>) -> ()
  %m = util.global.load @state : tensor<4x4xf32>
  "opscope.stat"(%m) {kind = "sumsq", options = {}, role = "rhs", site = "b"} : (tensor<4x4xf32>) -> ()
  return
}

// -----

// A constant expression computed from a weight (its transpose, broadcast to a batch of 1:
// a matmul's rhs) is recomputed after a barrier on the weight itself, so the transpose
// fuses into the statistics instead of being materialized behind a barrier (every weight's
// transpose was live at once in a weights function). The model's own transpose is untouched.

// CHECK-LABEL: func.func @barrier_on_the_weight_not_its_transpose(
// CHECK:       %[[G:.+]] = util.global.load @w2 : tensor<8x4xf32>
// CHECK:       %[[T:.+]] = linalg.transpose ins(%[[G]] : tensor<8x4xf32>)
// CHECK:       linalg.broadcast ins(%[[T]] : tensor<4x8xf32>)
// CHECK-NEXT:  %[[B:.+]] = util.optimization_barrier %[[G]] : tensor<8x4xf32>
// CHECK-NEXT:  %[[T2:.+]] = linalg.transpose ins(%[[B]] : tensor<8x4xf32>)
// CHECK-NEXT:  %[[BC2:.+]] = linalg.broadcast ins(%[[T2]] : tensor<4x8xf32>)
// CHECK-NEXT:  %{{.+}} = call @{{opscope_stats_1x4x8xf32_[0-9a-f]+}}(%[[BC2]])
util.global private @w2 = dense<1.0> : tensor<8x4xf32>
func.func @barrier_on_the_weight_not_its_transpose() {
  %g = util.global.load @w2 : tensor<8x4xf32>
  %e = tensor.empty() : tensor<4x8xf32>
  %t = linalg.transpose ins(%g : tensor<8x4xf32>) outs(%e : tensor<4x8xf32>) permutation = [1, 0]
  %e3 = tensor.empty() : tensor<1x4x8xf32>
  %b = linalg.broadcast ins(%t : tensor<4x8xf32>) outs(%e3 : tensor<1x4x8xf32>) dimensions = [0]
  "opscope.stat"(%b) {kind = "sumsq", options = {}, role = "rhs", site = "a"} : (tensor<1x4x8xf32>) -> ()
  return
}

// -----

// Histogram lane counts: i32 by default (16 lanes); with hist-counts=i8 the bin indices
// and the per-(slab, bin, lane) counts are i8 (64 lanes), each lane counting at most 255
// indices, read back unsigned. 510x64 = 32640 elements is 2 slabs of 255 x 64 lanes:
// every lane counts 255 indices, the most an unsigned i8 holds.

// CHECK-LABEL: func.func @counts_hist_lanes_in_i8_on_request(
// CHECK:       func.func private @{{.+}}(%{{.+}}: tensor<510x64xf32>) -> tensor<32xf32> attributes {noinline}
// CHECK:       tensor.expand_shape %{{.+}} output_shape [1, 4, 510, 16] : tensor<1x32640xi32> into tensor<1x4x510x16xi32>
// CHECK:       linalg.generic {{.+}} ins(%{{.+}} : tensor<1x4x510x16xi32>) outs(%{{.+}} : tensor<1x4x32x16xi32>)
// CHECK-NOT:   {{xi8>|: i8}}

// I8-LABEL: func.func @counts_hist_lanes_in_i8_on_request(
// I8:       func.func private @{{.+}}(%{{.+}}: tensor<510x64xf32>) -> tensor<32xf32> attributes {noinline}
// I8:       arith.trunci %{{.+}} : i32 to i8
// I8:       tensor.expand_shape %{{.+}} output_shape [1, 2, 255, 64] : tensor<1x32640xi8> into tensor<1x2x255x64xi8>
// I8:       linalg.generic {{.+}} ins(%{{.+}} : tensor<1x2x255x64xi8>) outs(%{{.+}} : tensor<1x2x32x64xi8>)
// I8:       arith.addi %{{.+}}, %{{.+}} : i8
// I8:       arith.uitofp %{{.+}} : i8 to f32
func.func @counts_hist_lanes_in_i8_on_request(%x: tensor<510x64xf32>) {
  "opscope.stat"(%x) {kind = "hist", options = {bins = 32 : i64, hi = 1.0 : f32, lo = -1.0 : f32, normalize = true}, role = "lhs", site = "s"} : (tensor<510x64xf32>) -> ()
  return
}

// -----

// hist-counts=i8 keeps i32 counts where i8 does not fit: more than 127 bins (an index
// must fit in i8), or too few elements for 64 lanes of at least 8 indices (48x8).

// I8-LABEL: func.func @keeps_i32_hist_where_i8_does_not_fit(
// I8:       outs(%{{.+}} : tensor<1x1x200x16xi32>)
// I8:       outs(%{{.+}} : tensor<1x1x32x16xi32>)
// I8-NOT:   {{xi8>|: i8}}
func.func @keeps_i32_hist_where_i8_does_not_fit(%x: tensor<64x64xf32>, %y: tensor<48x8xf32>) {
  "opscope.stat"(%x) {kind = "hist", options = {bins = 200 : i64, hi = 1.0 : f32, lo = -1.0 : f32, normalize = false}, role = "lhs", site = "s"} : (tensor<64x64xf32>) -> ()
  "opscope.stat"(%y) {kind = "hist", options = {bins = 32 : i64, hi = 1.0 : f32, lo = -1.0 : f32, normalize = false}, role = "rhs", site = "s"} : (tensor<48x8xf32>) -> ()
  return
}

// -----

// Row reductions: straight by default ([1, R, C] -> [1, R] partials: a stack of one); with
// row-lanes=16 the row pass and the kurtosis pass read rows as [1, R, C/16, 16] and keep
// [1, R, 16] lane partials (the lanes are parallel, the C/16 vectors the reduction); the
// final sums reduce rows and lanes, pos_sumsq sums the lanes of each row. 12 columns hold
// no two vectors of 16 or 8: straight there too.

// CHECK-LABEL: func.func @reduces_rows_in_lanes_on_request(
// CHECK:       linalg.generic {{.+}} iterator_types = ["parallel", "parallel", "reduction"]} ins(%{{.+}} : tensor<1x4x64xf32>) outs({{.+}} : tensor<1x4xf32>, tensor<1x4xf32>, tensor<1x4xf32>, tensor<1x4xf32>)
// CHECK-NOT:   tensor<1x4x4x16xf32>

// LANES-LABEL: func.func @reduces_rows_in_lanes_on_request(
// LANES:       func.func private @{{.+}}(%[[X:.+]]: tensor<4x64xf32>) -> tensor<9xf32>
// LANES:       %[[S:.+]] = tensor.expand_shape %[[X]] {{.+}} into tensor<1x4x64xf32>
// LANES:       %[[V:.+]] = tensor.expand_shape %[[S]] {{\[\[}}0], [1], [2, 3]] output_shape [1, 4, 4, 16] : tensor<1x4x64xf32> into tensor<1x4x4x16xf32>
// LANES:       linalg.generic {{.+}} iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%[[V]] : tensor<1x4x4x16xf32>) outs({{.+}} : tensor<1x4x16xf32>, tensor<1x4x16xf32>, tensor<1x4x16xf32>, tensor<1x4x16xf32>)
// LANES:       linalg.generic {{.+}} iterator_types = ["parallel", "reduction", "reduction"]} ins({{.+}} : tensor<1x4x16xf32>, tensor<1x4x16xf32>, tensor<1x4x16xf32>, tensor<1x4x16xf32>)
// LANES:       linalg.generic {{.+}} iterator_types = ["parallel", "parallel", "reduction"]} ins(%{{.+}} : tensor<1x4x16xf32>) outs(%{{.+}} : tensor<1x4xf32>)
// LANES:       iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%{{.+}}, %{{.+}} : tensor<1x4x4x16xf32>, tensor<1xf32>) outs(%{{.+}}, %{{.+}} : tensor<1x4x16xf32>, tensor<1x4x16xf32>)
// LANES:       func.func private @{{.+}}(%{{.+}}: tensor<4x12xf32>) -> tensor<1xf32>
// LANES-NOT:   tensor<1x4x{{[0-9]+}}x{{[0-9]+}}xf32>
// LANES:       iterator_types = ["parallel", "parallel", "reduction"]} ins(%{{.+}} : tensor<1x4x12xf32>) outs(%{{.+}} : tensor<1x4xf32>)
func.func @reduces_rows_in_lanes_on_request(%x: tensor<4x64xf32>, %y: tensor<4x12xf32>) {
  "opscope.stat"(%x) {kind = "min", options = {}, role = "lhs", site = "s"} : (tensor<4x64xf32>) -> ()
  "opscope.stat"(%x) {kind = "mean", options = {}, role = "lhs", site = "s"} : (tensor<4x64xf32>) -> ()
  "opscope.stat"(%x) {kind = "l1", options = {}, role = "lhs", site = "s"} : (tensor<4x64xf32>) -> ()
  "opscope.stat"(%x) {kind = "sumsq", options = {}, role = "lhs", site = "s"} : (tensor<4x64xf32>) -> ()
  "opscope.stat"(%x) {kind = "kurtosis", options = {}, role = "lhs", site = "s"} : (tensor<4x64xf32>) -> ()
  "opscope.stat"(%x) {kind = "pos_sumsq", options = {}, role = "lhs", site = "s"} : (tensor<4x64xf32>) -> ()
  "opscope.stat"(%y) {kind = "sumsq", options = {}, role = "rhs", site = "s"} : (tensor<4x12xf32>) -> ()
  return
}

// -----

// Tensors above 131072 elements are not copied into a stack: each is computed alone (a
// view of one), so two 512x512 tensors in one call get two row passes.

// CHECK-LABEL: func.func @computes_large_tensors_one_at_a_time(
// CHECK:       call @{{.+}}(%arg0, %arg1) : (tensor<512x512xf32>, tensor<512x512xf32>) -> tensor<2xf32>
// CHECK:       func.func private
// CHECK-NOT:   tensor.concat
// CHECK:       linalg.generic {{.+}} ins(%{{.+}} : tensor<1x512x512xf32>)
// CHECK:       linalg.generic {{.+}} ins(%{{.+}} : tensor<1x512x512xf32>)
// CHECK-NOT:   tensor<2x512x512xf32>
func.func @computes_large_tensors_one_at_a_time(%a: tensor<512x512xf32>, %b: tensor<512x512xf32>) {
  "opscope.stat"(%a) {kind = "min", options = {}, role = "lhs", site = "s"} : (tensor<512x512xf32>) -> ()
  "opscope.stat"(%b) {kind = "min", options = {}, role = "rhs", site = "s"} : (tensor<512x512xf32>) -> ()
  return
}

// -----

// A tensor whose channels are not its last dim is read channel-last: its kernel transposes
// it (NCHW -> NHWC) and merges the channel dims, so chan_maxabs has C entries and pos_sumsq
// one per pixel; a grouped [N, G, C/G, H, W] tensor's two channel dims become one of G*C/G.
// Tensors of one type but other channel dims do not share a kernel.

// CHECK-LABEL: func.func @reads_channels_where_the_stat_says(
// CHECK-SAME:      -> (tensor<36xf32> {opscope.pack = [{length = 1 : i64, numel = 96 : i64, offset = 0 : i64, role = "lhs", site = "conv", stat = "min"}, {length = 3 : i64, numel = 96 : i64, offset = 1 : i64, role = "lhs", site = "conv", stat = "chan_maxabs"}, {length = 32 : i64, numel = 96 : i64, offset = 4 : i64, role = "lhs", site = "conv", stat = "pos_sumsq"}]}
// CHECK-SAME:      tensor<29xf32> {opscope.pack = [{length = 1 : i64, numel = 96 : i64, offset = 0 : i64, role = "out", site = "fc", stat = "min"}, {length = 4 : i64, numel = 96 : i64, offset = 1 : i64, role = "out", site = "fc", stat = "chan_maxabs"}, {length = 24 : i64, numel = 96 : i64, offset = 5 : i64, role = "out", site = "fc", stat = "pos_sumsq"}]}
// CHECK-SAME:      tensor<21xf32> {opscope.pack = [{length = 1 : i64, numel = 64 : i64, offset = 0 : i64, role = "lhs", site = "grp", stat = "min"}, {length = 4 : i64, numel = 64 : i64, offset = 1 : i64, role = "lhs", site = "grp", stat = "chan_maxabs"}, {length = 16 : i64, numel = 64 : i64, offset = 5 : i64, role = "lhs", site = "grp", stat = "pos_sumsq"}]}
// CHECK:       func.func private @{{.+}}(%{{.+}}: tensor<2x3x4x4xf32>) -> tensor<36xf32>
// CHECK:       linalg.transpose ins(%{{.+}} : tensor<2x3x4x4xf32>) outs(%{{.+}} : tensor<2x4x4x3xf32>) permutation = [0, 2, 3, 1]
// CHECK-NEXT:  tensor.collapse_shape %{{.+}} {{\[}}[0, 1, 2], [3]] : tensor<2x4x4x3xf32> into tensor<32x3xf32>
// CHECK:       func.func private @{{.+}}(%{{.+}}: tensor<2x3x4x4xf32>) -> tensor<29xf32>
// CHECK-NOT:   linalg.transpose
// CHECK:       tensor.collapse_shape %{{.+}} {{\[}}[0, 1, 2], [3]] : tensor<2x3x4x4xf32> into tensor<24x4xf32>
// CHECK:       func.func private @{{.+}}(%{{.+}}: tensor<1x2x2x4x4xf32>) -> tensor<21xf32>
// CHECK:       linalg.transpose ins(%{{.+}} : tensor<1x2x2x4x4xf32>) outs(%{{.+}} : tensor<1x4x4x2x2xf32>) permutation = [0, 3, 4, 1, 2]
// CHECK-NEXT:  tensor.collapse_shape %{{.+}} {{\[}}[0, 1, 2], [3, 4]] : tensor<1x4x4x2x2xf32> into tensor<16x4xf32>
func.func @reads_channels_where_the_stat_says(%x: tensor<2x3x4x4xf32>, %y: tensor<2x3x4x4xf32>, %g: tensor<1x2x2x4x4xf32>) {
  "opscope.stat"(%x) {kind = "min", options = {channel_dims = [1]}, role = "lhs", site = "conv"} : (tensor<2x3x4x4xf32>) -> ()
  "opscope.stat"(%x) {kind = "chan_maxabs", options = {channel_dims = [1]}, role = "lhs", site = "conv"} : (tensor<2x3x4x4xf32>) -> ()
  "opscope.stat"(%x) {kind = "pos_sumsq", options = {channel_dims = [1]}, role = "lhs", site = "conv"} : (tensor<2x3x4x4xf32>) -> ()
  "opscope.stat"(%y) {kind = "min", options = {}, role = "out", site = "fc"} : (tensor<2x3x4x4xf32>) -> ()
  "opscope.stat"(%y) {kind = "chan_maxabs", options = {}, role = "out", site = "fc"} : (tensor<2x3x4x4xf32>) -> ()
  "opscope.stat"(%y) {kind = "pos_sumsq", options = {}, role = "out", site = "fc"} : (tensor<2x3x4x4xf32>) -> ()
  "opscope.stat"(%g) {kind = "min", options = {channel_dims = [1, 2]}, role = "lhs", site = "grp"} : (tensor<1x2x2x4x4xf32>) -> ()
  "opscope.stat"(%g) {kind = "chan_maxabs", options = {channel_dims = [1, 2]}, role = "lhs", site = "grp"} : (tensor<1x2x2x4x4xf32>) -> ()
  "opscope.stat"(%g) {kind = "pos_sumsq", options = {channel_dims = [1, 2]}, role = "lhs", site = "grp"} : (tensor<1x2x2x4x4xf32>) -> ()
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

// -----

// A tapped tensor a later op updates in place (here the accumulator of the next matmul) is
// read by an inlined kernel behind a barrier, never an outlined {noinline} call: IREE 3.13
// let in-place writes land before such a call read its operand.

// CHECK-LABEL: func.func @tapped_accumulator_is_read_inline(
// CHECK:       %[[ACC:.+]] = linalg.matmul ins(%arg0, %arg1
// CHECK-NEXT:  %[[B:.+]] = util.optimization_barrier %[[ACC]] :
// CHECK-NEXT:  call @[[K:opscope_stats_4x4xf32_[0-9a-f]+]](%[[B]])
// CHECK:       linalg.matmul {{.+}} outs(%[[ACC]] : tensor<4x4xf32>)
// CHECK:       func.func private @[[K]](%arg0: tensor<4x4xf32>) -> tensor<1xf32> {{\{$}}
func.func @tapped_accumulator_is_read_inline(%x: tensor<4x4xf32>, %w: tensor<4x4xf32>, %c: tensor<4x4xf32>) -> tensor<4x4xf32> {
  %0 = linalg.matmul ins(%x, %w : tensor<4x4xf32>, tensor<4x4xf32>) outs(%c : tensor<4x4xf32>) -> tensor<4x4xf32> loc("a")
  "opscope.stat"(%0) {kind = "sumsq", options = {}, role = "out", site = "a"} : (tensor<4x4xf32>) -> ()
  %1 = linalg.matmul ins(%x, %w : tensor<4x4xf32>, tensor<4x4xf32>) outs(%0 : tensor<4x4xf32>) -> tensor<4x4xf32> loc("b")
  return %1 : tensor<4x4xf32>
}
