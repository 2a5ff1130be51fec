"""`opscope dump`: weights and whole activations of a real model to files a probe reads back."""

from __future__ import annotations

import numpy as np
import pytest

from opscope.cli import main
from opscope.models.digits import train_digits
from opscope.probe.tensors import load_tensors

pytest.importorskip("sklearn")


def test_dump_weights_and_activations_of_digits(tmp_path, capsys):
    out = tmp_path / "t"
    assert main(["dump", "digits", "--out", str(out), "--activations", "--steps", "2", "--format", "tensor"]) == 0
    assert "wrote 4 files" in capsys.readouterr().out
    tensors = load_tensors(out)
    assert set(tensors) == {"fc1.lhs", "fc2.lhs", "fc1.weight", "fc2.weight"}
    trained = train_digits()
    w1, b1, w2, _ = trained.weights
    np.testing.assert_array_equal(tensors["fc1.weight"], w1.T)  # [out, K]
    np.testing.assert_array_equal(tensors["fc2.weight"], w2.T)
    x = np.asarray(trained.x_test[:128], np.float32)  # two steps of 64 held-out images, stacked
    np.testing.assert_array_equal(tensors["fc1.lhs"], x)
    hidden = np.maximum(x.astype(np.float64) @ w1 + b1, 0.0)
    np.testing.assert_allclose(tensors["fc2.lhs"], hidden, rtol=1e-5, atol=1e-5)
    assert main(["probe", str(out)]) == 0
    assert "fc2.lhs" in capsys.readouterr().out


def test_dump_over_the_byte_budget_is_refused_before_anything_is_written(tmp_path, capsys):
    out = tmp_path / "t"
    assert main(["dump", "digits", "--out", str(out), "--activations", "--max-mib", "0.001"]) == 1
    err = capsys.readouterr().err.splitlines()[-1]
    assert err.startswith("opscope: error: dump-tensors: the 2 tapped tensors take")
    assert "narrow `sites`" in err
    assert not out.exists()


def test_dump_sites_regex_and_role(tmp_path, capsys):
    out = tmp_path / "t"
    assert (
        main(
            [
                "dump",
                "digits",
                "--out",
                str(out),
                "--activations",
                "--no-weights",
                "--sites",
                "fc2",
                "--role",
                "out",
                "--format",
                "npy",
            ]
        )
        == 0
    )
    tensors = load_tensors(out)
    assert list(tensors) == ["fc2.out"] and tensors["fc2.out"].shape == (64, 10)


def test_actions_read_block_gaps_from_a_recorded_run(tmp_path):
    """`actions --from RUN`: every residual block's ‖d‖/‖h‖ from the run; SKIP below 0.02."""
    pytest.importorskip("torch")
    import opscope

    run = opscope.profile("llama-tiny", out=tmp_path / "run", steps=1, taps="residual")
    report = opscope.layer_actions("llama-tiny", run=run.out_dir)
    table = run.report.dynamics.residual
    assert set(report.gaps) == set(table["site"].to_list())
    for site, rel in zip(table["site"].to_list(), table["rel"].to_list()):
        assert report.gaps[site] == pytest.approx(rel)
    assert report.skips == [b for b, g in report.gaps.items() if g < 0.02]
    assert "near-identity blocks (‖out − in‖/‖in‖ < 0.02 ⇒ SKIP)" in opscope.render(report)
    with pytest.raises(opscope.OpscopeError, match="holds no residual taps"):
        opscope.layer_actions("llama-tiny", run=opscope.profile("digits", out=tmp_path / "d", steps=1).out_dir)
