// RUN: opscope-opt %s -p dump-tensors --split-input-file | filecheck %s
// RUN: opscope-opt %s -p 'dump-tensors{role=out}' --split-input-file | filecheck %s --check-prefix=OUT
// RUN: opscope-opt %s -p 'dump-tensors{sites=layers\.1\.}' --split-input-file | filecheck %s --check-prefix=SITES
// RUN: opscope-opt %s -p 'dump-tensors{role=rhs},dump-tensors{role=out sites=layers\.0\.}' --split-input-file | filecheck %s --check-prefix=TWICE
// RUN: opscope-opt %s -p dump-tensors --split-input-file -o %t 2>&1 | filecheck %s --check-prefix=WARN
// RUN: not opscope-opt %s -p 'dump-tensors{max-bytes=200}' --split-input-file 2>&1 | filecheck %s --check-prefix=BUDGET
// RUN: not opscope-opt %s -p 'dump-tensors{role=weight}' --split-input-file 2>&1 | filecheck %s --check-prefix=ROLE
// RUN: not opscope-opt %s -p 'dump-tensors{sites=^decoder}' --split-input-file 2>&1 | filecheck %s --check-prefix=NO-SITE

// The contract: the `role` tensor (lhs: input activation, rhs, out: result) of every
// selected site is appended after the original results (which keep their indices), in
// program order, each with `opscope.dump = {role, site}`; the function's `opscope.dumped`
// table gives each one's result index, role, shape and site. A second run appends after
// the first and extends the table. Over max-bytes: refused, one line, nothing rewritten.

// CHECK-LABEL: func.func @dumps_lhs_of_every_matmul(
// CHECK-SAME:      %[[X:[^:]+]]: tensor<4x8xf32>
// CHECK-SAME:      -> (tensor<4x3xf32>,
// CHECK-SAME:      tensor<4x8xf32> {opscope.dump = {role = "lhs", site = "layers.0.fc"}},
// CHECK-SAME:      tensor<4x8xf32> {opscope.dump = {role = "lhs", site = "layers.1.fc"}})
// CHECK-SAME:      attributes {opscope.dumped = [
// CHECK-SAME:      {result = 1 : i64, role = "lhs", shape = array<i64: 4, 8>, site = "layers.0.fc"},
// CHECK-SAME:      {result = 2 : i64, role = "lhs", shape = array<i64: 4, 8>, site = "layers.1.fc"}]}
// CHECK:         %[[H:.+]] = linalg.matmul ins(%[[X]],
// CHECK:         %[[Y:.+]] = linalg.matmul ins(%[[H]],
// CHECK:         return %[[Y]], %[[X]], %[[H]] : tensor<4x3xf32>, tensor<4x8xf32>, tensor<4x8xf32>

// OUT-LABEL: func.func @dumps_lhs_of_every_matmul(
// OUT-SAME:      -> (tensor<4x3xf32>,
// OUT-SAME:      tensor<4x8xf32> {opscope.dump = {role = "out", site = "layers.0.fc"}},
// OUT-SAME:      tensor<4x3xf32> {opscope.dump = {role = "out", site = "layers.1.fc"}})
// OUT-SAME:      {result = 1 : i64, role = "out", shape = array<i64: 4, 8>, site = "layers.0.fc"},
// OUT-SAME:      {result = 2 : i64, role = "out", shape = array<i64: 4, 3>, site = "layers.1.fc"}]}
// OUT:           %[[H:.+]] = linalg.matmul
// OUT:           %[[Y:.+]] = linalg.matmul
// OUT:           return %[[Y]], %[[H]], %[[Y]] : tensor<4x3xf32>, tensor<4x8xf32>, tensor<4x3xf32>

