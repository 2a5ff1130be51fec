"""The child process of `opscope.importers.isolated`: import one model file, hand back its bytecode.

    python -m opscope.importers.isolated_child SOURCE PARAMETERS OUT [--name NAME]

writes the imported module (its weights in the parameter file PARAMETERS) to OUT as MLIR
bytecode; an `OpscopeError` is one line on stderr after `ERROR_MARK`, exit status 2; each phase
of the import one line after `PHASE_MARK` as it begins.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from opscope.errors import OpscopeError
from opscope.importers.isolated import ERROR_MARK, PHASE_MARK
from opscope.ir.loading import module_bytecode
from opscope.ir.progress import listening


def main(argv: list[str] | None = None) -> int:
    """The child: import, write the module's bytecode to OUT; an OpscopeError as one marked line."""
    parser = argparse.ArgumentParser(prog="python -m opscope.importers.isolated_child")
    parser.add_argument("source")
    parser.add_argument("parameters")
    parser.add_argument("out")
    parser.add_argument("--name")
    parser.add_argument("--weights-dtype")
    args = parser.parse_args(argv)
    from opscope.importers import import_source

    try:
        with listening(lambda text: print(f"{PHASE_MARK}{text}", file=sys.stderr, flush=True)):
            module = import_source(
                args.source,
                name=args.name,
                parameters=args.parameters,
                isolated=False,
                weights_dtype=args.weights_dtype,
            )
    except OpscopeError as e:
        print(f"{ERROR_MARK}{e}", file=sys.stderr)
        return 2
    tmp = f"{args.out}.tmp{os.getpid()}"
    Path(tmp).write_bytes(module_bytecode(module))
    os.replace(tmp, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
