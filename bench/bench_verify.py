"""What `profile --verify` costs: wall time and peak RSS of `opscope profile MODEL --steps 2` with and
without it, side by side, alternating round by round (the compile cache warmed first, so both
variants compile nothing). Peak RSS is `/usr/bin/time -v`'s. Nothing asserts on time.

    python bench/bench_verify.py                            # gpt2-tiny, mixtral-tiny, minilm: ~3 min on 2 cores
    python bench/bench_verify.py --models minilm --rounds 3
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import header, median, run_main, table  # noqa: E402

OPSCOPE = str(Path(sys.executable).parent / "opscope")
VARIANTS = ("--no-verify", "--verify")


def once(model: str, flag: str, folder: Path) -> tuple[float, float]:
    """(wall seconds, peak RSS in GB) of one profile with `flag`."""
    out = Path(tempfile.mkdtemp(dir=folder)) / "run"
    proc = subprocess.run(
        ["/usr/bin/time", "-v", OPSCOPE, "profile", model, "--steps", "2", "--out", str(out), flag],
        capture_output=True,
        text=True,
    )
    if proc.returncode:
        raise RuntimeError(f"{model} {flag}: {proc.stderr.strip().splitlines()[-1]}")
    wall = re.search(r"Elapsed \(wall clock\) time \(h:mm:ss or m:ss\): (\S+)", proc.stderr).group(1)
    parts = [float(p) for p in wall.split(":")]
    seconds = sum(p * 60**i for i, p in enumerate(reversed(parts)))
    rss = int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", proc.stderr).group(1)) / 1e6
    return seconds, rss


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default="gpt2-tiny,mixtral-tiny,minilm")
    ap.add_argument("--rounds", type=int, default=2)
    args = ap.parse_args()
    header("profile --verify against --no-verify", sys.argv[1:])
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for model in args.models.split(","):
            once(model, "--no-verify", Path(tmp))  # warms the compile cache
            runs = {v: [once(model, v, Path(tmp)) for _ in range(1)] for v in VARIANTS}
            for _ in range(args.rounds - 1):
                for v in VARIANTS:
                    runs[v].append(once(model, v, Path(tmp)))
            t0, r0 = (median([x[i] for x in runs["--no-verify"]]) for i in (0, 1))
            t1, r1 = (median([x[i] for x in runs["--verify"]]) for i in (0, 1))
            rows.append(
                [
                    model,
                    f"{t0:.1f} s",
                    f"{t1:.1f} s",
                    f"{t1 / t0:.2f}x",
                    f"{r0:.2f} GB",
                    f"{r1:.2f} GB",
                    f"{r1 / r0:.2f}x",
                ]
            )
    print(table(rows, ["model", "time", "verified", "ratio", "peak RSS", "verified", "ratio"]))
    return 0


if __name__ == "__main__":
    run_main(main, "bench_verify")
