"""Weights of a module (`opscope.ir.weights`): read exactly, in [out, K] orientation, and replaced.

Every way a weight is stored (`arith.constant dense<…>` and `dense_resource<…>`, an
immutable `util.global` holding either, a function argument) in f32, f16 and bf16 is read
back equal to the numpy array written into the MLIR, bit for bit. After `replace_weights`
the module, compiled for llvm-cpu, computes x @ W_new (tolerance 1e-5 of the output's scale:
f32 sums of at most 16 products), the readers that are not sites (a tied embedding's gather)
still read the old tensor, and a re-read returns the new values in the weight's element type
(bf16: rounded to nearest even, as ml_dtypes rounds).
"""

from __future__ import annotations

import logging

import ml_dtypes
import numpy as np
import pytest
from linalg_cases import conv

from opscope.errors import OpscopeError
from opscope.ir.loading import module_text, new_context, parse_module
from opscope.ir.weights import Weight, read_weights, replace_weights
from opscope.models.demo import mlp_module, random_inputs, transformer_module
from opscope.run.compile import compile_module
from opscope.run.runtime import load

F32 = np.float32
RTOL = 1e-5


def run(module, *inputs) -> list[np.ndarray]:
    return load(compile_module(module, "llvm-cpu")).invoke("main", *inputs)


def close(got: np.ndarray, want: np.ndarray) -> bool:
    return float(np.abs(got - want).max()) <= RTOL * float(np.abs(want).max())


def tensor_type(shape, elem: str) -> str:
    return "tensor<" + "".join(f"{d}x" for d in shape) + elem + ">"


def bits(a: np.ndarray, elem: str) -> bytes:
    """The little-endian elements of `a` stored as `elem` (bf16 through ml_dtypes: exact for bf16 values)."""
    return a.astype({"f32": "<f4", "f16": "<f2", "bf16": ml_dtypes.bfloat16}[elem]).tobytes()


def dense_hex(a: np.ndarray, elem: str) -> str:
    return f'dense<"0x{bits(a, elem).hex().upper()}"> : {tensor_type(a.shape, elem)}'


def dense_decimal(a: np.ndarray, elem: str) -> str:
    """Numbers as decimals; inf and NaN as their hex bits (MLIR has no literal for them)."""

    def literal(v) -> str:
        return f"{float(v):.9e}" if np.isfinite(v) else "0x" + bits(np.array([v]), elem)[::-1].hex().upper()

    rows = ", ".join("[" + ", ".join(literal(v) for v in row) + "]" for row in a)
    return f"dense<[{rows}]> : {tensor_type(a.shape, elem)}"


def resources(blobs: dict[str, tuple[np.ndarray, str]]) -> str:
    """The `dialect_resources` section: each blob a u32 LE alignment, then the raw elements."""
    lines = ",\n".join(
        f'      {name}: "0x{4 if elem == "f32" else 2:02x}000000{bits(a, elem).hex()}"'
        for name, (a, elem) in blobs.items()
    )
    return f"\n{{-#\n  dialect_resources: {{\n    builtin: {{\n{lines}\n    }}\n  }}\n#-}}\n"


def matmul(name: str, lhs: str, lhs_shape, rhs: str, rhs_shape, elem: str = "f32", transpose_b: bool = False) -> str:
    """`%<name>_out = lhs @ rhs` (f32 result), with `transpose_b` as matmul indexing maps; site `name`."""
    m = lhs_shape[0]
    n = rhs_shape[0] if transpose_b else rhs_shape[1]
    maps = (
        (
            "indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d2)>, affine_map<(d0, d1, d2) -> (d1, d2)>, "
            "affine_map<(d0, d1, d2) -> (d0, d1)>] "
        )
        if transpose_b
        else ""
    )
    out = tensor_type((m, n), "f32")
    return (
        f"  %{name}_e = tensor.empty() : {out}\n"
        f"  %{name}_z = linalg.fill ins(%zero : f32) outs(%{name}_e : {out}) -> {out}\n"
        f"  %{name}_out = linalg.matmul {maps}ins({lhs}, {rhs} : {tensor_type(lhs_shape, elem)}, "
        f'{tensor_type(rhs_shape, elem)}) outs(%{name}_z : {out}) -> {out} loc("{name}")\n'
    )


