"""`opscope probe`, `layers`, `actions`, `dump`: host probes of a model's weights, a plan under a byte budget.

opscope probe minilm                        # per weight: ranks, quant errors, 2:4, ternary, verdict
opscope probe weights/                      # every .tensor/.npy/.safetensors file in a directory
opscope layers minilm --budget 0.4          # one option per layer within 40 % of the bytes (DADO)
opscope layers minilm --budget 0.4 --measure   # ... built into the model and measured end to end
opscope layers minilm --budget 0.13 --objective measured   # the plan the model's outputs prefer
opscope layers smollm2 --quant              # int8/int4/int3 headroom by depth and kind, a recipe
opscope actions minilm --from RUN           # cheapest option within 2 % per layer, skippable blocks
opscope dump minilm --out T --activations   # weights and whole activations to files (then: probe T)
"""

from __future__ import annotations

import argparse
from collections.abc import Callable

import opscope
from opscope.cli.arguments import (
    SOURCES,
    add_dask,
    add_format,
    add_parameters,
    add_shards_dir,
    add_target,
    parameters,
    report_format,
    write_html,
)
from opscope.cli.progress import progress
from opscope.errors import OpscopeError

TENSORS = "or tensors: a .tensor (u32 rows, u32 cols, f32 row-major), .npy or .safetensors file, or a directory of them"


def _add_command(
    sub: argparse._SubParsersAction,
    name: str,
    help: str,
    fn: Callable[[argparse.Namespace], int],
    optional: bool = True,
) -> argparse.ArgumentParser:
    """A subcommand of this group, run by `fn`: SOURCE (weights or a model; a model only and required
    unless `optional`) and --sites, before its own options."""
    p = sub.add_parser(name, help=help)
    if optional:
        p.add_argument(
            "source",
            nargs="?",
            help=SOURCES + "; " + TENSORS + "; default the built-in transformer "
            "with the weight mix `opscope profile` runs",
        )
    else:
        p.add_argument("source", help=SOURCES)
    p.add_argument(
        "--sites",
        default="",
        metavar="REGEX",
        help="only the weights of the matmul sites (or the tensors) whose names this regex finds",
    )
    p.set_defaults(fn=fn)
    return p


def register(sub: argparse._SubParsersAction) -> None:
    """Add probe, layers, actions, timing, dump."""
    p = _add_command(
        sub, "probe", "host probes of every weight: ranks, quantization, 2:4, ternary, verdict", _cmd_probe
    )
    add_format(p)

    p = _add_command(
        sub,
        "layers",
        "one decomposition or quantization per layer under a byte budget "
        "(greedy or DADO), optionally measured end to end",
        _cmd_layers,
    )
    p.add_argument("--budget", type=float, default=0.4, help="share of the dense weight bytes (default 0.4)")
    p.add_argument("--allocator", choices=("greedy", "dado"), default="dado", help="default dado")
    # the choices are `opscope.probe.allocate.ERRORS`, spelled out so that the CLI's start-up does not load the room
    p.add_argument(
        "--error",
        choices=("sum", "squares", "energy"),
        default="sum",
        help="what the allocators minimize: sum (Σ relative error, the reference's; default), squares "
        "(Σ relative error²), energy (Σ ‖W − Ŵ‖²: a layer counts by its size)",
    )
    p.add_argument("--every", action="store_true", help="every option of every layer, by bytes")
    p.add_argument(
        "--measure",
        action="store_true",
        help="build the plan (and greedy's, uniform int8/int4, the plan at their bytes) into the model "
        "and measure each on its real data",
    )
    p.add_argument(
        "--objective",
        choices=("weights", "measured"),
        default="weights",
        help="what picks the plan: --error (default) or, every plan built and measured (implies "
        "--measure, adds the plans for the other two errors), the model's own outputs",
    )
    p.add_argument(
        "--quant",
        nargs="?",
        type=float,
        const=0.1,
        metavar="INT4_BUDGET",
        help="the quant sweep instead: int8/int4/int3 error by depth and kind, a mixed recipe (int4 "
        "where its error is within INT4_BUDGET, default 0.1)",
    )
    add_target(p)
    p.add_argument("--tokens", type=int, default=2000, help="predicted tokens a causal LM is measured on")
    p.add_argument("--steps", type=int, help="batches to measure on (default: sized by the model's task)")
    add_format(p)
    add_parameters(p, "with --measure: in a temporary folder, for every plan's build", dtype=False)
    add_dask(p, "--measure's builds (a job per plan)")
    add_shards_dir(p, "--measure")

    p = _add_command(
        sub,
        "actions",
        "per layer the cheapest option within a weight error budget; near-identity blocks to skip",
        _cmd_actions,
    )
    p.add_argument("--budget", type=float, default=0.02, help="relative weight error allowed (default 0.02)")
    p.add_argument("--from", dest="run", metavar="RUN", help="a run recorded with the residual taps (skip candidates)")

    p = _add_command(
        sub,
        "timing",
        "every dispatch timed by IREE's dispatch benchmarks: a measured roofline per dispatch, next to the whole call",
        _cmd_timing,
    )
    add_target(p)
    p.add_argument("--repetitions", type=int, default=5, help="benchmark repetitions per dispatch (median; default 5)")
    p.add_argument(
        "--trace",
        metavar="FILE",
        help="also write the dispatches as Chrome trace-event JSON (Perfetto, chrome://tracing): "
        "measured times end to end, FLOPs and bytes, a counter track of achieved GFLOP/s",
    )
    add_format(p)

    p = _add_command(
        sub,
        "dump",
        "a model's weights and whole activations to tensor files (for probe, layers)",
        _cmd_dump,
        optional=False,
    )
    p.add_argument("--out", required=True, metavar="DIR", help="the directory the files go to")
    p.add_argument(
        "--activations",
        action="store_true",
        help="also the whole tapped tensors of --steps calls (the dump-tensors pass)",
    )
    p.add_argument("--no-weights", dest="weights", action="store_false", help="activations only")
    p.add_argument(
        "--role",
        choices=("lhs", "rhs", "out"),
        default="lhs",
        help="which tensor of each site: its input activation (lhs, default), rhs or result",
    )
    p.add_argument("--steps", type=int, default=1, help="calls whose activations are stacked (default 1)")
    p.add_argument("--max-mib", type=float, default=256, help="the tapped tensors of one call, at most (MiB)")
    p.add_argument(
        "--format",
        dest="fmt",
        choices=("npy", "tensor", "safetensors"),
        default="npy",
        help="npy (default), tensor (u32 rows, u32 cols, f32 row-major) or one .safetensors file",
    )
    add_target(p)


