"""The `opscope` command: the main job (`profile`), the recording drivers (`sweep`, `seq`,
`replay`), the miner (`mine`), the static analyses (`shapes`, `bytes`, `motifs`, `flow`),
demo models, sites and targets.

Every subcommand prints one-line errors (`opscope: error: ...`) for bad input.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import sys
import time
from pathlib import Path

from opscope.errors import OpscopeError


def _zoo_names() -> list[str]:
    from opscope.zoo import ZOO

    return list(ZOO)


def _is_zoo_name(text: str) -> bool:
    """A bare name (no path separator, no suffix) that names a zoo model."""
    return "/" not in text and "." not in text and text in _zoo_names()


def _cmd_import(args) -> int:
    from opscope.importers import import_source
    from opscope.importers.mlir_file import write_mlir
    from opscope.sites import find_sites

    path = Path(args.source)
    if not path.exists():
        raise OpscopeError(f"no such file: {path}")
    module = import_source(path)
    out = Path(args.output)
    write_mlir(module, out)  # text keeps locations (the site names): default printing drops them
    sites = find_sites(module)
    print(f"imported {path} -> {out}: {len(sites)} matmul sites")
    return 0


def _model_path(source: str) -> Path:
    """`source` as an existing model file; a bare word that is neither says the zoo's names too."""
    path = Path(source)
    if not path.exists():
        if "/" in source or "." in source:
            raise OpscopeError(f"no such file: {path}")
        raise OpscopeError(f"no such file or zoo model: {source} (zoo: {', '.join(_zoo_names())})")
    return path


def _fresh(path: Path, force: bool) -> None:
    """Refuse to overwrite recorded data unless told to."""
    if path.exists() and path.stat().st_size:
        if not force:
            raise OpscopeError(f"{path} exists: pass --force to overwrite it (or --out elsewhere)")
        path.unlink()  # and Recorder(mode="w") drops the stale journal


def _cmd_profile(args) -> int:
    from opscope.mine import render
    from opscope.profile import DEFAULT_NAME, profile_default, profile_module
    from opscope.targets import get_target, require_runnable

    target = get_target(args.target)
    require_runnable(target)
    out = Path(args.out) if args.out else Path("opscope-runs") / time.strftime("%Y%m%d-%H%M%S")
    if not args.source:
        print(f"opscope profile: {DEFAULT_NAME} on {target.name}")
        res = profile_default(out, target.name, steps=args.steps)
    elif _is_zoo_name(args.source):
        from opscope.zoo import get_entry

        source, inputs, dist, name = get_entry(args.source).build(args.steps)
        print(f"opscope profile: {name} on {target.name}")
        res = profile_module(source, out, target.name, steps=args.steps, name=name, dist=dist, inputs=inputs)
    else:
        from opscope.importers import import_source

        path = _model_path(args.source)
        print(f"opscope profile: {path} on {target.name}")
        res = profile_module(import_source(path), out, target.name, steps=args.steps, name=str(path))
    m = res.model
    flops = sum(s.flops for s in m.manifest.sites)
    print(f"  {len(m.manifest.sites)} matmul sites ({_flops(flops)}), {len(m.manifest.entries)} sketches "
          f"per step; {_compile_time(m.compile_seconds, m.compile_cached)}; {res.steps} steps in {res.run_seconds:.2f} s; "
          f"original results {_parity(res.parity)} with injection")
    print()
    print(render(res.report, "findings"))
    print(f"wrote {out}/: sketches.csv ({res.rows:,} rows), site_costs.csv, manifest.json, report.md "
          f"(full tables; `opscope mine {out}` re-mines)")
    return 0


def _parquet(args, csv: Path) -> None:
    """With --parquet, also write the table as Parquet (zstd, same 13 columns) beside the CSV."""
    if args.parquet:
        from opscope.record import write_parquet

        pq = csv.with_suffix(".parquet")
        write_parquet(csv, pq)
        print(f"  wrote {pq} ({pq.stat().st_size:,} bytes; the CSV is {csv.stat().st_size:,})")


def _compile_time(seconds: float, cached: bool) -> str:
    return "compiled module from the cache" if cached else f"compile {seconds:.1f} s"


def _flops(n: int) -> str:
    for unit, scale in (("GFLOP", 1e9), ("MFLOP", 1e6), ("kFLOP", 1e3)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} FLOP"


