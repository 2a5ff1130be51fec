"""`profile --verify`: a run checked against its model run by its own framework (`opscope.verify`).

Every family of `tests/test_families.py` is verified there by default (BERT, T5, ViT, ResNet,
MobileNet, Qwen2, Phi, recurrent and CNN models against PyTorch for `.pt2`, onnxruntime for ONNX,
jax for `.jaxexport`); here: the zoo's GPT-2 (fused QKV) and MoE (routers compared with PyTorch's
top-k), a recorded sketch corrupted after the run and named by a second verification, a framework
that cannot run, and the refusals.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

import opscope
from opscope.errors import OpscopeError
from opscope.models.zoo import missing_extra, missing_message

needs_torch = pytest.mark.skipif(missing_extra("torch"), reason=missing_message("this test", "torch"))


@pytest.fixture(scope="module")
def mixtral_run(tmp_path_factory):
    return opscope.profile("mixtral-tiny", steps=1, out=tmp_path_factory.mktemp("verify") / "run")


@needs_torch
def test_moe_agrees_with_pytorch_on_every_family_of_site(mixtral_run):
    check = mixtral_run.verification
    assert check is not None and check.agrees, check.line()
    assert set(check.compared) == {"matmul", "softmax", "routing", "residual"}
    assert check.compared["routing"] == 2  # both routers' expert loads equal torch.topk's, counted exactly
    assert check.flops[0] == check.flops[1]
    assert check.outputs[1] <= check.outputs[2] and not check.not_compared
    notes = json.loads((mixtral_run.out_dir / "notes.json").read_text())
    assert notes[-1] == check.line() and notes[-1].startswith("verify: PyTorch agrees: ")
    assert check.line() in mixtral_run.report_path.read_text().replace("\n> note: ", " ")


@needs_torch
def test_gpt2_fused_qkv_agrees_with_pytorch(tmp_path):
    """GPT-2: q, k and v sliced from one Conv1D (addmm with its bias) and eager attention."""
    check = opscope.profile("gpt2-tiny", steps=1, out=tmp_path / "run").verification
    assert check is not None and check.agrees, check.line()
    assert set(check.compared) == {"matmul", "softmax", "residual"} and check.compared["softmax"] == 2
    assert check.flops[0] == check.flops[1] and not check.not_compared


@needs_torch
def test_sampled_rows_are_verified_on_the_same_rows(tmp_path):
    """`--sample-rows 2`: activations, attention queries, residual rows and routed tokens are read one
    row in 2; the reference samples PyTorch's tensors alike (in the tapped tensor's shape)."""
    run = opscope.profile("mixtral-tiny", steps=1, out=tmp_path / "run", config=opscope.StatConfig(row_stride=2))
    check = run.verification
    assert check.agrees and set(check.compared) == {"matmul", "softmax", "routing", "residual"}, check.line()


@needs_torch
def test_a_corrupted_sketch_is_named(mixtral_run, tmp_path):
    """One recorded sketch changed after the run (an expert router's load, a projection's sum of
    squares): a second verification of the same folder names each, and only them."""
    import shutil

    from opscope.ir.loading import new_context, parse_module
    from opscope.models.source import open_model
    from opscope.verify.run import verify_run

    run = tmp_path / "run"
    shutil.copytree(mixtral_run.out_dir, run)
    csv = run / "sketches.csv"
    lines = csv.read_text().splitlines()
    planted = {"model.layers.1.self_attn.o_proj,out,sumsq", "model.layers.0.mlp.gate.topk,route,route_load"}
    for i, line in enumerate(lines):
        fields = line.split(",")
        if ",".join(fields[8:11]) in planted and fields[11] == "0":
            fields[12] = repr(float(fields[12]) * 1.5 + 1.0)
            lines[i] = ",".join(fields)
    csv.write_text("\n".join(lines) + "\n")
    source = open_model("mixtral-tiny", 1)
    model = mixtral_run.model
    inputs = list(source.inputs)[0]
    outputs = model.original(model(*inputs))
    base = parse_module(model.base_source, new_context())
    check = verify_run(source.reference, base, run, csv, inputs, outputs, per_group=100)  # every site
    assert not check.agrees
    named = {(d.site, d.role, d.stat) for d in check.differences}
    assert named == {tuple(p.split(",")) for p in planted}, check.line()
    assert "model.layers.1.self_attn.o_proj out sumsq" in check.line()
    notes = json.loads((run / "notes.json").read_text())
    assert [n for n in notes if n.startswith("verify:")] == [check.line()]  # replaced, not appended twice
    assert check.line() in opscope.mine(run).notes  # every report mined from the folder says it first


def test_refusals(tmp_path):
    with pytest.raises(OpscopeError, match="verify needs a model file"):
        opscope.profile(None, steps=1, out=tmp_path / "a", verify=True)
    text = "func.func @main(%x: tensor<2x2xf32>) -> tensor<2x2xf32> { return %x : tensor<2x2xf32> }"
    with pytest.raises(OpscopeError, match="verify needs the model as its own framework runs it"):
        opscope.profile(text, steps=1, out=tmp_path / "b", verify=True)


def test_outputs_compare_floats_to_scale_and_integers_exactly():
    from opscope.verify.check import Verification, compare_outputs

    check = Verification("ref")
    compare_outputs(check, [np.array([1.0, 2.0], np.float32)], [np.array([1.0, 2.0001])])
    assert check.agrees and check.outputs[0] == 1
    check = Verification("ref")
    compare_outputs(check, [np.array([3, 4])], [np.array([3, 5])])
    assert not check.agrees and "DIFFERS" in check.line()
    check = Verification("ref")
    compare_outputs(check, [np.zeros(3)], [np.zeros(4)])
    assert check.output_problem == "output 0 has 3 elements here, 4 in the reference"


def test_a_reference_that_cannot_run_is_said_and_the_run_kept(tmp_path):
    """A framework failing on the model is the verdict (nothing verified), not an exception."""
    from opscope.models.source import Reference
    from opscope.verify.run import verify_run

    def broken():
        raise RuntimeError("no kernel for this op\nmore detail")

    (tmp_path / "notes.json").write_text('["inputs: a note"]')
    check = verify_run(Reference("torch", broken), None, tmp_path, tmp_path / "sketches.csv", [], [])
    assert not check.agrees
    assert check.line() == (
        "verify: could not check against PyTorch, nothing was verified: RuntimeError: no kernel for this op"
    )
    assert json.loads((tmp_path / "notes.json").read_text()) == ["inputs: a note", check.line()]
    assert json.loads((tmp_path / "verify.json").read_text())["failed"].startswith("RuntimeError")
