// RUN: opscope-opt %s -p lower-opscope --split-input-file --verify-diagnostics

// Refusals of lower-opscope, as IR: a sketch that the tensor's shape cannot have, a
// function it cannot append results to.

func.func @channel_sketch_of_rank1_tensor(%v: tensor<8xf32>) {
  // expected-error @+1 {{lower-opscope: site 'fc1' role rhs at loc(}}
  "opscope.stat"(%v) {kind = "chan_maxabs", options = {}, role = "rhs", site = "fc1"} : (tensor<8xf32>) -> ()
  return
}

// -----

func.func @adjacency_of_rank3_tensor(%t: tensor<2x4x8xf32>) {
  // expected-error @+1 {{adj_sumsq needs a 2-D tensor with >= 2 rows, got (2, 4, 8)}}
  "opscope.stat"(%t) {kind = "adj_sumsq", options = {}, role = "lhs", site = "bmm"} : (tensor<2x4x8xf32>) -> ()
  return
}

// -----

func.func @adjacency_of_single_row(%t: tensor<1x8xf32>) {
  // expected-error @+1 {{adj_sumsq needs a 2-D tensor with >= 2 rows, got (1, 8)}}
  "opscope.stat"(%t) {kind = "adj_sumsq", options = {}, role = "lhs", site = "fc1"} : (tensor<1x8xf32>) -> ()
  return
}

// -----

func.func @empty_tensor(%t: tensor<0x8xf32>) {
  // expected-error @+1 {{lower-opscope: site 'fc1' role out at}}
  "opscope.stat"(%t) {kind = "min", options = {}, role = "out", site = "fc1"} : (tensor<0x8xf32>) -> ()
  return
}

// -----

// expected-error @+1 {{lower-opscope: @two_blocks must have a single block ending in func.return (found 2 blocks)}}
func.func @two_blocks(%t: tensor<4x8xf32>) {
  "opscope.stat"(%t) {kind = "min", options = {}, role = "lhs", site = "fc1"} : (tensor<4x8xf32>) -> ()
  cf.br ^exit
^exit:
  return
}

// -----

// expected-error @+1 {{lower-opscope: @callee is called by other functions; appending results would break them: run 'inline' before inject-matmul-stats}}
func.func @callee(%t: tensor<4x8xf32>) {
  "opscope.stat"(%t) {kind = "min", options = {}, role = "lhs", site = "fc1"} : (tensor<4x8xf32>) -> ()
  return
}
func.func @caller(%t: tensor<4x8xf32>) {
  func.call @callee(%t) : (tensor<4x8xf32>) -> ()
  return
}

// -----

func.func @channel_dims_disagree(%t: tensor<2x3x4x4xf32>) {
  "opscope.stat"(%t) {kind = "min", options = {channel_dims = [1]}, role = "lhs", site = "conv"} : (tensor<2x3x4x4xf32>) -> ()
  // expected-error @-1 {{lower-opscope: the statistics of one tensor disagree on channel_dims ([(), (1,)])}}
  "opscope.stat"(%t) {kind = "max", options = {}, role = "lhs", site = "conv"} : (tensor<2x3x4x4xf32>) -> ()
  return
}

// -----

func.func @channel_dims_out_of_range(%t: tensor<2x3x4x4xf32>) {
  // expected-error @+1 {{opscope.stat: channel_dims must list distinct dims of the rank-4 tensor and leave a position dim, got [4]}}
  "opscope.stat"(%t) {kind = "min", options = {channel_dims = [4]}, role = "lhs", site = "conv"} : (tensor<2x3x4x4xf32>) -> ()
  return
}
