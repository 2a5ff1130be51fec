"""The command lines, run as subprocesses: `opscope` (also as `python -m opscope`),
`opscope-compile` and `opscope-opt`. Success prints what it promises and writes its files;
failure is exit status 1 and one line on stderr, never a traceback.

Subprocesses inherit the session's `OPSCOPE_CACHE_DIR`, so the second entry point of a
pair reuses the first one's compiled module from disk.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from opscope.ir.loading import new_context, parse_module
from opscope.ir.manifest import Manifest
from opscope.models.demo import matmul_module, transformer_module
from opscope.pipeline.taps import inject_matmul_stats
from opscope.run.targets import TARGETS

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
    """The main job: run folder with CSV, site costs, manifest and report; findings printed."""
    run_dir = tmp_path / "run"
    proc = run(opscope + ["profile", "--steps", "3", "--out", str(run_dir)], cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    out = proc.stdout.splitlines()
    assert out[0].startswith("opscope profile: built-in transformer") and out[0].endswith("on llvm-cpu")
    assert out[1].startswith(
        "  22 sites (16 matmuls, 2 softmax, 4 residual adds) (6.82 M FLOPs), 642 sketches per step"
    )
    assert "original results bit-identical with injection" in out[1]
    assert out[3] == (
        "Tapped sites: 99.5% of the module's 6.85 M FLOPs per call; not tapped: generic<maximumf> 0.2%, "
        "softmax 0.1%, generic<addf> 0.1%."
    )  # the ReLUs, softmaxes and residual adds
    assert out[5].startswith("Top findings (")
    # the default mix plants 90 %-pruned layer-1 FFN weights: both must be found
    findings = "\n".join(out)
    assert "layer1.ffn.up rhs: sparse-GEMM (skip 90% zeros)" in findings
    assert "layer1.ffn.down rhs: sparse-GEMM (skip 90% zeros)" in findings
    assert "Across 3 steps: 12 of 48 tensors are stationary (precompute / prepack): 12 rhs" in findings
    # ... and its two hot residual channels, the README's q/k/v finding (9.4x over 4 steps, 9.0x over these 3)
    for proj in ("q", "k", "v"):
        hot = re.search(rf"layer0\.attn\.{proj} lhs: per-channel int quant \(outlier (\d+\.\d)×\)", findings)
        assert hot and 8.0 <= float(hot.group(1)) <= 11.0, (proj, findings)
    assert out[-1].startswith(f"wrote {run_dir}/: sketches.csv (")
    manifest = Manifest.load(run_dir / "manifest.json")
    assert len(manifest.entries) == 16 * 39 + 2 * 3 + 4 * 3 and len(manifest.sites) == 22
    assert manifest.flags[: len(TARGETS["llvm-cpu"].flags)] == list(TARGETS["llvm-cpu"].flags)
    assert "Attention (2 sites, 2 heads, bidirectional): no sinks;" in findings  # the dynamics summary
    assert "Residual blocks (4): least influential layer1.ffn.residual" in findings
    rows = (run_dir / "sketches.csv").read_text().splitlines()
    assert rows[0] == "run_id,step,backend,dist,M,K,N,numel,site,role,stat,idx,value"
    assert len(rows) - 1 == 3 * sum(e.length for e in manifest.entries)
    costs = (run_dir / "site_costs.csv").read_text().splitlines()
    assert costs[0] == "site,flops" and costs[1] == f"layer0.attn.q,{2 * 32 * 64 * 64}" and len(costs) == 23 + 5
    assert costs[17:23] == [
        "layer0.attn.softmax,0",
        "layer1.attn.softmax,0",
        "layer0.attn.residual,0",
        "layer0.ffn.residual,0",
        "layer1.attn.residual,0",
        "layer1.ffn.residual,0",
    ]
    assert costs[23:] == [
        "(module),6850560",
        "(unknown ops),0",
        "(untapped) generic<maximumf>,16384",
        "(untapped) softmax,10240",
        "(untapped) generic<addf>,8192",
    ]
    report = (run_dir / "report.md").read_text()
    assert report.startswith("# opscope mine") and "## Ranked exploitable sites" in report


def test_unknown_taps_are_one_line_before_anything_runs(opscope, tmp_path):
    proc = run(opscope + ["profile", "--taps", "matmul,heads", "--out", str(tmp_path / "run")], cwd=tmp_path)
    assert_one_line_error(
        proc,
        "opscope: error: unknown taps heads: choose from all, matmul, attention, routing, residual (comma-separated)",
    )
    assert proc.stdout == "" and not (tmp_path / "run").exists()


def test_profile_taps_choose_the_families(tmp_path):
    """`taps="residual"` taps the residual adds alone; `"attention,residual"` both, no matmul."""
    import opscope

    only = opscope.profile(out=tmp_path / "residual", steps=1, taps="residual")
    assert {s.kind for s in only.manifest.sites} == {"residual"} and len(only.manifest.sites) == 4
    both = opscope.inject(transformer_module(2, 16, 8), taps=["attention", "residual"])[1]
    assert [s.kind for s in both.sites] == ["softmax"] * 2 + ["residual"] * 4
    from opscope.pipeline.taps import inject_stats  # a string spec, below the API too

    _, residual = inject_stats(parse_module(transformer_module(2, 16, 8), new_context()), taps="residual")
    assert [s.kind for s in residual.sites] == ["residual"] * 4


def test_profile_on_a_target_that_cannot_run_here(opscope, tmp_path):
    proc = run(opscope + ["profile", "--target", "metal-spirv", "--out", str(tmp_path / "run")], cwd=tmp_path)
    assert_one_line_error(proc, "opscope: error: target 'metal-spirv' cannot run here: ")
    assert proc.stdout == ""
    assert not (tmp_path / "run").exists()


STABLEHLO = """func.func @main(%x: tensor<16x32xf32>, %w: tensor<32x8xf32>) -> tensor<16x8xf32> {
  %0 = stablehlo.dot_general %x, %w, contracting_dims = [1] x [0] : (tensor<16x32xf32>, tensor<32x8xf32>) -> tensor<16x8xf32> loc("proj")
  %1 = stablehlo.tanh %0 : tensor<16x8xf32>
  return %1 : tensor<16x8xf32>
}
"""


def test_profile_a_stablehlo_file(opscope, tmp_path):
    path = tmp_path / "proj.mlir"
    path.write_text(STABLEHLO)
    proc = run(opscope + ["profile", str(path), "--steps", "3", "--out", str(tmp_path / "run")])
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout.splitlines()
    assert out[0] == f"opscope profile: {path} on llvm-cpu"
    assert out[1].startswith(f"  1 matmul sites ({2 * 16 * 32 * 8 / 1e3:.2f} K FLOPs), 39 sketches per step;")
    assert "Across 3 steps: 1 of 3 tensors are stationary (precompute / prepack): 1 rhs" in proc.stdout
    rows = (tmp_path / "run" / "sketches.csv").read_text().splitlines()[1:]
    assert {tuple(r.split(",")[4:7]) for r in rows} == {("16", "32", "8")}  # the site's own M/K/N
    assert {r.split(",")[8] for r in rows} == {"proj"}


def test_import_stablehlo_to_linalg_keeps_site_names(opscope, tmp_path):
    src, out = tmp_path / "proj.mlir", tmp_path / "proj.linalg.mlir"
    src.write_text(STABLEHLO)
    proc = run(opscope + ["import", str(src), "-o", str(out)])
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == f"imported {src} -> {out}: 1 matmul sites"
    text = out.read_text()
    assert "stablehlo." not in text and "linalg." in text
    listed = run(opscope + ["sites", str(out)]).stdout.splitlines()
    assert listed[1].split()[0] == "proj"


def test_profile_a_zoo_model_on_real_images(opscope, tmp_path):
    proc = run(opscope + ["profile", "digits", "--steps", "2", "--out", str(tmp_path / "run")])
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout.splitlines()
    assert out[0].startswith("opscope profile: digits MLP") and "2 matmul sites" in out[1]
    # two steps are too few for a verdict (docs/mining.md): the report says so instead
    assert "Across 2 steps: too few steps (2 < 3) to say which of 6 tensors are stationary." in proc.stdout
    assert "Temporal reuse: too few steps (2 < 4) to judge memoize or delta-compute" in proc.stdout


def test_profile_unknown_name(opscope, tmp_path):
    proc = run(opscope + ["profile", "nosuchmodel"], cwd=tmp_path)
    line = assert_one_line_error(proc, "opscope: error: no such file or zoo model: nosuchmodel (zoo: ")
    assert "digits" in line and "minilm" in line


def test_profile_refuses_to_overwrite_a_run(opscope, tmp_path):
    csv = tmp_path / "run" / "sketches.csv"
    csv.parent.mkdir()
    csv.write_text("keep me\n")
    proc = run(opscope + ["profile", "--out", str(tmp_path / "run")], cwd=tmp_path)
    assert_one_line_error(proc, f"opscope: error: {csv} exists: choose another --out")
    assert csv.read_text() == "keep me\n"


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


def test_sweep_then_mine_every_format(opscope, tmp_path):
    csv = tmp_path / "s.csv"
    proc = run(opscope + ["sweep", "--shapes", "16x32x8", "--seeds", "1", "--out", str(csv)])
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[-1] == f"recorded 7 runs of 7 into {csv} (site costs: {csv}.sites)"
    assert "parity 16x32x8: original result bit-identical with injection on llvm-cpu" in proc.stdout
    text = run(opscope + ["mine", str(csv)])
    assert text.returncode == 0, text.stderr
    assert text.stdout.startswith("opscope mine: ")
    lines = {(ln.split()[1], ln.split()[3]): ln for ln in text.stdout.splitlines() if ln.startswith("llvm-cpu ")}
    assert "sparse-GEMM" in lines[("sparse90", "lhs")] and "delta-compute" in lines[("coherent", "rhs")]
    doc = json.loads(run(opscope + ["mine", str(csv), "--json"]).stdout)
    assert doc["schema"] == "opscope-mine/4" and doc["counts"]["runs"] == 7
    assert len(doc["signals"]) == 7 * 3
    md = run(opscope + ["mine", str(tmp_path / "*.csv"), "--markdown"])
    assert md.returncode == 0 and md.stdout.startswith("# opscope mine")
    again = run(opscope + ["sweep", "--shapes", "16x32x8", "--seeds", "1", "--out", str(csv)])
    assert_one_line_error(again, f"opscope: error: {csv} exists: pass --force")


@pytest.mark.parametrize(
    "flag,value,want",
    [
        ("--seeds", "1,x", "opscope: error: --seeds wants non-negative integers N[,N...], got '1,x'"),
        ("--shapes", "16x32", "opscope: error: --shapes wants MxKxN[,MxKxN...], got '16x32'"),
    ],
)
def test_sweep_bad_plan_is_one_line(opscope, tmp_path, flag, value, want):
    proc = run(opscope + ["sweep", flag, value, "--out", str(tmp_path / "s.csv")])
    assert assert_one_line_error(proc, want) == want
    assert not (tmp_path / "s.csv").exists()


def test_mine_bad_csv_is_one_line_with_file_and_line(opscope, tmp_path):
    bad = tmp_path / "bad.csv"
    bad.write_text(
        "run_id,step,backend,dist,M,K,N,numel,site,role,stat,idx,value\n"
        "0,0,llvm-cpu,gaussian,1,1,1,1,s,lhs,min,0,0.5\n"
        "0,0,llvm-cpu,gaussian,1,1,1,1,s,lhs,max,0,zero\n"
    )
    proc = run(opscope + ["mine", str(bad)])
    assert_one_line_error(proc, f"opscope: error: {bad}:3")
    empty = tmp_path / "empty.csv"
    empty.write_text("")
    assert_one_line_error(run(opscope + ["mine", str(empty)]), f"opscope: error: {empty}")
    assert_one_line_error(run(opscope + ["mine", str(tmp_path / "none*.csv")]), "opscope: error: ")


def test_seq_and_replay(opscope, tmp_path):
    seq = run(opscope + ["seq", "--steps", "3", "--out", str(tmp_path / "q.csv"), "--parquet"])
    assert seq.returncode == 0, seq.stderr
    assert seq.stdout.startswith("recorded 3 steps (") and (tmp_path / "q.csv.sites").exists()
    assert f"wrote {tmp_path / 'q.parquet'}" in seq.stdout
    from opscope.record.tidy import read_tidy

    assert read_tidy(tmp_path / "q.parquet").equals(read_tidy(tmp_path / "q.csv"))
    rep = run(opscope + ["replay", "--steps", "6", "--pool", "2", "--out", str(tmp_path / "r.csv")])
    assert rep.returncode == 0, rep.stderr
    assert "Temporal opportunities" in rep.stdout and "memoize" in rep.stdout


@pytest.mark.parametrize("kind,sites", [("mlp", 2), ("transformer", 16), ("moe", 18)])
def test_demo_prints_a_module_with_sites(opscope, tmp_path, kind, sites):
    path = tmp_path / f"{kind}.mlir"
    proc = run(opscope + ["demo", kind, "-o", str(path)])
    assert proc.returncode == 0 and proc.stdout == "", proc.stderr
    listed = run(opscope + ["sites", str(path)])
    assert len(listed.stdout.splitlines()) == 1 + sites
    assert run(opscope + ["demo", kind]).stdout == path.read_text()


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

    from opscope.run.compile import CompiledModule
    from opscope.run.runtime import load

    loaded = load(CompiledModule(out.read_bytes(), TARGETS["llvm-cpu"], tuple(flags)))
    lhs = np.ones((16, 24), np.float32)
    rhs = np.full((24, 8), 0.5, np.float32)
    values = sidecar.values(loaded.invoke(sidecar.function, lhs, rhs))
    assert values[("fc", "out", "mean")][0] == 12.0
    assert values[("fc", "lhs", "nnz")][0] == 16 * 24


def compile_fc(tmp_path: Path, *flags: str) -> subprocess.CompletedProcess:
    """`opscope-compile <flags>` on a 4x8x3 matmul `fc` in tmp_path/mm.mlir: the input these tests share."""
    path = tmp_path / "mm.mlir"
    path.write_text(matmul_module(4, 8, 3, name="fc"))
    return run([str(BIN / "opscope-compile"), str(path), *flags])


def test_opscope_compile_custom_pipeline_and_manifest_path(tmp_path):
    proc = compile_fc(
        tmp_path,
        "--opscope-pipeline=inject-matmul-stats{hist-bins=0},lower-opscope",
        f"--opscope-manifest={tmp_path / 'm.json'}",
        "--compile-to=input",
        "-o",
        str(tmp_path / "out.mlir"),
    )
    assert proc.returncode == 0, proc.stderr
    manifest = Manifest.load(tmp_path / "m.json")
    assert len(manifest.entries) == 36 and "--compile-to=input" in manifest.flags
    assert not (tmp_path / "out.mlir.opscope.json").exists()
    text = (tmp_path / "out.mlir").read_text()  # IREE's input phase, like iree-compile --compile-to=input
    assert "util.func public @main" in text and "opscope.pack" in text


def test_opscope_compile_refuses_left_over_stats(tmp_path):
    proc = compile_fc(
        tmp_path, "--opscope-pipeline=inject-matmul-stats", *TARGETS["llvm-cpu"].flags, "-o", str(tmp_path / "mm.vmfb")
    )
    line = assert_one_line_error(proc, "opscope-compile: error: left-over 'opscope.stat'")
    assert "run the lower-opscope pass" in line
    assert not (tmp_path / "mm.vmfb").exists()


def test_opscope_compile_without_input():
    proc = run([str(BIN / "opscope-compile"), "-o", "x.vmfb"])
    assert_one_line_error(proc, "opscope-compile: error: no input file")


# -- opscope-opt -----------------------------------------------------------------------

OPT_ENTRY_POINTS = {
    "opscope-opt": [str(BIN / "opscope-opt")],
    "python -m opscope.pipeline.opt": [sys.executable, "-m", "opscope.pipeline.opt"],
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
    line = assert_one_line_error(
        run(opt + [str(path), "-p", "inject-matmul-stats{bogus=1}"]),
        "opscope-opt: error: inject-matmul-stats: unknown option 'bogus'",
    )
    assert "valid options: adjacency, dequantize-codes, hist-bins" in line
    assert_one_line_error(run(opt + [str(tmp_path / "nope.mlir")]), "opscope-opt: error: no such file")


def test_opscope_opt_runs_a_pipeline(tmp_path):
    path = tmp_path / "mm.mlir"
    path.write_text(matmul_module(4, 8, 3, name="fc"))
    proc = run(OPT_ENTRY_POINTS["opscope-opt"] + [str(path), "-p", "inject-matmul-stats{hist-bins=0},lower-opscope"])
    assert proc.returncode == 0, proc.stderr
    module = parse_module(proc.stdout, new_context())
    manifest = Manifest.from_module(module)
    assert len(manifest.entries) == 36 and manifest.sites[0].name == "fc"


# -- static analyses: shapes, bytes, motifs, flow ---------------------------------------

OPSCOPE = ENTRY_POINTS["opscope"]


def test_shapes_of_the_default_demo_text_and_json():
    text = run([*OPSCOPE, "shapes", "--layers", "2"])
    assert text.returncode == 0, text.stderr
    first = text.stdout.splitlines()[0]
    assert first.startswith("transformer: ") and "FLOPs" in first and "compute-bound" in first
    assert "16×64×64" in text.stdout and "×8" in text.stdout  # q, k, v, o of 2 layers
    doc = json.loads(run([*OPSCOPE, "shapes", "--layers", "2", "--json"]).stdout)
    flops = {(g["m"], g["k"], g["n"]): g for g in doc["gemms"]}
    assert flops[(16, 64, 64)]["count"] == 8 and flops[(16, 64, 64)]["flops"] == 8 * 2 * 16 * 64 * 64
    assert doc["roofline"]["ridge"] == 10.0


def test_bytes_per_op_and_per_dispatch(transformer_file):
    ops = run([*OPSCOPE, "bytes", str(transformer_file), "--top", "3"])
    assert ops.returncode == 0, ops.stderr
    assert ops.stdout.startswith("bytes ledger") and "per kind" in ops.stdout
    doc = json.loads(run([*OPSCOPE, "bytes", str(transformer_file), "--json"]).stdout)
    per_op = json.loads(run([*OPSCOPE, "bytes", str(transformer_file), "--dispatches", "--json"]).stdout)
    assert per_op["flops"] == doc["totals"]["flops"]  # fusion moves FLOPs between dispatches, never changes them
    assert per_op["target"] == "llvm-cpu" and per_op["per_dispatch"]


def test_motifs_and_flow_on_the_demos():
    motifs = run([*OPSCOPE, "motifs", "mlp", "--top", "2"])
    assert motifs.returncode == 0, motifs.stderr
    assert motifs.stdout.startswith("motifs: ")
    top = motifs.stdout.splitlines()[1]  # the matmul → bias → relu block, twice (×layers−1)
    assert "matmul → generic<addf> → generic<maximumf> → matmul → generic<addf> → generic<maximumf>" in top
    flow = json.loads(run([*OPSCOPE, "flow", "--json"]).stdout)
    assert flow["cones"][0]["kind"] == "attention" and flow["cones"][0]["count"] == 6
    moe = run([*OPSCOPE, "flow", "moe", "--layers", "2", "--top", "1"])
    assert "MoE" in moe.stdout


@pytest.mark.parametrize("cmd", ["shapes", "bytes", "motifs", "flow"])
def test_static_analysis_bad_source_is_one_line(cmd, tmp_path):
    assert_one_line_error(run([*OPSCOPE, cmd, str(tmp_path / "nope.mlir")]), "opscope: error: no such file")
    assert_one_line_error(run([*OPSCOPE, cmd, "resnet"]), "opscope: error: no such file or zoo model: resnet (zoo: ")
    bad = tmp_path / "bad.mlir"
    bad.write_text(MALFORMED)
    assert_one_line_error(run([*OPSCOPE, cmd, str(bad)]), "opscope: error: ")


def test_one_site_name_whatever_the_command(tmp_path):
    """A StableHLO file named by JAX's name stack: `sites`, `import` and `profile` all call its
    site `attn/q` (sites used to read the raw StableHLO and print `jit(attn)/attn/q/dot_general`)."""
    path = tmp_path / "attn.mlir"
    path.write_text(STABLEHLO.replace('loc("proj")', 'loc("jit(attn)/attn/q/dot_general")'))
    listed = run([str(BIN / "opscope"), "sites", str(path)])
    assert listed.returncode == 0, listed.stderr
    assert [line.split()[0] for line in listed.stdout.splitlines()[1:]] == ["attn/q"]
    proc = run([str(BIN / "opscope"), "profile", str(path), "--steps", "1", "--out", str(tmp_path / "run")])
    assert proc.returncode == 0, proc.stderr
    assert [s.name for s in Manifest.load(tmp_path / "run" / "manifest.json").sites] == ["attn/q"]


def test_a_command_that_quiets_the_notes_quiets_them_for_itself_only(tmp_path):
    """`mine` and `report` set opscope's logger to ERROR (their notes are the report's); called in
    process (tests, notebooks), the next command's warnings were lost (the full suite lost a lost-device
    warning in tests/test_loaded_module.py). `main` restores the level, on errors too."""
    import logging

    from opscope.cli import main

    log = logging.getLogger("opscope")
    before = log.level
    assert main(["mine", str(tmp_path / "no-such.csv")]) == 1
    assert log.level == before
