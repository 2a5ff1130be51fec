"""Throughput of reading and mining a multi-million-row tidy table, CSV and Parquet.

Generates a realistic recording (a transformer-like stack of matmul sites, 7 distributions
x 2 seeds as runs, several steps per run: weights fixed per run, activations replayed
from a pool in half of the runs and a slow random walk in the others; every sketch real,
from `opscope.run.host_stats`), writes it as a tidy CSV (+ `.sites` sidecar) and as Parquet,
then measures in a fresh process per repeat: `read_tidy`, `mine`, rendering, and the peak
RSS of that process. Prints rows/s per phase and the Parquet/CSV ratios; asserts nothing.

    python bench/bench_mine.py                # ~5M rows, 1-3 min on 2 cores
    python bench/bench_mine.py --quick        # ~200k rows smoke run, < 20 s
    python bench/bench_mine.py --rows 2000000 --repeats 5
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from importlib.metadata import version
from pathlib import Path

import numpy as np
import polars as pl

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import header, load_line, table  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

DISTS = ("gaussian", "uniform", "sparse90", "lowrank", "outlier", "quantized", "coherent")
TOKENS, D_MODEL, FFN = 64, 128, 256
# (site suffix, K, N): per layer q, k, v, o, ffn_up, ffn_down.
LAYER_SITES = (
    ("q", D_MODEL, D_MODEL),
    ("k", D_MODEL, D_MODEL),
    ("v", D_MODEL, D_MODEL),
    ("o", D_MODEL, D_MODEL),
    ("ffn_up", D_MODEL, FFN),
    ("ffn_down", FFN, D_MODEL),
)
SEEDS = (1, 2)
POOL = 4


def rows_per_step(layers: int) -> int:
    """Tidy rows one forward of `layers` layers records (default StatConfig)."""

    def per(r, c):
        return 7 + 32 + 16 + c + 1 + r + (r - 1)

    return layers * sum(per(TOKENS, k) + per(k, n) + per(TOKENS, n) for _, k, n in LAYER_SITES)


def generate(path: Path, target_rows: int, layers: int) -> tuple[int, int]:
    """Write the tidy CSV, its `.sites` sidecar and a Parquet twin; return (rows, steps)."""
    from distributions import sample

    from opscope.run.host_stats import host_stats

    runs = len(DISTS) * len(SEEDS)
    steps = max(2, round(target_rows / (runs * rows_per_step(layers))))
    sites = [(f"encoder.layer.{i}.{name}", k, n) for i in range(layers) for name, k, n in LAYER_SITES]
    cols: dict[str, list] = {
        c: [] for c in ("run_id", "step", "dist", "M", "K", "N", "numel", "site", "role", "stat", "idx", "value", "len")
    }

    memo: dict[tuple, dict[str, np.ndarray]] = {}

    def add(run, step, dist, site, k, n, role, x, key):
        """Record x's sketches; `key` names a tensor already sketched (weights, replayed inputs)."""
        if key not in memo:
            memo[key] = host_stats(x)
        for stat, vals in memo[key].items():
            cols["run_id"].append(run), cols["step"].append(step), cols["dist"].append(dist)
            cols["M"].append(TOKENS), cols["K"].append(k), cols["N"].append(n), cols["numel"].append(x.size)
            cols["site"].append(site), cols["role"].append(role), cols["stat"].append(stat)
            cols["value"].append(vals.astype(np.float32)), cols["len"].append(len(vals))

    run = 0
    for dist in DISTS:
        for seed in SEEDS:
            rng = np.random.Generator(np.random.Philox(seed * 7919 + run))
            weights = [sample(dist, (k, n), seed * 1000 + i) / np.sqrt(k) for i, (_, k, n) in enumerate(sites)]
            replay = run % 2 == 0
            pool = [sample(dist, (TOKENS, D_MODEL), seed * 100 + p) for p in range(POOL)]
            x = pool[0]
            for step in range(steps):
                pick = int(rng.integers(POOL))
                if replay:
                    x = pool[pick]
                elif step:
                    x = (x + 0.03 * rng.standard_normal(x.shape)).astype(np.float32)
                h, resid = x, x
                for (site, k, n), w in zip(sites, weights):
                    lhs = resid if site.endswith((".q", ".k", ".v", ".ffn_up")) else h
                    out = (lhs @ w).astype(np.float32)
                    when = ("pick", pick) if replay else ("step", step)
                    add(run, step, dist, site, k, n, "lhs", lhs, (run, site, "lhs", when))
                    add(run, step, dist, site, k, n, "rhs", w, (run, site, "rhs"))
                    add(run, step, dist, site, k, n, "out", out, (run, site, "out", when))
                    h = np.maximum(out, 0) if site.endswith(".ffn_up") else out
                    if site.endswith((".o", ".ffn_down")):
                        resid = (resid + out).astype(np.float32)
                        h = resid
            run += 1

    lens = np.array(cols["len"])
    rep = {c: np.repeat(np.array(cols[c]), lens) for c in ("run_id", "step", "M", "K", "N", "numel")}
    idx = np.arange(lens.sum()) - np.repeat(np.cumsum(lens) - lens, lens)
    frame = pl.DataFrame(
        {
            "run_id": rep["run_id"],
            "step": rep["step"],
            "backend": pl.Series(["llvm-cpu"]).repeat_by(len(idx)).explode(),
            "dist": pl.Series(cols["dist"]).repeat_by(pl.Series(lens)).explode(),
            "M": rep["M"],
            "K": rep["K"],
            "N": rep["N"],
            "numel": rep["numel"],
            "site": pl.Series(cols["site"]).repeat_by(pl.Series(lens)).explode(),
            "role": pl.Series(cols["role"]).repeat_by(pl.Series(lens)).explode(),
            "stat": pl.Series(cols["stat"]).repeat_by(pl.Series(lens)).explode(),
            "idx": idx,
            "value": np.concatenate(cols["value"]),
        }
    )
    frame.write_csv(path)
    # The reference's Parquet sink types: u64 integers, utf8 strings, f32 value.
    frame.with_columns(
        pl.col(c).cast(pl.UInt64) for c in ("run_id", "step", "M", "K", "N", "numel", "idx")
    ).write_parquet(path.with_suffix(".parquet"))
    flops = {site: 2 * TOKENS * k * n for site, k, n in sites}
    path.with_name(path.name + ".sites").write_text("site,flops\n" + "".join(f"{s},{f}\n" for s, f in flops.items()))
    return frame.height, steps


