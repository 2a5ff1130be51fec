"""`extract-site`: one site outlined alone, at its real shapes, compiles with plain IREE and
computes what it computes inside the model: bit for bit against the model's own value of the
op (read with `expose-all-ops`), and within 1e-5 of numpy.

The refusals lit_tests/passes/extract-site.mlir and invalid/extract-site.mlir pin are
asserted once from Python here.
"""

from __future__ import annotations

import numpy as np
import pytest
from iree.compiler import ir

from opscope.errors import OpscopeError
from opscope.ir.arguments import arguments, function_op, symbol_name
from opscope.ir.loading import module_bytecode, new_context, parse_module
from opscope.models.demo import random_inputs, transformer_module
from opscope.passes.expose_all_ops import exposures
from opscope.passes.extract_site import function_name
from opscope.pipeline.textual import run_pipeline
from opscope.run.compile import check_compilable, compile_module
from opscope.run.runtime import load

TARGET = "llvm-cpu"
SEQ, D_MODEL = 8, 16


def transformer(weights: str = "globals", layers: int = 1) -> str:
    return transformer_module(layers, D_MODEL, SEQ, weights=weights)


def outline(source: str, site: str, only: bool = True) -> ir.Module:
    module = parse_module(source, new_context())
    run_pipeline(module, f"extract-site{{site={site} only={'true' if only else 'false'}}}")
    return module


def functions(module: ir.Module) -> dict[str, ir.Operation]:
    return {
        symbol_name(op.operation): op.operation for op in module.body.operations if op.operation.name == "func.func"
    }


def global_names(module: ir.Module) -> set[str]:
    return {
        ir.StringAttr(op.operation.attributes["sym_name"]).value
        for op in module.body.operations
        if op.operation.name == "util.global"
    }


def run_outlined(source: str, site: str, *operands: np.ndarray) -> np.ndarray:
    """`site` alone (only=true), compiled for llvm-cpu, run on `operands`."""
    module = outline(source, site)
    (name,) = functions(module)
    check_compilable(module)
    (out,) = load(compile_module(module, TARGET)).invoke(name, *operands)
    return out


def model_values(source: str, inputs: list[np.ndarray]) -> dict[str, np.ndarray]:
    """Every intermediate tensor of the whole model on `inputs`, by its exposed name (`fc1#0`)."""
    module = parse_module(source, new_context())
    run_pipeline(module, "expose-all-ops")
    name, exposed = exposures(module)
    outs = load(compile_module(module, TARGET)).invoke(name, *inputs)
    return {e.name: outs[e.result] for e in exposed}


def transformer_weights() -> dict[str, np.ndarray]:
    """The globals' data of `transformer("globals")`: the args form's `random_inputs`, minus x."""
    args_form = parse_module(transformer("args"), new_context())
    shapes = [a.shape for a in arguments(args_form)]
    names = ["layer0_wq", "layer0_wk", "layer0_wv", "layer0_wo", "layer0_w1", "layer0_w2"]
    return dict(zip(names, random_inputs(shapes, 0)[1:]))


# -- the IR ------------------------------------------------------------------------------


def test_outline_adds_the_site_function_and_leaves_the_original_as_it_was():
    source = transformer()
    module = parse_module(source, new_context())
    before = str(function_op(module, "main"))
    run_pipeline(module, "extract-site{site=layer0.attn.q}")
    assert str(function_op(module, "main")) == before
    fns = functions(module)
    assert list(fns) == ["main", "site_layer0_attn_q"]
    q = fns["site_layer0_attn_q"]
    assert ir.StringAttr(q.attributes["opscope.site"]).value == "layer0.attn.q"
    assert [a.shape for a in arguments(module, "site_layer0_attn_q")] == [(SEQ, D_MODEL)]  # the weight is inside
    assert str(q.location) == 'loc("layer0.attn.q")'
    assert global_names(module) == set(transformer_weights())  # nothing erased without only=true


