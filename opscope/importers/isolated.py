"""Import a model file in a child process: the caller gets the module, never the framework's memory.

A torch import holds the whole model in the importing process (the loaded program, then its
traced graphs; torch keeps some of it after the import and the allocator keeps more), and
importing torch itself costs ~0.3 GB. When the weights go to a parameter file anyway, the
module that comes back is small, so `import_isolated` runs the import in a child Python
(`python -m opscope.importers.isolated_child`) and reads back its bytecode: the caller never
imports torch. Measured on a 222 M Llama `.pt2` (0.89 GB of weights), `opscope profile`'s peak
RSS: 2.61 GB importing in-process, 2.15 GB importing here (1.94 GB with the compile in a child
too, `opscope.run.compile`). A failure in the child is the child's own one-line error; each
phase the child enters (`opscope.ir.progress`) is said here as it comes, for the caller's progress.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

from iree.compiler import ir

from opscope.errors import OpscopeError
from opscope.ir.loading import new_context, parse_module
from opscope.ir.progress import phase

ERROR_MARK = "opscope-import-error: "  # how the child hands its one-line error back
PHASE_MARK = "opscope-import-phase: "  # and each phase it enters (`opscope.ir.progress`)


def import_isolated(
    path: str | Path, name: str | None, parameters: str | Path, weights_dtype: str | None = None
) -> ir.Module:
    """`import_source(path, name=name, parameters=parameters, weights_dtype=...)`, run in a child process."""
    with tempfile.TemporaryDirectory(prefix="opscope-import-") as tmp:
        out = Path(tmp) / "module.mlirbc"
        argv = [sys.executable, "-m", "opscope.importers.isolated_child", str(path), str(parameters), str(out)]
        if name is not None:
            argv += ["--name", name]
        if weights_dtype is not None:
            argv += ["--weights-dtype", weights_dtype]
        lines = []
        with subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True) as proc:
            for line in proc.stderr:  # as the child writes it: its phases show while it works
                line = line.rstrip("\n")
                if line.startswith(PHASE_MARK):
                    phase(line[len(PHASE_MARK) :])
                else:
                    lines.append(line)
        failed = [ln[len(ERROR_MARK) :] for ln in lines if ln.startswith(ERROR_MARK)]
        if failed:
            raise OpscopeError(failed[-1])
        if proc.returncode != 0 or not out.exists():
            last = next((ln for ln in reversed(lines) if ln.strip()), f"exit status {proc.returncode}")
            raise OpscopeError(f"importing {path} in a child process failed: {last.strip()}")
        for line in lines:  # the framework's warnings, as an in-process import would show them
            print(line, file=sys.stderr)
        return parse_module(out.read_bytes(), new_context(), name or str(path))
