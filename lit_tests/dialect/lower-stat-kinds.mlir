// RUN: opscope-opt %s -p lower-opscope --split-input-file | filecheck %s

// How each opscope.stat kind lowers, checked loosely: the kernel bodies are tuned for
// IREE's dispatch formation and change, so only the packed length, the kernel's
// signature and the op that makes each statistic what it is are pinned here. Values
// are checked against numpy in pytest.
//
// Every case taps one tensor<4x8xf32> (rows R = 4, channels C = 8, numel 32) unless it
// says otherwise.

// CHECK-LABEL: func.func @lower_min(
// CHECK-SAME:      -> (tensor<1xf32> {opscope.pack = [{length = 1 : i64, numel = 32 : i64, offset = 0 : i64, role = "lhs", site = "s", stat = "min"}]})
// CHECK:       call @[[KERNEL:opscope_stats_[0-9a-z]+_[0-9a-f]+]](
// CHECK:       func.func private @[[KERNEL]](%{{.+}}: tensor<4x8xf32>) -> tensor<1xf32>
// CHECK:       linalg.generic {{.*}}"reduction"
// CHECK:       arith.min
func.func @lower_min(%x: tensor<4x8xf32>) {
  "opscope.stat"(%x) {kind = "min", options = {}, role = "lhs", site = "s"} : (tensor<4x8xf32>) -> ()
  return
}

// -----

// CHECK-LABEL: func.func @lower_max(
// CHECK-SAME:      -> (tensor<1xf32> {opscope.pack = [{length = 1 : i64, numel = 32 : i64, offset = 0 : i64, role = "lhs", site = "s", stat = "max"}]})
// CHECK:       call @[[KERNEL:opscope_stats_[0-9a-z]+_[0-9a-f]+]](
// CHECK:       func.func private @[[KERNEL]](%{{.+}}: tensor<4x8xf32>) -> tensor<1xf32>
// CHECK:       linalg.generic {{.*}}"reduction"
// CHECK:       arith.max
func.func @lower_max(%x: tensor<4x8xf32>) {
  "opscope.stat"(%x) {kind = "max", options = {}, role = "lhs", site = "s"} : (tensor<4x8xf32>) -> ()
  return
}

// -----

// CHECK-LABEL: func.func @lower_mean(
// CHECK-SAME:      -> (tensor<1xf32> {opscope.pack = [{length = 1 : i64, numel = 32 : i64, offset = 0 : i64, role = "lhs", site = "s", stat = "mean"}]})
// CHECK:       call @[[KERNEL:opscope_stats_[0-9a-z]+_[0-9a-f]+]](
// CHECK:       func.func private @[[KERNEL]](%{{.+}}: tensor<4x8xf32>) -> tensor<1xf32>
// CHECK:       linalg.generic {{.*}}"reduction"
// CHECK:       arith.addf
func.func @lower_mean(%x: tensor<4x8xf32>) {
  "opscope.stat"(%x) {kind = "mean", options = {}, role = "lhs", site = "s"} : (tensor<4x8xf32>) -> ()
  return
}

// -----

// CHECK-LABEL: func.func @lower_l1(
// CHECK-SAME:      -> (tensor<1xf32> {opscope.pack = [{length = 1 : i64, numel = 32 : i64, offset = 0 : i64, role = "lhs", site = "s", stat = "l1"}]})
// CHECK:       call @[[KERNEL:opscope_stats_[0-9a-z]+_[0-9a-f]+]](
// CHECK:       func.func private @[[KERNEL]](%{{.+}}: tensor<4x8xf32>) -> tensor<1xf32>
// CHECK:       linalg.generic {{.*}}"reduction"
// CHECK:       math.absf
func.func @lower_l1(%x: tensor<4x8xf32>) {
  "opscope.stat"(%x) {kind = "l1", options = {}, role = "lhs", site = "s"} : (tensor<4x8xf32>) -> ()
  return
}

// -----

// CHECK-LABEL: func.func @lower_sumsq(
// CHECK-SAME:      -> (tensor<1xf32> {opscope.pack = [{length = 1 : i64, numel = 32 : i64, offset = 0 : i64, role = "lhs", site = "s", stat = "sumsq"}]})
// CHECK:       call @[[KERNEL:opscope_stats_[0-9a-z]+_[0-9a-f]+]](
// CHECK:       func.func private @[[KERNEL]](%{{.+}}: tensor<4x8xf32>) -> tensor<1xf32>
// CHECK:       linalg.generic {{.*}}"reduction"
// CHECK:       arith.mulf
func.func @lower_sumsq(%x: tensor<4x8xf32>) {
  "opscope.stat"(%x) {kind = "sumsq", options = {}, role = "lhs", site = "s"} : (tensor<4x8xf32>) -> ()
  return
}