rng = np.random.default_rng(0)
X = rng.standard_normal((4, 8)).astype(F32)
IDS = np.array([3, 0, 9, 3], np.int64)
W = {  # stored arrays, by site name
    "dense": rng.standard_normal((8, 6)).astype(F32),
    "resource": rng.standard_normal((8, 6)).astype(F32),
    "global_dense": rng.standard_normal((8, 6)).astype(F32),
    "global_resource": rng.standard_normal((8, 6)).astype(F32),
    "transposed": rng.standard_normal((6, 8)).astype(F32),  # a Linear's [N, K], through linalg.transpose
    "matmul_tb": rng.standard_normal((6, 8)).astype(F32),  # [N, K], read by transpose_b indexing maps
    "head_a": rng.standard_normal((10, 8)).astype(F32),  # a tied embedding [vocab, d]: gather + two heads
}
W["dense"][0, :3] = [-0.0, 1e-45, 3.4028235e38]  # bit patterns a decimal round trip could lose
STORED = {
    "dense": "constant",
    "resource": "resource",
    "global_dense": "global",
    "global_resource": "global",
    "transposed": "constant",
    "matmul_tb": "constant",
    "head_a": "global",
}
NAMES = list(W)
RESULTS = NAMES + ["head_b", "gathered"]

F32_SOURCE = f"""module {{
util.global private @g_dense = {dense_hex(W["global_dense"], "f32")}
util.global private @g_resource = dense_resource<blob_global> : tensor<8x6xf32>
util.global private @embedding = {dense_hex(W["head_a"], "f32")}
func.func @main(%x: tensor<4x8xf32>, %ids: tensor<4xi64>) -> ({", ".join(["tensor<4x6xf32>"] * 6)},
    tensor<4x10xf32>, tensor<4x10xf32>, tensor<4x8xf32>) {{
  %zero = arith.constant 0.0 : f32
  %w_dense = arith.constant {dense_hex(W["dense"], "f32")}
  %w_resource = arith.constant dense_resource<blob_const> : tensor<8x6xf32>
  %w_gd = util.global.load @g_dense : tensor<8x6xf32>
  %w_gr = util.global.load @g_resource : tensor<8x6xf32>
  %w_nk = arith.constant {dense_decimal(W["transposed"], "f32")}
  %w_tb = arith.constant {dense_hex(W["matmul_tb"], "f32")}
  %emb = util.global.load @embedding : tensor<10x8xf32>
  %t_e = tensor.empty() : tensor<8x6xf32>
  %w_t = linalg.transpose ins(%w_nk : tensor<6x8xf32>) outs(%t_e : tensor<8x6xf32>) permutation = [1, 0]
  %et_e = tensor.empty() : tensor<8x10xf32>
  %emb_t = linalg.transpose ins(%emb : tensor<10x8xf32>) outs(%et_e : tensor<8x10xf32>) permutation = [1, 0]
  %g_e = tensor.empty() : tensor<4x8xf32>
  %gathered = linalg.generic {{indexing_maps = [affine_map<(d0, d1) -> (d0)>, affine_map<(d0, d1) -> (d0, d1)>],
      iterator_types = ["parallel", "parallel"]}} ins(%ids : tensor<4xi64>) outs(%g_e : tensor<4x8xf32>) {{
  ^bb0(%id: i64, %out: f32):
    %row = arith.index_cast %id : i64 to index
    %col = linalg.index 1 : index
    %v = tensor.extract %emb[%row, %col] : tensor<10x8xf32>
    linalg.yield %v : f32
  }} -> tensor<4x8xf32> loc("embed")
{matmul("dense", "%x", (4, 8), "%w_dense", (8, 6))}\
{matmul("resource", "%x", (4, 8), "%w_resource", (8, 6))}\
{matmul("global_dense", "%x", (4, 8), "%w_gd", (8, 6))}\
{matmul("global_resource", "%x", (4, 8), "%w_gr", (8, 6))}\
{matmul("transposed", "%x", (4, 8), "%w_t", (8, 6))}\
{matmul("matmul_tb", "%x", (4, 8), "%w_tb", (6, 8), transpose_b=True)}\
{matmul("head_a", "%x", (4, 8), "%emb_t", (8, 10))}\
{matmul("head_b", "%gathered", (4, 8), "%emb_t", (8, 10))}\
  return {", ".join(f"%{n}_out" for n in RESULTS[:-1])}, %gathered : {", ".join(["tensor<4x6xf32>"] * 6)},
      tensor<4x10xf32>, tensor<4x10xf32>, tensor<4x8xf32>
}}
}}
""" + resources({"blob_const": (W["resource"], "f32"), "blob_global": (W["global_resource"], "f32")})


