"""`quantize-weight` through IREE llvm-cpu: real int8/int4 weights, against numpy.

One module holds a site per variant (W8A16 on a transposed Linear weight with an all-zero
channel, W4A16, W4A16 with groups of 16, W8A8, W8A16 on a 3-D Linear's batch_matmul, and
the same weight as W8A16 through `fakequant-weights`), compiled once. References:

* W8A16 / W4A16: x @ Wqᵀ in float64, Wq the fake-quant round trip in float32
  (`fakequant-weights`' op order); held to 1e-5 of the output's scale (measured 1–3e-7).
* W8A16 against `fakequant-weights` on the same weight, in the same build: the codes are
  the same; fakequant sums x·((codes/qmax)·amax), the pass sums x·codes and scales the sum
  once, (Σ x·codes)·(amax/qmax) (the scale factored out of K), so the two differ by the
  rounding of the dequantized weights (an ulp each) and of the sums' order: 2e-6 of the
  scale (measured 3e-7).
* W8A8: the activation's per-row codes and the weight's codes multiplied in int64 (exact,
  as the device's i32 accumulation is), then scaled back in float32 in the pass's order:
  float rounding of the final scaling only.

The storage test compiles a 256×512 weight with plain `iree-compile` flags and checks the
.vmfb shrinks and no f32 copy of the weight comes back after IREE's const-eval.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
from errors import one_line

from opscope.errors import OpscopeError
from opscope.ir.fakequant import quantize
from opscope.ir.loading import module_text, new_context, parse_module
from opscope.ir.smoothing import smoothing_factors
from opscope.passes.quantize_weight import QuantizeWeight
from opscope.pipeline.textual import parse_pipeline, run_pipeline

WEIGHT_ON_LHS = Path(__file__).resolve().parents[1] / "lit_tests" / "passes" / "cases" / "weight-on-lhs.mlir"

F32 = np.float32
M, K, N = 6, 64, 24
rng = np.random.default_rng(7)
W8, W4, WG, WA, WB, WF = (rng.standard_normal((N, K)).astype(F32) for _ in range(6))
W8[5] = 0.0  # an all-zero output channel: zero codes, scale 0, exact zeros out
WF[:] = W8
X = rng.standard_normal((M, K)).astype(F32)
XB = rng.standard_normal((2, M, K)).astype(F32)
WS, WS2, WT, WW = (rng.standard_normal((N, K)).astype(F32) for _ in range(4))
XO = rng.standard_normal((M, K)).astype(F32)
XO[:, [3, 17, 40]] *= 60  # outlier channels, as LLM activations have (SmoothQuant's case)
CALIBRATION = {n: np.abs(XO).max(axis=0) for n in ("sm", "sm2", "sw")}
CALIBRATION["st"] = np.abs(XO).max(axis=0) * F32(0.8)  # held-out values beyond the calibration: codes clamp
PLAIN = ("--iree-hal-target-device=local", "--iree-hal-local-target-device-backends=llvm-cpu")


def fq_codes(w: np.ndarray, axis, bits: int) -> tuple[np.ndarray, np.ndarray]:
    """(codes, amax with axis kept) of the fake-quant round trip, in its float32 op order."""
    q = F32(2 ** (bits - 1) - 1)
    amax = np.abs(w).max(axis=axis, keepdims=True).astype(F32)
    with np.errstate(divide="ignore"):
        inv = np.where(amax > F32(1e-20), F32(1) / amax, F32(0)).astype(F32)
    t = ((w * inv).astype(F32) * q).astype(F32).astype(np.float64)
    return np.clip(np.sign(t) * np.floor(np.abs(t) + 0.5), -q, q), amax


def fq_weight(w: np.ndarray, axis, bits: int) -> np.ndarray:
    """The round trip fakequant-weights computes: (codes·(1/qmax))·amax in float32."""
    codes, amax = fq_codes(w, axis, bits)
    return ((codes.astype(F32) * F32(1 / (2 ** (bits - 1) - 1))).astype(F32) * amax).astype(F32)


def resource(name: str, w: np.ndarray) -> str:
    return f'{name}: "0x04000000{w.astype("<f4").tobytes().hex().upper()}"'


def linear(name: str, weight: str, x: str = "%x") -> str:
    """A 2-D Linear as the torch importer emits it: matmul(x, transpose(W))."""
    return f"""
  %{name}_t = linalg.transpose ins(%{weight} : tensor<{N}x{K}xf32>) outs(%et : tensor<{K}x{N}xf32>) permutation = [1, 0]
  %{name} = linalg.matmul ins({x}, %{name}_t : tensor<{M}x{K}xf32>, tensor<{K}x{N}xf32>)
      outs(%init : tensor<{M}x{N}xf32>) -> tensor<{M}x{N}xf32> loc("{name}")"""


OUT = f"tensor<{M}x{N}xf32>"
WEIGHTS = {"w8": W8, "w4": W4, "wg": WG, "wa": WA, "wf": WF, "wb": WB, "ws": WS, "ws2": WS2, "wt": WT, "ww": WW}
SOURCE = f"""
module {{
func.func @main(%x: tensor<{M}x{K}xf32>, %xb: tensor<2x{M}x{K}xf32>, %xo: tensor<{M}x{K}xf32>)
    -> ({OUT}, {OUT}, {OUT}, {OUT}, tensor<2x{M}x{N}xf32>, {OUT}, {OUT}, {OUT}, {OUT}, {OUT}) {{
  %zero = arith.constant 0.0 : f32
  %w8 = arith.constant dense_resource<w8> : tensor<{N}x{K}xf32>
  %w4 = arith.constant dense_resource<w4> : tensor<{N}x{K}xf32>
  %wg = arith.constant dense_resource<wg> : tensor<{N}x{K}xf32>
  %wa = arith.constant dense_resource<wa> : tensor<{N}x{K}xf32>
  %wf = arith.constant dense_resource<wf> : tensor<{N}x{K}xf32>
  %wb = util.global.load @wb : tensor<{N}x{K}xf32>
  %ws = arith.constant dense_resource<ws> : tensor<{N}x{K}xf32>
  %ws2 = arith.constant dense_resource<ws2> : tensor<{N}x{K}xf32>
  %wt = arith.constant dense_resource<wt> : tensor<{N}x{K}xf32>
  %ww = arith.constant dense_resource<ww> : tensor<{N}x{K}xf32>
  %et = tensor.empty() : tensor<{K}x{N}xf32>
  %e = tensor.empty() : {OUT}
  %init = linalg.fill ins(%zero : f32) outs(%e : {OUT}) -> {OUT}
  {linear("w8s", "w8")}
  {linear("w4s", "w4")}
  {linear("grp", "wg")}
  {linear("a8", "wa")}
  {linear("fq", "wf")}
  {linear("sm", "ws", "%xo")}
  {linear("sm2", "ws2", "%xo")}
  {linear("st", "wt", "%xo")}
  {linear("sw", "ww", "%xo")}
  %bt = linalg.transpose ins(%wb : tensor<{N}x{K}xf32>) outs(%et : tensor<{K}x{N}xf32>) permutation = [1, 0]
  %ebb = tensor.empty() : tensor<2x{K}x{N}xf32>
  %bb = linalg.broadcast ins(%bt : tensor<{K}x{N}xf32>) outs(%ebb : tensor<2x{K}x{N}xf32>) dimensions = [0]
  %eb = tensor.empty() : tensor<2x{M}x{N}xf32>
  %initb = linalg.fill ins(%zero : f32) outs(%eb : tensor<2x{M}x{N}xf32>) -> tensor<2x{M}x{N}xf32>
  %bmm = linalg.batch_matmul ins(%xb, %bb : tensor<2x{M}x{K}xf32>, tensor<2x{K}x{N}xf32>)
      outs(%initb : tensor<2x{M}x{N}xf32>) -> tensor<2x{M}x{N}xf32> loc("bmm")
  return %w8s, %w4s, %grp, %a8, %bmm, %fq, %sm, %sm2, %st, %sw
      : {OUT}, {OUT}, {OUT}, {OUT}, tensor<2x{M}x{N}xf32>, {OUT}, {OUT}, {OUT}, {OUT}, {OUT}
}}
util.global private @wb = dense_resource<wb> : tensor<{N}x{K}xf32>
}}
{{-#
  dialect_resources: {{ builtin: {{ {", ".join(resource(n, w) for n, w in WEIGHTS.items())} }} }}
#-}}
"""
ALPHA = 0.5


def pipeline(calibration: str) -> str:
    """Every variant, each on its own sites; the smoothed ones read `calibration`."""
    return (
        "quantize-weight{sites='^(w8s|bmm)$'},quantize-weight{bits=4 sites=^w4s$},"
        "quantize-weight{bits=4 group=16 sites=^grp$},quantize-weight{activations=true sites=^a8$},"
        "fakequant-weights{sites=^fq$},"
        f"quantize-weight{{activations=true smooth={ALPHA} calibration={calibration} sites='^(sm|sm2)$'}},"
        f"quantize-weight{{activations=true smooth={ALPHA} static=true calibration={calibration} sites=^st$}},"
        f"quantize-weight{{smooth={ALPHA} calibration={calibration} sites=^sw$}}"
    )


@pytest.fixture(scope="module")
def calibration(tmp_path_factory) -> str:
    """The calibration file of the smoothed sites (each site's max|x| per K channel)."""
    path = tmp_path_factory.mktemp("calibration") / "calibration.npz"
    np.savez(path, **CALIBRATION)
    return str(path)


@pytest.fixture(scope="module")
def outs(modules, calibration):
    return modules.build(SOURCE, "llvm-cpu", inject=False, pipeline=pipeline(calibration))(X, XB, XO)


def assert_close_to_scale(got, want, tol):
    want = np.asarray(want, np.float64)
    assert np.abs(got - want).max() <= tol * np.abs(want).max()


def test_the_pipeline_rewrites_every_site_into_integer_codes(calibration):
    """Codes stored [K, N] (a matmul rhs' layout, whatever the weight's), each site one mixed
    f32 x int contraction reading them; grouped: [K/16, 16, N] codes, per-group sums into
    [K/16, M, N] behind IREE's compute barrier, summed after scaling. Smoothed: x·(1/s) once
    per lhs a pass smooths (sm and sm2 share one, and its int8 codes), static: no row amax."""
    module = parse_module(SOURCE, new_context())
    run_pipeline(module, pipeline(calibration))
    text = module_text(module)
    i8_rows = re.findall(rf"-> tensor<{M}x{K}xi8>", text)
    assert len(i8_rows) == 3  # a8's, sm and sm2's shared one, st's
    assert text.count(f": tensor<{M}x{K}xf32>, tensor<{K}xf32>)") == 3  # x·(1/s): sm and sm2's, st's, sw's
    assert "linalg.matmul" in text and text.count("linalg.matmul") == 1  # only fakequant's site is left
    assert "linalg.batch_matmul" not in text and "linalg.transpose ins(%" in text  # fq keeps its transpose
    for codes in (f"tensor<{K}x{N}xi8>", f"tensor<{K}x{N}xi4>", f"tensor<4x16x{N}xi4>"):
        assert codes in text
    for ins, out in (
        (f"tensor<{M}x{K}xf32>, tensor<{K}x{N}xi8>", f"tensor<{M}x{N}xf32>"),
        (f"tensor<{M}x{K}xf32>, tensor<{K}x{N}xi4>", f"tensor<{M}x{N}xf32>"),
        (f"tensor<{M}x4x16xf32>, tensor<4x16x{N}xi4>", f"tensor<4x{M}x{N}xf32>"),
        (f"tensor<2x{M}x{K}xf32>, tensor<{K}x{N}xi8>", f"tensor<2x{M}x{N}xf32>"),
    ):
        assert re.search(re.escape(f"{ins}) outs(%") + r"\w+" + re.escape(f" : {out})"), text), (ins, out)
    assert text.count("iree_tensor_ext.compute_barrier.start") == 6  # the grouped sum's; st's x; each W8A8 result
    assert f"-> tensor<{M}x{N}xi32>" in text


def test_w8a16_matches_the_dequantized_weight(outs):
    """Per output channel (row of W [N, K]); the all-zero channel comes out exactly zero."""
    assert_close_to_scale(outs[0], X.astype(np.float64) @ fq_weight(W8, 1, 8).T, 1e-5)
    assert np.array_equal(outs[0][:, 5], np.zeros(M, F32))


def test_w8a16_equals_fakequant_weights(outs):
    """The same weight through fakequant-weights (its f32 round trip, folded by IREE) in the same build."""
    assert_close_to_scale(outs[0], outs[5], 2e-6)
    assert not np.array_equal(outs[0], X @ W8.T)  # it did quantize


def test_w4a16_per_channel_and_grouped(outs):
    assert_close_to_scale(outs[1], X.astype(np.float64) @ fq_weight(W4, 1, 4).T, 1e-5)
    grouped = fq_weight(WG.reshape(N, 4, 16), 2, 4).reshape(N, K)  # one scale per (channel, 16 consecutive K)
    assert_close_to_scale(outs[2], X.astype(np.float64) @ grouped.T, 1e-5)
    assert not np.allclose(grouped, fq_weight(WG, 1, 4))


def test_w8a8_accumulates_exact_integers(outs):
    """Row codes of x and channel codes of W multiplied exactly, then out + f32(acc)·(amax_x/127)·scale."""
    xc, xa = fq_codes(X, 1, 8)
    wc, wa = fq_codes(WA, 1, 8)
    acc = xc.astype(np.int64) @ wc.astype(np.int64).T
    sx = (xa * F32(1 / 127)).astype(F32)
    sw = (wa[:, 0] * F32(1 / 127)).astype(F32)
    want = ((acc.astype(F32) * sx).astype(F32) * sw).astype(F32)
    np.testing.assert_allclose(outs[3], want, rtol=2.0**-21, atol=1e-7 * np.abs(want).max())
    assert_close_to_scale(outs[3], X.astype(np.float64) @ WA.T.astype(np.float64), 0.02)  # and near the float


def test_batch_matmul_with_a_broadcast_global_weight(outs):
    want = np.einsum("bmk,nk->bmn", XB.astype(np.float64), fq_weight(WB, 1, 8))
    assert_close_to_scale(outs[4], want, 1e-5)


def smoothed(weights: list[np.ndarray], calibration: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """SmoothQuant's (s, 1/s) in the pass's float32: s from the calibration and max|w_k| over every
    weight that reads the same x (W [N, K]: the max over N of each K column)."""
    w_max = np.max([np.abs(w).max(axis=0) for w in weights], axis=0)
    s = smoothing_factors(calibration, w_max, ALPHA)
    x = np.maximum(calibration, 0.01 * np.median(calibration))  # a barely seen channel as if at 1 % of the median
    assert np.allclose(s, x**ALPHA / np.maximum(w_max, 1e-5) ** (1 - ALPHA), rtol=1e-6)
    return s, (1.0 / s.astype(np.float64)).astype(F32)


def w8a8_reference(x: np.ndarray, w: np.ndarray, amax_x: np.ndarray | None = None) -> np.ndarray:
    """`test_w8a8_accumulates_exact_integers`' reference; `amax_x` [M, 1]: a static scale for every row."""
    if amax_x is None:
        xc, xa = fq_codes(x, 1, 8)
    else:
        xa = amax_x.astype(F32)
        t = ((x * (F32(1) / xa).astype(F32)).astype(F32) * F32(127)).astype(F32).astype(np.float64)
        xc = np.clip(np.sign(t) * np.floor(np.abs(t) + 0.5), -127, 127)
    wc, wa = fq_codes(w, 1, 8)
    acc = xc.astype(np.int64) @ wc.astype(np.int64).T
    sx = (xa * F32(1 / 127)).astype(F32)
    sw = (wa[:, 0] * F32(1 / 127)).astype(F32)
    return ((acc.astype(F32) * sx).astype(F32) * sw).astype(F32)


def rel_l2(got: np.ndarray, want: np.ndarray) -> float:
    return float(np.linalg.norm(got - want) / np.linalg.norm(want))


def test_smoothed_w8a8_equals_its_reference_and_loses_less(outs):
    """SmoothQuant (α = 0.5): x·(1/s) and W·diag(s) through the same exact-integer W8A8 as numpy
    computes it (float rounding of the scaling only), s shared by sm and sm2 (one x); on x with
    60× outlier channels its error against the float product is well under plain W8A8's."""
    s, inv = smoothed([WS, WS2], CALIBRATION["sm"])
    xs = (XO * inv).astype(F32)
    for got, w in ((outs[6], WS), (outs[7], WS2)):
        want = w8a8_reference(xs, (w * s).astype(F32))
        np.testing.assert_allclose(got, want, rtol=2.0**-21, atol=1e-7 * np.abs(want).max())
        exact = XO.astype(np.float64) @ w.T.astype(np.float64)
        plain = rel_l2(w8a8_reference(XO, w), exact)
        assert rel_l2(got, exact) < plain / 2, (rel_l2(got, exact), plain)  # measured: 0.004-0.005 against 0.017-0.021


def test_static_w8a8_uses_the_calibrated_scale_and_clamps_beyond_it(outs):
    """static=true: every row quantized with max_k cal_k·(1/s_k), the calibration 0.8× the real
    max, so the largest values clamp to ±127 as the reference clamps them."""
    s, inv = smoothed([WT], CALIBRATION["st"])
    xs = (XO * inv).astype(F32)
    amax = F32((CALIBRATION["st"] * inv).astype(F32).max())
    assert np.abs(xs).max() > amax  # some codes clamp
    want = w8a8_reference(xs, (WT * s).astype(F32), np.full((M, 1), amax, F32))
    np.testing.assert_allclose(outs[8], want, rtol=2.0**-21, atol=1e-7 * np.abs(want).max())


def test_smoothed_w8a16_is_the_smoothed_weights_round_trip(outs):
    """Weight-only with smoothing (AWQ's form: the salient input channels' weights scaled up before
    rounding): x·(1/s) times the round trip of W·diag(s)."""
    s, inv = smoothed([WW], CALIBRATION["sw"])
    xs = (XO * inv).astype(F32).astype(np.float64)
    assert_close_to_scale(outs[9], xs @ fq_weight((WW * s).astype(F32), 1, 8).T, 1e-5)


def test_quantize_matches_the_fake_quant_codes():
    """The host codes are fakequant-weights' codes, bit for bit; codes·scale its round trip to an ulp."""
    for bits in (8, 4):
        codes, scales = quantize(W8, (1,), bits)
        want, amax = fq_codes(W8, 1, bits)
        assert codes.dtype == np.int8 and np.array_equal(codes, want)
        assert np.array_equal(scales, (amax[:, 0] * F32(1 / (2 ** (bits - 1) - 1))).astype(F32))
        np.testing.assert_allclose(codes * scales[:, None], fq_weight(W8, 1, bits), rtol=2.0**-22, atol=0)
    codes, scales = quantize(WG, (1,), 4, group=16)
    assert codes.shape == (N, 4, 16) and scales.shape == (N, 4)


# -- ties: codes round half away from zero ---------------------------------------------------------


def tie_value(q: int, x: int) -> np.float32:
    """The float32 v nearest (x + 0.5)/q whose scaled value is exactly the tie: f32(f32(v·1)·q) = x + 0.5
    (the quantizers' op order with amax = 1, so 1/amax = 1 exactly)."""
    v = lo = hi = F32((x + 0.5) / q)
    for _ in range(16):
        for c in (v, lo, hi):
            if F32(F32(c * F32(1)) * F32(q)) == F32(x + 0.5):
                return c
        lo, hi = np.nextafter(lo, F32(-np.inf)), np.nextafter(hi, F32(np.inf))
    raise AssertionError(f"no float32 tie for {x}.5 / {q}")


def tie_matrix(q: int, xs: tuple[int, ...], n: int) -> np.ndarray:
    """n×n, symmetric: 1.0 on the diagonal (every row's and column's amax), ±(x + 0.5)/q elsewhere, x
    cycling through `xs`, the sign alternating: every off-diagonal element's scaled value is a tie."""
    t = np.empty((n, n), F32)
    for r in range(n):
        for c in range(n):
            t[r, c] = 1.0 if r == c else (-1) ** (r + c) * tie_value(q, xs[(r + c) % len(xs)])
    return t


def away(t: np.ndarray) -> np.ndarray:
    """Round half away from zero, the reference's rule (numpy's own np.rint is half to even)."""
    return np.sign(t) * np.floor(np.abs(t) + 0.5)


TIES_8 = (0, 1, 2, 3, 4, 10, 63, 100, 125)  # x of the ties x.5; the even x is where half-to-even differs
TIES_4 = (0, 1, 2, 3, 4, 5)


@pytest.mark.parametrize("bits,xs", [(8, TIES_8), (4, TIES_4)])
def test_host_codes_round_ties_half_away_from_zero(bits, xs):
    """Weights whose scaled values are exact .5 ties, both signs: the codes are ±(x + 1), not np.rint's
    half-to-even (±x for even x), per output channel and per group."""
    q = 2 ** (bits - 1) - 1
    w = tie_matrix(q, xs, 16)
    t = (w * F32(q)).astype(F32).astype(np.float64)  # scaled in float32, as the quantizer does (amax = 1)
    assert np.all((np.abs(t) % 1 == 0.5) | np.eye(16, dtype=bool))  # exact ties off the diagonal (q on it)
    want = away(t)
    assert np.count_nonzero(want != np.rint(t)) >= 16 * 15 // 4  # the rows tell the two rules apart
    codes, scales = quantize(w, (1,), bits)
    np.testing.assert_array_equal(codes, want)
    assert np.array_equal(scales, np.full(16, F32(1) * F32(1 / q), F32))
    codes, scales = quantize(w, (0,), bits)  # the other dim reduced: the matrix is symmetric
    np.testing.assert_array_equal(codes, want)
    grouped, _ = quantize(np.concatenate([w, w], axis=1), (1,), bits, group=16)
    np.testing.assert_array_equal(grouped, np.stack([want, want], axis=1))


TIES_SOURCE = """
func.func @main(%x: tensor<16x16xf32>, %xa: tensor<16x16xf32>) -> (tensor<16x16xf32>, tensor<16x16xf32>) {{
  %zero = arith.constant 0.0 : f32
  %w = arith.constant dense<{w}> : tensor<16x16xf32>
  %eye = arith.constant dense<{eye}> : tensor<16x16xf32>
  %e = tensor.empty() : tensor<16x16xf32>
  %init = linalg.fill ins(%zero : f32) outs(%e : tensor<16x16xf32>) -> tensor<16x16xf32>
  %w8 = linalg.matmul ins(%x, %w : tensor<16x16xf32>, tensor<16x16xf32>)
      outs(%init : tensor<16x16xf32>) -> tensor<16x16xf32> loc("w8")
  %a8 = linalg.matmul ins(%xa, %eye : tensor<16x16xf32>, tensor<16x16xf32>)
      outs(%init : tensor<16x16xf32>) -> tensor<16x16xf32> loc("a8")
  return %w8, %a8 : tensor<16x16xf32>, tensor<16x16xf32>
}}
"""


def _dense(a: np.ndarray) -> str:
    return np.array2string(a, separator=",", threshold=10**6, floatmode="unique").replace("\n", "")


def test_compiled_ties_round_half_away_from_zero(modules):
    """Through IREE (one 16×16 build): W8A16 of a tie weight, read back through an identity lhs
    (out = code·(1/127), the codes the host chose), and W8A8 of a tie activation (its codes computed
    on the device, math.round) through an identity weight (out = (f32(code·127)·(1/127))·(1/127)).
    Both equal half-away codes to float rounding of the scaling (2^-21), and differ from np.rint's."""
    w = tie_matrix(127, TIES_8, 16)
    eye = np.eye(16, dtype=F32)
    t = (w * F32(127)).astype(F32).astype(np.float64)  # the exact ties (and 127 on the diagonal)
    s = F32(1) * F32(1 / 127)
    source = TIES_SOURCE.format(w=_dense(w), eye=_dense(eye))
    pipeline = "quantize-weight{sites=^w8$},quantize-weight{activations=true sites=^a8$}"
    w8, a8 = modules.build(source, "llvm-cpu", inject=False, pipeline=pipeline)(eye, w)

    def w8_of(codes):
        return (codes.astype(F32) * s).astype(F32)

    def a8_of(codes):
        return (((codes * 127).astype(F32) * s).astype(F32) * s).astype(F32)

    differs = away(t) != np.rint(t)  # the ties at even x: where half-to-even would round the other way
    assert differs.sum() >= 16 * 15 // 4
    for got, of in ((w8, w8_of), (a8, a8_of)):
        right, wrong = of(away(t)), of(np.rint(t))
        np.testing.assert_allclose(got, right, rtol=2.0**-21, atol=0)
        assert np.all(np.abs(got - wrong)[differs] > 0.5 * np.abs(right - wrong)[differs])


# -- storage ------------------------------------------------------------------------------


def big_linear(n: int = 256, k: int = 512, m: int = 4) -> tuple[str, np.ndarray]:
    w = np.random.default_rng(3).standard_normal((n, k)).astype(F32)
    src = f"""
func.func @main(%x: tensor<{m}x{k}xf32>) -> tensor<{m}x{n}xf32> {{
  %w = arith.constant dense_resource<w> : tensor<{n}x{k}xf32>
  %e = tensor.empty() : tensor<{k}x{n}xf32>
  %t = linalg.transpose ins(%w : tensor<{n}x{k}xf32>) outs(%e : tensor<{k}x{n}xf32>) permutation = [1, 0]
  %z = arith.constant 0.0 : f32
  %o = tensor.empty() : tensor<{m}x{n}xf32>
  %f = linalg.fill ins(%z : f32) outs(%o : tensor<{m}x{n}xf32>) -> tensor<{m}x{n}xf32>
  %r = linalg.matmul ins(%x, %t : tensor<{m}x{k}xf32>, tensor<{k}x{n}xf32>)
      outs(%f : tensor<{m}x{n}xf32>) -> tensor<{m}x{n}xf32> loc("fc")
  return %r : tensor<{m}x{n}xf32>
}}
{{-#
  dialect_resources: {{ builtin: {{ {resource("w", w)} }} }}
#-}}
"""
    return src, w


def test_vmfb_holds_the_codes_not_an_f32_weight():
    """256×512 with plain iree-compile flags: i8 < 0.35× and i4 < 0.22× the f32 .vmfb (measured
    0.27× and 0.15×), and the results are right. IREE's const-eval would hoist a standalone
    dequantization into an f32 global: after dispatch formation no global holds an f32 tensor
    of the weight's size (in any layout: data tiling renames and reshapes what it hoists), and
    the contraction's dispatch reads the codes (IREE names it by its element types)."""
    from opscope.analysis.dispatch import flow_module
    from opscope.run.compile import compile_module
    from opscope.run.runtime import load
    from opscope.run.targets import Target

    plain = Target("iree-compile", PLAIN, "local-task", "plain iree-compile flags")
    src, w = big_linear()
    x = np.random.default_rng(4).standard_normal((4, 512)).astype(F32)
    sizes = {}
    for pipeline, reads in (
        ("", "_f32("),
        ("quantize-weight", "f32xi8xf32"),
        ("quantize-weight{bits=4}", "f32xi4xf32"),
        ("quantize-weight{bits=4 group=128}", "f32xi4xf32"),
    ):
        module = parse_module(src, new_context())
        run_pipeline(module, pipeline)
        built = compile_module(module, plain)
        sizes[pipeline] = len(built.vmfb)
        flow = module_text(flow_module(module))
        globals_f32 = [
            int(np.prod([int(d) for d in shape.split("x")]))
            for line in flow.splitlines()
            if line.lstrip().startswith("util.global ")
            for shape in re.findall(r"tensor<([0-9x]+)xf32", line)
        ]
        assert (max(globals_f32, default=0) >= w.size) == (pipeline == ""), (pipeline, globals_f32)
        # f32: a plain `matmul` (global optimization at O1 keeps the transposed weight a named
        # matmul); dequantizing: a `matmul_like` generic reading the codes
        assert re.search(r"@main_dispatch_0_matmul(_like)?_4x\w*" + re.escape(reads), flow), pipeline
        if pipeline.startswith("quantize-weight{bits=4"):
            group = 128 if "group" in pipeline else 512
            wq = fq_weight(w.reshape(256, 512 // group, group), 2, 4).reshape(256, 512)
            got = load(built).invoke("main", x)[0]
            assert_close_to_scale(got, x.astype(np.float64) @ wq.T, 1e-5)
    assert sizes["quantize-weight"] < 0.35 * sizes[""]
    assert sizes["quantize-weight{bits=4}"] < 0.22 * sizes[""]


def test_torch_linear_of_every_rank_is_rewritten():
    """The torch importer's Linear: matmul (2-D x), batch_matmul of a broadcast (3-D), of a
    broadcast collapsed over two batch dims (4-D), vecmat (1-D): every site becomes a
    dequantizing contraction, as close to fakequant-weights as float rounding allows."""
    torch = pytest.importorskip("torch")
    from opscope.importers import import_source
    from opscope.ir.loading import module_bytecode
    from opscope.run.compile import compile_module
    from opscope.run.runtime import load

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = torch.nn.Linear(32, 16)

        def forward(self, a, b, c, d):
            return self.fc(a), self.fc(b), self.fc(c), self.fc(d)

    torch.manual_seed(0)
    net = Net().eval()
    args = (torch.randn(3, 32), torch.randn(2, 3, 32), torch.randn(2, 2, 3, 32), torch.randn(32))
    source = module_bytecode(import_source(net, example_args=args))
    results = {}
    for pipeline in ("quantize-weight", "fakequant-weights"):
        module = parse_module(source, new_context())
        run_pipeline(module, pipeline)
        if pipeline == "quantize-weight":
            text = module_text(module)
            assert not any(op in text for op in ("linalg.matmul", "linalg.batch_matmul", "linalg.vecmat"))
            assert text.count("dense_resource<opscope.") == 1  # one tied weight, quantized once
        results[pipeline] = load(compile_module(module, "llvm-cpu")).invoke("main", *(a.numpy() for a in args))
    for got, want in zip(results["quantize-weight"], results["fakequant-weights"]):
        assert_close_to_scale(got, want, 2e-6)


# -- refusals -----------------------------------------------------------------------------


def test_refusals_are_one_line():
    """As lit_tests/passes/invalid/quantize-weight.mlir states them."""
    module = parse_module(SOURCE, new_context())
    cases = {
        "quantize-weight{bits=3}": "quantize-weight: option 'bits' expects 4 or 8 (codes stored as i4 or i8), got 3",
        "quantize-weight{activations=true bits=4}": (
            "quantize-weight: activations=true (W8A8, an i8 x i8 -> i32 contraction) takes bits=8 group=0 only, "
            "got bits=4 group=0: drop activations for W4A16"
        ),
        "quantize-weight{group=5 sites=^w8s$}": "quantize-weight: site 'w8s' at loc(\"w8s\"): K = 64 is not a "
        "multiple of group=5",
    }
    for pipeline, message in cases.items():
        with pytest.raises(OpscopeError) as e:
            run_pipeline(module, pipeline)
        assert one_line(e) == message
    assert "dense_resource<opscope." not in module_text(module)  # refused before any rewrite
    with pytest.raises(OpscopeError) as e:
        parse_pipeline("quantize-weight{group=-1}")
    assert one_line(e) == (
        "quantize-weight: option 'group' expects a group size >= 0 (0: one scale per output channel), got -1"
    )


def test_a_named_site_without_a_stored_weight_is_refused():
    source = """
func.func @main(%x: tensor<3x8xf32>, %w: tensor<8x4xf32>, %c: tensor<3x4xf32>) -> tensor<3x4xf32> {
  %0 = linalg.matmul ins(%x, %w : tensor<3x8xf32>, tensor<8x4xf32>)
      outs(%c : tensor<3x4xf32>) -> tensor<3x4xf32> loc("fc")
  return %0 : tensor<3x4xf32>
}
"""
    with pytest.raises(OpscopeError) as e:
        QuantizeWeight(sites="^fc$").apply(parse_module(source, new_context()))
    assert one_line(e) == (
        "quantize-weight: site 'fc' at loc(\"fc\"): its rhs is a function argument, not a stored "
        "weight: fakequant-weights{arguments=true} simulates its quantization; leave it out of "
        "'sites'"
    )
    module = parse_module(source, new_context())
    QuantizeWeight().apply(module)  # the default regex skips it (info log) and changes nothing
    assert "linalg.matmul" in module_text(module)


def test_a_weight_on_the_lhs_is_not_smoothed_by_its_own_maxima(tmp_path, caplog):
    """W @ x: the lhs maxima a run records are the weight's, not x's: skipped with a warning under a
    calibration (refused when `sites` names it), as the plan leaves it out of its SmoothQuant candidates."""
    source = "\n".join(line for line in WEIGHT_ON_LHS.read_text().splitlines() if not line.startswith("//"))
    path = tmp_path / "fc.npz"
    np.savez(path, fc=np.ones(8, F32))  # the length of the weight's K: it would be taken for x's
    module = parse_module(source, new_context())
    QuantizeWeight(activations=True, smooth=0.5, calibration=str(path)).apply(module)
    assert "linalg.matmul" in module_text(module)
    why = "its weight is its lhs (W @ x): the calibration holds no x maxima"
    assert f"skipping site 'fc' at loc(\"fc\"): {why}" in caplog.text
    with pytest.raises(OpscopeError) as e:
        QuantizeWeight(activations=True, smooth=0.5, calibration=str(path), sites="^fc$").apply(
            parse_module(source, new_context())
        )
    assert one_line(e) == f"quantize-weight: site 'fc' at loc(\"fc\"): {why}: leave it out of 'sites'"
