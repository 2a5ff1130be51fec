"""`opscope live`: serve a model over a request trace, 1 call in N sampled, and report what the sketches say."""

from __future__ import annotations

import argparse

import opscope
from opscope.cli.arguments import (
    add_dask,
    add_format,
    add_parameters,
    add_sketches,
    add_source,
    add_target,
    parameters,
    report_format,
    sketch_config,
    write_html,
)
from opscope.cli.progress import progress


def register(sub: argparse._SubParsersAction) -> None:
    """Add live."""
    lv = sub.add_parser(
        "live",
        help="serve a request trace, 1 call in N instrumented: recurrence (memoize?), hot "
        "inputs, drift, loads, in bounded memory",
    )
    add_source(
        lv,
        optional=True,
        default="the reference's demo: a 4-layer MLP, 500 requests over a pool of 8, every 5th sampled",
    )
    add_target(lv)
    lv.add_argument("--every", type=int, help="instrument 1 call in N (default 16; the demo 5)")
    lv.add_argument("--requests", type=int, help="requests in the trace (default 1000; the demo 500)")
    lv.add_argument(
        "--pool",
        type=int,
        help="distinct inputs the trace draws from: corpus sentences for a zoo text "
        "model, the model's own inputs for other zoo models, generated ones for a file (default 64; "
        "the demo 8)",
    )
    lv.add_argument("--zipf", type=float, help="Zipf exponent of the draws, 0 = uniform (default 1.1; the demo 0)")
    lv.add_argument("--seed", type=int, default=0, help="seed of the trace's order (default 0)")
    lv.add_argument(
        "--workers",
        type=int,
        default=1,
        metavar="K",
        help="serve the trace in K shares (share w: requests w, w+K, ...), each a Dask job on --dask's workers "
        "(default local:K, K worker processes here; needs pip install 'opscope[dask]'), and merge their sketches; "
        "a worker that dies has its share served again elsewhere (default 1: this process)",
    )
    add_dask(lv, "the trace's shares (a job per share; default local:K with --workers K)")
    lv.add_argument(
        "--csv", help="write the sampled statistics as tidy CSV (`opscope mine` reads it), one step per snapshot"
    )
    lv.add_argument("--parquet", help="also write the tidy table as Parquet (needs --csv)")
    lv.add_argument("--state", help="save the sketches as JSON (mergeable) at every snapshot and at the end")
    lv.add_argument(
        "--snapshot-every",
        type=int,
        default=0,
        help="sampled calls between snapshots (default 0: once, at the end; shares on workers: once, merged, "
        "at the end)",
    )
    lv.add_argument("--force", action="store_true", help="overwrite --csv, --parquet, --state")
    add_format(lv, "print the report as JSON")
    add_parameters(lv, "in a temporary folder, for both builds and every worker", dtype=False)
    lv.add_argument(
        "--sites",
        default="",
        metavar="REGEX",
        help="sample only the sites whose names match this regex (lhs fingerprints and loads stay; default all)",
    )
    add_sketches(
        lv,
        sites=False,
        lean="live's own lean set, the default (`StatConfig.live()`: each site's lhs, seven scalars and the "
        "elemsig fingerprint, one read of it)",
        hist_bins="a histogram of N fixed bins over [-6, 6] per sampled tensor (a snapshot holds the mean over its "
        "calls; workers merge by adding them; default none)",
        roles="default lhs; lhs must stay: the fingerprints read it",
    )
    lv.add_argument(
        "--merge",
        nargs="+",
        metavar="STATE",
        help="serve nothing: merge saved sketches (--state files "
        "of runs of the same model, from any machine) and print their report",
    )
    lv.set_defaults(fn=_cmd_live)


def _cmd_live(args) -> int:
    if args.merge:
        from opscope.errors import OpscopeError

        if args.source:
            raise OpscopeError("live: --merge reads saved sketches; give no model with it")
        report = opscope.merge_live(args.merge)
        print(opscope.render(report, report_format(args)))
        write_html(args, report)
        return 0
    run = opscope.live(
        args.source,
        every=args.every,
        requests=args.requests,
        pool=args.pool,
        zipf=args.zipf,
        seed=args.seed,
        workers=args.workers,
        target=args.target,
        csv=args.csv,
        parquet=args.parquet,
        state=args.state,
        snapshot_every=args.snapshot_every,
        force=args.force,
        sites=args.sites,
        config=sketch_config(args, live=True),
        dask=args.dask,
        progress=progress("live") if args.dask or args.workers > 1 else None,
        **parameters(args),
    )
    print(opscope.render(run, report_format(args)))
    write_html(args, run)
    if args.csv and not args.json:
        print(f"\ntidy statistics of the sampled calls: {args.csv} (`opscope mine {args.csv}`)")
    return 0
