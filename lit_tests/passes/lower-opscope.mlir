// RUN: opscope-opt %s -p lower-opscope --split-input-file | filecheck %s
// RUN: opscope-opt %s -p 'lower-opscope{pack=false}' --split-input-file | filecheck %s --check-prefix=UNPACKED
// RUN: opscope-opt %s -p 'lower-opscope{outline=false}' --split-input-file | filecheck %s --check-prefix=INLINE
// RUN: opscope-opt %s -p 'lower-opscope{batch=1}' --split-input-file | filecheck %s --check-prefix=ONE
// RUN: opscope-opt %s -p 'lower-opscope{hoist-constants=true}' --split-input-file | filecheck %s --check-prefix=HOIST

// Kernel bodies are an implementation detail (they are tuned for IREE's dispatch
// formation); these tests pin the contract:
// * no opscope op is left;
// * tapped (value, site, role) groups with the same tensor type, stat list and residency
//   (function argument or returned value: external; anything else: transient) share one
//   call to a private stats kernel, at most `batch` tensors per call (0, the default:
//   as many as IREE's 32 bindings per dispatch allow);
// * each call sits right after the latest op defining one of its tensors (at the start
//   of the block when all are function arguments) and takes them directly; with
//   outline=false one util.optimization_barrier per tensor precedes it (an outlined call
//   is opaque to fusion already, and a barrier costs IREE a host sync);
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
// packed result whose entries name both, in call order. With batch=1 each tensor gets its
// own call, right after its own definition, and the two calls share one kernel.

// CHECK-LABEL: func.func @batches_transient_tensors_after_their_last_definition(
// CHECK-SAME:      -> (tensor<4x3xf32>, tensor<4xf32> {opscope.pack = [
// CHECK-SAME:      {length = 1 : i64, numel = 12 : i64, offset = 0 : i64, role = "out", site = "a", stat = "min"},
// CHECK-SAME:      {length = 1 : i64, numel = 12 : i64, offset = 1 : i64, role = "out", site = "a", stat = "max"},
// CHECK-SAME:      {length = 1 : i64, numel = 12 : i64, offset = 2 : i64, role = "out", site = "b", stat = "min"},
// CHECK-SAME:      {length = 1 : i64, numel = 12 : i64, offset = 3 : i64, role = "out", site = "b", stat = "max"}]})
// CHECK:       %[[A:.+]] = linalg.matmul
// CHECK:       %[[B:.+]] = linalg.matmul
// CHECK-NEXT:  %[[S:.+]] = call @[[KERNEL:opscope_stats_4x3xf32_[0-9a-f]+]](%[[A]], %[[B]]) : (tensor<4x3xf32>, tensor<4x3xf32>) -> tensor<4xf32>
// CHECK-NEXT:  %[[SUM:.+]] = arith.addf %[[A]], %[[B]]
// CHECK:       return %[[SUM]], %[[S]] : tensor<4x3xf32>, tensor<4xf32>
// CHECK:       func.func private @[[KERNEL]](%{{.+}}: tensor<4x3xf32>, %{{.+}}: tensor<4x3xf32>) -> tensor<4xf32> attributes {noinline}
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
// ONE-SAME:      -> (tensor<4x3xf32>,
// ONE-SAME:      tensor<2xf32> {opscope.pack = [{{.+}}site = "a", stat = "min"}, {{.+}}site = "a", stat = "max"}]},
// ONE-SAME:      tensor<2xf32> {opscope.pack = [{{.+}}site = "b", stat = "min"}, {{.+}}site = "b", stat = "max"}]})
// ONE:           %[[A:.+]] = linalg.matmul
// ONE-NEXT:      %[[SA:.+]] = call @[[KERNEL:opscope_stats_4x3xf32_[0-9a-f]+]](%[[A]]) : (tensor<4x3xf32>) -> tensor<2xf32>
// ONE-NEXT:      %[[B:.+]] = linalg.matmul
// ONE-NEXT:      %[[SB:.+]] = call @[[KERNEL]](%[[B]]) : (tensor<4x3xf32>) -> tensor<2xf32>
// ONE:           return %{{.+}}, %[[SA]], %[[SB]] : tensor<4x3xf32>, tensor<2xf32>, tensor<2xf32>
// ONE:           func.func private @[[KERNEL]](%{{.+}}: tensor<4x3xf32>) -> tensor<2xf32> attributes {noinline}
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

