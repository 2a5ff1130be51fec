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
    %kind = irdl.any_of(%min, %max, %mean, %l1, %sumsq, %nnz, %kurtosis, %hist, %elemsig, %chan_maxabs, %chan_outlier, %pos_sumsq, %adj_sumsq)
    %site = irdl.base "#builtin.string"
    %lhs = irdl.is "lhs"
    %rhs = irdl.is "rhs"
    %out = irdl.is "out"
    %role = irdl.any_of(%lhs, %rhs, %out)
    %options = irdl.base "#builtin.dictionary"
    irdl.operands(value: %value)
    irdl.attributes {"kind" = %kind, "site" = %site, "role" = %role, "options" = %options}
    irdl.results()
  }
}
