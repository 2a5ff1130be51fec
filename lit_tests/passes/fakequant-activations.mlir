// RUN: opscope-opt %s -p fakequant-activations --split-input-file | filecheck %s
// RUN: opscope-opt %s -p 'fakequant-activations{scope=per-channel}' --split-input-file | filecheck %s --check-prefix=CHAN
// RUN: opscope-opt %s -p 'fakequant-activations{bits=4}' --split-input-file | filecheck %s --check-prefix=BITS4
// RUN: opscope-opt %s -p 'fakequant-activations{sites=^(?!encoder\.fc1$)}' --split-input-file | filecheck %s --check-prefix=SITES
// RUN: opscope-opt %s -p fakequant-activations --split-input-file --print-debuginfo | filecheck %s --check-prefix=LOC
// RUN: opscope-opt %s -p fakequant-activations --split-input-file -o %t 2>&1 | filecheck %s --check-prefix=WARN
// RUN: opscope-opt %s -p 'fakequant-activations{computed-rhs=true}' --split-input-file | filecheck %s --check-prefix=COMPUTED
// RUN: not opscope-opt %s -p 'fakequant-activations{sites=^decoder}' --split-input-file 2>&1 | filecheck %s --check-prefix=NO-SITE

// The lhs becomes its symmetric round trip: one reduction generic for amax = max|x| over
// the K dims (per token: one scale per row), one elementwise generic in the reference's
// order amax * clamp(round(qmax * x * (1/amax)), -qmax, qmax) * (1/qmax), where 1/amax is
// taken as 0 when amax <= 1e-20 (an all-zero row stays zero, not NaN); math.round rounds
// half away from zero. The matmul reads the round trip; nothing else changes.

// CHECK-LABEL: func.func @per_token_round_trip_of_matmul_lhs(
// CHECK-SAME:      %[[X:.+]]: tensor<3x8xf32>, %[[W:.+]]: tensor<8x4xf32>, %[[C:.+]]: tensor<3x4xf32>)
// CHECK:       %[[ZERO:.+]] = linalg.fill ins(%{{.+}} : f32) outs(%{{.+}} : tensor<3xf32>)
// CHECK:       %[[AMAX:.+]] = linalg.generic {{{.+}} iterator_types = ["parallel", "reduction"]} ins(%[[X]] : tensor<3x8xf32>) outs(%[[ZERO]] : tensor<3xf32>)
// CHECK:         math.absf
// CHECK-NEXT:    arith.maximumf
// CHECK:       %[[XQ:.+]] = linalg.generic {{{.+}} iterator_types = ["parallel", "parallel"]} ins(%[[X]], %[[AMAX]] : tensor<3x8xf32>, tensor<3xf32>)
// CHECK-DAG:     %[[TINY:.+]] = arith.constant 9.99999968E-21 : f32
// CHECK-DAG:     %[[QMAX:.+]] = arith.constant 1.270000e+02 : f32
// CHECK-DAG:     %[[NQMAX:.+]] = arith.constant -1.270000e+02 : f32
// CHECK-DAG:     %[[INVQ:.+]] = arith.constant 0.00787401571 : f32
// CHECK:         %[[POS:.+]] = arith.cmpf ogt, %[[M:.+]], %[[TINY]] : f32
// CHECK-NEXT:    %[[R:.+]] = arith.divf %{{.+}}, %[[M]] : f32
// CHECK-NEXT:    %[[INV:.+]] = arith.select %[[POS]], %[[R]], %{{.+}} : f32
// CHECK-NEXT:    %[[T0:.+]] = arith.mulf %{{.+}}, %[[INV]] : f32
// CHECK-NEXT:    %[[T1:.+]] = arith.mulf %[[T0]], %[[QMAX]] : f32
// CHECK-NEXT:    %[[T2:.+]] = math.round %[[T1]] : f32
// CHECK-NEXT:    %[[T3:.+]] = arith.maximumf %[[T2]], %[[NQMAX]] : f32
// CHECK-NEXT:    %[[T4:.+]] = arith.minimumf %[[T3]], %[[QMAX]] : f32
// CHECK-NEXT:    %[[T5:.+]] = arith.mulf %[[T4]], %[[INVQ]] : f32
// CHECK-NEXT:    %[[Y:.+]] = arith.mulf %[[T5]], %[[M]] : f32
// CHECK-NEXT:    linalg.yield %[[Y]] : f32
// CHECK:       %[[OUT:.+]] = linalg.matmul ins(%[[XQ]], %[[W]] : tensor<3x8xf32>, tensor<8x4xf32>) outs(%[[C]] : tensor<3x4xf32>)
// CHECK-NEXT:  return %[[OUT]]

