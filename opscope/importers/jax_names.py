"""JAX name stacks as opscope site names: `jit(mlp)/fc1/dot_general` becomes `fc1`.

JAX names every op with its name stack (transform wrappers such as `jit(f)`, the
`jax.named_scope`s and flax module paths, the einsum spec, then the primitive) around a
traceback. The stack's scopes are the module path (STYLE rule 19), so each op gets
`NameLoc(<scopes joined by "/">)` around the innermost user frame; an op under no scope
keeps only that frame, so `opscope.ir.sites` names it `<kind>#<ordinal>`.
"""

from __future__ import annotations

import re

from iree.compiler import ir

# `jit(mlp)`, `pjit(f)`, `jvp(jit(f))`, `transpose(jvp(g))`: transforms, not scopes.
_WRAPPER = re.compile(r"^[\w.<>-]+\(.*\)$")


def typed(loc: ir.Location) -> ir.Location:
    """`loc` as its own subclass (NameLoc, CallSiteLoc, ...); diagnostics hand out bare Locations."""
    return ir.Location.from_attr(loc.attr, loc.context) if type(loc) is ir.Location else loc


def _stack(loc: ir.Location) -> list[str] | None:
    """The name stack of an op's location, joining call sites the inliner left (caller, callee)."""
    loc = typed(loc)
    if isinstance(loc, ir.NameLoc):
        return loc.name_str.split("/")
    if isinstance(loc, ir.CallSiteLoc):
        caller, callee = _stack(loc.caller), _stack(loc.callee)
        return None if caller is None or callee is None else caller + callee
    return None


def scope_path(loc: ir.Location) -> str | None:
    """'fc1' for `jit(mlp)/fc1/dot_general`, '' for an op under no scope, None if not JAX's."""
    stack = _stack(loc)
    if not stack or len(stack) < 2 or not _WRAPPER.match(stack[0]):
        return None
    scopes = [s for s in stack[:-1] if s and not _WRAPPER.match(s) and "->" not in s]
    return "/".join(scopes)


def user_frame(loc: ir.Location) -> ir.Location | None:
    """The innermost file:line:col under `loc` (JAX keeps only user frames in tracebacks)."""
    loc = typed(loc)
    if isinstance(loc, ir.FileLineColLoc):
        return loc
    if isinstance(loc, ir.NameLoc):
        return user_frame(loc.child_loc)
    if isinstance(loc, ir.CallSiteLoc):
        return user_frame(loc.callee) or user_frame(loc.caller)
    if isinstance(loc, ir.FusedLoc):
        for sub in loc.locations:
            if (found := user_frame(sub)) is not None:
                return found
    return None


def rename_jax_sites(module: ir.Module) -> int:
    """Give every op with a JAX name stack its scope path as NameLoc; returns how many changed."""
    ops: list[ir.Operation] = []

    def visit(op):  # gather only: exceptions inside walk callbacks lose their message
        ops.append(op)
        return ir.WalkResult.ADVANCE

    module.operation.walk(visit)
    changed = 0
    with module.context:
        for op in ops:
            loc = op.location
            path = scope_path(loc)
            if path is None:
                continue
            frame = user_frame(loc) or ir.Location.unknown()
            op.location = ir.Location.name(path, childLoc=frame) if path else frame
            changed += 1
    return changed
