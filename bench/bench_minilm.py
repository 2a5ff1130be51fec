"""MiniLM through opscope: import + lower + compile time, and forward time vs PyTorch eager.

One run, side by side: the trained all-MiniLM-L6-v2 (eager attention, so its 49 matmuls are
sites) on tokenized English sentences, run by PyTorch eager, by IREE compiled as imported
(llvm-cpu with the tuned flags of `opscope.run.targets`), and by IREE with every selected site
tapped. Prints the one-time phase times, then forward medians and paired ratios, and the
largest |Δ| of each IREE variant against PyTorch on the same inputs. Nothing asserts on time.

    python bench/bench_minilm.py            # batch 8 x 64 tokens, all 49 sites tapped
    python bench/bench_minilm.py --quick    # batch 2 x 16 tokens, layer 0's sites, 3 rounds
    python bench/bench_minilm.py --weights-once --global-opt-o3   # + weights once, + the flags before 2026-12-01
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import numpy as np  # noqa: E402
from common import header, interleaved, load_line, median, paired_ratio, run_main, table  # noqa: E402

SENTENCES = (
    "The quick brown fox jumps over the lazy dog.",
    "Compilers turn high-level programs into fast machine code.",
    "A transformer encoder maps each token to a contextual vector.",
    "Sparse matrices store only their nonzero entries.",
    "The weather today is sunny with a light breeze from the west.",
    "Profiling tells you where a program really spends its time.",
    "She opened the window and the room filled with cool air.",
    "Quantization trades a little accuracy for a lot of speed.",
)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="batch 2 x 16 tokens, layer-0 sites, 3 rounds")
    ap.add_argument("--batch", type=int, default=None, help="sentences per call (default 8; --quick 2)")
    ap.add_argument("--seq", type=int, default=None, help="tokens per sentence (default 64; --quick 16)")
    ap.add_argument("--repeats", type=int, default=None, help="timed rounds (default 9; --quick 3)")
    ap.add_argument("--torch-threads", type=int, default=0, help="torch.set_num_threads (default: torch's own)")
    ap.add_argument("--sites", default=None, help="regex of tapped sites (default all; --quick layer 0)")
    ap.add_argument(
        "--hoist-constants",
        action="store_true",
        help="add 'iree tapped, hoisted': the weights' sketches const-evaluated at compile time "
        "(inject_matmul_stats(..., hoist_constants=True))",
    )
    ap.add_argument(
        "--weights-once",
        action="store_true",
        help="add 'iree tapped, weights once': the weights' sketches in @main$weights, called once per "
        "loaded module (inject_matmul_stats(..., weights_once=True), split-weight-stats)",
    )
    ap.add_argument(
        "--global-opt-o3",
        action="store_true",
        help="add 'iree as imported, global opt O3': the tuned flags without "
        "--iree-global-optimization-opt-level=O1 (opscope's llvm-cpu flags until 2026-12-01)",
    )
    args = ap.parse_args(argv)
    batch = args.batch or (2 if args.quick else 8)
    seq = args.seq or (16 if args.quick else 64)
    repeats = args.repeats or (3 if args.quick else 9)
    sites = args.sites if args.sites is not None else (r"^encoder\.layer\.0\." if args.quick else "")
    warnings.filterwarnings("ignore")
    header("bench_minilm: MiniLM-L6 import, compile and forward, opscope/IREE vs PyTorch eager", argv)

    import torch

    from opscope.importers import torch_fx
    from opscope.importers.torch_lowering import lower_torch
    from opscope.ir.loading import module_bytecode, parse_module
    from opscope.ir.sites import find_sites
    from opscope.models import huggingface
    from opscope.pipeline.taps import inject_matmul_stats
    from opscope.run.compile import compile_module
    from opscope.run.runtime import load
    from opscope.run.targets import get_target

    if args.torch_threads:
        torch.set_num_threads(args.torch_threads)
    sentences = [SENTENCES[i % len(SENTENCES)] for i in range(batch)]
    model, kwargs = huggingface.minilm(sentences, seq=seq)
    phases: list[list[str]] = []

    def timed(label, fn):
        t0 = time.perf_counter()
        out = fn()
        phases.append([label, f"{time.perf_counter() - t0:.2f}"])
        return out

    prog = timed("torch.export + decompositions", lambda: torch_fx.export_program(model, (), kwargs))
    module = timed("FX import (torch dialect)", lambda: torch_fx.import_program(prog))
    module = timed("torch -> linalg lowering", lambda: lower_torch(module))
    all_sites = find_sites(module)
    source = module_bytecode(module)
    target = get_target("llvm-cpu")
    base = timed("compile, as imported", lambda: compile_module(module, target, use_cache=False))
    tapped, manifest = timed(
        f"inject ({'all' if not sites else repr(sites)} sites)",
        lambda: inject_matmul_stats(parse_module(source), sites=sites, **target.layout),
    )
    inst = timed(
        f"compile, {len(manifest.sites)} sites tapped", lambda: compile_module(tapped, target, use_cache=False)
    )
    base_rt, inst_rt = load(base), load(inst)
    hoist_rt = None
    if args.hoist_constants:
        hoisted, hoist_manifest = timed(
            "inject, weights hoisted",
            lambda: inject_matmul_stats(parse_module(source), sites=sites, hoist_constants=True, **target.layout),
        )
        hoist_rt = load(
            timed("compile, tapped + weights hoisted", lambda: compile_module(hoisted, target, use_cache=False))
        )
    once_rt = None
    if args.weights_once:
        split, once_manifest = timed(
            "inject, weights once",
            lambda: inject_matmul_stats(parse_module(source), sites=sites, weights_once=True, **target.layout),
        )
        once_rt = load(timed("compile, tapped + weights once", lambda: compile_module(split, target, use_cache=False)))
    o3_rt = None
    if args.global_opt_o3:
        from bench_flags import flag_sets

        o3 = flag_sets()["global-opt-O3"]
        o3_rt = load(timed("compile, as imported, global opt O3", lambda: compile_module(module, o3, use_cache=False)))
    inputs = torch_fx.flat_inputs(model, (), kwargs)
    n_orig = manifest.num_original_results

    print(
        f"\n## MiniLM-L6 (d 384, 6 layers), batch {batch} x {seq} tokens, llvm-cpu "
        f"({len(all_sites)} matmul sites, {sum(s.flops for s in all_sites) / 1e9:.2f} GFLOP per call; "
        f"{len(manifest.sites)} tapped, {len(manifest.entries)} sketches)"
    )
    print(f"# flags: {' '.join(target.flags)}")
    print(table(phases, ["one-time phase", "seconds"]))

    want = torch_fx.eager_outputs(model, (), kwargs)
    got_base = base_rt.invoke("main", *inputs)
    got_inst_all = inst_rt.invoke("main", *inputs)

    def max_err(outs) -> str:
        """The largest |Δ| of a build's original results against PyTorch's."""
        return f"{max(float(np.abs(a - b).max()) for a, b in zip(outs[:n_orig], want)):.2g}"

    errs = {"pytorch eager": "-", "iree as imported": max_err(got_base), "iree tapped": max_err(got_inst_all)}
    if o3_rt is not None:
        errs["iree as imported, global opt O3"] = max_err(o3_rt.invoke("main", *inputs))
    if hoist_rt is not None:
        got_hoist = hoist_rt.invoke("main", *inputs)
        errs["iree tapped, hoisted"] = max_err(got_hoist)
        # Hoisted sketches are the per-call ones, computed once at compile time.
        every_call, once = manifest.values(got_inst_all), hoist_manifest.values(got_hoist)
        worst = max(float(np.max(np.abs(once[k] - v) / (np.abs(v) + 1e-6))) for k, v in every_call.items())
        print(f"hoisted sketches vs per-call sketches: {len(once)} keys, max relative difference {worst:.2g}")

    if once_rt is not None:
        from opscope.run.instrumented import tapped_outputs

        got_once = tapped_outputs(once_rt, once_manifest, inputs)
        errs["iree tapped, weights once"] = max_err(got_once)
        every_call, once = manifest.values(got_inst_all), once_manifest.values(got_once)
        same = list(every_call) == list(once) and all(np.array_equal(once[k], v) for k, v in every_call.items())
        print(
            f"weights-once sketches vs per-call sketches: {len(once)} keys, "
            f"{'identical, same order' if same else 'DIFFERENT'}"
        )

    def eager() -> None:
        with torch.no_grad():
            model(**kwargs)

    def runner(rt):
        def call() -> None:
            rt.invoke("main", *inputs)

        return call

    variants = {"pytorch eager": eager, "iree as imported": runner(base_rt), "iree tapped": runner(inst_rt)}
    if o3_rt is not None:
        variants["iree as imported, global opt O3"] = runner(o3_rt)
    if hoist_rt is not None:
        variants["iree tapped, hoisted"] = runner(hoist_rt)
    if once_rt is not None:
        variants["iree tapped, weights once"] = runner(once_rt)  # main only: @main$weights ran once, above
    rounds = interleaved(variants, repeats, warmup=2)
    ref, iree = rounds["pytorch eager"], rounds["iree as imported"]
    rows = []
    for name, rs in rounds.items():
        rows.append(
            [
                name,
                f"{median([r['total'] for r in rs]) * 1e3:.2f}",
                f"{paired_ratio(rs, ref):.2f}x eager",
                f"{paired_ratio(rs, iree):.2f}x base",
                errs[name],
            ]
        )
    print(f"\n# forward, median of {repeats} interleaved rounds (torch threads: {torch.get_num_threads()})")
    print(table(rows, ["variant", "ms", "vs eager", "vs base", "max |Δ| vs eager"]))
    print(f"\n# {load_line()}")
    return 0


if __name__ == "__main__":
    run_main(main, "bench_minilm")
