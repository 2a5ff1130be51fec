"""The reference's attention references (`attention_naive`, `attention_flash`), and the attention taps
checked against them on shapes no model here has.

* flash equals naive (float64) whatever the tiles (1, primes, larger than the sequence), causal or
  not, with an additive mask, and a query that sees no key gets zeros from both;
* on llvm-cpu, f32, 3 heads of 5 queries over 7 keys, head width 3 and value width 6, causal: the
  fused `iree_linalg_ext.attention`'s output and its shadow's sketches, and an eager
  batch_matmul · softmax · batch_matmul's softmax sketches, against `attention_naive`'s output and
  probabilities (`opscope.verify.sketches.attention_sketches`), within 1e-5 (measured ~1e-7).
"""

from __future__ import annotations

import numpy as np
import pytest

import opscope
from opscope.verify.attention import attention_flash, attention_naive
from opscope.verify.sketches import attention_sketches

G, SQ, SK, D, DV = 3, 5, 7, 3, 6
SCALE = 0.6


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("bq,bk", [(1, 1), (2, 3), (4, 5), (16, 16)])
def test_flash_equals_naive(causal, bq, bk):
    rng = np.random.default_rng(bq * 10 + bk)
    q, k, v = rng.standard_normal((2, 13, 7)), rng.standard_normal((2, 11, 7)), rng.standard_normal((2, 11, 5))
    mask = rng.standard_normal((13, 11))
    want, probs = attention_naive(q, k, v, causal=causal, mask=mask, scale=0.3)
    got = attention_flash(q, k, v, causal=causal, mask=mask, scale=0.3, bq=bq, bk=bk)
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-12)
    np.testing.assert_allclose(probs.sum(-1), 1.0, rtol=0, atol=1e-12)
    if causal:
        assert (probs[..., 0, 1:] == 0).all()  # the first query sees the first key only


def test_a_query_that_sees_no_key_gets_zeros():
    rng = np.random.default_rng(1)
    q, k, v = rng.standard_normal((4, 3)), rng.standard_normal((5, 3)), rng.standard_normal((5, 2))
    mask = np.zeros((4, 5))
    mask[2] = -np.inf
    out, probs = attention_naive(q, k, v, mask=mask)
    assert (out[2] == 0).all() and (probs[2] == 0).all()
    np.testing.assert_array_equal(attention_flash(q, k, v, mask=mask, bq=3, bk=2)[2], 0.0)
    with pytest.raises(ValueError, match="tile sizes must be >= 1"):
        attention_flash(q, k, v, bq=0)


def _t(*shape: int, e: str = "f32") -> str:
    return "tensor<" + "x".join(map(str, shape)) + f"x{e}>"


FUSED = f"""func.func @main(%q: {_t(G, SQ, D)}, %k: {_t(G, SK, D)}, %v: {_t(G, SK, DV)}, %mask: {_t(G, SQ, SK, e="i1")}) -> {_t(G, SQ, DV)} {{
  %scale = arith.constant {SCALE} : f32
  %e = tensor.empty() : {_t(G, SQ, DV)}
  %o = iree_linalg_ext.attention <indexing_maps = [affine_map<(b, m, n, k1, k2) -> (b, m, k1)>,
      affine_map<(b, m, n, k1, k2) -> (b, k2, k1)>, affine_map<(b, m, n, k1, k2) -> (b, k2, n)>,
      affine_map<(b, m, n, k1, k2) -> ()>, affine_map<(b, m, n, k1, k2) -> (b, m, k2)>,
      affine_map<(b, m, n, k1, k2) -> (b, m, n)>]>
      ins(%q, %k, %v, %scale, %mask : {_t(G, SQ, D)}, {_t(G, SK, D)}, {_t(G, SK, DV)}, f32, {_t(G, SQ, SK, e="i1")})
      outs(%e : {_t(G, SQ, DV)}) {{
  ^bb0(%score: f32):
    iree_linalg_ext.yield %score : f32
  }} -> {_t(G, SQ, DV)} loc("odd")
  return %o : {_t(G, SQ, DV)}
}}"""

