"""Forward-time overhead of injected statistics, against the base model and the naive way.

For each model (one 512x1024x1024 matmul; an 8-layer transformer-style stack) it compiles:

* base: the model as is;
* injected: `inject_matmul_stats` with the default sketch set and with `StatConfig.lean()`,
  each with `outline=True` (shared `{noinline}` stats kernels, called where needed) and
  `outline=False` (the kernels inlined at every call);
* naive: the model with every site's lhs, rhs and out appended as extra results (each
  distinct SSA value once), its statistics computed on the host by
  `opscope.run.host_stats.host_stats` (default and lean sketch sets, same compiled module).

then times one call of each, interleaved round-robin, `--repeats` rounds, and prints the
medians. A call's time includes bringing every result to the host as numpy and decoding
the statistics (manifest for injected, `host_stats` for naive), so all variants end with
the same statistics in host memory. `x base` is the median over rounds of the ratio to
base in the same round. Nothing here asserts on time.

Injected variants use the target's kernel layout (`Target.hist_counts`: i8 histogram lanes
on llvm-cpu, i32 elsewhere; `Target.row_lanes`: 16 row lanes on llvm-cpu, straight rows
elsewhere); `--hist-counts i32,i8` and `--row-lanes 0,16` compile each injected variant once
per choice, side by side (names end in `, hist-counts=<type>`, `, row-lanes=<n>`).

    python bench/bench_overhead.py [--repeats 9] [--quick] [--target llvm-cpu|vulkan-spirv] [--breakdown] [--weights args|globals] [--hist-counts i32,i8] [--row-lanes 0,16]
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import header, interleaved, load_line, median, paired_ratio, short_error, table  # noqa: E402
from iree.compiler import ir  # noqa: E402
from iree.compiler.dialects import func  # noqa: E402

from opscope.dialect.lowering.histogram import HIST_LANES  # noqa: E402
from opscope.ir.arguments import function_args  # noqa: E402
from opscope.ir.loading import new_context, parse_module  # noqa: E402
from opscope.ir.sites import ROLES, find_sites  # noqa: E402
from opscope.ir.stat_config import StatConfig  # noqa: E402
from opscope.models import demo  # noqa: E402
from opscope.pipeline.taps import inject_matmul_stats  # noqa: E402
from opscope.run.compile import compile_module  # noqa: E402
from opscope.run.host_stats import host_stats  # noqa: E402
from opscope.run.instrumented import tapped_outputs  # noqa: E402
from opscope.run.runtime import load  # noqa: E402
from opscope.run.targets import get_target  # noqa: E402

FUNCTION = "main"


def expose_operands(module: ir.Module) -> list[tuple[str, str, int]]:
    """Append every matmul site's lhs, rhs and out to @main's results, in place.

    Each distinct SSA value is returned once (q/k/v share their lhs); values the function
    already returns keep their index. Returns (site, role, result index) per tapped tensor.
    """
    with module.context, ir.Location.unknown():
        fn = next(op.operation for op in module.body.operations if op.operation.name == "func.func")
        ret = list(fn.regions[0].blocks[0].operations)[-1]
        old = list(ret.operands)
        index: dict = {}
        for i, v in enumerate(old):
            index.setdefault(v, i)
        extra: list = []
        taps = []
        for site in find_sites(fn):
            for role in ROLES:
                v = site.value(role)
                if v not in index:
                    index[v] = len(old) + len(extra)
                    extra.append(v)
                taps.append((site.name, role, index[v]))
        func.ReturnOp(old + extra, ip=ir.InsertionPoint(ret))
        ret.erase()
        fty = ir.FunctionType(ir.TypeAttr(fn.attributes["function_type"]).value)
        fn.attributes["function_type"] = ir.TypeAttr.get(
            ir.FunctionType.get(list(fty.inputs), list(fty.results) + [v.type for v in extra])
        )
    return taps


@dataclass
class Variant:
    """One way to get the model's output (and maybe its statistics) onto the host."""

    name: str
    build: Callable[[], tuple[ir.Module, object]]  # -> (module to compile, extra info)
    make_run: Callable  # (loaded, info, inputs) -> run() returning phase times
    compile_s: float = float("nan")
    dispatches: int | None = None
    extra_bytes: int = 0
    error: str = ""
    run: Callable | None = field(default=None, repr=False)
    info: object = field(default=None, repr=False)
    outs: list | None = field(default=None, repr=False)


def _run_base(loaded, info, inputs):
    def run():
        loaded.invoke(FUNCTION, *inputs)

    return run