def as_x_at_w(name: str, w: np.ndarray) -> np.ndarray:
    """The [K, N] matrix the site multiplies by, from the stored array."""
    return w.T if name in ("transposed", "matmul_tb", "head_a") else w


def numpy_outputs(weights: dict[str, np.ndarray]) -> list[np.ndarray]:
    """What the module returns with `weights` at its sites; its gather always reads the original table."""
    gathered = W["head_a"][IDS]
    outs = [X @ as_x_at_w(n, weights[n]) for n in NAMES]
    return outs + [gathered @ weights["head_a"].T, gathered]


def f32_module():
    return parse_module(F32_SOURCE, new_context(), "weights.mlir")


@pytest.fixture(scope="module")
def f32_weights() -> dict[str, Weight]:
    return {w.name: w for w in read_weights(f32_module())}


def test_every_stored_form_reads_back_exactly(f32_weights):
    assert list(f32_weights) == NAMES
    for name, w in f32_weights.items():
        assert w.values.dtype == F32 and w.values.tobytes() == W[name].tobytes(), name
        assert (w.shape, w.element_type, w.source) == (W[name].shape, "f32", STORED[name]), name
    assert f32_weights["head_a"].sites == ("head_a", "head_b")  # one tensor, read by two sites
    assert all(w.sites == (w.name,) for n, w in f32_weights.items() if n != "head_a")


def test_matrix_is_out_by_k(f32_weights):
    """x[M,K] @ W[K,N] gives Wᵀ; a stored [N, K] (transposed, transpose_b, the tied head) gives itself."""
    for name, w in f32_weights.items():
        assert w.k_dims == ((1,) if name in ("transposed", "matmul_tb", "head_a") else (0,)), name
        assert np.array_equal(w.matrix(), as_x_at_w(name, W[name]).T), name
        assert np.array_equal(w.from_matrix(w.matrix()), W[name]), name


def test_the_written_module_runs_as_numpy_says():
    for got, want in zip(run(f32_module(), X, IDS), numpy_outputs(W)):
        assert close(got, want)


def test_replaced_weights_are_what_the_module_computes_with(f32_weights):
    module = f32_module()
    new = {n: np.random.default_rng(i + 7).standard_normal(W[n].shape).astype(F32) for i, n in enumerate(NAMES)}
    replace_weights(module, {n: as_x_at_w(n, new[n]).T for n in NAMES})  # [out, K] = (the [K, N] read)ᵀ
    assert module.operation.verify()
    outs = run(module, X, IDS)
    want = numpy_outputs(new)
    for name, got, expect in zip(RESULTS[:-1], outs, want):
        assert close(got, expect), name
    assert np.array_equal(outs[-1], W["head_a"][IDS])  # the gather still reads the old embedding
    again = {w.name: w for w in read_weights(module)}
    assert list(again) == NAMES
    for name in NAMES:
        assert np.array_equal(again[name].values, new[name]) and again[name].source == "resource", name
    assert "linalg.transpose ins(%emb " not in module_text(module)  # the original copy, left unread, is gone


def test_replacing_one_weight_leaves_the_others(f32_weights):
    module = f32_module()
    new_head = np.random.default_rng(3).standard_normal((10, 8)).astype(F32)
    replace_weights(module, {"head_a": new_head})  # the tied embedding, as [vocab, d] = [out, K]
    outs = run(module, X, IDS)
    for name, got, expect in zip(RESULTS[:6], outs, numpy_outputs(W)):
        assert close(got, expect), name
    gathered = W["head_a"][IDS]  # the gather is no site: it keeps the old table
    assert np.array_equal(outs[-1], gathered)
    assert close(outs[6], X @ new_head.T) and close(outs[7], gathered @ new_head.T)
    given = new_head.copy()
    new_head[:] = 0  # the module holds its own copy of what it was given ([out, K] here is the stored layout)
    kept = {w.name: w for w in read_weights(module)}
    assert np.array_equal(kept["head_a"].values, given) and kept["head_a"].sites == ("head_a", "head_b")
    assert np.array_equal(kept["dense"].values, W["dense"]) and kept["dense"].source == "constant"


