// RUN: opscope-opt %s -p 'quantize-weight{group=5}' --split-input-file --verify-diagnostics
// RUN: not opscope-opt %s -p 'quantize-weight{sites=scores}' 2>&1 | filecheck %s --check-prefix=COMPUTED
// RUN: not opscope-opt %s -p 'quantize-weight{sites=^fc$}' 2>&1 | filecheck %s --check-prefix=ARGUMENT
// RUN: not opscope-opt %s -p 'quantize-weight{bits=3}' 2>&1 | filecheck %s --check-prefix=BITS
// RUN: not opscope-opt %s -p 'quantize-weight{activations=true bits=4}' 2>&1 | filecheck %s --check-prefix=W8A8
// RUN: not opscope-opt %s -p 'quantize-weight{activations=true group=4}' 2>&1 | filecheck %s --check-prefix=W8A8G
// RUN: not opscope-opt %s -p 'quantize-weight{group=-1}' 2>&1 | filecheck %s --check-prefix=NEG
// RUN: not opscope-opt %s -p 'quantize-weight{smooth=1.5 calibration=c.npz}' 2>&1 | filecheck %s --check-prefix=ALPHA
// RUN: not opscope-opt %s -p 'quantize-weight{smooth=0.5}' 2>&1 | filecheck %s --check-prefix=NOCAL
// RUN: not opscope-opt %s -p 'quantize-weight{static=true calibration=c.npz}' 2>&1 | filecheck %s --check-prefix=STATIC
// RUN: not opscope-opt %s -p 'quantize-weight{calibration=c.npz}' 2>&1 | filecheck %s --check-prefix=UNUSED
// RUN: not opscope-opt %s -p 'quantize-weight{smooth=0.5 calibration=%t.missing.npz}' 2>&1 | filecheck %s --check-prefix=MISSING
// RUN: echo garbage > %t.bad.npz
// RUN: not opscope-opt %s -p 'quantize-weight{smooth=0.5 calibration=%t.bad.npz}' 2>&1 | filecheck %s --check-prefix=BAD
// RUN: %PYTHON -c "import numpy as n; n.savez('%t.npz', fc1=n.ones(6, 'f4'))"
// RUN: not opscope-opt %s -p 'quantize-weight{smooth=0.5 calibration=%t.npz}' 2>&1 | filecheck %s --check-prefix=LENGTH

// Refusals of quantize-weight, each before anything is rewritten. As IR: groups of g
// consecutive K elements need K % g == 0; a site the `sites` regex names must read a stored
// weight (not a function argument, not a computed tensor). As options: bits 4 or 8 (the
// integer types stored), W8A8 only with 8 bits and one scale per channel, a group size >= 0.

// BITS: opscope-opt: error: quantize-weight: option 'bits' expects 4 or 8 (codes stored as i4 or i8), got 3
// W8A8: opscope-opt: error: quantize-weight: activations=true (W8A8, an i8 x i8 -> i32 contraction) takes bits=8 group=0 only, got bits=4 group=0: drop activations for W4A16
// W8A8G: opscope-opt: error: quantize-weight: activations=true (W8A8, an i8 x i8 -> i32 contraction) takes bits=8 group=0 only, got bits=8 group=4: drop activations for W8A16
// NEG: opscope-opt: error: quantize-weight: option 'group' expects a group size >= 0 (0: one scale per output channel), got -1

// SmoothQuant and static scales: α in [0, 1], a calibration file for either (and neither
// without one), static only for W8A8; the file is read before anything is rewritten, and an
// entry of another length than the site's K is a calibration of another model.
// ALPHA: opscope-opt: error: quantize-weight: option 'smooth' expects α in [0, 1] (0: off), got 1.5
// NOCAL: opscope-opt: error: quantize-weight: smooth needs the activations' recorded maxima: add calibration=FILE.npz (opscope.write_calibration writes one from a profile run)
// STATIC: opscope-opt: error: quantize-weight: static=true calibrates the activations' int8 scale: add activations=true (W8A8)
// UNUSED: opscope-opt: error: quantize-weight: calibration is read for smooth=α or static=true only: add one, or drop calibration
// MISSING: opscope-opt: error: quantize-weight: no calibration file {{.+}}.missing.npz (write one from a profile run: opscope.write_calibration)
// BAD: opscope-opt: error: quantize-weight: calibration file {{.+}}.bad.npz is not a readable .npz
// LENGTH: opscope-opt: error: quantize-weight: site 'fc1' at loc("fc1"): calibration {{.+}}.npz holds 6 channels, its lhs has K = 8: calibrate on a run of this model

func.func @k_not_a_multiple_of_group(%x: tensor<3x8xf32>, %c: tensor<3x4xf32>) -> tensor<3x4xf32> {
  %w = arith.constant dense<[[1.0, 2.0, 3.0, 4.0], [1.0, 2.0, 3.0, 4.0], [1.0, 2.0, 3.0, 4.0], [1.0, 2.0, 3.0, 4.0],
                             [1.0, 2.0, 3.0, 4.0], [1.0, 2.0, 3.0, 4.0], [1.0, 2.0, 3.0, 4.0], [1.0, 2.0, 3.0, -4.5]]> : tensor<8x4xf32>
  // expected-error @+1 {{quantize-weight: site 'fc1' at loc("fc1"): K = 8 is not a multiple of group=5}}
  %0 = linalg.matmul ins(%x, %w : tensor<3x8xf32>, tensor<8x4xf32>) outs(%c : tensor<3x4xf32>) -> tensor<3x4xf32> loc("fc1")
  return %0 : tensor<3x4xf32>
}

// -----

// COMPUTED: opscope-opt: error: quantize-weight: site 'attn.scores' at loc("attn.scores"): its rhs is computed from activations (an attention's q·kᵀ or p·v), not a stored weight: leave it out of 'sites'
func.func @named_site_with_a_computed_rhs(%q: tensor<2x4x8xf32>, %k: tensor<2x8x4xf32>, %c: tensor<2x4x4xf32>) -> tensor<2x4x4xf32> {
  %e = tensor.empty() : tensor<2x8x4xf32>
  %kt = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d1, d2)>, affine_map<(d0, d1, d2) -> (d0, d1, d2)>], iterator_types = ["parallel", "parallel", "parallel"]} ins(%k : tensor<2x8x4xf32>) outs(%e : tensor<2x8x4xf32>) {
  ^bb0(%in: f32, %out: f32):
    %s = arith.mulf %in, %in : f32
    linalg.yield %s : f32
  } -> tensor<2x8x4xf32>
  %0 = linalg.batch_matmul ins(%q, %kt : tensor<2x4x8xf32>, tensor<2x8x4xf32>) outs(%c : tensor<2x4x4xf32>) -> tensor<2x4x4xf32> loc("attn.scores")
  return %0 : tensor<2x4x4xf32>
}

// -----

// ARGUMENT: opscope-opt: error: quantize-weight: site 'fc' at loc("fc"): its rhs is a function argument, not a stored weight: fakequant-weights{arguments=true} simulates its quantization; leave it out of 'sites'
func.func @named_site_with_an_argument_weight(%x: tensor<3x8xf32>, %w: tensor<8x4xf32>, %c: tensor<3x4xf32>) -> tensor<3x4xf32> {
  %0 = linalg.matmul ins(%x, %w : tensor<3x8xf32>, tensor<8x4xf32>) outs(%c : tensor<3x4xf32>) -> tensor<3x4xf32> loc("fc")
  return %0 : tensor<3x4xf32>
}
