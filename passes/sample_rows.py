"""`sample-rows`: sketch every K-th row (token; `stride=K`) of each tapped activation.

Long sequences make the taps' cost grow with every token; a deterministic subset of rows
keeps it bounded. Each `opscope.stat` whose tensor is computed per call (not a constant
expression: weights stay exact) reads instead a strided `tensor.extract_slice` of rows
0, K, 2K, ... along its second-to-last dimension (tokens of `[B, T, D]`, queries of an
attention map `[B, H, Tq, Tk]`, image rows of a convolution); a residual statistic's two
tensors are sliced alike. Tensors of rank < 2 are read whole. The statistics, their `numel`
and per-position lengths are then those of the sampled rows, and the function says so
(`opscope.row_stride`, read into `Manifest.row_stride`, stated in the report). Adjacent-row
differences need consecutive rows: `opscope.pipeline.taps` turns them off under sampling.
Run it between the inject passes and `split-weight-stats` / `lower-opscope`.

    opscope.stat(%x : tensor<1x128x64xf32>)
    =>
    %s = tensor.extract_slice %x[0, 0, 0] [1, 32, 64] [1, 4, 1] : ... to tensor<1x32x64xf32>
    opscope.stat(%s)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from iree.compiler import ir
from iree.compiler.dialects import tensor

from opscope.dialect.ops import stat_ops
from opscope.errors import OpscopeError
from opscope.ir.const_expr import is_const_expr, memoized
from opscope.ir.manifest import ROW_STRIDE_ATTR


@dataclass(frozen=True)
class SampleRows:
    """Read every `stride`-th row of each per-call tensor an `opscope.stat` sketches."""

    stride: int = 1
    name: ClassVar[str] = "sample-rows"

    def __post_init__(self) -> None:
        if self.stride < 1:
            raise OpscopeError(f"sample-rows: stride must be >= 1 (1: every row), got {self.stride}")

    def apply(self, module) -> None:
        if self.stride == 1:
            return
        body = module.operation.regions[0].blocks[0]
        with memoized() as memo:
            for fn in [op.operation for op in body.operations if op.operation.name == "func.func"]:
                # one slice of a tensor per block, however many of the block's sketches read it
                slices: dict[tuple[ir.Block, ir.Value], ir.Value] = {}
                for stat in stat_ops(fn):
                    if any(is_const_expr(v, memo=memo) for v in stat.operands):
                        continue
                    for i, value in enumerate(list(stat.operands)):
                        key = (stat.block, value)
                        if key not in slices:
                            slices[key] = _rows(value, self.stride, stat)
                        stat.operands[i] = slices[key]
                if any(s != v for (_, v), s in slices.items()):
                    fn.attributes[ROW_STRIDE_ATTR] = ir.IntegerAttr.get(ir.IntegerType.get_signless(64), self.stride)


def _rows(value: ir.Value, stride: int, before: ir.Operation) -> ir.Value:
    """`value` with every `stride`-th row of its second-to-last dimension, or `value` itself
    when it has no rows to sample (rank < 2, dynamic or too few rows)."""
    ty = value.type
    if not isinstance(ty, ir.RankedTensorType) or ty.rank < 2 or not ty.has_static_shape:
        return value
    shape = list(ty.shape)
    rows = shape[-2]
    if rows <= 1:
        return value
    kept = (rows + stride - 1) // stride
    sizes = shape[:-2] + [kept, shape[-1]]
    strides = [1] * (ty.rank - 2) + [stride, 1]
    with before.location, ir.InsertionPoint(before):
        result = ir.RankedTensorType.get(sizes, ty.element_type)
        return tensor.ExtractSliceOp(result, value, [], [], [], [0] * ty.rank, sizes, strides).result
