"""Options more than one command group takes, and reading them back as the API's keyword arguments."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import opscope

SOURCES = (
    f"a zoo name ({', '.join(opscope.ZOO)}) or a model file: .mlir/.mlirbc (linalg, StableHLO or torch "
    "dialect), .onnx, .pt2 (torch.export.save), .jaxexport; or MNIST images (an IDX file such as "
    "train-images-idx3-ubyte: the reference's 784→128→10 MLP fed them)"
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


def add_dask(parser: argparse.ArgumentParser, jobs: str = "the jobs") -> None:
    """--dask: where the command's jobs (`jobs`, in words) run (`opscope.jobs.executor`; default this process)."""
    parser.add_argument(
        "--dask",
        metavar="WHERE",
        help=f"run {jobs} on local:N Dask worker processes here, or on a Dask scheduler at tcp://HOST:PORT "
        "(needs pip install 'opscope[dask]'; default: this process)",
    )


def add_shards_dir(parser: argparse.ArgumentParser, run: str) -> None:
    """--shards-dir DIR and --resume: where a --dask `run` keeps each job's result, and reading them back."""
    parser.add_argument(
        "--shards-dir",
        metavar="DIR",
        help="with --dask, each job's result also as a JSON shard in DIR (a folder of its own, removed once the "
        "report is complete): what --resume reads after an interrupted run",
    )
    parser.add_argument(
        "--resume",
        action="store_true",
        help=f"continue an interrupted {run} --dask run: the jobs whose shards are in --shards-dir are read, "
        "not run again",
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


def parameters(args: argparse.Namespace) -> dict[str, Any]:
    """What `add_parameters` registered, as the API's keyword arguments (`parameters`, and
    `weights_dtype` where the command takes it)."""
    return {name: getattr(args, name) for name in ("parameters", "weights_dtype") if hasattr(args, name)}


LEAN_HELP = "the cheaper sketch set (`StatConfig.lean()`: no histogram, per-position or adjacent-row sketches)"


def add_sketches(
    parser: argparse.ArgumentParser,
    sites: bool = True,
    lean: str = LEAN_HELP,
    hist_bins: str = f"histogram bins per tensor (default {opscope.StatConfig().hist_bins}; 0: no histogram)",
    roles: str = "default all three",
) -> None:
    """--lean, --hist-bins, --roles, --dequantize-codes (the `StatConfig` the API takes) and, with
    `sites`, --sites; `lean`, `hist_bins` and `roles` say what they mean for this command."""
    parser.add_argument("--lean", action="store_true", help=lean)
    parser.add_argument("--hist-bins", type=int, metavar="N", help=hist_bins)
    parser.add_argument(
        "--roles",
        metavar="ROLES",
        help=f"which operands of a matmul or convolution are sketched: some of lhs,rhs,out ({roles})",
    )
    parser.add_argument(
        "--dequantize-codes",
        action="store_true",
        help="a quantized site's rhs (integer weight codes, skipped by default) sketched through its scales "
        "as the f32 weight it stands for (IREE keeps that f32 copy in memory)",
    )
    if sites:
        parser.add_argument(
            "--sites",
            default="",
            metavar="REGEX",
            help="tap only the sites whose names match this regex (every kind; `opscope sites MODEL` lists "
            "the matmul sites' names; default all)",
        )


def sketch_config(args: argparse.Namespace, live: bool = False) -> Any:
    """The `StatConfig` of `add_sketches`'s options (default `StatConfig()`). `live`: on live's own set
    (`StatConfig.live()`, None when no option is given; --lean names it), --hist-bins N a fixed-range
    histogram over the default [hist_min, hist_max] (bins of one range add up across calls and
    workers; bins of each call's own scale would not)."""
    given = args.lean or args.hist_bins is not None or args.roles is not None or args.dequantize_codes
    if live and not given:
        return None
    config = opscope.StatConfig.live() if live else opscope.StatConfig.lean() if args.lean else opscope.StatConfig()
    changes: dict[str, Any] = {}
    if args.hist_bins is not None:
        changes["hist_bins"] = args.hist_bins
        if live:
            changes["hist_normalize"] = False
        elif args.hist_bins and not config.hist_normalize:  # lean keeps no range of its own: the default's
            changes["hist_normalize"] = opscope.StatConfig().hist_normalize
    if args.roles is not None:
        changes["roles"] = tuple(r.strip() for r in args.roles.split(",") if r.strip())
    if args.dequantize_codes:
        changes["dequantize_codes"] = True
    return config.replace(**changes) if changes else config


def add_feed(
    parser: argparse.ArgumentParser,
    inputs: str = "the model's inputs, as `profile --inputs`",
    tokenizer: str = "a local Hugging Face tokenizer folder for --text",
) -> None:
    """What the model runs on: --inputs FILE... or --text FILE (not both), and --tokenizer for --text."""
    feed = parser.add_mutually_exclusive_group()
    feed.add_argument("--inputs", nargs="+", metavar="FILE", help=inputs)
    feed.add_argument("--text", metavar="FILE", help="sentences, one per line, tokenized for a text model")
    parser.add_argument("--tokenizer", metavar="DIR", help=tokenizer)


def feed(args: argparse.Namespace) -> dict[str, Any]:
    """What `add_feed` registered, as the API's keyword arguments `inputs`, `text`, `tokenizer`."""
    return {"inputs": args.inputs, "text": args.text, "tokenizer": args.tokenizer}


def add_profile_run(parser: argparse.ArgumentParser, **feed_help: str) -> None:
    """A profile run's options (profile, infer): --target, --steps, --out and what it runs on
    (`add_feed`, its help texts `feed_help`)."""
    add_target(parser)
    parser.add_argument("--steps", type=int, default=4, help="calls, a fresh input batch each (default 4)")
    parser.add_argument("--out", help="run folder (default opscope-runs/<time>)")
    add_feed(parser, **feed_help)


def profile_run(args: argparse.Namespace) -> dict[str, Any]:
    """What `add_profile_run` registered, as `opscope.profile`'s keyword arguments (the API refuses
    a --tokenizer without --text, and --inputs with --text)."""
    return {"target": args.target, "steps": args.steps, "out": args.out, **feed(args)}


def add_format(parser: argparse.ArgumentParser, json: str = "the report as JSON", markdown: str = "") -> None:
    """--json, and with a `markdown` help text also --markdown (not both): the report in that format, not text."""
    formats = parser.add_mutually_exclusive_group() if markdown else parser
    formats.add_argument("--json", action="store_true", help=json)
    if markdown:
        formats.add_argument("--markdown", action="store_true", help=markdown)
    add_html(parser)


def add_html(parser: argparse.ArgumentParser) -> None:
    """--html FILE: the report also as one self-contained HTML page (its folder checked now, before any work)."""
    parser.add_argument(
        "--html",
        metavar="FILE",
        type=_html_path,
        help="also write the report as one self-contained HTML page (no network; opens from disk)",
    )


def _html_path(text: str) -> Path:
    path = Path(text)
    if not path.parent.is_dir():
        raise argparse.ArgumentTypeError(f"no folder {path.parent} for the HTML page {path}")
    return path


def write_html(args: argparse.Namespace, report: Any, **options: Any) -> None:
    """With --html FILE, `report` as one self-contained page in FILE, said on stderr (stdout is the report)."""
    path = getattr(args, "html", None)
    if path is None:
        return
    path.write_text(opscope.render(report, "html", **options), encoding="utf-8")
    print(f"opscope: wrote {path} ({path.stat().st_size:,} bytes)", file=sys.stderr)


def report_format(args: argparse.Namespace) -> str:
    """The format `add_format`'s options ask for, else text: `opscope.render`'s second argument."""
    return "json" if args.json else "markdown" if getattr(args, "markdown", False) else "text"
