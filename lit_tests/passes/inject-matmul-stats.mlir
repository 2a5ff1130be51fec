// RUN: opscope-opt %s -p inject-matmul-stats --split-input-file | filecheck %s
// RUN: opscope-opt %s -p 'inject-matmul-stats{hist-bins=0}' --split-input-file | filecheck %s --check-prefix=NOHIST
// RUN: opscope-opt %s -p 'inject-matmul-stats{per-channel=false}' --split-input-file | filecheck %s --check-prefix=NOCHAN
// RUN: opscope-opt %s -p 'inject-matmul-stats{per-position=false}' --split-input-file | filecheck %s --check-prefix=NOPOS
// RUN: opscope-opt %s -p 'inject-matmul-stats{adjacency=false}' --split-input-file | filecheck %s --check-prefix=NOADJ
// RUN: opscope-opt %s -p 'inject-matmul-stats{sites=attn}' --split-input-file | filecheck %s --check-prefix=SITES
// RUN: opscope-opt %s -p 'inject-matmul-stats{hist-normalize=false hist-min=-2.5 hist-max=4.0}' --split-input-file | filecheck %s --check-prefix=FIXED
// RUN: opscope-opt %s -p inject-matmul-stats --split-input-file -o %t 2>&1 | filecheck %s --check-prefix=WARN
// RUN: opscope-opt %s -p 'inject-matmul-stats{roles=lhs hist-bins=0 per-channel=false per-position=false adjacency=false}' --split-input-file | filecheck %s --check-prefix=LIVE
// RUN: opscope-opt %s -p 'inject-matmul-stats{roles="out,lhs"}' --split-input-file | filecheck %s --check-prefix=ROLES

// The 13 sketches of a 2-D tensor, in the reference's order, for lhs, then rhs, then out,
// right after the matmul; the site is named by the location; the function records its
// site table with flops = 2*batch*M*K*N.

// CHECK-LABEL: func.func @taps_lhs_rhs_out_of_matmul(
// CHECK-SAME:      %[[A:.+]]: tensor<4x8xf32>, %[[B:.+]]: tensor<8x3xf32>) -> tensor<4x3xf32>
// CHECK-SAME:      attributes {opscope.sites = [{batch = 1 : i64, flops = 192 : i64, k = 8 : i64, kind = "matmul", m = 4 : i64, n = 3 : i64, name = "fc1"}]}
// CHECK-NOT:   opscope.stat
// CHECK:       %[[OUT:.+]] = linalg.matmul ins(%[[A]], %[[B]] :
// CHECK-NEXT:  "opscope.stat"(%[[A]]) {kind = "min", options = {}, role = "lhs", site = "fc1"} : (tensor<4x8xf32>) -> ()
// CHECK-NEXT:  "opscope.stat"(%[[A]]) {kind = "max", options = {}, role = "lhs", site = "fc1"}
// CHECK-NEXT:  "opscope.stat"(%[[A]]) {kind = "mean", options = {}, role = "lhs", site = "fc1"}
// CHECK-NEXT:  "opscope.stat"(%[[A]]) {kind = "l1", options = {}, role = "lhs", site = "fc1"}
// CHECK-NEXT:  "opscope.stat"(%[[A]]) {kind = "sumsq", options = {}, role = "lhs", site = "fc1"}
// CHECK-NEXT:  "opscope.stat"(%[[A]]) {kind = "nnz", options = {}, role = "lhs", site = "fc1"}
// CHECK-NEXT:  "opscope.stat"(%[[A]]) {kind = "kurtosis", options = {}, role = "lhs", site = "fc1"}
// CHECK-NEXT:  "opscope.stat"(%[[A]]) {kind = "hist", options = {bins = 32 : i64, hi = 1.000000e+00 : f32, lo = -1.000000e+00 : f32, normalize = true}, role = "lhs", site = "fc1"}
// CHECK-NEXT:  "opscope.stat"(%[[A]]) {kind = "elemsig", options = {}, role = "lhs", site = "fc1"}
// CHECK-NEXT:  "opscope.stat"(%[[A]]) {kind = "chan_maxabs", options = {}, role = "lhs", site = "fc1"}
// CHECK-NEXT:  "opscope.stat"(%[[A]]) {kind = "chan_outlier", options = {}, role = "lhs", site = "fc1"}
// CHECK-NEXT:  "opscope.stat"(%[[A]]) {kind = "pos_sumsq", options = {}, role = "lhs", site = "fc1"}
// CHECK-NEXT:  "opscope.stat"(%[[A]]) {kind = "adj_sumsq", options = {}, role = "lhs", site = "fc1"}
// CHECK-NEXT:  "opscope.stat"(%[[B]]) {kind = "min", options = {}, role = "rhs", site = "fc1"} : (tensor<8x3xf32>) -> ()
// CHECK-COUNT-11: "opscope.stat"(%[[B]])
// CHECK-NEXT:  "opscope.stat"(%[[B]]) {kind = "adj_sumsq", options = {}, role = "rhs", site = "fc1"}
// CHECK-NEXT:  "opscope.stat"(%[[OUT]]) {kind = "min", options = {}, role = "out", site = "fc1"} : (tensor<4x3xf32>) -> ()
// CHECK-COUNT-11: "opscope.stat"(%[[OUT]])
// CHECK-NEXT:  "opscope.stat"(%[[OUT]]) {kind = "adj_sumsq", options = {}, role = "out", site = "fc1"}
// CHECK-NEXT:  return %[[OUT]] : tensor<4x3xf32>

