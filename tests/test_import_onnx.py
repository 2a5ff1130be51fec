"""ONNX importer: canonical modules compile on llvm-cpu and match onnxruntime, with and without taps.

Tolerance rtol = atol = 1e-4: both sides compute in f32 and differ only in reduction order
and fused elementwise rounding (measured: 0.0 on the MLP, ≤ 1e-6 on the block). Both torch
exporters are covered: the legacy one names sites by node names, the default (dynamo) one by
its `pkg.torch.onnx.name_scopes` metadata.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pytest
from errors import one_line
from families import quiet

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from opscope.errors import OpscopeError  # noqa: E402
from opscope.importers.onnx_model import MIN_OPSET, import_onnx, import_onnx_torch, scope_of  # noqa: E402
from opscope.ir.loading import module_bytecode, parse_module
from opscope.ir.manifest import Manifest
from opscope.ir.sites import find_sites  # noqa: E402
from opscope.pipeline.taps import inject_matmul_stats
from opscope.run.compile import compile_module  # noqa: E402
from opscope.run.runtime import load  # noqa: E402

TOL = dict(rtol=1e-4, atol=1e-4)


def needs_torch():
    """torch, for the tests that export a PyTorch model to ONNX (the rest of this file needs none)."""
    return pytest.importorskip("torch", reason="exports a PyTorch model to ONNX: the torch extra")


def block():
    """Linear → GELU → Linear with a residual and a LayerNorm: Gemm/MatMul nodes under module scopes."""
    torch = needs_torch()

    class Block(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.norm = torch.nn.LayerNorm(16)
            self.up = torch.nn.Linear(16, 32)
            self.down = torch.nn.Linear(32, 16)

        def forward(self, x):
            return x + self.down(torch.nn.functional.gelu(self.up(self.norm(x))))

    return Block().eval()


def _run_both(module, inputs):
    """Results of the module compiled as is and with every site tapped (inlined stats)."""
    source = module_bytecode(module)
    plain = load(compile_module(module, "llvm-cpu")).invoke("main", *inputs)
    tapped, manifest = inject_matmul_stats(parse_module(source))
    outs = load(compile_module(tapped, "llvm-cpu")).invoke("main", *inputs)
    return plain, outs[: manifest.num_original_results], manifest


def _matches_onnxruntime(path: Path, x: np.ndarray, sites: list[str]) -> tuple[list, Manifest]:
    """Import the ONNX file `path`, check its site names are `sites`, and its plain and tapped results on input
    `x` match onnxruntime's: the check the exported models share. Returns (plain results, manifest)."""
    module = import_onnx(path)
    assert [s.name for s in find_sites(module)] == sites
    want = ort.InferenceSession(str(path)).run(None, {"x": x})
    plain, tapped, manifest = _run_both(module, [x])
    np.testing.assert_allclose(plain[0], want[0], **TOL)
    np.testing.assert_allclose(tapped[0], want[0], **TOL)
    return plain, manifest


@pytest.fixture(scope="module")
def block_onnx(tmp_path_factory):
    torch = needs_torch()
    torch.manual_seed(0)
    path = tmp_path_factory.mktemp("onnx") / "block.onnx"
    x = torch.randn(2, 4, 16)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(block(), (x,), str(path), dynamo=False, input_names=["x"], opset_version=17)
    return path, x.numpy()


def test_torch_onnx_export_matches_onnxruntime(block_onnx):
    path, x = block_onnx
    _, manifest = _matches_onnxruntime(path, x, ["up", "down"])  # named from the legacy '/up/MatMul' nodes
    assert {e.site for e in manifest.entries} == {"up", "down"}


def test_dynamo_exporter_sites_named_by_module_path(tmp_path):
    """torch 2.13's default exporter (dynamo=True, needs onnxscript) names nodes `node_MatMul_3`; the sites
    read the module path from `pkg.torch.onnx.name_scopes`, as the FX route names them."""
    pytest.importorskip("onnxscript")
    torch = needs_torch()
    torch.manual_seed(0)
    path, x = tmp_path / "block.onnx", torch.randn(2, 4, 16)
    with quiet():
        torch.onnx.export(block(), (x,), str(path), dynamo=True, input_names=["x"])
    scopes = [
        p.value
        for n in onnx.load(str(path)).graph.node
        if n.op_type == "MatMul"
        for p in n.metadata_props
        if p.key == "pkg.torch.onnx.name_scopes"
    ]
    assert scopes == ["['', 'up', 'linear']", "['', 'down', 'linear_1']"]  # module paths, then the FX node
    _, manifest = _matches_onnxruntime(path, x.numpy(), ["up", "down"])
    assert {e.site for e in manifest.entries} == {"up", "down"}


