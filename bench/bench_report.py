"""What the HTML report costs at a real model's size: the page's bytes, the time to build it, and
in headless Chromium the time to open it (load + the charts in view drawn), to draw every chart,
and to filter the findings, side by side with the same page carrying an embedded plotting
library it does not use (Plotly's 4.8 MB bundle: the floor of the library route), alternating
round by round. Nothing asserts on time.

    python bench/bench_report.py RUN                    # a recorded run (a profile's folder)
    python bench/bench_report.py --model smollm2        # profiles it first (2 steps; ~10 min on 2 cores)
    python bench/bench_report.py --quick                # the digits model, one round
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import header, median, run_main, table  # noqa: E402

VARIANTS = ("opscope (inline SVG)", "+ plotly.min.js embedded")


def plotly_js() -> str | None:
    """Plotly's bundle when the `plotly` package is installed (the library route's floor), else None."""
    try:
        from plotly.offline import get_plotlyjs
    except ImportError:
        return None
    return get_plotlyjs()


def in_browser(page, path: Path) -> dict[str, float]:
    """Seconds to open the page (load, the charts in view drawn), to draw every chart, to filter."""
    t = time.perf_counter()
    page.goto(path.as_uri(), wait_until="load")
    page.evaluate("new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))")
    opened = time.perf_counter() - t
    t = time.perf_counter()
    page.evaluate("window.opscopeDrawAll()")
    drawn = time.perf_counter() - t
    t = time.perf_counter()
    page.fill("section:nth-of-type(2) p.filter input", "mlp")
    filtered = time.perf_counter() - t
    return {"open": opened, "draw all": drawn, "filter": filtered}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run", nargs="?", help="a profile's run folder")
    ap.add_argument("--model", default="smollm2", help="profile this zoo model first when no RUN is given")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--quick", action="store_true", help="the digits model, one round (the smoke test)")
    args = ap.parse_args()
    if args.quick:
        args.model, args.rounds = "digits", 1
    header("bench_report: the HTML report of one run")
    import shutil

    from playwright.sync_api import sync_playwright

    import opscope

    folder = Path(tempfile.mkdtemp(prefix="opscope-bench-report-"))
    run = Path(args.run) if args.run else opscope.profile(args.model, steps=2, out=folder / "run").out_dir
    t = time.perf_counter()
    view = opscope.report(run)
    read = time.perf_counter() - t
    t = time.perf_counter()
    html = opscope.render(view, "html")
    built = time.perf_counter() - t
    pages = {VARIANTS[0]: folder / "report.html"}
    pages[VARIANTS[0]].write_text(html)
    library = plotly_js()
    if library is not None:
        pages[VARIANTS[1]] = folder / "with-library.html"
        pages[VARIANTS[1]].write_text(html.replace("</head>", f"<script>{library}</script></head>", 1))
    print(
        f"run {run}: {view.report.rows:,} rows, {len(view.tensors)} tapped tensors, "
        f"{view.report.ranked.height} findings; read and mined in {read:.1f} s, page built in {built:.2f} s"
    )
    times: dict[str, list[dict[str, float]]] = {v: [] for v in pages}
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=shutil.which("chromium"), args=["--no-sandbox"])
        for r in range(args.rounds):
            order = list(pages)[r % len(pages) :] + list(pages)[: r % len(pages)]
            for variant in order:
                page = browser.new_page(viewport={"width": 1280, "height": 900})
                times[variant].append(in_browser(page, pages[variant]))
                page.close()
        browser.close()
    rows = []
    for variant, path in pages.items():
        med = {k: median([t[k] for t in times[variant]]) for k in times[variant][0]}
        rows.append(
            [
                variant,
                f"{path.stat().st_size / 1e6:.2f} MB",
                *(f"{med[k]:.2f} s" for k in ("open", "draw all", "filter")),
            ]
        )
    print(table(rows, ["page", "size", "open", "draw all", "filter"]))
    if library is None:
        print("(plotly is not installed: the library row is left out; `pip install plotly` adds it)")
    return 0


if __name__ == "__main__":
    run_main(main, "bench_report")
