"""Decompositions of a weight: factors, the dense weight they compute with, and their parameter count.

§3.5 of the reference design (`kernels`): the randomized low-rank range finder
(`factorize`), the exact truncated low rank (`lowrank`), Monarch (Dao et al. 2022),
Tucker/HOSVD (3-way) and Tensor-Train (TT-SVD, Oseledets 2011). Each `*_reconstruct` gives
the dense float32 equivalent (to measure its error with `stats.rel_err`, or to substitute
it), each `*_params` its parameter count. Factors are float64.

Matrices are row-major `[rows, cols]`; a matmul weight is `[in, out]` (`y = x·W`).
"""

from __future__ import annotations

from collections.abc import Sequence
from math import isqrt, prod

import numpy as np

from opscope.errors import OpscopeError
from opscope.probe.svd import XorShift64, leading_subspace, truncated_svd

FACTORIZE_SEED = 0x2545_F491_4F6C_DD1D  # the reference's Ω seed (kernels.rs)
SUBSPACE_ITERS = 2
RANK_REVEAL = 1e-4  # a Gram–Schmidt column below this × the largest column norm is zeroed


def _matrix(w, what: str) -> np.ndarray:
    x = np.asarray(w, dtype=np.float64)
    if x.ndim != 2 or min(x.shape) < 1:
        raise OpscopeError(f"{what} takes a 2-D weight [rows, cols] with both dims >= 1; got shape {x.shape}")
    return x


# -- low rank -------------------------------------------------------------------------------------------------------


def factorize(w, r: int) -> tuple[np.ndarray, np.ndarray, int]:
    """The reference's randomized rank-r factorization W[k, n] ≈ U[k, r]·V[r, n] (deterministic).

    r clipped to [1, min(k, n)]; Ω[n, r] of xorshift64 `signed()` draws (seed `FACTORIZE_SEED`,
    row-major); Y = W·Ω; two subspace iterations Y ← W·(Wᵀ·Y); modified Gram–Schmidt over Y's
    columns in order, where a column whose remaining norm is below 1e-4 × the largest column norm
    of Y (before orthogonalization) is zeroed instead of normalized; V = Uᵀ·W. Returns (U, V, r).
    """
    a = _matrix(w, "factorize")
    k, n = a.shape
    r = max(1, min(int(r), k, n))
    omega = XorShift64(FACTORIZE_SEED).signeds(n * r).reshape(n, r)
    y = a @ omega
    for _ in range(SUBSPACE_ITERS):
        y = a @ (a.T @ y)
    ref = max(float(np.sqrt(np.square(y).sum(axis=0)).max()), 1e-20)
    for c in range(r):
        nrm = float(np.sqrt(np.square(y[:, c]).sum()))
        if nrm < RANK_REVEAL * ref:
            y[:, c] = 0.0
            continue
        y[:, c] /= nrm
        q = y[:, c]
        y[:, c + 1 :] -= np.outer(q, q @ y[:, c + 1 :])
    return y, y.T @ a, r


def lowrank(w, r: int) -> tuple[np.ndarray, np.ndarray]:
    """The best rank-r approximation W ≈ A·B (exact SVD): A = U_r [rows, r], B = diag(σ)·V_rᵀ [r, cols]."""
    u, s, v = truncated_svd(_matrix(w, "lowrank"), r)
    return u, s[:, None] * v.T


