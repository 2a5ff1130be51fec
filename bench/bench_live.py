"""Live sampling's cost: sampled serving against plain serving, side by side, and memory over 10× more requests.

Model: the trained MiniLM (one sentence of the Python Language Reference per request, 48
tokens, a Zipf s = 1.1 trace over a pool of 64), or with --quick the reference's demo MLP.
Time: each round serves the same block of requests through every variant, the order
rotating from round to round; `x plain` is the median over rounds of the round's ratio to
plain serving. Variants: plain (the un-instrumented build only), `LiveSampler` at 1 call in
16 (the goal: ≤ 1.05× plain) and 1 in 4, and every call instrumented (1 in 1: what a
profiling run pays). Memory: one sampler serves R requests, then 9R more; the saved sketch
(JSON bytes), the Python heap the sampler holds (tracemalloc) and the process RSS are printed
after R and after 10R, with their ratio. Nothing asserts.

    python bench/bench_live.py [--rounds 7] [--block 64] [--requests 200] [--quick]
"""

from __future__ import annotations

import argparse
import json
import sys
import tracemalloc
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import header, interleaved, median, paired_ratio, table  # noqa: E402

from opscope.drive.live import LiveSampler  # noqa: E402
from opscope.drive.trace import demo_trace, model_trace  # noqa: E402
from opscope.online.snapshot import to_dict  # noqa: E402


def _rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=None, help="timed rounds (default 7; --quick 3)")
    p.add_argument("--block", type=int, default=None, help="requests per variant per round (default 64; --quick 32)")
    p.add_argument("--requests", type=int, default=None, help="R of the memory check (R, then 10R; default 500)")
    p.add_argument("--quick", action="store_true", help="the demo MLP, small counts (a smoke run)")
    args = p.parse_args(argv)
    q = args.quick
    rounds, block = args.rounds or (3 if q else 7), args.block or (32 if q else 64)
    requests = args.requests or (100 if q else 500)
    header("live sampling: sampled vs plain serving, memory over 10x more requests", argv)
    if q:
        module, trace = demo_trace(requests=10 * requests, pool=8)
        name = "demo MLP"
    else:
        model, trace = model_trace("minilm", 10 * requests, 64, 1.1)
        module, name = model.module, "MiniLM, 1 sentence x 48 tokens per request"
    base = LiveSampler.build(module, 16, name=name)
    samplers = {every: LiveSampler(base.manifest, base.tapped, base.plain, every, name=name) for every in (16, 4, 1)}
    reqs = list(trace.requests())
    served = reqs[:block]  # every variant serves the same requests in a round

    def plain() -> None:
        for inputs, _ in served:
            base.plain.invoke(base.manifest.function, *inputs)

    def sampled(every: int):
        def run() -> None:
            s = samplers[every]
            for inputs, label in served:
                s(*inputs, label=label)

        return run

    variants = {"plain": plain, "1 in 16": sampled(16), "1 in 4": sampled(4), "1 in 1 (every call)": sampled(1)}

    timed = interleaved(variants, rounds)
    rows = []
    for k, r in timed.items():
        ms = 1e3 * median([x["total"] for x in r]) / block
        rows.append([k, f"{ms:.3f}", f"{paired_ratio(r, timed['plain']):.3f}"])
    print(f"\n{name}: {block} requests per variant per round, {rounds} rounds (median)")
    print(table(rows, ["variant", "ms/request", "x plain"]))

    sampler = LiveSampler(base.manifest, base.tapped, base.plain, 16, name=name)
    tracemalloc.start()
    lines = []
    for upto in (requests, 10 * requests):
        for inputs, label in reqs[sampler.sketch.calls : upto]:
            sampler(*inputs, label=label)
        current, _ = tracemalloc.get_traced_memory()
        lines.append((upto, len(json.dumps(to_dict(sampler.sketch))), current / 1024, _rss_mb()))
    tracemalloc.stop()
    (r1, s1, h1, m1), (r10, s10, h10, m10) = lines
    print(f"\nmemory of a 1-in-16 sampler over {r1} and {r10} requests ({name})")
    print(
        table(
            [
                [f"{r1} requests", f"{s1}", f"{h1:.0f}", f"{m1:.0f}"],
                [f"{r10} requests", f"{s10}", f"{h10:.0f}", f"{m10:.0f}"],
                ["ratio (10x requests)", f"{s10 / s1:.2f}", f"{h10 / h1:.2f}", f"{m10 / m1:.2f}"],
            ],
            ["", "sketch JSON bytes", "heap KB (tracemalloc)", "RSS MB"],
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