// -----

// CHECK-LABEL: func.func @lower_nnz(
// CHECK-SAME:      -> (tensor<1xf32> {opscope.pack = [{length = 1 : i64, numel = 32 : i64, offset = 0 : i64, role = "lhs", site = "s", stat = "nnz"}]})
// CHECK:       call @[[KERNEL:opscope_stats_[0-9a-z]+_[0-9a-f]+]](
// CHECK:       func.func private @[[KERNEL]](%{{.+}}: tensor<4x8xf32>) -> tensor<1xf32>
// CHECK:       linalg.generic {{.*}}"reduction"
// CHECK:       arith.cmpf
func.func @lower_nnz(%x: tensor<4x8xf32>) {
  "opscope.stat"(%x) {kind = "nnz", options = {}, role = "lhs", site = "s"} : (tensor<4x8xf32>) -> ()
  return
}

// -----

// kurtosis needs the mean first: a second pass over x (a stack of one, [1, 4, 8]) takes
// the sum per tensor ([1]) and divides it by n in its body.

// CHECK-LABEL: func.func @lower_kurtosis(
// CHECK-SAME:      -> (tensor<1xf32> {opscope.pack = [{length = 1 : i64, numel = 32 : i64, offset = 0 : i64, role = "lhs", site = "s", stat = "kurtosis"}]})
// CHECK:       call @[[KERNEL:opscope_stats_[0-9a-z]+_[0-9a-f]+]](
// CHECK:       func.func private @[[KERNEL]](%{{.+}}: tensor<4x8xf32>) -> tensor<1xf32>
// CHECK:       %[[X:.+]] = tensor.expand_shape %arg0 {{\[\[}}0, 1], [2]] output_shape [1, 4, 8] : tensor<4x8xf32> into tensor<1x4x8xf32>
// CHECK:       linalg.generic {{.*}}"reduction"
// CHECK:       linalg.generic {{.*}}ins(%[[X]], %{{.+}} : tensor<1x4x8xf32>, tensor<1xf32>)
// CHECK:       arith.divf
// CHECK:       arith.subf
func.func @lower_kurtosis(%x: tensor<4x8xf32>) {
  "opscope.stat"(%x) {kind = "kurtosis", options = {}, role = "lhs", site = "s"} : (tensor<4x8xf32>) -> ()
  return
}

// -----

// hist counts per bin in a 3-loop generic that reads the bin from linalg.index.

// CHECK-LABEL: func.func @lower_hist(
// CHECK-SAME:      -> (tensor<8xf32> {opscope.pack = [{length = 8 : i64, numel = 32 : i64, offset = 0 : i64, role = "lhs", site = "s", stat = "hist"}]})
// CHECK:       call @[[KERNEL:opscope_stats_[0-9a-z]+_[0-9a-f]+]](
// CHECK:       func.func private @[[KERNEL]](%{{.+}}: tensor<4x8xf32>) -> tensor<8xf32>
// CHECK:       linalg.generic {{.*}}iterator_types = [{{"[a-z]+", "[a-z]+", "[a-z]+"}}]
// CHECK:       linalg.index
func.func @lower_hist(%x: tensor<4x8xf32>) {
  "opscope.stat"(%x) {kind = "hist", options = {bins = 8 : i64, hi = 2.0 : f32, lo = -2.0 : f32, normalize = false}, role = "lhs", site = "s"} : (tensor<4x8xf32>) -> ()
  return
}

// -----

// CHECK-LABEL: func.func @lower_hist_normalized(
// CHECK-SAME:      -> (tensor<32xf32> {opscope.pack = [{length = 32 : i64, numel = 32 : i64, offset = 0 : i64, role = "lhs", site = "s", stat = "hist"}]})
// CHECK:       call @[[KERNEL:opscope_stats_[0-9a-z]+_[0-9a-f]+]](
// CHECK:       func.func private @[[KERNEL]](%{{.+}}: tensor<4x8xf32>) -> tensor<32xf32>
// CHECK:       linalg.generic {{.*}}iterator_types = [{{"[a-z]+", "[a-z]+", "[a-z]+"}}]
// CHECK:       linalg.index
func.func @lower_hist_normalized(%x: tensor<4x8xf32>) {
  "opscope.stat"(%x) {kind = "hist", options = {bins = 32 : i64, hi = 1.0 : f32, lo = -1.0 : f32, normalize = true}, role = "lhs", site = "s"} : (tensor<4x8xf32>) -> ()
  return
}

// -----

