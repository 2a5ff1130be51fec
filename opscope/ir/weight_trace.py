"""A weight followed back through the copies an importer put between it and its site.

Importers read a stored weight through pure data movement: `linalg.transpose`,
`linalg.broadcast` over a batch, a `linalg.generic` that only permutes, broadcasts or widens
its input, `tensor.collapse_shape`/`expand_shape` merging batch dims. Two questions are asked
of that chain, answered here with one reading of each copy:

* `copy_source`: where do given dims of a value sit in the tensor it copies (a weight
  imported as `broadcast(transpose(W))` is fake-quantized, read and counted as W, once);
  `replay` rebuilds the chain on a rewritten W.
* `trace_weight`: which of the site's loops index each dim of the stored tensor
  (`quantize-weight` reads its codes through the composed maps, no copy left).
"""

from __future__ import annotations

from collections.abc import Sequence

from iree.compiler import ir
from iree.compiler.dialects import linalg

from opscope.ir.const_expr import owner
from opscope.ir.sites import Site

MERGED = -1  # a dim of a copy's input that a collapse_shape merges with others (no loop of its own)


def _reassociation(op: ir.Operation) -> list[list[int]]:
    """The dim groups of a `tensor.collapse_shape`/`expand_shape` (its `reassociation`)."""
    return [[ir.IntegerAttr(d).value for d in ir.ArrayAttr(g)] for g in ir.ArrayAttr(op.attributes["reassociation"])]


def _copy_generic(op: ir.Operation, widen: bool) -> tuple[list[int], list[int]] | None:
    """(the loops indexing each dim of its input, of its result) when `op` is a `linalg.generic`
    that only copies its one input, all loops parallel, every index a plain loop, the result
    indexed by every loop once (a transpose or a broadcast); with `widen` also when its body
    first widens the value (`arith.extf`: a weight stored in bf16, read as f32). Else None."""
    if op.name != "linalg.generic" or len(op.results) != 1 or len(op.operands) != 2:
        return None
    block = op.regions[0].blocks[0]
    body = list(block.operations)
    iters = [str(a) for a in ir.ArrayAttr(op.attributes["iterator_types"])]
    read = list(body[0].operands) if body else []
    if widen and len(body) == 2 and body[0].name == "arith.extf" and list(body[1].operands) == [body[0].result]:
        body = body[1:]  # a widening copy keeps every value
    if len(body) != 1 or read != [block.arguments[0]] or any("parallel" not in i for i in iters):
        return None
    in_map, out_map = (ir.AffineMapAttr(a).value for a in ir.ArrayAttr(op.attributes["indexing_maps"]))
    if not all(isinstance(e, ir.AffineDimExpr) for e in [*in_map.results, *out_map.results]):
        return None
    out_loops = [ir.AffineDimExpr(e).position for e in out_map.results]
    in_loops = [ir.AffineDimExpr(e).position for e in in_map.results]
    if sorted(out_loops) != list(range(out_map.n_dims)):
        return None
    return in_loops, out_loops


def copy_source(value: ir.Value, dims: Sequence[int]) -> tuple[ir.Value, tuple[int, ...], list[ir.Operation]]:
    """Follow `value` back through pure data movement (`linalg.transpose`, `linalg.broadcast`,
    a copy `linalg.generic` that only permutes, broadcasts or widens (`arith.extf`) its input) to the tensor it
    copies: (that tensor, the positions `dims` of `value` have in it, the copy ops from it
    to `value`). A weight imported as `broadcast(transpose(W))` is quantized as W, which
    IREE's const-eval folds into one constant of W's size (quantizing the broadcast copy
    would be a constant 8x larger, which IREE declines to hoist: it then runs every call)."""
    chain: list[ir.Operation] = []
    dims = tuple(dims)
    while isinstance(value, ir.OpResult):
        op = value.owner.operation if hasattr(value.owner, "operation") else value.owner
        back = _copy_dims(op, dims)
        if back is None:
            break
        chain.append(op)
        value, dims = op.operands[0], back
    return value, dims, chain[::-1]