def test_a_computed_rhs_is_an_argument_and_ordinals_name_sites_in_ir_order():
    by_name, by_ordinal = outline(transformer(), "layer0.attn.scores"), outline(transformer(), "3")
    assert str(by_name) == str(by_ordinal)
    assert list(functions(by_name)) == ["site_layer0_attn_scores"]
    assert [a.shape for a in arguments(by_name, "site_layer0_attn_scores")] == [(SEQ, D_MODEL), (SEQ, D_MODEL)]
    assert global_names(by_name) == set()  # q·kᵀ reads no weight: every global is gone


def test_function_names_are_sanitized():
    assert function_name("model.layers.0.self_attn.q_proj") == "site_model_layers_0_self_attn_q_proj"
    assert function_name("conv_2d_nchw_fchw#1") == "site_conv_2d_nchw_fchw_1"


def test_refusals_are_one_line_and_list_the_names():
    source = transformer(layers=2)  # 16 sites: 12 are listed, then how many more
    with pytest.raises(OpscopeError) as e:
        outline(source, "layer9.ffn.up")
    assert str(e.value) == (
        "extract-site: no matmul site 'layer9.ffn.up' in this module (valid: layer0.attn.q, "
        "layer0.attn.k, layer0.attn.v, layer0.attn.scores, layer0.attn.context, layer0.attn.o, "
        "layer0.ffn.up, layer0.ffn.down, layer1.attn.q, layer1.attn.k, layer1.attn.v, "
        "layer1.attn.scores and 4 more (`opscope sites MODEL` lists them), "
        "or their ordinals 0..15)"
    )
    with pytest.raises(OpscopeError, match=r"^extract-site: name the site to outline with site=<name or ordinal> "):
        run_pipeline(parse_module(source, new_context()), "extract-site")
    with pytest.raises(OpscopeError, match=r"^extract-site: no matmul site '16' in this module"):
        outline(source, "16")
    dynamic = """func.func @main(%a: tensor<?x8xf32>, %b: tensor<8x3xf32>, %z: tensor<?x3xf32>) -> tensor<?x3xf32> {
  %0 = linalg.matmul ins(%a, %b : tensor<?x8xf32>, tensor<8x3xf32>) outs(%z : tensor<?x3xf32>)
       -> tensor<?x3xf32> loc("d")
  return %0 : tensor<?x3xf32>
}
"""
    with pytest.raises(
        OpscopeError,
        match=r"^extract-site: site 'd' at loc\(\"d\"\) has a dynamic shape "
        r"\(tensor<\?x8xf32> x tensor<8x3xf32> -> tensor<\?x3xf32>\)",
    ):
        outline(dynamic, "d")


# -- compiled and run ----------------------------------------------------------------------


@pytest.fixture(scope="module")
def digits():
    """The trained digits model (weights are arguments), its first 64 images, every op's value in the model."""
    pytest.importorskip("sklearn")
    from opscope.models.digits import digit_images, digits_model

    source, weights = digits_model()
    x = digit_images(64)
    return source, weights, x, model_values(source, [x, *weights])


def test_digits_fc1_takes_x_and_its_weight_and_equals_the_model_bit_for_bit(digits):
    source, (w1, b1, w2, b2), x, inside = digits
    module = outline(source, "fc1")
    assert [(a.shape, a.dtype) for a in arguments(module, "site_fc1")] == [((64, 64), "f32"), (w1.shape, "f32")]
    got = run_outlined(source, "fc1", x, w1)
    assert got.tobytes() == inside["fc1#0"].tobytes()
    np.testing.assert_allclose(got, x @ w1, rtol=1e-5, atol=1e-6)


def test_digits_fc2_fed_the_model_hidden_equals_the_model_bit_for_bit(digits):
    source, (w1, b1, w2, b2), x, inside = digits
    h = inside["fc1.relu#0"]
    got = run_outlined(source, "fc2", h, w2)
    assert got.tobytes() == inside["fc2#0"].tobytes()
    np.testing.assert_allclose(got, h @ w2, rtol=1e-5, atol=1e-6)


