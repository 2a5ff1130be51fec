"""IR tools: demo models as MLIR (`demo`), importing a model to linalg (`import`), listing
its sites (`sites`), and the target table (`targets`)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import opscope
from opscope.cli.arguments import add_source


def register(sub: argparse._SubParsersAction) -> None:
    """Add demo, import and sites."""
    de = sub.add_parser("demo", help="print a demo model as MLIR (linalg on tensors)")
    de.add_argument("kind", choices=opscope.DEMO_KINDS)
    de.add_argument("--layers", type=int, default=2)
    de.add_argument("--d-model", type=int, default=64)
    de.add_argument("--seq", type=int, default=16, help="tokens (rows)")
    de.add_argument("-o", "--output", help="write to a file instead of stdout")
    de.set_defaults(fn=_cmd_demo)

    im = sub.add_parser(
        "import",
        help="import a model (.onnx, .pt2, .jaxexport, .mlir in torch/StableHLO/linalg "
        "form, a zoo name) to linalg MLIR",
    )
    add_source(im)
    im.add_argument("-o", "--output", required=True, help="model.mlir (text with locations) or model.mlirbc")
    im.set_defaults(fn=_cmd_import)

    si = sub.add_parser("sites", help="list the matmul sites of a model")
    add_source(si)
    si.set_defaults(fn=_cmd_sites)


def register_targets(sub: argparse._SubParsersAction) -> None:
    """Add targets (listed last in `opscope --help`)."""
    ta = sub.add_parser("targets", help="list targets and whether they run here")
    ta.set_defaults(fn=_cmd_targets)


def _cmd_demo(args) -> int:
    text = opscope.demo(args.kind, layers=args.layers, d_model=args.d_model, seq=args.seq)
    if args.output:
        Path(args.output).write_text(text)
    else:
        sys.stdout.write(text if text.endswith("\n") else text + "\n")
    return 0


def _cmd_import(args) -> int:
    module = opscope.load_model(args.source)
    out = opscope.save_model(module, args.output)  # text keeps locations (the site names)
    sites = opscope.sites(module)
    print(f"imported {args.source} -> {out}: {len(sites)} matmul sites")
    return 0


def _cmd_sites(args) -> int:
    print(opscope.render(opscope.sites(args.source)), end="")
    return 0


def _cmd_targets(args) -> int:
    print(opscope.render(opscope.targets()), end="")
    return 0
