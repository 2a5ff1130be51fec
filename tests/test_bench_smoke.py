"""The benchmarks stay runnable: each `--quick` run exits 0 and prints its ratio table.

Only that they run and print is checked; their numbers are measurements, never assertions.
"""

import os
import subprocess
import sys
from pathlib import Path

import pytest

import opscope

ROOT = Path(__file__).resolve().parents[1]


def run_bench(
    script: str, *args: str, timeout: int = 300, cache_dir: Path | None = None
) -> subprocess.CompletedProcess:
    """`python bench/<script> <args>` from the repository root, output captured; with `cache_dir`, its own
    compile cache (a cold one)."""
    env = None if cache_dir is None else {**os.environ, "OPSCOPE_CACHE_DIR": str(cache_dir)}
    return subprocess.run(
        [sys.executable, str(ROOT / "bench" / script), *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
    )


@pytest.mark.parametrize("script", ["bench_overhead.py", "bench_compile.py"])
def test_bench_quick_runs(script, tmp_path):
    proc = run_bench(script, "--quick", cache_dir=tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "x base" in proc.stdout


def test_bench_mine_quick_runs(tmp_path):
    proc = run_bench("bench_mine.py", "--quick", "--keep", str(tmp_path))
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "read Mrow/s" in proc.stdout


def test_bench_analysis_quick_runs():
    proc = run_bench("bench_analysis.py", "--quick")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "ms/layer" in proc.stdout and "deepest / shallowest" in proc.stdout


def test_bench_revisions_quick_runs_on_the_working_tree(tmp_path):
    """`. .` compares the working tree with itself: no git checkout needed."""
    proc = run_bench("bench_revisions.py", ".", ".", "--quick", "--models", "matmul", cache_dir=tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "x base" in proc.stdout and "old (.)" in proc.stdout and "new (.)" in proc.stdout


def test_bench_revisions_names_a_revision_it_cannot_check_out():
    proc = run_bench("bench_revisions.py", "no-such-revision", ".", "--quick", timeout=120)
    assert proc.returncode != 0
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("bench_revisions: cannot check out 'no-such-revision'") and "Traceback" not in proc.stderr


def test_bench_layers_quick_runs():
    proc = run_bench("bench_layers.py", "--quick")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "profile + greedy + DADO" in proc.stdout and "x power iteration" in proc.stdout


def test_bench_memoize_quick_runs(tmp_path):
    proc = run_bench("bench_memoize.py", "--quick", cache_dir=tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "hit rate 96.0%" in proc.stdout and "BIT-EXACT" in proc.stdout


def quick_table(script: str, *starts: str) -> tuple[str, list[list[str]]]:
    """A `--quick` run of bench/<script>, checked to exit 0: its output, and the split lines of its table rows
    (those starting with one of `starts`)."""
    proc = run_bench(script, "--quick")
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout, [line.split() for line in proc.stdout.splitlines() if line.startswith(starts)]


def test_opscope_kernels_quick(capsys):
    """`opscope kernels --quick` on llvm-cpu: every variant built and run, the exact ones exact, the
    quantized ones within their promise (numpy's product the reference), the cache rows, the host's
    features from iree-cpuinfo (bench/bench_kernels.py is this command's bench entry point)."""
    import json

    from opscope.act.kernels import KernelRow, kernels_text
    from opscope.cli import main

    assert main(["kernels", "--quick", "--target", "llvm-cpu", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    rows = {r["variant"]: r for r in data["rows"]}
    assert set(rows) == {
        *("f32", "W8A16", "W4A16 g128", "W8A8", "factored r=48", "sparse-skip", "sparse-skip, no guard"),
        "sparse-weight 10%",  # W pruned to its largest 10 %, stored by output channel; numpy's product of it
    }
    assert data["skipped"] == [] and not any(r["wrong"] for r in data["rows"])
    for name in ("f32", "sparse-skip", "sparse-skip, no guard", "sparse-weight 10%"):
        assert rows[name]["rel_error"] < 1e-6
    assert rows["W8A16"]["rel_error"] < 0.02 and rows["W8A8"]["rel_error"] < 0.03
    assert rows["W8A16"]["vmfb_bytes"] < rows["f32"]["vmfb_bytes"] / 2  # int8 codes, not an f32 weight
    assert [c["n"] for c in data["cache"]] == [256, 1024] and all(c["gbps"] > 0 for c in data["cache"])
    assert data["cpu_features"] and set(data["dot_product_features"]) == {"present", "absent"}
    wrong = KernelRow("vulkan-spirv", "32×128×384", "W8A8", 1.0, 1.0, 1.75, 1)  # as lavapipe computes it
    text = kernels_text(opscope.KernelReport(("x",), {}, [wrong]))
    assert wrong.wrong and "WRONG (> 0.03)" in text and "vulkan-spirv 32×128×384 W8A8: 1.8 > 0.03" in text


def test_bench_sparse_weight_quick_runs():
    """Every ELLPACK form of a pruned weight equals numpy's product (the script checks) and is timed."""
    proc = run_bench("bench_sparse_weight.py", "--quick")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert all(form in proc.stdout for form in ("dense", "ell m,n,l", "ell m,l,n", "ell xT n,l,m"))


def test_bench_live_quick_runs():
    proc = run_bench("bench_live.py", "--quick")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "x plain" in proc.stdout and "ratio (10x requests)" in proc.stdout


def test_bench_flags_quick_runs():
    out, rows = quick_table("bench_flags.py", "transformer ", "matmul ")
    want = [(m, f) for m in ("matmul", "transformer") for f in ("global-opt-O3", "tuned")]
    assert sorted((r[0], r[1]) for r in rows) == want, out
    assert all(r[2] != "-" and float(r[3]) > 0 for r in rows), out
    assert "--iree-global-optimization-opt-level=O1" in out.split("# global-opt-O3:")[0]


def test_bench_heap_quick_runs(tmp_path):
    """Both malloc settings run in their child processes and the table prints."""
    proc = run_bench("bench_heap.py", "--quick", cache_dir=tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "opscope / glibc" in proc.stdout and "activations out" in proc.stdout


def test_bench_report_quick_runs():
    proc = run_bench("bench_report.py", "--quick")
    assert proc.returncode == 0, proc.stderr
    assert "opscope (inline SVG)" in proc.stdout
