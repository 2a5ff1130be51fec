"""The inference-dynamics command: `opscope infer SOURCE` taps attention, routing and
residual blocks of a model (or reads a run already recorded) and prints what they show."""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

import opscope
from opscope.cli.arguments import (
    add_format,
    add_profile_run,
    add_sketches,
    add_source,
    profile_run,
    sketch_config,
    write_html,
)
from opscope.errors import OpscopeError

DYNAMICS_TAPS = "attention,routing,residual"
DEMO = "sink-band"  # what `opscope infer` runs without a model (`opscope.models.infer_demo`)


def register(sub: argparse._SubParsersAction) -> None:
    """Add infer."""
    p = sub.add_parser(
        "infer",
        help="attention sinks and heads, expert routing, residual-block influence "
        "(tap, run, report; or re-read a run folder)",
    )
    add_source(
        p,
        optional=True,
        default=f"{DEMO}, the reference's sink + band attention and top-2 MoE gate",
        extra="a run folder or tidy CSV/Parquet already recorded (re-read, nothing runs), or ",
    )
    add_profile_run(p)
    p.add_argument(
        "--taps",
        default=DYNAMICS_TAPS,
        help=f"what to tap (default {DYNAMICS_TAPS}; add matmul for the value sketches too)",
    )
    add_sketches(p)
    p.add_argument("--heads", action="store_true", help="also print the per-head attention table")
    add_format(p, "the tables as JSON records")
    p.set_defaults(fn=_cmd_infer)


def recorded(source: str) -> bool:
    """Whether `source` names recorded sketches (a run folder, a CSV or Parquet file), not a model."""
    path = Path(source)
    if path.is_dir():
        return any(path.glob("*.csv")) or any(path.glob("*.parquet"))
    return path.suffix.lower() in (".csv", ".parquet")


def _cmd_infer(args) -> int:
    if args.source is None:
        args.source = DEMO
    run = profile_run(args)
    rerun = recorded(args.source)
    given = (
        ("--lean", args.lean),
        ("--hist-bins", args.hist_bins is not None),
        ("--roles", args.roles is not None),
        ("--sites", bool(args.sites)),
    )
    options = [o for o, g in given if g]
    if rerun and options:
        raise OpscopeError(
            f"{args.source}: {', '.join(options)} choose what a model records; a recorded run is re-read as it is"
        )
    if rerun:
        logging.getLogger("opscope").setLevel(logging.ERROR)  # notes are the mine report's
        report = opscope.mine(args.source)
        where = args.source
    else:
        res = opscope.profile(
            args.source, progress=print, taps=args.taps, sites=args.sites, config=sketch_config(args), **run
        )
        report, where = res.report, res.out_dir
        print(opscope.render(res, brief=True))
    d = report.dynamics
    if d is None or d.empty:
        raise OpscopeError(
            f"{where}: no attention, routing or residual sketches (record them with "
            f"`opscope infer MODEL` or `opscope profile MODEL --taps {DYNAMICS_TAPS}`)"
        )
    write_html(args, opscope.report(where))
    if args.json:
        print(opscope.render(d, "json"))
        return 0
    print()
    print(opscope.render(d, heads=args.heads))
    if args.source == DEMO:  # the reference demo prints its own numbers: so does ours, read off the run
        print("\nthe reference demo's numbers (`opscope-infer`):")
        print("\n".join(f"  {line}" for line in opscope.demo_numbers(where)))
    if not rerun:
        print(f"\nwrote {where}/ (`opscope infer {where}` re-reads it; `opscope mine {where}` for everything)")
    return 0
