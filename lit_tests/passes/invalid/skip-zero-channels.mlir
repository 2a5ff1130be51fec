// RUN: opscope-opt %s -p 'skip-zero-channels{channels="2,9"}' --split-input-file --verify-diagnostics
// RUN: not opscope-opt %s -p 'skip-zero-channels' 2>&1 | filecheck %s --check-prefix=EMPTY
// RUN: not opscope-opt %s -p 'skip-zero-channels{channels="1,x"}' 2>&1 | filecheck %s --check-prefix=BAD
// RUN: not opscope-opt %s -p 'skip-zero-channels{channels="5-2"}' 2>&1 | filecheck %s --check-prefix=RANGE

// Refusals of skip-zero-channels, before anything is rewritten: a channel past the lhs's K
// (naming the site and the valid range), no channels, a malformed index or range.

// EMPTY: opscope-opt: error: skip-zero-channels: option 'channels' is empty: name the lhs K indices to skip, e.g. channels=0,7-9 (`opscope plan RUN` finds them in a profile)
// BAD: opscope-opt: error: skip-zero-channels: option 'channels' expects indices and ranges like '0,7-9,56', got 'x'
// RANGE: opscope-opt: error: skip-zero-channels: option 'channels': '5-2' is not an index >= 0 or a range lo-hi

func.func @channel_past_k(%x: tensor<4x8xf32>, %w: tensor<8x3xf32>, %c: tensor<4x3xf32>) -> tensor<4x3xf32> {
  // expected-error @+1 {{skip-zero-channels: site 'fc1' at loc("fc1"): channel 9 is past its K = 8; channels index the lhs's K dim (0..7)}}
  %0 = linalg.matmul ins(%x, %w : tensor<4x8xf32>, tensor<8x3xf32>) outs(%c : tensor<4x3xf32>) -> tensor<4x3xf32> loc("fc1")
  return %0 : tensor<4x3xf32>
}