// Per channel: amax over every non-K dim, one scale per feature (column).
// CHAN-LABEL:  func.func @per_token_round_trip_of_matmul_lhs(
// CHAN:        linalg.generic {{{.+}} iterator_types = ["reduction", "parallel"]} ins(%{{.+}} : tensor<3x8xf32>) outs(%{{.+}} : tensor<8xf32>)
// CHAN:        linalg.generic {{{.+}} ins(%{{.+}}, %{{.+}} : tensor<3x8xf32>, tensor<8xf32>)

// bits=4: qmax = 7.
// BITS4-LABEL: func.func @per_token_round_trip_of_matmul_lhs(
// BITS4-DAG:     arith.constant 7.000000e+00 : f32
// BITS4-DAG:     arith.constant -7.000000e+00 : f32
// BITS4-DAG:     arith.constant 0.142857149 : f32
// BITS4:         math.round

// Every inserted op carries the matmul's location (so its site name).
// LOC:         [[FC1:#loc[0-9]+]] = loc("fc1")
// LOC:         func.func @per_token_round_trip_of_matmul_lhs(
// LOC:         linalg.fill {{.+}} loc([[FC1]])
// LOC:         } -> tensor<3xf32> loc([[FC1]])
// LOC:         } -> tensor<3x8xf32> loc([[FC1]])
// LOC-NEXT:    linalg.matmul {{.+}} loc([[FC1]])
func.func @per_token_round_trip_of_matmul_lhs(%x: tensor<3x8xf32>, %w: tensor<8x4xf32>, %c: tensor<3x4xf32>) -> tensor<3x4xf32> {
  %0 = linalg.matmul ins(%x, %w : tensor<3x8xf32>, tensor<8x4xf32>) outs(%c : tensor<3x4xf32>) -> tensor<3x4xf32> loc("fc1")
  return %0 : tensor<3x4xf32>
}

// -----

// K is read from the indexing maps, not assumed last: a transposed lhs [K, M] is reduced
// over its dim 0 per token and over its dim 1 per channel.

