"""A per-layer what-if sweep on 1 and 2 Dask worker processes: wall time side by side.

`opscope whatif MODEL --sweep-layers w8a8` builds the model once per layer (and once whole),
each build a job (`opscope.jobs`); this runs it on an embedded LocalCluster of 1, then 2 worker
processes (the same evaluation set, built once here) and prints the wall time of each and their
ratio, with a check that both reports are the same. On a machine of C cores, W workers each
compile with IREE's own threads, so 2 workers on 2 cores gain only what one build leaves idle
(its single-threaded parse, rewrite and LLVM phases); on two machines the builds split in half.
Nothing asserts on time.

    python bench/bench_dask.py                      # SmolLM2-135M, W8A8 (31 builds)
    python bench/bench_dask.py --model llama-tiny   # a minute
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import header, run_main, table  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="smollm2", help="a zoo model with layers (smollm2, llama-tiny)")
    ap.add_argument("--scheme", default="w8a8", help="the fake-quant scheme swept (default w8a8)")
    ap.add_argument("--workers", default="1,2", help="worker counts to time, comma-separated (default 1,2)")
    args = ap.parse_args(argv)
    header(f"{args.model}: --sweep-layers {args.scheme} on Dask workers", argv)

    from opscope.act.evalset import eval_set
    from opscope.act.whatif_jobs import sweep_layer_jobs

    ev = eval_set(args.model)
    rows, reports = [], {}
    for n in (int(w) for w in args.workers.split(",")):
        start = time.perf_counter()
        reports[n] = sweep_layer_jobs(ev, args.scheme, dask=f"local:{n}")
        seconds = time.perf_counter() - start
        rows.append([str(n), f"{seconds:.0f}", str(len(reports[n].layers) + 2)])
    first = next(iter(reports.values()))
    base = float(rows[0][1])
    for row in rows:
        row.append(f"{base / float(row[1]):.2f}×")
    same = all(r.to_dict() == first.to_dict() for r in reports.values())
    print(f"# {ev.name}: {ev.data}; builds: the original on each worker, the whole model, each layer")
    print(table(rows, ["workers", "wall s", "jobs", "speedup"]))
    print(f"reports identical across worker counts: {same}")
    return 0 if same else 1


if __name__ == "__main__":
    run_main(main, "bench_dask")
