"""The Python API (`import opscope`): docs/api.md runs as written, `help(opscope)` lists
it, and each function takes every kind of source it documents, with one-line errors."""

from __future__ import annotations

import doctest
import pydoc
import subprocess
import sys
from pathlib import Path

import pytest
from errors import one_line

import opscope
from opscope.errors import OpscopeError
from opscope.models.demo import matmul_module, transformer_module

REPO = Path(__file__).resolve().parent.parent


def test_docs_api_examples_run(tmp_path, monkeypatch):
    """Every `>>>` example of docs/api.md, in an empty folder, gives the output shown."""
    pytest.importorskip("sklearn", reason="docs/api.md profiles the digits MLP (the digits extra)")
    pytest.importorskip("torch", reason="docs/api.md imports a PyTorch model (the torch extra)")
    monkeypatch.chdir(tmp_path)
    flags = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE
    result = doctest.testfile(
        str(REPO / "docs" / "api.md"), module_relative=False, optionflags=flags, raise_on_error=False, verbose=False
    )
    assert result.attempted >= 25
    assert result.failed == 0, f"{result.failed} of docs/api.md's examples failed (output above)"


def test_help_lists_the_api():
    text = pydoc.render_doc(opscope, renderer=pydoc.plaintext)
    for name in opscope.__all__:
        assert name in text, name
    for name in ("profile", "read_sketches", "mine", "load_model", "inject", "compile", "load"):
        assert getattr(opscope, name).__doc__, name


def test_help_from_a_fresh_interpreter():
    """`python -c "import opscope; help(opscope)"`, as the README says."""
    out = subprocess.run(
        [sys.executable, "-c", "import opscope; help(opscope)"],
        capture_output=True,
        text=True,
        check=True,
        env={"PAGER": "cat", "PATH": ""},
    ).stdout
    assert "read_sketches(" in out and "class ProfileResult" in out and "class MineReport" in out


def test_unknown_attribute_is_an_attribute_error():
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        opscope.nope  # noqa: B018


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """The built-in model profiled through the API, 2 steps."""
    lines: list[str] = []
    result = opscope.profile(out=tmp_path_factory.mktemp("api") / "run", steps=2, progress=lines.append)
    result.said = lines
    return result


def test_profile_says_the_model_and_writes_the_run_folder(run):
    assert run.said == ["opscope profile: built-in transformer (2 layers, d_model 64, 32 tokens) on llvm-cpu"]
    assert all(p.is_file() for p in (run.sketches, run.site_costs, run.manifest_path, run.report_path))
    assert run.report_path.read_text() == opscope.render(run.report, "markdown")
    assert run.parity == 0.0 and run.steps == 2 and run.target == "llvm-cpu"
    kinds = [s.kind for s in run.manifest.sites]
    assert (kinds.count("matmul"), kinds.count("softmax"), kinds.count("residual")) == (16, 2, 4)  # all taps
    assert len(kinds) == 22 and run.rows == opscope.read_sketches(run).height


def test_read_sketches_of_a_run_equals_its_file(run):
    from opscope.record.tidy import read_tidy

    assert opscope.read_sketches(run).equals(read_tidy(run.sketches))
    assert opscope.read_sketches([run.sketches]).equals(read_tidy(run.sketches))


def test_mine_takes_a_run_a_file_a_frame_and_costs(run):
    """A run and its file find the sidecar; a frame takes costs as a mapping or a file; all agree."""
    from opscope.record.recorder import read_site_costs

    by_run, by_file = opscope.mine(run), opscope.mine(run.sketches)
    frame = opscope.read_sketches(run)
    by_mapping = opscope.mine(frame, costs=read_site_costs(run.site_costs))
    by_costs_file = opscope.mine(frame, costs=run.site_costs)
    by_file_and_mapping = opscope.mine(run.sketches, costs=read_site_costs(run.site_costs))
    for other in (by_file, by_mapping, by_costs_file, by_file_and_mapping):
        assert other.signals.equals(by_run.signals) and other.ranked.equals(by_run.ranked)
        assert other.opportunities.equals(by_run.opportunities)
    assert by_run.signals.equals(run.report.signals)
    assert by_run.costs_source == str(run.site_costs) == by_costs_file.costs_source
    assert by_mapping.costs_source == by_file_and_mapping.costs_source == "the site costs given"
    bare = opscope.mine(frame)
    assert bare.costs_source is None and bare.opportunities["cost_share"].sum() == 0
    # shares are of the whole module: the tapped sites' add up to what they hold of it
    assert by_run.opportunities["cost_share"].sum() == pytest.approx(by_run.coverage["share"][0])
    assert 0.99 < by_run.coverage["share"][0] < 1.0  # the built-in model's softmax, ReLU and adds are not tapped


