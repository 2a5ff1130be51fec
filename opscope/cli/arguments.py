"""Options more than one command group takes."""

from __future__ import annotations

import argparse


def add_target(parser: argparse.ArgumentParser) -> None:
    """--target, default llvm-cpu."""
    parser.add_argument("--target", default="llvm-cpu",
                        help="llvm-cpu (default), vulkan-spirv, ... (`opscope targets`)")
