"""The `opscope` command: profile a model, list its sites, list targets.

Every subcommand prints one-line errors (`opscope: error: ...`) for bad input.
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
from pathlib import Path

from opscope.errors import OpscopeError


def _cmd_profile(args) -> int:
    from opscope.profile import default_model, profile_module
    from opscope.targets import get_target, require_runnable

    target = get_target(args.target)
    require_runnable(target)
    if args.source:
        p = Path(args.source)
        if not p.exists():
            raise OpscopeError(f"no such file: {p}")
        source, name = p.read_bytes(), str(p)
    else:
        source, name = default_model(), "built-in transformer (2 layers, d_model 64, 32 tokens)"
    out = Path(args.out) if args.out else Path("opscope-runs") / time.strftime("%Y%m%d-%H%M%S")
    print(f"opscope profile: {name} on {target.name}")
    res = profile_module(source, target.name, steps=args.steps, out_dir=out, name=name)
    print(f"  {len(res.manifest.sites)} matmul sites, {len(res.manifest.entries)} sketches per step, "
          f"compile {res.compile_seconds:.1f} s, {args.steps} steps in {res.run_seconds:.2f} s")
    print(f"  {'site':28} {'role':4} {'numel':>8} {'density':>8} {'chan pk/mean':>12} {'kurtosis':>9} {'hist top':>8}")
    for r in res.summary():
        print(f"  {r['site']:28} {r['role']:4} {r['numel']:8d} {r['density']:8.3f} "
              f"{r['chan_outlier']:12.2f} {r['kurtosis']:9.2f} {r['hist_top']:8.3f}")
    print(f"  wrote {out}/manifest.json and {out}/summary.json")
    return 0


def _cmd_sites(args) -> int:
    from opscope.loading import load_module
    from opscope.sites import find_sites

    sites = find_sites(load_module(args.source))
    if not sites:
        print(f"{args.source}: no matmul sites")
        return 0
    print(f"{'site':32} {'kind':14} {'batch':>5} {'M':>6} {'K':>6} {'N':>6} {'FLOPs':>14}")
    for s in sites:
        flops = "dynamic" if s.dynamic else f"{s.flops:,}"
        print(f"{s.name:32} {s.kind:14} {s.batch:5d} {s.m:6d} {s.k:6d} {s.n:6d} {flops:>14}")
    return 0


def _cmd_targets(args) -> int:
    from opscope.targets import TARGETS, driver_available

    for t in TARGETS.values():
        why = driver_available(t.driver)
        print(f"{t.name:13} {'runs here' if why is None else 'compiles only'}  {t.note}"
              + (f" ({why})" if why else ""))
    return 0


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="opscope", description="Which specialized kernels does a model deserve?")
    sub = p.add_subparsers(dest="command")
    pr = sub.add_parser("profile", help="inject sketches, compile, run and summarize (default: built-in model)")
    pr.add_argument("source", nargs="?", help="an .mlir/.mlirbc module (linalg or StableHLO)")
    pr.add_argument("--target", default="llvm-cpu", help="llvm-cpu (default), vulkan-spirv, ...")
    pr.add_argument("--steps", type=int, default=3, help="runs with fresh seeded inputs")
    pr.add_argument("--out", help="run folder (default opscope-runs/<time>)")
    pr.set_defaults(fn=_cmd_profile)
    si = sub.add_parser("sites", help="list the matmul sites of a module")
    si.add_argument("source")
    si.set_defaults(fn=_cmd_sites)
    ta = sub.add_parser("targets", help="list targets and whether they run here")
    ta.set_defaults(fn=_cmd_targets)
    return p


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(format="opscope: warning: %(message)s", level=logging.WARNING)
    if not getattr(args, "fn", None):
        args = parser.parse_args(["profile"])
    try:
        return args.fn(args)
    except OpscopeError as e:
        print(f"opscope: error: {e}", file=sys.stderr)
        return 1
    except BrokenPipeError:  # `opscope ... | head`
        sys.stderr.close()
        return 0


if __name__ == "__main__":
    sys.exit(main())