// elemsig gathers 16 evenly spaced elements with tensor.extract.

// CHECK-LABEL: func.func @lower_elemsig(
// CHECK-SAME:      -> (tensor<16xf32> {opscope.pack = [{length = 16 : i64, numel = 32 : i64, offset = 0 : i64, role = "lhs", site = "s", stat = "elemsig"}]})
// CHECK:       call @[[KERNEL:opscope_stats_[0-9a-z]+_[0-9a-f]+]](
// CHECK:       func.func private @[[KERNEL]](%{{.+}}: tensor<4x8xf32>) -> tensor<16xf32>
// CHECK:       linalg.generic {{.*}}iterator_types = ["parallel", "parallel"]} outs(%{{.+}} : tensor<1x16xf32>)
// CHECK:       tensor.extract %
func.func @lower_elemsig(%x: tensor<4x8xf32>) {
  "opscope.stat"(%x) {kind = "elemsig", options = {}, role = "lhs", site = "s"} : (tensor<4x8xf32>) -> ()
  return
}

// -----

// A tensor of fewer than 16 elements gives all of them.

// CHECK-LABEL: func.func @lower_elemsig_of_small_tensor(
// CHECK-SAME:      -> (tensor<6xf32> {opscope.pack = [{length = 6 : i64, numel = 6 : i64, offset = 0 : i64, role = "lhs", site = "s", stat = "elemsig"}]})
// CHECK:       call @[[KERNEL:opscope_stats_[0-9a-z]+_[0-9a-f]+]](
// CHECK:       func.func private @[[KERNEL]](%{{.+}}: tensor<2x3xf32>) -> tensor<6xf32>
// CHECK:       tensor.extract %
func.func @lower_elemsig_of_small_tensor(%x: tensor<2x3xf32>) {
  "opscope.stat"(%x) {kind = "elemsig", options = {}, role = "lhs", site = "s"} : (tensor<2x3xf32>) -> ()
  return
}

// -----

// One max|x| per channel (last axis): C = 8 values.

// CHECK-LABEL: func.func @lower_chan_maxabs(
// CHECK-SAME:      -> (tensor<8xf32> {opscope.pack = [{length = 8 : i64, numel = 32 : i64, offset = 0 : i64, role = "lhs", site = "s", stat = "chan_maxabs"}]})
// CHECK:       call @[[KERNEL:opscope_stats_[0-9a-z]+_[0-9a-f]+]](
// CHECK:       func.func private @[[KERNEL]](%{{.+}}: tensor<4x8xf32>) -> tensor<8xf32>
// CHECK:       linalg.generic {{.*}}"reduction"
// CHECK:       math.absf
func.func @lower_chan_maxabs(%x: tensor<4x8xf32>) {
  "opscope.stat"(%x) {kind = "chan_maxabs", options = {}, role = "lhs", site = "s"} : (tensor<4x8xf32>) -> ()
  return
}

// -----

// max over channels of max|x|, divided by their mean.

// CHECK-LABEL: func.func @lower_chan_outlier(
// CHECK-SAME:      -> (tensor<1xf32> {opscope.pack = [{length = 1 : i64, numel = 32 : i64, offset = 0 : i64, role = "lhs", site = "s", stat = "chan_outlier"}]})
// CHECK:       call @[[KERNEL:opscope_stats_[0-9a-z]+_[0-9a-f]+]](
// CHECK:       func.func private @[[KERNEL]](%{{.+}}: tensor<4x8xf32>) -> tensor<1xf32>
// CHECK:       math.absf
// CHECK:       arith.divf
func.func @lower_chan_outlier(%x: tensor<4x8xf32>) {
  "opscope.stat"(%x) {kind = "chan_outlier", options = {}, role = "lhs", site = "s"} : (tensor<4x8xf32>) -> ()
  return
}

// -----

// One sum of squares per position (row): R = 4 values.

// CHECK-LABEL: func.func @lower_pos_sumsq(
// CHECK-SAME:      -> (tensor<4xf32> {opscope.pack = [{length = 4 : i64, numel = 32 : i64, offset = 0 : i64, role = "lhs", site = "s", stat = "pos_sumsq"}]})
// CHECK:       call @[[KERNEL:opscope_stats_[0-9a-z]+_[0-9a-f]+]](
// CHECK:       func.func private @[[KERNEL]](%{{.+}}: tensor<4x8xf32>) -> tensor<4xf32>
// CHECK:       linalg.generic {{.*}}"reduction"
// CHECK:       arith.mulf
func.func @lower_pos_sumsq(%x: tensor<4x8xf32>) {
  "opscope.stat"(%x) {kind = "pos_sumsq", options = {}, role = "lhs", site = "s"} : (tensor<4x8xf32>) -> ()
  return
}

