"""`unfuse`: every op its own dispatch, the fusion-relaxed build (the reference's skip-fusion compile).

Inserts a `util.optimization_barrier` after each tensor result of every op in the entry block of
every `func.func` with a body, so IREE's dispatch-region formation cannot fuse an op with its
producer or consumer: each linalg op (and each reshape IREE does not fold away) is dispatched
alone and its result goes through memory. Left alone: constant expressions (weights and their
transposes, which IREE hoists and evaluates once), `tensor.empty` and `linalg.fill` (an op's
initial value, not a computation the model's numbers depend on), and non-tensor results. The
model computes the same function; only where IREE rounds may differ (another summation order
inside a dispatch, no fused multiply-add across ops), which is what `opscope parity --fusion`
bounds at the outputs (`opscope.act.parity`, 1e-4 of each output's scale).

IREE 3.13 has no flag that turns fusion off: `--iree-dispatch-creation-fuse-multi-use=false`
and `--iree-opt-level=O0` leave the demo transformer's layer at 9 dispatches; the barriers give
one per op.

    %1 = linalg.matmul ins(%x, %w ...) outs(%z ...) -> tensor<4x8xf32>
    %2 = linalg.generic {...} ins(%1 ...)            // fused with the matmul by default
    =>
    %1 = linalg.matmul ins(%x, %w ...) outs(%z ...) -> tensor<4x8xf32>
    %b = util.optimization_barrier %1 : tensor<4x8xf32>
    %2 = linalg.generic {...} ins(%b ...)            // a dispatch of its own
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from iree.compiler import ir

from opscope.ir.const_expr import is_const_expr, memoized

_LEFT = ("tensor.empty", "linalg.fill", "arith.constant", "util.global.load", "util.optimization_barrier")


@dataclass(frozen=True)
class Unfuse:
    """A dispatch boundary (an optimization barrier) after every computed tensor of each function."""

    name: ClassVar[str] = "unfuse"

    def apply(self, module) -> None:
        with memoized():
            for fn in module.body.operations:
                fn = fn.operation
                if fn.name != "func.func" or not fn.regions[0].blocks:
                    continue
                for op in list(fn.regions[0].blocks[0].operations):
                    op = op.operation
                    if op.name in _LEFT or op.name.startswith("func.") or op.name.startswith("opscope."):
                        continue
                    for result in op.results:
                        if isinstance(result.type, ir.RankedTensorType) and not is_const_expr(result):
                            _barrier(result, op)


def _barrier(value: ir.Value, after: ir.Operation) -> None:
    """`value`'s uses read it through a fresh barrier placed right after its op."""
    with ir.InsertionPoint.after(after), after.location:
        barrier = ir.Operation.create("util.optimization_barrier", results=[value.type], operands=[value])
    value.replace_all_uses_except(barrier.result, barrier)