def peak_rss_mib() -> float:
    """This process's peak resident memory: VmHWM (getrusage's maxrss survives exec from the parent)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def measure(path: Path, costs: Path) -> dict[str, float]:
    """One fresh-process measurement: read, mine, render, each phase of mine, peak RSS."""
    import opscope
    from opscope.mining.keys import appearance_order
    from opscope.mining.report import mine
    from opscope.mining.signals import value_signals
    from opscope.mining.temporal import cross_step, opportunities
    from opscope.record.recorder import read_site_costs
    from opscope.record.tidy import read_tidy

    site_costs = read_site_costs(costs)
    t0 = time.perf_counter()
    df = read_tidy(path)
    t1 = time.perf_counter()
    report = mine(df, site_costs)
    t2 = time.perf_counter()
    opscope.render(report)
    opscope.render(report, "json")
    t3 = time.perf_counter()
    rss = peak_rss_mib()  # before the phases run again
    order = appearance_order(df)
    p0 = time.perf_counter()
    value_signals(df, order)
    p1 = time.perf_counter()
    cross_step(df, order)
    p2 = time.perf_counter()
    opportunities(df, site_costs, order)
    p3 = time.perf_counter()
    return {
        "rows": df.height,
        "read": t1 - t0,
        "mine": t2 - t1,
        "render": t3 - t2,
        "total": t3 - t0,
        "rss_mb": rss,
        "signals": p1 - p0,
        "cross": p2 - p1,
        "opps": p3 - p2,
        "keys": report.signals.height,
        "opportunities": report.opportunities.height if report.opportunities is not None else 0,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=5_000_000, help="target rows (default 5M)")
    ap.add_argument("--quick", action="store_true", help="~200k rows, one repeat")
    ap.add_argument("--repeats", type=int, default=None, help="fresh-process measurements per format (3)")
    ap.add_argument("--layers", type=int, default=None, help="layers of the generated model (4; quick 1)")
    ap.add_argument("--keep", type=Path, default=None, help="write the generated files here and keep them")
    ap.add_argument("--measure", nargs=2, metavar=("TABLE", "SITES"), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.measure:
        print(json.dumps(measure(Path(args.measure[0]), Path(args.measure[1]))))
        return 0
    rows = 200_000 if args.quick else args.rows
    repeats = args.repeats or (1 if args.quick else 3)
    layers = args.layers or (1 if args.quick else 4)

    header("opscope bench_mine: reading and mining a tidy table, CSV vs Parquet", argv)
    print(
        f"# polars {pl.__version__}, numpy {np.__version__}, pyarrow "
        f"{_maybe_version('pyarrow')}; {repeats} fresh process(es) per format, medians reported"
    )

    with tempfile.TemporaryDirectory(prefix="bench_mine_") as tmp:
        out_dir = args.keep or Path(tmp)
        out_dir.mkdir(parents=True, exist_ok=True)
        csv_path = out_dir / "bench_mine.csv"
        t0 = time.perf_counter()
        n, steps = generate(csv_path, rows, layers)
        gen_s = time.perf_counter() - t0
        sizes = {"csv": csv_path.stat().st_size, "parquet": csv_path.with_suffix(".parquet").stat().st_size}
        print(
            f"generated {n:,} rows ({len(DISTS) * len(SEEDS)} runs x {steps} steps x {6 * layers} sites x 3 "
            f"roles) in {gen_s:.1f} s: CSV {sizes['csv'] / 2**20:.0f} MiB, "
            f"Parquet {sizes['parquet'] / 2**20:.1f} MiB"
        )
        sys.stdout.flush()

        results: dict[str, list[dict[str, float]]] = {"csv": [], "parquet": []}
        sites = csv_path.with_name(csv_path.name + ".sites")
        for r in range(repeats):
            for fmt in ("csv", "parquet") if r % 2 == 0 else ("parquet", "csv"):
                path = csv_path if fmt == "csv" else csv_path.with_suffix(".parquet")
                proc = subprocess.run(
                    [sys.executable, __file__, "--measure", str(path), str(sites)],
                    capture_output=True,
                    text=True,
                    cwd=ROOT,
                )
                if proc.returncode:
                    print(proc.stderr[-2000:], file=sys.stderr)
                    return 1
                results[fmt].append(json.loads(proc.stdout.strip().splitlines()[-1]))

    med = {fmt: {k: statistics.median(m[k] for m in ms) for k in ms[0]} for fmt, ms in results.items()}
    rows_out = []
    for fmt in ("csv", "parquet"):
        m = med[fmt]
        rows_out.append(
            [
                fmt,
                f"{int(m['rows']):,}",
                f"{sizes[fmt] / 2**20:.1f}",
                f"{m['read']:.2f}",
                f"{m['rows'] / m['read'] / 1e6:.2f}",
                f"{m['mine']:.2f}",
                f"{m['rows'] / m['mine'] / 1e6:.2f}",
                f"{m['render']:.2f}",
                f"{m['total']:.2f}",
                f"{m['rows'] / m['total'] / 1e6:.2f}",
                f"{max(x['rss_mb'] for x in results[fmt]):.0f}",
                f"{m['signals']:.2f}",
                f"{m['cross']:.2f}",
                f"{m['opps']:.2f}",
            ]
        )
    print()
    print(
        table(
            rows_out,
            [
                "format",
                "rows",
                "MiB",
                "read s",
                "read Mrow/s",
                "mine s",
                "mine Mrow/s",
                "render s",
                "total s",
                "total Mrow/s",
                "peak RSS MiB",
                "signals s",
                "cross s",
                "opps s",
            ],
        )
    )
    c, p = med["csv"], med["parquet"]
    print(
        f"\nparquet / csv: read {p['read'] / c['read']:.2f}x, total {p['total'] / c['total']:.2f}x, "
        f"file size {sizes['parquet'] / sizes['csv']:.2f}x"
    )
    print(f"mined {int(c['keys'])} keys, {int(c['opportunities'])} temporal opportunities")
    print(
        "# columns: read = read_tidy; mine = mine(df, site_costs); render = to_text + to_json; total = all "
        "three; peak RSS of the measuring process (max over repeats); signals/cross/opps = mine's phases "
        "timed again on their own"
    )
    print(f"# at the end: {load_line()}")
    return 0


def _maybe_version(pkg: str) -> str:
    try:
        return version(pkg)
    except Exception:
        return "not installed"


if __name__ == "__main__":
    sys.exit(main())