EAGER = f"""func.func @main(%q: {_t(G, SQ, D)}, %k: {_t(G, SK, D)}, %v: {_t(G, SK, DV)}, %bias: {_t(G, SQ, SK)}) -> {_t(G, SQ, DV)} {{
  %zero = arith.constant 0.0 : f32
  %scale = arith.constant {SCALE} : f32
  %one = arith.constant 1.0 : f32
  %eq = tensor.empty() : {_t(G, SQ, D)}
  %ek = tensor.empty() : {_t(G, SK, D)}
  %qs = linalg.generic {{indexing_maps = [affine_map<(b, i, d) -> (b, i, d)>, affine_map<(b, i, d) -> (b, i, d)>],
      iterator_types = ["parallel", "parallel", "parallel"]}} ins(%q : {_t(G, SQ, D)}) outs(%eq : {_t(G, SQ, D)}) {{
  ^bb0(%a: f32, %o: f32):
    %x = arith.mulf %a, %scale : f32
    linalg.yield %x : f32
  }} -> {_t(G, SQ, D)} loc("odd.q")
  %ks = linalg.generic {{indexing_maps = [affine_map<(b, i, d) -> (b, i, d)>, affine_map<(b, i, d) -> (b, i, d)>],
      iterator_types = ["parallel", "parallel", "parallel"]}} ins(%k : {_t(G, SK, D)}) outs(%ek : {_t(G, SK, D)}) {{
  ^bb0(%a: f32, %o: f32):
    %x = arith.mulf %a, %one : f32
    linalg.yield %x : f32
  }} -> {_t(G, SK, D)} loc("odd.k")
  %es = tensor.empty() : {_t(G, SQ, SK)}
  %zs = linalg.fill ins(%zero : f32) outs(%es : {_t(G, SQ, SK)}) -> {_t(G, SQ, SK)}
  %s = linalg.generic {{indexing_maps = [affine_map<(b, i, j, d) -> (b, i, d)>, affine_map<(b, i, j, d) -> (b, j, d)>,
      affine_map<(b, i, j, d) -> (b, i, j)>], iterator_types = ["parallel", "parallel", "parallel", "reduction"]}}
      ins(%qs, %ks : {_t(G, SQ, D)}, {_t(G, SK, D)}) outs(%zs : {_t(G, SQ, SK)}) {{
  ^bb0(%a: f32, %c: f32, %o: f32):
    %x = arith.mulf %a, %c : f32
    %y = arith.addf %o, %x : f32
    linalg.yield %y : f32
  }} -> {_t(G, SQ, SK)} loc("odd.scores")
  %m = linalg.generic {{indexing_maps = [affine_map<(b, i, j) -> (b, i, j)>, affine_map<(b, i, j) -> (b, i, j)>, affine_map<(b, i, j) -> (b, i, j)>],
      iterator_types = ["parallel", "parallel", "parallel"]}} ins(%s, %bias : {_t(G, SQ, SK)}, {_t(G, SQ, SK)}) outs(%es : {_t(G, SQ, SK)}) {{
  ^bb0(%a: f32, %c: f32, %o: f32):
    %y = arith.addf %a, %c : f32
    linalg.yield %y : f32
  }} -> {_t(G, SQ, SK)} loc("odd.masked")
  %p = linalg.softmax dimension(2) ins(%m : {_t(G, SQ, SK)}) outs(%es : {_t(G, SQ, SK)}) -> {_t(G, SQ, SK)} loc("odd.softmax")
  %eo = tensor.empty() : {_t(G, SQ, DV)}
  %zo = linalg.fill ins(%zero : f32) outs(%eo : {_t(G, SQ, DV)}) -> {_t(G, SQ, DV)}
  %o = linalg.batch_matmul ins(%p, %v : {_t(G, SQ, SK)}, {_t(G, SK, DV)}) outs(%zo : {_t(G, SQ, DV)}) -> {_t(G, SQ, DV)} loc("odd.context")
  return %o : {_t(G, SQ, DV)}
}}"""


@pytest.fixture(scope="module")
def operands():
    rng = np.random.default_rng(7)
    q, k = rng.standard_normal((G, SQ, D)).astype(np.float32), rng.standard_normal((G, SK, D)).astype(np.float32)
    v = rng.standard_normal((G, SK, DV)).astype(np.float32)
    causal = np.broadcast_to(np.arange(SK) <= np.arange(SQ)[:, None], (G, SQ, SK)).copy()
    out, probs = attention_naive(q, k, v, scale=SCALE, causal=True)
    return q, k, v, causal, out, probs


@pytest.mark.parametrize("form", ["fused", "eager"])
def test_the_attention_taps_equal_the_naive_reference(operands, form):
    q, k, v, causal, want_out, probs = operands
    if form == "fused":
        source, extra, site, kind = FUSED, causal, "odd.attention", "attention"
    else:  # the causal rule as an additive bias (a large negative number, as eager PyTorch writes it)
        source, extra, site, kind = EAGER, np.where(causal, 0.0, -1e30).astype(np.float32), "odd.softmax", "softmax"
    module, manifest = opscope.inject(source, taps="attention")
    assert [(s.name, s.kind, s.m, s.n) for s in manifest.sites] == [(site, kind, SQ, SK)]
    outs = opscope.load(opscope.compile(module)).invoke(manifest.function, q, k, v, extra)
    np.testing.assert_allclose(outs[0], want_out, rtol=0, atol=1e-5)
    values = manifest.values(outs)
    for stat, want in attention_sketches(probs).items():
        if (site, "attn", stat) in values:
            np.testing.assert_allclose(values[site, "attn", stat], want, rtol=0, atol=1e-5, err_msg=stat)
    assert {stat for s, _, stat in values if s == site} == {"attn_qmax", "attn_krecv", "attn_entropy"}