// NOHIST-LABEL: func.func @taps_lhs_rhs_out_of_matmul(
// NOHIST:       {kind = "kurtosis", options = {}, role = "lhs"
// NOHIST-NEXT:  {kind = "elemsig", options = {}, role = "lhs"
// NOCHAN-LABEL: func.func @taps_lhs_rhs_out_of_matmul(
// NOCHAN:       {kind = "elemsig", options = {}, role = "lhs"
// NOCHAN-NEXT:  {kind = "pos_sumsq", options = {}, role = "lhs"
// NOPOS-LABEL:  func.func @taps_lhs_rhs_out_of_matmul(
// NOPOS:        {kind = "chan_outlier", options = {}, role = "lhs"
// NOPOS-NEXT:   {kind = "adj_sumsq", options = {}, role = "lhs"
// NOADJ-LABEL:  func.func @taps_lhs_rhs_out_of_matmul(
// NOADJ:        {kind = "pos_sumsq", options = {}, role = "lhs"
// NOADJ-NEXT:   {kind = "min", options = {}, role = "rhs"
// FIXED-LABEL:  func.func @taps_lhs_rhs_out_of_matmul(
// FIXED:        {kind = "hist", options = {bins = 32 : i64, hi = 4.000000e+00 : f32, lo = -2.500000e+00 : f32, normalize = false}, role = "lhs"
// SITES-LABEL:  func.func @taps_lhs_rhs_out_of_matmul(
// SITES-NOT:    opscope
// The live sampler's set (StatConfig.live()): the seven scalars and elemsig of the lhs only.
// LIVE-LABEL:   func.func @taps_lhs_rhs_out_of_matmul(
// LIVE:         linalg.matmul
// LIVE-NEXT:    {kind = "min", options = {}, role = "lhs"
// LIVE-NEXT:    {kind = "max", options = {}, role = "lhs"
// LIVE-NEXT:    {kind = "mean", options = {}, role = "lhs"
// LIVE-NEXT:    {kind = "l1", options = {}, role = "lhs"
// LIVE-NEXT:    {kind = "sumsq", options = {}, role = "lhs"
// LIVE-NEXT:    {kind = "nnz", options = {}, role = "lhs"
// LIVE-NEXT:    {kind = "kurtosis", options = {}, role = "lhs"
// LIVE-NEXT:    {kind = "elemsig", options = {}, role = "lhs"
// LIVE-NEXT:    return
// Roles in the order given.
// ROLES-LABEL:  func.func @taps_lhs_rhs_out_of_matmul(
// ROLES:        linalg.matmul
// ROLES-NEXT:   {kind = "min", options = {}, role = "out"
// ROLES-NOT:    role = "rhs"
// ROLES:        {kind = "adj_sumsq", options = {}, role = "out"
// ROLES-NEXT:   {kind = "min", options = {}, role = "lhs"
// ROLES-NOT:    role = "rhs"
// ROLES:        return
func.func @taps_lhs_rhs_out_of_matmul(%a: tensor<4x8xf32>, %b: tensor<8x3xf32>) -> tensor<4x3xf32> {
  %zero = arith.constant 0.0 : f32
  %empty = tensor.empty() : tensor<4x3xf32>
  %init = linalg.fill ins(%zero : f32) outs(%empty : tensor<4x3xf32>) -> tensor<4x3xf32>
  %0 = linalg.matmul ins(%a, %b : tensor<4x8xf32>, tensor<8x3xf32>) outs(%init : tensor<4x3xf32>) -> tensor<4x3xf32> loc("fc1")
  return %0 : tensor<4x3xf32>
}

