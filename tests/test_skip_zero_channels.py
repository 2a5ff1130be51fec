"""skip-zero-channels against numpy and the dense op: bit-identical when the guard holds and when it fails.

The digits MLP takes its weights as arguments (so the weight rows are gathered on every call,
inside the guarded branch); the constant-weight module checks the slice IREE folds at compile
time. Bit-identity is the pass's promise on llvm-cpu (each output accumulates its K terms in
order, so dropping exact zeros changes no bit); numpy is the independent reference (rtol 1e-5).
"""

from __future__ import annotations

import numpy as np
import pytest
from linalg_cases import contraction

from opscope.errors import OpscopeError
from opscope.ir.loading import module_text, new_context, parse_module
from opscope.models import digits
from opscope.passes.skip_zero_channels import SkipZeroChannels, format_channels, parse_channels
from opscope.run.compile import compile_module
from opscope.run.runtime import load


def _rewritten(text: str, **options) -> str:
    ctx = new_context()
    module = parse_module(text, ctx, "m")
    with ctx:
        SkipZeroChannels(**options).apply(module)
        assert module.operation.verify()
        return module_text(module, debug_info=True)


def _bits(a: np.ndarray) -> bytes:
    return np.ascontiguousarray(a).tobytes()


@pytest.fixture(scope="module")
def digits_pair():
    trained = digits.train_digits()
    zero = np.flatnonzero(np.abs(trained.x_train).max(axis=0) == 0)
    assert len(zero) >= 2, "the digits' training images have always-zero border pixels"
    text = digits.digits_mlir(digits.BATCH)
    spec = _rewritten(text, sites="^fc1$", channels=format_channels(zero))
    return trained, zero, load(compile_module(text)), load(compile_module(spec))


def test_guard_holds_bit_identical_and_matches_numpy(digits_pair):
    trained, zero, dense, fast = digits_pair
    x = np.ascontiguousarray(trained.x_test[: digits.BATCH], dtype=np.float32)
    assert not x[:, zero].any()
    a = dense.invoke("main", x, *trained.weights)[0]
    b = fast.invoke("main", x, *trained.weights)[0]
    assert _bits(a) == _bits(b)
    np.testing.assert_allclose(b, digits.forward(x, trained.weights), rtol=1e-5, atol=1e-5)


def test_guard_fails_falls_back_bit_identical(digits_pair):
    trained, zero, dense, fast = digits_pair
    x = np.array(trained.x_test[: digits.BATCH], dtype=np.float32)
    x[3, zero[0]] = 0.75  # one skipped pixel lit in one image: the sliced product would be wrong
    a = dense.invoke("main", x, *trained.weights)[0]
    b = fast.invoke("main", x, *trained.weights)[0]
    assert _bits(a) == _bits(b)
    np.testing.assert_allclose(b, digits.forward(x, trained.weights), rtol=1e-5, atol=1e-5)
    x[3, zero[0]] = np.nan  # NaN fails the guard too (max |x| is NaN): the dense op propagates it
    a = dense.invoke("main", x, *trained.weights)[0]
    b = fast.invoke("main", x, *trained.weights)[0]
    assert np.isnan(b[3]).all() and _bits(a) == _bits(b)


MATMUL = """func.func @main(%x: tensor<16x40xf32>) -> tensor<16x24xf32> {{
  %w = arith.constant dense<{w}> : tensor<40x24xf32>
  %z = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<16x24xf32>
  %c = linalg.fill ins(%z : f32) outs(%e : tensor<16x24xf32>) -> tensor<16x24xf32>
  %0 = linalg.matmul ins(%x, %w : tensor<16x40xf32>, tensor<40x24xf32>) outs(%c : tensor<16x24xf32>)
         -> tensor<16x24xf32> loc("fc")
  return %0 : tensor<16x24xf32>
}}"""

BATCH_MATMUL = contraction("linalg.batch_matmul", ((2, 8, 12), (2, 12, 6), (2, 8, 6)), "pv")


