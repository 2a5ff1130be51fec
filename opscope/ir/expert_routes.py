"""Routers written without a top-k op: where the dataflow selects among expert weights.

A top-k (`iree_linalg_ext.topk`, a sort sliced to its first k) is the routing site
`opscope.ir.dynamics` finds first. A router can also be written without one (the reference's
GroupedMatMul taps an expert-index input), and then its expert loads are read where the
selection happens:

* **gather**: a `linalg.generic` whose body `tensor.extract`s from an expert weight table
  W[E, ...] (rank >= 3) at an index read from an integer input (an argmax's indices,
  `W[idx]` in PyTorch), the gathered weights feeding a contraction. Tapped: the indices,
  E = W's size along that dim, one expert per index.
* **mask**: a batched contraction over E expert weights whose other operand is a dispatch, an
  elementwise product (or select) of the tokens and a mask indexed by the expert loop, the mask
  a comparison (a one-hot `idx == e`, a threshold `g >= kth`) through casts and reshapes.
  Tapped: the mask, with the dim its experts run along; an expert's load is the nonzero
  entries of its slice (`route_load` with `axis`). k is 1 for a one-hot of an index, else
  unknown (0: the miner reads it off the loads).

A selection that a top-k op already routes (its indices or values upstream) is left to that
top-k's site.
"""

from __future__ import annotations

from dataclasses import dataclass
from math import prod

from iree.compiler import ir
from iree.compiler.dialects import linalg

from opscope.ir.const_expr import owner
from opscope.ir.flops import indexing_maps
from opscope.ir.sites import classify
from opscope.ir.weight_source import bank_read

_SHAPE_OPS = ("tensor.expand_shape", "tensor.collapse_shape", "linalg.transpose", "linalg.broadcast")
_CASTS = ("arith.extui", "arith.extsi", "arith.uitofp", "arith.sitofp", "arith.extf", "arith.truncf", "arith.trunci")
_INDEX_STEPS = ("arith.index_cast", "arith.index_castui", "arith.extsi", "arith.extui", "arith.trunci")
_TOP_K = ("iree_linalg_ext.topk", "iree_linalg_ext.sort")


@dataclass(frozen=True)
class ExpertRoute:
    """One selection among experts: where, what its taps read, E, the mask's expert dim (-1 for
    indices) and experts per token (0: unknown)."""

    op: ir.Operation
    value: ir.Value
    experts: int
    axis: int
    k: int
    how: str  # gather | mask

    @property
    def tokens(self) -> int:
        """Selections per call: the indices, or the mask's entries per expert."""
        shape = ir.ShapedType(self.value.type).shape
        return prod(shape) if self.axis < 0 else prod(shape) // max(shape[self.axis], 1)


def expert_route(op: ir.Operation) -> ExpertRoute | None:
    """The selection among experts `op` makes, or None."""
    found = _gather(op) if op.name == "linalg.generic" else None
    if found is None and op.name.startswith("linalg."):
        found = _masked_dispatch(op)
    if found is None or _from_top_k(found.value):
        return None
    return found


def _ops(block: ir.Block) -> list[ir.Operation]:
    """The operations of `block` (not their OpViews)."""
    return [o.operation if hasattr(o, "operation") else o for o in block.operations]


def _block_arg_index(value: ir.Value) -> int | None:
    """The block argument `value` is, through the index casts and negative-index wraps an
    importer writes (`i < 0 ? i + E : i`), or None."""
    for _ in range(8):
        if isinstance(value, ir.BlockArgument):
            return ir.BlockArgument(value).arg_number
        op = owner(value)
        if op.name in _INDEX_STEPS:
            value = op.operands[0]
        elif op.name == "arith.select":
            value = op.operands[2]  # the index as is (the true branch wraps a negative one)
        else:
            return None
    return None


def _gather(op: ir.Operation) -> ExpertRoute | None:
    """`op` gathers expert weight matrices by an integer input (see the module docstring)."""
    extract = bank_read(op)  # the bank's element, as `opscope.ir.weight_source` reads a MoE's experts
    if extract is None:
        return None
    bank = ir.RankedTensorType(extract.operands[0].type)
    ins = list(op.opview.inputs)
    if bank.rank < 3 or not bank.has_static_shape:
        return None
    for pos, index in enumerate(list(extract.operands)[1:]):
        arg = _block_arg_index(index)
        if arg is None or arg >= len(ins):
            continue
        indices = ins[arg]
        ity = indices.type
        if not isinstance(ity, ir.RankedTensorType) or not isinstance(ity.element_type, ir.IntegerType):
            continue
        if ity.has_static_shape and bank.shape[pos] >= 2 and _feeds_contraction(op.results[0]):
            return ExpertRoute(op, indices, bank.shape[pos], -1, 1, "gather")
    return None


def _feeds_contraction(value: ir.Value, depth: int = 4) -> bool:
    """`value` is, through reshapes and transposes, an operand of a matmul-like site."""
    for use in value.uses:
        user = use.owner.operation if hasattr(use.owner, "operation") else use.owner
        if user.name in _SHAPE_OPS and depth > 0 and _feeds_contraction(user.results[0], depth - 1):
            return True
        if user.name.startswith("linalg.") and classify(user) is not None:
            return True
    return False