def test_unknown_names_and_wrong_shapes_are_refused_before_any_change(f32_weights):
    module = f32_module()
    before = module_text(module)
    with pytest.raises(OpscopeError) as e:
        replace_weights(module, {"dense": f32_weights["dense"].matrix(), "fc9": np.zeros((2, 2), F32)})
    message = str(e.value)
    assert "\n" not in message and "'fc9'" in message and "dense, resource, global_dense" in message
    with pytest.raises(OpscopeError) as e:
        replace_weights(module, {"dense": np.zeros((6, 6), F32), "transposed": W["transposed"]})
    assert str(e.value) == (
        "weight 'dense': a replacement must be its [out, K] matrix of shape 6×8 (stored 8×6, K dims [0]), got 6×6"
    )
    assert module_text(module) == before


# -- half precision -----------------------------------------------------------------------------

H = {  # stored values (exactly representable in their type), by site name
    "bf16_dense": rng.standard_normal((8, 6)).astype(ml_dtypes.bfloat16),  # 48 elements: printed as decimals
    "bf16_wide": rng.standard_normal((8, 16)).astype(ml_dtypes.bfloat16),  # 128 elements: printed as hex
    "bf16_global": rng.standard_normal((8, 6)).astype(ml_dtypes.bfloat16),
    "f16_dense": rng.standard_normal((8, 6)).astype(np.float16),
    "f16_resource": rng.standard_normal((8, 6)).astype(np.float16),
}
H["bf16_dense"][0, :2] = [np.inf, -0.0]
ELEM = {n: "bf16" if n.startswith("bf16") else "f16" for n in H}
XB = rng.standard_normal((4, 8)).astype(ml_dtypes.bfloat16)
XH = rng.standard_normal((4, 8)).astype(np.float16)
HALF_RESULTS = ", ".join(tensor_type((4, H[n].shape[1]), "f32") for n in H)

HALF_SOURCE = f"""module {{
util.global private @g_bf16 = dense_resource<blob_bf16> : tensor<8x6xbf16>
func.func @main(%xb: tensor<4x8xbf16>, %xh: tensor<4x8xf16>) -> ({HALF_RESULTS}) {{
  %zero = arith.constant 0.0 : f32
  %w1 = arith.constant {dense_decimal(H["bf16_dense"].astype(F32), "bf16")}
  %w2 = arith.constant {dense_hex(H["bf16_wide"].astype(F32), "bf16")}
  %w3 = util.global.load @g_bf16 : tensor<8x6xbf16>
  %w4 = arith.constant {dense_hex(H["f16_dense"].astype(F32), "f16")}
  %w5 = arith.constant dense_resource<blob_f16> : tensor<8x6xf16>
{matmul("bf16_dense", "%xb", (4, 8), "%w1", (8, 6), "bf16")}\
{matmul("bf16_wide", "%xb", (4, 8), "%w2", (8, 16), "bf16")}\
{matmul("bf16_global", "%xb", (4, 8), "%w3", (8, 6), "bf16")}\
{matmul("f16_dense", "%xh", (4, 8), "%w4", (8, 6), "f16")}\
{matmul("f16_resource", "%xh", (4, 8), "%w5", (8, 6), "f16")}\
  return %bf16_dense_out, %bf16_wide_out, %bf16_global_out, %f16_dense_out, %f16_resource_out : {HALF_RESULTS}
}}
}}
""" + resources(
    {"blob_bf16": (H["bf16_global"].astype(F32), "bf16"), "blob_f16": (H["f16_resource"].astype(F32), "f16")}
)