def _cmd_sweep(args) -> int:
    from opscope.sweep import SEEDS, SHAPES, plan, sweep

    out = Path(args.out)
    shapes = _shapes(args.shapes) if args.shapes else SHAPES
    seeds = _seeds(args.seeds) if args.seeds else SEEDS
    if not args.resume:
        _fresh(out, args.force)
    total = len(plan(shapes, seeds=seeds))
    try:
        res = sweep(out, args.target, shapes=shapes, seeds=seeds, resume=args.resume)
    except KeyboardInterrupt:
        print(f"opscope: interrupted; {out} holds every finished run: continue with --resume", file=sys.stderr)
        return 130
    for shape, worst in res.parity.items():
        print(f"  parity {'x'.join(map(str, shape))}: original result {_parity(worst)} with injection on {args.target}")
    for shape, n in res.sketches_per_run.items():
        print(f"  {'x'.join(map(str, shape))}: {n} sketches per run")
    print(f"recorded {len(res.recorded)} runs" + (f", {len(res.skipped)} already done" if res.skipped else "")
          + f" of {total} into {out} (site costs: {res.site_costs})")
    _parquet(args, out)
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


def _parity(worst: float) -> str:
    return "bit-identical" if worst == 0 else f"within {worst:.2g}"


def _cmd_seq(args) -> int:
    from opscope.sequence import seq

    out = Path(args.out)
    _fresh(out, args.force)
    res = seq(out, args.target, steps=args.steps)
    print(f"recorded {res.steps} steps ({res.rows} rows) into {out}; site costs {res.site_costs}")
    _parquet(args, out)
    return 0


def _cmd_replay(args) -> int:
    from opscope.mine import mine_paths
    from opscope.sequence import replay

    out = Path(args.out)
    _fresh(out, args.force)
    res = replay(out, args.target, steps=args.steps, pool=args.pool)
    print(f"recorded {res.steps} steps ({res.rows} rows) into {out}; site costs {res.site_costs}")
    _parquet(args, out)
    print()
    print(mine_paths(out, costs=res.site_costs).to_text())
    return 0


def _cmd_mine(args) -> int:
    from opscope.mine import mine_paths, render

    logging.getLogger("opscope").setLevel(logging.ERROR)  # notes are part of the report
    report = mine_paths(args.source, costs=args.costs)
    print(render(report, "json" if args.json else "markdown" if args.markdown else "text"))
    return 0


def _cmd_demo(args) -> int:
    from opscope import demo

    if args.kind == "mlp":
        text = demo.mlp_module(args.layers, args.d_model, args.seq)
    elif args.kind == "transformer":
        text = demo.transformer_module(args.layers, args.d_model, args.seq)
    else:
        text = demo.moe_module(args.layers, args.d_model, args.seq)
    if args.output:
        Path(args.output).write_text(text)
    else:
        sys.stdout.write(text if text.endswith("\n") else text + "\n")
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
              + (f" ({why})" if why else "") + f"; ridge {t.ridge:g} FLOP/B ({t.ridge_source})")
    return 0


DEMO_KINDS = ("mlp", "transformer", "moe")


def _analysis_module(args):
    """The module the static analyses read: a demo kind, a zoo name, or any importable file."""
    from opscope.loading import parse_module

    src = args.source
    if src in DEMO_KINDS:
        from opscope import demo

        if src == "mlp":  # the reference's motifs graph: every layer relu(x·W + b)
            return parse_module(demo.bias_mlp_module(args.layers, args.d_model, args.seq))
        if src == "transformer":
            return parse_module(demo.transformer_module(args.layers, args.d_model, args.seq, weights="globals"))
        return parse_module(demo.moe_module(args.layers, args.d_model, args.seq))
    if _is_zoo_name(src):
        from opscope.zoo import get_entry

        return parse_module(get_entry(src).build(1)[0])
    from opscope.importers import import_source

    return import_source(_model_path(src))


def _emit(args, text: str, doc: dict) -> int:
    """Print a report as text, or as JSON with --json."""
    if args.json:
        print(json.dumps(doc, indent=2, ensure_ascii=False))
    else:
        sys.stdout.write(text if text.endswith("\n") else text + "\n")
    return 0


def _ridge(args) -> float:
    """--ridge, else the target's nominal ridge."""
    from opscope.targets import get_target

    target = get_target(args.target)
    return args.ridge if args.ridge is not None else target.ridge