// -----

// One squared distance per pair of adjacent rows: R - 1 = 3 values.

// CHECK-LABEL: func.func @lower_adj_sumsq(
// CHECK-SAME:      -> (tensor<3xf32> {opscope.pack = [{length = 3 : i64, numel = 32 : i64, offset = 0 : i64, role = "lhs", site = "s", stat = "adj_sumsq"}]})
// CHECK:       call @[[KERNEL:opscope_stats_[0-9a-z]+_[0-9a-f]+]](
// CHECK:       func.func private @[[KERNEL]](%{{.+}}: tensor<4x8xf32>) -> tensor<3xf32>
// CHECK:       linalg.generic {{.*}}"reduction"
// CHECK:       arith.subf
func.func @lower_adj_sumsq(%x: tensor<4x8xf32>) {
  "opscope.stat"(%x) {kind = "adj_sumsq", options = {}, role = "lhs", site = "s"} : (tensor<4x8xf32>) -> ()
  return
}

// -----

// A rank-3 tensor is viewed as rows [2*3, 4]: pos_sumsq has 6 values.

// CHECK-LABEL: func.func @lower_rank3_views_leading_dims_as_rows(
// CHECK-SAME:      -> (tensor<6xf32> {opscope.pack = [{length = 6 : i64, numel = 24 : i64, offset = 0 : i64, role = "lhs", site = "s", stat = "pos_sumsq"}]})
// CHECK:       call @[[KERNEL:opscope_stats_[0-9a-z]+_[0-9a-f]+]](
// CHECK:       func.func private @[[KERNEL]](%{{.+}}: tensor<2x3x4xf32>) -> tensor<6xf32>
// CHECK:       tensor.collapse_shape
func.func @lower_rank3_views_leading_dims_as_rows(%x: tensor<2x3x4xf32>) {
  "opscope.stat"(%x) {kind = "pos_sumsq", options = {}, role = "lhs", site = "s"} : (tensor<2x3x4xf32>) -> ()
  return
}

// -----

// Low-precision tensors are widened to f32 before any arithmetic.

// CHECK-LABEL: func.func @lower_f16_widens_to_f32(
// CHECK-SAME:      -> (tensor<1xf32> {opscope.pack = [{length = 1 : i64, numel = 32 : i64, offset = 0 : i64, role = "lhs", site = "s", stat = "sumsq"}]})
// CHECK:       call @[[KERNEL:opscope_stats_[0-9a-z]+_[0-9a-f]+]](
// CHECK:       func.func private @[[KERNEL]](%{{.+}}: tensor<4x8xf16>) -> tensor<1xf32>
// CHECK:       arith.extf %{{.+}} : f16 to f32
func.func @lower_f16_widens_to_f32(%x: tensor<4x8xf16>) {
  "opscope.stat"(%x) {kind = "sumsq", options = {}, role = "lhs", site = "s"} : (tensor<4x8xf16>) -> ()
  return
}

// -----

// CHECK-LABEL: func.func @lower_bf16_widens_to_f32(
// CHECK-SAME:      -> (tensor<1xf32> {opscope.pack = [{length = 1 : i64, numel = 32 : i64, offset = 0 : i64, role = "lhs", site = "s", stat = "sumsq"}]})
// CHECK:       call @[[KERNEL:opscope_stats_[0-9a-z]+_[0-9a-f]+]](
// CHECK:       func.func private @[[KERNEL]](%{{.+}}: tensor<4x8xbf16>) -> tensor<1xf32>
// CHECK:       arith.extf %{{.+}} : bf16 to f32
func.func @lower_bf16_widens_to_f32(%x: tensor<4x8xbf16>) {
  "opscope.stat"(%x) {kind = "sumsq", options = {}, role = "lhs", site = "s"} : (tensor<4x8xbf16>) -> ()
  return
}

// -----

// CHECK-LABEL: func.func @lower_rank1_tensor(
// CHECK-SAME:      -> (tensor<1xf32> {opscope.pack = [{length = 1 : i64, numel = 8 : i64, offset = 0 : i64, role = "lhs", site = "s", stat = "max"}]})
// CHECK:       call @[[KERNEL:opscope_stats_[0-9a-z]+_[0-9a-f]+]](
// CHECK:       func.func private @[[KERNEL]](%{{.+}}: tensor<8xf32>) -> tensor<1xf32>
// CHECK:       arith.max
func.func @lower_rank1_tensor(%x: tensor<8xf32>) {
  "opscope.stat"(%x) {kind = "max", options = {}, role = "lhs", site = "s"} : (tensor<8xf32>) -> ()
  return
}

