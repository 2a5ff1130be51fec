"""The `opscope` command, a thin layer over the Python API (`import opscope`): one module
per command group, each adding its subcommands.

* `recording`: the main job (`profile`) and the drivers (`sweep`, `seq`, `replay`);
* `mining`: `mine`, `report`;
* `dynamics`: `infer` (attention, routing and residual blocks);
* `ir_tools`: `demo`, `import`, `sites`, `targets`;
* `analysis`: the static analyses (`shapes`, `bytes`, `motifs`, `flow`);
* `parity`: two builds compared op by op (`parity`);
* `whatif`: rewrites measured end to end on real data (`whatif`);
* `probe`: host probes of weights and a plan under a byte budget (`probe`, `layers`, `actions`);
* `specialize`: a run's findings as guarded, measured IREE rewrites (`plan`);
* `explorer`: a model's graph and a run's statistics in Model Explorer (`graph`, `view`);
* `live`: a model served over a request trace, 1 call in N sampled into bounded sketches (`live`).

Every subcommand prints one-line errors (`opscope: error: ...`) for bad input.
"""

from __future__ import annotations

import argparse
import logging
import sys

from opscope.cli import (
    analysis,
    dynamics,
    explorer,
    ir_tools,
    live,
    mining,
    parity,
    probe,
    recording,
    specialize,
    whatif,
)
from opscope.errors import OpscopeError


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="opscope", description="Which specialized kernels does a model deserve?")
    p.add_argument("--version", action="store_true", help="print opscope's version and IREE's, and exit")
    sub = p.add_subparsers(dest="command")
    recording.register(sub)
    mining.register(sub)
    dynamics.register(sub)
    ir_tools.register(sub)
    analysis.register(sub)
    parity.register(sub)
    whatif.register(sub)
    probe.register(sub)
    specialize.register(sub)
    explorer.register(sub)
    live.register(sub)
    ir_tools.register_targets(sub)
    return p


def version_text() -> str:
    """`opscope 0.1.0 (iree-base-compiler 3.13.0, iree-base-runtime 3.13.0, Python 3.11.7)`: what a bug report needs."""
    import platform
    from importlib.metadata import PackageNotFoundError, version

    import opscope

    def installed(dist: str) -> str:
        try:
            return f"{dist} {version(dist)}"
        except PackageNotFoundError:
            return f"{dist} not installed"

    deps = ", ".join(installed(d) for d in ("iree-base-compiler", "iree-base-runtime"))
    return f"opscope {opscope.__version__} ({deps}, Python {platform.python_version()})"


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.version:
        print(version_text())
        return 0
    logging.basicConfig(format="opscope: warning: %(message)s", level=logging.WARNING)
    if not getattr(args, "fn", None):
        args = parser.parse_args(["profile"])
    log = logging.getLogger("opscope")
    level = log.level  # a command that quiets opscope's notes (mine, report) quiets them for itself only:
    try:  # `main` called again in the same process (tests, notebooks) logs as before
        return args.fn(args)
    except OpscopeError as e:
        print(f"opscope: error: {e}", file=sys.stderr)
        return 1
    except BrokenPipeError:  # `opscope ... | head`
        sys.stderr.close()
        return 0
    finally:
        log.setLevel(level)


if __name__ == "__main__":
    sys.exit(main())
