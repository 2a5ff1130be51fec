// RUN: opscope-opt %s -p expose-all-ops --split-input-file --verify-diagnostics

// Refusals of expose-all-ops, as IR: a function other functions call (appending results
// would break its callers), a function of several blocks.

// expected-error @+1 {{expose-all-ops: @callee is called by other functions; appending results would break them: run 'inline' before expose-all-ops}}
func.func @callee(%t: tensor<4xf32>) -> tensor<4xf32> {
  %0 = arith.negf %t : tensor<4xf32>
  %1 = arith.negf %0 : tensor<4xf32>
  return %1 : tensor<4xf32>
}
func.func @caller(%t: tensor<4xf32>) -> tensor<4xf32> {
  %0 = func.call @callee(%t) : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// expected-error @+1 {{expose-all-ops: @two_blocks must have a single block ending in func.return (found 2 blocks)}}
func.func @two_blocks(%t: tensor<4xf32>) -> tensor<4xf32> {
  %0 = arith.negf %t : tensor<4xf32>
  cf.br ^exit
^exit:
  return %0 : tensor<4xf32>
}
