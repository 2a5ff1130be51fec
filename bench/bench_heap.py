"""glibc's malloc settings against opscope's (`opscope.run.heap`): forward time and page faults per call.

IREE's CPU runtime allocates each call's buffers with malloc; above glibc's mmap threshold
(at most 32 MiB) every call maps them afresh and faults them in page by page. opscope raises
the thresholds when it loads a module. The settings are process-wide and freed memory stays
in the heap, so the two are compared in child processes, alternating round by round: each
child loads every build and times its variants interleaved, with `OPSCOPE_MALLOC=system`
(glibc's own settings) or without (opscope's). Builds per model: `untapped` (as imported),
`tapped` (the default sketch set, weights once) and `activations out` (every matmul's input
and output returned as results, no statistics: what a statistics module outside the model
would be fed). Models as in `bench_flags.py`. Nothing asserts on time.

    python bench/bench_heap.py                              # minilm, transformer, matmul: ~4 min on 2 cores
    python bench/bench_heap.py --models minilm,smollm2      # ~10 min
    python bench/bench_heap.py --quick                      # the small demo transformer and matmul
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import header, interleaved, load_line, median, run_main, table  # noqa: E402

BUILDS = ("untapped", "tapped", "activations out")
MODES = ("glibc", "opscope")  # OPSCOPE_MALLOC=system, or opscope's settings


def write_builds(name: str, quick: bool, folder: Path) -> dict:
    """Compile model `name`'s three builds into `folder`; returns what a child needs to run them."""
    import numpy as np
    from bench_flags import build

    from opscope.ir.loading import module_bytecode, new_context, parse_module
    from opscope.passes.dump_tensors import DumpTensors
    from opscope.pipeline.taps import inject_stats
    from opscope.pipeline.textual import Pipeline, run_pipeline
    from opscope.run.compile import compile_module
    from opscope.run.targets import get_target

    target = get_target("llvm-cpu")
    src, inputs, _ = build(name, quick)
    src = src.encode() if isinstance(src, str) else src
    tapped, manifest = inject_stats(parse_module(src, new_context(), name), weights_once=True, **target.layout)
    exposed = parse_module(src, new_context(), name)
    run_pipeline(exposed, Pipeline(tuple(DumpTensors(role=r, max_bytes=1 << 40) for r in ("lhs", "out"))))
    sources = {"untapped": src, "tapped": module_bytecode(tapped), "activations out": module_bytecode(exposed)}
    info = {
        "inputs": str(folder / f"{name}.npz"),
        "builds": {},
        "once": {"tapped": manifest.weights_function} if manifest.weights_function else {},
    }
    np.savez(info["inputs"], *inputs)
    for label, text in sources.items():
        path = folder / f"{name}-{label.replace(' ', '-')}.vmfb"
        path.write_bytes(compile_module(text, target).vmfb)
        info["builds"][label] = str(path)
    return info