def conv_blocks():
    """Two conv → BatchNorm → ReLU blocks in an `nn.Sequential` the model calls (ResNet's shape)."""
    torch = needs_torch()

    class ConvBlocks(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.layer = torch.nn.Sequential(*(torch.nn.Sequential() for _ in range(2)))
            for i, block in enumerate(self.layer):
                block.add_module("convolution", torch.nn.Conv2d(3 if i == 0 else 4, 4, 3, padding=1))
                block.add_module("normalization", torch.nn.BatchNorm2d(4))
                block.add_module("activation", torch.nn.ReLU())
                block.normalization.running_mean.uniform_(-1, 1)
                block.normalization.running_var.uniform_(0.5, 2)

        def forward(self, x):
            return self.layer(x)

    return ConvBlocks().eval()


@pytest.mark.parametrize("dynamo", [False, True], ids=["legacy", "dynamo"])
def test_conv_batchnorm_sites_named_by_the_conv(tmp_path, dynamo):
    """Both exporters name the convolutions as the FX route does (`layer.0.convolution`): the dynamo
    exporter's optimizer folds each BatchNorm into its Conv (the node keeps the BatchNorm's scope; the
    weight keeps the conv's name), the legacy one writes the called Sequential as a folder of its own
    (`/layer/layer.0/convolution/Conv`)."""
    if dynamo:
        pytest.importorskip("onnxscript")
    torch = needs_torch()
    torch.manual_seed(0)
    model, x = conv_blocks(), torch.randn(1, 3, 6, 6)
    path = tmp_path / "convs.onnx"
    with quiet():
        torch.onnx.export(model, (x,), str(path), dynamo=dynamo, input_names=["x"])
    convs = [n for n in onnx.load(str(path)).graph.node if n.op_type == "Conv"]
    if dynamo:  # what the fix reads: the fused node's rule and scope, and its weight's name
        props = {p.key: p.value for p in convs[0].metadata_props}
        assert "FuseBatchNormIntoConv" in props["pkg.onnxscript.rewriter.rule_name"]
        assert "'layer.0.normalization'" in props["pkg.torch.onnx.name_scopes"]
        assert convs[0].input[1] == "layer.0.convolution.weight"
    else:
        assert convs[0].name == "/layer/layer.0/convolution/Conv"
    plain, _ = _matches_onnxruntime(path, x.numpy(), ["layer.0.convolution", "layer.1.convolution"])
    np.testing.assert_allclose(plain[0], model(x).detach().numpy(), **TOL)


@pytest.mark.parametrize(
    "name,path",
    [
        (
            "/encoder/layer.0/attention/self/query/MatMul",
            "encoder.layer.0.attention.self.query",
        ),  # ModuleList: not called
        ("/encoder/stages.0/layers.0/layer/layer.0/convolution/Conv", "encoder.stages.0.layers.0.layer.0.convolution"),
        ("/blocks/blocks.1/blocks.1.0/fc/Gemm", "blocks.1.0.fc"),  # nested Sequentials, each called
        ("/layer/layer/fc/MatMul", "layer.layer.fc"),  # a module `layer` inside `layer`: not a container's child
        ("/MatMul", ""),
    ],
)
def test_legacy_node_name_to_module_path(name, path):
    node = helper.make_node("MatMul", ["x", "w"], ["y"], name=name)
    assert scope_of(node) == path


def test_external_data_is_loaded(block_onnx, tmp_path):
    path, x = block_onnx
    model = onnx.load(str(path))
    ext = tmp_path / "ext.onnx"
    onnx.save_model(
        model,
        str(ext),
        save_as_external_data=True,
        all_tensors_to_one_file=True,
        location="ext.weights",
        size_threshold=0,
    )
    assert (tmp_path / "ext.weights").stat().st_size > 0
    plain = load(compile_module(import_onnx(ext), "llvm-cpu")).invoke("main", x)
    want = ort.InferenceSession(str(ext)).run(None, {"x": x})
    np.testing.assert_allclose(plain[0], want[0], **TOL)


def _opset11_model() -> onnx.ModelProto:
    """Hand-built at opset 11 (Unsqueeze/ReduceSum/Squeeze take axes as attributes there)."""
    rng = np.random.default_rng(0)
    w = numpy_helper.from_array(rng.standard_normal((8, 4)).astype(np.float32), "W")
    nodes = [
        helper.make_node("Unsqueeze", ["x"], ["xu"], axes=[0], name="/enc/Unsqueeze"),
        helper.make_node("MatMul", ["xu", "W"], ["y"], name="/enc/proj/MatMul"),
        helper.make_node("Relu", ["y"], ["r"], name="/enc/act/Relu"),
        helper.make_node("ReduceSum", ["r"], ["s"], axes=[2], keepdims=0, name="/head/ReduceSum"),
        helper.make_node("Squeeze", ["s"], ["z"], axes=[0], name="/head/Squeeze"),
    ]
    graph = helper.make_graph(
        nodes,
        "hand",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 8])],
        [helper.make_tensor_value_info("z", TensorProto.FLOAT, [3])],
        [w],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 11)])
    model.ir_version = 7
    onnx.checker.check_model(model)
    return model


