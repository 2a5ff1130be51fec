"""`opscope plan`: a profile run's findings as guarded IREE rewrites, each measured; `--apply` writes them.
`opscope kernels`: the reference's kernel bench, every specialization of one matmul through IREE.

opscope plan RUN                               # per site: candidate, guard, σ, estimated vs measured, decision
opscope plan RUN --apply -o specialized.mlir   # ... and the module with every accepted rewrite, measured whole
opscope plan RUN --apply --quality 'cosine_mean>=0.999' -o s.mlir   # the lossy rewrites the model's quality allows
opscope kernels [--target T ...] [--quick]     # f32, W8A16, W4A16 g128, W8A8, factored, sparse-skip; cache vs DRAM
"""

from __future__ import annotations

import argparse

import opscope
from opscope.cli.arguments import add_dask, add_format, add_parameters, parameters, report_format, write_html
from opscope.cli.progress import progress


def register(sub: argparse._SubParsersAction) -> None:
    """Add plan and kernels."""
    _register_kernels(sub)
    p = sub.add_parser(
        "plan",
        help="a run's findings as guarded IREE rewrites of the model, each site measured "
        "as is and rewritten; --apply writes the specialized module",
    )
    p.add_argument("run", metavar="RUN", help="a run folder `opscope profile` wrote")
    p.add_argument("--model", help="the model the run profiled (default: the one its run.json names)")
    p.add_argument("--target", help="compile and time for this target (default: the run's)")
    p.add_argument(
        "--apply",
        action="store_true",
        help="write the module with every accepted rewrite (-o) and measure the whole model against the original",
    )
    p.add_argument("-o", "--out", metavar="FILE", help="where --apply writes the specialized module (.mlir)")
    p.add_argument("--rounds", type=int, default=5, help="alternating timing rounds per variant (default 5)")
    p.add_argument(
        "--min-speedup",
        type=float,
        default=opscope.MIN_SPEEDUP,
        help=f"accept a rewrite measured at least this much faster (default {opscope.MIN_SPEEDUP})",
    )
    p.add_argument(
        "--max-error",
        type=float,
        default=None,
        help=f"a lossy rewrite's relative error of the site's output, at most (default {opscope.MAX_ERROR}; "
        "none with --quality)",
    )
    p.add_argument(
        "--quality",
        metavar="Q",
        help="with --apply: the end-to-end budget on the model's held-out evaluation set: a share of the "
        "task's headline metric to lose (0.001), or gates: 'cosine_mean>=0.999,nn_agreement>=0.98', "
        "'top1_agreement>=0.97,perplexity<=1.02x'; --apply then keeps the lossy rewrites, least site error "
        "per µs saved first, as far as the model stays within it",
    )
    p.add_argument(
        "--kinds",
        default=",".join(opscope.KINDS),
        help=f"the candidate kinds to measure, comma-separated (default all: {','.join(opscope.KINDS)})",
    )
    add_format(p, "the plan as JSON")
    add_parameters(p, "in a temporary folder, for every build; --apply writes it beside -o", dtype=False)
    add_dask(p, "each site's measurements (a job per site: its candidates timed on one worker)")
    p.add_argument(
        "--resume",
        action="store_true",
        help="with --dask: read the site results a killed plan left in the run folder (plan.shards) instead of "
        "measuring those sites again",
    )
    p.set_defaults(fn=_cmd_plan)


def _cmd_plan(args) -> int:
    from opscope import kernel_plan
    from opscope.errors import OpscopeError

    if args.out and not args.apply:
        raise OpscopeError("-o is where --apply writes the specialized module: add --apply")
    plan = kernel_plan(
        args.run,
        args.model,
        target=args.target,
        apply=args.apply,
        out=args.out,
        rounds=args.rounds,
        min_speedup=args.min_speedup,
        max_error=args.max_error,
        kinds=[k.strip() for k in args.kinds.split(",") if k.strip()],
        quality=args.quality,
        progress=progress("plan"),
        **parameters(args),
        dask=args.dask,
        resume=args.resume,
    )
    print(opscope.render(plan, report_format(args)))
    write_html(args, plan)
    return 0


def _register_kernels(sub: argparse._SubParsersAction) -> None:
    k = sub.add_parser(
        "kernels",
        help="the reference's kernel bench through IREE: one matmul as f32, W8A16, W4A16 g128, W8A8, factored "
        "and sparse-skip, timed with their errors; cache vs DRAM; the host's dot-product features",
    )
    k.add_argument(
        "--target",
        action="append",
        help="a target to bench (repeatable; default every target that runs here, `opscope targets`)",
    )
    k.add_argument("--rounds", type=int, default=5, help="alternating timing rounds per variant (default 5)")
    k.add_argument("--quick", action="store_true", help="one 32×128×384 shape, small cache sizes, one round")
    add_format(k, "the bench as JSON")
    k.set_defaults(fn=_cmd_kernels)


def _cmd_kernels(args) -> int:
    report = opscope.kernels(args.target, quick=args.quick, rounds=args.rounds, progress=progress("kernels"))
    print(opscope.render(report, report_format(args)), end="")
    return 0
