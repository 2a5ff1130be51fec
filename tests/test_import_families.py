"""Common model families from every route a user brings them by: nn.Module, `.pt2`, ONNX.

BatchNorm (eval mode) and recurrent layers (nn.LSTM, nn.GRU) import from an nn.Module
(`import_torch`), a `.pt2` file (`torch.export.save`) and ONNX (legacy and dynamo exporter).
A recurrent layer comes out unrolled over its static sequence: its matmuls are sites with the
same count and the same names from every route (`recurrent.step_scopes`: `rnn.l0.ih`,
`rnn.l0.t0`, ...). Hand-built ONNX nodes cover the attributes no PyTorch export writes.

Tolerances rtol = atol = 1e-4 (as tests/test_import_torch.py and test_import_onnx.py): both
sides compute in f32 and differ only in reduction order and fused elementwise rounding
(measured ≤ 5e-7 against PyTorch eager and onnxruntime on every case here).
"""

from __future__ import annotations

import contextlib
import io
import subprocess
import sys
import textwrap
import warnings

import numpy as np
import pytest
from errors import one_line

torch = pytest.importorskip("torch")
onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from opscope.errors import OpscopeError  # noqa: E402
from opscope.importers import import_source  # noqa: E402
from opscope.importers.onnx_model import import_onnx  # noqa: E402
from opscope.importers.recurrent import step_scopes  # noqa: E402
from opscope.importers.torch_fx import eager_outputs, import_torch  # noqa: E402
from opscope.ir.sites import find_sites  # noqa: E402
from opscope.run.compile import compile_module  # noqa: E402
from opscope.run.runtime import load  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore::FutureWarning", "ignore::UserWarning", "ignore::DeprecationWarning")
TOL = dict(rtol=1e-4, atol=1e-4)
STEPS, BATCH, FEATURES, HIDDEN = 4, 2, 5, 6


def _run(module, *inputs):
    return load(compile_module(module, "llvm-cpu")).invoke("main", *inputs)


def _close(got, want):
    assert len(got) == len(want)
    for i, (g, w) in enumerate(zip(got, want)):
        assert g.shape == w.shape, f"result {i}: {g.shape} vs {w.shape}"
        np.testing.assert_allclose(g, w, err_msg=f"result {i}", **TOL)


def _export_onnx(model, args, path, dynamo: bool):
    """torch.onnx.export, quietly (the dynamo exporter prints its progress)."""
    if dynamo:
        pytest.importorskip("onnxscript")
    with (
        warnings.catch_warnings(),
        contextlib.redirect_stdout(io.StringIO()),
        contextlib.redirect_stderr(io.StringIO()),
    ):
        warnings.simplefilter("ignore")
        torch.onnx.export(model, args, str(path), dynamo=dynamo, input_names=["x"])
    return path


def _onnxruntime(path, x):
    return ort.InferenceSession(str(path)).run(None, {"x": x})


class BatchNormNet(torch.nn.Module):
    """BatchNorm2d on the input, then Linear → ReLU → BatchNorm1d → Linear: no convolution (no conv site)."""

    def __init__(self):
        super().__init__()
        self.bn = torch.nn.BatchNorm2d(3)
        self.fc1 = torch.nn.Linear(3 * 4 * 4, 16)
        self.bn1 = torch.nn.BatchNorm1d(16)
        self.fc2 = torch.nn.Linear(16, 5)
        for bn in (self.bn, self.bn1):  # running statistics that are not the identity
            bn.running_mean.uniform_(-1, 1)
            bn.running_var.uniform_(0.5, 2)
            bn.weight.data.uniform_(0.5, 2)
            bn.bias.data.uniform_(-1, 1)

    def forward(self, x):
        h = torch.relu(self.bn(x)).flatten(1)
        return self.fc2(self.bn1(torch.relu(self.fc1(h))))


class Recurrent(torch.nn.Module):
    """An LSTM or GRU and a Linear head; returns the head's output and the final hidden state."""

    def __init__(self, cell: str, layers: int, batch_first: bool, bidirectional: bool = False):
        super().__init__()
        self.rnn = getattr(torch.nn, cell)(
            FEATURES, HIDDEN, num_layers=layers, batch_first=batch_first, bidirectional=bidirectional
        )
        self.fc = torch.nn.Linear(HIDDEN * (2 if bidirectional else 1), 3)

    def forward(self, x):
        y, h = self.rnn(x)
        return self.fc(y), h[0] if isinstance(h, tuple) else h


