"""Time of the static analyses against module size: does each scale linearly?

For transformer-style stacks of growing depth (`opscope.models.demo.transformer_module(L, 256,
128)`, weights as globals, ~46 ops per layer) it parses the module once, then times,
interleaved over `--repeats` rounds (medians): the cost model (`analysis.cost.analyze`),
the GEMM shape histogram, the op-chain motifs, the dataflow cones, and the per-dispatch view
(IREE's dispatch formation in-process, `--compile-to=flow`; skipped with --no-dispatch).
It prints milliseconds per analysis and per layer at each depth: flat per-layer times mean
linear scaling. It also prints the ratio of the deepest to the shallowest per-layer time.
Nothing asserts on time.

    python bench/bench_analysis.py [--layers 6,12,24,48] [--repeats 5] [--quick] [--no-dispatch]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import header, interleaved, load_line, median, table  # noqa: E402

from opscope.analysis.cones import dataflow_cones  # noqa: E402
from opscope.analysis.cost import analyze  # noqa: E402
from opscope.analysis.dispatch import analyze_dispatches  # noqa: E402
from opscope.analysis.motifs import linear_motifs  # noqa: E402
from opscope.analysis.shapes import shape_histogram  # noqa: E402
from opscope.ir.loading import parse_module  # noqa: E402
from opscope.models.demo import transformer_module  # noqa: E402

D_MODEL, SEQ = 256, 128


def analyses(text: str, dispatch: bool) -> dict:
    """name -> a zero-argument call running that analysis on a freshly parsed module."""
    module = parse_module(text)
    out = {
        "cost": lambda: analyze(module) and None,
        "shapes": lambda: shape_histogram(module) and None,
        "motifs": lambda: linear_motifs(module) and None,
        "cones": lambda: dataflow_cones(module) and None,
    }
    if dispatch:
        out["dispatch"] = lambda: analyze_dispatches(text) and None
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--layers", default="6,12,24,48", help="depths to analyse (comma separated)")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--quick", action="store_true", help="depths 2,4,8, 2 repeats")
    ap.add_argument("--no-dispatch", action="store_true", help="skip the per-dispatch view (IREE formation)")
    args = ap.parse_args(argv)
    depths = [2, 4, 8] if args.quick else [int(x) for x in args.layers.split(",")]
    repeats = 2 if args.quick else args.repeats
    header("bench_analysis: static analysis time vs module size", argv)
    rows, per_layer = [], {}
    for layers in depths:
        text = transformer_module(layers, D_MODEL, SEQ, weights="globals")
        ops = sum(1 for line in text.splitlines() if " = " in line and not line.lstrip().startswith("^"))
        rounds = interleaved(analyses(text, not args.no_dispatch), repeats)
        for name, got in rounds.items():
            ms = 1000 * median([r["total"] for r in got])
            per_layer.setdefault(name, []).append(ms / layers)
            rows.append([name, str(layers), f"{ops:,}", f"{ms:.1f}", f"{ms / layers:.2f}"])
    print(f"\n## transformer_module(L, d_model {D_MODEL}, {SEQ} tokens), medians of {repeats} interleaved rounds")
    print(table(rows, ["analysis", "layers", "IR lines", "ms", "ms/layer"]))
    print("\n## per-layer time, deepest / shallowest (1.0 = linear)")
    print(table([[n, f"{v[-1] / v[0]:.2f}"] for n, v in per_layer.items() if v[0] > 0], ["analysis", "ratio"]))
    print(f"\n# {load_line()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
