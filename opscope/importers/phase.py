"""Running one import phase (a pass pipeline, in place) and what a failure needs to say.

Shared by the StableHLO and torch lowerings: the phase's input is kept as bytecode
(locations included) so a failure can save a reproducer, and the first diagnostic gives
the message and the location of the op that failed.
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

from iree.compiler import ir, passmanager

from opscope.ir.loading import module_bytecode


@dataclass(frozen=True)
class PhaseRun:
    """A phase's input (for a reproducer) and, when it failed, its first diagnostic."""

    input: bytes
    message: str | None = None
    location: ir.Location | None = None
    full: str = ""  # every diagnostic, as MLIR printed them (for a log file; the message is one line)

    @property
    def failed(self) -> bool:
        return self.message is not None


def run_phase(module: ir.Module, pipeline: str) -> PhaseRun:
    """Run `pipeline` (`builtin.module(...)`) on `module` in place."""
    with module.context:
        pm = passmanager.PassManager.parse(pipeline)
    before = module_bytecode(module)
    try:
        pm.run(module.operation)
    except ir.MLIRError as e:
        diags = list(getattr(e, "error_diagnostics", None) or [])
        d = diags[0] if diags else None
        return PhaseRun(before, (d.message if d else str(e)).splitlines()[0], d.location if d else None, str(e))
    return PhaseRun(before)


def save_input(data: bytes, prefix: str, pipeline: str | None = None) -> str | None:
    """Write IR bytecode to a temporary file (and the pipeline beside it as `<file>.pipeline`);
    its path, or None when that fails."""
    try:
        fd, path = tempfile.mkstemp(suffix=".mlirbc", prefix=prefix)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        if pipeline is not None:
            Path(path + ".pipeline").write_text(pipeline + "\n")
        return path
    except OSError:
        return None


def first_op(module: ir.Module, prefixes: tuple[str, ...], skip: tuple[str, ...] = ()) -> ir.Operation | None:
    """The first op whose name starts with one of `prefixes` (and none of `skip`), or None."""
    found: list[ir.Operation] = []

    def visit(op):  # only gathers: exceptions inside walk callbacks lose their message
        if op.name.startswith(prefixes) and not (skip and op.name.startswith(skip)):
            found.append(op)
            return ir.WalkResult.INTERRUPT
        return ir.WalkResult.ADVANCE

    module.operation.walk(visit)
    return found[0] if found else None
