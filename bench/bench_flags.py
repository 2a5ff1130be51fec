"""IREE's llvm-cpu flags on the models users bring: opscope's tuned set against alternatives, untapped.

Per model, each flag set compiles the model as imported (a child `iree-compile` per build, no
cache) and the forwards run interleaved round-robin with PyTorch eager where the model comes
from PyTorch. `x tuned` and `x eager` are medians over rounds of the ratio in the same round.
The sets: `tuned` (the llvm-cpu target of `opscope.run.targets`), `global-opt-O3` (the same
without `--iree-global-optimization-opt-level=O1`: opscope's flags until 2026-12-01), `O3
no-dt` (tuned without data tiling) and `O0` (IREE's defaults). Models: the zoo's MiniLM
(8 × 48 tokens) and SmolLM2 (4 × 32; `--models` to pick), a ResNet-18 at 224 px (random init,
batch 2), and the demo's 8-layer transformer and 512×1024×1024 matmul with their weights in
globals. Nothing asserts on time.

    python bench/bench_flags.py                                  # minilm, transformer, matmul: ~3 min on 2 cores
    python bench/bench_flags.py --models minilm,smollm2,resnet   # ~8 min
    python bench/bench_flags.py --quick                          # a 1-layer d 32 transformer and a 64x128x128 matmul
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import header, interleaved, load_line, median, paired_ratio, run_main, short_error, table  # noqa: E402

from opscope.run.targets import GLOBAL_OPT_O1, Target, get_target  # noqa: E402

MODELS = ("minilm", "smollm2", "resnet", "transformer", "matmul")


def flag_sets() -> dict[str, Target]:
    """name -> a Target carrying that flag set (all run on local-task)."""
    tuned = get_target("llvm-cpu")
    device = tuple(f for f in tuned.flags if f.startswith(("--iree-hal-", "--iree-llvmcpu-target-cpu")))
    sets = {
        "tuned": tuned.flags,
        "global-opt-O3": tuple(f for f in tuned.flags if f != GLOBAL_OPT_O1),
        "O3 no-dt": tuple(f for f in tuned.flags if f != "--iree-opt-data-tiling"),
        "O0": device,
    }
    return {name: Target(name, flags, tuned.driver, "bench_flags") for name, flags in sets.items()}


def build(name: str, quick: bool = False) -> tuple[bytes | str, list, Callable[[], None] | None]:
    """(MLIR source, inputs, eager forward or None) of model `name` (the demo models small when `quick`)."""
    import numpy as np

    from opscope.models import demo

    if name in ("transformer", "matmul"):
        from opscope.drive.inputs import generate
        from opscope.ir.arguments import arguments
        from opscope.ir.loading import parse_module

        if name == "transformer":
            src = demo.transformer_module(*((1, 32, 16) if quick else (8, 256, 128)), weights="globals")
        else:
            src = demo.matmul_module(*((64, 128, 128) if quick else (512, 1024, 1024)), weights="globals")
        return src, next(generate(arguments(parse_module(src)), 1)), None
    import torch

    from opscope.importers.torch_fx import flat_inputs, import_torch
    from opscope.ir.loading import module_bytecode

    if name == "resnet":
        import transformers as tf

        cfg = tf.ResNetConfig(
            num_channels=3, embedding_size=64, hidden_sizes=[64, 128, 256, 512], depths=[2, 2, 2, 2], layer_type="basic"
        )
        model = tf.ResNetModel(cfg).eval()
        kwargs = {
            "pixel_values": torch.from_numpy(
                np.random.default_rng(0).standard_normal((2, 3, 224, 224)).astype(np.float32)
            )
        }
    else:  # the zoo entry's model and first input, loaded once for both the import and eager
        from opscope.models import huggingface, zoo

        ids, mask = (zoo.minilm_inputs if name == "minilm" else zoo.smollm2_inputs)(1)[0]
        model = huggingface.minilm_model() if name == "minilm" else huggingface.smollm2_model()
        kwargs = {"input_ids": torch.from_numpy(ids), "attention_mask": torch.from_numpy(mask)}
    src = module_bytecode(import_torch(model, (), name=name, example_kwargs=kwargs))
    inputs = flat_inputs(model, (), kwargs)

    def eager() -> None:
        with torch.no_grad():
            model(**kwargs)

    return src, inputs, eager


def bench_model(name: str, sets: dict[str, Target], repeats: int, quick: bool = False) -> list[list[str]]:
    """Compile `name` with every flag set, time the forwards side by side, one table row per variant."""
    from opscope.run.compile import compile_isolated
    from opscope.run.runtime import load

    src, inputs, eager = build(name, quick)
    variants: dict[str, Callable[[], None]] = {}
    if eager is not None:
        variants["pytorch eager"] = eager
    compile_s: dict[str, str] = {}
    for label, target in sets.items():
        t0 = time.perf_counter()
        try:
            loaded = load(compile_isolated(src, target))
        except Exception as e:  # one flag set failing (an IREE bug) must not hide the others
            print(f"{name}, {label}: {short_error(e)}", flush=True)
            continue
        compile_s[label] = f"{time.perf_counter() - t0:.1f}"
        loaded.invoke("main", *inputs)
        variants[label] = lambda rt=loaded: (rt.invoke("main", *inputs), None)[1]
        print(f"{name}, {label}: compiled in {compile_s[label]} s", flush=True)
    rounds = interleaved(variants, repeats, warmup=1)
    rows = []
    for label, rs in rounds.items():
        rows.append(
            [
                name,
                label,
                compile_s.get(label, "-"),
                f"{median([r['total'] for r in rs]) * 1e3:.1f}",
                f"{paired_ratio(rs, rounds['tuned']):.2f}x" if "tuned" in rounds else "-",
                f"{paired_ratio(rs, rounds['pytorch eager']):.2f}x" if "pytorch eager" in rounds else "-",
            ]
        )
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default="minilm,transformer,matmul", help=f"comma list of {', '.join(MODELS)}")
    ap.add_argument("--sets", default=None, help="comma list of flag sets (default: all)")
    ap.add_argument("--repeats", type=int, default=None, help="timed rounds (default 7; --quick 2)")
    ap.add_argument(
        "--quick",
        action="store_true",
        help="smoke run: small transformer and matmul, tuned and global-opt-O3 only, 2 rounds",
    )
    args = ap.parse_args(argv)
    repeats = args.repeats or (2 if args.quick else 7)
    if args.quick:
        args.models, args.sets = "transformer,matmul", args.sets or "global-opt-O3"
    warnings.filterwarnings("ignore")
    models = [m.strip() for m in args.models.split(",") if m.strip()]
    bad = [m for m in models if m not in MODELS]
    if bad:
        raise SystemExit(f"bench_flags: error: unknown model {bad[0]!r} (choose from {', '.join(MODELS)})")
    sets = flag_sets()
    if args.sets:
        keep = [s.strip() for s in args.sets.split(",")]
        sets = {k: v for k, v in sets.items() if k in keep or k == "tuned"}
    header("bench_flags: IREE llvm-cpu flag sets on imported models, untapped forward", argv)
    for label, target in sets.items():
        print(f"# {label}: {' '.join(target.flags)}")
    rows = []
    for name in models:
        rows += bench_model(name, sets, repeats, args.quick)
    print(f"\n# forward, median of {repeats} interleaved rounds per model")
    print(table(rows, ["model", "flags", "compile s", "ms", "x tuned", "x eager"]))
    print(f"\n# {load_line()}")
    return 0


if __name__ == "__main__":
    run_main(main, "bench_flags")
