"""Options more than one command group takes."""

from __future__ import annotations

import argparse

from opscope.models.zoo import ZOO

SOURCES = (
    f"a zoo name ({', '.join(ZOO)}) or a model file: .mlir/.mlirbc (linalg, StableHLO or torch "
    "dialect), .onnx, .pt2 (torch.export.save), .jaxexport"
)


def add_source(
    parser: argparse.ArgumentParser, optional: bool = False, default: str | None = None, extra: str = ""
) -> None:
    """The model argument every command that reads a model takes, with the formats it accepts."""
    text = extra + SOURCES + (f"; default {default}" if default else "")
    if optional:
        parser.add_argument("source", nargs="?", help=text)
    else:
        parser.add_argument("source", help=text)


def add_target(parser: argparse.ArgumentParser) -> None:
    """--target, default llvm-cpu."""
    parser.add_argument(
        "--target", default="llvm-cpu", help="llvm-cpu (default), vulkan-spirv, ... (`opscope targets`)"
    )