def test_half_precision_weights_read_exactly_and_round_to_nearest_even():
    module = parse_module(HALF_SOURCE, new_context(), "half.mlir")
    read = {w.name: w for w in read_weights(module)}
    assert list(read) == list(H)
    for name, w in read.items():
        assert w.element_type == ELEM[name] and w.values.dtype == F32, name
        assert w.values.tobytes() == H[name].astype(F32).tobytes(), name  # inf and -0.0 included
    assert read["bf16_global"].source == "global" and read["f16_resource"].source == "resource"

    new = {n: np.random.default_rng(i + 20).standard_normal(H[n].shape).astype(F32) for i, n in enumerate(H)}
    ties = np.array([1 + 2**-8, 1 + 3 * 2**-8, -(1 + 2**-8), 3.4028235e38, 1 + 2**-8 + 2**-20, np.nan], F32)
    new["bf16_dense"][1, :6] = ties  # halfway goes to even, past half rounds up, f32's max to inf, NaN stays NaN
    replace_weights(module, {n: new[n].T for n in H})  # x @ W: the [out, K] matrix is Wᵀ
    stored = {n: new[n].astype(ml_dtypes.bfloat16 if ELEM[n] == "bf16" else np.float16).astype(F32) for n in H}
    again = {w.name: w for w in read_weights(module)}
    for name in H:
        assert np.array_equal(again[name].values, stored[name], equal_nan=True), name
    assert list(again["bf16_dense"].values[1, :5]) == [1.0, 1 + 2**-6, -1.0, np.inf, 1 + 2**-7]

    stored["bf16_dense"][1, [3, 5]] = 0.0  # inf and NaN would spread over their columns
    replace_weights(module, {"bf16_dense": stored["bf16_dense"].T})
    outs = run(module, XB, XH)
    xb, xh = XB.astype(F32), XH.astype(F32)
    for got, name in zip(outs, H):
        want = (xb if ELEM[name] == "bf16" else xh) @ stored[name]
        assert close(got, want), name


def test_half_precision_weights_are_profiled_at_two_bytes_a_value():
    from opscope.probe.report import profile_weights
    from opscope.probe.sources import module_weights

    ws = module_weights("half", HALF_SOURCE, sites="wide|global|^f16")  # bf16_dense holds an inf: left out
    assert sorted(ws.value_bytes) == ["bf16_global", "bf16_wide", "f16_dense", "f16_resource"]
    assert set(ws.value_bytes.values()) == {2}
    profiles, _ = profile_weights(ws)
    assert all(p.dense_bytes == 2 * p.rows * p.cols for p in profiles)


# -- arguments, demo models, convolutions ---------------------------------------------------------


def test_argument_weights_come_from_the_inputs(caplog):
    module = parse_module(mlp_module(2, 8, 4), new_context())
    inputs = random_inputs([(4, 8), (8, 8), (8, 8)], seed=5)
    with caplog.at_level(logging.INFO, logger="opscope"):
        assert read_weights(module) == []
    assert "function argument" in caplog.text
    read = read_weights(module, inputs=inputs)
    assert [(w.name, w.source, w.k_dims) for w in read] == [("fc0", "argument", (0,)), ("fc1", "argument", (0,))]
    for w, x in zip(read, inputs[1:]):
        assert np.array_equal(w.values, x) and np.array_equal(w.matrix(), x.T)
    with pytest.raises(OpscopeError, match="argument #2 .* 2 inputs were given"):
        read_weights(module, inputs=inputs[:2])
    new = np.random.default_rng(6).standard_normal((8, 8)).astype(F32)
    replace_weights(module, {"fc1": new})
    (out,) = run(module, *inputs)  # the function still takes w1, and ignores it
    assert close(out, np.maximum(inputs[0] @ inputs[1], 0) @ new.T)


def test_demo_transformer_globals_skip_computed_operands():
    module = parse_module(transformer_module(1, 8, 4, weights="globals"), new_context())
    read = read_weights(module)
    names = ["layer0.attn.q", "layer0.attn.k", "layer0.attn.v", "layer0.attn.o", "layer0.ffn.up", "layer0.ffn.down"]
    assert [w.name for w in read] == names  # q·kᵀ and p·v read computed tensors: no weight
    shapes = [(4, 8), (8, 8), (8, 8), (8, 8), (8, 8), (8, 32), (32, 8)]
    for w, x in zip(read, random_inputs(shapes)[1:]):
        assert w.source == "global" and np.array_equal(w.values, x) and np.array_equal(w.matrix(), x.T)
    assert [w.name for w in read_weights(module, sites=r"ffn\.")] == names[-2:]


