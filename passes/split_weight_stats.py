"""`split-weight-stats`: move the statistics of constant tensors into a function called once.

A weight is stationary: its sketches are the same at every call. This pass moves every
`opscope.stat` of a constant expression (an immutable global, an `arith.constant`, a
transpose or reshape of one: `opscope.ir.const_expr.is_const_expr`) out of `@f` into a
new public function `@f$weights` that takes nothing, recomputes the constant expression
there (the ops that define it, cloned) and taps it. `lower-opscope`, run after, appends the
statistics to each function as results, so `@f` computes only its activations' sketches
per call and `@f$weights` the weights' once per loaded module; the manifest reads both
(`opscope.ir.manifest`: the weights' results follow the call's, so a recording is the same
table as before). Run it between the inject passes and `lower-opscope`.

    func.func @f(%x) { %w = util.global.load @w ; matmul(%x, %w) ; opscope.stat(%w) ; opscope.stat(%x) }
    =>
    func.func @f(%x) { %w = util.global.load @w ; matmul(%x, %w) ; opscope.stat(%x) }
    func.func @f$weights() { %w = util.global.load @w ; opscope.stat(%w) ; return }
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from iree.compiler import ir
from iree.compiler.dialects import func

from opscope.dialect.ops import STAT_OP
from opscope.ir.build import clone_ops
from opscope.ir.const_expr import defining_ops, is_const_expr, memoized
from opscope.ir.manifest import WEIGHTS_SUFFIX


@dataclass(frozen=True)
class SplitWeightStats:
    """Move the statistics of constant tensors of each function into `@<function>$weights`."""

    name: ClassVar[str] = "split-weight-stats"

    def apply(self, module) -> None:
        body = module.operation.regions[0].blocks[0]
        with memoized() as memo:
            for fn in [op.operation for op in body.operations if op.operation.name == "func.func"]:
                blocks = list(fn.regions[0].blocks) if len(fn.regions) else []
                if len(blocks) != 1:
                    continue
                stats = [
                    op.operation
                    for op in blocks[0].operations
                    if op.operation.name == STAT_OP and is_const_expr(op.operation.operands[0], memo=memo)
                ]
                if stats:
                    with fn.location:
                        _split(fn, stats)


def _split(fn: ir.Operation, stats: list[ir.Operation]) -> None:
    """Create `@fn$weights` after `fn`, copy what the stats read into it, move the stats there."""
    name = ir.StringAttr(fn.attributes["sym_name"]).value
    loc = fn.location
    new = func.FuncOp(name + WEIGHTS_SUFFIX, ir.FunctionType.get([], []), loc=loc, ip=ir.InsertionPoint.after(fn))
    entry = new.add_entry_block()
    ip = ir.InsertionPoint(entry)
    mapping: dict[ir.Value, ir.Value] = {}
    for stat in stats:  # a constant expression reads no block argument: every value is copied
        clone_ops(defining_ops([stat.operands[0]], ready=mapping)[1], ip, mapping)
        clone_ops([stat], ip, mapping)
        stat.erase()
    func.ReturnOp([], loc=loc, ip=ip)
