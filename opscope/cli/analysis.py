"""Static-analysis commands (nothing runs the model): `shapes`, `bytes`, `motifs`, `flow`."""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys

import opscope
from opscope.cli.arguments import add_source, add_target
from opscope.text.numbers import share as share_text

DEMO_KINDS = ("mlp", "transformer", "moe")
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
    fl = _add_analysis(sub, "flow", "repeated dataflow cones (input sub-DAGs) with fusion hints: static", _cmd_flow, 12)
    fl.add_argument("--min-depth", type=int, default=2)
    fl.add_argument("--max-depth", type=int, default=6)
    fl.add_argument("--min-count", type=int, default=2)


def _add_analysis(sub, name: str, help: str, fn, top: int):
    """A static-analysis subcommand: SOURCE (demo kind, zoo name or file), demo sizes, --top, --json."""
    sp = sub.add_parser(name, help=help)
    add_source(sp, optional=True, default="transformer", extra=f"{', '.join(DEMO_KINDS)} (built-in demos), ")
    sp.set_defaults(source="transformer")
    sp.add_argument("--layers", type=int, default=6, help="demo layers (default 6)")
    sp.add_argument("--d-model", type=int, default=64, help="demo width (default 64)")
    sp.add_argument("--seq", type=int, default=16, help="demo tokens (default 16)")
    sp.add_argument("--top", type=int, default=top, help=f"rows to print (default {top})")
    sp.add_argument("--json", action="store_true", help="print JSON instead of text")
    sp.set_defaults(fn=fn)
    return sp


def _analysis_module(args):
    """The module the static analyses read: a demo kind, a zoo name, or any importable file."""
    src = args.source
    if src not in DEMO_KINDS:
        return opscope.load_model(src)
    from opscope.ir.loading import parse_module
    from opscope.models import demo

    if src == "mlp":  # the reference's motifs graph: every layer relu(x·W + b)
        return parse_module(demo.bias_mlp_module(args.layers, args.d_model, args.seq))
    if src == "transformer":
        return parse_module(demo.transformer_module(args.layers, args.d_model, args.seq, weights="globals"))
    return parse_module(demo.moe_module(args.layers, args.d_model, args.seq))


def _emit(args, report, **options) -> int:
    """Print a report as text, or as JSON with --json."""
    text = opscope.render(report, "json" if args.json else "text", **options)
    sys.stdout.write(text if text.endswith("\n") else text + "\n")
    return 0


def _ridge(args) -> float:
    """--ridge, else the target's nominal ridge."""
    from opscope.run.targets import get_target

    target = get_target(args.target)
    return args.ridge if args.ridge is not None else target.ridge


def _cmd_shapes(args) -> int:
    from opscope.analysis.cost import analyze
    from opscope.analysis.shapes import shape_histogram

    args.ridge = _ridge(args)
    module = _analysis_module(args)
    cost = analyze(module)
    hist = shape_histogram(module, cost.total_flops)
    split = cost.roofline_split(args.ridge)
    doc = {
        "source": args.source,
        "ridge": args.ridge,
        "total_flops": cost.total_flops,
        "total_bytes": cost.total_bytes,
        "roofline": dataclasses.asdict(split),
        **hist.to_dict(),
    }
    classified = split.memory_flops + split.compute_flops
    share = share_text(split.compute_flops, classified) if classified else "-"
    text = (
        f"{args.source}: {cost.total_flops:,} FLOPs, {cost.total_bytes:,} bytes moved (static floor), "
        f"{_per_byte(cost.total_flops, cost.total_bytes)} FLOP/B; at ridge {args.ridge:g} FLOP/B "
        f"{share} of FLOPs are in compute-bound ops\n" + opscope.render(hist, top=args.top)
    )
    print(json.dumps(doc, indent=2, ensure_ascii=False) if args.json else text.rstrip("\n"))
    return 0


def _per_byte(flops: int, nbytes: int) -> str:
    return f"{flops / nbytes:.2f}" if nbytes else "-"


def _cmd_bytes(args) -> int:
    args.ridge = _ridge(args)
    module = _analysis_module(args)
    if args.dispatches:
        from opscope.analysis.dispatch import analyze_dispatches

        report = analyze_dispatches(module, args.target)
        return _emit(args, report, top=args.top, ridge=args.ridge)
    from opscope.analysis.cost import analyze

    cost = analyze(module)
    return _emit(args, cost, top=args.top, ridge=args.ridge)


def _cmd_motifs(args) -> int:
    from opscope.analysis.motifs import linear_motifs

    report = linear_motifs(_analysis_module(args), args.min_len, args.max_len, args.min_count)
    return _emit(args, report, top=args.top)


def _cmd_flow(args) -> int:
    from opscope.analysis.cones import dataflow_cones

    report = dataflow_cones(_analysis_module(args), args.min_depth, args.max_depth, args.min_count)
    return _emit(args, report, top=args.top)