def _cmd_shapes(args) -> int:
    from opscope.analysis.cost import analyze
    from opscope.analysis.shapes import shape_histogram

    args.ridge = _ridge(args)
    module = _analysis_module(args)
    cost = analyze(module)
    hist = shape_histogram(module, cost.total_flops)
    split = cost.roofline_split(args.ridge)
    doc = {"source": args.source, "ridge": args.ridge, "total_flops": cost.total_flops,
           "total_bytes": cost.total_bytes, "roofline": dataclasses.asdict(split), **hist.to_dict()}
    classified = split.memory_flops + split.compute_flops
    share = f"{100 * split.compute_flops / classified:.1f} %" if classified else "-"
    text = (f"{args.source}: {cost.total_flops:,} FLOPs, {cost.total_bytes:,} bytes moved (static floor), "
            f"{_per_byte(cost.total_flops, cost.total_bytes)} FLOP/B; at ridge {args.ridge:g} FLOP/B "
            f"{share} of FLOPs are in compute-bound ops\n" + hist.to_text(args.top))
    return _emit(args, text, doc)


def _per_byte(flops: int, nbytes: int) -> str:
    return f"{flops / nbytes:.2f}" if nbytes else "-"


def _cmd_bytes(args) -> int:
    args.ridge = _ridge(args)
    module = _analysis_module(args)
    if args.dispatches:
        from opscope.analysis.dispatch import analyze_dispatches

        report = analyze_dispatches(module, args.target)
        return _emit(args, report.to_text(args.top, args.ridge), report.to_dict(args.ridge))
    from opscope.analysis.cost import analyze
    from opscope.analysis.ledger import ledger_dict, ledger_text

    cost = analyze(module)
    return _emit(args, ledger_text(cost, args.top, args.ridge), ledger_dict(cost, args.ridge))


def _cmd_motifs(args) -> int:
    from opscope.analysis.motifs import linear_motifs

    report = linear_motifs(_analysis_module(args), args.min_len, args.max_len, args.min_count)
    return _emit(args, report.to_text(args.top), report.to_dict())


def _cmd_flow(args) -> int:
    from opscope.analysis.cones import dataflow_cones

    report = dataflow_cones(_analysis_module(args), args.min_depth, args.max_depth, args.min_count)
    return _emit(args, report.to_text(args.top), report.to_dict())