def lowrank_reconstruct(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The dense weight A·B (float32) of a `lowrank` or `factorize` pair."""
    return (np.asarray(a, dtype=np.float64) @ np.asarray(b, dtype=np.float64)).astype(np.float32)


def lowrank_params(rows: int, cols: int, r: int) -> int:
    """Parameters of a rank-r factorization of a [rows, cols] weight: (rows + cols)·r."""
    return (int(rows) + int(cols)) * int(r)


# -- Monarch --------------------------------------------------------------------------------------------------------


def monarch_blocks(n: int) -> int | None:
    """m if n = m² (a Monarch factorization of an [n, n] weight needs a perfect square), else None."""
    n = int(n)
    if n < 1:
        return None
    m = isqrt(n)
    return m if m * m == n else None


def monarch_project(w, m: int) -> tuple[np.ndarray, np.ndarray]:
    """Project a square [n, n] weight (n = m², layout [in, out]) onto the Monarch class: (w1[ri, j, l], w2[l, s, ri]).

    The m² blocks B_(l, ri)[s, j] = W[in = ri·m + j, out = l·m + s] each get their rank-1 SVD
    σ·u·vᵀ (one batched LAPACK call): w2[l, s, ri] = σ·u[s], w1[ri, j, l] = v[j]. Exact for a
    true Monarch matrix, where every block is rank 1.
    """
    m = int(m)
    x = _matrix(w, "monarch_project")
    if m < 1 or x.shape != (m * m, m * m):
        raise OpscopeError(f"monarch_project: needs a square [{m * m}, {m * m}] weight for m={m}; got shape {x.shape}")
    blocks = x.reshape(m, m, m, m).transpose(2, 0, 3, 1)  # [ri, j, l, s] -> [l, ri, s, j]
    u, s, vt = np.linalg.svd(blocks, full_matrices=False)
    w2 = (s[..., 0, None] * u[..., :, 0]).transpose(0, 2, 1)  # [l, ri, s] -> [l, s, ri]
    w1 = vt[..., 0, :].transpose(1, 2, 0)  # [l, ri, j] -> [ri, j, l]
    return np.ascontiguousarray(w1), np.ascontiguousarray(w2)


def monarch_matmul(x, w1: np.ndarray, w2: np.ndarray, m: int) -> np.ndarray:
    """y = x·M for x [batch, n] (or [n]) by two block contractions, cost 2·batch·m³ (float32).

    Step 1, per input group ri: j → l with w1[ri, j, l]; step 2, per output group l: ri → s with w2[l, s, ri].
    """
    m = int(m)
    x = np.asarray(x, dtype=np.float64)
    lead = x.shape[:-1]
    xb = x.reshape(-1, m, m)  # [batch, ri, j]
    t = np.einsum("brj,rjl->brl", xb, np.asarray(w1, dtype=np.float64))
    y = np.einsum("brl,lsr->bls", t, np.asarray(w2, dtype=np.float64))
    return y.reshape(*lead, m * m).astype(np.float32)


def monarch_reconstruct(w1: np.ndarray, w2: np.ndarray, m: int) -> np.ndarray:
    """The dense [n, n] Monarch weight (float32): M[ri·m + j, l·m + s] = w1[ri, j, l]·w2[l, s, ri]."""
    m = int(m)
    dense = np.einsum("rjl,lsr->rjls", np.asarray(w1, dtype=np.float64), np.asarray(w2, dtype=np.float64))
    return dense.reshape(m * m, m * m).astype(np.float32)


def monarch_params(m: int) -> int:
    """Parameters of a Monarch factorization of an [m², m²] weight: 2·m³."""
    return 2 * int(m) ** 3


# -- Tucker (HOSVD) -------------------------------------------------------------------------------------------------


def hosvd(x3, ranks: Sequence[int]) -> tuple[np.ndarray, list[np.ndarray]]:
    """Tucker decomposition of a 3-way tensor by HOSVD: (core[r0, r1, r2], [U0[d0, r0], U1[d1, r1], U2[d2, r2]]).

    Ranks are clipped to [1, d_i]; factor i holds the leading r_i left singular vectors of the
    mode-i unfolding (zero columns past the unfolding's rank, as the reference's SVD leaves
    them, so the core keeps the clipped ranks); core = X ×₀ U0ᵀ ×₁ U1ᵀ ×₂ U2ᵀ.
    """
    x = np.asarray(x3, dtype=np.float64)
    if x.ndim != 3 or len(ranks) != 3 or min(x.shape) < 1:
        raise OpscopeError(f"hosvd takes a 3-way tensor and 3 ranks; got shape {x.shape} and ranks {tuple(ranks)}")
    factors = []
    for i, (d, r) in enumerate(zip(x.shape, ranks)):
        r = max(1, min(int(r), d))
        unfold = np.moveaxis(x, i, 0).reshape(d, -1)
        u = np.zeros((d, r))
        ui = leading_subspace(unfold, r)
        u[:, : ui.shape[1]] = ui
        factors.append(u)
    core = np.einsum("abc,ai,bj,ck->ijk", x, *factors, optimize=True)
    return core, factors


def tucker_reconstruct(core: np.ndarray, factors: Sequence[np.ndarray]) -> np.ndarray:
    """The dense 3-way tensor (float32) X̂ = G ×₀ U0 ×₁ U1 ×₂ U2."""
    g = np.asarray(core, dtype=np.float64)
    u0, u1, u2 = (np.asarray(f, dtype=np.float64) for f in factors)
    return np.einsum("ijk,ai,bj,ck->abc", g, u0, u1, u2, optimize=True).astype(np.float32)


def tucker_params(dims: Sequence[int], ranks: Sequence[int]) -> int:
    """Parameters of a 3-way Tucker model: r0·r1·r2 + Σ d_i·r_i."""
    d, r = [int(v) for v in dims], [int(v) for v in ranks]
    return r[0] * r[1] * r[2] + sum(di * ri for di, ri in zip(d, r))


# -- Tensor-Train ---------------------------------------------------------------------------------------------------


def tt_svd(x, dims: Sequence[int], max_rank: int) -> list[np.ndarray]:
    """TT-SVD of a tensor viewed as `dims` (row-major), bond rank capped at `max_rank`: cores [r_prev, d_k, r_next].

    Left-to-right sweep: reshape the remainder to [r_prev·d_k, rest], keep the top
    min(max_rank, rows, cols) ≥ 1 triplets, core = U, carry diag(σ)·Vᵀ; the last core takes the
    remainder with r_next = 1 (r_0 = 1).
    """
    dims = [int(d) for d in dims]
    c = np.asarray(x, dtype=np.float64)
    if not dims or min(dims) < 1 or c.size != prod(dims):
        raise OpscopeError(f"tt_svd: a tensor of {c.size} elements cannot be viewed as dims {tuple(dims)}")
    c = c.reshape(-1)
    cores, r_prev = [], 1
    for k, d in enumerate(dims):
        rows = r_prev * d
        if k == len(dims) - 1:
            cores.append(c.reshape(r_prev, d, 1))
            break
        mat = c.reshape(rows, -1)
        u = leading_subspace(mat, max(1, min(int(max_rank), *mat.shape)))
        rk = u.shape[1]
        cores.append(u.reshape(r_prev, d, rk))
        c = u.T @ mat  # = diag(σ)·Vᵀ of the kept triplets
        r_prev = rk
    return cores


def tt_reconstruct(cores: Sequence[np.ndarray]) -> np.ndarray:
    """The dense tensor of shape (d_0, …, d_{N−1}) (float32) a TT core chain computes."""
    acc = np.ones((1, 1))  # [prod of modes so far, r]
    dims = []
    for g in cores:
        g = np.asarray(g, dtype=np.float64)
        rp, d, rn = g.shape
        acc = (acc @ g.reshape(rp, d * rn)).reshape(-1, rn)
        dims.append(d)
    return acc.reshape(dims).astype(np.float32)


def tt_params(cores: Sequence[np.ndarray]) -> int:
    """Parameters of a TT core chain: Σ r_prev·d·r_next."""
    return int(sum(np.asarray(g).size for g in cores))


def balanced_factor(n: int) -> tuple[int, int]:
    """(a, n // a) with a the largest divisor of n that is ≤ ⌊√n⌋: the squarest split of a dimension."""
    n = int(n)
    if n < 1:
        raise OpscopeError(f"balanced_factor: needs a positive integer, got {n}")
    c = np.arange(1, isqrt(n) + 1)
    a = int(c[n % c == 0].max())
    return a, n // a
