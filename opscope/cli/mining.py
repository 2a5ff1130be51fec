"""Mining commands: `mine`, and `report` (a run as one self-contained HTML page)."""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

import opscope
from opscope.cli.arguments import add_format, report_format, write_html


def register(sub: argparse._SubParsersAction) -> None:
    """Add mine and report."""
    mi = sub.add_parser("mine", help="mine tidy CSV/Parquet sketches for exploitable structure")
    mi.add_argument("source", nargs="+", help="tidy CSV/Parquet files, folders of them, or globs")
    mi.add_argument("--costs", help="site,flops sidecar (default: <csv>.sites or site_costs.csv beside it)")
    add_format(mi, "machine-readable output", markdown="a Markdown report")
    mi.set_defaults(fn=_cmd_mine)
    rp = sub.add_parser("report", help="a recorded run as one self-contained HTML page with its pictures")
    rp.add_argument("run", nargs="+", help="a profile's run folder, or tidy CSV/Parquet files")
    rp.add_argument("-o", "--output", help="the HTML file (default: report.html in the run folder)")
    rp.set_defaults(fn=_cmd_report)


def _cmd_mine(args) -> int:
    logging.getLogger("opscope").setLevel(logging.ERROR)  # notes are part of the report
    report = opscope.mine(args.source, costs=args.costs)
    print(opscope.render(report, report_format(args)))
    if args.html:
        write_html(args, opscope.report(args.source, costs=args.costs))
    return 0


def _cmd_report(args) -> int:
    logging.getLogger("opscope").setLevel(logging.ERROR)  # notes are part of the report
    run = args.run[0] if len(args.run) == 1 else args.run
    out = Path(args.output) if args.output else _default_html(args.run[0])
    out.write_text(opscope.render(opscope.report(run), "html"), encoding="utf-8")
    print(f"wrote {out} ({out.stat().st_size:,} bytes)")
    return 0


def _default_html(run: str) -> Path:
    """report.html inside a run folder, else beside the tidy file."""
    path = Path(run)
    return path / "report.html" if path.is_dir() else path.with_suffix(".html")
