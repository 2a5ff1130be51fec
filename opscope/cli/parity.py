"""The parity command: `opscope parity A [B]` compares two builds of a model op by op.

Each build is a model (a zoo name, a model file, an .mlir file) with an optional
opscope-opt pipeline applied first (`--a-pipeline`, `--b-pipeline`: a rewrite, e.g.
`canonicalize` or `fakequant-weights`), then every intermediate exposed (`expose-all-ops`),
then for B optionally the stat taps (`--inject`); each is compiled for its target
(`--a-target`, `--b-target`, default B's = A's; `--a-flags`/`--b-flags` add iree-compile
flags, written `--b-flags=--iree-input-demote-i64-to-i32`) and run on the same inputs
(the model's own first batch, else generated from its signature, or `--inputs FILE...`).
B defaults to A.

It prints both builds, a per-op table in program order (ops beyond `--tol` and the 5
worst; `--all` every op; `--json` or `--markdown` instead of text) and a summary line: ops
compared, bit-identical, worst op, first op beyond tolerance. `--ops REGEX` exposes only
ops whose name or label matches; `--constants` exposes constant expressions too. The
tolerance rule: an op is within `--tol` (default 1e-3) when max|A−B| ≤ tol · max|A|
(`opscope.act.op_compare`). Exit status 1 when an op is beyond tolerance.

Exposing every op changes how IREE fuses them. `--outputs-only` compares the two builds' outputs
alone, nothing exposed (two flag sets, two pipelines, two targets), and counts each build's
dispatches; `--fusion` is the reference's fusion parity: A as IREE fuses it against B with every
op its own dispatch (the `unfuse` pass), outputs only, within 1e-4 of each output's scale.
"""

from __future__ import annotations

import argparse

import opscope
from opscope.cli.arguments import SOURCES, add_format, add_parameters, parameters, report_format, write_html


def register(sub: argparse._SubParsersAction) -> None:
    """Add parity."""
    DEFAULT_TOL = opscope.DEFAULT_TOL

    p = sub.add_parser(
        "parity",
        help="compare two builds of a model op by op (a rewrite, injected taps, "
        "another target): max |Δ| per op, first op beyond a tolerance",
    )
    p.add_argument("a", metavar="A", help="the reference build's model: " + SOURCES)
    p.add_argument("b", metavar="B", nargs="?", help="the other build's model (default A)")
    p.add_argument("--a-pipeline", default="", metavar="P", help="opscope-opt pipeline applied to A before exposing")
    p.add_argument("--b-pipeline", default="", metavar="P", help="opscope-opt pipeline applied to B before exposing")
    p.add_argument(
        "--a-target", default="llvm-cpu", metavar="T", help="A's target (default llvm-cpu; `opscope targets`)"
    )
    p.add_argument("--b-target", metavar="T", help="B's target (default A's)")
    p.add_argument("--a-flags", default="", metavar="F", help="extra iree-compile flags for A (space-separated)")
    p.add_argument("--b-flags", metavar="F", help="extra iree-compile flags for B (default A's when B's target is)")
    p.add_argument(
        "--inject",
        action="store_true",
        help="inject the stat taps into B after exposing (proves injection leaves every op bit-identical)",
    )
    p.add_argument(
        "--tol",
        type=float,
        help=f"allowed max|A−B| / max|A| per op (default {DEFAULT_TOL:g}; with --fusion {opscope.FUSION_TOL:g})",
    )
    p.add_argument("--ops", default="", metavar="REGEX", help="expose only ops whose name or label matches")
    p.add_argument("--constants", action="store_true", help="expose constant expressions (weights' transposes) too")
    p.add_argument("--inputs", nargs="+", metavar="FILE", help="the inputs, as `profile --inputs` (first step)")
    add_parameters(p, "in a temporary folder, for both builds")
    p.add_argument(
        "--outputs-only",
        action="store_true",
        help="compare the model's outputs only, nothing exposed (exposing ops changes how IREE fuses them)",
    )
    p.add_argument(
        "--fusion",
        action="store_true",
        help="A as IREE fuses it against B with every op its own dispatch (the `unfuse` pass), outputs only, "
        f"within --tol (default {opscope.FUSION_TOL:g})",
    )
    p.add_argument(
        "--all", action="store_true", help="every op in the table, not only those beyond tolerance and the worst"
    )
    add_format(p, markdown="the report as Markdown")
    p.set_defaults(fn=_cmd_parity)


def _cmd_parity(args) -> int:
    report = opscope.parity(
        args.a,
        args.b,
        a_pipeline=args.a_pipeline,
        b_pipeline=args.b_pipeline,
        a_target=args.a_target,
        b_target=args.b_target,
        a_flags=args.a_flags.split(),
        b_flags=None if args.b_flags is None else args.b_flags.split(),
        inject_b=args.inject,
        tol=args.tol,
        ops=args.ops,
        constants=args.constants,
        inputs=args.inputs,
        outputs_only=args.outputs_only,
        fusion=args.fusion,
        **parameters(args),
    )
    print(opscope.render(report, report_format(args), all_ops=args.all))
    write_html(args, report, all_ops=args.all)
    return 0 if report.within() else 1