// -----

// The 13 kinds of one tensor share one kernel and one packed result, laid out in the
// order of the ops.

// CHECK-LABEL: func.func @lower_all_kinds_into_one_packed_result(
// CHECK-SAME:      -> (tensor<47xf32> {opscope.pack = [{length = 1 : i64, numel = 32 : i64, offset = 0 : i64, role = "lhs", site = "s", stat = "min"}, {length = 1 : i64, numel = 32 : i64, offset = 1 : i64, role = "lhs", site = "s", stat = "max"}, {length = 1 : i64, numel = 32 : i64, offset = 2 : i64, role = "lhs", site = "s", stat = "mean"}, {length = 1 : i64, numel = 32 : i64, offset = 3 : i64, role = "lhs", site = "s", stat = "l1"}, {length = 1 : i64, numel = 32 : i64, offset = 4 : i64, role = "lhs", site = "s", stat = "sumsq"}, {length = 1 : i64, numel = 32 : i64, offset = 5 : i64, role = "lhs", site = "s", stat = "nnz"}, {length = 1 : i64, numel = 32 : i64, offset = 6 : i64, role = "lhs", site = "s", stat = "kurtosis"}, {length = 8 : i64, numel = 32 : i64, offset = 7 : i64, role = "lhs", site = "s", stat = "hist"}, {length = 16 : i64, numel = 32 : i64, offset = 15 : i64, role = "lhs", site = "s", stat = "elemsig"}, {length = 8 : i64, numel = 32 : i64, offset = 31 : i64, role = "lhs", site = "s", stat = "chan_maxabs"}, {length = 1 : i64, numel = 32 : i64, offset = 39 : i64, role = "lhs", site = "s", stat = "chan_outlier"}, {length = 4 : i64, numel = 32 : i64, offset = 40 : i64, role = "lhs", site = "s", stat = "pos_sumsq"}, {length = 3 : i64, numel = 32 : i64, offset = 44 : i64, role = "lhs", site = "s", stat = "adj_sumsq"}]})
// CHECK-COUNT-1: call @opscope_stats_4x8xf32_
// CHECK-NOT:   call @
// CHECK:       return %{{.+}} : tensor<47xf32>
// CHECK:       func.func private @opscope_stats_4x8xf32_{{[0-9a-f]+}}(%{{.+}}: tensor<4x8xf32>) -> tensor<47xf32>
// CHECK-NOT:   func.func private
func.func @lower_all_kinds_into_one_packed_result(%x: tensor<4x8xf32>) {
  "opscope.stat"(%x) {kind = "min", options = {}, role = "lhs", site = "s"} : (tensor<4x8xf32>) -> ()
  "opscope.stat"(%x) {kind = "max", options = {}, role = "lhs", site = "s"} : (tensor<4x8xf32>) -> ()
  "opscope.stat"(%x) {kind = "mean", options = {}, role = "lhs", site = "s"} : (tensor<4x8xf32>) -> ()
  "opscope.stat"(%x) {kind = "l1", options = {}, role = "lhs", site = "s"} : (tensor<4x8xf32>) -> ()
  "opscope.stat"(%x) {kind = "sumsq", options = {}, role = "lhs", site = "s"} : (tensor<4x8xf32>) -> ()
  "opscope.stat"(%x) {kind = "nnz", options = {}, role = "lhs", site = "s"} : (tensor<4x8xf32>) -> ()
  "opscope.stat"(%x) {kind = "kurtosis", options = {}, role = "lhs", site = "s"} : (tensor<4x8xf32>) -> ()
  "opscope.stat"(%x) {kind = "hist", options = {bins = 8 : i64, hi = 1.0 : f32, lo = -1.0 : f32, normalize = true}, role = "lhs", site = "s"} : (tensor<4x8xf32>) -> ()
  "opscope.stat"(%x) {kind = "elemsig", options = {}, role = "lhs", site = "s"} : (tensor<4x8xf32>) -> ()
  "opscope.stat"(%x) {kind = "chan_maxabs", options = {}, role = "lhs", site = "s"} : (tensor<4x8xf32>) -> ()
  "opscope.stat"(%x) {kind = "chan_outlier", options = {}, role = "lhs", site = "s"} : (tensor<4x8xf32>) -> ()
  "opscope.stat"(%x) {kind = "pos_sumsq", options = {}, role = "lhs", site = "s"} : (tensor<4x8xf32>) -> ()
  "opscope.stat"(%x) {kind = "adj_sumsq", options = {}, role = "lhs", site = "s"} : (tensor<4x8xf32>) -> ()
  return
}
