"""Where the time of `opscope layers` goes: profiling every weight, then greedy and DADO.

Reads the weights of a model (default MiniLM's 36 linear weights; `--quick`: synthetic
layers), profiles every layer (the time split by option kind: quantization, ternary, 2:4,
low rank, Monarch, Tucker, tensor train), runs greedy and DADO at the reference's settings
(pop 200, 60 rounds), and also times the two truncated SVDs side by side on one weight:
the reference's power iteration with deflation vs LAPACK's divide and conquer (`--repeats`
rounds, interleaved, medians). Nothing asserts on time; the issue's target is under 60 s for
MiniLM's profile + DADO on 2 cores.

    python bench/bench_layers.py [--model minilm] [--budget 0.4] [--repeats 3] [--quick]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import header, interleaved, load_line, median, table  # noqa: E402

from opscope.probe.allocate import DadoConfig, dado_allocate, greedy_allocate  # noqa: E402
from opscope.probe.report import profile_weights  # noqa: E402
from opscope.probe.sources import WeightSet, open_weights  # noqa: E402
from opscope.probe.svd import truncated_svd, truncated_svd_power  # noqa: E402

SVD_RANK = 48  # the reference's rcap


def synthetic() -> WeightSet:
    """Seven layers like the reference's synthetic model, smaller."""
    from opscope.drive.synthetic import sample

    shapes = {
        "q_proj": ("lowrank", 128, 128),
        "k_proj": ("lowrank", 128, 64),
        "o_proj": ("gaussian", 128, 128),
        "mlp.gate": ("quantized", 256, 128),
        "mlp.up": ("gaussian", 256, 128),
        "mlp.down": ("lowrank", 128, 256),
        "lm_head": ("outlier", 200, 128),
    }
    return WeightSet("synthetic", {k: sample(d, r, c, i) for i, (k, (d, r, c)) in enumerate(shapes.items())})


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="minilm", help="a zoo name, model file or tensor directory (default minilm)")
    ap.add_argument("--budget", type=float, default=0.4)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--quick", action="store_true", help="synthetic layers, one round")
    args = ap.parse_args(argv)
    header("opscope layers: profile + allocators, and the two truncated SVDs", argv)
    start = time.perf_counter()
    weights = synthetic() if args.quick else open_weights(args.model)
    read_s = time.perf_counter() - start
    print(
        f"{weights.name}: {len(weights.matrices)} weights, {weights.params / 1e6:.2f} M values, read in "
        f"{read_s:.1f} s (import + weights)"
    )

    profiles, seconds = profile_weights(weights)
    start = time.perf_counter()
    greedy = greedy_allocate(profiles, args.budget)
    greedy_s = time.perf_counter() - start
    start = time.perf_counter()
    dado = dado_allocate(profiles, args.budget, DadoConfig())
    dado_s = time.perf_counter() - start
    total = seconds["profile"] + greedy_s + dado_s
    rows = [
        [k.split(":", 1)[1], f"{v:.2f}", f"{v / total:.0%}"]
        for k, v in sorted(seconds.items(), key=lambda kv: -kv[1])
        if k.startswith("profile:")
    ]
    rows += [
        ["(profile, all)", f"{seconds['profile']:.2f}", f"{seconds['profile'] / total:.0%}"],
        ["greedy", f"{greedy_s:.3f}", f"{greedy_s / total:.1%}"],
        ["dado (pop 200 × 60)", f"{dado_s:.2f}", f"{dado_s / total:.0%}"],
    ]
    print()
    print(table(rows, ["stage", "seconds", "share"]))
    print(
        f"\nprofile + greedy + DADO: {total:.1f} s (target < 60 s); Σ error greedy {greedy.total_err:.4f}, "
        f"DADO {dado.total_err:.4f} at {dado.total_bytes / dado.dense_bytes:.1%} of the dense bytes"
    )

    name, w = max(weights.matrices.items(), key=lambda kv: kv[1].size)
    rank = min(SVD_RANK, *w.shape)
    runs = interleaved(
        {
            "power iteration (reference)": lambda: truncated_svd_power(w, rank) and None,
            "LAPACK gesdd": lambda: truncated_svd(w, rank) and None,
        },
        repeats=1 if args.quick else args.repeats,
        warmup=0,
    )
    times = {k: median([r["total"] for r in v]) for k, v in runs.items()}
    base = times["power iteration (reference)"]
    print(f"\ntruncated SVD, rank {rank}, of {name} {w.shape[0]}×{w.shape[1]}:")
    rows = [[k, f"{v:.3f}", f"{base / v:.1f}x"] for k, v in times.items()]
    print(table(rows, ["method", "seconds", "x power iteration"]))
    print(f"# {load_line()}")


if __name__ == "__main__":
    main()