def test_mine_bad_input_is_one_line(tmp_path):
    with pytest.raises(OpscopeError) as e:
        opscope.mine(tmp_path / "missing.csv")
    assert one_line(e).endswith("missing.csv: no such file or directory")
    import polars as pl

    with pytest.raises(OpscopeError, match="lacks tidy columns"):
        opscope.mine(pl.DataFrame({"x": [1]}))


def test_inject_takes_text_and_a_target_layout():
    """Text is parsed; `target` picks the target's kernel layout (llvm-cpu: i8 histogram
    counts), which an explicit option overrides; without a target the layout is i32."""
    source = matmul_module(64, 128, 32)
    cpu, manifest = opscope.inject(source, target="llvm-cpu")
    plain, _ = opscope.inject(source)
    forced, _ = opscope.inject(source, target="llvm-cpu", hist_counts="i32", row_lanes=0)
    assert len(manifest.entries) == 39 and [s.name for s in manifest.sites] == ["matmul"]
    assert ": i32 to i8" in str(cpu) and ": i32 to i8" not in str(plain)
    assert str(forced) == str(plain)
    lean, lean_manifest = opscope.inject(source, opscope.StatConfig.lean())
    assert len(lean_manifest.entries) < len(manifest.entries)


def test_inject_selects_sites():
    source = transformer_module(1, 16, 8)
    _, by_regex = opscope.inject(source, sites=r"ffn")
    _, by_keep = opscope.inject(source, keep=lambda s: s.name.startswith("layer0.ffn"), taps="matmul")
    assert {s.name for s in by_regex.sites} == {"layer0.ffn.up", "layer0.ffn.down", "layer0.ffn.residual"}
    assert {s.name for s in by_keep.sites} == {"layer0.ffn.up", "layer0.ffn.down"}
    _, kept = opscope.inject(source, keep=lambda s: s.lhs_numel > 16 * 8)  # keep sees matmul sites only
    assert {s.kind for s in kept.sites} == {"matmul", "softmax", "residual"}


def test_compile_and_load_run_the_module():
    import numpy as np

    module, manifest = opscope.inject(matmul_module(8, 16, 4))
    compiled = opscope.compile(module, "llvm-cpu")
    assert isinstance(compiled, opscope.CompiledModule)
    a = np.arange(128, dtype=np.float32).reshape(8, 16)
    b = np.ones((16, 4), np.float32)
    out = opscope.load(compiled).invoke("main", a, b)
    assert np.array_equal(out[0], a @ b)
    stats = {(role, stat): v for _, role, stat, idx, v in manifest.rows(out) if idx == 0}
    assert stats["lhs", "max"] == 127.0 and stats["rhs", "nnz"] == 64


def test_load_model_sources(tmp_path):
    """A file, MLIR text, bytecode and a module all come back as canonical linalg with their sites."""
    from opscope.ir.loading import module_bytecode
    from opscope.ir.sites import find_sites

    text = transformer_module(1, 16, 8)
    path = tmp_path / "t.mlir"
    path.write_text(text)
    names = [s.name for s in find_sites(opscope.load_model(text))]
    assert len(names) == 8
    assert [s.name for s in find_sites(opscope.load_model(path))] == names
    assert [s.name for s in find_sites(opscope.load_model(str(path)))] == names
    module = opscope.load_model(text)
    assert [s.name for s in find_sites(opscope.load_model(module_bytecode(module)))] == names
    assert opscope.load_model(module) is module


@pytest.mark.parametrize(
    "source, want",
    [
        ("resnet", "no such file or zoo model: resnet (zoo: digits, minilm"),
        ("missing/model.onnx", "no such file: missing/model.onnx"),
        (42, "cannot import a int: expected a path (.mlir, .mlirbc, .onnx, .jaxexport, .pt2) or a model"),
    ],
)
def test_load_model_bad_source_is_one_line(source, want):
    with pytest.raises(OpscopeError) as e:
        opscope.load_model(source)
    assert one_line(e).startswith(want)


def test_profile_checks_target_and_folder_before_any_work(tmp_path):
    """A target that cannot run here and a folder that already holds a run are refused
    before the model is opened (a zoo model's build is never called)."""
    said: list[str] = []
    with pytest.raises(OpscopeError, match="unknown target"):
        opscope.profile("minilm", target="tpu", out=tmp_path / "a", progress=said.append)
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "sketches.csv").write_text("run_id\n")
    with pytest.raises(OpscopeError, match="exists: choose another --out"):
        opscope.profile("minilm", out=tmp_path / "b", progress=said.append)
    with pytest.raises(OpscopeError, match="steps must be >= 1"):
        opscope.profile(steps=0, out=tmp_path / "c")
    assert said == []