def test_constant_weight_sliced_at_compile_time():
    rng = np.random.default_rng(0)
    w = rng.standard_normal((40, 24)).astype(np.float32)
    text = MATMUL.format(w=np.array2string(w, separator=",", threshold=10**6, floatmode="unique").replace("\n", ""))
    skip = [0, 1, 2, 17, 33, 39]
    dense, fast = load(compile_module(text)), load(compile_module(_rewritten(text, channels=format_channels(skip))))
    x = rng.standard_normal((16, 40)).astype(np.float32)
    x[:, skip] = 0.0
    a, b = dense.invoke("main", x)[0], fast.invoke("main", x)[0]
    assert _bits(a) == _bits(b)
    np.testing.assert_allclose(b, x.astype(np.float64) @ w, rtol=1e-5, atol=1e-5)
    x[5, 17] = -2.0  # guard fails
    a, b = dense.invoke("main", x)[0], fast.invoke("main", x)[0]
    assert _bits(a) == _bits(b)
    np.testing.assert_allclose(b, x.astype(np.float64) @ w, rtol=1e-5, atol=1e-5)


def test_batch_matmul_with_computed_rhs_padded_keys():
    """p·v of an attention: the padded key positions (K) of the probabilities are zero."""
    rng = np.random.default_rng(1)
    p = rng.random((2, 8, 12)).astype(np.float32)
    p[..., 9:] = 0.0  # three padded keys
    v = rng.standard_normal((2, 12, 6)).astype(np.float32)
    dense = load(compile_module(BATCH_MATMUL))
    fast = load(compile_module(_rewritten(BATCH_MATMUL, channels="9-11")))
    a, b = dense.invoke("main", p, v)[0], fast.invoke("main", p, v)[0]
    assert _bits(a) == _bits(b)
    np.testing.assert_allclose(b, np.matmul(p.astype(np.float64), v), rtol=1e-5, atol=1e-6)


def test_every_channel_skipped_yields_the_init():
    fast = load(compile_module(_rewritten(BATCH_MATMUL, channels="0-11")))
    v = np.ones((2, 12, 6), np.float32)
    assert not fast.invoke("main", np.zeros((2, 8, 12), np.float32), v)[0].any()
    p = np.zeros((2, 8, 12), np.float32)
    p[1, 2, 4] = 1.0  # guard fails: the dense op
    np.testing.assert_array_equal(fast.invoke("main", p, v)[0], np.matmul(p, v))


ARGUMENT_WEIGHT = contraction("linalg.matmul", ((4, 8), (8, 3), (4, 3)), "fc1")
SKIP, KEPT = [0, 5, 6, 7], [1, 2, 3, 4]


