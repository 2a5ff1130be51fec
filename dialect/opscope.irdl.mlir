// The opscope dialect, for `iree-opt --irdl-file=dialect/opscope.irdl.mlir` and
// `mlir-opt --irdl-file=...`: it lets stock tools parse and verify opscope IR.
//
// opscope.stat says *what* is recorded, never how: "record statistic `kind` of
// %value, which is operand `role` of site `site`". `options` holds the kind's
// parameters (hist: bins, lo, hi, normalize; every other kind: {}) and, for a tensor
// whose channels are not its last dim (an NCHW convolution's operands), `channel_dims`:
// every statistic reads the tensor with those dims moved last and merged. The
// lower-opscope pass expands each op into linalg/tensor/arith/math and appends
// the value as a function result described by result attributes.
//
//   "opscope.stat"(%lhs) {kind = "hist", site = "fc1", role = "lhs",
//       options = {bins = 32 : i64, hi = 1.0 : f32, lo = -1.0 : f32, normalize = true}}
//       : (tensor<64x128xf32>) -> ()
//
// Inference-dynamics kinds (dialect/dynamics.py) tap attention probabilities (role attn,
// or gate for a router's softmax: attn_qmax, attn_krecv, attn_entropy, gate_top2), chosen
// expert indices (role route: route_load, options {experts = E}) and a residual add's
// stream and block output, the one kind family with a second operand (role residual:
// res_a_sumsq, res_b_sumsq, res_cos):
//
//   "opscope.stat"(%h, %d) {kind = "res_cos", site = "layers.0.attn", role = "residual",
//       options = {}} : (tensor<2x8x32xf32>, tensor<2x8x32xf32>) -> ()
irdl.dialect @opscope {
  irdl.operation @stat {
    %value = irdl.any
    %min = irdl.is "min"
    %max = irdl.is "max"
    %mean = irdl.is "mean"
    %l1 = irdl.is "l1"
    %sumsq = irdl.is "sumsq"
    %nnz = irdl.is "nnz"
    %kurtosis = irdl.is "kurtosis"
    %hist = irdl.is "hist"
    %elemsig = irdl.is "elemsig"
    %chan_maxabs = irdl.is "chan_maxabs"
    %chan_outlier = irdl.is "chan_outlier"
    %pos_sumsq = irdl.is "pos_sumsq"
    %adj_sumsq = irdl.is "adj_sumsq"
    %attn_qmax = irdl.is "attn_qmax"
    %attn_krecv = irdl.is "attn_krecv"
    %attn_entropy = irdl.is "attn_entropy"
    %gate_top2 = irdl.is "gate_top2"
    %route_load = irdl.is "route_load"
    %res_a_sumsq = irdl.is "res_a_sumsq"
    %res_b_sumsq = irdl.is "res_b_sumsq"
    %res_cos = irdl.is "res_cos"
    %kind = irdl.any_of(%min, %max, %mean, %l1, %sumsq, %nnz, %kurtosis, %hist, %elemsig, %chan_maxabs, %chan_outlier, %pos_sumsq, %adj_sumsq, %attn_qmax, %attn_krecv, %attn_entropy, %gate_top2, %route_load, %res_a_sumsq, %res_b_sumsq, %res_cos)
    %site = irdl.base "#builtin.string"
    %lhs = irdl.is "lhs"
    %rhs = irdl.is "rhs"
    %out = irdl.is "out"
    %attn = irdl.is "attn"
    %gate = irdl.is "gate"
    %route = irdl.is "route"
    %residual = irdl.is "residual"
    %role = irdl.any_of(%lhs, %rhs, %out, %attn, %gate, %route, %residual)
    %options = irdl.base "#builtin.dictionary"
    irdl.operands(value: %value, block_output: optional %value)
    irdl.attributes {"kind" = %kind, "site" = %site, "role" = %role, "options" = %options}
    irdl.results()
  }
}
