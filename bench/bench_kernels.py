"""The reference's `opscope-kernels` comparison, through IREE: one matmul, each specialization as a rewrite.

x[m, K] · W[K, N] with W a constant (an immutable global, seeded normal values), m = 1
(decode) and m = 32 (prefill), shapes K×N 1024×1024, 1024×3072, 3072×1024. Variants, each
the same module rewritten by an opscope pass and compiled by IREE for the target:

* f32: as is;
* W8A16: `quantize-weight{bits=8}` (int8 weights, per-channel scales, dequant fused);
* W4A16: `quantize-weight{bits=4 group=128}`;
* W8A8: `quantize-weight{bits=8 activations=true}` (int8 activations per row, i32 accumulation);
* factored: `factor-weight{rank=r}`, r = K·N / (2(K+N)) (half the FLOPs; W is random, so
  the error is large: the time is the point);
* sparse-skip: `skip-zero-channels{channels=0-K/2-1}` on an x whose first half of K is
  zero (the guarded slice), and the same without its guard.

Times: `iree-benchmark-module` on `.npy` inputs (no Python in the loop), the variants in
alternating rounds, minimum µs per call of each. Error: ‖y − x·W‖ / ‖x·W‖ against numpy in
float64 (W read back from the module). vmfb: the compiled module's size. Nothing asserts.

    python bench/bench_kernels.py [--target llvm-cpu] [--rounds 5] [--quick]   # --quick: 32x128x384, one round
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import header, load_line  # noqa: E402

from opscope.ir.loading import module_text, new_context, parse_module  # noqa: E402
from opscope.ir.weights import read_weights  # noqa: E402
from opscope.models.demo import matmul_module  # noqa: E402
from opscope.pipeline.textual import parse_pipeline, run_pipeline  # noqa: E402
from opscope.run.call_timing import time_calls  # noqa: E402
from opscope.run.compile import compile_module  # noqa: E402
from opscope.run.runtime import load  # noqa: E402

SHAPES = ((1024, 1024), (1024, 3072), (3072, 1024))
QUICK_SHAPES = ((128, 384),)
ROWS = (1, 32)
QUICK_ROWS = (32,)


def variants(k: int, n: int) -> dict[str, str]:
    """Variant name -> the opscope pipeline that makes it (empty: the module as is)."""
    rank = max(1, k * n // (2 * (k + n)))
    half = f'"0-{k // 2 - 1}"'
    return {
        "f32": "",
        "W8A16": "quantize-weight{bits=8}",
        "W4A16": "quantize-weight{bits=4 group=128}" if k % 128 == 0 else "quantize-weight{bits=4}",
        "W8A8": "quantize-weight{bits=8 activations=true}",
        f"factored r={rank}": f"factor-weight{{rank={rank}}}",
        "sparse-skip": f"skip-zero-channels{{channels={half}}}",
        "sparse-skip, no guard": f"skip-zero-channels{{channels={half} guard=false}}",
    }


def rewrite(text: str, pipeline: str) -> str:
    if not pipeline:
        return text
    ctx = new_context()
    module = parse_module(text, ctx, "kernel")
    with ctx:
        run_pipeline(module, parse_pipeline(pipeline))
        return module_text(module, debug_info=True)


def one_shape(m: int, k: int, n: int, rounds: int, target: str) -> list[tuple]:
    text = matmul_module(m, k, n, weights="globals", name="fc")
    w = read_weights(parse_module(text, new_context(), "kernel"))[0].values.astype(np.float64)
    rng = np.random.default_rng(0)
    x = rng.standard_normal((m, k)).astype(np.float32)
    x[:, : k // 2] = 0.0  # every variant gets the same x: half of K zero, for the sparse skip
    want = x.astype(np.float64) @ w
    names, compiled, errors = [], [], []
    for name, pipeline in variants(k, n).items():
        try:
            c = compile_module(rewrite(text, pipeline), target)
        except Exception as e:  # noqa: BLE001 - a variant this build cannot make is reported, not fatal
            print(f"#   {m}×{k}×{n} {name}: not built ({str(e).splitlines()[0][:120]})")
            continue
        got = load(c).invoke("main", x)[0].astype(np.float64)
        names.append(name)
        compiled.append(c)
        errors.append(float(np.linalg.norm(got - want) / np.linalg.norm(want)))
    times = time_calls(compiled, "main", [x], rounds=rounds)
    base = times[0].min_us
    return [
        (f"{m}×{k}×{n}", name, f"{t.min_us:.1f}", f"{base / t.min_us:.2f}×", f"{err:.2e}", f"{len(c.vmfb) / 2**20:.2f}")
        for name, t, err, c in zip(names, times, errors, compiled)
    ]


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--target", default="llvm-cpu")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--quick", action="store_true", help="32x128x384 only, one round (the smoke test)")
    args = p.parse_args(argv)
    header("bench_kernels: f32 vs W8A16 vs W4A16 vs W8A8 vs factored vs sparse-skip, through IREE", argv)
    shapes = QUICK_SHAPES if args.quick else SHAPES
    rounds = 1 if args.quick else args.rounds
    rows = []
    for m in QUICK_ROWS if args.quick else ROWS:
        for k, n in shapes:
            print(f"# {m}×{k}×{n} ...", flush=True)
            rows += one_shape(m, k, n, rounds, args.target)
    head = ("m×K×N", "variant", "µs/call", "vs f32", "rel err", "vmfb MiB")
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(head)]
    print("  ".join(h.ljust(w) for h, w in zip(head, widths)))
    for r in rows:
        print("  ".join(v.ljust(w) for v, w in zip(r, widths)))
    print(f"# {load_line()}")


if __name__ == "__main__":
    main()
