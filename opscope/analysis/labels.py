"""Readable, discriminating op labels: the vocabulary of the structural analyses.

Named ops go by their name (`matmul`, `batch_matmul`, `softmax`, `fill`, `transpose`,
`attention`, `dot_general`); a `linalg.generic` goes by what its body computes, its
arithmetic ops in body order without repeats: `generic<exp>`, `generic<subf,exp>`, a
reduction as `reduce<maximumf>`, a contraction as `contract<mulf,addf>`, a body with no
arithmetic (a copy, broadcast or transpose written as a generic) as `generic<copy>`.
Function arguments are `in`, constants `const`, immutable-global loads `global`.
"""

from __future__ import annotations

from iree.compiler import ir
from iree.compiler.dialects import linalg

BODY_SKIP = frozenset({"linalg.yield", "arith.constant", "linalg.index"})
SHORT_DIALECTS = ("linalg.", "iree_linalg_ext.", "tensor.", "stablehlo.", "math.", "arith.", "util.")
RENAMED = {"arith.constant": "const", "util.global.load": "global", "func.return": "return"}
ARG_LABEL = "in"


def _operation(op) -> ir.Operation:
    return op.operation if hasattr(op, "operation") else op


def body_ops(op) -> list[str]:
    """The short names of the arithmetic ops in `op`'s first region, in order, without repeats."""
    op = _operation(op)
    if not op.regions or not len(op.regions[0].blocks):
        return []
    seen: list[str] = []
    for inner in op.regions[0].blocks[0].operations:
        name = inner.operation.name
        if name in BODY_SKIP:
            continue
        short = name.split(".", 1)[1] if "." in name else name
        if short not in seen:
            seen.append(short)
    return seen


def _is_reduction(op: ir.Operation) -> bool:
    if "iterator_types" not in op.attributes:
        return False
    return any("reduction" in str(t) for t in ir.ArrayAttr(op.attributes["iterator_types"]))


def op_label(op) -> str:
    """The label of one op (see the module docstring)."""
    op = _operation(op)
    name = op.name
    if name in RENAMED:
        return RENAMED[name]
    if name == "linalg.generic":
        body = body_ops(op)
        if not body:
            return "generic<copy>"
        if linalg.isa_contraction_op(op):
            head = "contract"
        elif _is_reduction(op):
            head = "reduce"
        else:
            head = "generic"
        return f"{head}<{','.join(body)}>"
    for prefix in SHORT_DIALECTS:
        if name.startswith(prefix):
            return name[len(prefix):]
    return name


def value_label(value: ir.Value) -> str:
    """The label of what defines `value`: its op's label, or `in` for a block argument."""
    if isinstance(value, ir.BlockArgument):
        return ARG_LABEL
    owner = value.owner
    return op_label(owner)
