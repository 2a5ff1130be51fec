"""The command lines, run as subprocesses: `opscope` (also as `python -m opscope`),
`opscope-compile` and `opscope-opt`. Success prints what it promises and writes its files;
failure is exit status 1 and one line on stderr, never a traceback.

Subprocesses inherit the session's `OPSCOPE_CACHE_DIR`, so the second entry point of a
pair reuses the first one's compiled module from disk.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from opscope.demo import matmul_module, transformer_module
from opscope.instrument import inject_matmul_stats
from opscope.loading import new_context, parse_module
from opscope.manifest import Manifest
from opscope.targets import TARGETS

BIN = Path(sys.executable).parent
ENTRY_POINTS = {
    "opscope": [str(BIN / "opscope")],
    "python -m opscope": [sys.executable, "-m", "opscope"],
}
MALFORMED = "func.func @main(%a: tensor<4xf32>) -> tensor<4xf32> {\n  return %a : tensor<5xf32>\n}\n"


def run(argv: list[str], cwd: Path | None = None, timeout: int = 240) -> subprocess.CompletedProcess:
    return subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=timeout)


def assert_one_line_error(proc: subprocess.CompletedProcess, prefix: str) -> str:
    """Exit 1, nothing on stdout, exactly one stderr line starting with `prefix`."""
    assert proc.returncode == 1, proc.stderr
    assert "Traceback" not in proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith(prefix), lines[0]
    return lines[0]


@pytest.fixture(params=list(ENTRY_POINTS))
def opscope(request) -> list[str]:
    """The `opscope` command, through each of its entry points."""
    return ENTRY_POINTS[request.param]


@pytest.fixture(scope="module")
def transformer_file(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("models") / "transformer.mlir"
    path.write_text(transformer_module(2, 32, 16))
    return path


# -- opscope ---------------------------------------------------------------------------


def test_profile_default_model(opscope, tmp_path):
    proc = run(opscope + ["profile", "--steps", "2", "--out", str(tmp_path / "run")], cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    out = proc.stdout.splitlines()
    assert out[0].startswith("opscope profile: built-in transformer") and out[0].endswith("on llvm-cpu")
    assert "16 matmul sites, 624 sketches per step" in out[1]
    header = out[2].split()
    assert header == ["site", "role", "numel", "density", "chan", "pk/mean", "kurtosis", "hist", "top"]
    rows = [line.split() for line in out[3:-1]]
    assert len(rows) == 16 * 3
    assert [r[1] for r in rows[:3]] == ["lhs", "rhs", "out"]
    assert rows[0][0] == "layer0.attn.q" and rows[-1][0] == "layer1.ffn.down"
    for r in rows:
        density = float(r[3])
        assert 0.0 <= density <= 1.0
    assert out[-1].strip().startswith("wrote ")
    manifest = Manifest.load(tmp_path / "run" / "manifest.json")
    assert len(manifest.entries) == 16 * 39 and len(manifest.sites) == 16
    assert manifest.flags[: len(TARGETS["llvm-cpu"].flags)] == list(TARGETS["llvm-cpu"].flags)
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert len(summary) == 16 * 3 and summary[0]["site"] == "layer0.attn.q"


def test_profile_on_a_target_that_cannot_run_here(opscope, tmp_path):
    proc = run(opscope + ["profile", "--target", "metal-spirv", "--out", str(tmp_path / "run")], cwd=tmp_path)
    assert_one_line_error(proc, "opscope: error: target 'metal-spirv' cannot run here: ")
    assert proc.stdout == ""
    assert not (tmp_path / "run").exists()


def test_profile_unknown_target(opscope, tmp_path):
    proc = run(opscope + ["profile", "--target", "tpu"], cwd=tmp_path)
    line = assert_one_line_error(proc, "opscope: error: unknown target 'tpu'")
    assert "llvm-cpu, vulkan-spirv, metal-spirv, cuda, rocm" in line


def test_profile_missing_file(opscope, tmp_path):
    proc = run(opscope + ["profile", str(tmp_path / "nope.mlir")], cwd=tmp_path)
    assert_one_line_error(proc, f"opscope: error: no such file: {tmp_path / 'nope.mlir'}")


def test_sites_lists_every_site(opscope, transformer_file):
    proc = run(opscope + ["sites", str(transformer_file)])
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].split() == ["site", "kind", "batch", "M", "K", "N", "FLOPs"]
    rows = [line.split() for line in lines[1:]]
    assert len(rows) == 16
    assert rows[0] == ["layer0.attn.q", "matmul", "1", "16", "32", "32", f"{2 * 16 * 32 * 32:,}"]
    assert rows[7][0] == "layer0.ffn.down" and rows[7][6] == f"{2 * 16 * 128 * 32:,}"


def test_sites_of_a_module_without_matmuls(opscope, tmp_path):
    path = tmp_path / "plain.mlir"
    path.write_text("func.func @main(%a: tensor<4xf32>) -> tensor<4xf32> {\n  return %a : tensor<4xf32>\n}\n")
    proc = run(opscope + ["sites", str(path)])
    assert proc.returncode == 0 and proc.stdout.strip() == f"{path}: no matmul sites"


def test_sites_of_malformed_file(opscope, tmp_path):
    path = tmp_path / "bad.mlir"
    path.write_text(MALFORMED)
    proc = run(opscope + ["sites", str(path)])
    assert_one_line_error(proc, f"opscope: error: malformed MLIR at {path}:2:")


def test_targets_lists_the_table(opscope):
    proc = run(opscope + ["targets"])
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert [line.split()[0] for line in lines] == list(TARGETS)
    assert lines[0].split()[1:3] == ["runs", "here"]
    assert lines[2].split()[1:3] == ["compiles", "only"]


# -- opscope-compile -------------------------------------------------------------------


def test_opscope_compile_writes_vmfb_and_manifest(tmp_path):
    source = matmul_module(16, 24, 8, name="fc")
    path = tmp_path / "mm.mlir"
    path.write_text(source)
    out = tmp_path / "mm.vmfb"
    flags = list(TARGETS["llvm-cpu"].flags)
    proc = run([str(BIN / "opscope-compile"), str(path), *flags, "-o", str(out)])
    assert proc.returncode == 0, proc.stderr
    assert out.read_bytes()[:4] == b"PK\x03\x04"
    sidecar = Manifest.load(str(out) + ".opscope.json")
    _, want = inject_matmul_stats(parse_module(source, new_context()))
    assert sidecar.flags == flags
    sidecar.flags = []
    assert sidecar == want
    assert len(sidecar.entries) == 39 and sidecar.sites[0].name == "fc"

    # The vmfb runs and its outputs decode with the sidecar.
    import numpy as np

    from opscope.compile import CompiledModule
    from opscope.runtime import load

    loaded = load(CompiledModule(out.read_bytes(), TARGETS["llvm-cpu"], tuple(flags)))
    lhs = np.ones((16, 24), np.float32)
    rhs = np.full((24, 8), 0.5, np.float32)
    values = sidecar.values(loaded.invoke(sidecar.function, lhs, rhs))
    assert values[("fc", "out", "mean")][0] == 12.0
    assert values[("fc", "lhs", "nnz")][0] == 16 * 24


def test_opscope_compile_custom_pipeline_and_manifest_path(tmp_path):
    path = tmp_path / "mm.mlir"
    path.write_text(matmul_module(4, 8, 3, name="fc"))
    proc = run([str(BIN / "opscope-compile"), str(path), "--opscope-pipeline=inject-matmul-stats{hist-bins=0},lower-opscope",
                f"--opscope-manifest={tmp_path / 'm.json'}", "--compile-to=input", "-o", str(tmp_path / "out.mlir")])
    assert proc.returncode == 0, proc.stderr
    manifest = Manifest.load(tmp_path / "m.json")
    assert len(manifest.entries) == 36 and "--compile-to=input" in manifest.flags
    assert not (tmp_path / "out.mlir.opscope.json").exists()
    text = (tmp_path / "out.mlir").read_text()  # IREE's input phase, like iree-compile --compile-to=input
    assert "util.func public @main" in text and "opscope.pack" in text


def test_opscope_compile_refuses_left_over_stats(tmp_path):
    path = tmp_path / "mm.mlir"
    path.write_text(matmul_module(4, 8, 3, name="fc"))
    proc = run([str(BIN / "opscope-compile"), str(path), "--opscope-pipeline=inject-matmul-stats",
                *TARGETS["llvm-cpu"].flags, "-o", str(tmp_path / "mm.vmfb")])
    line = assert_one_line_error(proc, "opscope-compile: error: left-over 'opscope.stat'")
    assert "run the lower-opscope pass" in line
    assert not (tmp_path / "mm.vmfb").exists()


def test_opscope_compile_without_input():
    proc = run([str(BIN / "opscope-compile"), "-o", "x.vmfb"])
    assert_one_line_error(proc, "opscope-compile: error: no input file")


# -- opscope-opt -----------------------------------------------------------------------

OPT_ENTRY_POINTS = {
    "opscope-opt": [str(BIN / "opscope-opt")],
    "python -m opscope.opt": [sys.executable, "-m", "opscope.opt"],
}


@pytest.mark.parametrize("entry", list(OPT_ENTRY_POINTS))
def test_opscope_opt_malformed_input_is_one_line(entry, tmp_path):
    path = tmp_path / "bad.mlir"
    path.write_text(MALFORMED)
    proc = run(OPT_ENTRY_POINTS[entry] + [str(path), "-p", "inject-matmul-stats,lower-opscope"])
    assert_one_line_error(proc, "opscope-opt: error: ")
    assert f"{path}:2:" in proc.stderr


def test_opscope_opt_errors_are_one_line(tmp_path):
    opt = OPT_ENTRY_POINTS["opscope-opt"]
    path = tmp_path / "mm.mlir"
    path.write_text(matmul_module(4, 8, 3))
    line = assert_one_line_error(run(opt + [str(path), "-p", "inject-matmul-stats{bogus=1}"]),
                                 "opscope-opt: error: inject-matmul-stats: unknown option 'bogus'")
    assert "valid options: adjacency, hist-bins" in line
    assert_one_line_error(run(opt + [str(tmp_path / "nope.mlir")]), "opscope-opt: error: no such file")


def test_opscope_opt_runs_a_pipeline(tmp_path):
    path = tmp_path / "mm.mlir"
    path.write_text(matmul_module(4, 8, 3, name="fc"))
    proc = run(OPT_ENTRY_POINTS["opscope-opt"] + [str(path), "-p", "inject-matmul-stats{hist-bins=0},lower-opscope"])
    assert proc.returncode == 0, proc.stderr
    module = parse_module(proc.stdout, new_context())
    manifest = Manifest.from_module(module)
    assert len(manifest.entries) == 36 and manifest.sites[0].name == "fc"
