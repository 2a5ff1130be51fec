"""Shared helpers of the benchmarks: interleaved timing, medians, tables, a run header.

Benchmarks print ratios measured side by side in one process: every round runs each
variant once (the order rotates from round to round so no variant always runs first),
and the figure reported is the median over rounds. Nothing here asserts on time.
"""

from __future__ import annotations

import datetime
import gc
import os
import platform
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def header(title: str, argv: list[str] | None = None) -> None:
    """Print what ran, when, where and with which IREE."""
    from importlib.metadata import version

    try:
        rev = subprocess.run(
            ["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=False
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(REPO), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            check=False,
        ).stdout.strip()
        rev = (rev or "?") + (" (+ uncommitted changes)" if dirty else "")
    except OSError:
        rev = "?"
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    now = datetime.datetime.now().astimezone().strftime("%Y-%m-%d %H:%M %Z")
    print(f"# {title}")
    print(
        f"# {now} | {os.cpu_count()} cores, {cpu} | python {platform.python_version()} | "
        f"iree-base-compiler {version('iree-base-compiler')}, iree-base-runtime {version('iree-base-runtime')} | "
        f"opscope @ {rev}"
    )
    print(
        f"# command: python {' '.join(['bench/' + Path(sys.argv[0]).name] + (argv if argv is not None else sys.argv[1:]))}"
    )
    print(f"# {load_line()}")
    sys.stdout.flush()


def load_line() -> str:
    """The 1/5/15-minute load averages: on a shared 2-core machine, how much to trust the times."""
    try:
        one, five, fifteen = os.getloadavg()
        return f"load average {one:.2f} {five:.2f} {fifteen:.2f} on {os.cpu_count()} cores"
    except OSError:
        return "load average unknown"


def interleaved(
    variants: dict[str, Callable[[], dict[str, float] | None]], repeats: int, warmup: int = 1
) -> dict[str, list[dict[str, float]]]:
    """Run every variant `warmup` + `repeats` times, round-robin, rotating the order each round.

    A variant returns None or a dict of phase times it measured itself (seconds); the
    wall time of the whole call is recorded under "total". Returns name -> one dict per
    timed round (rounds are aligned across variants, so per-round ratios pair up).
    """
    names = list(variants)
    out: dict[str, list[dict[str, float]]] = {n: [] for n in names}
    for r in range(warmup + repeats):
        shift = r % len(names)
        for name in names[shift:] + names[:shift]:
            gc.collect()
            t0 = time.perf_counter()
            phases = variants[name]() or {}
            total = time.perf_counter() - t0
            if r >= warmup:
                out[name].append({"total": total, **phases})
    return out


def median(xs) -> float:
    xs = [x for x in xs if x == x]
    return statistics.median(xs) if xs else float("nan")


def paired_ratio(rounds: list[dict[str, float]], base: list[dict[str, float]], key: str = "total") -> float:
    """Median over rounds of (this variant's time / the base's time in the same round)."""
    return median([a[key] / b[key] for a, b in zip(rounds, base) if b[key] > 0])


def table(rows: list[list[str]], head: list[str]) -> str:
    """A plain fixed-width table: first column left-aligned, the others right-aligned."""
    cells = [head] + rows
    widths = [max(len(str(r[i])) for r in cells) for i in range(len(head))]

    def fmt(r):
        return "  ".join(str(c).ljust(w) if i == 0 else str(c).rjust(w) for i, (c, w) in enumerate(zip(r, widths)))

    return "\n".join([fmt(head), "  ".join("-" * w for w in widths)] + [fmt(r) for r in rows])


def short_error(e: BaseException, width: int = 160) -> str:
    text = " ".join(str(e).split())
    return text if len(text) <= width else text[: width - 3] + "..."


def run_main(main: Callable[[], int | None], prog: str) -> None:
    """Run a benchmark's `main` and exit with its status; an error ends the run in one line naming
    `prog`, like the CLI, instead of a traceback."""
    try:
        sys.exit(main())
    except Exception as e:
        print(f"{prog}: error: {short_error(e)}", file=sys.stderr)
        sys.exit(1)
