"""`opscope probe`, `layers`, `actions` on tensor files: the tables, JSON, and one-line refusals."""

from __future__ import annotations

import json

import numpy as np
import pytest

from opscope.cli import main
from opscope.drive.synthetic import sample
from opscope.probe.stats import HINT_LOWRANK, HINT_LUT
from opscope.probe.tensors import save_tensors

LAYERS = {
    "model.layers.0.q_proj": ("lowrank", 64, 64),
    "model.layers.0.o_proj": ("gaussian", 64, 64),
    "model.layers.1.mlp.gate": ("quantized", 128, 64),
    "model.layers.1.mlp.down": ("lowrank", 64, 128),
    "router.gate": ("gaussian", 16, 64),
}


@pytest.fixture(scope="module")
def tdir(tmp_path_factory):
    d = tmp_path_factory.mktemp("tensors")
    tensors = {k: sample(dist, r, c, i) for i, (k, (dist, r, c)) in enumerate(LAYERS.items())}
    rng = np.random.default_rng(0)  # genuinely ternary: ±0.8 with probability 1/5 each, else 0
    tensors["router.gate"] = rng.choice([-0.8, 0.0, 0.8], size=(16, 64), p=[0.2, 0.6, 0.2]).astype(np.float32)
    save_tensors(d, tensors, "tensor")
    return d


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_probe_prints_every_tensor_with_its_verdict(tdir, capsys):
    code, out, _ = run(capsys, "probe", str(tdir))
    assert code == 0
    lines = {line.split()[0]: line for line in out.splitlines() if line.startswith(("model.", "router."))}
    assert set(lines) == set(LAYERS)
    assert lines["model.layers.0.q_proj"].endswith(HINT_LOWRANK)
    assert lines["model.layers.1.mlp.gate"].endswith(HINT_LUT)
    code, out, _ = run(capsys, "probe", str(tdir), "--json")
    data = json.loads(out)
    assert data["schema"] == "opscope-probe/1"
    assert data["tensors"]["router.gate"]["cardinality"] == 3
    assert data["tensors"]["model.layers.0.q_proj"]["effective_rank_99"] <= 4


@pytest.mark.parametrize("allocator", ["greedy", "dado"])
def test_layers_plan_stays_within_the_budget(tdir, capsys, allocator):
    code, out, _ = run(capsys, "layers", str(tdir), "--budget", "0.3", "--allocator", allocator, "--json")
    assert code == 0
    data = json.loads(out)
    plan = data[allocator]
    assert plan["bytes"] <= plan["budget_bytes"] + 1
    assert plan["compression"] == pytest.approx(plan["dense_bytes"] / plan["bytes"])
    assert len(plan["choice"]) == len(LAYERS)
    if allocator == "dado":
        assert plan["total_err"] <= data["greedy"]["total_err"] + 1e-9
    code, out, _ = run(capsys, "layers", str(tdir), "--budget", "0.3", "--allocator", allocator)
    assert "total: Σ rel_err" in out and "time: profile" in out and f"plan: {allocator}" in out


def test_layers_every_lists_all_options_and_flags(tdir, capsys):
    code, out, _ = run(capsys, "layers", str(tdir), "--every")
    assert code == 0
    assert out.count("← cheapest within 2%") == len(LAYERS)
    assert "lowrank(r=4)" in out and "tight" in out


def test_actions_classify_each_layer(tdir, capsys):
    code, out, _ = run(capsys, "actions", str(tdir))
    assert code == 0
    rows = {line.split()[0]: line for line in out.splitlines() if line.startswith(("model.", "router."))}
    assert "REPLACE (structural)" in rows["model.layers.0.q_proj"]
    assert "REPLACE ⇒ ternary (adds-only)" in rows["router.gate"]
    assert "ternary-viable: router.gate" in out
    assert "give --from RUN" in out


def test_quant_sweep_by_depth_and_kind(tdir, capsys):
    code, out, _ = run(capsys, "layers", str(tdir), "--quant", "0.15")
    assert code == 0
    assert "by depth" in out and "by kind" in out and "recipe: int4 where per-channel int4 error ≤ 0.15" in out
    assert "q_proj" in out and "gate" in out


def _one_line_error(capsys, *argv: str) -> str:
    code, out, err = run(capsys, *argv)
    assert code == 1 and not out
    assert err.startswith("opscope: error: ") and err.count("\n") == 1, err
    assert "Traceback" not in err
    return err


def test_bad_tensor_files_are_one_line_errors(tmp_path, capsys):
    empty = tmp_path / "empty"
    empty.mkdir()
    assert "no *.tensor" in _one_line_error(capsys, "probe", str(empty))
    bad = tmp_path / "bad.tensor"
    bad.write_bytes(np.array([4, 5], "<u4").tobytes() + np.zeros(19, "<f4").tobytes())
    assert "header" in _one_line_error(capsys, "layers", str(bad))
    np.save(tmp_path / "vector.npy", np.ones(8, np.float32))
    assert "1-D" in _one_line_error(capsys, "probe", str(tmp_path / "vector.npy"))
    nan = np.ones((4, 4), np.float32)
    nan[1, 2] = np.nan
    np.save(tmp_path / "nan.npy", nan)
    assert "NaN/Inf" in _one_line_error(capsys, "actions", str(tmp_path / "nan.npy"))


def test_bad_options_are_one_line_errors(tdir, capsys):
    assert "(0, 1]" in _one_line_error(capsys, "layers", str(tdir), "--budget", "0")
    assert "give a model" in _one_line_error(capsys, "layers", str(tdir), "--measure")
    assert "drop --measure" in _one_line_error(capsys, "layers", str(tdir), "--quant", "--measure")


def test_sites_filters_tensor_files_too(tdir, capsys):
    code, out, _ = run(capsys, "probe", str(tdir), "--sites", r"layers\.1\.")
    assert code == 0
    names = [line.split()[0] for line in out.splitlines() if line.startswith(("model.", "router."))]
    assert names == ["model.layers.1.mlp.down", "model.layers.1.mlp.gate"]
    assert "names no tensor (valid: " in _one_line_error(capsys, "probe", str(tdir), "--sites", "zzz")