// SITES-LABEL: func.func @dumps_lhs_of_every_matmul(
// SITES-SAME:      -> (tensor<4x3xf32>, tensor<4x8xf32> {opscope.dump = {role = "lhs", site = "layers.1.fc"}})
// SITES-SAME:      attributes {opscope.dumped = [{result = 1 : i64, role = "lhs", shape = array<i64: 4, 8>, site = "layers.1.fc"}]}
// SITES:           %[[H:.+]] = linalg.matmul
// SITES:           %[[Y:.+]] = linalg.matmul
// SITES:           return %[[Y]], %[[H]] : tensor<4x3xf32>, tensor<4x8xf32>

// TWICE-LABEL: func.func @dumps_lhs_of_every_matmul(
// TWICE-SAME:      %[[W0:[^:]+]]: tensor<8x8xf32>, %[[W1:[^:]+]]: tensor<8x3xf32>
// TWICE-SAME:      -> (tensor<4x3xf32>,
// TWICE-SAME:      tensor<8x8xf32> {opscope.dump = {role = "rhs", site = "layers.0.fc"}},
// TWICE-SAME:      tensor<8x3xf32> {opscope.dump = {role = "rhs", site = "layers.1.fc"}},
// TWICE-SAME:      tensor<4x8xf32> {opscope.dump = {role = "out", site = "layers.0.fc"}})
// TWICE-SAME:      {result = 1 : i64, role = "rhs", shape = array<i64: 8, 8>, site = "layers.0.fc"},
// TWICE-SAME:      {result = 2 : i64, role = "rhs", shape = array<i64: 8, 3>, site = "layers.1.fc"},
// TWICE-SAME:      {result = 3 : i64, role = "out", shape = array<i64: 4, 8>, site = "layers.0.fc"}]}
// TWICE:           %[[H:.+]] = linalg.matmul
// TWICE:           return %{{.+}}, %[[W0]], %[[W1]], %[[H]] :

// 2 × 4×8 f32 = 256 bytes of lhs: over 200 bytes, refused before any rewrite.
// BUDGET: {{^}}opscope-opt: error: dump-tensors: the 2 tapped tensors take 0.000244 MiB per call, over max-bytes=0.000191 MiB: narrow `sites` (e.g. sites='layers\.0\.') or raise max-bytes{{$}}
// ROLE: {{^}}opscope-opt: error: dump-tensors: option 'role' expects one of lhs, rhs, out, got 'weight'{{$}}
// NO-SITE: {{^}}opscope-opt: error: dump-tensors: sites='^decoder' names no matmul site of this module (valid: layers.0.fc, layers.1.fc){{$}}
func.func @dumps_lhs_of_every_matmul(%x: tensor<4x8xf32>, %w0: tensor<8x8xf32>, %w1: tensor<8x3xf32>) -> tensor<4x3xf32> {
  %c = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<4x8xf32>
  %f = linalg.fill ins(%c : f32) outs(%e : tensor<4x8xf32>) -> tensor<4x8xf32>
  %h = linalg.matmul ins(%x, %w0 : tensor<4x8xf32>, tensor<8x8xf32>) outs(%f : tensor<4x8xf32>) -> tensor<4x8xf32> loc("layers.0.fc")
  %e2 = tensor.empty() : tensor<4x3xf32>
  %f2 = linalg.fill ins(%c : f32) outs(%e2 : tensor<4x3xf32>) -> tensor<4x3xf32>
  %y = linalg.matmul ins(%h, %w1 : tensor<4x8xf32>, tensor<8x3xf32>) outs(%f2 : tensor<4x3xf32>) -> tensor<4x3xf32> loc("layers.1.fc")
  return %y : tensor<4x3xf32>
}

// -----

// A module with no matmul site: a warning, and the function is left as it was.
// WARN: warning: dump-tensors: no matmul sites to dump in this module
// CHECK-LABEL: func.func @no_site_no_change(
// CHECK-SAME:      -> tensor<4xf32> {
// CHECK-NOT:     opscope.dump
// CHECK:         return %{{.+}} : tensor<4xf32>
func.func @no_site_no_change(%t: tensor<4xf32>) -> tensor<4xf32> {
  %0 = arith.negf %t : tensor<4xf32>
  return %0 : tensor<4xf32>
}
