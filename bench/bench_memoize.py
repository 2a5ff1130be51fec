"""The reference's memoization demo (`opscope-guarded`), through IREE: dense vs memoized calls.

A matmul [32, 512] x W [512, 512] (W a constant global of the module, so a call passes only
the activations) is compiled for llvm-cpu. 8 distinct inputs, 200 seeded picks among them
(≈ 96 % repeats). Each round runs the 200 calls densely and through `Memoized(cap=16)`,
interleaved over `--repeats` rounds, medians. It prints the hit rate, both times, the speedup,
and the largest |difference| between memoized and dense outputs (expected: 0.0, BIT-EXACT).

The second section does the same for one site of a model, outlined alone: the FFN up
projection [32, 256] x W [256, 1024] of a 1-layer transformer with its weights as globals
(`opscope.act.memoize.memoize_site`: `extract-site{only=true}`, compiled, behind the guard),
the outlined site's dense calls and its memoized calls side by side.
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

from opscope.act.memoize import Memoized, compile_site  # noqa: E402
from opscope.models.demo import matmul_module, transformer_module  # noqa: E402
from opscope.run.compile import compile_module  # noqa: E402
from opscope.run.runtime import load  # noqa: E402

DISTINCT, PICKS, CAP = 8, 200, 16


def measure(call, shape: tuple[int, int], dense_name: str, memo_name: str, repeats: int):
    """(median seconds per variant, the last timed Memoized, max |memoized - dense|) over the seeded picks."""
    rng = np.random.Generator(np.random.Philox(0x6041D))
    inputs = [rng.standard_normal(shape, dtype=np.float32) for _ in range(DISTINCT)]
    picks = rng.integers(0, DISTINCT, PICKS).tolist()
    check = Memoized(call, cap=CAP)  # parity first, untimed: every memoized output against a fresh dense call
    worst = max(float(np.abs(np.asarray(check(inputs[i])) - call(inputs[i])).max()) for i in picks)
    memos: list[Memoized] = []

    def dense():
        for i in picks:
            call(inputs[i])

    def memoized():
        memo = Memoized(call, cap=CAP)
        for i in picks:
            memo(inputs[i])
        memos.append(memo)

    runs = interleaved({dense_name: dense, memo_name: memoized}, repeats=repeats)
    return {name: median([r["total"] for r in rounds]) for name, rounds in runs.items()}, memos[-1], worst


def report(what: str, times: dict[str, float], memo: Memoized, worst: float) -> None:
    print(
        f"\n{what}, {DISTINCT} distinct inputs, {PICKS} picks: hit rate {memo.hit_rate:.1%} "
        f"({memo.hits} hits, {memo.misses} misses)"
    )
    base = next(iter(times.values()))
    print(
        table(
            [[name, f"{t * 1e3:.2f}", f"{base / t:.1f}x"] for name, t in times.items()],
            ["variant", f"ms / {PICKS} calls", "x dense"],
        )
    )
    print(f"parity: max |memoized - dense| = {worst} ({'BIT-EXACT' if worst == 0.0 else 'DIFFERS'})")


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--quick", action="store_true", help="a 32x128x128 matmul and a d_model=64 site, 2 rounds")
    args = ap.parse_args(argv)
    header(
        "memoized vs dense calls of a compiled matmul (the reference's guarded demo), then of an outlined site", argv
    )
    repeats = 2 if args.quick else args.repeats
    k = n = 128 if args.quick else 512
    loaded = load(compile_module(matmul_module(32, k, n, weights="globals"), "llvm-cpu"))

    def call(x):
        out = loaded.invoke("main", x)
        return out[0] if isinstance(out, (list, tuple)) else out

    times, memo, worst = measure(call, (32, k), "dense", f"memoized (cap {CAP})", repeats)
    report(f"matmul 32x{k}x{n}", times, memo, worst)

    d_model = 64 if args.quick else 256
    site = compile_site(transformer_module(1, d_model, 32, weights="globals"), "layer0.ffn.up", "llvm-cpu")
    (lhs,) = site.arguments
    times, memo, worst = measure(site, lhs.shape, "outlined site", f"memoized outlined site (cap {CAP})", repeats)
    report(
        f"site {site.site} alone (@{site.function}, 32x{d_model}x{4 * d_model}, its weight a global inside)",
        times,
        memo,
        worst,
    )
    print(f"# {load_line()}")


if __name__ == "__main__":
    main()
