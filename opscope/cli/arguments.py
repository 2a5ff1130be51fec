"""Options more than one command group takes."""

from __future__ import annotations

import argparse

import opscope

SOURCES = (
    f"a zoo name ({', '.join(opscope.ZOO)}) or a model file: .mlir/.mlirbc (linalg, StableHLO or torch "
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


def add_parameters(parser: argparse.ArgumentParser, where: str, dtype: bool = True) -> None:
    """--parameters/--no-parameters: the model's weights in an IREE parameter file (`where`) or
    inside every compiled module, default by the model's size; with `dtype`, --weights-dtype: how
    that file stores float32 weights."""
    parser.add_argument(
        "--parameters",
        action=argparse.BooleanOptionalAction,
        default=None,
        help=f"keep the weights in an IREE parameter file ({where}) instead of inside every compiled "
        f"module: the builds share one mapped copy (default: for models of {opscope.AUTO_BYTES >> 20} MiB or more)",
    )
    if not dtype:
        return
    parser.add_argument(
        "--weights-dtype",
        choices=opscope.WEIGHT_DTYPES,
        help="store the model's float32 weights in the parameter file as this type (half the memory); "
        "the model computes as exported, in f32, on the weights rounded to it",
    )