def child(spec_path: str, calls: int) -> None:
    """Time every build of the spec's models in this process (its malloc settings as the
    environment says) and print one JSON line: model -> build -> {ms, faults per call}."""
    import iree.runtime as rt
    import numpy as np

    from opscope.run.compile import CompiledModule
    from opscope.run.runtime import load
    from opscope.run.targets import get_target

    target = get_target("llvm-cpu")
    spec = json.loads(Path(spec_path).read_text())
    out = {}
    for model, info in spec.items():
        with np.load(info["inputs"]) as z:
            inputs = [z[f"arr_{i}"] for i in range(len(z.files))]
        variants = {}
        for label, path in info["builds"].items():
            loaded = load(CompiledModule(Path(path).read_bytes(), target, target.flags))
            if label in info["once"]:
                loaded.invoke_raw(info["once"][label])
            args = [rt.asdevicearray(loaded.config.device, x) for x in inputs]

            def call(loaded=loaded, args=args) -> dict[str, float]:
                f0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
                loaded.invoke_raw("main", *args)  # the results are dropped: their buffers freed
                return {"faults": resource.getrusage(resource.RUSAGE_SELF).ru_minflt - f0}

            variants[label] = call
        rounds = interleaved(variants, calls, warmup=2)
        out[model] = {
            label: {"ms": median([r["total"] for r in rs]) * 1e3, "faults": median([r["faults"] for r in rs])}
            for label, rs in rounds.items()
        }
    print(json.dumps(out))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--models", default="minilm,transformer,matmul", help="comma list of minilm, smollm2, transformer, matmul"
    )
    ap.add_argument("--rounds", type=int, default=None, help="child processes per setting (default 3; --quick 1)")
    ap.add_argument(
        "--calls", type=int, default=None, help="timed calls per build in each child (default 9; --quick 3)"
    )
    ap.add_argument("--quick", action="store_true", help="the small demo transformer and matmul, one round")
    ap.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    calls = args.calls or (3 if args.quick else 9)
    if args.child:
        child(args.child, calls)
        return 0
    rounds = args.rounds or (1 if args.quick else 3)
    models = [m.strip() for m in ("transformer,matmul" if args.quick else args.models).split(",") if m.strip()]
    unknown = [m for m in models if m not in ("minilm", "smollm2", "transformer", "matmul")]
    if unknown:
        ap.error(f"unknown model(s) {', '.join(unknown)}: choose from minilm, smollm2, transformer, matmul")
    warnings.filterwarnings("ignore")
    header("bench_heap: glibc's malloc settings vs opscope's, forward time and page faults per call", argv)
    with tempfile.TemporaryDirectory(prefix="bench_heap") as tmp:
        folder = Path(tmp)
        spec = {m: write_builds(m, args.quick, folder) for m in models}
        (folder / "spec.json").write_text(json.dumps(spec))
        runs: dict[str, list[dict]] = {mode: [] for mode in MODES}
        for r in range(rounds):
            for mode in MODES if r % 2 == 0 else MODES[::-1]:
                env = {**os.environ, "OPSCOPE_MALLOC": "system" if mode == "glibc" else ""}
                proc = subprocess.run(
                    [sys.executable, __file__, "--child", str(folder / "spec.json"), "--calls", str(calls)],
                    capture_output=True,
                    text=True,
                    env=env,
                )
                if proc.returncode != 0:
                    raise SystemExit(f"bench_heap: a child ({mode}) failed: {proc.stderr.strip()[-600:]}")
                runs[mode].append(json.loads(proc.stdout.strip().splitlines()[-1]))
    print(
        f"# {rounds} child process(es) per setting, alternating; {calls} timed calls per build in each; "
        f"median over children of each child's median; after: {load_line()}"
    )
    for model in models:
        rows = []
        for label in BUILDS:
            ms = {mode: median([run[model][label]["ms"] for run in runs[mode]]) for mode in MODES}
            faults = {mode: median([run[model][label]["faults"] for run in runs[mode]]) for mode in MODES}
            base = {mode: median([run[model]["untapped"]["ms"] for run in runs[mode]]) for mode in MODES}
            rows.append(
                [
                    label,
                    f"{ms['glibc']:.2f}",
                    f"{ms['opscope']:.2f}",
                    f"{ms['opscope'] / ms['glibc']:.2f}",
                    f"{ms['glibc'] / base['glibc']:.2f}",
                    f"{ms['opscope'] / base['opscope']:.2f}",
                    f"{faults['glibc']:.0f}",
                    f"{faults['opscope']:.0f}",
                ]
            )
        print(f"\n## {model}")
        print(
            table(
                rows,
                [
                    "build",
                    "ms glibc",
                    "ms opscope",
                    "opscope / glibc",
                    "x untapped glibc",
                    "x untapped opscope",
                    "faults/call glibc",
                    "faults/call opscope",
                ],
            )
        )
    return 0


if __name__ == "__main__":
    run_main(main, "bench_heap")