def test_hand_built_graph_is_upgraded_and_matches():
    model = _opset11_model()
    torch_form = import_onnx_torch(model)
    fn = next(op.operation for op in torch_form.body.operations if op.operation.name == "func.func")
    assert str(fn.attributes["sym_name"]) == '"main"'
    assert str(fn.attributes["torch.onnx_meta.opset_version"]) == f"{MIN_OPSET} : si64"
    module = import_onnx(model)
    assert [(s.name, s.kind) for s in find_sites(module)] == [("enc.proj", "batch_matmul")]
    x = np.random.default_rng(1).standard_normal((3, 8)).astype(np.float32)
    want = ort.InferenceSession(model.SerializeToString()).run(None, {"x": x})
    plain, tapped, _ = _run_both(module, [x])
    np.testing.assert_allclose(plain[0], want[0], **TOL)
    np.testing.assert_allclose(tapped[0], want[0], **TOL)


def test_corrupt_file_is_one_line(tmp_path):
    bad = tmp_path / "broken.onnx"
    bad.write_bytes(b"\x08\x07not a protobuf\xff\xff\xff")
    with pytest.raises(OpscopeError) as e:
        import_onnx(bad)
    msg = one_line(e)
    assert msg.startswith("broken.onnx: not a valid ONNX model:")


def test_missing_file():
    with pytest.raises(OpscopeError, match="no such ONNX file"):
        import_onnx("/nonexistent/model.onnx")


def test_unsupported_op_names_op_and_node():
    graph = helper.make_graph(
        [helper.make_node("StringNormalizer", ["x"], ["z"], name="/tok/norm/StringNormalizer")],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.STRING, [3])],
        [helper.make_tensor_value_info("z", TensorProto.STRING, [3])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    with pytest.raises(OpscopeError) as e:
        import_onnx(model, name="tok.onnx")
    msg = one_line(e)
    assert msg.startswith(
        "tok.onnx: unsupported op 'onnx.StringNormalizer' at tok.norm (node /tok/norm/StringNormalizer)"
    )


def test_missing_onnx_says_which_extra(monkeypatch):
    monkeypatch.setitem(__import__("sys").modules, "onnx", None)
    with pytest.raises(OpscopeError, match=r"pip install 'opscope\[onnx\]'"):
        import_onnx("model.onnx")


def test_a_lowering_failure_says_whose_it_is_and_the_route_that_works(tmp_path):
    """Issue 31: IREE's ONNX lowering failing (here on a NonZero whose declared output type it cannot
    cast to) is one line that says it is IREE's, before any tap, gives the first diagnostic, names
    the .pt2 route, and keeps every diagnostic with a reproducer in a log file."""
    graph = helper.make_graph(
        [helper.make_node("NonZero", ["x"], ["y"], name="/nz/NonZero")],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 6])],
        [helper.make_tensor_value_info("y", TensorProto.INT64, [])],
    )
    path = tmp_path / "nz.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    with pytest.raises(OpscopeError) as e:
        import_onnx(path)
    msg = one_line(e)
    assert msg.startswith(
        "nz.onnx: IREE's ONNX lowering (torch-mlir, in iree-base-compiler) failed on this model before any tap, "
        "in phase 'torch-to-linalg' at nz (node /nz/NonZero): 'tensor.cast' op"
    )
    assert "the PyTorch model exported with torch.export to a .pt2 is lowered by the FX route instead" in msg
    log = msg.rsplit("all diagnostics and a reproducer: ", 1)[1].rstrip(")")
    text = Path(log).read_text()
    assert "cast incompatible" in text and "reproduce: iree-opt --pass-pipeline=" in text