def test_batchnorm_from_module_pt2_and_onnx(tmp_path):
    torch.manual_seed(0)
    model, x = BatchNormNet().eval(), torch.randn(2, 3, 4, 4)
    want = eager_outputs(model, (x,))
    path = tmp_path / "bn.pt2"
    torch.export.save(torch.export.export(model, (x,)), str(path))
    for module in (import_torch(model, (x,)), import_source(path)):
        assert [s.name for s in find_sites(module)] == ["fc1", "fc2"]
        _close(_run(module, x.numpy()), want)
    for dynamo in (False, True):
        onnx_path = _export_onnx(model, (x,), tmp_path / f"bn{int(dynamo)}.onnx", dynamo)
        module = import_onnx(onnx_path)
        assert [s.name for s in find_sites(module)] == ["fc1", "fc2"]
        _close(_run(module, x.numpy()), _onnxruntime(onnx_path, x.numpy()))


RECURRENT = [("LSTM", 2, True), ("LSTM", 1, False), ("GRU", 2, True), ("GRU", 1, False)]


@pytest.mark.parametrize(
    "cell,layers,batch_first", RECURRENT, ids=[f"{c}-{n}l-{'bf' if b else 'tf'}" for c, n, b in RECURRENT]
)
def test_recurrent_same_sites_from_every_route(tmp_path, cell, layers, batch_first):
    """nn.Module, .pt2, legacy ONNX and dynamo ONNX: L·(1+T) step sites + the head, same names, right numbers."""
    torch.manual_seed(0)
    model = Recurrent(cell, layers, batch_first).eval()
    x = torch.randn(BATCH, STEPS, FEATURES) if batch_first else torch.randn(STEPS, BATCH, FEATURES)
    names = step_scopes("rnn", layers, 1, STEPS) + ["fc"]
    assert len(names) == layers * (1 + STEPS) + 1
    want = eager_outputs(model, (x,))
    path = tmp_path / "rnn.pt2"
    torch.export.save(torch.export.export(model, (x,)), str(path))
    for module in (import_torch(model, (x,)), import_source(path)):
        assert [s.name for s in find_sites(module)] == names
        _close(_run(module, x.numpy()), want)
    for dynamo in (False, True):
        onnx_path = _export_onnx(model, (x,), tmp_path / f"rnn{int(dynamo)}.onnx", dynamo)
        module = import_onnx(onnx_path)
        assert [s.name for s in find_sites(module)] == names
        got = _run(module, x.numpy())
        _close(got, _onnxruntime(onnx_path, x.numpy()))
        _close(got, want)


def test_bidirectional_lstm_names_reverse_steps_by_time(tmp_path):
    torch.manual_seed(0)
    model, x = Recurrent("LSTM", 2, True, bidirectional=True).eval(), torch.randn(BATCH, 3, FEATURES)
    names = step_scopes("rnn", 2, 2, 3) + ["fc"]
    assert names[4:8] == ["rnn.l0_reverse.ih", "rnn.l0_reverse.t2", "rnn.l0_reverse.t1", "rnn.l0_reverse.t0"]
    module = import_torch(model, (x,))
    assert [s.name for s in find_sites(module)] == names
    _close(_run(module, x.numpy()), eager_outputs(model, (x,)))
    onnx_path = _export_onnx(model, (x,), tmp_path / "bi.onnx", False)
    module = import_onnx(onnx_path)
    assert [s.name for s in find_sites(module)] == names
    _close(_run(module, x.numpy()), _onnxruntime(onnx_path, x.numpy()))