def test_constant_weights_are_outlined_with_the_site():
    source, weights = transformer(), transformer_weights()
    ffn = outline(source, "layer0.ffn.up")
    assert global_names(ffn) == {"layer0_w1"}  # the weight's global stays; the others are gone
    assert [a.shape for a in arguments(ffn, "site_layer0_ffn_up")] == [(SEQ, D_MODEL)]
    assert "util.global.load @layer0_w1" in str(ffn)
    x = np.random.default_rng(7).standard_normal((SEQ, D_MODEL), dtype=np.float32)
    np.testing.assert_allclose(run_outlined(source, "layer0.ffn.up", x), x @ weights["layer0_w1"], rtol=1e-5, atol=1e-6)
    q = run_outlined(source, "layer0.attn.q", x)  # its lhs is the model's input: the model's own q is readable
    assert q.tobytes() == model_values(source, [x])["layer0.attn.q#0"].tobytes()
    np.testing.assert_allclose(q, x @ weights["layer0_wq"], rtol=1e-5, atol=1e-6)


def test_computed_rhs_site_runs_on_its_two_operands():
    rng = np.random.default_rng(3)
    q, k = (rng.standard_normal((SEQ, D_MODEL), dtype=np.float32) for _ in range(2))
    np.testing.assert_allclose(run_outlined(transformer(), "layer0.attn.scores", q, k), q @ k.T, rtol=1e-5, atol=1e-6)


CONV = """
util.global private @filter = dense<{filter}> : tensor<4x2x3x3xf32>
func.func @conv(%x: tensor<1x2x5x5xf32>) -> tensor<1x4x5x5xf32> {{
  %zero = arith.constant 0.0 : f32
  %p = tensor.pad %x low[0, 0, 1, 1] high[0, 0, 1, 1] {{
  ^bb0(%i: index, %j: index, %k: index, %l: index):
    tensor.yield %zero : f32
  }} : tensor<1x2x5x5xf32> to tensor<1x2x7x7xf32>
  %f = util.global.load @filter : tensor<4x2x3x3xf32>
  %e = tensor.empty() : tensor<1x4x5x5xf32>
  %i0 = linalg.fill ins(%zero : f32) outs(%e : tensor<1x4x5x5xf32>) -> tensor<1x4x5x5xf32>
  %c = linalg.conv_2d_nchw_fchw {{dilations = dense<1> : tensor<2xi64>, strides = dense<1> : tensor<2xi64>}}
       ins(%p, %f : tensor<1x2x7x7xf32>, tensor<4x2x3x3xf32>) outs(%i0 : tensor<1x4x5x5xf32>)
       -> tensor<1x4x5x5xf32> loc("conv")
  return %c : tensor<1x4x5x5xf32>
}}
"""


def test_convolution_is_outlined_with_its_padding():
    rng = np.random.default_rng(11)
    f = rng.standard_normal((4, 2, 3, 3), dtype=np.float32)
    source = CONV.format(filter=_nested(f))
    x = rng.standard_normal((1, 2, 5, 5), dtype=np.float32)
    module = outline(source, "conv")
    assert [a.shape for a in arguments(module, "site_conv")] == [(1, 2, 5, 5)]  # the input before its padding
    got = run_outlined(source, "conv", x)
    windows = np.lib.stride_tricks.sliding_window_view(np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1))), (3, 3), (2, 3))
    want = np.einsum("nchwij,fcij->nfhw", windows, f, dtype=np.float64).astype(np.float32)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def _nested(a: np.ndarray) -> str:
    """An MLIR dense literal of `a`: nested brackets, every float exactly (repr round-trips f32 via f64)."""
    if a.ndim == 0:
        return repr(float(a))
    return "[" + ", ".join(_nested(s) for s in a) + "]"


def test_the_outlined_module_travels_as_bytecode():
    """A copy parsed from bytecode outlines alike (what `compile_site` does with a caller's module)."""
    module = parse_module(transformer(), new_context())
    copy = parse_module(module_bytecode(module), new_context())
    run_pipeline(copy, "extract-site{site=layer0.ffn.down only=true}")
    assert list(functions(copy)) == ["site_layer0_ffn_down"] and list(functions(module)) == ["main"]
