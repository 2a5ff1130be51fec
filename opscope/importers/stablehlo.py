"""StableHLO/CHLO/VHLO → linalg on tensors in a plain `func.func`, in-process.

Runs IREE's own StableHLO input pipeline (`iree-stablehlo-input-transformation-pipeline`,
the body of `--iree-input-type=stablehlo`) in the bindings' context: VHLO deserialization,
CHLO legalization, control flow to scf, shape cleanup, inlining, then StableHLO → linalg
(+ `iree_linalg_ext` for sort/scatter/fft). It keeps `func.func` (no `util.func` ABI
wrapper is added; measured on IREE 3.13), so no sub-pass selection is needed; the module's
name (`module @jit_f`) is dropped so the runtime finds `module.main` as for every other
importer. Ops it
cannot lower are a one-line error naming the op and its site, plus a reproducer.
"""

from __future__ import annotations

import os
import re

from iree.compiler import ir

from opscope.errors import OpscopeError
from opscope.importers.jax_names import rename_jax_sites, scope_path, typed, user_frame
from opscope.importers.phase import first_op, run_phase, save_input
from opscope.ir.arguments import function_args
from opscope.ir.progress import phase
from opscope.ir.sites import location_name

PIPELINE = "builtin.module(iree-stablehlo-input-transformation-pipeline)"
SOURCE_DIALECTS = ("stablehlo.", "chlo.", "vhlo.")
_ILLEGAL = re.compile(r"operation '([\w.$]+)'")


def first_stablehlo_op(module: ir.Module) -> ir.Operation | None:
    """The first op of the StableHLO, CHLO or VHLO dialects, or None."""
    return first_op(module, SOURCE_DIALECTS)


def describe_location(loc: ir.Location) -> str:
    """'attn/q (model.py:12)': the site name (JAX scope path or NameLoc) and the user's line."""
    loc = typed(loc)
    jax_path = scope_path(loc)
    name = jax_path if jax_path is not None else location_name(loc)
    frame = user_frame(loc)
    where = f"{os.path.basename(frame.filename)}:{frame.start_line}" if frame is not None else ""
    if name and where:
        return f"{name} ({where})"
    return name or where or str(loc)


def _entry_args(module: ir.Module) -> None:
    """Check the entry function's arguments (`main`, else the first function) are static tensors."""
    funcs = [op.operation for op in module.body.operations if op.operation.name == "func.func"]
    names = [ir.StringAttr(op.attributes["sym_name"]).value for op in funcs]
    if names:
        function_args(module, "main" if "main" in names else None)


def lower_stablehlo(module: ir.Module) -> ir.Module:
    """Lower a StableHLO module to linalg on tensors in place, name JAX sites; returns it. A dynamic
    dim in the entry function's arguments is the one line every route gives, before lowering (a
    symbolic batch otherwise fails inside the pipeline, at a reshape far from the cause)."""
    _entry_args(module)
    phase("lower StableHLO to linalg")
    run = run_phase(module, PIPELINE)
    if run.failed:
        msg = run.message
        where = describe_location(run.location) if run.location else "an unknown location"
        repro = _reproducer(run.input)
        if (m := _ILLEGAL.search(msg)) and "illegal" in msg:
            raise OpscopeError(
                f"unsupported op '{m.group(1)}' at {where}: IREE's StableHLO input pipeline cannot "
                f"lower it to linalg{repro}"
            ) from None
        raise OpscopeError(f"lowering StableHLO to linalg failed at {where}: {msg}{repro}") from None
    left = first_stablehlo_op(module)
    if left is not None:
        raise OpscopeError(
            f"unsupported op '{left.name}' at {describe_location(left.location)} is left after "
            f"lowering StableHLO to linalg{_reproducer(run.input)}"
        )
    rename_jax_sites(module)
    if "sym_name" in module.operation.attributes:  # `module @jit_f`: IREE would name the VM module jit_f
        del module.operation.attributes["sym_name"]
    return module


def _reproducer(data: bytes) -> str:
    """'; reproducer: opscope-opt -p '...' <file>' after saving the input bytecode, else ''."""
    path = save_input(data, "opscope-stablehlo-")
    return f"; reproducer: opscope-opt -p 'iree-stablehlo-input-transformation-pipeline' {path}" if path else ""
