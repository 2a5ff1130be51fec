"""What counts as a constant expression, and which of them are model weights.

A constant expression is computed from constants only (an immutable global, an
`arith.constant`, and linalg/tensor/arith ops over them such as a weight's transpose, the
tensors a body reads from outside included):
what IREE's const-expr hoisting evaluates once instead of every call. `lower-opscope`
uses it to place statistics kernels; the cost model (`opscope.analysis.cost`) uses it
to tell weight traffic from activation traffic and to leave hoisted ops out of a
forward pass. A weight is a constant expression that reads model data: an immutable
global or a non-splat tensor constant (a `linalg.fill` of a scalar is constant but no weight).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from math import prod

from iree.compiler import ir

MAX_DEPTH = 16  # deeper chains are not treated as constant (bounds the recursion)
TENSOR_TYPES = (ir.RankedTensorType, ir.UnrankedTensorType)
_GLOBALS = "__immutable_globals__"  # the memo's entry for the module's global table
_active: dict | None = None  # the memo of the innermost `memoized()` block


def is_attr(attr: ir.Attribute, kind: type) -> bool:
    """Whether `attr` is an attribute of class `kind` (`ir.DenseElementsAttr`,
    `ir.DenseResourceElementsAttr`, ...): the bindings' casts raise ValueError on any other."""
    try:
        kind(attr)
    except ValueError:
        return False
    return True


@contextmanager
def memoized() -> Iterator[dict]:
    """Within the block, answers about values are remembered: use around a pass over one
    module (the cost model's `analyze`), which then takes time linear in its size."""
    global _active
    outer = _active
    _active = {} if outer is None else outer
    try:
        yield _active
    finally:
        _active = outer


def owner(value: ir.Value) -> ir.Operation:
    """The operation defining `value` (not its OpView), for a result value."""
    return value.owner.operation if hasattr(value.owner, "operation") else value.owner


def is_constant(value: ir.Value, memo: dict | None = None) -> bool:
    """Defined by `arith.constant` or by a `util.global.load` of a global never stored to."""
    op = owner(value)
    if op.name == "arith.constant":
        return True
    if op.name != "util.global.load":
        return False
    sym = ir.FlatSymbolRefAttr(op.attributes["global"]).value
    return _immutable_globals(op, memo if memo is not None else _active).get(sym, False)


def _immutable_globals(op: ir.Operation, memo: dict | None) -> dict[str, bool]:
    """Global symbol -> immutable?, for the module around `op` (read once per memo)."""
    if memo is not None and _GLOBALS in memo:
        return memo[_GLOBALS]
    module = op.parent
    while module is not None and module.name != "builtin.module":
        module = module.parent
    table: dict[str, bool] = {}
    if module is not None:
        for g in module.regions[0].blocks[0].operations:
            g = g.operation
            if g.name == "util.global":
                table[ir.StringAttr(g.attributes["sym_name"]).value] = "is_mutable" not in g.attributes
    if memo is not None:
        memo[_GLOBALS] = table
    return table


def is_const_expr(value: ir.Value, depth: int = 0, memo: dict | None = None) -> bool:
    """Computed from constants only (an immutable global, an arith.constant, a transpose or
    reshape of one...): what IREE's const-expr hoisting turns into a constant resource.

    With a `memo` dict (one per module), answers are remembered, so asking about every
    value of a module costs time linear in its size."""
    return _const_expr(value, depth, memo if memo is not None else _active)[0]


def _const_expr(value: ir.Value, depth: int, memo: dict | None) -> tuple[bool, bool]:
    """(is it a constant expression, was the answer cut short by MAX_DEPTH)."""
    if isinstance(value, ir.BlockArgument):
        return False, False
    if depth > MAX_DEPTH:
        return False, True
    if memo is not None and value in memo:
        return memo[value], False
    if is_constant(value, memo):
        result, capped = True, False
    else:
        op = owner(value)
        if op.name == "tensor.empty":
            result, capped = True, False
        elif not op.name.startswith(("linalg.", "tensor.", "arith.")) or len(op.regions) > 1 or not op.operands:
            result, capped = False, False
        else:
            result, capped = True, False
            for o in [*op.operands, *captures(op)]:  # a body reading an activation is no constant
                r, c = _const_expr(o, depth + 1, memo)
                capped = capped or c
                if not r:
                    result = False
                    break
    if memo is not None and not capped:
        memo[value] = result
    return result, capped


def is_weight(value: ir.Value, memo: dict | None = None) -> bool:
    """A constant expression that reads model data (see the module docstring): its bytes are weight bytes."""
    return is_const_expr(value, memo=memo) and _reads_data(value, 0)


def _reads_data(value: ir.Value, depth: int) -> bool:
    """Some constant leaf under `value` is an immutable global or a non-splat tensor constant."""
    if isinstance(value, ir.BlockArgument) or depth > MAX_DEPTH:
        return False
    op = owner(value)
    if op.name == "util.global.load":
        return True
    if op.name == "arith.constant":
        attr = op.attributes["value"]
        if not isinstance(value.type, ir.ShapedType):
            return False
        if not (isinstance(attr, ir.DenseElementsAttr) and attr.is_splat):
            return True
        # a splat is a filler (zeros, a broadcast scalar), except a tensor of one element: Linear(1, 1)'s
        # weight, or an einsum's weight vector of one, is splat only because it holds one value (found by
        # the generated-model tests); a rank-0 constant stays a scalar filler
        ty = ir.RankedTensorType(value.type)
        return ty.has_static_shape and ty.rank >= 1 and prod(ty.shape) == 1
    return any(_reads_data(o, depth + 1) for o in [*op.operands, *captures(op)])


def defining_ops(
    values: Iterable[ir.Value], is_input: Callable[[ir.Value], bool] = lambda v: False, ready: Iterable[ir.Value] = ()
) -> tuple[list[ir.Value], list[ir.Operation]]:
    """What computes `values`, to copy it elsewhere: (the inputs, in first-use order; the ops,
    operands first, each once). A value `is_input` accepts is taken as an input, not followed;
    values in `ready` (already available there) are neither. Regions' outer reads count as operands."""
    inputs: list[ir.Value] = []
    ops: list[ir.Operation] = []
    seen: set[ir.Value] = set(ready)

    def need(value: ir.Value) -> None:
        if value in seen:
            return
        if is_input(value):
            inputs.append(value)
            seen.add(value)
            return
        op = owner(value)
        for operand in [*op.operands, *region_reads(op)]:
            need(operand)
        ops.append(op)
        seen.update(op.results)

    for value in values:
        need(value)
    return inputs, ops


def captures(op: ir.Operation) -> list[ir.Value]:
    """Tensor values that `op`'s regions read from outside them, in first-use order (a
    `linalg.generic` gathering from a table with `tensor.extract` reads that table)."""
    return [v for v in region_reads(op) if isinstance(v.type, TENSOR_TYPES)]


def region_reads(op: ir.Operation) -> list[ir.Value]:
    """Values of any type that `op`'s regions read from outside them, in first-use order (a
    pad's yielded zero, a gathered table)."""
    if not len(op.regions):
        return []
    inside: set[ir.Value] = set()
    found: list[ir.Value] = []

    def walk(parent: ir.Operation) -> None:
        for region in parent.regions:
            for block in region.blocks:
                inside.update(block.arguments)
                for inner in block.operations:
                    inner = inner.operation
                    found.extend(v for v in inner.operands if v not in inside and v not in found)
                    walk(inner)
                    inside.update(inner.results)

    walk(op)
    return found