def _add_analysis(sub, name: str, help: str, fn, top: int):
    """A static-analysis subcommand: SOURCE (demo kind, zoo name or file), demo sizes, --top, --json."""
    sp = sub.add_parser(name, help=help)
    sp.add_argument("source", nargs="?", default="transformer",
                    help=f"{', '.join(DEMO_KINDS)} (built-in demos), a zoo name, or a model file "
                         "(.mlir/.mlirbc, .onnx, .pt2, .jaxexport); default transformer")
    sp.add_argument("--layers", type=int, default=6, help="demo layers (default 6)")
    sp.add_argument("--d-model", type=int, default=64, help="demo width (default 64)")
    sp.add_argument("--seq", type=int, default=16, help="demo tokens (default 16)")
    sp.add_argument("--top", type=int, default=top, help=f"rows to print (default {top})")
    sp.add_argument("--json", action="store_true", help="print JSON instead of text")
    sp.set_defaults(fn=fn)
    return sp


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="opscope", description="Which specialized kernels does a model deserve?")
    sub = p.add_subparsers(dest="command")

    def target(sp):
        sp.add_argument("--target", default="llvm-cpu", help="llvm-cpu (default), vulkan-spirv, ... (`opscope targets`)")

    pr = sub.add_parser("profile", help="the main job: inject sketches, run, record, mine, report (default: built-in model)")
    pr.add_argument("source", nargs="?", help="a model file (.mlir/.mlirbc in linalg, StableHLO or torch form, "
                    ".onnx) or a zoo name (digits, minilm, ...)")
    target(pr)
    pr.add_argument("--steps", type=int, default=4, help="calls, a fresh input batch each (default 4)")
    pr.add_argument("--out", help="run folder (default opscope-runs/<time>)")
    pr.set_defaults(fn=_cmd_profile)

    sw = sub.add_parser("sweep", help="one matmul per shape x 7 distributions x 3 seeds -> tidy CSV")
    target(sw)
    sw.add_argument("--out", default="opscope.csv", help="CSV to write (default opscope.csv)")
    sw.add_argument("--resume", action="store_true", help="continue an interrupted sweep in --out")
    sw.add_argument("--force", action="store_true", help="overwrite --out")
    sw.add_argument("--parquet", action="store_true", help="also write <out>.parquet (zstd, same columns)")
    sw.add_argument("--shapes", help="MxKxN[,MxKxN...] (default the reference's three)")
    sw.add_argument("--seeds", help="comma-separated seeds (default 1,2,3)")
    sw.set_defaults(fn=_cmd_sweep)

    sq = sub.add_parser("seq", help="decode-like steps: drifting activations, fixed weight -> tidy CSV")
    target(sq)
    sq.add_argument("--out", default="opscope_seq.csv", help="CSV to write (default opscope_seq.csv)")
    sq.add_argument("--steps", type=int, default=16)
    sq.add_argument("--force", action="store_true", help="overwrite --out")
    sq.add_argument("--parquet", action="store_true", help="also write <out>.parquet (zstd, same columns)")
    sq.set_defaults(fn=_cmd_seq)

    rp = sub.add_parser("replay", help="repeated inputs (pool) or a slow walk (pool 0) -> tidy CSV, then mine")
    target(rp)
    rp.add_argument("--out", default="opscope_replay.csv", help="CSV to write (default opscope_replay.csv)")
    rp.add_argument("--steps", type=int, default=20)
    rp.add_argument("--pool", type=int, default=4, help="distinct inputs replayed at random; 0 = slow random walk")
    rp.add_argument("--force", action="store_true", help="overwrite --out")
    rp.add_argument("--parquet", action="store_true", help="also write <out>.parquet (zstd, same columns)")
    rp.set_defaults(fn=_cmd_replay)

    mi = sub.add_parser("mine", help="mine tidy CSV/Parquet sketches for exploitable structure")
    mi.add_argument("source", nargs="+", help="tidy CSV/Parquet files, folders of them, or globs")
    mi.add_argument("--costs", help="site,flops sidecar (default: <csv>.sites or site_costs.csv beside it)")
    fmt = mi.add_mutually_exclusive_group()
    fmt.add_argument("--json", action="store_true", help="machine-readable output")
    fmt.add_argument("--markdown", action="store_true", help="a Markdown report")
    mi.set_defaults(fn=_cmd_mine)

    de = sub.add_parser("demo", help="print a demo model as MLIR (linalg on tensors)")
    de.add_argument("kind", choices=("mlp", "transformer", "moe"))
    de.add_argument("--layers", type=int, default=2)
    de.add_argument("--d-model", type=int, default=64)
    de.add_argument("--seq", type=int, default=16, help="tokens (rows)")
    de.add_argument("-o", "--output", help="write to a file instead of stdout")
    de.set_defaults(fn=_cmd_demo)

    im = sub.add_parser("import", help="import a model (.onnx, .mlir in torch/StableHLO/linalg form) to linalg MLIR")
    im.add_argument("source")
    im.add_argument("-o", "--output", required=True, help="model.mlir (text with locations) or model.mlirbc")
    im.set_defaults(fn=_cmd_import)

    si = sub.add_parser("sites", help="list the matmul sites of a module")
    si.add_argument("source")
    si.set_defaults(fn=_cmd_sites)
    ridge_help = "roofline ridge, FLOP/byte (default: the target's nominal ridge, `opscope targets`)"
    sh = _add_analysis(sub, "shapes", "hot GEMM shapes (batch, M, K, N, dtype) by FLOP share: static", _cmd_shapes, 10)
    sh.add_argument("--ridge", type=float, default=None, help=ridge_help)
    target(sh)
    by = _add_analysis(sub, "bytes", "exact FLOPs and bytes per op (or per IREE dispatch), roofline: static",
                       _cmd_bytes, 12)
    by.add_argument("--ridge", type=float, default=None, help=ridge_help)
    by.add_argument("--dispatches", action="store_true", help="per fused dispatch, as IREE forms them")
    target(by)
    mo = _add_analysis(sub, "motifs", "recurring op chains (fusion candidates): static", _cmd_motifs, 12)
    mo.add_argument("--min-len", type=int, default=2)
    mo.add_argument("--max-len", type=int, default=6)
    mo.add_argument("--min-count", type=int, default=2)
    fl = _add_analysis(sub, "flow", "repeated dataflow cones (input sub-DAGs) with fusion hints: static", _cmd_flow, 12)
    fl.add_argument("--min-depth", type=int, default=2)
    fl.add_argument("--max-depth", type=int, default=6)
    fl.add_argument("--min-count", type=int, default=2)

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