def _rnn_node_model(
    kind: str,
    layout: int = 0,
    direction: str = "forward",
    peepholes: bool = False,
    sequence_lens: bool = False,
    steps: int | None = 3,
    **attrs,
):
    """One hand-built ONNX LSTM/GRU/RNN node named 'enc_rnn' with biases and initial states (B=2, I=4, H=5)."""
    rng = np.random.default_rng(0)
    gates, dirs = {"LSTM": 4, "GRU": 3, "RNN": 1}[kind], 1 + (direction == "bidirectional")
    batch, feats, hidden = 2, 4, 5
    weights = [
        numpy_helper.from_array(rng.standard_normal(s).astype(np.float32) * 0.5, n)
        for n, s in (
            ("W", (dirs, gates * hidden, feats)),
            ("R", (dirs, gates * hidden, hidden)),
            ("B", (dirs, 2 * gates * hidden)),
        )
    ]
    x_shape = [steps, batch, feats] if layout == 0 else [batch, steps, feats]
    state = [dirs, batch, hidden] if layout == 0 else [batch, dirs, hidden]
    inputs = [
        helper.make_tensor_value_info("x", TensorProto.FLOAT, x_shape),
        helper.make_tensor_value_info("h0", TensorProto.FLOAT, state),
    ]
    names = ["x", "W", "R", "B", "lens" if sequence_lens else "", "h0"]
    outputs = ["y", "yh"]
    if sequence_lens:
        inputs.append(helper.make_tensor_value_info("lens", TensorProto.INT32, [batch]))
    if kind == "LSTM":
        inputs.append(helper.make_tensor_value_info("c0", TensorProto.FLOAT, state))
        names.append("c0")
        outputs.append("yc")
        if peepholes:
            weights.append(numpy_helper.from_array(rng.standard_normal((dirs, 3 * hidden)).astype(np.float32), "P"))
            names.append("P")
    node = helper.make_node(
        kind, names, outputs, name="enc_rnn", hidden_size=hidden, direction=direction, layout=layout, **attrs
    )
    y_shape = [steps, dirs, batch, hidden] if layout == 0 else [batch, steps, dirs, hidden]
    outs = [helper.make_tensor_value_info("y", TensorProto.FLOAT, y_shape)] + [
        helper.make_tensor_value_info(n, TensorProto.FLOAT, state) for n in outputs[1:]
    ]
    model = helper.make_model(
        helper.make_graph([node], "g", inputs, outs, weights), opset_imports=[helper.make_opsetid("", 17)]
    )
    model.ir_version = 8
    return model


ONNX_CASES = {
    "lstm-peepholes-clip": ("LSTM", dict(peepholes=True, clip=0.7)),
    "lstm-input-forget-reverse": ("LSTM", dict(input_forget=1, direction="reverse")),
    "lstm-keras-hardsigmoid": (
        "LSTM",
        dict(activations=["HardSigmoid", "Tanh", "Tanh"], activation_alpha=[0.3], activation_beta=[0.4]),
    ),
    "gru-reset-after-matmul": ("GRU", dict(linear_before_reset=0)),
    "gru-batch-major-bidirectional": ("GRU", dict(linear_before_reset=1, layout=1, direction="bidirectional")),
    "rnn-softsign": ("RNN", dict(activations=["Softsign"])),
}


@pytest.mark.parametrize("case", list(ONNX_CASES))
def test_hand_built_onnx_recurrent_nodes_match_onnxruntime(case):
    """Attributes PyTorch never exports. onnxruntime has no `layout` 1: its reference is the layout-0 twin."""
    kind, attrs = ONNX_CASES[case]
    model = _rnn_node_model(kind, **attrs)
    twin = _rnn_node_model(kind, **{**attrs, "layout": 0})
    rng = np.random.default_rng(1)
    dirs = 1 + (attrs.get("direction") == "bidirectional")
    feeds = {
        "x": rng.standard_normal((3, 2, 4)).astype(np.float32),
        "h0": rng.standard_normal((dirs, 2, 5)).astype(np.float32),
    }
    if kind == "LSTM":
        feeds["c0"] = rng.standard_normal((dirs, 2, 5)).astype(np.float32)
    want = ort.InferenceSession(twin.SerializeToString()).run(None, feeds)
    if attrs.get("layout"):
        want = [want[0].transpose(2, 0, 1, 3)] + [w.transpose(1, 0, 2) for w in want[1:]]
        feeds = {k: v.transpose(1, 0, 2) for k, v in feeds.items()}
    module = import_onnx(model)
    per_step = 2 if kind == "GRU" and attrs.get("linear_before_reset") == 0 else 1  # (r ⊙ H)·Rhᵀ is a 2nd matmul
    names = [s.name for s in find_sites(module)]
    assert len(names) == dirs * (1 + per_step * 3)
    assert names[:2] == ["enc_rnn.l0.ih", "enc_rnn.l0.t2" if attrs.get("direction") == "reverse" else "enc_rnn.l0.t0"]
    _close(_run(module, *feeds.values()), want)