def test_weights_stored_narrow_and_cast_to_f32_stay_narrow():
    """An f16 weight and a bf16 one the graph casts to f32 (the bf16 one then transposed, as an exported
    Linear reads its weight; of one column, which the lowering folded into the constant too):
    torch-mlir's lowering folded each cast into an f32 constant, so the module stored them at twice
    the file's bytes and `weight_bytes` said so (found by the generated-model tests). Now they stay f16
    and bf16 constants widened where used (`opscope.importers.narrow_weights`), and int8 codes
    dequantized in the graph stay int8 (folded to f32 they took four times their bytes); `weight_bytes`
    is the file's 6·2 + 4·2 + 12 + 2·4 bytes, and the outputs are onnxruntime's."""
    import ml_dtypes

    from opscope.act.weights import weight_bytes

    rng = np.random.default_rng(3)
    a = rng.standard_normal((6, 1)).astype(np.float16)
    b = rng.standard_normal((4, 1)).astype(ml_dtypes.bfloat16)
    codes, scale = rng.integers(-127, 128, (2, 6)).astype(np.int8), np.array([[0.01], [0.02]], np.float32)
    bf16 = helper.make_tensor("b", TensorProto.BFLOAT16, [4, 1], b.view(np.uint16).tobytes(), raw=True)
    nodes = [
        helper.make_node("Cast", ["a"], ["a32"], to=TensorProto.FLOAT),
        helper.make_node("MatMul", ["x", "a32"], ["h"]),  # [3, 6] x [6, 1]
        helper.make_node("Cast", ["b"], ["b32"], to=TensorProto.FLOAT),
        helper.make_node("Transpose", ["b32"], ["bt"], perm=[1, 0]),
        helper.make_node("MatMul", ["y", "bt"], ["z"]),  # [3, 1] x [1, 4]
        helper.make_node("Cast", ["c"], ["c32"], to=TensorProto.FLOAT),  # int8 codes times scales
        helper.make_node("Mul", ["c32", "s"], ["cw"]),
        helper.make_node("Transpose", ["cw"], ["cwt"], perm=[1, 0]),
        helper.make_node("MatMul", ["x", "cwt"], ["q"]),  # [3, 6] x [6, 2]
    ]
    graph = helper.make_graph(
        nodes,
        "narrow",
        [
            helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 6]),
            helper.make_tensor_value_info("y", TensorProto.FLOAT, [3, 1]),
        ],
        [
            helper.make_tensor_value_info("h", TensorProto.FLOAT, [3, 1]),
            helper.make_tensor_value_info("z", TensorProto.FLOAT, [3, 4]),
            helper.make_tensor_value_info("q", TensorProto.FLOAT, [3, 2]),
        ],
        [
            numpy_helper.from_array(a, "a"),
            bf16,
            numpy_helper.from_array(codes, "c"),
            numpy_helper.from_array(scale, "s"),
        ],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    module = import_onnx(model)
    text = str(module)
    assert "tensor<6x1xf16>" in text and "xbf16>" in text and "tensor<2x6xi8>" in text
    assert weight_bytes(module) == 6 * 2 + 4 * 2 + 2 * 6 + 2 * 4
    x, y = (rng.standard_normal(s).astype(np.float32) for s in ((3, 6), (3, 1)))
    want = ort.InferenceSession(model.SerializeToString()).run(None, {"x": x, "y": y})
    got = load(compile_module(module, "llvm-cpu")).invoke("main", x, y)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, **TOL)
