"""`opscope whatif SOURCE`: what a rewrite costs the model's quality and what it saves, on real data.

    opscope whatif smollm2 --sweep                       # which residual blocks can go (one build, gated)
    opscope whatif smollm2 --fakequant w8a8,w8a16        # simulated quantization vs the original
    opscope whatif smollm2 --sweep-layers w8a8           # which layers W8A8 hurts most (a build per layer)
    opscope whatif minilm --skip encoder.layer.5.ffn     # one named skip (names: `opscope infer`)
    opscope whatif smollm2 --skip-lowest 4 --from RUN    # the 4 blocks of least influence in a recorded run
    opscope whatif model.mlir --pipeline 'skip-residual-blocks{blocks=0}'

Every variant is compiled and run on the same inputs as the original; the table says how far
its outputs moved (by task: `opscope.act.quality`) and how many FLOPs its module no longer has.
"""

from __future__ import annotations

import argparse
import sys

import opscope
from opscope.cli.arguments import add_parameters, add_source, add_target
from opscope.errors import OpscopeError


def register(sub: argparse._SubParsersAction) -> None:
    """Add whatif."""
    from opscope.act.evalset import DEFAULT_TOKENS
    from opscope.act.quality import TASKS
    from opscope.act.whatif import FAKEQUANT, FLOOR, KEEP

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
    feed = p.add_mutually_exclusive_group()
    feed.add_argument("--inputs", nargs="+", metavar="FILE", help="the model's inputs, as `profile --inputs`")
    feed.add_argument("--text", metavar="FILE", help="sentences, one per line, tokenized for a text model")
    p.add_argument("--tokenizer", metavar="DIR", help="a local Hugging Face tokenizer folder for --text")
    add_parameters(p, "in a temporary folder, for every build")
    p.add_argument("--all", action="store_true", help="every row of the sweep")
    p.add_argument("--json", action="store_true", help="the report as JSON")
    p.set_defaults(fn=_cmd_whatif)


def _variants(args) -> list:
    from opscope.act.whatif import Variant, fakequant, lowest_influence, skip
    from opscope.ir.blocks import parse_blocks

    variants = [skip(parse_blocks(s)) for s in args.skip]
    if args.skip_lowest is not None:
        if not args.run:
            raise OpscopeError(
                "--skip-lowest reads block influence from a recorded run: give --from RUN "
                "(record one with `opscope infer MODEL --taps residual --out RUN`)"
            )
        variants.append(skip(lowest_influence(args.run, args.skip_lowest)))
    elif args.run:
        raise OpscopeError("--from goes with --skip-lowest K")
    if args.fakequant:
        variants += [fakequant(s.strip()) for s in args.fakequant.split(",") if s.strip()]
    variants += [Variant(p, p) for p in args.pipeline]
    return variants


def _check(args, variants: list) -> None:
    """Refuse what cannot work before anything is built: no question, bad numbers, bad pipelines."""
    from opscope.pipeline.textual import parse_pipeline

    if not variants and not args.sweep and not args.sweep_layers:
        raise OpscopeError(
            "nothing to measure: give --skip, --skip-lowest, --fakequant, --pipeline, --sweep or --sweep-layers"
        )
    if args.sweep and args.sweep_layers:
        raise OpscopeError("--sweep and --sweep-layers are two runs: give one of them")
    if args.sweep_layers and variants:
        raise OpscopeError("--sweep-layers measures its scheme alone: drop the other variants")
    if args.tokenizer and not args.text:
        raise OpscopeError("--tokenizer goes with --text")
    if not 0 < args.keep <= 1 or not 0 <= args.floor <= 1:
        raise OpscopeError(f"--keep must be in (0, 1] and --floor in [0, 1], got {args.keep} and {args.floor}")
    for v in variants:
        parse_pipeline(v.pipeline)  # unknown passes and options fail here, in one line


def _cmd_whatif(args) -> int:
    from opscope.act.evalset import eval_set
    from opscope.act.whatif import fakequant, sweep_layers, sweep_skips, whatif

    variants = _variants(args)
    _check(args, variants)
    if args.sweep_layers:
        fakequant(args.sweep_layers)  # an unknown scheme fails before the model is built

    def say(line: str) -> None:
        print(f"opscope whatif: {line}", file=sys.stderr, flush=True)

    evalset = eval_set(
        args.source,
        task=args.task,
        tokens=args.tokens,
        steps=args.steps,
        inputs=args.inputs,
        text=args.text,
        tokenizer=args.tokenizer,
        named=lambda n: say(f"model {n}"),
        parameters=args.parameters,
        weights_dtype=args.weights_dtype,
    )
    if args.sweep:
        report = sweep_skips(
            evalset,
            blocks=args.blocks,
            target=args.target,
            keep=args.keep,
            floor=args.floor,
            variants=variants,
            progress=say,
        )
    elif args.sweep_layers:
        report = sweep_layers(evalset, args.sweep_layers, target=args.target, progress=say)
    else:
        report = whatif(evalset, variants, target=args.target, progress=say)
    print(opscope.render(report, "json" if args.json else "text", every=args.all))
    return 0
