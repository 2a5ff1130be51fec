"""The reference's memoization demo (`opscope-guarded`), through IREE: dense vs memoized calls.

A matmul [32, 512] x W [512, 512] (W a constant global of the module, so a call passes only
the activations) is compiled for llvm-cpu. 8 distinct inputs, 200 seeded picks among them
(≈ 96 % repeats). Each round runs the 200 calls densely and through `Memoized(cap=16)`,
interleaved over `--repeats` rounds, medians. It prints the hit rate, both times, the speedup,
and the largest |difference| between memoized and dense outputs (expected: 0.0, BIT-EXACT).
Nothing asserts on time.

    python bench/bench_memoize.py [--repeats 5] [--quick]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import header, interleaved, load_line, median, table  # noqa: E402

from opscope.act.memoize import Memoized  # noqa: E402
from opscope.models.demo import matmul_module  # noqa: E402
from opscope.run.compile import compile_module  # noqa: E402
from opscope.run.runtime import load  # noqa: E402


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--quick", action="store_true", help="a 32x128x128 matmul, 2 rounds")
    args = ap.parse_args(argv)
    header("memoized vs dense calls of a compiled matmul (the reference's guarded demo)", argv)
    k = n = 128 if args.quick else 512
    loaded = load(compile_module(matmul_module(32, k, n, weights="globals"), "llvm-cpu"))
    rng = np.random.Generator(np.random.Philox(0x6041D))
    inputs = [rng.standard_normal((32, k), dtype=np.float32) for _ in range(8)]
    picks = rng.integers(0, 8, 200).tolist()

    def call(x):
        out = loaded.invoke("main", x)
        return out[0] if isinstance(out, (list, tuple)) else out

    check = Memoized(call, cap=16)  # parity first, untimed: every memoized output against a fresh dense call
    worst = max(float(np.abs(np.asarray(check(inputs[i])) - call(inputs[i])).max()) for i in picks)
    memos: list[Memoized] = []

    def dense():
        for i in picks:
            call(inputs[i])

    def memoized():
        memo = Memoized(call, cap=16)
        for i in picks:
            memo(inputs[i])
        memos.append(memo)

    runs = interleaved({"dense": dense, "memoized (cap 16)": memoized}, repeats=2 if args.quick else args.repeats)
    times = {name: median([r["total"] for r in rounds]) for name, rounds in runs.items()}
    memo = memos[-1]
    print(f"\nmatmul 32x{k}x{n}, 8 distinct inputs, {len(picks)} picks: hit rate {memo.hit_rate:.1%} "
          f"({memo.hits} hits, {memo.misses} misses)")
    base = times["dense"]
    print(table([[name, f"{t * 1e3:.2f}", f"{base / t:.1f}x"] for name, t in times.items()],
                ["variant", "ms / 200 calls", "x dense"]))
    print(f"parity: max |memoized - dense| = {worst} ({'BIT-EXACT' if worst == 0.0 else 'DIFFERS'})")
    print(f"# {load_line()}")


if __name__ == "__main__":
    main()
