"""Recording commands: the main job (`profile`) and the drivers (`sweep`, `seq`, `replay`)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import opscope
from opscope.cli.arguments import (
    add_dask,
    add_html,
    add_parameters,
    add_profile_run,
    add_sketches,
    add_source,
    add_target,
    parameters,
    profile_run,
    sketch_config,
    write_html,
)
from opscope.errors import OpscopeError


def register(sub: argparse._SubParsersAction) -> None:
    """Add profile, sweep, seq and replay."""
    pr = sub.add_parser(
        "profile", help="the main job: inject sketches, run, record, mine, report (default: built-in model)"
    )
    add_source(pr, optional=True, default="the built-in transformer")
    add_profile_run(
        pr,
        inputs="the model's inputs: one .npz or .safetensors (arrays arg0, arg1, ...) or one .npy per "
        "argument; an extra leading axis holds one batch per step (default: generated from the "
        "signature: token ids below the vocabulary, masks of ones, N(0,1) floats)",
        tokenizer="a local Hugging Face tokenizer folder for --text (default: the zoo model's own)",
    )
    pr.add_argument(
        "--taps",
        default="all",
        help="what to tap: all (default) or some of matmul, attention, routing, residual, comma-separated",
    )
    pr.add_argument(
        "--sample-rows",
        type=int,
        default=1,
        metavar="K",
        help="sketch 1 row (token) in K of each activation, rows 0, K, 2K, ... (default 1: every row, exact); "
        "the weights stay exact, the manifest and the report say so",
    )
    pr.add_argument(
        "--verify",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="check step 0 against the model run by its own framework: PyTorch (.pt2, zoo: a sample of "
        "every kind of site's sketches, FLOPs, outputs), onnxruntime or jax (outputs); its verdict is the "
        "report's first line and verify.json (default: on for models whose weights stay in the module)",
    )
    add_sketches(pr)
    add_parameters(pr, "weights.irpa in the run folder")
    add_html(pr)
    add_dask(pr, "the steps (a job per shard, merged in step order)")
    pr.add_argument(
        "--shards",
        type=int,
        metavar="N",
        help="with --dask: split the steps in N contiguous shards, one job each (default 8, at most one per step)",
    )
    pr.add_argument(
        "--resume",
        action="store_true",
        help="with --dask: continue the run in --out that was killed mid-way (its recorded steps and finished "
        "shards are kept; give the same model, --steps and --shards)",
    )
    pr.set_defaults(fn=_cmd_profile)

    sw = sub.add_parser("sweep", help="one matmul per shape x 7 distributions x 3 seeds -> tidy CSV")
    add_target(sw)
    sw.add_argument("--out", default="opscope.csv", help="CSV to write (default opscope.csv)")
    sw.add_argument("--resume", action="store_true", help="continue an interrupted sweep in --out")
    sw.add_argument("--force", action="store_true", help="overwrite --out")
    sw.add_argument("--parquet", action="store_true", help="also write <out>.parquet (zstd, same columns)")
    sw.add_argument("--shapes", help="MxKxN[,MxKxN...] (default the reference's three)")
    sw.add_argument("--seeds", help="comma-separated seeds (default 1,2,3)")
    add_sketches(sw, sites=False)  # one matmul per run: --shapes picks them
    add_dask(sw, "the runs (a job per run)")
    sw.set_defaults(fn=_cmd_sweep)

    sq = sub.add_parser("seq", help="decode-like steps: drifting activations, fixed weight -> tidy CSV")
    add_target(sq)
    sq.add_argument("--out", default="opscope_seq.csv", help="CSV to write (default opscope_seq.csv)")
    sq.add_argument("--steps", type=int, default=16)
    sq.add_argument("--force", action="store_true", help="overwrite --out")
    sq.add_argument("--parquet", action="store_true", help="also write <out>.parquet (zstd, same columns)")
    sq.set_defaults(fn=_cmd_seq)

    rp = sub.add_parser("replay", help="repeated inputs (pool) or a slow walk (pool 0) -> tidy CSV, then mine")
    add_target(rp)
    rp.add_argument("--out", default="opscope_replay.csv", help="CSV to write (default opscope_replay.csv)")
    rp.add_argument("--steps", type=int, default=20)
    rp.add_argument("--pool", type=int, default=4, help="distinct inputs replayed at random; 0 = slow random walk")
    rp.add_argument("--force", action="store_true", help="overwrite --out")
    rp.add_argument("--parquet", action="store_true", help="also write <out>.parquet (zstd, same columns)")
    rp.set_defaults(fn=_cmd_replay)


def _cmd_profile(args) -> int:
    res = opscope.profile(
        args.source,
        **profile_run(args),
        progress=print,
        taps=args.taps,
        sites=args.sites,
        config=sketch_config(args).replace(row_stride=args.sample_rows),
        verify=args.verify,
        dask=args.dask,
        shards=args.shards,
        resume=args.resume,
        **parameters(args),
    )
    print(opscope.render(res))
    write_html(args, opscope.report(res))
    return 0


def _parquet_line(args, csv: Path) -> None:
    """With --parquet, the Parquet copy the API wrote beside the CSV."""
    if args.parquet:
        pq = csv.with_suffix(".parquet")
        print(f"  wrote {pq} ({pq.stat().st_size:,} bytes; the CSV is {csv.stat().st_size:,})")


def _cmd_sweep(args) -> int:
    out = Path(args.out)
    try:
        res = opscope.sweep(
            out,
            target=args.target,
            shapes=_shapes(args.shapes) if args.shapes else None,
            seeds=_seeds(args.seeds) if args.seeds else None,
            resume=args.resume,
            force=args.force,
            parquet=args.parquet,
            config=sketch_config(args),
            dask=args.dask,
            progress=(lambda line: print(f"opscope: {line}", file=sys.stderr, flush=True)) if args.dask else None,
        )
    except KeyboardInterrupt:
        print(f"opscope: interrupted; {out} holds every finished run: continue with --resume", file=sys.stderr)
        return 130
    print(opscope.render(res))
    _parquet_line(args, out)
    return 0


def _shapes(text: str) -> tuple[tuple[int, int, int], ...]:
    try:
        shapes = tuple(tuple(int(d) for d in s.lower().split("x")) for s in text.split(","))
    except ValueError:
        shapes = ()
    if not shapes or any(len(s) != 3 or min(s) < 1 for s in shapes):
        raise OpscopeError(f"--shapes wants MxKxN[,MxKxN...], got {text!r}")
    return shapes


def _seeds(text: str) -> tuple[int, ...]:
    try:
        seeds = tuple(int(x) for x in text.split(","))
    except ValueError:
        seeds = ()
    if not seeds or min(seeds) < 0:
        raise OpscopeError(f"--seeds wants non-negative integers N[,N...], got {text!r}")
    return seeds


def _cmd_seq(args) -> int:
    out = Path(args.out)
    res = opscope.seq(out, target=args.target, steps=args.steps, force=args.force, parquet=args.parquet)
    print(opscope.render(res))
    _parquet_line(args, out)
    return 0


def _cmd_replay(args) -> int:
    out = Path(args.out)
    res = opscope.replay(
        out, target=args.target, steps=args.steps, pool=args.pool, force=args.force, parquet=args.parquet
    )
    print(opscope.render(res))
    _parquet_line(args, out)
    print()
    print(opscope.render(opscope.mine(out, costs=res.site_costs)))
    return 0