def _dim_position(amap: ir.AffineMap, loop: int) -> int | None:
    for p, e in enumerate(amap.results):
        if isinstance(e, ir.AffineDimExpr) and ir.AffineDimExpr(e).position == loop:
            return p
    return None


def _masked_dispatch(op: ir.Operation) -> ExpertRoute | None:
    """`op` is a batched contraction over expert weights of tokens a mask dispatched (see the
    module docstring)."""
    if not linalg.isa_contraction_op(op) or len(op.opview.inputs) != 2:
        return None
    maps = indexing_maps(linalg.get_indexing_maps(op))
    batch = list(linalg.infer_contraction_dimensions(op).batch)
    if len(batch) != 1:
        return None
    ins = list(op.opview.inputs)
    for i in (0, 1):
        dispatched, weights = ins[i], ins[1 - i]
        pd, pw = _dim_position(maps[i], batch[0]), _dim_position(maps[1 - i], batch[0])
        if pd is None or pw is None or isinstance(dispatched, ir.BlockArgument):
            continue
        experts = ir.ShapedType(weights.type).shape[pw]
        found = _mask_of(owner(dispatched), pd)
        if found is not None and experts >= 2:
            mask, axis, k = found
            if ir.ShapedType(mask.type).shape[axis] == experts:
                return ExpertRoute(op, mask, experts, axis, k, "mask")
    return None


def _mask_of(dispatch: ir.Operation, dim: int) -> tuple[ir.Value, int, int] | None:
    """(mask, its expert dim, k) of an elementwise product or select of two inputs whose result's
    dim `dim` (the experts) runs along a loop that only the mask reads."""
    if dispatch.name != "linalg.generic" or len(dispatch.opview.inputs) != 2:
        return None
    iters = [str(a) for a in dispatch.attributes["iterator_types"]]
    if any("parallel" not in it for it in iters):
        return None
    body = {o.name for o in _ops(dispatch.regions[0].blocks[0])}
    if not body & {"arith.mulf", "arith.muli", "arith.select"}:
        return None
    maps = indexing_maps(linalg.get_indexing_maps(dispatch))
    expr = maps[-1].results[dim]
    if not isinstance(expr, ir.AffineDimExpr):
        return None
    loop = ir.AffineDimExpr(expr).position
    ins = list(dispatch.opview.inputs)
    reads = [_dim_position(m, loop) for m in maps[:2]]
    if sum(r is not None for r in reads) != 1:
        return None
    which = 0 if reads[0] is not None else 1
    k = _comparison_k(ins[which])
    return None if k is None else (ins[which], reads[which], k)


def _comparison_k(value: ir.Value) -> int | None:
    """The value is a comparison's outcome (through casts, reshapes and 0/1 selects): k = 1 for
    `==` (a one-hot of an index), 0 for another comparison (a threshold); None if it is none."""
    for _ in range(12):
        if isinstance(value, ir.BlockArgument):
            return None
        op = owner(value)
        if op.name in _SHAPE_OPS:
            value = op.operands[0]
            continue
        if op.name != "linalg.generic" or len(op.opview.inputs) < 1:
            return None
        ops = _ops(op.regions[0].blocks[0])
        yielded = ops[-1].operands[0]
        if isinstance(yielded, ir.BlockArgument):
            return None
        last = owner(yielded)
        if last.name in ("arith.cmpi", "arith.cmpf"):
            return 1 if _predicate(last) == "eq" else 0
        if last.name == "arith.select" and not isinstance(last.operands[0], ir.BlockArgument):
            cond = owner(last.operands[0])
            if cond.name in ("arith.cmpi", "arith.cmpf") and cond.parent == last.parent:
                return 1 if _predicate(cond) == "eq" else 0
        if last.name in _CASTS and len(op.opview.inputs) == 1 and isinstance(last.operands[0], ir.BlockArgument):
            value = op.opview.inputs[0]
            continue
        return None
    return None


_EQ = {"arith.cmpi": (0,), "arith.cmpf": (1, 8)}  # eq; oeq, ueq (arith's predicate numbers)


def _predicate(cmp: ir.Operation) -> str:
    """`eq` for an equality of an arith.cmpi / cmpf, else `other`."""
    return "eq" if ir.IntegerAttr(cmp.attributes["predicate"]).value in _EQ[cmp.name] else "other"


def _from_top_k(value: ir.Value, depth: int = 8) -> bool:
    """A top-k op is upstream of `value` (within `depth` ops): its own site routes it."""
    seen: list[ir.Operation] = []
    frontier = [value]
    for _ in range(depth):
        nxt = []
        for v in frontier:
            if isinstance(v, ir.BlockArgument):
                continue
            op = owner(v)
            if op.name in _TOP_K:
                return True
            if any(op == s for s in seen):
                continue
            seen.append(op)
            nxt += list(op.operands)
        frontier = nxt
    return False
