"""The untapped model with the taps' dispatch boundaries: each tensor the taps read behind a
`util.optimization_barrier`, so IREE materializes it as the tapped build must.

A tap adds a use to the tensor it reads; IREE then stores that tensor instead of fusing its producer
into the consumer, and the vector code it generates for the split dispatches may sum a matmul in
another order (found by the generated-model tests: a 3x8x4 matmul fused with its transposed
bias + relu gives other last bits than the same matmul stored, then transposed). The taps' claim is
that they change nothing *but* those boundaries: the tapped build's original results equal, bit for
bit, this barriered build's, whose only change is the boundaries.
"""

from __future__ import annotations


def barriered(module, taps=None, keep=None):
    """`module` (edited in place) with every tensor `taps` (default: every family; `keep` a predicate
    on matmul and convolution sites, as `opscope.inject` takes it) would read behind an optimization
    barrier, and no tap. Returns how many tensors."""
    from opscope.dialect.ops import STAT_OP
    from opscope.ir.loading import ir
    from opscope.pipeline.taps import TAPS, tap_passes
    from opscope.pipeline.textual import Pipeline, run_pipeline

    run_pipeline(module, Pipeline(tap_passes(taps=TAPS if taps is None else taps, keep=keep)))
    stats: list = []

    def visit(op):
        if op.name == STAT_OP:
            stats.append(op)
        return ir.WalkResult.ADVANCE

    module.operation.walk(visit)
    read: list = []
    for op in stats:
        for v in op.operands:
            if not any(v == w for w in read):
                read.append(v)
        op.erase()
    for v in read:
        owner = v.owner
        if isinstance(owner, ir.Block):  # a function argument: the barrier at the start of its block
            point, loc = ir.InsertionPoint.at_block_begin(owner), ir.Location.unknown(module.context)
        else:
            point, loc = ir.InsertionPoint.after(owner), owner.location
        with point, loc:
            barrier = ir.Operation.create("util.optimization_barrier", results=[v.type], operands=[v])
        v.replace_all_uses_except(barrier.result, barrier)
    return len(read)


def boundary_build(module, target: str, like, taps=None, keep=None):
    """`module` (edited in place) `barriered` for `taps`/`keep` and compiled with the data-tiling choice
    of `like` (the tapped build it is compared with: the same kernels)."""
    from opscope.run.compile import NO_DATA_TILING, compile_module

    barriered(module, taps, keep)
    return compile_module(module, target, (NO_DATA_TILING,) if like.untiled else ())
