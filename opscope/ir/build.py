"""Small builders the rewriting passes share: one `linalg.generic`, an affine map of loop dims,
a float cast. The passes write their IR through these so every generic is built one way."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from iree.compiler import ir
from iree.compiler.dialects import arith, linalg


def dim_map(n_dims: int, dims: Sequence[int]) -> ir.AffineMap:
    """(d0, …, d{n_dims-1}) -> (d{dims[0]}, d{dims[1]}, …)."""
    return ir.AffineMap.get(n_dims, 0, [ir.AffineDimExpr.get(d) for d in dims])


def cast_float(v: ir.Value, ty: ir.Type) -> ir.Value:
    """A float scalar `v` in the float type `ty` (extended or truncated)."""
    if v.type == ty:
        return v
    return (arith.truncf if ir.FloatType(ty).width < ir.FloatType(v.type).width else arith.extf)(ty, v)


def to_f32(v: ir.Value) -> ir.Value:
    """A float scalar `v` as f32."""
    return cast_float(v, ir.F32Type.get())


def generic(
    result: ir.Type,
    ins: Sequence[ir.Value],
    out: ir.Value,
    maps: Sequence[ir.AffineMap],
    iters: Sequence[str],
    body: Callable,
    ip: ir.InsertionPoint | None = None,
) -> ir.Value:
    """One `linalg.generic` with a single result; `body(*block_args)` (called inside the block)
    returns what it yields. `ip` None: the innermost insertion point of the context."""
    op = linalg.GenericOp(
        [result],
        list(ins),
        [out],
        ir.ArrayAttr.get([ir.AffineMapAttr.get(m) for m in maps]),
        ir.ArrayAttr.get([ir.Attribute.parse(f"#linalg.iterator_type<{it}>") for it in iters]),
        ip=ip,
    )
    types = [ir.ShapedType(v.type).element_type for v in [*ins, out]]
    block = op.regions[0].blocks.append(*types)
    with ir.InsertionPoint(block):
        linalg.YieldOp([body(*block.arguments)])
    return op.result


def regeneric(
    op: ir.Operation, maps: Sequence[ir.AffineMap], iters: Sequence[str], order: Sequence[int] = (0, 1)
) -> ir.Operation:
    """A `linalg.generic` built just before the two-input linalg `op`, computing what `op`'s body
    computes: its inputs taken in `order`, with `maps` (inputs in that order, then the init) and
    `iters`, `op`'s block cloned with its arguments in that order; `op` itself is left as it was."""
    old = op.regions[0].blocks[0]
    args = [old.arguments[i] for i in order] + [old.arguments[2]]
    with op.location:
        new = linalg.GenericOp(
            [op.results[0].type],
            [op.operands[i] for i in order],
            [op.operands[2]],
            ir.ArrayAttr.get([ir.AffineMapAttr.get(m) for m in maps]),
            ir.ArrayAttr.get([ir.Attribute.parse(f"#linalg.iterator_type<{it}>") for it in iters]),
            ip=ir.InsertionPoint(op),
        )
        block = new.regions[0].blocks.append(*(a.type for a in args))
    clone_ops(list(old.operations), ir.InsertionPoint(block), dict(zip(args, block.arguments)))
    return new.operation


def widen(value: ir.Value, element: ir.Type, ip: ir.InsertionPoint | None = None) -> ir.Value:
    """`value` (a ranked float tensor) with every element extended to the wider float type `element`:
    how a weight stored in bf16 is read by a model that computes in f32."""
    from iree.compiler.dialects import tensor

    ty = ir.RankedTensorType(value.type)
    result = ir.RankedTensorType.get(ty.shape, element)
    empty = tensor.EmptyOp(ty.shape, element, ip=ip).result
    ident = ir.AffineMap.get_identity(ty.rank)
    return generic(
        result, [value], empty, [ident, ident], ["parallel"] * ty.rank, lambda x, _: arith.extf(element, x), ip
    )


def remap_operands(new: ir.Operation, mapping: dict) -> None:
    """Point every operand of `new` (a clone) and of the ops in its regions that reads an original
    value at its copy in `mapping`."""
    ops: list[ir.Operation] = []
    new.walk(lambda op: ops.append(op.operation) or ir.WalkResult.ADVANCE)  # gather only: walk hides errors
    for op in ops:
        for i, value in enumerate(op.operands):
            if value in mapping:
                op.operands[i] = mapping[value]


def clone_ops(ops: Sequence[ir.Operation], ip: ir.InsertionPoint, mapping: dict) -> None:
    """Clone `ops`, in order, at `ip`, each reading the copies of what it read (`mapping`: original
    value -> copy, extended with every clone's results)."""
    for op in ops:
        copy = op.clone(ip=ip)
        remap_operands(copy, mapping)
        mapping.update(zip(op.results, copy.results))