// -----

// CHECK-LABEL: func.func @site_name_falls_back_to_kind_ordinal(
// CHECK-SAME:      name = "matmul#0"
// CHECK:       linalg.matmul
// CHECK-NEXT:  "opscope.stat"({{.+}}) {kind = "min", options = {}, role = "lhs", site = "matmul#0"}
// SITES-LABEL: func.func @site_name_falls_back_to_kind_ordinal(
// SITES-NOT:   opscope
func.func @site_name_falls_back_to_kind_ordinal(%a: tensor<4x8xf32>, %b: tensor<8x3xf32>, %c: tensor<4x3xf32>) -> tensor<4x3xf32> {
  %0 = linalg.matmul ins(%a, %b : tensor<4x8xf32>, tensor<8x3xf32>) outs(%c : tensor<4x3xf32>) -> tensor<4x3xf32>
  return %0 : tensor<4x3xf32>
}

// -----

// NameLoc inside a FusedLoc or a CallSiteLoc names the site; a name seen twice gets
// `#1`; the ordinal of an unnamed site counts every site of its kind before it.

// CHECK-LABEL: func.func @site_names_from_fused_callsite_and_ordinal(
// CHECK-SAME:      name = "block.fc2"
// CHECK-SAME:      name = "block.fc2#1"
// CHECK-SAME:      name = "matmul#2"
// CHECK:       site = "block.fc2"}
// CHECK:       site = "block.fc2#1"}
// CHECK:       site = "matmul#2"}
func.func @site_names_from_fused_callsite_and_ordinal(%a: tensor<4x8xf32>, %b: tensor<8x3xf32>, %c: tensor<4x3xf32>) -> tensor<4x3xf32> {
  %0 = linalg.matmul ins(%a, %b : tensor<4x8xf32>, tensor<8x3xf32>) outs(%c : tensor<4x3xf32>) -> tensor<4x3xf32> loc(fused["block.fc2", "model.py":7:1])
  %1 = linalg.matmul ins(%a, %b : tensor<4x8xf32>, tensor<8x3xf32>) outs(%0 : tensor<4x3xf32>) -> tensor<4x3xf32> loc(callsite("block.fc2" at "model.py":8:1))
  %2 = linalg.matmul ins(%a, %b : tensor<4x8xf32>, tensor<8x3xf32>) outs(%1 : tensor<4x3xf32>) -> tensor<4x3xf32>
  return %2 : tensor<4x3xf32>
}

// -----