def _run_injected(loaded, manifest, inputs):
    def run():  # weights once: the weights' sketches come from the first call, kept
        outs = tapped_outputs(loaded, manifest, inputs)
        t = time.perf_counter()
        manifest.values(outs)
        return {"post": time.perf_counter() - t}

    return run


def _run_naive(config):
    def make(loaded, taps, inputs):
        def run():
            outs = loaded.invoke(FUNCTION, *inputs)
            t = time.perf_counter()
            for _site, _role, idx in taps:
                host_stats(outs[idx], config)
            return {"post": time.perf_counter() - t}

        return run

    return make


CHECKED = "injected default, outline=True"  # and its layout twins (hist-counts, row-lanes)


def is_checked(name: str) -> bool:
    """Whether variant `name` is compared with host_stats before timing."""
    return name == CHECKED or name.startswith((CHECKED + ", hist-counts=", CHECKED + ", row-lanes="))


def agreement(variants: list[Variant], rtol: float = 1e-3) -> list[str]:
    """One line per checked variant: do its statistics equal host_stats of the naive module's outputs?

    Both modules see the same inputs; the naive one returns the very tensors the injected
    one summarizes (up to float reassociation), so every sketch should agree.
    """
    by = {v.name: v for v in variants}
    nai = by.get("naive default (host_stats)")
    checked = [v for v in variants if is_checked(v.name) and v.outs is not None]
    if nai is None or nai.outs is None or not checked:
        return ["check: skipped (the injected default or the naive variant did not run)"]
    host: dict = {}
    for site, role, idx in nai.info:
        host[(site, role)] = host_stats(nai.outs[idx], StatConfig())
    lines = []
    for inj in checked:
        device = inj.info.values(inj.outs)
        bad = []
        for (site, role, stat), got in device.items():
            want = host[(site, role)][stat]
            tol = rtol * max(1.0, float(np.abs(want).max()) if want.size else 1.0)
            if got.shape != want.shape or not np.allclose(got, want, rtol=rtol, atol=tol):
                bad.append(f"{site}/{role}/{stat}")
        inj.outs = None
        tail = f"; differ: {', '.join(bad[:4])}{' ...' if len(bad) > 4 else ''}" if bad else ""
        lines.append(
            f"check: {len(device) - len(bad)}/{len(device)} sketches of '{inj.name}' match "
            f"host_stats of the naive outputs (rtol {rtol}){tail}"
        )
    nai.outs = None
    return lines


def variants_for(
    source: str,
    full: bool = True,
    breakdown: bool = False,
    hoist: bool = False,
    counts: tuple[str, ...] = ("i32",),
    lanes: tuple[int, ...] = (0,),
) -> list[Variant]:
    """The variants of one model; every injected one once per histogram count type in `counts`
    and row lane count in `lanes`."""

    def parsed():
        return parse_module(source, new_context())

    def injected(config, outline, hoist_constants=False, hist_counts="i32", row_lanes=0, weights_once=False):
        def build():
            return inject_matmul_stats(
                parsed(),
                config,
                outline=outline,
                hoist_constants=hoist_constants,
                hist_counts=hist_counts,
                row_lanes=row_lanes,
                weights_once=weights_once,
            )

        return build

    def naive():
        m = parsed()
        taps = expose_operands(m)
        return m, taps

    def add(
        name: str, config: StatConfig, outline: bool, hoist_constants: bool = False, weights_once: bool = False
    ) -> None:
        for c in counts:
            for lane in lanes:
                label = (
                    name
                    + (f", hist-counts={c}" if len(counts) > 1 else "")
                    + (f", row-lanes={lane}" if len(lanes) > 1 else "")
                )
                out.append(
                    Variant(label, injected(config, outline, hoist_constants, c, lane, weights_once), _run_injected)
                )

    out = [Variant("base", lambda: (parsed(), None), _run_base)]
    for cname, config in (("default", StatConfig()), ("lean", StatConfig.lean())):
        for outline in (True, False) if full else (True,):
            add(f"injected {cname}, outline={outline}", config, outline)
    if hoist:  # weights in util.globals: their sketches computed at compile time by IREE, or once per load
        add("injected default, outline=True, hoist-constants", StatConfig(), True, True)
        add("injected default, outline=True, weights once", StatConfig(), True, weights_once=True)
    out.append(Variant("naive default (host_stats)", naive, _run_naive(StatConfig())))
    if breakdown:  # what each sketch beyond the lean set costs
        lean = StatConfig.lean()
        for label, cfg in (
            ("lean+hist", lean.replace(hist_bins=32, hist_normalize=True)),
            ("lean+pos_sumsq", lean.replace(per_position=True)),
            ("lean+adj_sumsq", lean.replace(adjacency=True)),
        ):
            add(f"injected {label}, outline=True", cfg, True)
    if full:
        out.append(Variant("naive lean (host_stats)", naive, _run_naive(StatConfig.lean())))
    return [v for v in out if not v.name.startswith("naive")] + [v for v in out if v.name.startswith("naive")]