def test_convolution_filter_is_output_channels_by_window_and_input_channels():
    filt = rng.standard_normal((3, 3, 2, 4)).astype(F32)  # HWCF
    source = f"""
func.func @main(%x: tensor<1x6x6x2xf32>) -> tensor<1x4x4x4xf32> {{
  %zero = arith.constant 0.0 : f32
  %f = arith.constant {dense_hex(filt, "f32")}
  {conv("%y", "conv_2d_nhwc_hwcf", "%x", "%f", ((1, 6, 6, 2), (3, 3, 2, 4), (1, 4, 4, 4)), "conv")}
  return %y : tensor<1x4x4x4xf32>
}}
"""
    module = parse_module(source, new_context())
    (w,) = read_weights(module)
    assert (w.name, w.k_dims, w.shape) == ("conv", (0, 1, 2), (3, 3, 2, 4))
    assert np.array_equal(w.matrix(), filt.transpose(3, 0, 1, 2).reshape(4, 18))
    replace_weights(module, {"conv": 2 * w.matrix()})
    assert np.array_equal(read_weights(module)[0].values, 2 * filt)


def test_a_weight_broadcast_over_merged_batch_dims_is_read_and_counted_once():
    """Issue 31: a Linear applied to a 4-D NHWC activation (ConvNeXt's pointwise convs) is imported
    as a batch_matmul whose rhs is the weight broadcast over [B, H] and the two dims merged
    (`collapse_shape`); a depthwise conv's filter is a collapse of [C, 1, kh, kw]. The weight is
    the stored tensor: read once with torch's values, counted at its own bytes (it was counted
    once per batch element, 3.5x ConvNeXt's bytes, and `read_weights` skipped 6 of 8)."""
    torch = pytest.importorskip("torch")
    from opscope.act.weights import weight_bytes
    from opscope.importers.torch_fx import import_torch

    class Block(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.dwconv = torch.nn.Conv2d(8, 8, 7, padding=3, groups=8)
            self.pw1, self.pw2 = torch.nn.Linear(8, 32), torch.nn.Linear(32, 8)

        def forward(self, x):
            y = self.dwconv(x).permute(0, 2, 3, 1)
            return x + self.pw2(torch.nn.functional.gelu(self.pw1(y))).permute(0, 3, 1, 2)

    torch.manual_seed(0)
    block = Block().eval()
    module = import_torch(block, (torch.randn(2, 8, 6, 6),))
    params = {n.removesuffix(".weight"): p.detach().numpy() for n, p in block.named_parameters() if p.dim() >= 2}
    weights = {w.name.removeprefix("m."): w for w in read_weights(module)}
    assert weights.keys() == params.keys()
    for name, w in weights.items():
        np.testing.assert_array_equal(w.values.reshape(params[name].shape), params[name], err_msg=name)
    assert weight_bytes(module) == sum(p.nbytes for p in params.values())


def test_a_weight_on_the_lhs_is_read_and_replaced_there():
    """W @ x (JAX's `jnp.dot(W, x)`; x the input): W is the weight, read as [out, K] = W itself, and
    a replacement is what the module multiplies x by; x is no weight."""
    rng = np.random.default_rng(5)
    w, x = rng.standard_normal((4, 8)).astype(F32), rng.standard_normal((8, 3)).astype(F32)
    text = f"""func.func @main(%x: tensor<8x3xf32>) -> tensor<4x3xf32> {{
      %w = arith.constant {dense_hex(w, "f32")}
      %z = arith.constant 0.0 : f32
      %e = tensor.empty() : tensor<4x3xf32>
      %c = linalg.fill ins(%z : f32) outs(%e : tensor<4x3xf32>) -> tensor<4x3xf32>
      %y = linalg.matmul ins(%w, %x : tensor<4x8xf32>, tensor<8x3xf32>) outs(%c : tensor<4x3xf32>) -> tensor<4x3xf32> loc("fc")
      return %y : tensor<4x3xf32>
    }}"""
    module = parse_module(text, new_context())
    (got,) = read_weights(module, inputs=[x])  # the input is offered: it is still not read as a weight
    assert (got.name, got.k_dims, got.source) == ("fc", (1,), "constant")
    assert np.array_equal(got.matrix(), w)
    new = rng.standard_normal((4, 8)).astype(F32)
    replace_weights(module, {"fc": new})
    assert close(run(module, x)[0], new @ x)