def _argument_weight_case(seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    return rng.standard_normal((4, 8)).astype(np.float32), rng.standard_normal((8, 3)).astype(np.float32)


def test_guard_false_runs_the_sliced_product_even_when_the_skipped_channels_are_not_zero():
    """guard=false promises nothing about the input: on one whose skipped columns are lit, the output is
    the product over the kept channels only (numpy, float64, rtol 1e-5), not the dense product (which
    differs from it by far more): the branch that ran is the sliced one."""
    x, w = _argument_weight_case(3)
    assert np.abs(x[:, SKIP]).min() > 0  # the guard would fail on every row
    fast = load(compile_module(_rewritten(ARGUMENT_WEIGHT, channels="0,5-7", guard=False)))
    got = fast.invoke("main", x, w)[0]
    sliced = x[:, KEPT].astype(np.float64) @ w[KEPT].astype(np.float64)
    dense = x.astype(np.float64) @ w
    np.testing.assert_allclose(got, sliced, rtol=1e-5, atol=1e-6)
    assert np.abs(got - dense).max() > 0.1 * np.abs(dense).max()


def test_guard_holds_takes_the_sliced_branch():
    """With the guard on and the skipped columns zero, the weight's skipped rows hold inf: the dense op
    computes 0·inf = NaN there, the sliced op never reads them. A finite output equal to the kept
    channels' product shows the fast branch ran; lighting one skipped pixel sends the same weights
    down the dense branch (every output NaN: each row meets a 0·inf, as in numpy's dense product)."""
    x, w = _argument_weight_case(4)
    x[:, SKIP] = 0.0
    x[1, 5] = -0.0  # ±0 both pass the guard
    w[SKIP] = np.inf
    fast = load(compile_module(_rewritten(ARGUMENT_WEIGHT, channels="0,5-7")))
    got = fast.invoke("main", x, w)[0]
    with np.errstate(invalid="ignore"):
        assert np.isnan(x.astype(np.float64) @ w).all()  # what the dense op would return
    np.testing.assert_allclose(got, x[:, KEPT].astype(np.float64) @ w[KEPT].astype(np.float64), rtol=1e-5, atol=1e-6)
    x[2, 6] = 0.5  # guard fails: the dense op, its inf rows included
    got = fast.invoke("main", x, w)[0]
    with np.errstate(invalid="ignore"):
        want = x.astype(np.float64) @ w.astype(np.float64)
    assert np.isnan(want).all() and np.isnan(got).all()


def test_channels_text_round_trips():
    assert parse_channels("skip-zero-channels", "0,7-9, 56,8") == (0, 7, 8, 9, 56)
    assert format_channels([0, 8, 7, 9, 56, 3, 4]) == "0,3,4,7-9,56"
    assert parse_channels("p", format_channels(range(0, 64, 8))) == tuple(range(0, 64, 8))


@pytest.mark.parametrize(
    "text,needle",
    [
        ("", "option 'channels' is empty"),
        ("1,x", "got 'x'"),
        ("4-2", "'4-2' is not an index"),
        ("3,12", "channel 12 is past its K = 12"),
    ],
)
def test_bad_channels_are_one_line_errors(text, needle):
    with pytest.raises(OpscopeError, match=needle) as e:
        _rewritten(BATCH_MATMUL, channels=text)
    assert "\n" not in str(e.value)


def test_vulkan_guard_holds_and_fails_bit_identical(vulkan):
    """On vulkan-spirv (lavapipe here) too: the sliced p·v equals the dense one bit for bit."""
    rng = np.random.default_rng(2)
    p = rng.random((2, 8, 12)).astype(np.float32)
    p[..., 9:] = 0.0
    v = rng.standard_normal((2, 12, 6)).astype(np.float32)
    dense = load(compile_module(BATCH_MATMUL, vulkan))
    fast = load(compile_module(_rewritten(BATCH_MATMUL, channels="9-11"), vulkan))
    assert _bits(dense.invoke("main", p, v)[0]) == _bits(fast.invoke("main", p, v)[0])
    p[1, 3, 10] = 0.5  # guard fails: the dense op
    assert _bits(dense.invoke("main", p, v)[0]) == _bits(fast.invoke("main", p, v)[0])


I8_MATMUL = """func.func @main(%a: tensor<32x128xi8>, %b: tensor<128x64xi8>) -> tensor<32x64xi32> {
  %z = arith.constant 0 : i32
  %e = tensor.empty() : tensor<32x64xi32>
  %c = linalg.fill ins(%z : i32) outs(%e : tensor<32x64xi32>) -> tensor<32x64xi32>
  %0 = linalg.matmul ins(%a, %b : tensor<32x128xi8>, tensor<128x64xi8>) outs(%c : tensor<32x64xi32>)
         -> tensor<32x64xi32>
  return %0 : tensor<32x64xi32>
}"""


def _i8_case():
    rng = np.random.default_rng(0)
    a = rng.integers(-127, 128, (32, 128)).astype(np.int8)
    b = rng.integers(-127, 128, (128, 64)).astype(np.int8)
    return a, b, a.astype(np.int64) @ b.astype(np.int64)


def test_i8_matmul_on_cpu_is_exact():
    """The control for the xfail below (quantize-weight's W8A8 contraction is this op)."""
    a, b, want = _i8_case()
    np.testing.assert_array_equal(load(compile_module(I8_MATMUL)).invoke("main", a, b)[0], want)


@pytest.mark.xfail(
    strict=True,
    raises=AssertionError,
    reason="IREE 3.13 vulkan-spirv (lavapipe): a bare i8 x i8 -> i32 linalg.matmul is wrong "
    "(max error ~2.8e6), so W8A8 and int4 weights are wrong there",
)
def test_vulkan_i8_matmul_is_exact(vulkan):
    a, b, want = _i8_case()
    np.testing.assert_array_equal(load(compile_module(I8_MATMUL, vulkan)).invoke("main", a, b)[0], want)
