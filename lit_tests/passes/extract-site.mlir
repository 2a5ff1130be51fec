// RUN: opscope-opt %s -p extract-site{site=0} --split-input-file | filecheck %s
// RUN: opscope-opt %s -p 'extract-site{site=fc2 only=true}' | filecheck %s --check-prefix=RUNTIME
// RUN: opscope-opt %s -p 'extract-site{site=conv only=true}' | filecheck %s --check-prefix=ONLY
// RUN: opscope-opt %s -p 'extract-site{site=fc1 only=true}' --print-debuginfo | filecheck %s --check-prefix=LOC
// RUN: opscope-opt %s -p 'extract-site{site=fc1},extract-site{site=fc1}' | filecheck %s --check-prefix=TWICE
// RUN: not opscope-opt %s -p 'extract-site{site=fc9}' 2>&1 | filecheck %s --check-prefix=UNKNOWN
// RUN: not opscope-opt %s -p 'extract-site{site=3}' 2>&1 | filecheck %s --check-prefix=UNKNOWN-ORDINAL
// RUN: not opscope-opt %s -p extract-site 2>&1 | filecheck %s --check-prefix=NONE

// A site is outlined into a public @site_<name> that takes its runtime operands (the lhs
// first) and copies in its constant ones: the weight's global read and transpose, the
// zero-filled init. The original function is left as it was.

// CHECK-LABEL: func.func @mlp(
// CHECK:       linalg.transpose
// CHECK:       linalg.matmul
// CHECK:       linalg.matmul
// CHECK:       return
// CHECK-LABEL: func.func @site_fc1(
// CHECK-SAME:      %[[X:.+]]: tensor<3x8xf32>) -> tensor<3x4xf32> attributes {opscope.site = "fc1"}
// CHECK-DAG:   %[[W:.+]] = util.global.load @w1 : tensor<4x8xf32>
// CHECK-DAG:   %[[WT:.+]] = linalg.transpose ins(%[[W]] : tensor<4x8xf32>)
// CHECK-DAG:   %[[C0:.+]] = arith.constant 0.000000e+00 : f32
// CHECK-DAG:   %[[Z:.+]] = linalg.fill ins(%[[C0]] : f32)
// CHECK:       %[[Y:.+]] = linalg.matmul ins(%[[X]], %[[WT]] : tensor<3x8xf32>, tensor<8x4xf32>) outs(%[[Z]] : tensor<3x4xf32>)
// CHECK-NEXT:  return %[[Y]] : tensor<3x4xf32>

// A rhs the model takes as an argument and an init that is no fill of a constant (here
// a bias broadcast from an argument) are arguments too, in operand order. only=true
// keeps the site alone: every other function and the globals nothing reads are gone.
// RUNTIME-NOT:   util.global
// RUNTIME-NOT:   func.func @mlp
// RUNTIME-LABEL: func.func @site_fc2(
// RUNTIME-SAME:      %[[H:[^:]+]]: tensor<3x4xf32>, %[[W2:[^:]+]]: tensor<4x2xf32>, %[[B:[^:]+]]: tensor<3x2xf32>) -> tensor<3x2xf32>
// RUNTIME-NEXT:    %[[Y:.+]] = linalg.matmul ins(%[[H]], %[[W2]] : tensor<3x4xf32>, tensor<4x2xf32>) outs(%[[B]] : tensor<3x2xf32>)
// RUNTIME-NEXT:    return %[[Y]]
// RUNTIME-NOT:   func.func

// The site's location is kept on the copied op and on the function.
// LOC:       #[[FC1:loc[0-9]*]] = loc("fc1")
// LOC:       func.func @site_fc1(
// LOC:         linalg.matmul {{.+}} loc(#[[FC1]])
// LOC:       } loc(#[[FC1]])

// A second outline of the same site gets a fresh symbol.
// TWICE: func.func @site_fc1_1(
// TWICE: func.func @site_fc1(

// UNKNOWN: {{^}}opscope-opt: error: extract-site: no matmul site 'fc9' in this module (valid: fc1, fc2, conv, or their ordinals 0..2){{$}}
// UNKNOWN-ORDINAL: {{^}}opscope-opt: error: extract-site: no matmul site '3' in this module (valid: fc1, fc2, conv, or their ordinals 0..2){{$}}
// NONE: {{^}}opscope-opt: error: extract-site: name the site to outline with site=<name or ordinal> (valid: fc1, fc2, conv, or their ordinals 0..2){{$}}