// CHECK-LABEL: func.func @transposed_lhs_reduces_k_read_from_maps(
// CHECK:       linalg.generic {{{.+}} iterator_types = ["reduction", "parallel"]} ins(%{{.+}} : tensor<8x3xf32>) outs(%{{.+}} : tensor<3xf32>)
// CHECK:       %[[XQ:.+]] = linalg.generic
// CHECK:       linalg.matmul indexing_maps = [{{.+}}] ins(%[[XQ]], %{{.+}} : tensor<8x3xf32>, tensor<8x4xf32>)
// CHAN-LABEL:  func.func @transposed_lhs_reduces_k_read_from_maps(
// CHAN:        linalg.generic {{{.+}} iterator_types = ["parallel", "reduction"]} ins(%{{.+}} : tensor<8x3xf32>) outs(%{{.+}} : tensor<8xf32>)
#lhs_t = affine_map<(m, n, k) -> (k, m)>
#rhs = affine_map<(m, n, k) -> (k, n)>
#out = affine_map<(m, n, k) -> (m, n)>
func.func @transposed_lhs_reduces_k_read_from_maps(%xt: tensor<8x3xf32>, %w: tensor<8x4xf32>, %c: tensor<3x4xf32>) -> tensor<3x4xf32> {
  %0 = linalg.matmul indexing_maps = [#lhs_t, #rhs, #out]
      ins(%xt, %w : tensor<8x3xf32>, tensor<8x4xf32>) outs(%c : tensor<3x4xf32>) -> tensor<3x4xf32>
  return %0 : tensor<3x4xf32>
}

// -----

// A batch_matmul's lhs [B, M, K]: per token one scale per (batch, row); per channel one per
// K feature, over batch and rows.

// CHECK-LABEL: func.func @batch_matmul_keeps_batch_and_rows(
// CHECK:       linalg.generic {{{.+}} iterator_types = ["parallel", "parallel", "reduction"]} ins(%{{.+}} : tensor<2x3x8xf32>) outs(%{{.+}} : tensor<2x3xf32>)
// CHECK:       %[[XQ:.+]] = linalg.generic
// CHECK:       linalg.batch_matmul ins(%[[XQ]], %{{.+}} : tensor<2x3x8xf32>, tensor<2x8x4xf32>)
// CHAN-LABEL:  func.func @batch_matmul_keeps_batch_and_rows(
// CHAN:        linalg.generic {{{.+}} iterator_types = ["reduction", "reduction", "parallel"]} ins(%{{.+}} : tensor<2x3x8xf32>) outs(%{{.+}} : tensor<8xf32>)
func.func @batch_matmul_keeps_batch_and_rows(%x: tensor<2x3x8xf32>, %w: tensor<2x8x4xf32>, %c: tensor<2x3x4xf32>) -> tensor<2x3x4xf32> {
  %0 = linalg.batch_matmul ins(%x, %w : tensor<2x3x8xf32>, tensor<2x8x4xf32>) outs(%c : tensor<2x3x4xf32>) -> tensor<2x3x4xf32>
  return %0 : tensor<2x3x4xf32>
}

// -----

// q, k and v projections of one x share one round trip (built once, before the first).

// CHECK-LABEL: func.func @shared_lhs_is_quantized_once(
// CHECK-COUNT-2: linalg.generic
// CHECK-NOT:   linalg.generic
// CHECK:       linalg.matmul ins(%[[XQ:.+]], %{{.+}} : tensor<3x8xf32>, tensor<8x4xf32>)
// CHECK-NEXT:  linalg.matmul ins(%[[XQ]], %{{.+}} : tensor<3x8xf32>, tensor<8x4xf32>)
// CHECK-NEXT:  linalg.matmul ins(%[[XQ]], %{{.+}} : tensor<3x8xf32>, tensor<8x4xf32>)
func.func @shared_lhs_is_quantized_once(%x: tensor<3x8xf32>, %wq: tensor<8x4xf32>, %wk: tensor<8x4xf32>, %wv: tensor<8x4xf32>, %c: tensor<3x4xf32>) -> (tensor<3x4xf32>, tensor<3x4xf32>, tensor<3x4xf32>) {
  %q = linalg.matmul ins(%x, %wq : tensor<3x8xf32>, tensor<8x4xf32>) outs(%c : tensor<3x4xf32>) -> tensor<3x4xf32> loc("attn.q")
  %k = linalg.matmul ins(%x, %wk : tensor<3x8xf32>, tensor<8x4xf32>) outs(%c : tensor<3x4xf32>) -> tensor<3x4xf32> loc("attn.k")
  %v = linalg.matmul ins(%x, %wv : tensor<3x8xf32>, tensor<8x4xf32>) outs(%c : tensor<3x4xf32>) -> tensor<3x4xf32> loc("attn.v")
  return %q, %k, %v : tensor<3x4xf32>, tensor<3x4xf32>, tensor<3x4xf32>
}

// -----

// A bf16 lhs is widened to f32 for amax and the round trip, and stored back as bf16.

// CHECK-LABEL: func.func @bf16_lhs_round_trips_in_f32(
// CHECK:       linalg.generic {{.+}} ins(%{{.+}} : tensor<3x8xbf16>) outs(%{{.+}} : tensor<3xf32>)
// CHECK:         arith.extf %{{.+}} : bf16 to f32
// CHECK:       %[[XQ:.+]] = linalg.generic {{.+}} outs(%{{.+}} : tensor<3x8xbf16>)
// CHECK:         arith.extf %{{.+}} : bf16 to f32
// CHECK:         math.round
// CHECK:         %[[B:.+]] = arith.truncf %{{.+}} : f32 to bf16
// CHECK-NEXT:    linalg.yield %[[B]] : bf16
// CHECK:       linalg.matmul ins(%[[XQ]], %{{.+}} : tensor<3x8xbf16>, tensor<8x4xbf16>)
func.func @bf16_lhs_round_trips_in_f32(%x: tensor<3x8xbf16>, %w: tensor<8x4xbf16>, %c: tensor<3x4xf32>) -> tensor<3x4xf32> {
  %0 = linalg.matmul ins(%x, %w : tensor<3x8xbf16>, tensor<8x4xbf16>) outs(%c : tensor<3x4xf32>) -> tensor<3x4xf32>
  return %0 : tensor<3x4xf32>
}

// -----

// A convolution's input has no per-token rows (an im2col row is a window of several
// pixels): per token it is skipped with a warning; per channel it gets one scale per input
// channel (NCHW: dim 1), over batch and pixels (the padded zeros change no amax).

// CHECK-LABEL: func.func @conv_input_scaled_per_input_channel(
// CHECK-NOT:   linalg.generic
// CHECK:       linalg.conv_2d_nchw_fchw
// CHAN-LABEL:  func.func @conv_input_scaled_per_input_channel(
// CHAN:        linalg.generic {{{.+}} iterator_types = ["reduction", "parallel", "reduction", "reduction"]} ins(%{{.+}} : tensor<2x3x6x6xf32>) outs(%{{.+}} : tensor<3xf32>)
// CHAN:        %[[XQ:.+]] = linalg.generic
// CHAN:        linalg.conv_2d_nchw_fchw {{.+}} ins(%[[XQ]], %{{.+}} : tensor<2x3x6x6xf32>, tensor<8x3x3x3xf32>)
// WARN: warning: fakequant-activations: skipping site 'conv1' at loc("conv1"): a convolution's input has no per-token rows (use scope=per-channel: one scale per input channel)
func.func @conv_input_scaled_per_input_channel(%x: tensor<2x3x6x6xf32>, %w: tensor<8x3x3x3xf32>, %o: tensor<2x8x4x4xf32>) -> tensor<2x8x4x4xf32> {
  %0 = linalg.conv_2d_nchw_fchw {dilations = dense<1> : tensor<2xi64>, strides = dense<1> : tensor<2xi64>} ins(%x, %w : tensor<2x3x6x6xf32>, tensor<8x3x3x3xf32>) outs(%o : tensor<2x8x4x4xf32>) -> tensor<2x8x4x4xf32> loc("conv1")
  return %0 : tensor<2x8x4x4xf32>
}

// -----

// Integer, rank-1 lhs and dynamic sites are skipped with a warning naming site and why.

// CHECK-LABEL: func.func @integer_matmul_is_left_alone(
// CHECK-NOT:   linalg.generic
// CHECK:       linalg.matmul
// WARN: warning: fakequant-activations: skipping site 'matmul#0' at {{.+}}: integer matmul (i8, i8, i32), already quantized
func.func @integer_matmul_is_left_alone(%a: tensor<4x8xi8>, %b: tensor<8x3xi8>, %c: tensor<4x3xi32>) -> tensor<4x3xi32> {
  %0 = linalg.matmul ins(%a, %b : tensor<4x8xi8>, tensor<8x3xi8>) outs(%c : tensor<4x3xi32>) -> tensor<4x3xi32>
  return %0 : tensor<4x3xi32>
}

// -----

// CHECK-LABEL: func.func @rank1_lhs_passes_through(
// CHECK-NOT:   linalg.generic
// CHECK:       linalg.vecmat
// WARN: warning: fakequant-activations: skipping site 'vecmat#0' at {{.+}}: rank-1 lhs has no token and channel axes to scale apart
func.func @rank1_lhs_passes_through(%v: tensor<8xf32>, %m: tensor<8x4xf32>, %c: tensor<4xf32>) -> tensor<4xf32> {
  %0 = linalg.vecmat ins(%v, %m : tensor<8xf32>, tensor<8x4xf32>) outs(%c : tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// CHECK-LABEL: func.func @dynamic_site_is_skipped(
// CHECK-NOT:   linalg.generic
// CHECK:       linalg.matmul
// WARN: warning: fakequant-activations: skipping site 'dyn' at loc("dyn"): dynamic shape (tensor<?x8xf32> x tensor<8x3xf32>)
func.func @dynamic_site_is_skipped(%a: tensor<?x8xf32>, %b: tensor<8x3xf32>, %c: tensor<?x3xf32>) -> tensor<?x3xf32> {
  %0 = linalg.matmul ins(%a, %b : tensor<?x8xf32>, tensor<8x3xf32>) outs(%c : tensor<?x3xf32>) -> tensor<?x3xf32> loc("dyn")
  return %0 : tensor<?x3xf32>
}

// -----

// `sites=<regex>` keeps the sites whose name it finds (re.search; here every site but
// encoder.fc1). A regex that finds no site of a module is an error listing the valid names.

// CHECK-LABEL: func.func @sites_regex_selects_by_name(
// CHECK-SAME:      %[[X:[^:]+]]: tensor<3x8xf32>, %[[Y:[^:]+]]: tensor<3x8xf32>
// CHECK:       %[[XQ:.+]] = linalg.generic {{.+}} ins(%[[X]], %{{.+}} :
// CHECK:       linalg.matmul ins(%[[XQ]],
// CHECK:       %[[YQ:.+]] = linalg.generic {{.+}} ins(%[[Y]], %{{.+}} :
// CHECK:       linalg.matmul ins(%[[YQ]],
// NO-SITE: {{^}}opscope-opt: error: fakequant-activations: sites='^decoder' names no matmul site of this module (valid: {{.+}}){{$}}
// SITES-LABEL: func.func @sites_regex_selects_by_name(
// SITES-SAME:      %[[X:[^:]+]]: tensor<3x8xf32>, %[[Y:[^:]+]]: tensor<3x8xf32>
// SITES-NOT:   linalg.generic
// SITES:       linalg.matmul ins(%[[X]],
// SITES:       %[[YQ:.+]] = linalg.generic {{.+}} ins(%[[Y]], %{{.+}} :
// SITES:       linalg.matmul ins(%[[YQ]],
func.func @sites_regex_selects_by_name(%x: tensor<3x8xf32>, %y: tensor<3x8xf32>, %w: tensor<8x4xf32>, %c: tensor<3x4xf32>) -> (tensor<3x4xf32>, tensor<3x4xf32>) {
  %0 = linalg.matmul ins(%x, %w : tensor<3x8xf32>, tensor<8x4xf32>) outs(%c : tensor<3x4xf32>) -> tensor<3x4xf32> loc("encoder.fc1")
  %1 = linalg.matmul ins(%y, %w : tensor<3x8xf32>, tensor<8x4xf32>) outs(%c : tensor<3x4xf32>) -> tensor<3x4xf32> loc("encoder.attn.q")
  return %0, %1 : tensor<3x4xf32>, tensor<3x4xf32>
}

// -----

// Only inputs of projections (rhs a weight: a constant or an argument) are quantized, as in
// the reference, whose fused graphs' MatMuls are the linear projections: an eager
// attention's scores q·kᵀ (k computed) keep a float q unless computed-rhs=true.

// CHECK-LABEL: func.func @attention_scores_stay_float(
// CHECK-SAME:      %[[X:[^:]+]]: tensor<4x8xf32>
// CHECK:       %[[XQ:.+]] = linalg.generic {{.+}} ins(%[[X]], %{{.+}} :
// CHECK:       %[[Q:.+]] = linalg.matmul ins(%[[XQ]],
// CHECK:       %[[K:.+]] = linalg.matmul ins(%[[XQ]],
// CHECK-NOT:   math.round
// CHECK:       linalg.matmul indexing_maps = {{.+}} ins(%[[Q]], %[[K]] :
// WARN: warning: fakequant-activations: 1 product of two computed tensors stays float (attn.scores; an eager attention's q·kᵀ and p·v): computed-rhs=true quantizes them too
// COMPUTED-LABEL: func.func @attention_scores_stay_float(
// COMPUTED-COUNT-2: math.round
func.func @attention_scores_stay_float(%x: tensor<4x8xf32>, %wq: tensor<8x8xf32>, %wk: tensor<8x8xf32>, %c: tensor<4x8xf32>, %s: tensor<4x4xf32>) -> tensor<4x4xf32> {
  %q = linalg.matmul ins(%x, %wq : tensor<4x8xf32>, tensor<8x8xf32>) outs(%c : tensor<4x8xf32>) -> tensor<4x8xf32> loc("attn.q")
  %k = linalg.matmul ins(%x, %wk : tensor<4x8xf32>, tensor<8x8xf32>) outs(%c : tensor<4x8xf32>) -> tensor<4x8xf32> loc("attn.k")
  %0 = linalg.matmul indexing_maps = [affine_map<(m, n, k) -> (m, k)>, affine_map<(m, n, k) -> (n, k)>, affine_map<(m, n, k) -> (m, n)>] ins(%q, %k : tensor<4x8xf32>, tensor<4x8xf32>) outs(%s : tensor<4x4xf32>) -> tensor<4x4xf32> loc("attn.scores")
  return %0 : tensor<4x4xf32>
}

// -----

// A MoE's experts: the lhs is a per-token copy of the expert bank (a weight, left to
// fakequant-weights); the activation is the rhs [tokens, K, 1], quantized per token over K.

// CHECK-LABEL: func.func @experts_quantize_their_rhs_activation(
// CHECK:       %[[G:.+]] = linalg.generic {{.+}} ins(%arg0 : tensor<5xi64>)
// CHECK:       linalg.generic {{{.+}} iterator_types = ["parallel", "reduction", "parallel"]} ins(%arg1 : tensor<5x4x1xf32>) outs(%{{.+}} : tensor<5x1xf32>)
// CHECK:       %[[Q:.+]] = linalg.generic {{.+}} ins(%arg1, %{{.+}} : tensor<5x4x1xf32>, tensor<5x1xf32>)
// CHECK:       linalg.batch_matmul ins(%[[G]], %[[Q]] : tensor<5x3x4xf32>, tensor<5x4x1xf32>)
func.func @experts_quantize_their_rhs_activation(%idx: tensor<5xi64>, %x: tensor<5x4x1xf32>) -> tensor<5x3x1xf32> {
  %bank = util.global.load @bank : tensor<2x3x4xf32>
  %e = tensor.empty() : tensor<5x3x4xf32>
  %g = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d0)>, affine_map<(d0, d1, d2) -> (d0, d1, d2)>], iterator_types = ["parallel", "parallel", "parallel"]} ins(%idx : tensor<5xi64>) outs(%e : tensor<5x3x4xf32>) {
  ^bb0(%i: i64, %out: f32):
    %ei = arith.index_cast %i : i64 to index
    %j = linalg.index 1 : index
    %k = linalg.index 2 : index
    %w = tensor.extract %bank[%ei, %j, %k] : tensor<2x3x4xf32>
    linalg.yield %w : f32
  } -> tensor<5x3x4xf32>
  %zero = arith.constant 0.0 : f32
  %o = tensor.empty() : tensor<5x3x1xf32>
  %z = linalg.fill ins(%zero : f32) outs(%o : tensor<5x3x1xf32>) -> tensor<5x3x1xf32>
  %y = linalg.batch_matmul ins(%g, %x : tensor<5x3x4xf32>, tensor<5x4x1xf32>) outs(%z : tensor<5x3x1xf32>) -> tensor<5x3x1xf32> loc("experts")
  return %y : tensor<5x3x1xf32>
}
util.global private @bank = dense<1.0> : tensor<2x3x4xf32>
