"""`opscope-compile`: a drop-in for `iree-compile` that instruments the module first.

It takes iree-compile's flags and inputs unchanged, runs an opscope pipeline in-process
(`--opscope-pipeline=...`, default `inject-matmul-stats,lower-opscope`), then IREE's
pipeline in the same process, and writes the output plus the manifest sidecar
(`<output>.opscope.json`, or `--opscope-manifest=PATH`).

    opscope-compile model.mlir --iree-hal-target-device=local \\
        --iree-hal-local-target-device-backends=llvm-cpu -o model.vmfb
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path

from opscope.errors import OpscopeError
from opscope.ir.loading import load_module, module_bytecode
from opscope.ir.manifest import Manifest
from opscope.pipeline.textual import run_pipeline
from opscope.run.compile import _compile, check_compilable
from opscope.run.targets import Target

DEFAULT_PIPELINE = "inject-matmul-stats,lower-opscope"
USAGE = "usage: opscope-compile [--opscope-pipeline=P] [--opscope-manifest=PATH] INPUT [iree-compile flags] -o OUTPUT"


def split_args(argv: list[str]) -> dict:
    """Separate opscope's own flags, the input, the output and IREE's flags."""
    out = {"pipeline": DEFAULT_PIPELINE, "manifest": None, "input": None, "output": "-", "flags": []}
    i = 0
    while i < len(argv):
        a = argv[i]
        if a.startswith("--opscope-pipeline="):
            out["pipeline"] = a.split("=", 1)[1]
        elif a.startswith("--opscope-manifest="):
            out["manifest"] = a.split("=", 1)[1]
        elif a in ("-o", "--output-file", "--o"):
            if i + 1 >= len(argv):
                raise OpscopeError(f"{a} needs a file name")
            out["output"] = argv[i + 1]
            i += 1
        elif a.startswith(("-o=", "--output-file=", "--o=")):
            out["output"] = a.split("=", 1)[1]
        elif a == "-" or not a.startswith("-"):
            if out["input"] is not None:
                raise OpscopeError(f"more than one input file: {out['input']} and {a}")
            out["input"] = a
        else:
            out["flags"].append(a)
        i += 1
    if out["input"] is None:
        raise OpscopeError("no input file (" + USAGE + ")")
    return out


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    logging.basicConfig(format="opscope-compile: warning: %(message)s", level=logging.WARNING)
    if argv and argv[0] in ("-h", "--help"):
        print(__doc__.strip() + "\n\n" + USAGE)
        return 0
    try:
        a = split_args(argv)
        module = load_module(a["input"])
        if a["pipeline"]:
            run_pipeline(module, a["pipeline"])
        check_compilable(module)
        compile_to = next((f.split("=", 1)[1] for f in a["flags"] if f.startswith("--compile-to=")), "end")
        flags = tuple(f for f in a["flags"] if not f.startswith("--compile-to="))
        kind = "vm" if compile_to == "end" else "ir"  # like iree-compile: --compile-to=vm prints VM IR
        result = _compile(
            module_bytecode(module),
            Target("iree-compile", (), "", ""),
            flags,
            False,
            kind,
            compile_to=None if compile_to == "end" else compile_to,
        )
        manifest = Manifest.from_module(module)
        manifest.flags = list(a["flags"])
        if a["output"] == "-":
            sys.stdout.buffer.write(result.vmfb)
            if a["manifest"]:
                manifest.save(a["manifest"])
        else:
            Path(a["output"]).write_bytes(result.vmfb)
            manifest.save(a["manifest"] or a["output"] + ".opscope.json")
        return 0
    except OpscopeError as e:
        print(f"opscope-compile: error: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
