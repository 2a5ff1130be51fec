"""Equal weights stored once (`opscope.importers.equal_tensors`): two parameters holding the same
bytes become one constant through `.pt2` and ONNX, so `weight_bytes` counts them once, and the
caller's program and ONNX model are left as they were."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from opscope.importers.equal_tensors import share_equal_tensors  # noqa: E402


class Twins(torch.nn.Module):
    """x·W1ᵀ + x·W2ᵀ + x·H1ᵀ + x·H2ᵀ with W1 = W2 (f32) and H1 = H2 (bf16 read as f32), V apart."""

    def __init__(self):
        super().__init__()
        g = torch.Generator().manual_seed(0)
        w, h = torch.randn(3, 4, generator=g), torch.randn(3, 4, generator=g).bfloat16()
        self.w1, self.w2 = torch.nn.Parameter(w.clone()), torch.nn.Parameter(w.clone())
        self.h1, self.h2 = torch.nn.Parameter(h.clone()), torch.nn.Parameter(h.clone())
        self.v = torch.nn.Parameter(torch.randn(3, 4, generator=g))

    def forward(self, x):
        y = x @ self.w1.T + x @ self.w2.T + x @ self.v.T
        return y + x @ self.h1.float().T + x @ self.h2.float().T


WANT = 2 * 12 * 4 + 12 * 2  # w and v in f32, h in bf16, each once


def test_equal_tensors_point_at_the_first_bit_for_bit():
    a = torch.tensor([1.0, float("nan"), 0.0])
    state = {"a": a, "b": a.clone(), "c": torch.tensor([1.0, float("nan"), -0.0]), "d": a, "e": torch.ones(2)}
    replaced = share_equal_tensors(state)
    assert list(replaced) == ["b"] and state["b"] is a  # NaN equals itself; -0.0 is not 0.0
    assert state["c"] is not a and state["d"] is a and state["e"].shape == (2,)


def test_a_pt2_stores_equal_parameters_once_and_keeps_the_program(tmp_path):
    import opscope
    from opscope.act.weights import weight_bytes
    from opscope.importers.torch_fx import _fx_import, decompose_program, import_torch

    model = Twins().eval()
    assert weight_bytes(import_torch(model, (torch.randn(2, 4),))) == WANT
    assert model.w1 is not model.w2 and model.w1.data_ptr() != model.w2.data_ptr()  # the model's own
    prog = decompose_program(torch.export.export(model, (torch.randn(2, 4),)))
    before = {k: id(v) for k, v in prog.state_dict.items()}
    _fx_import(prog, None, "twins")
    assert {k: id(v) for k, v in prog.state_dict.items()} == before  # the program's tensors put back
    path = tmp_path / "twins.pt2"
    torch.export.save(torch.export.export(model, (torch.randn(2, 4),)), str(path))
    assert weight_bytes(opscope.load_model(path)) == WANT


def test_an_onnx_model_reads_equal_initializers_from_one(tmp_path):
    onnx = pytest.importorskip("onnx")
    import opscope
    from opscope.act.weights import weight_bytes
    from opscope.importers.onnx_model import import_onnx

    path = tmp_path / "twins.onnx"
    torch.onnx.export(Twins().eval(), (torch.randn(2, 4),), str(path), dynamo=True, optimize=False, verbose=False)
    proto = onnx.load(str(path))
    names = [i.name for i in proto.graph.initializer]
    assert weight_bytes(opscope.load_model(path)) == WANT
    assert weight_bytes(import_onnx(proto)) == WANT
    assert [i.name for i in proto.graph.initializer] == names  # the caller's model untouched
