"""Residual blocks as a rewrite selects them, and the dead code a removed block leaves.

A block is a residual add `h + d` of `opscope.ir.dynamics` (the stream `h` skips a block
whose output is `d`), named as the residual taps name it (`model.layers.3.attn`,
`encoder.layer.0.ffn`), so a name read off `opscope infer` selects the same block here.
`skip-residual-blocks` and `gate-residual-blocks` share the selection and its errors.
"""

from __future__ import annotations

from iree.compiler import ir

from opscope.errors import OpscopeError
from opscope.ir.dynamics import RESIDUAL, DynamicsSite, select_sites

# Ops that only compute tensors: erased when nothing reads them (an op with no results, a
# call, a barrier or anything else is kept: it may have an effect).
PURE_DIALECTS = ("linalg.", "tensor.", "arith.", "math.", "iree_linalg_ext.", "stablehlo.", "complex.")


def residual_blocks(pass_name: str, module) -> list[DynamicsSite]:
    """Every residual block of `module`, in IR order, named as `inject-residual-stats` names them."""
    return select_sites(pass_name, module, (RESIDUAL,), "", None)


def parse_blocks(text: str) -> list[str]:
    """`"a, b,3"` -> ["a", "b", "3"]: the items of a `blocks` option (names or 0-based ordinals)."""
    return [item.strip() for item in text.split(",") if item.strip()]


def choose_blocks(pass_name: str, module, spec: str, *, everything_if_empty: bool) -> list[DynamicsSite]:
    """The blocks `spec` names (comma-separated names or 0-based ordinals; `*` or, when
    `everything_if_empty`, nothing = all of them), in IR order; a name that names no block is
    a one-line error listing the valid names."""
    blocks = residual_blocks(pass_name, module)
    items = parse_blocks(spec)
    if not items or items == ["*"]:
        if items or everything_if_empty:
            return blocks
        raise OpscopeError(
            f"{pass_name}: name the blocks to rewrite with blocks=<names or ordinals> (valid: {_valid(blocks)})"
        )
    by_name = {b.name: i for i, b in enumerate(blocks)}
    chosen: set[int] = set()
    for item in items:
        if item in by_name:
            chosen.add(by_name[item])
        elif item.lstrip("-").isdigit() and 0 <= int(item) < len(blocks):
            chosen.add(int(item))
        else:
            raise OpscopeError(f"{pass_name}: no residual block '{item}' in this module (valid: {_valid(blocks)})")
    return [blocks[i] for i in sorted(chosen)]


def stream_operand(site: DynamicsSite) -> int:
    """The operand index of the stream `h` in the block's add (the other operand is the block's output)."""
    operands = list(site.op.operands)
    return next(i for i, v in enumerate(operands) if v == site.values[0])


def _valid(blocks: list[DynamicsSite]) -> str:
    if not blocks:
        return "none: this module has no residual adds"
    return f"{', '.join(b.name for b in blocks)}, or their ordinals 0..{len(blocks) - 1}"


def erase_dead(block: ir.Block) -> int:
    """Erase the tensor-only ops of `block` whose results nothing reads, until none is left
    (a skipped block's branch, its weights' transposes, its `tensor.empty`s): the number erased."""
    erased, changed = 0, True
    while changed:
        changed = False
        for op in reversed(list(block.operations)):
            op = op.operation
            if _dead(op):
                op.erase()
                erased += 1
                changed = True
    return erased


def _dead(op: ir.Operation) -> bool:
    """A tensor-only op none of whose results is read."""
    return len(op.results) > 0 and op.name.startswith(PURE_DIALECTS) and all(not list(r.uses) for r in op.results)


def verify_or_refuse(pass_name: str, module, what: str) -> None:
    """Verify `module` after a rewrite; an invalid result is refused naming what was rewritten."""
    try:
        ok = module.operation.verify()
    except ir.MLIRError as e:
        detail = e.error_diagnostics[0].message if e.error_diagnostics else str(e).strip().splitlines()[0]
        raise OpscopeError(f"{pass_name}: rewriting {what} leaves invalid IR: {detail}") from None
    if not ok:
        raise OpscopeError(f"{pass_name}: rewriting {what} leaves invalid IR")
