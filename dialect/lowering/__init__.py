"""How opscope statistics are computed: one stats kernel per (tensor type, stat list, count).

A stats kernel (`kernel.StatsKernel`) is a `func.func` in linalg/tensor/arith/math that takes
`count` tensors of one type and returns all their statistics packed into one 1-D f32 tensor
(or one result per statistic: `signature`). It is shaped for IREE's dispatch formation,
where dispatches, not arithmetic, dominate small tensors:

* stacked (`layout`): the tensors, viewed as rows [R, C], are concatenated into one
  [B, R, C] stack and every stage is one `linalg.generic` with the tensor index as its
  leading parallel dimension, so a kernel costs the same ~14 dispatches for one tensor or a
  hundred; tensors above `STACK_MAX_NUMEL` elements are computed one at a time, uncopied;
* one row-parallel pass computes every plain row partial, one tiny generic reduces them
  (`rows`; with `row_lanes`, one partial per vector lane: no horizontal reduction per step);
* what needs a global scalar first takes a second pass that derives it in its own body:
  kurtosis the mean (`rows`), the normalized histogram max|x| (`histogram`: one counter
  per slab, bin and vector lane);
* per-tensor scalars are finished in small [B] generics (`stages`), never by a host-side
  `tensor.extract` (a device round trip per site).

Every kernel's text is written by one emitter (`emitter`), which the inference-dynamics
kernels (`dialect/dynamics.py`) share.
"""
