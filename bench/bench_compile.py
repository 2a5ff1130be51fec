"""Compile cost of injected statistics: time and dispatches, base vs injected, by site count.

For an MLP of N matmul sites (`opscope.models.demo.mlp_module(layers=N, width, tokens)`, N = 8, 32,
128 by default) it compiles the base model and the model after `inject_matmul_stats` with
the default and the lean sketch sets, each with `outline=True` (default: shared
`{noinline}` stats kernels, called where needed) and `outline=False` (the kernels inlined
at every call). Variants are interleaved round-robin, `--repeats` rounds, medians reported.

Per variant it prints the injection time (the Python passes), the iree-compile time, the
ratio to the base compile, the added compile time per site (at each N, to see whether it
grows linearly), and the dispatch count two ways:

* static: `CompiledModule.dispatch_count`, from `--iree-scheduling-dump-statistics`, which
  counts every `stream.cmd.dispatch` in the program once: an outlined kernel counts once
  however many times it is called;
* per call: dispatches one call of `@main` executes, counted on the IR after IREE's stream
  phase (`--compile-to=stream`), each `util.call`ed function's dispatches multiplied by its
  call count (outline=True only; equals static when everything is inlined);

and the dispatches added per tapped tensor, (per call - base) / (3 N). Nothing asserts on time.

    python bench/bench_compile.py [--repeats 2] [--quick] [--target llvm-cpu] [--sites 8,32,128] [--no-lean]
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import header, interleaved, load_line, median, short_error, table  # noqa: E402

from opscope.ir.loading import module_bytecode, new_context, parse_module  # noqa: E402
from opscope.ir.stat_config import StatConfig  # noqa: E402
from opscope.models import demo  # noqa: E402
from opscope.pipeline.taps import inject_matmul_stats  # noqa: E402
from opscope.run.compile import compile_module  # noqa: E402
from opscope.run.targets import get_target  # noqa: E402

_FUNC = re.compile(r"^\s*util\.func\s+(?:public\s+|private\s+)?@([^\s(]+)\(")
_CALL = re.compile(r"util\.call @([^\s(]+)\(")


def per_call_dispatches(module, target: str) -> int | None:
    """Dispatches one call of the public entry executes, read off the IR after the stream phase."""
    from opscope.run.tools import find_tool

    flags = list(get_target(target).flags)
    with tempfile.TemporaryDirectory(prefix="opscope-bench-") as d:
        src, out = Path(d) / "in.mlirbc", Path(d) / "out.mlir"
        src.write_bytes(module_bytecode(module))
        done = subprocess.run(
            [find_tool("iree-compile"), *flags, "--compile-to=stream", str(src), "-o", str(out)],
            capture_output=True,
            text=True,
            check=False,
        )
        if done.returncode != 0:
            return None
        text = out.read_text()
    funcs: dict[str, list] = {}
    current = None
    for line in text.splitlines():
        m = _FUNC.match(line)
        if m:
            current = m.group(1)
            funcs[current] = [0, Counter()]
            continue
        if current is None:
            continue
        if "stream.cmd.dispatch " in line:
            funcs[current][0] += 1
        c = _CALL.search(line)
        if c:
            funcs[current][1][c.group(1)] += 1

    def total(name: str, depth: int = 0) -> int:
        own, calls = funcs[name]
        if depth > 8:
            return own
        return own + sum(n * total(callee, depth + 1) for callee, n in calls.items() if callee in funcs)

    entry = "main" if "main" in funcs else next(iter(funcs), None)
    return total(entry) if entry else None


def bench_sites(
    n_sites: int,
    width: int,
    tokens: int,
    target: str,
    repeats: int,
    variants: list[tuple[str, StatConfig | None, bool]],
    weights: str = "args",
) -> dict:
    """Compile base and every injected variant for an N-site MLP; print a table, return the medians."""
    source = demo.mlp_module(layers=n_sites, width=width, tokens=tokens, weights=weights)
    wtxt = "" if weights == "args" else f", weights={weights}"
    print(
        f"\n## mlp_module(layers={n_sites}, width={width}, tokens={tokens}{wtxt}): {n_sites} sites, "
        f"{3 * n_sites} tapped tensors, on {target}, {repeats} compile(s) per variant"
    )
    sys.stdout.flush()
    info: dict[str, dict] = {}
    errors: dict[str, str] = {}

    def make(name: str, config: StatConfig | None, outline: bool):
        def run():
            module = parse_module(source, new_context())
            t0 = time.perf_counter()
            if config is not None:
                inject_matmul_stats(module, config, outline=outline, **get_target(target).layout)
            t1 = time.perf_counter()
            try:
                compiled = compile_module(module, target, statistics=True, use_cache=False)
            except Exception as e:  # a failing variant is reported, the others go on
                errors[name] = short_error(e)
                return {"inject": t1 - t0, "compile": float("nan")}
            t2 = time.perf_counter()
            if name not in info:
                stats = compiled.statistics.get("stream-aggregate", {})
                ex = stats.get("execution", {})
                info[name] = {
                    "static": compiled.dispatch_count,
                    "per_call": (
                        per_call_dispatches(module, target)
                        if config is not None and outline
                        else compiled.dispatch_count
                    ),
                    "submissions": ex.get("submission-count"),
                    "syncs": stats.get("synchronization", {}).get("await-count"),
                }
            return {"inject": t1 - t0, "compile": t2 - t1}

        return run

    runs = {name: make(name, cfg, outline) for name, cfg, outline in variants}
    times = interleaved(runs, repeats, warmup=0)
    base_c = median(r["compile"] for r in times["base"])
    base_d = info.get("base", {}).get("per_call")
    rows, result = [], {}
    for name, cfg, _outline in variants:
        t = times[name]
        inj = median(r["inject"] for r in t)
        comp = median(r["compile"] for r in t)
        i = info.get(name, {})
        per_call = i.get("per_call")
        added_site = (comp - base_c) / n_sites if cfg is not None else float("nan")
        per_tensor = (
            (per_call - base_d) / (3 * n_sites)
            if cfg is not None and per_call is not None and base_d is not None
            else None
        )
        result[name] = {"inject": inj, "compile": comp, "added_per_site": added_site, "per_tensor": per_tensor}
        if name in errors:
            rows.append([name, f"{inj:.2f}", "FAILED", "", "", "", "", "", "", ""])
            continue
        rows.append(
            [
                name,
                f"{inj:.2f}",
                f"{comp:.2f}",
                f"{comp / base_c:.2f}",
                "" if cfg is None else f"{added_site * 1e3:.0f}",
                str(i.get("static")),
                str(per_call),
                "" if per_tensor is None else f"{per_tensor:.1f}",
                str(i.get("submissions")),
                str(i.get("syncs")),
            ]
        )
    print(
        table(
            rows,
            [
                "variant",
                "inject s",
                "compile s",
                "x base",
                "+ms/site",
                "dispatches static",
                "per call",
                "+per tensor",
                "submissions",
                "host syncs",
            ],
        )
    )
    for name, err in errors.items():
        print(f"FAILED {name}: {err}")
    sys.stdout.flush()
    return result


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument(
        "--repeats",
        type=int,
        default=None,
        help="compiles per variant (default: 2, but 1 at N >= 100 where an inlined compile takes "
        "about a minute; --quick 1)",
    )
    p.add_argument("--quick", action="store_true", help="smoke run (~20 s): 2 and 4 sites, 1 round")
    p.add_argument("--target", default="llvm-cpu", help="opscope target name (llvm-cpu, vulkan-spirv, cuda, ...)")
    p.add_argument("--sites", default=None, help="comma list of site counts (default 8,32,128; --quick 2,4)")
    p.add_argument("--width", type=int, default=64, help="MLP width (default 64)")
    p.add_argument("--tokens", type=int, default=64, help="MLP tokens (default 64)")
    p.add_argument("--no-lean", action="store_true", help="skip the lean sketch set")
    p.add_argument(
        "--weights",
        choices=("args", "globals"),
        default="args",
        help="weights as function arguments (default) or as util.global constants",
    )
    args = p.parse_args(argv)
    q = args.quick
    repeats = args.repeats or (1 if q else 2)
    sites = [int(s) for s in (args.sites or ("2,4" if q else "8,32,128")).split(",")]
    variants: list[tuple[str, StatConfig | None, bool]] = [("base", None, True)]
    configs = [("default", StatConfig())] + ([] if args.no_lean else [("lean", StatConfig.lean())])
    for cname, cfg in configs:
        for outline in (True, False):
            variants.append((f"{cname}, outline={outline}", cfg, outline))
    header("opscope bench_compile: compile time and dispatches, base vs injected", argv)
    print(
        f"# {repeats} compile(s) per variant{'' if (args.repeats or q) else ' (1 at N >= 100)'}, "
        "interleaved round-robin, medians; statistics on; no cache"
    )
    results = {}
    for n in sites:
        r = repeats if (args.repeats or n < 100) else 1
        results[n] = bench_sites(n, args.width, args.tokens, args.target, r, variants, args.weights)

    print("\n## growth with the number of sites (is it linear?)")
    rows = []
    for name, cfg, _ in variants:
        row = [name]
        for n in sites:
            r = results[n][name]
            row.append(f"{r['compile'] / n * 1e3:.0f}")
        for n in sites:
            r = results[n][name]
            row.append("" if cfg is None else f"{r['added_per_site'] * 1e3:.0f}")
        for n in sites:
            r = results[n][name]
            row.append(f"{r['inject'] / n * 1e3:.1f}" if cfg is not None else "")
        rows.append(row)
    head = (
        ["variant"]
        + [f"compile ms/site N={n}" for n in sites]
        + [f"+ms/site N={n}" for n in sites]
        + [f"inject ms/site N={n}" for n in sites]
    )
    print(table(rows, head))
    print(
        "\n# columns: x base = compile time / base compile time at the same N; +ms/site = (compile - base "
        "compile) / N; dispatches static = CompiledModule.dispatch_count; per call = dispatches one call "
        "executes (outlined kernels times their call count); +per tensor = (per call - base) / (3 N); "
        "submissions, host syncs = IREE's static stream statistics (submission-count, await-count)"
    )
    print(f"# at the end: {load_line()}")


if __name__ == "__main__":
    main()
