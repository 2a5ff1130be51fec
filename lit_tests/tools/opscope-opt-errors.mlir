// RUN: not opscope-opt %s -p no-such-pass 2>&1 | filecheck %s --check-prefix=UNKNOWN-PASS
// RUN: not opscope-opt %s -p 'inject-matmul-stats{bins=8}' 2>&1 | filecheck %s --check-prefix=UNKNOWN-OPTION
// RUN: not opscope-opt %s -p 'lower-opscope{inline=true}' 2>&1 | filecheck %s --check-prefix=UNKNOWN-OPTION-LOWER
// RUN: not opscope-opt %s -p 'inject-matmul-stats{hist-bins=many}' 2>&1 | filecheck %s --check-prefix=BAD-VALUE
// RUN: not opscope-opt %s -p 'inject-matmul-stats{sites=*fc}' 2>&1 | filecheck %s --check-prefix=BAD-REGEX
// RUN: not opscope-opt %s -p 'inject-matmul-stats{sites=fc' 2>&1 | filecheck %s --check-prefix=UNBALANCED
// RUN: not opscope-opt %t.does-not-exist.mlir 2>&1 | filecheck %s --check-prefix=MISSING
// RUN: not opscope-opt %s --split-input-file --emit-bytecode 2>&1 | filecheck %s --check-prefix=BYTECODE-SPLIT

// Bad command lines end in one line, `opscope-opt: error: ...`, never a traceback.

// UNKNOWN-PASS:      {{^}}opscope-opt: error: unknown pass or bad pipeline element 'no-such-pass': {{.*}}'no-such-pass' does not refer to a registered pass or pass pipeline{{$}}
// UNKNOWN-PASS-NOT:  {{.}}

// UNKNOWN-OPTION:      {{^}}opscope-opt: error: inject-matmul-stats: unknown option 'bins' (valid options: adjacency, dequantize-codes, hist-bins, hist-max, hist-min, hist-normalize, per-channel, per-position, roles, sites){{$}}
// UNKNOWN-OPTION-NOT:  {{.}}

// UNKNOWN-OPTION-LOWER:      {{^}}opscope-opt: error: lower-opscope: unknown option 'inline' (valid options: batch, hist-counts, hoist-constants, outline, pack, row-lanes){{$}}
// UNKNOWN-OPTION-LOWER-NOT:  {{.}}

// BAD-VALUE:      {{^}}opscope-opt: error: inject-matmul-stats: option 'hist-bins' expects int, got 'many'{{$}}
// BAD-VALUE-NOT:  {{.}}

// BAD-REGEX:      {{^}}opscope-opt: error: inject-matmul-stats: bad 'sites' regex '*fc': nothing to repeat at position 0{{$}}
// BAD-REGEX-NOT:  {{.}}

// UNBALANCED:      {{^}}opscope-opt: error: unbalanced brackets or quotes in pipeline 'inject-matmul-stats{sites=fc'{{$}}
// UNBALANCED-NOT:  {{.}}

// MISSING:      {{^}}opscope-opt: error: no such file: {{.*}}.does-not-exist.mlir{{$}}
// MISSING-NOT:  {{.}}

// BYTECODE-SPLIT:      {{^}}opscope-opt: error: --emit-bytecode writes one module, but {{.*}}opscope-opt-errors.mlir has 2 (drop --split-input-file){{$}}
// BYTECODE-SPLIT-NOT:  {{.}}

func.func @first(%a: tensor<4x8xf32>, %b: tensor<8x3xf32>, %c: tensor<4x3xf32>) -> tensor<4x3xf32> {
  %0 = linalg.matmul ins(%a, %b : tensor<4x8xf32>, tensor<8x3xf32>) outs(%c : tensor<4x3xf32>) -> tensor<4x3xf32>
  return %0 : tensor<4x3xf32>
}

// -----

func.func @second(%a: tensor<4x8xf32>) -> tensor<4x8xf32> {
  return %a : tensor<4x8xf32>
}
