"""`opscope graph` and `opscope view`: a model's graph and a run's statistics in Model Explorer.

opscope graph minilm -o g                   # the linalg graph as Model Explorer's graph JSON
opscope graph RUN -o g                      # ... with one node-data file per statistic the run recorded
opscope view RUN --no-browser               # Model Explorer on 127.0.0.1 with both loaded (opscope[viewer])
"""

from __future__ import annotations

import argparse

import opscope
from opscope.cli.arguments import SOURCES, add_format, report_format
from opscope.cli.progress import progress

RUN_OR_SOURCE = "a profile run folder (its run.json names the model; its statistics become node data), or " + SOURCES


def register(sub: argparse._SubParsersAction) -> None:
    """Add graph and view."""
    p = sub.add_parser("graph", help="the model's linalg graph (and a run's statistics on it) for Model Explorer")
    p.add_argument("source", help=RUN_OR_SOURCE)
    p.add_argument("-o", "--out", required=True, metavar="DIR", help="the folder graph.json and node_data/ go to")
    p.add_argument("--model", help="the model a run profiled (default: the one its run.json names)")
    add_format(p, "what was written, as JSON")
    p.set_defaults(fn=_cmd_graph)

    p = sub.add_parser(
        "view", help="Model Explorer on 127.0.0.1 with the graph and a run's statistics loaded (opscope[viewer])"
    )
    p.add_argument("source", help="a folder `opscope graph` wrote, or " + RUN_OR_SOURCE)
    p.add_argument(
        "-o", "--out", metavar="DIR", help="keep the graph and node data in DIR (default: a temporary folder)"
    )
    p.add_argument(
        "--host", default="127.0.0.1", help="the address to listen on (default 127.0.0.1: this machine only)"
    )
    p.add_argument("--port", type=int, default=8080, help="the port (default 8080, else the next free one to 8099)")
    p.add_argument("--no-browser", action="store_true", help="do not open a browser: print the address only")
    p.set_defaults(fn=_cmd_view)


def _cmd_graph(args) -> int:
    from opscope import graph

    export = graph(args.source, args.out, model=args.model, progress=progress("graph"))
    print(opscope.render(export, report_format(args)), end="\n" if args.json else "")
    return 0


def _cmd_view(args) -> int:
    from opscope import view

    view(
        args.source,
        out=args.out,
        host=args.host,
        port=args.port,
        browser=not args.no_browser,
        progress=progress("view"),
    )
    return 0
