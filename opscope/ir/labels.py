"""Readable, discriminating op labels: the vocabulary of the structural analyses.

Named ops go by their name (`matmul`, `batch_matmul`, `softmax`, `fill`, `transpose`,
`attention`, `dot_general`); a `linalg.generic` goes by what its body computes, its
arithmetic ops in body order without repeats: `generic<exp>`, `generic<subf,exp>`, a
reduction as `reduce<maximumf>`, a contraction as `contract<mulf,addf>`, a body with no
arithmetic (a copy, broadcast or transpose written as a generic) as `generic<copy>`.
Body ops that compute only from values defined outside the body (`arith.truncf` of a
captured constant: hoistable setup, not per-element work) and bounds checks (`cf.assert`)
are left out, so `x * scale` reads `generic<mulf>` whatever form the scale takes. A
generic whose body reads a tensor with `tensor.extract` (an embedding lookup, a routed
expert-weight gather) is a `gather`: its index arithmetic is addressing, not compute.
Function arguments are `in`, constants `const`, immutable-global loads `global`.
"""

from __future__ import annotations

from iree.compiler import ir
from iree.compiler.dialects import linalg

BODY_SKIP = frozenset({"linalg.yield", "arith.constant", "linalg.index", "cf.assert", "iree_linalg_ext.yield"})
SHORT_DIALECTS = ("linalg.", "iree_linalg_ext.", "iree_encoding.", "tensor.", "stablehlo.", "math.", "arith.", "util.")
RENAMED = {"arith.constant": "const", "util.global.load": "global", "func.return": "return"}
ARG_LABEL = "in"
# integer casts: an index or an integer value changing width, no arithmetic
INT_CASTS = frozenset({"arith.index_cast", "arith.index_castui", "arith.extsi", "arith.extui", "arith.trunci"})


def _operation(op) -> ir.Operation:
    return op.operation if hasattr(op, "operation") else op


def body_ops(op) -> list[str]:
    """The short names of the per-element ops in `op`'s first region, in order, without repeats.

    An op counts when it reads a block argument, `linalg.index` or another counted op
    (ops on captured values only are loop-invariant setup), and when what it computes
    reaches a result someone reads (torch's `amax` also yields an unread argmax).
    """
    op = _operation(op)
    if not op.regions or not len(op.regions[0].blocks):
        return []
    block = op.regions[0].blocks[0]
    inner_ops = [inner.operation for inner in block.operations]
    live = _live_body_ops(op, inner_ops)
    varying = set(block.arguments)
    seen: list[str] = []
    for inner in inner_ops:
        name = inner.name
        if name != "linalg.index" and not any(v in varying for v in inner.operands):
            continue
        varying.update(inner.results)
        if name in BODY_SKIP or (live is not None and inner not in live):
            continue
        short = name.split(".", 1)[1] if "." in name else name
        if short not in seen:
            seen.append(short)
    return seen


def _live_body_ops(op: ir.Operation, inner_ops: list[ir.Operation]) -> list[ir.Operation] | None:
    """The body ops that feed a yielded value whose result has uses; None when all count
    (no terminator to read, every result used, or none used: a dead op is labeled whole)."""
    if not inner_ops or len(op.results) < 2:
        return None
    used = [any(True for _ in r.uses) for r in op.results]
    yielded = list(inner_ops[-1].operands)
    if all(used) or not any(used) or len(yielded) != len(used):
        return None
    wanted = {v for v, u in zip(yielded, used) if u}
    live: list[ir.Operation] = []
    for inner in reversed(inner_ops[:-1]):
        if any(r in wanted for r in inner.results):
            live.append(inner)
            wanted.update(inner.operands)
    return live


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
        if "extract" in body:
            return "gather"
        if linalg.isa_contraction_op(op):
            head = "contract"
        elif _is_reduction(op):
            head = "reduce"
        else:
            head = "generic"
        return f"{head}<{','.join(body)}>"
    for prefix in SHORT_DIALECTS:
        if name.startswith(prefix):
            return name[len(prefix) :]
    return name


def value_label(value: ir.Value) -> str:
    """The label of what defines `value`: its op's label, or `in` for a block argument."""
    if isinstance(value, ir.BlockArgument):
        return ARG_LABEL
    owner = value.owner
    return op_label(owner)