// CHECK-LABEL: func.func @transposed_rhs_matmul_is_a_site(
// CHECK-SAME:      %[[A:.+]]: tensor<4x8xf32>, %[[BT:.+]]: tensor<3x8xf32>,
// CHECK-SAME:      {batch = 1 : i64, flops = 192 : i64, k = 8 : i64, kind = "matmul", m = 4 : i64, n = 3 : i64, name = "matmul#0"}
// CHECK:       linalg.matmul indexing_maps
// CHECK:       "opscope.stat"(%[[BT]]) {kind = "min", options = {}, role = "rhs", site = "matmul#0"} : (tensor<3x8xf32>) -> ()
#lhs = affine_map<(m, n, k) -> (m, k)>
#rhs_t = affine_map<(m, n, k) -> (n, k)>
#out = affine_map<(m, n, k) -> (m, n)>
func.func @transposed_rhs_matmul_is_a_site(%a: tensor<4x8xf32>, %bt: tensor<3x8xf32>, %c: tensor<4x3xf32>) -> tensor<4x3xf32> {
  %0 = linalg.matmul indexing_maps = [#lhs, #rhs_t, #out]
      ins(%a, %bt : tensor<4x8xf32>, tensor<3x8xf32>) outs(%c : tensor<4x3xf32>) -> tensor<4x3xf32>
  return %0 : tensor<4x3xf32>
}

// -----

// A rank-3 tensor gets per-channel and per-position sketches, never adj_sumsq.

// CHECK-LABEL: func.func @batch_matmul_site(
// CHECK-SAME:      {batch = 2 : i64, flops = 384 : i64, k = 8 : i64, kind = "batch_matmul", m = 4 : i64, n = 3 : i64, name = "batch_matmul#0"}
// CHECK:       %[[OUT:.+]] = linalg.batch_matmul
// CHECK-NOT:   adj_sumsq
// CHECK:       {kind = "pos_sumsq", options = {}, role = "lhs", site = "batch_matmul#0"} : (tensor<2x4x8xf32>) -> ()
// CHECK-NEXT:  {kind = "min", options = {}, role = "rhs"
// CHECK-NOT:   adj_sumsq
// CHECK:       "opscope.stat"(%[[OUT]]) {kind = "pos_sumsq", options = {}, role = "out", site = "batch_matmul#0"} : (tensor<2x4x3xf32>) -> ()
// CHECK-NEXT:  return %[[OUT]]
func.func @batch_matmul_site(%a: tensor<2x4x8xf32>, %b: tensor<2x8x3xf32>, %c: tensor<2x4x3xf32>) -> tensor<2x4x3xf32> {
  %0 = linalg.batch_matmul ins(%a, %b : tensor<2x4x8xf32>, tensor<2x8x3xf32>) outs(%c : tensor<2x4x3xf32>) -> tensor<2x4x3xf32>
  return %0 : tensor<2x4x3xf32>
}

// -----

// CHECK-LABEL: func.func @generic_contraction_site(
// CHECK-SAME:      {batch = 1 : i64, flops = 192 : i64, k = 8 : i64, kind = "generic", m = 4 : i64, n = 3 : i64, name = "generic#0"}
// CHECK:       %[[OUT:.+]] = linalg.generic
// CHECK:       linalg.yield
// CHECK:       "opscope.stat"(%{{.+}}) {kind = "min", options = {}, role = "lhs", site = "generic#0"}
// CHECK:       "opscope.stat"(%[[OUT]]) {kind = "adj_sumsq", options = {}, role = "out", site = "generic#0"}
func.func @generic_contraction_site(%a: tensor<4x8xf32>, %b: tensor<8x3xf32>, %c: tensor<4x3xf32>) -> tensor<4x3xf32> {
  %0 = linalg.generic {
      indexing_maps = [affine_map<(m, n, k) -> (m, k)>, affine_map<(m, n, k) -> (k, n)>, affine_map<(m, n, k) -> (m, n)>],
      iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%a, %b : tensor<4x8xf32>, tensor<8x3xf32>) outs(%c : tensor<4x3xf32>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %p = arith.mulf %x, %y : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  } -> tensor<4x3xf32>
  return %0 : tensor<4x3xf32>
}

// -----

// CHECK-LABEL: func.func @linalg_contract_site(
// CHECK-SAME:      {batch = 1 : i64, flops = 192 : i64, k = 8 : i64, kind = "contract", m = 4 : i64, n = 3 : i64, name = "contract#0"}
// CHECK:       linalg.contract
// CHECK-NEXT:  {kind = "min", options = {}, role = "lhs", site = "contract#0"}
func.func @linalg_contract_site(%a: tensor<4x8xf32>, %b: tensor<8x3xf32>, %c: tensor<4x3xf32>) -> tensor<4x3xf32> {
  %0 = linalg.contract
      indexing_maps = [affine_map<(m, n, k) -> (m, k)>, affine_map<(m, n, k) -> (k, n)>, affine_map<(m, n, k) -> (m, n)>]
      ins(%a, %b : tensor<4x8xf32>, tensor<8x3xf32>) outs(%c : tensor<4x3xf32>) -> tensor<4x3xf32>
  return %0 : tensor<4x3xf32>
}

// -----

// StableHLO is matched directly (batch dims from the dimension numbers); it prints in
// its pretty form.

// CHECK-LABEL: func.func @stablehlo_dot_general_site(
// CHECK-SAME:      {batch = 2 : i64, flops = 384 : i64, k = 8 : i64, kind = "dot_general", m = 4 : i64, n = 3 : i64, name = "attn.scores"}
// CHECK:       %[[OUT:.+]] = stablehlo.dot_general %{{.+}}, %{{.+}}, batching_dims = [0] x [0], contracting_dims = [2] x [1]
// CHECK-NEXT:  {kind = "min", options = {}, role = "lhs", site = "attn.scores"} : (tensor<2x4x8xf32>) -> ()
// CHECK:       "opscope.stat"(%[[OUT]]) {kind = "pos_sumsq", options = {}, role = "out", site = "attn.scores"} : (tensor<2x4x3xf32>) -> ()
// CHECK-NEXT:  return %[[OUT]]
// SITES-LABEL: func.func @stablehlo_dot_general_site(
// SITES-SAME:      name = "attn.scores"
// SITES:       {kind = "min", options = {}, role = "lhs", site = "attn.scores"}
func.func @stablehlo_dot_general_site(%a: tensor<2x4x8xf32>, %b: tensor<2x8x3xf32>) -> tensor<2x4x3xf32> {
  %0 = "stablehlo.dot_general"(%a, %b) {
      dot_dimension_numbers = #stablehlo.dot<lhs_batching_dimensions = [0], rhs_batching_dimensions = [0],
                                             lhs_contracting_dimensions = [2], rhs_contracting_dimensions = [1]>
  } : (tensor<2x4x8xf32>, tensor<2x8x3xf32>) -> tensor<2x4x3xf32> loc("attn.scores")
  return %0 : tensor<2x4x3xf32>
}

// -----

// Low-precision inputs are tapped as they are (the kernels widen to f32).

// CHECK-LABEL: func.func @taps_bf16_matmul_with_f32_accumulator(
// CHECK:       {kind = "min", options = {}, role = "lhs", site = "matmul#0"} : (tensor<4x8xbf16>) -> ()
// CHECK:       {kind = "min", options = {}, role = "rhs", site = "matmul#0"} : (tensor<8x3xf16>) -> ()
// CHECK:       {kind = "min", options = {}, role = "out", site = "matmul#0"} : (tensor<4x3xf32>) -> ()
func.func @taps_bf16_matmul_with_f32_accumulator(%a: tensor<4x8xbf16>, %b: tensor<8x3xf16>, %c: tensor<4x3xf32>) -> tensor<4x3xf32> {
  %0 = linalg.matmul ins(%a, %b : tensor<4x8xbf16>, tensor<8x3xf16>) outs(%c : tensor<4x3xf32>) -> tensor<4x3xf32>
  return %0 : tensor<4x3xf32>
}

// -----

// An integer matmul of integer arguments has no float tensor behind it: each role is
// sketched as f32 of its integers (lhs, rhs, then out), each named in a warning
// (cases/integer-sites.mlir: the float tensors behind a quantized site).

// CHECK-LABEL: func.func @integer_matmul_read_as_f32(
// CHECK:       %[[ACC:.+]] = linalg.matmul
// CHECK:       linalg.generic {{.+}} ins(%{{.+}} : tensor<4x8xi8>) outs(%{{.+}} : tensor<4x8xf32>)
// CHECK:       {kind = "min", options = {}, role = "lhs", site = "matmul#0"} : (tensor<4x8xf32>) -> ()
// CHECK:       linalg.generic {{.+}} ins(%{{.+}} : tensor<8x3xi8>) outs(%{{.+}} : tensor<8x3xf32>)
// CHECK:       {kind = "min", options = {}, role = "rhs", site = "matmul#0"} : (tensor<8x3xf32>) -> ()
// CHECK:       linalg.generic {{.+}} ins(%[[ACC]] : tensor<4x3xi32>) outs(%{{.+}} : tensor<4x3xf32>)
// CHECK:       {kind = "min", options = {}, role = "out", site = "matmul#0"} : (tensor<4x3xf32>) -> ()
// CHECK:       return %[[ACC]]
// WARN: warning: inject-matmul-stats: integer site 'matmul#0' (i8, i8, i32) at {{.+}}: lhs: f32 of its integers (no float source)
func.func @integer_matmul_read_as_f32(%a: tensor<4x8xi8>, %b: tensor<8x3xi8>, %c: tensor<4x3xi32>) -> tensor<4x3xi32> {
  %0 = linalg.matmul ins(%a, %b : tensor<4x8xi8>, tensor<8x3xi8>) outs(%c : tensor<4x3xi32>) -> tensor<4x3xi32>
  return %0 : tensor<4x3xi32>
}

// -----

// A rank-1 operand (here a matvec's vector and output) gets the 9 sketches that need no
// channel axis: no chan_maxabs, chan_outlier, pos_sumsq or adj_sumsq.

// CHECK-LABEL: func.func @rank1_operands_get_no_channel_sketches(
// CHECK-SAME:      %[[M:.+]]: tensor<4x8xf32>, %[[V:.+]]: tensor<8xf32>,
// CHECK-SAME:      {batch = 1 : i64, flops = 64 : i64, k = 8 : i64, kind = "generic", m = 4 : i64, n = 1 : i64, name = "generic#0"}
// CHECK:       {kind = "adj_sumsq", options = {}, role = "lhs"
// CHECK-NEXT:  "opscope.stat"(%[[V]]) {kind = "min", options = {}, role = "rhs", site = "generic#0"} : (tensor<8xf32>) -> ()
// CHECK:       "opscope.stat"(%[[V]]) {kind = "hist"
// CHECK-NEXT:  "opscope.stat"(%[[V]]) {kind = "elemsig", options = {}, role = "rhs"
// CHECK-NEXT:  {kind = "min", options = {}, role = "out", site = "generic#0"} : (tensor<4xf32>) -> ()
// CHECK:       {kind = "elemsig", options = {}, role = "out", site = "generic#0"} : (tensor<4xf32>) -> ()
// CHECK-NEXT:  return
func.func @rank1_operands_get_no_channel_sketches(%m: tensor<4x8xf32>, %v: tensor<8xf32>, %c: tensor<4xf32>) -> tensor<4xf32> {
  %0 = linalg.generic {
      indexing_maps = [affine_map<(i, k) -> (i, k)>, affine_map<(i, k) -> (k)>, affine_map<(i, k) -> (i)>],
      iterator_types = ["parallel", "reduction"]}
      ins(%m, %v : tensor<4x8xf32>, tensor<8xf32>) outs(%c : tensor<4xf32>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %p = arith.mulf %x, %y : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  } -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// Named contractions without an `indexing_maps` attribute (linalg.matvec) are sites too.

// CHECK-LABEL: func.func @linalg_matvec_site(
// CHECK-SAME:      {batch = 1 : i64, flops = 64 : i64, k = 8 : i64, kind = "matvec", m = 4 : i64, n = 1 : i64, name = "matvec#0"}
// CHECK:       linalg.matvec
// CHECK:       {kind = "elemsig", options = {}, role = "rhs", site = "matvec#0"} : (tensor<8xf32>) -> ()
// CHECK-NEXT:  {kind = "min", options = {}, role = "out", site = "matvec#0"} : (tensor<4xf32>) -> ()
func.func @linalg_matvec_site(%m: tensor<4x8xf32>, %v: tensor<8xf32>, %c: tensor<4xf32>) -> tensor<4xf32> {
  %0 = linalg.matvec ins(%m, %v : tensor<4x8xf32>, tensor<8xf32>) outs(%c : tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// A 1-row tensor has no adjacent rows: no adj_sumsq.

// CHECK-LABEL: func.func @single_row_lhs_gets_no_adjacency(
// CHECK:       {kind = "pos_sumsq", options = {}, role = "lhs", site = "matmul#0"} : (tensor<1x8xf32>) -> ()
// CHECK-NEXT:  {kind = "min", options = {}, role = "rhs"
func.func @single_row_lhs_gets_no_adjacency(%a: tensor<1x8xf32>, %b: tensor<8x3xf32>, %c: tensor<1x3xf32>) -> tensor<1x3xf32> {
  %0 = linalg.matmul ins(%a, %b : tensor<1x8xf32>, tensor<8x3xf32>) outs(%c : tensor<1x3xf32>) -> tensor<1x3xf32>
  return %0 : tensor<1x3xf32>
}

// -----

// `sites=<regex>` keeps the sites whose name it finds (re.search); the site table lists
// only them.

// CHECK-LABEL: func.func @sites_regex_selects_by_name(
// CHECK-SAME:      name = "encoder.fc1"
// CHECK-SAME:      name = "encoder.attn.q"
// CHECK:       site = "encoder.fc1"
// CHECK:       site = "encoder.attn.q"
// SITES-LABEL: func.func @sites_regex_selects_by_name(
// SITES-SAME:      attributes {opscope.sites = [{batch = 1 : i64, flops = 192 : i64, k = 8 : i64, kind = "matmul", m = 4 : i64, n = 3 : i64, name = "encoder.attn.q"}]}
// SITES:       %[[FC1:.+]] = linalg.matmul
// SITES-NEXT:  %[[Q:.+]] = linalg.matmul
// SITES-NEXT:  "opscope.stat"(%{{.+}}) {kind = "min", options = {}, role = "lhs", site = "encoder.attn.q"}
// SITES-NOT:   site = "encoder.fc1"
func.func @sites_regex_selects_by_name(%a: tensor<4x8xf32>, %b: tensor<8x3xf32>, %c: tensor<4x3xf32>) -> (tensor<4x3xf32>, tensor<4x3xf32>) {
  %0 = linalg.matmul ins(%a, %b : tensor<4x8xf32>, tensor<8x3xf32>) outs(%c : tensor<4x3xf32>) -> tensor<4x3xf32> loc("encoder.fc1")
  %1 = linalg.matmul ins(%a, %b : tensor<4x8xf32>, tensor<8x3xf32>) outs(%c : tensor<4x3xf32>) -> tensor<4x3xf32> loc("encoder.attn.q")
  return %0, %1 : tensor<4x3xf32>, tensor<4x3xf32>
}

// -----

// CHECK-LABEL: func.func @no_sites_no_change(
// CHECK-NOT:   opscope
// CHECK:       return
func.func @no_sites_no_change(%a: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %0 = arith.addf %a, %a : tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}

// -----

// A convolution is a site as its im2col GEMM: M = N*OH*OW = 2*4*4, K = C*KH*KW = 3*3*3,
// N = F = 8. The input is tapped before its zero padding; the NCHW input and result have
// their channels at dim 1 and the FCHW filter at dim 0, which every stat op says
// (`channel_dims`), so per-channel statistics read channels and positions are pixels.

// CHECK-LABEL: func.func @taps_conv_input_filter_result_by_channel(
// CHECK-SAME:      %[[X:.+]]: tensor<2x3x4x4xf32>, %[[W:.+]]: tensor<8x3x3x3xf32>)
// CHECK-SAME:      attributes {opscope.sites = [{batch = 1 : i64, flops = 13824 : i64, k = 27 : i64, kind = "conv_2d_nchw_fchw", m = 32 : i64, n = 8 : i64, name = "conv1"}]}
// CHECK:       %[[OUT:.+]] = linalg.conv_2d_nchw_fchw
// CHECK-NEXT:  "opscope.stat"(%[[X]]) {kind = "min", options = {channel_dims = [1]}, role = "lhs", site = "conv1"} : (tensor<2x3x4x4xf32>) -> ()
// CHECK:       "opscope.stat"(%[[X]]) {kind = "hist", options = {bins = 32 : i64, channel_dims = [1], hi = 1.000000e+00 : f32, lo = -1.000000e+00 : f32, normalize = true}, role = "lhs", site = "conv1"}
// CHECK:       "opscope.stat"(%[[X]]) {kind = "pos_sumsq", options = {channel_dims = [1]}, role = "lhs", site = "conv1"}
// CHECK-NEXT:  "opscope.stat"(%[[W]]) {kind = "min", options = {channel_dims = [0]}, role = "rhs", site = "conv1"}
// CHECK:       "opscope.stat"(%[[OUT]]) {kind = "pos_sumsq", options = {channel_dims = [1]}, role = "out", site = "conv1"}
// CHECK-NOT:   adj_sumsq
// CHECK:       return %[[OUT]]
func.func @taps_conv_input_filter_result_by_channel(%x: tensor<2x3x4x4xf32>, %w: tensor<8x3x3x3xf32>) -> tensor<2x8x4x4xf32> {
  %zero = arith.constant 0.0 : f32
  %padded = tensor.pad %x low[0, 0, 1, 1] high[0, 0, 1, 1] {
  ^bb0(%i: index, %j: index, %k: index, %l: index):
    tensor.yield %zero : f32
  } : tensor<2x3x4x4xf32> to tensor<2x3x6x6xf32>
  %empty = tensor.empty() : tensor<2x8x4x4xf32>
  %init = linalg.fill ins(%zero : f32) outs(%empty : tensor<2x8x4x4xf32>) -> tensor<2x8x4x4xf32>
  %0 = linalg.conv_2d_nchw_fchw {dilations = dense<1> : tensor<2xi64>, strides = dense<1> : tensor<2xi64>} ins(%padded, %w : tensor<2x3x6x6xf32>, tensor<8x3x3x3xf32>) outs(%init : tensor<2x8x4x4xf32>) -> tensor<2x8x4x4xf32> loc("conv1")
  return %0 : tensor<2x8x4x4xf32>
}

// -----

// Channel-last layouts need nothing: an NHWC input, HWCF filter and NHWC result have their
// channels last already. A depthwise convolution is `batch` = C GEMMs of K = KH*KW, N = 1.

// CHECK-LABEL: func.func @channel_last_and_depthwise_convs(
// CHECK-SAME:      {batch = 1 : i64, flops = 6912 : i64, k = 27 : i64, kind = "conv_2d_nhwc_hwcf", m = 16 : i64, n = 8 : i64, name = "nhwc"}
// CHECK-SAME:      {batch = 8 : i64, flops = 1152 : i64, k = 9 : i64, kind = "depthwise_conv_2d_nhwc_hwc", m = 8 : i64, n = 1 : i64, name = "dw"}
// CHECK:       linalg.conv_2d_nhwc_hwcf
// CHECK-NEXT:  "opscope.stat"(%{{.+}}) {kind = "min", options = {}, role = "lhs", site = "nhwc"}
// CHECK-NOT:   channel_dims
// CHECK:       return
func.func @channel_last_and_depthwise_convs(%x: tensor<1x6x6x3xf32>, %w: tensor<3x3x3x8xf32>, %o: tensor<1x4x4x8xf32>,
                                            %dx: tensor<1x4x6x8xf32>, %dw: tensor<3x3x8xf32>, %do: tensor<1x2x4x8xf32>) -> (tensor<1x4x4x8xf32>, tensor<1x2x4x8xf32>) {
  %0 = linalg.conv_2d_nhwc_hwcf {dilations = dense<1> : tensor<2xi64>, strides = dense<1> : tensor<2xi64>} ins(%x, %w : tensor<1x6x6x3xf32>, tensor<3x3x3x8xf32>) outs(%o : tensor<1x4x4x8xf32>) -> tensor<1x4x4x8xf32> loc("nhwc")
  %1 = linalg.depthwise_conv_2d_nhwc_hwc {dilations = dense<1> : tensor<2xi64>, strides = dense<1> : tensor<2xi64>} ins(%dx, %dw : tensor<1x4x6x8xf32>, tensor<3x3x8xf32>) outs(%do : tensor<1x2x4x8xf32>) -> tensor<1x2x4x8xf32> loc("dw")
  return %0, %1 : tensor<1x4x4x8xf32>, tensor<1x2x4x8xf32>
}
