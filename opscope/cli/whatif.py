"""`opscope whatif SOURCE`: what a rewrite costs the model's quality and what it saves, on real data.

    opscope whatif smollm2 --sweep                       # which residual blocks can go (one build, gated)
    opscope whatif smollm2 --fakequant w8a8,w8a16        # simulated quantization vs the original
    opscope whatif smollm2 --sweep-layers w8a8           # which layers W8A8 hurts most (a build per layer)
    opscope whatif smollm2 --sweep --dask local:4 --shards-dir S   # its evaluations as jobs; --resume after a kill
    opscope whatif minilm --skip encoder.layer.5.ffn     # one named skip (names: `opscope infer`)
    opscope whatif smollm2 --skip-lowest 4 --from RUN    # the 4 blocks of least influence in a recorded run
    opscope whatif model.mlir --pipeline 'skip-residual-blocks{blocks=0}'

Every variant is compiled and run on the same inputs as the original; the table says how far
its outputs moved (by task: `opscope.act.quality`) and how many FLOPs its module no longer has.
"""

from __future__ import annotations

import argparse

import opscope
from opscope.cli.arguments import (
    add_dask,
    add_feed,
    add_format,
    add_parameters,
    add_shards_dir,
    add_source,
    add_target,
    feed,
    parameters,
    report_format,
    write_html,
)
from opscope.cli.progress import progress


def register(sub: argparse._SubParsersAction) -> None:
    """Add whatif."""
    DEFAULT_TOKENS, TASKS, FAKEQUANT = opscope.DEFAULT_TOKENS, opscope.TASKS, opscope.FAKEQUANT
    FLOOR, KEEP = opscope.FLOOR, opscope.KEEP

    p = sub.add_parser(
        "whatif",
        help="measure rewrites end to end on real data: layer skip, fake-quant, any "
        "pipeline; sensitivity sweep and greedy skip curve",
    )
    add_source(p)
    add_target(p)
    p.add_argument(
        "--skip",
        action="append",
        default=[],
        metavar="BLOCKS",
        help="skip these residual blocks together (names or ordinals, comma-separated; repeat for more variants)",
    )
    p.add_argument("--skip-lowest", type=int, metavar="K", help="skip the K blocks of least influence in --from")
    p.add_argument("--from", dest="run", metavar="RUN", help="a run folder recorded with the residual taps")
    p.add_argument(
        "--fakequant",
        metavar="SCHEMES",
        help=f"simulated quantization schemes, comma-separated: {', '.join(FAKEQUANT)}",
    )
    p.add_argument(
        "--pipeline",
        action="append",
        default=[],
        metavar="P",
        help="any opscope-opt pipeline as a variant (repeat for more)",
    )
    p.add_argument(
        "--sweep", action="store_true", help="one residual block off at a time, then the greedy curve (one gated build)"
    )
    p.add_argument(
        "--sweep-layers",
        metavar="SCHEME",
        help="a fake-quant scheme on one layer at a time, plus the whole model (one build per layer)",
    )
    p.add_argument("--blocks", default="*", help="the blocks the sweep covers (default every one)")
    p.add_argument(
        "--keep", type=float, default=KEEP, help=f"the headline share the sweep's answer keeps (default {KEEP})"
    )
    p.add_argument(
        "--floor", type=float, default=FLOOR, help=f"stop the greedy curve below this headline value (default {FLOOR})"
    )
    p.add_argument(
        "--tokens",
        type=int,
        default=DEFAULT_TOKENS,
        help=f"predicted tokens a causal LM is measured on (default {DEFAULT_TOKENS})",
    )
    p.add_argument("--steps", type=int, help="batches to measure on (default: sized by the model's task)")
    p.add_argument("--task", choices=TASKS, help="what the model's first result is (default: the zoo's, else outputs)")
    add_feed(p)
    add_parameters(p, "in a temporary folder, for every build")
    add_dask(p, "a sweep's evaluations (a job each)")
    add_shards_dir(p, "--sweep or --sweep-layers")
    p.add_argument("--all", action="store_true", help="every row of the sweep")
    add_format(p)
    p.set_defaults(fn=_cmd_whatif)


def _cmd_whatif(args) -> int:
    report = opscope.whatif(
        args.source,
        skip=args.skip,
        skip_lowest=args.skip_lowest,
        run=args.run,
        fakequant=[s.strip() for s in (args.fakequant or "").split(",") if s.strip()],
        pipelines=args.pipeline,
        sweep=args.sweep,
        sweep_layers=args.sweep_layers,
        blocks=args.blocks,
        keep=args.keep,
        floor=args.floor,
        target=args.target,
        tokens=args.tokens,
        steps=args.steps,
        task=args.task,
        progress=progress("whatif"),
        **feed(args),
        **parameters(args),
        dask=args.dask,
        shards_dir=args.shards_dir,
        resume=args.resume,
    )
    print(opscope.render(report, report_format(args), every=args.all))
    write_html(args, report, every=args.all)
    return 0