util.global private @w1 = dense<0.5> : tensor<4x8xf32>
func.func @mlp(%x: tensor<3x8xf32>, %w2: tensor<4x2xf32>, %bias: tensor<2xf32>) -> tensor<3x2xf32> {
  %c0 = arith.constant 0.0 : f32
  %w = util.global.load @w1 : tensor<4x8xf32>
  %et = tensor.empty() : tensor<8x4xf32>
  %wt = linalg.transpose ins(%w : tensor<4x8xf32>) outs(%et : tensor<8x4xf32>) permutation = [1, 0]
  %e = tensor.empty() : tensor<3x4xf32>
  %z = linalg.fill ins(%c0 : f32) outs(%e : tensor<3x4xf32>) -> tensor<3x4xf32>
  %h = linalg.matmul ins(%x, %wt : tensor<3x8xf32>, tensor<8x4xf32>) outs(%z : tensor<3x4xf32>) -> tensor<3x4xf32> loc("fc1")
  %eb = tensor.empty() : tensor<3x2xf32>
  %b = linalg.broadcast ins(%bias : tensor<2xf32>) outs(%eb : tensor<3x2xf32>) dimensions = [0]
  %y = linalg.matmul ins(%h, %w2 : tensor<3x4xf32>, tensor<4x2xf32>) outs(%b : tensor<3x2xf32>) -> tensor<3x2xf32> loc("fc2")
  return %y : tensor<3x2xf32>
}

// -----

// A convolution's input is its argument before the zero padding, which is copied in with
// the constant it yields; the filter global stays in the module.

// CHECK-LABEL: func.func @conv(
// CHECK:       linalg.conv_2d_nchw_fchw
// CHECK-LABEL: func.func @site_conv(
// CHECK-SAME:      %[[X:[^:]+]]: tensor<1x2x4x4xf32>) -> tensor<1x4x4x4xf32> attributes {opscope.site = "conv"}
// CHECK:         %[[ZERO:.+]] = arith.constant 0.000000e+00 : f32
// CHECK:         %[[P:.+]] = tensor.pad %[[X]] low[0, 0, 1, 1] high[0, 0, 1, 1]
// CHECK:           tensor.yield %[[ZERO]] : f32
// CHECK:         %[[F:.+]] = util.global.load @filter
// CHECK:         %[[Y:.+]] = linalg.conv_2d_nchw_fchw {{.+}} ins(%[[P]], %[[F]] : tensor<1x2x6x6xf32>, tensor<4x2x3x3xf32>)
// CHECK-NEXT:    return %[[Y]]

// ONLY-NOT: @w1
// ONLY-NOT: @mlp
// ONLY:     util.global private @filter
// ONLY-NOT: @conv(
// ONLY:     func.func @site_conv(
// ONLY-NOT: func.func

util.global private @filter = dense<0.25> : tensor<4x2x3x3xf32>
func.func @conv(%x: tensor<1x2x4x4xf32>) -> tensor<1x4x4x4xf32> {
  %zero = arith.constant 0.0 : f32
  %p = tensor.pad %x low[0, 0, 1, 1] high[0, 0, 1, 1] {
  ^bb0(%i: index, %j: index, %k: index, %l: index):
    tensor.yield %zero : f32
  } : tensor<1x2x4x4xf32> to tensor<1x2x6x6xf32>
  %f = util.global.load @filter : tensor<4x2x3x3xf32>
  %e = tensor.empty() : tensor<1x4x4x4xf32>
  %i0 = linalg.fill ins(%zero : f32) outs(%e : tensor<1x4x4x4xf32>) -> tensor<1x4x4x4xf32>
  %c = linalg.conv_2d_nchw_fchw {dilations = dense<1> : tensor<2xi64>, strides = dense<1> : tensor<2xi64>} ins(%p, %f : tensor<1x2x6x6xf32>, tensor<4x2x3x3xf32>) outs(%i0 : tensor<1x4x4x4xf32>) -> tensor<1x4x4x4xf32> loc("conv")
  return %c : tensor<1x4x4x4xf32>
}