def bench_model(
    title: str,
    source: str,
    target: str,
    repeats: int,
    full: bool = True,
    breakdown: bool = False,
    min_sample_s: float = 0.02,
    hoist: bool = False,
    counts: tuple[str, ...] = ("i32",),
    lanes: tuple[int, ...] = (0,),
) -> None:
    print(f"\n## {title} on {target} (histogram counts: {', '.join(counts)}; row lanes: {', '.join(map(str, lanes))})")
    sys.stdout.flush()
    shapes = [s for s, _ in function_args(parse_module(source, new_context()))]
    inputs = demo.random_inputs(shapes, seed=0)
    variants = variants_for(source, full, breakdown, hoist, counts, lanes)
    compiled_naive = None
    for v in variants:
        try:
            t0 = time.perf_counter()
            if v.name.startswith("naive") and compiled_naive is not None:
                if isinstance(compiled_naive, Exception):  # the naive variants share one module
                    raise compiled_naive
                compiled, info, v.compile_s = compiled_naive
            else:
                module, info = v.build()
                try:
                    compiled = compile_module(module, target, statistics=True, use_cache=False)
                except Exception as e:
                    if v.name.startswith("naive"):
                        compiled_naive = e
                    raise
                v.compile_s = time.perf_counter() - t0
                if v.name.startswith("naive"):
                    compiled_naive = (compiled, info, v.compile_s)
            v.dispatches = compiled.dispatch_count
            loaded = load(compiled)
            v.run = v.make_run(loaded, info, inputs)
            outs = loaded.invoke(FUNCTION, *inputs)  # also a warm-up
            v.extra_bytes = sum(np.asarray(o).nbytes for o in outs[1:])
            v.info = info
            if is_checked(v.name) or v.name == "naive default (host_stats)":
                v.outs = outs
        except Exception as e:  # report and go on: one failing variant must not hide the others
            v.error = short_error(e)
    if variants[0].run is None:
        print(f"base does not run: {variants[0].error}")
        return
    # Tiny models: time `calls` back-to-back calls per sample so a base sample lasts
    # >= min_sample_s (timer and scheduler noise), the same count for every variant.
    t0 = time.perf_counter()
    variants[0].run()
    calls = max(1, math.ceil(min_sample_s / max(time.perf_counter() - t0, 1e-6)))
    runnable = {v.name: _repeat(v.run, calls) for v in variants if v.run is not None}
    print(f"calls per sample: {calls}; medians below are per call")
    print("\n".join(agreement(variants)))
    sys.stdout.flush()
    times = interleaved(runnable, repeats)
    for rounds in times.values():
        for r in rounds:
            for key in r:
                r[key] /= calls
    base = times["base"]
    base_ms = median(r["total"] for r in base) * 1e3
    rows = []
    for v in variants:
        if v.error:
            rows.append([v.name, "FAILED", "", "", "", "", "", ""])
            continue
        t = times[v.name]
        ms = median(r["total"] for r in t) * 1e3
        post = median(r.get("post", 0.0) for r in t) * 1e3
        rows.append(
            [
                v.name,
                f"{v.compile_s:.1f}",
                str(v.dispatches),
                _size(v.extra_bytes),
                f"{ms:.1f}",
                f"{post:.1f}",
                f"{paired_ratio(t, base):.2f}",
                f"{ms / base_ms:.2f}",
            ]
        )
    print(
        table(
            rows,
            [
                "variant",
                "compile s",
                "dispatches",
                "extra out",
                "median ms",
                "host post ms",
                "x base",
                "x base (medians)",
            ],
        )
    )
    for v in variants:
        if v.error:
            print(f"FAILED {v.name}: {v.error}")
    sys.stdout.flush()


def _repeat(run, calls: int):
    if calls == 1:
        return run

    def many():
        post = 0.0
        for _ in range(calls):
            post += (run() or {}).get("post", 0.0)
        return {"post": post}

    return many


