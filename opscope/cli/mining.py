"""Mining commands: `mine`."""

from __future__ import annotations

import argparse
import logging

import opscope
from opscope.cli.arguments import add_format, report_format


def register(sub: argparse._SubParsersAction) -> None:
    """Add mine."""
    mi = sub.add_parser("mine", help="mine tidy CSV/Parquet sketches for exploitable structure")
    mi.add_argument("source", nargs="+", help="tidy CSV/Parquet files, folders of them, or globs")
    mi.add_argument("--costs", help="site,flops sidecar (default: <csv>.sites or site_costs.csv beside it)")
    add_format(mi, "machine-readable output", markdown="a Markdown report")
    mi.set_defaults(fn=_cmd_mine)


def _cmd_mine(args) -> int:
    logging.getLogger("opscope").setLevel(logging.ERROR)  # notes are part of the report
    report = opscope.mine(args.source, costs=args.costs)
    print(opscope.render(report, report_format(args)))
    return 0