// Residency splits calls: the argument %x and the returned %1 are external and share a
// call (after %1, the later definition); the intermediate %0 is transient and gets its
// own call and kernel. With batch=1, the two external tensors still share a kernel and
// the transient one does not: three calls, two kernels.

// CHECK-LABEL: func.func @splits_calls_by_residency(
// CHECK-SAME:      %[[X:[^:]+]]: tensor<4x4xf32>,
// CHECK-SAME:      -> (tensor<4x4xf32>,
// CHECK-SAME:      tensor<2xf32> {opscope.pack = [{length = 1 : i64, numel = 16 : i64, offset = 0 : i64, role = "lhs", site = "a", stat = "sumsq"}, {length = 1 : i64, numel = 16 : i64, offset = 1 : i64, role = "out", site = "b", stat = "sumsq"}]},
// CHECK-SAME:      tensor<1xf32> {opscope.pack = [{length = 1 : i64, numel = 16 : i64, offset = 0 : i64, role = "out", site = "a", stat = "sumsq"}]})
// CHECK:       %[[A:.+]] = linalg.matmul
// CHECK-NEXT:  %[[TRANSIENT:.+]] = call @[[TRANSIENT_KERNEL:opscope_stats_4x4xf32_[0-9a-f]+]](%[[A]]) : (tensor<4x4xf32>) -> tensor<1xf32>
// CHECK-NEXT:  %[[B:.+]] = linalg.matmul
// CHECK-NEXT:  %[[EXTERNAL:.+]] = call @[[EXTERNAL_KERNEL:opscope_stats_4x4xf32_[0-9a-f]+]](%[[X]], %[[B]]) : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<2xf32>
// CHECK:       return %[[B]], %[[EXTERNAL]], %[[TRANSIENT]] : tensor<4x4xf32>, tensor<2xf32>, tensor<1xf32>
// CHECK-DAG:   func.func private @[[EXTERNAL_KERNEL]](%{{.+}}: tensor<4x4xf32>, %{{.+}}: tensor<4x4xf32>) -> tensor<2xf32> attributes {noinline}
// CHECK-DAG:   func.func private @[[TRANSIENT_KERNEL]](%{{.+}}: tensor<4x4xf32>) -> tensor<1xf32> attributes {noinline}

// ONE-LABEL: func.func @splits_calls_by_residency(
// ONE-SAME:      %[[X:[^:]+]]: tensor<4x4xf32>,
// ONE-NEXT:      %[[SX:.+]] = call @[[EXTERNAL_KERNEL:opscope_stats_4x4xf32_[0-9a-f]+]](%[[X]]) : (tensor<4x4xf32>) -> tensor<1xf32>
// ONE:           %[[A:.+]] = linalg.matmul
// ONE-NEXT:      %[[SA:.+]] = call @opscope_stats_4x4xf32_{{[0-9a-f]+}}(%[[A]]) : (tensor<4x4xf32>) -> tensor<1xf32>
// ONE-NEXT:      %[[B:.+]] = linalg.matmul
// ONE-NEXT:      %[[SB:.+]] = call @[[EXTERNAL_KERNEL]](%[[B]]) : (tensor<4x4xf32>) -> tensor<1xf32>
// ONE:           return %[[B]], %[[SX]], %[[SA]], %[[SB]] : tensor<4x4xf32>, tensor<1xf32>, tensor<1xf32>, tensor<1xf32>
// ONE-COUNT-2:   func.func private @opscope_stats_4x4xf32_
// ONE-NOT:       func.func private
// ONE:           // -----
func.func @splits_calls_by_residency(%x: tensor<4x4xf32>, %w: tensor<4x4xf32>, %c: tensor<4x4xf32>) -> tensor<4x4xf32> {
  %0 = linalg.matmul ins(%x, %w : tensor<4x4xf32>, tensor<4x4xf32>) outs(%c : tensor<4x4xf32>) -> tensor<4x4xf32> loc("a")
  %1 = linalg.matmul ins(%0, %w : tensor<4x4xf32>, tensor<4x4xf32>) outs(%c : tensor<4x4xf32>) -> tensor<4x4xf32> loc("b")
  "opscope.stat"(%x) {kind = "sumsq", options = {}, role = "lhs", site = "a"} : (tensor<4x4xf32>) -> ()
  "opscope.stat"(%0) {kind = "sumsq", options = {}, role = "out", site = "a"} : (tensor<4x4xf32>) -> ()
  "opscope.stat"(%1) {kind = "sumsq", options = {}, role = "out", site = "b"} : (tensor<4x4xf32>) -> ()
  return %1 : tensor<4x4xf32>
}

