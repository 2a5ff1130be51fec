"""What a function's arguments are: shape, element type, and for an integer argument the
size of the table it indexes (token ids into an embedding), read from the IR.

Drivers need this to feed a model they did not write: token ids must stay below the
vocabulary size (an embedding lookup asserts it), and an integer argument that indexes
nothing is a mask. The bound is found where the argument, through views and casts, is
the index of a `tensor.extract` in a `linalg.generic` body (what torch's `embedding`,
ONNX's `Gather` and StableHLO's `gather` lower to) or the indices of an
`iree_linalg_ext.gather`; the smallest such table dimension wins. The ids are followed
through the index arithmetic importers put before the lookup, element by element and from one
generic's result to the next: ONNX's negative-index wrap `select(ids < 0, ids + V, ids)`, a
clamp (`max`/`min`), an offset (`add`/`sub`), a remainder; a comparison only decides (its i1
result indexes nothing).
"""

from __future__ import annotations

from dataclasses import dataclass

from iree.compiler import ir

from opscope.errors import OpscopeError
from opscope.ir.labels import INT_CASTS

VIEWS = frozenset(
    {
        "tensor.expand_shape",
        "tensor.collapse_shape",
        "tensor.cast",
        "tensor.reshape",
        "tensor.extract_slice",
        "tensor.bitcast",
    }
)
# integer arithmetic an index passes through on its way to a lookup (select: its chosen operands)
INDEX_ARITH = frozenset(
    {
        "arith.addi",
        "arith.subi",
        "arith.select",
        "arith.maxsi",
        "arith.minsi",
        "arith.maxui",
        "arith.minui",
        "arith.remsi",
        "arith.remui",
    }
)


@dataclass(frozen=True)
class Argument:
    """One argument of a function, as a driver must feed it."""

    index: int
    shape: tuple[int, ...]
    dtype: str  # the MLIR element type: f32, f16, bf16, i64, i32, i1, ...
    index_bound: int | None = None  # an integer argument indexes a table of this many rows (None: no table)

    @property
    def is_float(self) -> bool:
        return self.dtype.startswith(("f", "bf"))

    @property
    def is_integer(self) -> bool:
        return self.dtype.startswith(("i", "ui", "si"))

    def describe(self) -> str:
        """`argument 1 (tensor<2x8xi64>)`, for messages."""
        dims = "x".join(str(d) for d in self.shape)
        return f"argument {self.index} (tensor<{dims + 'x' if dims else ''}{self.dtype}>)"


def function_op(module: ir.Module, function: str | None = None) -> ir.Operation:
    """`function` (default: the first `func.func`) of `module`, or a one-line error."""
    for op in module.body.operations:
        op = op.operation
        if op.name != "func.func":
            continue
        if function is None or ir.StringAttr(op.attributes["sym_name"]).value == function:
            return op
    raise OpscopeError(f"no func.func{' @' + function if function else ''} in the module")


def symbol_name(op: ir.Operation) -> str:
    """The `sym_name` of a function op (the name a compiled module calls it by)."""
    return ir.StringAttr(op.attributes["sym_name"]).value


def function_args(module: ir.Module, function: str | None = None) -> list[tuple[tuple[int, ...], str]]:
    """(shape, element type) of every argument of `function` (default: the first func.func);
    a one-line error, naming the argument and the dim, when one is not a static tensor."""
    op = function_op(module, function)
    fty = ir.FunctionType(ir.TypeAttr(op.attributes["function_type"]).value)
    args = []
    for i, t in enumerate(fty.inputs):
        if not isinstance(t, ir.RankedTensorType):
            raise OpscopeError(
                f"argument {i} has type {t}, not a tensor: opscope feeds tensors only; export the model with "
                "its non-tensor arguments fixed (a flag passed at export, e.g. use_cache=False, becomes an "
                "argument: set it on the model's config instead)"
            )
        if not t.has_static_shape:
            raise dynamic_dim_error(i, str(t), [d for d in range(t.rank) if t.is_dynamic_dim(d)])
        args.append((tuple(t.shape), str(t.element_type)))
    return args


def dynamic_dim_error(index: int, type_text: str, dims: list[int]) -> OpscopeError:
    """The one line every route gives for an argument with dynamic dims `dims`."""
    return OpscopeError(
        f"argument {index} ({type_text}) has a dynamic dim ({', '.join(map(str, dims))}): drivers feed static "
        "shapes; export the model with static shapes (torch.export without dynamic_shapes, a fixed ONNX input "
        "shape, concrete JAX example arguments)"
    )


def arguments(module: ir.Module, function: str | None = None) -> list[Argument]:
    """Every argument of `function` with its shape, element type and, for integers, the size
    of the table it indexes."""
    op = function_op(module, function)
    block = op.regions[0].blocks[0]
    out = []
    for i, (shape, dtype) in enumerate(function_args(module, function)):
        bound = None
        if dtype.startswith(("i", "ui", "si")) and dtype != "i1":
            bound = _index_bound(block.arguments[i])
        out.append(Argument(i, shape, dtype, bound))
    return out


def _index_bound(value: ir.Value) -> int | None:
    """The smallest dim of a table that `value` (or a view or cast of it) indexes, else None."""
    bounds: list[int] = []
    seen: set = set()
    todo = [value]
    while todo:
        v = todo.pop()
        if v in seen:
            continue
        seen.add(v)
        for use in v.uses:
            user = use.owner
            name = user.name
            if name in VIEWS or name in INT_CASTS or (name in INDEX_ARITH and not _condition(user, use)):
                todo.extend(user.results)
            elif name == "linalg.yield" and user.parent.name == "linalg.generic":
                todo.append(user.parent.results[use.operand_number])  # the element's tensor, on to its readers
            elif name == "linalg.generic" and use.operand_number < len(user.regions[0].blocks[0].arguments):
                todo.append(user.regions[0].blocks[0].arguments[use.operand_number])
            elif name == "tensor.extract" and use.operand_number > 0:
                dim = user.operands[0].type.shape[use.operand_number - 1]
                if dim > 0:
                    bounds.append(dim)
            elif name == "iree_linalg_ext.gather" and use.operand_number == 1:
                bounds.extend(_gather_bounds(user))
    return min(bounds) if bounds else None


def _condition(op: ir.Operation, use) -> bool:
    """Whether `use` is a select's condition (it decides which value goes on, it is not one)."""
    return op.name == "arith.select" and use.operand_number == 0


def _gather_bounds(op: ir.Operation) -> list[int]:
    """The source dims an `iree_linalg_ext.gather`'s indices select along."""
    source = op.operands[0].type
    dims = ir.DenseI64ArrayAttr(op.attributes["dimension_map"]) if "dimension_map" in op.attributes else [0]
    return [source.shape[d] for d in dims if source.shape[d] > 0]
