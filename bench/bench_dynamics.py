"""What the inference-dynamics taps cost: inject + compile time and forward time, per tap family.

For each model (zoo names; default SmolLM2-135M, 30 layers, and MiniLM-L6, both trained, on
their real text) it compiles, with the target's kernel layout and without the compile cache:

* base: the model as imported;
* attention, residual, routing (when the model routes), and dynamics (the three together):
  the inference-dynamics taps alone;
* matmul: the value sketches of every matmul (the default sketch set);
* all: matmul + dynamics, what `opscope profile` taps by default;
* matmul+once, all+once: the same, the weights' sketches computed once per loaded module
  (`split-weight-stats`, what `opscope profile` builds);

then times one call of each on the zoo's first input, results brought to the host and the
statistics decoded by the manifest: each variant interleaved round-robin with base over
`--repeats` rounds (in pairs: SmolLM2's six variants do not fit in memory at once), and
prints the medians with the paired ratio to base (`x base`, the median over rounds of the
ratio in the same round) beside the compile time and its ratio to base's. Nothing asserts.

    python bench/bench_dynamics.py                       # smollm2 + minilm, ~6 min on 2 cores
    python bench/bench_dynamics.py --models minilm       # ~2 min
    python bench/bench_dynamics.py --quick               # mixtral-tiny (routes), 3 rounds, ~40 s
"""

from __future__ import annotations

import argparse
import gc
import sys
import time
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import header, interleaved, load_line, median, paired_ratio, run_main, table  # noqa: E402

DYNAMICS = ("attention", "routing", "residual")


def variants(routes: bool) -> dict[str, tuple[str, ...]]:
    """Variant name -> taps (routing only when the model has a top-k); a name ending in
    `ONCE` ("+once") computes the weights' sketches once per loaded module (`split-weight-stats`)."""
    out = {"base": (), "attention": ("attention",), "residual": ("residual",)}
    if routes:
        out["routing"] = ("routing",)
    out.update(
        {
            "dynamics": DYNAMICS,
            "matmul": ("matmul",),
            "all": ("matmul",) + DYNAMICS,
            "matmul" + ONCE: ("matmul",),
            "all" + ONCE: ("matmul",) + DYNAMICS,
        }
    )
    return out


ONCE = "+once"


def bench_model(name: str, target_name: str, repeats: int, wanted: set[str] | None = None) -> None:
    """Compile every variant (or the `wanted` ones) of zoo model `name`, time them side by
    side, print the table."""
    from opscope.ir.loading import new_context, parse_module
    from opscope.models.source import open_model
    from opscope.pipeline.taps import inject_stats
    from opscope.run.compile import compile_module
    from opscope.run.instrumented import tapped_outputs
    from opscope.run.runtime import load
    from opscope.run.targets import get_target

    target = get_target(target_name)
    model = open_model(name, 1)
    args = model.inputs[0]
    source = model.module
    probe, probe_manifest = inject_stats(parse_module(source, new_context(), name), taps=("routing",))
    routes = bool(probe_manifest.sites)
    del probe
    compiled, rows = {}, []
    for label, taps in variants(routes).items():
        if wanted and label not in wanted:
            continue
        module = parse_module(source, new_context(), name)
        t0 = time.perf_counter()
        manifest = None
        if taps:
            module, manifest = inject_stats(module, taps=taps, weights_once=label.endswith(ONCE), **target.layout)
        inject_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        compiled[label] = (compile_module(module, target, use_cache=False), manifest)
        compile_s = time.perf_counter() - t0
        del module
        gc.collect()
        sites = len(manifest.sites) if manifest else 0
        rows.append(
            [label, str(sites), str(len(manifest.entries)) if manifest else "0", f"{inject_s:.2f}", f"{compile_s:.1f}"]
        )
        print(f"  {label}: {sites} sites, compiled in {compile_s:.1f} s", file=sys.stderr)
    # timed in pairs, each variant interleaved with base, loaded only after every compile:
    # SmolLM2 needs 13 GB to compile `all` and a few GB per loaded variant, so six variants
    # loaded at once do not fit in 23 GB
    base_rt = load(compiled.pop("base")[0])

    def runner(rt, manifest):
        def call() -> None:  # the weights' sketches (weights once) come from the first call, kept
            out = tapped_outputs(rt, manifest, args) if manifest is not None else rt.invoke("main", *args)
            if manifest is not None:
                manifest.values(out)

        return call

    times = {"base": []}
    for label in list(compiled):
        c, manifest = compiled.pop(label)
        rt = load(c)
        del c
        rounds = interleaved({"base": runner(base_rt, None), label: runner(rt, manifest)}, repeats)
        times["base"] += rounds["base"]
        times[label] = (rounds[label], paired_ratio(rounds[label], rounds["base"]))
        del rt
        gc.collect()
    base_compile = float(rows[0][4])  # base is first
    for row in rows:
        rs, ratio = (times["base"], 1.0) if row[0] == "base" else times[row[0]]
        row += [
            f"{float(row[4]) / base_compile:.2f}x",
            f"{median([r['total'] for r in rs]) * 1e3:.2f}",
            f"{ratio:.2f}x",
        ]
    print(f"\n## {model.name} on {target.name}, median of {repeats} rounds, each variant interleaved with base")
    print(
        table(rows, ["variant", "sites", "sketches", "inject s", "compile s", "compile x base", "forward ms", "x base"])
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--models", default=None, help="comma-separated zoo names (default smollm2,minilm; --quick mixtral-tiny)"
    )
    ap.add_argument("--target", default="llvm-cpu", help="any runnable opscope target (default llvm-cpu)")
    ap.add_argument("--repeats", type=int, default=None, help="timed rounds (default 7; --quick 3)")
    ap.add_argument("--quick", action="store_true", help="mixtral-tiny, 3 rounds: a smoke run")
    ap.add_argument(
        "--variants",
        default=None,
        help="comma-separated variants (default all: base, attention, residual, routing, dynamics, "
        "matmul, all; base is always kept)",
    )
    args = ap.parse_args(argv)
    models = (args.models or ("mixtral-tiny" if args.quick else "smollm2,minilm")).split(",")
    repeats = args.repeats or (3 if args.quick else 7)
    warnings.filterwarnings("ignore")
    header("bench_dynamics: what the attention, routing and residual taps cost (compile, forward)", argv)
    wanted = {"base", *args.variants.split(",")} if args.variants else None
    for name in models:
        bench_model(name.strip(), args.target, repeats, wanted)
        sys.stdout.flush()
    print(f"\n# {load_line()}")
    return 0


if __name__ == "__main__":
    run_main(main, "bench_dynamics")