// -----

// batch=0 (the default) fits each call in IREE's 32 bindings per dispatch. This stat
// list needs 6 row partials per tensor, so the row pass takes 7 bindings per tensor and a
// call takes 4 tensors (the final reduction of the partials is split to fit): five
// same-shaped transient tensors become a call for a..d, placed after d, and a call for e,
// placed after e.

// CHECK-LABEL: func.func @caps_tensors_per_call_at_the_binding_budget(
// CHECK-SAME:      -> (tensor<4x3xf32>,
// CHECK-SAME:      tensor<24xf32> {opscope.pack = [{length = 1 : i64, numel = 12 : i64, offset = 0 : i64, role = "out", site = "a", stat = "min"}, {{.+}}, {length = 1 : i64, numel = 12 : i64, offset = 23 : i64, role = "out", site = "d", stat = "nnz"}]},
// CHECK-SAME:      tensor<6xf32> {opscope.pack = [{length = 1 : i64, numel = 12 : i64, offset = 0 : i64, role = "out", site = "e", stat = "min"}, {{.+}}, {length = 1 : i64, numel = 12 : i64, offset = 5 : i64, role = "out", site = "e", stat = "nnz"}]})
// CHECK-COUNT-4: linalg.matmul
// CHECK-NEXT:  %[[ABCD:.+]] = call @opscope_stats_4x3xf32_{{[0-9a-f]+}}(%{{[^,]+}}, %{{[^,]+}}, %{{[^,]+}}, %{{[^,]+}}) : (tensor<4x3xf32>, tensor<4x3xf32>, tensor<4x3xf32>, tensor<4x3xf32>) -> tensor<24xf32>
// CHECK-NEXT:  %[[E:.+]] = linalg.matmul
// CHECK-NEXT:  %[[SE:.+]] = call @opscope_stats_4x3xf32_{{[0-9a-f]+}}(%[[E]]) : (tensor<4x3xf32>) -> tensor<6xf32>
// CHECK:       return %{{.+}}, %[[ABCD]], %[[SE]] : tensor<4x3xf32>, tensor<24xf32>, tensor<6xf32>
func.func @caps_tensors_per_call_at_the_binding_budget(%x: tensor<4x8xf32>, %w: tensor<8x3xf32>, %c: tensor<4x3xf32>) -> tensor<4x3xf32> {
  %0 = linalg.matmul ins(%x, %w : tensor<4x8xf32>, tensor<8x3xf32>) outs(%c : tensor<4x3xf32>) -> tensor<4x3xf32> loc("a")
  %1 = linalg.matmul ins(%x, %w : tensor<4x8xf32>, tensor<8x3xf32>) outs(%0 : tensor<4x3xf32>) -> tensor<4x3xf32> loc("b")
  %2 = linalg.matmul ins(%x, %w : tensor<4x8xf32>, tensor<8x3xf32>) outs(%1 : tensor<4x3xf32>) -> tensor<4x3xf32> loc("c")
  %3 = linalg.matmul ins(%x, %w : tensor<4x8xf32>, tensor<8x3xf32>) outs(%2 : tensor<4x3xf32>) -> tensor<4x3xf32> loc("d")
  %4 = linalg.matmul ins(%x, %w : tensor<4x8xf32>, tensor<8x3xf32>) outs(%3 : tensor<4x3xf32>) -> tensor<4x3xf32> loc("e")
  %5 = linalg.matmul ins(%x, %w : tensor<4x8xf32>, tensor<8x3xf32>) outs(%4 : tensor<4x3xf32>) -> tensor<4x3xf32> loc("f")
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

// Calls with the same tensor type, stat list, residency and tensor count share one
// kernel, across functions; a call with another tensor count gets its own.

// CHECK-LABEL: func.func @shares_one_kernel_per_signature(
// CHECK-SAME:      -> (tensor<2xf32> {opscope.pack = [{{.+}}site = "a", stat = "sumsq"}, {{.+}}site = "b", stat = "sumsq"}]})
// CHECK:       call @[[PAIR:opscope_stats_4x8xf32_[0-9a-f]+]](%{{[^,]+}}, %{{[^,]+}})
// CHECK-LABEL: func.func @shares_kernel_with_another_function(
// CHECK-SAME:      -> (tensor<2xf32> {opscope.pack = [{{.+}}site = "c", stat = "sumsq"}, {{.+}}site = "d", stat = "sumsq"}]})
// CHECK:       call @[[PAIR]](
// CHECK-LABEL: func.func @one_tensor_is_another_kernel(
// CHECK-SAME:      -> (tensor<1xf32> {opscope.pack = [{{.+}}site = "e", stat = "sumsq"}]})
// CHECK:       call @[[SINGLE:opscope_stats_4x8xf32_[0-9a-f]+]](
// CHECK-DAG:   func.func private @[[PAIR]](%{{.+}}: tensor<4x8xf32>, %{{.+}}: tensor<4x8xf32>) -> tensor<2xf32>
// CHECK-DAG:   func.func private @[[SINGLE]](%{{.+}}: tensor<4x8xf32>) -> tensor<1xf32>
// CHECK-NOT:   func.func private
func.func @shares_one_kernel_per_signature(%x: tensor<4x8xf32>, %y: tensor<4x8xf32>) {
  "opscope.stat"(%x) {kind = "sumsq", options = {}, role = "lhs", site = "a"} : (tensor<4x8xf32>) -> ()
  "opscope.stat"(%y) {kind = "sumsq", options = {}, role = "lhs", site = "b"} : (tensor<4x8xf32>) -> ()
  return
}
func.func @shares_kernel_with_another_function(%z: tensor<4x8xf32>, %v: tensor<4x8xf32>) {
  "opscope.stat"(%z) {kind = "sumsq", options = {}, role = "rhs", site = "c"} : (tensor<4x8xf32>) -> ()
  "opscope.stat"(%v) {kind = "sumsq", options = {}, role = "rhs", site = "d"} : (tensor<4x8xf32>) -> ()
  return
}
func.func @one_tensor_is_another_kernel(%u: tensor<4x8xf32>) {
  "opscope.stat"(%u) {kind = "sumsq", options = {}, role = "rhs", site = "e"} : (tensor<4x8xf32>) -> ()
  return
}

// -----

// One tensor tapped under two roles (a weight shared by two sites) is two groups: two
// tensors of one call, two entries of its packed result.

// CHECK-LABEL: func.func @groups_by_value_site_and_role(
// CHECK-SAME:      %[[W:[^:]+]]: tensor<8x3xf32>)
// CHECK-SAME:      -> (tensor<2xf32> {opscope.pack = [{length = 1 : i64, numel = 24 : i64, offset = 0 : i64, role = "rhs", site = "q", stat = "max"}, {length = 1 : i64, numel = 24 : i64, offset = 1 : i64, role = "rhs", site = "k", stat = "max"}]})
// CHECK-NEXT:  call @opscope_stats_8x3xf32_{{[0-9a-f]+}}(%[[W]], %[[W]])
func.func @groups_by_value_site_and_role(%w: tensor<8x3xf32>) {
  "opscope.stat"(%w) {kind = "max", options = {}, role = "rhs", site = "q"} : (tensor<8x3xf32>) -> ()
  "opscope.stat"(%w) {kind = "max", options = {}, role = "rhs", site = "k"} : (tensor<8x3xf32>) -> ()
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

// CHECK-LABEL: func.func @function_without_stats_is_untouched(
// CHECK-SAME:      %{{.+}}: tensor<4x8xf32>) -> tensor<4x8xf32> {
// CHECK-NOT:   call
// CHECK-NOT:   opscope
func.func @function_without_stats_is_untouched(%a: tensor<4x8xf32>) -> tensor<4x8xf32> {
  return %a : tensor<4x8xf32>
}