def _size(n: int) -> str:
    if n >= 1 << 20:
        return f"{n / (1 << 20):.1f} MiB"
    if n >= 1 << 10:
        return f"{n / (1 << 10):.1f} KiB"
    return f"{n} B"


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--repeats", type=int, default=None, help="timed rounds per model (default 9; --quick 3)")
    p.add_argument(
        "--quick",
        action="store_true",
        help="smoke run (~30 s): tiny sizes, 3 rounds, transformer without the outline=False and naive-lean variants",
    )
    p.add_argument(
        "--breakdown",
        action="store_true",
        help="add injected variants lean+hist, lean+pos_sumsq, lean+adj_sumsq (outline=True): "
        "the cost of each sketch beyond the lean set",
    )
    p.add_argument("--target", default="llvm-cpu", help="opscope target name (llvm-cpu, vulkan-spirv)")
    p.add_argument("--models", default="matmul,transformer", help="comma list of: matmul, transformer")
    p.add_argument(
        "--weights",
        choices=("args", "globals"),
        default="args",
        help="weights as function arguments fed each call (default) or as util.global "
        "constants in the module (dense_resource), the way imported models hold them",
    )
    p.add_argument(
        "--hist-counts",
        default=None,
        help="comma list of histogram lane count types (i32, i8) to compile every injected "
        "variant with, side by side (default: the target's, i8 on llvm-cpu)",
    )
    p.add_argument(
        "--row-lanes",
        default=None,
        help="comma list of row lane counts (0: straight rows) to compile every injected "
        "variant with, side by side (default: the target's, 16 on llvm-cpu)",
    )
    p.add_argument("--mnk", default=None, help="matmul M,K,N (default 512,1024,1024; --quick 64,128,128)")
    p.add_argument("--layers", type=int, default=None, help="transformer layers (default 8; --quick 1)")
    p.add_argument("--d-model", type=int, default=None, help="transformer d_model (default 256; --quick 32)")
    p.add_argument("--seq", type=int, default=None, help="transformer tokens (default 128; --quick 16)")
    args = p.parse_args(argv)
    q = args.quick
    repeats = args.repeats or (3 if q else 9)
    m, k, n = (int(x) for x in (args.mnk or ("64,128,128" if q else "512,1024,1024")).split(","))
    layers = args.layers or (1 if q else 8)
    d_model = args.d_model or (32 if q else 256)
    seq = args.seq or (16 if q else 128)
    counts = tuple(c.strip() for c in (args.hist_counts or get_target(args.target).hist_counts).split(","))
    if not counts or any(c not in HIST_LANES for c in counts):
        p.error(f"--hist-counts takes a comma list of: {', '.join(HIST_LANES)}")
    try:
        lanes = tuple(int(x) for x in (args.row_lanes or str(get_target(args.target).row_lanes)).split(","))
    except ValueError:
        lanes = ()
    if not lanes or any(x < 0 for x in lanes):
        p.error("--row-lanes takes a comma list of lane counts >= 0, e.g. 0,16")
    header("opscope bench_overhead: forward time of injected statistics vs base vs naive", argv)
    print(
        f"# {repeats} timed rounds after 1 warm-up round, variants interleaved; "
        "times include results to host as numpy + decoding the statistics"
    )
    models = [s.strip() for s in args.models.split(",") if s.strip()]
    for name in models:
        wtxt = "" if args.weights == "args" else ", weights in util.globals"
        if name == "matmul":
            bench_model(
                f"matmul {m}x{k}x{n} (1 site, {2 * m * k * n / 1e9:.2f} GFLOP{wtxt})",
                demo.matmul_module(m, k, n, weights=args.weights),
                args.target,
                repeats,
                breakdown=args.breakdown,
                hoist=args.weights == "globals",
                counts=counts,
                lanes=lanes,
            )
        elif name == "transformer":
            ffn = 4 * d_model
            gflop = layers * 2 * seq * (4 * d_model * d_model + 2 * seq * d_model + 2 * d_model * ffn) / 1e9
            bench_model(
                f"transformer layers={layers} d_model={d_model} seq={seq} ffn={ffn} "
                f"({8 * layers} sites, {gflop:.2f} GFLOP{wtxt})",
                demo.transformer_module(layers, d_model, seq, weights=args.weights),
                args.target,
                repeats,
                full=not q,
                breakdown=args.breakdown,
                hoist=args.weights == "globals",
                counts=counts,
                lanes=lanes,
            )
        else:
            p.error(f"unknown model '{name}' (choose matmul, transformer)")
    print(
        "\n# columns: compile s = inject + iree-compile (statistics on); dispatches = "
        "CompiledModule.dispatch_count (static, whole program: an outlined kernel counts once however "
        "often it is called); extra out = bytes returned beyond the model's own result; host post ms = "
        "decoding (injected) or host_stats (naive), included in median ms; x base = median of per-round "
        "ratios to base; x base (medians) = ratio of the medians"
    )
    print(f"# at the end: {load_line()}")


if __name__ == "__main__":
    main()