def test_onnx_recurrent_node_that_cannot_unroll_is_one_line():
    with pytest.raises(OpscopeError) as e:
        import_onnx(_rnn_node_model("LSTM", sequence_lens=True), name="packed.onnx")
    assert one_line(e) == (
        "packed.onnx: LSTM node 'enc_rnn' at enc_rnn cannot be unrolled: it has sequence_lens "
        "(sequences of different lengths); try: export it on full-length sequences, without "
        "pack_padded_sequence"
    )
    with pytest.raises(OpscopeError) as e:
        import_onnx(_rnn_node_model("GRU", steps=None), name="dyn.onnx")
    assert one_line(e).endswith(
        "cannot be unrolled: its sequence length or batch size is not static; try: export it with fixed input shapes"
    )


def test_unsupported_onnx_op_is_named():
    """IREE 3.13's onnx-to-torch has no Softsign pattern: the error names the ONNX op, not 'torch.operator'."""
    graph = helper.make_graph(
        [helper.make_node("Softsign", ["x"], ["y"], name="/enc/act/Softsign")],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    with pytest.raises(OpscopeError) as e:
        import_onnx(model, name="act.onnx")
    assert one_line(e).startswith(
        "act.onnx: unsupported op 'onnx.Softsign' at enc.act (node /enc/act/Softsign): "
        "torch-mlir's onnx-to-torch has no pattern for it"
    )


def test_unsupported_torch_op_names_op_module_and_fix():
    class Inverse(torch.nn.Module):
        def forward(self, x):
            return torch.linalg.inv(x)

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.block = Inverse()
            self.proj = torch.nn.Linear(4, 4)

        def forward(self, x):
            return self.proj(self.block(x))

    with pytest.raises(OpscopeError) as e:
        import_torch(Net(), (torch.randn(4, 4),))
    msg = one_line(e)
    assert msg.startswith("Net: unsupported op 'aten.linalg_inv' at block (test_import_families.py:")
    assert msg.endswith(
        "try: compute it outside the model and pass the result as an input, or rewrite that line with other torch ops"
    )


def test_composite_op_without_lowering_is_decomposed():
    """`aten.diff` has no torch-mlir op; torch's CompositeImplicit kernel (slices + sub) imports."""

    class Diff(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.proj = torch.nn.Linear(4, 3)

        def forward(self, x):
            return self.proj(torch.diff(x, dim=0))

    torch.manual_seed(0)
    model, x = Diff(), torch.randn(5, 4)
    module = import_torch(model, (x,))
    assert [s.name for s in find_sites(module)] == ["proj"]
    _close(_run(module, x.numpy()), eager_outputs(model, (x,)))


def test_failing_decomposition_is_one_line():
    torch.manual_seed(0)
    with pytest.raises(OpscopeError) as e:
        import_torch(
            BatchNormNet().eval(),
            (torch.randn(2, 3, 4, 4),),
            decompositions=("aten._native_batch_norm_legit_no_training.default",),
        )
    msg = one_line(e)
    assert msg.startswith("BatchNormNet: decomposing (aten._native_batch_norm_legit_no_training.default) failed: ")
    assert "; try: add the op that message names to `decompositions` too" in msg


def _choke_on(monkeypatch, target: str):
    """Make the FX importer raise (as it did on aten.lstm's mixed-shape tensor lists) on `target` nodes;
    returns the list of programs it was handed."""
    from iree.compiler.extras import fx_importer

    handed = []
    real = fx_importer.FxImporter.import_frozen_program

    def choke(self, prog, **kwargs):
        handed.append(prog)
        for node in prog.graph.nodes:
            if str(node.target) == target:
                raise AssertionError("Heterogeneous lists are not supported: expected a, got b")
        return real(self, prog, **kwargs)

    monkeypatch.setattr(fx_importer.FxImporter, "import_frozen_program", choke)
    return handed


def test_fx_importer_failure_is_decomposed_away(monkeypatch):
    """An op the importer fails on is decomposed with torch's decomposition and imported again."""
    handed = _choke_on(monkeypatch, "aten.linear.default")
    torch.manual_seed(0)
    model, x = Recurrent("GRU", 1, True).eval(), torch.randn(BATCH, 2, FEATURES)
    module = import_torch(model, (x,))
    assert len(handed) == 2  # the second try has no aten.linear left
    assert [s.name for s in find_sites(module)] == step_scopes("rnn", 1, 1, 2) + ["fc"]
    _close(_run(module, x.numpy()), eager_outputs(model, (x,)))


def test_fx_importer_failure_names_op_and_module(monkeypatch):
    from opscope.importers import torch_fx

    _choke_on(monkeypatch, "aten.linear.default")
    monkeypatch.setattr(torch_fx, "_torch_decomposition", lambda op: None)  # as for an op torch cannot decompose
    head = torch.nn.Sequential(torch.nn.ReLU(), torch.nn.Linear(4, 2))
    with pytest.raises(OpscopeError) as e:
        import_torch(head, (torch.randn(3, 4),), decompositions=())
    msg = one_line(e)
    assert msg.startswith("Sequential: the FX importer failed on 'aten.linear' at 1 (")
    assert msg.endswith(
        "AssertionError: Heterogeneous lists are not supported: expected a, got b; try: compute "
        "it outside the model and pass the result as an input, or rewrite that line with other ops"
    )


def test_qwen2_with_a_cache_says_use_cache_false():
    transformers = pytest.importorskip("transformers")
    cfg = transformers.Qwen2Config(
        vocab_size=64,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=32,
    )
    torch.manual_seed(0)
    model = transformers.AutoModelForCausalLM.from_config(cfg).eval()
    ids = torch.randint(0, 64, (1, 8))
    with pytest.raises(OpscopeError) as e:
        import_torch(model, (), example_kwargs={"input_ids": ids})  # default config: use_cache=True
    msg = one_line(e)
    assert msg.startswith(
        "Qwen2ForCausalLM: torch.export failed: RuntimeError: Found <class "
        "'transformers.cache_utils.DynamicCache'> in output"
    )
    assert msg.endswith(
        "; try: export with use_cache=False (model.config.use_cache = False, or use_cache=False in "
        "example_kwargs) and pass an explicit attention_mask"
    )
    kwargs = {"input_ids": ids, "attention_mask": torch.ones(1, 8, dtype=torch.long), "use_cache": False}
    module = import_torch(model, (), example_kwargs=kwargs)  # the hint, followed
    assert "model.layers.1.mlp.down_proj" in [s.name for s in find_sites(module)]


LOADER = """
import sys, warnings
warnings.simplefilter("ignore")
from opscope.errors import OpscopeError
from opscope.importers import import_source
from opscope.ir.sites import find_sites
print(len(find_sites(import_source(sys.argv[1]))), "transformers" in sys.modules)
try:
    import_source(sys.argv[2])
except OpscopeError as e:
    print(e)
"""


def test_pt2_pytree_types_are_registered_or_named(tmp_path):
    """In a fresh process: a Hugging Face `.pt2` (ModelOutput outputs) loads without importing transformers
    first; a program whose output type is registered nowhere names the type and what to import."""
    from opscope.models import huggingface

    model, kwargs = huggingface.tiny_gpt2()
    torch.export.save(torch.export.export(model, (), kwargs, strict=False), str(tmp_path / "gpt2.pt2"))
    (tmp_path / "myoutputs.py").write_text(
        textwrap.dedent("""
        import dataclasses, torch
        @dataclasses.dataclass
        class Pair:
            a: torch.Tensor
            b: torch.Tensor
        torch.export.register_dataclass(Pair, serialized_type_name="myoutputs.Pair")
    """)
    )
    sys.path.insert(0, str(tmp_path))
    try:
        import myoutputs

        class Split(torch.nn.Module):
            def forward(self, x):
                return myoutputs.Pair(x + 1, x * 2)

        torch.export.save(torch.export.export(Split(), (torch.randn(2),)), str(tmp_path / "pair.pt2"))
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("myoutputs", None)
    out = subprocess.run(
        [sys.executable, "-c", LOADER, str(tmp_path / "gpt2.pt2"), str(tmp_path / "pair.pt2")],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=str(tmp_path.parent),
    )
    lines = out.stdout.strip().splitlines()
    assert out.returncode == 0, out.stderr[-2000:]
    assert lines[0] == "13 True"  # 2 × (c_attn, q·kᵀ, p·v, c_proj, c_fc, c_proj) + lm_head; transformers imported
    assert lines[1] == (
        f"{tmp_path / 'pair.pt2'}: its inputs or outputs hold a myoutputs.Pair, a pytree type not "
        "registered in this process; try: import myoutputs (from the package myoutputs) before "
        "loading it"
    )
    assert len(lines) == 2 and "Traceback" not in out.stderr  # torch's logged traceback is kept, not shown
