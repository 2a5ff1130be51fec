"""The reference's `opscope-kernels` comparison, through IREE: `opscope kernels` (opscope/act/kernels.py).

One matmul x[m, K] · W[K, N] (W a constant), each specialization the same module rewritten by an
opscope pass (f32, W8A16, W4A16 g128, W8A8, factored, sparse-skip with and without its guard),
timed side by side by `iree-benchmark-module` with its error against numpy; cache against DRAM
(2048² and 6144² weights streamed); the host's dot-product features. This script is the bench's
entry point beside the others; the work is the library's.

    python bench/bench_kernels.py [--target llvm-cpu] [--rounds 5] [--quick]   # --quick: 32x128x384, one round
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import header, load_line  # noqa: E402

import opscope  # noqa: E402


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--target", action="append", help="default: every target that runs here")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--quick", action="store_true", help="32x128x384 only, small cache sizes, one round")
    args = p.parse_args(argv)
    header("bench_kernels: f32 vs W8A16 vs W4A16 vs W8A8 vs factored vs sparse-skip, through IREE", argv)
    report = opscope.kernels(args.target, quick=args.quick, rounds=args.rounds, progress=lambda m: print(f"# {m}"))
    print(opscope.render(report), end="")
    print(f"# {load_line()}")


if __name__ == "__main__":
    main()
