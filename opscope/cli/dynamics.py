"""The inference-dynamics command: `opscope infer SOURCE` taps attention, routing and
residual blocks of a model (or reads a run already recorded) and prints what they show."""

from __future__ import annotations

import argparse
import json
import logging
import textwrap
from pathlib import Path

import opscope
from opscope.cli.arguments import add_source, add_target
from opscope.cli.recording import compile_text, parity_text, sites_text
from opscope.errors import OpscopeError

DYNAMICS_TAPS = "attention,routing,residual"


def register(sub: argparse._SubParsersAction) -> None:
    """Add infer."""
    p = sub.add_parser(
        "infer",
        help="attention sinks and heads, expert routing, residual-block influence "
        "(tap, run, report; or re-read a run folder)",
    )
    add_source(p, extra="a run folder or tidy CSV/Parquet already recorded (re-read, nothing runs), or ")
    add_target(p)
    p.add_argument("--steps", type=int, default=4, help="calls, a fresh input batch each (default 4)")
    p.add_argument("--out", help="run folder (default opscope-runs/<time>)")
    feed = p.add_mutually_exclusive_group()
    feed.add_argument("--inputs", nargs="+", metavar="FILE", help="the model's inputs, as `profile --inputs`")
    feed.add_argument("--text", metavar="FILE", help="sentences, one per line, tokenized for a text model")
    p.add_argument("--tokenizer", metavar="DIR", help="a local Hugging Face tokenizer folder for --text")
    p.add_argument(
        "--taps",
        default=DYNAMICS_TAPS,
        help=f"what to tap (default {DYNAMICS_TAPS}; add matmul for the value sketches too)",
    )
    p.add_argument("--heads", action="store_true", help="also print the per-head attention table")
    p.add_argument("--json", action="store_true", help="the tables as JSON records")
    p.set_defaults(fn=_cmd_infer)


def recorded(source: str) -> bool:
    """Whether `source` names recorded sketches (a run folder, a CSV or Parquet file), not a model."""
    path = Path(source)
    if path.is_dir():
        return any(path.glob("*.csv")) or any(path.glob("*.parquet"))
    return path.suffix.lower() in (".csv", ".parquet")


def _cmd_infer(args) -> int:
    from opscope.mining import render_dynamics
    from opscope.mining.render import TextRenderer, dynamics_records

    if args.tokenizer and not args.text:
        raise OpscopeError("--tokenizer goes with --text")
    rerun = recorded(args.source)
    if rerun:
        logging.getLogger("opscope").setLevel(logging.ERROR)  # notes are the mine report's
        report = opscope.mine(args.source)
        where = args.source
    else:
        res = opscope.profile(
            args.source,
            target=args.target,
            steps=args.steps,
            out=args.out,
            inputs=args.inputs,
            text=args.text,
            tokenizer=args.tokenizer,
            say=print,
            taps=args.taps,
        )
        report, where = res.report, res.out_dir
        m = res.model
        print(
            f"  {sites_text(m.manifest.sites)}; {compile_text(m.compile_seconds, m.compile_cached)}; "
            f"{res.steps} steps in {res.run_seconds:.2f} s; original results {parity_text(res.parity)} with the taps"
        )
    d = report.dynamics
    if d is None or d.empty:
        raise OpscopeError(
            f"{where}: no attention, routing or residual sketches (record them with "
            f"`opscope infer MODEL` or `opscope profile MODEL --taps {DYNAMICS_TAPS}`)"
        )
    if args.json:
        print(json.dumps(dynamics_records(d), indent=2, ensure_ascii=False))
        return 0
    print()
    for line in render_dynamics.summary(d):
        print(textwrap.fill(line, 120, subsequent_indent="  "))
    for title, text in render_dynamics.tables(d, TextRenderer().table, heads=args.heads):
        print(f"\n{title}:\n{text}")
    print("\n" + textwrap.fill(render_dynamics.LEGEND, 120))
    if not rerun:
        print(f"\nwrote {where}/ (`opscope infer {where}` re-reads it; `opscope mine {where}` for everything)")
    return 0