def _copy_dims(op: ir.Operation, dims: Sequence[int]) -> tuple[int, ...] | None:
    """Where the result dims `dims` of a pure copy `op` come from in its input, or None when
    `op` is no such copy (or broadcasts along one of `dims`)."""
    if op.name in ("tensor.collapse_shape", "tensor.expand_shape") and len(op.results) == 1:
        return _reshape_dims(op, dims)
    if len(op.results) != 1 or len(op.operands) != 2:
        return None
    if op.name == "linalg.transpose":
        perm = list(ir.DenseI64ArrayAttr(op.attributes["permutation"]))
        return tuple(sorted(perm[d] for d in dims))
    if op.name == "linalg.broadcast":
        added = set(ir.DenseI64ArrayAttr(op.attributes["dimensions"]))
        if added & set(dims):
            return None
        kept = [d for d in range(ir.RankedTensorType(op.results[0].type).rank) if d not in added]
        return tuple(kept.index(d) for d in dims)
    loops = _copy_generic(op, widen=True)
    if loops is None or len(set(loops[0])) != len(loops[0]):
        return None
    in_loops, out_loops = loops
    wanted = [out_loops[d] for d in dims]
    if not all(loop in in_loops for loop in wanted):
        return None  # broadcast along a wanted dim
    return tuple(sorted(in_loops.index(loop) for loop in wanted))


def _reshape_dims(op: ir.Operation, dims: Sequence[int]) -> tuple[int, ...] | None:
    """Where the result dims `dims` of a `collapse_shape`/`expand_shape` come from in its source,
    when each is one source dim (its group's other dims all 1), else None. A weight broadcast over
    a batch and the batch dims merged (`linalg.linear` on a 4-D activation: ConvNeXt's pointwise
    convs) is then read as the weight, counted once."""
    groups = _reassociation(op)
    source = ir.RankedTensorType(op.operands[0].type).shape
    result = ir.RankedTensorType(op.results[0].type).shape
    back = []
    for d in dims:
        if op.name == "tensor.collapse_shape":  # result dim d is source group d
            wide = [s for s in groups[d] if source[s] != 1]
            if len(wide) > 1:
                return None
            back.append(wide[0] if wide else groups[d][0])
        else:  # expand_shape: source dim g became the result dims of group g
            g = next(i for i, group in enumerate(groups) if d in group)
            if any(result[r] != 1 for r in groups[g] if r != d):
                return None
            back.append(g)
    return tuple(sorted(back))


def replay(chain: list[ir.Operation], value: ir.Value, ip: ir.InsertionPoint) -> ir.Value:
    """Copies of the ops `chain` (from `copy_source`), inserted at `ip`, reading `value`:
    the originals stay for their other users."""
    for op in chain:
        new = op.clone(ip=ip)
        new.operands[0] = value
        value = new.results[0]
    return value


def trace_weight(site: Site) -> tuple[ir.Value, tuple[int, ...], list[ir.Operation]] | str:
    """(the tensor under `site`'s rhs copies, the site's loop indexing each of its dims, the
    copies from it to the rhs in order), or why the rhs cannot be read that way. Copies are
    `linalg.transpose`, `linalg.broadcast`, a copying `linalg.generic` (transpose/broadcast)
    and a `tensor.collapse_shape` whose merged dims are all broadcast below it."""
    maps = [ir.AffineMapAttr(a).value for a in linalg.get_indexing_maps(site.op)]
    if not all(isinstance(e, ir.AffineDimExpr) for e in maps[1].results):
        return "its rhs is indexed by a compound expression of its loops"
    loops = [ir.AffineDimExpr(e).position for e in maps[1].results]
    value: ir.Value = site.op.operands[1]
    chain: list[ir.Operation] = []
    while isinstance(value, ir.OpResult):
        op = owner(value)
        back = _input_loops(op, loops)
        if back is None:
            break
        chain.append(op)
        value, loops = op.operands[0], back
    if MERGED in loops:
        return "its weight reaches the site through a tensor.collapse_shape that merges its dims"
    if len(set(loops)) != len(loops):
        return "its weight is read along a diagonal (one loop indexes two of its dims)"
    return value, tuple(loops), chain[::-1]


def _input_loops(op: ir.Operation, loops: list[int]) -> list[int] | None:
    """The loops indexing each dim of the input of copy `op` whose result dims `loops` index,
    or None when `op` is no copy."""
    if len(op.results) != 1 or not len(op.operands):
        return None
    if op.name == "linalg.transpose":
        perm = list(ir.DenseI64ArrayAttr(op.attributes["permutation"]))
        back = [0] * len(perm)
        for d, p in enumerate(perm):
            back[p] = loops[d]
        return back
    if op.name == "linalg.broadcast":
        added = set(ir.DenseI64ArrayAttr(op.attributes["dimensions"]))
        return [loop for d, loop in enumerate(loops) if d not in added]
    if op.name == "tensor.collapse_shape":
        groups = _reassociation(op)
        back = [MERGED] * ir.RankedTensorType(op.operands[0].type).rank
        for d, g in enumerate(groups):
            if len(g) == 1:
                back[g[0]] = loops[d]
        return back
    copied = _copy_generic(op, widen=False)
    if copied is None:
        return None
    in_loops, out_loops = copied
    return [loops[out_loops.index(loop)] for loop in in_loops]
