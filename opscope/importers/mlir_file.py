"""`.mlir`/`.mlirbc` files and in-memory modules: detect the input dialect and lower it.

linalg (and anything else that is neither StableHLO nor torch) is kept as is; StableHLO,
CHLO or VHLO goes through `opscope.importers.stablehlo`; the torch dialect (FX or ONNX
import form) goes through `opscope.importers.torch_lowering`. Text or bytecode alike.
`write_mlir` is the other direction (`opscope import SOURCE -o model.mlir[bc]`).
"""

from __future__ import annotations

import sys
from pathlib import Path

from iree.compiler import ir

from opscope.errors import OpscopeError
from opscope.importers.stablehlo import SOURCE_DIALECTS as STABLEHLO_DIALECTS
from opscope.importers.stablehlo import lower_stablehlo
from opscope.ir.loading import load_module, module_text, new_context

TORCH_DIALECTS = ("torch.", "torch_c.", "tm_tensor.")
MLIR_SUFFIXES = (".mlir", ".mlirbc")


def detect_dialect(module: ir.Module) -> str:
    """'torch', 'stablehlo' or 'linalg' (everything else), from the first source-dialect op."""
    found: list[str] = []

    def visit(op):
        if op.name.startswith(TORCH_DIALECTS):
            found.append("torch")
        elif op.name.startswith(STABLEHLO_DIALECTS):
            found.append("stablehlo")
        else:
            return ir.WalkResult.ADVANCE
        return ir.WalkResult.INTERRUPT

    module.operation.walk(visit)
    return found[0] if found else "linalg"


def to_linalg(module: ir.Module) -> ir.Module:
    """Lower `module` from its detected dialect to canonical linalg (in place); returns it."""
    dialect = detect_dialect(module)
    if dialect == "stablehlo":
        return lower_stablehlo(module)
    if dialect == "torch":
        try:
            from opscope.importers.torch_lowering import lower_torch
        except ImportError as e:
            raise OpscopeError(f"lowering torch-dialect MLIR is unavailable here ({e})") from None
        return lower_torch(module)
    return module


def import_mlir(path: str | Path, *, context: ir.Context | None = None) -> ir.Module:
    """Read an `.mlir` (text) or `.mlirbc` (bytecode) file and lower it to canonical linalg."""
    p = Path(path)
    if str(path) != "-" and p.suffix.lower() not in MLIR_SUFFIXES:
        raise OpscopeError(f"{p}: not an MLIR file (expected {' or '.join(MLIR_SUFFIXES)})")
    return to_linalg(load_module(path, context or new_context()))


def write_mlir(module: ir.Module, path: str | Path) -> None:
    """Write `.mlirbc` as bytecode, anything else ('-' = stdout) as text with locations."""
    if str(path) == "-":
        sys.stdout.write(module_text(module, debug_info=True))
        return
    p = Path(path)
    try:
        if p.suffix.lower() == ".mlirbc":
            with open(p, "wb") as f:
                module.operation.write_bytecode(f)
        else:
            p.write_text(module_text(module, debug_info=True))
    except OSError as e:
        raise OpscopeError(f"cannot write {p}: {e.strerror}") from None
