"""Static-analysis commands (nothing runs the model): `shapes`, `bytes`, `motifs`, `flow`."""

from __future__ import annotations

import argparse
import sys

import opscope
from opscope.cli.arguments import add_format, add_source, add_target, report_format, write_html

RIDGE_HELP = "roofline ridge, FLOP/byte (default: the target's nominal ridge, `opscope targets`)"


def register(sub: argparse._SubParsersAction) -> None:
    """Add shapes, bytes, motifs and flow."""
    sh = _add_analysis(sub, "shapes", "hot GEMM shapes (batch, M, K, N, dtype) by FLOP share: static", _cmd_shapes, 10)
    sh.add_argument("--ridge", type=float, default=None, help=RIDGE_HELP)
    add_target(sh)
    by = _add_analysis(
        sub, "bytes", "exact FLOPs and bytes per op (or per IREE dispatch), roofline: static", _cmd_bytes, 12
    )
    by.add_argument("--ridge", type=float, default=None, help=RIDGE_HELP)
    by.add_argument("--dispatches", action="store_true", help="per fused dispatch, as IREE forms them")
    add_target(by)
    mo = _add_analysis(sub, "motifs", "recurring op chains (fusion candidates): static", _cmd_motifs, 12)
    mo.add_argument("--min-len", type=int, default=2)
    mo.add_argument("--max-len", type=int, default=6)
    mo.add_argument("--min-count", type=int, default=2)
    mo.add_argument("--dump", metavar="FILE", help="also write the graph mined as an edge-list dump (`flow`'s)")
    fl = _add_analysis(sub, "flow", "repeated dataflow cones (input sub-DAGs) with fusion hints: static", _cmd_flow, 12)
    fl.add_argument("--min-depth", type=int, default=2)
    fl.add_argument("--max-depth", type=int, default=6)
    fl.add_argument("--min-count", type=int, default=2)
    fl.add_argument(
        "--dump",
        metavar="FILE",
        help="also write the graph mined as the reference's edge-list dump (`idx label in0 in1 …` per line); "
        "`opscope flow FILE.txt` mines such a dump",
    )


def _add_analysis(sub, name: str, help: str, fn, top: int):
    """A static-analysis subcommand: SOURCE (demo kind, zoo name or file), demo sizes, --top, --json."""
    sp = sub.add_parser(name, help=help)
    add_source(sp, optional=True, default="transformer", extra=f"{', '.join(opscope.DEMO_KINDS)} (built-in demos), ")
    sp.set_defaults(source="transformer")
    sp.add_argument("--layers", type=int, default=6, help="demo layers (default 6)")
    sp.add_argument("--d-model", type=int, default=64, help="demo width (default 64)")
    sp.add_argument("--seq", type=int, default=16, help="demo tokens (default 16)")
    sp.add_argument("--top", type=int, default=top, help=f"rows to print (default {top})")
    add_format(sp, "print JSON instead of text")
    sp.set_defaults(fn=fn)
    return sp


def _demo_sizes(args) -> dict:
    return {"layers": args.layers, "d_model": args.d_model, "seq": args.seq}


def _emit(args, report, **options) -> int:
    """Print a report as text, or as JSON with --json."""
    text = opscope.render(report, report_format(args), **options)
    sys.stdout.write(text if text.endswith("\n") else text + "\n")
    write_html(args, report, **options)
    return 0


def _ridge(args) -> float:
    """--ridge, else the target's nominal ridge."""
    return args.ridge if args.ridge is not None else opscope.ridge(args.target)


def _cmd_shapes(args) -> int:
    report = opscope.shapes(args.source, target=args.target, ridge=args.ridge, **_demo_sizes(args))
    return _emit(args, report, top=args.top)


def _cmd_bytes(args) -> int:
    report = opscope.ledger(args.source, dispatches=args.dispatches, target=args.target, **_demo_sizes(args))
    return _emit(args, report, top=args.top, ridge=_ridge(args))


def _cmd_motifs(args) -> int:
    report = opscope.motifs(
        args.source,
        min_len=args.min_len,
        max_len=args.max_len,
        min_count=args.min_count,
        dump=args.dump,
        **_demo_sizes(args),
    )
    return _emit(args, report, top=args.top)


def _cmd_flow(args) -> int:
    report = opscope.flow(
        args.source,
        min_depth=args.min_depth,
        max_depth=args.max_depth,
        min_count=args.min_count,
        dump=args.dump,
        **_demo_sizes(args),
    )
    return _emit(args, report, top=args.top)
