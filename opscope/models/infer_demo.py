"""The reference's zero-argument inference-dynamics demo (`opscope-infer`, §4.4), as a model with its
own inputs: `opscope infer` with no model runs it.

* Attention: scores [16, 16] with logit 6 on the sink key 0 plus 6 on the local band |i − j| ≤ 1
  (key 0 on queries 0–1 gets 12), softmax over the keys. The scores are written as q·kᵀ with k the
  identity (so the softmax reads as attention: a product of two computed tensors) and q the
  logits. numpy: mean peak 0.347, 3 queries peaking above 0.30, the top-4 keys taking 49 % of the
  attention with key 0 first: a sink plus a window (windowed + sink sparse attention).
* MoE gate: tokens [16, 64] (normal, seed 7) · Wg [64, 8] (normal, seed 7, column e scaled by
  8 − e, the reference's), top-2 per token (`iree_linalg_ext.topk`). The scaling widens the
  low experts' logits (their spread, not their mean), so they win more often only on average;
  with these 16 tokens: expert 3 takes 25 % of the 32 choices, 5 and 7 none (cold: drop or merge
  them, prefetch the hot).
"""

from __future__ import annotations

import numpy as np

T, D, E, K = 16, 64, 8, 2  # tokens, width, experts, experts per token
SINK, BAND = 6.0, 6.0


def sink_band_logits() -> np.ndarray:
    """[T, T] attention logits: SINK on key 0, BAND on |i − j| ≤ 1."""
    i, j = np.arange(T)[:, None], np.arange(T)[None, :]
    return (SINK * (j == 0) + BAND * (np.abs(i - j) <= 1)).astype(np.float32)


def gate_inputs() -> tuple[np.ndarray, np.ndarray]:
    """(tokens [T, D], Wg [D, E]): Wg's column e scaled by E − e."""
    rng = np.random.default_rng(7)
    tokens = rng.standard_normal((T, D)).astype(np.float32)
    wg = (rng.standard_normal((D, E)) * (E - np.arange(E))).astype(np.float32)
    return tokens, wg


def inputs() -> list[np.ndarray]:
    """One call's arguments: q (the logits), k (the identity), tokens, Wg."""
    tokens, wg = gate_inputs()
    return [sink_band_logits(), np.eye(T, dtype=np.float32), tokens, wg]


def _t(*shape: int, e: str = "f32") -> str:
    return "tensor<" + "x".join(map(str, shape)) + f"x{e}>"


def _copy(name: str, arg: str, shape: tuple[int, int]) -> str:
    """`arg` through one elementwise op (x · 1): a computed tensor, as a model's projections are."""
    ident = "affine_map<(i, j) -> (i, j)>"
    return f"""  %{name} = linalg.generic {{indexing_maps = [{ident}, {ident}], iterator_types = ["parallel", "parallel"]}}
      ins({arg} : {_t(*shape)}) outs(%e{name} : {_t(*shape)}) {{
  ^bb0(%a: f32, %o: f32):
    %x = arith.mulf %a, %one : f32
    linalg.yield %x : f32
  }} -> {_t(*shape)} loc("attn.{name}")"""


def module() -> str:
    """The demo as linalg: softmax(q·kᵀ) over the keys (site `attn`), and the gate x·Wg with its top-2."""
    tt, ti = _t(T, T), _t(T, K, e="i32")
    return f"""func.func @main(%q_in: {tt}, %k_in: {tt}, %tokens: {_t(T, D)}, %wg: {_t(D, E)}) -> ({tt}, {ti}) {{
  %one = arith.constant 1.0 : f32
  %zero = arith.constant 0.0 : f32
  %eq = tensor.empty() : {tt}
  %ek = tensor.empty() : {tt}
{_copy("q", "%q_in", (T, T))}
{_copy("k", "%k_in", (T, T))}
  %es = tensor.empty() : {tt}
  %zs = linalg.fill ins(%zero : f32) outs(%es : {tt}) -> {tt}
  %s = linalg.matmul indexing_maps = [affine_map<(i, j, d) -> (i, d)>, affine_map<(i, j, d) -> (j, d)>,
      affine_map<(i, j, d) -> (i, j)>] ins(%q, %k : {tt}, {tt}) outs(%zs : {tt}) -> {tt} loc("attn.scores")
  %ep = tensor.empty() : {tt}
  %p = linalg.softmax dimension(1) ins(%s : {tt}) outs(%ep : {tt}) -> {tt} loc("attn")
  %eg = tensor.empty() : {_t(T, E)}
  %zg = linalg.fill ins(%zero : f32) outs(%eg : {_t(T, E)}) -> {_t(T, E)}
  %g = linalg.matmul ins(%tokens, %wg : {_t(T, D)}, {_t(D, E)}) outs(%zg : {_t(T, E)}) -> {_t(T, E)} loc("moe.gate")
  %ninf = arith.constant 0xFF800000 : f32
  %c0 = arith.constant 0 : i32
  %ev = tensor.empty() : {_t(T, K)}
  %ei = tensor.empty() : {ti}
  %v0 = linalg.fill ins(%ninf : f32) outs(%ev : {_t(T, K)}) -> {_t(T, K)}
  %i0 = linalg.fill ins(%c0 : i32) outs(%ei : {ti}) -> {ti}
  %top:2 = iree_linalg_ext.topk dimension(1) ins(%g : {_t(T, E)}) outs(%v0, %i0 : {_t(T, K)}, {ti}) {{
  ^bb0(%a: f32, %b: f32):
    %c = arith.cmpf ogt, %a, %b : f32
    iree_linalg_ext.yield %c : i1
  }} -> {_t(T, K)}, {ti} loc("moe.router")
  return %p, %top#1 : {tt}, {ti}
}}
"""


PEAKED = 0.30  # a query whose peak probability passes this is concentrated (the reference's line)
COLD = 0.02  # an expert below this share of the choices is cold (the reference's)


def summary(tidy) -> list[str]:
    """The reference demo's printed numbers, read off the first recorded call of its run: the mean
    per-query peak, the queries peaking above PEAKED, the top-4 keys' share of the attention and the
    top-3 key ids; the experts' load shares, the hottest against the uniform 1/E, the cold ones."""
    import polars as pl

    first = tidy.filter(pl.col("step") == tidy["step"].min())

    def values(stat: str) -> np.ndarray:
        return first.filter(pl.col("stat") == stat).sort("idx")["value"].to_numpy().astype(np.float64)

    qmax, krecv, load = values("attn_qmax"), values("attn_krecv"), values("route_load")
    top = np.argsort(-krecv, kind="stable")
    share = load / load.sum()
    order = np.argsort(-share, kind="stable")
    cold = int((share < COLD).sum())
    return [
        f"attention: mean peak {qmax.mean():.3f}; {int((qmax > PEAKED).sum())} of {qmax.size} queries peak above "
        f"{PEAKED:.2f}; the top 4 keys take {krecv[top[:4]].sum() / krecv.sum():.1%} of the attention (keys "
        f"{', '.join(map(str, top[:3]))} first): windowed + sink sparse attention",
        "MoE gate: expert loads "
        + ", ".join(f"{share[e]:.1%} (expert {e})" for e in order)
        + f"; the hottest {share[order[0]]:.1%} against a uniform {1 / share.size:.1%}; {cold} cold "
        f"(< {COLD:.0%} of the choices): drop / merge cold experts, prefetch hot ones",
    ]