def _show(args: argparse.Namespace, report: object, **options: object) -> None:
    """Print the report as --json asks, else as text (whose renderers end their own last line)."""
    print(opscope.render(report, report_format(args), **options), end="\n" if args.json else "")
    write_html(args, report, **options)


def _cmd_probe(args) -> int:
    from opscope import probe_tensors

    report = probe_tensors(args.source, sites=args.sites, progress=progress("probe"))
    _show(args, report)
    return 0


def _cmd_layers(args) -> int:
    from opscope import plan_layers, quant_sweep

    if args.quant is not None:
        if args.measure or args.every or args.objective != "weights" or args.error != "sum" or args.dask:
            raise OpscopeError("--quant is its own report: drop --measure, --objective, --error, --every and --dask")
        report = quant_sweep(args.source, int4_budget=args.quant, sites=args.sites, progress=progress("layers"))
        print(opscope.render(report), end="")
        write_html(args, report)
        return 0
    report = plan_layers(
        args.source,
        budget=args.budget,
        allocator=args.allocator,
        error=args.error,
        sites=args.sites,
        measure=args.measure,
        objective=args.objective,
        target=args.target,
        tokens=args.tokens,
        steps=args.steps,
        progress=progress("layers"),
        **parameters(args),
        dask=args.dask,
        shards_dir=args.shards_dir,
        resume=args.resume,
    )
    _show(args, report, every=args.every)
    return 0


def _cmd_actions(args) -> int:
    from opscope import layer_actions

    report = layer_actions(
        args.source, budget=args.budget, run=args.run, sites=args.sites, progress=progress("actions")
    )
    print(opscope.render(report), end="")
    write_html(args, report)
    return 0


def _cmd_dump(args) -> int:
    from opscope import dump_tensors

    files = dump_tensors(
        args.source,
        args.out,
        weights=args.weights,
        activations=args.activations,
        sites=args.sites,
        role=args.role,
        steps=args.steps,
        max_bytes=int(args.max_mib * 2**20),
        fmt=args.fmt,
        target=args.target,
        progress=progress("dump"),
    )
    print(f"wrote {len(files)} file{'s' if len(files) != 1 else ''} to {args.out}")
    return 0


def _cmd_timing(args) -> int:
    from opscope import timing

    report = timing(
        args.source, target=args.target, repetitions=args.repetitions, progress=progress("timing"), trace=args.trace
    )
    _show(args, report)
    return 0
