"""Attention computed on the host two ways, the reference's `attention_naive` and `attention_flash`
(§3.17): the independent numbers the attention taps and the fused-attention shadow are checked
against, on any shape (queries ≠ keys, a value width ≠ the head width, prime sizes, causal).

Both take q [..., S_q, D], k [..., S_k, D], v [..., S_k, D_v] (any leading batch/head dims) in
float64, a `scale` (default 1/√D), `causal` (key j is visible to query i when j ≤ i: aligned at
the first token, the reference's rule) and an optional additive `mask` broadcast to the scores
(-inf hides a key). `attention_naive` materializes the [S_q, S_k] scores, subtracts each row's
max, and returns (output, probabilities); `attention_flash` tiles the queries by `bq` and the keys
by `bk` with an online softmax (a running max m, denominator l and accumulator, rescaled by
exp(m_old − m_new) when a tile raises the max), skips key tiles wholly in a query tile's future
when causal, and divides by max(l, 1e-20) at the end: the same output up to rounding. A query
that sees no key gets zeros from both (its probabilities are all 0).
"""

from __future__ import annotations

import numpy as np


def _scores(q: np.ndarray, k: np.ndarray, scale: float | None, causal: bool, mask, rows=None, cols=None):
    """Scaled q·kᵀ with the causal rule and the additive mask applied, for query rows `rows` and key
    columns `cols` (slices; default all)."""
    rows, cols = rows or slice(None), cols or slice(None)
    d = q.shape[-1]
    s = np.einsum("...qd,...kd->...qk", q[..., rows, :], k[..., cols, :]) * (1 / np.sqrt(d) if scale is None else scale)
    if mask is not None:
        s = (
            s
            + np.broadcast_to(np.asarray(mask, np.float64), (*q.shape[:-2], q.shape[-2], k.shape[-2]))[..., rows, cols]
        )
    if causal:
        i = np.arange(q.shape[-2])[rows][:, None]
        j = np.arange(k.shape[-2])[cols][None, :]
        s = np.where(j <= i, s, -np.inf)
    return s


def attention_naive(
    q: np.ndarray, k: np.ndarray, v: np.ndarray, *, scale: float | None = None, causal: bool = False, mask=None
) -> tuple[np.ndarray, np.ndarray]:
    """(output [..., S_q, D_v], probabilities [..., S_q, S_k]) with the scores materialized."""
    q, k, v = (np.asarray(x, np.float64) for x in (q, k, v))
    s = _scores(q, k, scale, causal, mask)
    peak = s.max(-1, keepdims=True)
    e = np.where(np.isfinite(peak), np.exp(s - np.where(np.isfinite(peak), peak, 0.0)), 0.0)
    total = e.sum(-1, keepdims=True)
    p = e / np.maximum(total, 1e-20)
    return p @ v, p


def attention_flash(
    q: np.ndarray,
    k: np.ndarray,
    v: np.ndarray,
    *,
    scale: float | None = None,
    causal: bool = False,
    mask=None,
    bq: int = 16,
    bk: int = 16,
) -> np.ndarray:
    """The output [..., S_q, D_v], tiled by `bq` queries × `bk` keys with an online softmax."""
    if bq < 1 or bk < 1:
        raise ValueError(f"attention_flash: tile sizes must be >= 1, got bq={bq} bk={bk}")
    q, k, v = (np.asarray(x, np.float64) for x in (q, k, v))
    sq, sk = q.shape[-2], k.shape[-2]
    out = np.zeros((*q.shape[:-1], v.shape[-1]))
    for i0 in range(0, sq, bq):
        rows = slice(i0, min(i0 + bq, sq))
        n = rows.stop - rows.start
        m = np.full((*q.shape[:-2], n, 1), -np.inf)
        denom = np.zeros((*q.shape[:-2], n, 1))
        acc = np.zeros((*q.shape[:-2], n, v.shape[-1]))
        for j0 in range(0, sk, bk):
            if causal and j0 > rows.stop - 1:
                break  # this key tile and every later one lie in all these queries' future
            cols = slice(j0, min(j0 + bk, sk))
            s = _scores(q, k, scale, causal, mask, rows, cols)
            m_new = np.maximum(m, s.max(-1, keepdims=True))
            seen = np.isfinite(m_new)
            p = np.where(seen, np.exp(s - np.where(seen, m_new, 0.0)), 0.0)
            rescale = np.where(
                seen & np.isfinite(m), np.exp(np.where(np.isfinite(m), m, 0.0) - np.where(seen, m_new, 0.0)), 0.0
            )
            denom = denom * rescale + p.sum(-1, keepdims=True)
            acc = acc * rescale + p @ v[..., cols, :]
            m = m_new
        out[..., rows, :] = acc / np.maximum(denom, 1e-20)
    return out
