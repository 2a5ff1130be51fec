"""A loop index taken modulo a bound it never reaches, written as the index itself: IREE 3.13 fails at
LLVM translation (`builtin.unrealized_conversion_cast`, a vector of indices) on the gather it
vectorizes from `tensor.extract x[i mod n]` of a strided slice, the form torch-mlir writes for a
scatter-add's coordinates (an ONNX MoE's top-k combine; found by the generated-model tests once a tap
split its dispatch). `i mod n` is `i` for 0 ≤ i < size ≤ n: the same value, and IREE then compiles
the gather as a plain read. Done on the compiler's copy (`opscope.run.compile`), every target."""

from __future__ import annotations

from iree.compiler import ir
from iree.compiler.dialects import linalg

from opscope.ir.const_expr import owner
from opscope.ir.flops import constant_int
from opscope.ir.sites import loop_sizes

REMAINDERS = ("arith.remsi", "arith.remui")


def index_remainders(module: ir.Module) -> list[ir.Operation]:
    """Each `arith.rem[su]i (linalg.index d), C` in a linalg op's body where C is a constant at least
    the static size of loop d (so the remainder is the index)."""
    found: list[ir.Operation] = []

    def visit(op):
        if op.name in REMAINDERS and _is_plain(op.operation):
            found.append(op.operation)
        return ir.WalkResult.ADVANCE

    module.operation.walk(visit)
    return found


def _is_plain(op: ir.Operation) -> bool:
    index, bound = op.operands
    limit = constant_int(bound)
    generic = op.parent
    if isinstance(index, ir.BlockArgument) or owner(index).name != "linalg.index" or limit is None:
        return False
    if generic is None or not generic.name.startswith("linalg."):
        return False
    try:
        maps = [ir.AffineMapAttr(a).value for a in linalg.get_indexing_maps(generic)]
    except Exception:  # a linalg op without indexing maps
        return False
    dim = ir.IntegerAttr(owner(index).attributes["dim"]).value
    sizes = loop_sizes(maps, list(generic.operands))
    size = sizes[dim] if dim < len(sizes) else None
    return size is not None and 0 < size <= limit


def plain_indices(module: ir.Module) -> int:
    """Replace each `index_remainders` op by its index; returns how many."""
    found = index_remainders(module)
    for op in found:
        op.result.replace_all_uses_with(op.operands[0])
        op.erase()
    return len(found)
