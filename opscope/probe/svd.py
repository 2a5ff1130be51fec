"""Truncated SVD: the reference's power iteration with deflation, and an exact LAPACK one.

§3.15 of the reference design: `truncated_svd_power` is the reference's dependency-free
method (deterministic xorshift start vectors, 60 power rounds per triplet, deflation), kept
to reproduce its numbers; `truncated_svd` is what every decomposition here uses: exact,
fast, and with a fixed sign convention so results are reproducible. Both return
`(U[rows, r], S[r], V[cols, r])` with `A ≈ U·diag(S)·Vᵀ`, float64.
"""

from __future__ import annotations

import numpy as np

from opscope.errors import OpscopeError

SVD_SEED = 0x9E37_79B9_7F4A_7C15  # the reference's start-vector seed (svd.rs)
POWER_ROUNDS = 60
DROP_REL = 1e-6  # a later triplet below this × σ₀ spans nothing and is zeroed
TINY = 1e-20
_MASK64 = (1 << 64) - 1
_I64_MAX = float((1 << 63) - 1)


class XorShift64:
    """The reference's xorshift64 generator (shifts 13, 7, 17; state = seed | 1): reproducible random draws."""

    def __init__(self, seed: int):
        self.state = (int(seed) & _MASK64) | 1

    def next_u64(self) -> int:
        """Advance and return the new 64-bit state."""
        s = self.state
        s ^= (s << 13) & _MASK64
        s ^= s >> 7
        s ^= (s << 17) & _MASK64
        self.state = s
        return s

    def uniform(self) -> float:
        """A draw in [0, 1): the top 53 bits of the next state over 2⁵³ (the reference's DADO sampler)."""
        return (self.next_u64() >> 11) / float(1 << 53)

    def signed(self) -> float:
        """A draw in [−1, 1]: the next state read as i64 over i64::MAX (the reference's SVD / factorize draws)."""
        s = self.next_u64()
        return (s - (1 << 64) if s >> 63 else s) / _I64_MAX

    def uniforms(self, n: int) -> np.ndarray:
        """`n` successive `uniform()` draws as float64."""
        return np.array([self.uniform() for _ in range(int(n))], dtype=np.float64)

    def signeds(self, n: int) -> np.ndarray:
        """`n` successive `signed()` draws as float64."""
        return np.array([self.signed() for _ in range(int(n))], dtype=np.float64)


def _matrix(a) -> np.ndarray:
    x = np.asarray(a, dtype=np.float64)
    if x.ndim != 2 or min(x.shape) < 1:
        raise OpscopeError(f"truncated SVD takes a 2-D matrix [rows, cols] with both dims >= 1; got shape {x.shape}")
    return x


def _rank(r: int, rows: int, cols: int) -> int:
    return max(1, min(int(r), rows, cols))


def _norm(v: np.ndarray) -> float:
    return float(np.sqrt(np.square(v).sum()))


def truncated_svd_power(a, r: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The reference's truncated SVD, reproduced: power iteration with deflation, deterministic.

    r is clipped to [1, min(rows, cols)]. For each triplet t: a start vector of xorshift64
    `signed()` draws (one generator seeded `SVD_SEED` for all triplets), normalized; 60 rounds of
    u = A·v / ‖A·v‖, v = Aᵀ·u, σ = ‖v‖, v /= σ (stopping early when a norm falls below 1e-20) on a
    working copy; a triplet t > 0 with σ < 1e-6·σ₀ is zeroed (it spans nothing), else it is stored
    and the copy deflated A ← A − σ·u·vᵀ.
    """
    work = _matrix(a).copy()
    rows, cols = work.shape
    r = _rank(r, rows, cols)
    us, ss, vs = np.zeros((rows, r)), np.zeros(r), np.zeros((cols, r))
    rng = XorShift64(SVD_SEED)
    for t in range(r):
        v = rng.signeds(cols)
        v /= max(_norm(v), TINY)
        u = np.zeros(rows)
        sigma = 0.0
        for _ in range(POWER_ROUNDS):
            u = work @ v
            un = _norm(u)
            if un < TINY:
                break
            u /= un
            nv = work.T @ u
            sigma = _norm(nv)
            if sigma < TINY:
                break
            v = nv / sigma
        if t > 0 and sigma < DROP_REL * max(ss[0], 1e-30):
            continue
        us[:, t], vs[:, t], ss[t] = u, v, sigma
        work -= sigma * np.outer(u, v)
    return us, ss, vs


def truncated_svd(a, r: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The top-r singular triplets, exact (LAPACK gesdd), r clipped to [1, min(rows, cols)].

    Signs are fixed so that the largest-|·| entry of each U column is positive (V flips with it),
    so the same matrix always gives the same factors.
    """
    x = _matrix(a)
    r = _rank(r, *x.shape)
    u, s, vt = np.linalg.svd(x, full_matrices=False)
    u, s, v = u[:, :r], s[:r], vt[:r].T
    flip = np.sign(u[np.argmax(np.abs(u), axis=0), np.arange(r)])
    flip[flip == 0] = 1.0
    return u * flip, s.copy(), v * flip


def leading_subspace(a, r: int) -> np.ndarray:
    """The top-r left singular vectors of `a` [rows, cols] (r clipped to [1, min(rows, cols)]), from the
    eigendecomposition of the smaller Gram matrix: the same subspace as `truncated_svd` at a fraction
    of the cost when one side is much longer (Tucker and TT unfoldings, a vocabulary-sized weight).
    Directions whose singular value is below 1e-7 of the largest (≈ √ε: the Gram matrix cannot tell
    them from zero; past the rank) come back as zeros: they hold under 1e-14 of the energy."""
    x = _matrix(a)
    rows, cols = x.shape
    r = _rank(r, rows, cols)
    if rows <= cols:
        lam, vec = np.linalg.eigh(x @ x.T)
        u = vec[:, ::-1][:, :r]
        sigma = np.sqrt(np.maximum(lam[::-1][:r], 0.0))
    else:
        lam, vec = np.linalg.eigh(x.T @ x)
        sigma = np.sqrt(np.maximum(lam[::-1][:r], 0.0))
        v = vec[:, ::-1][:, :r]
        with np.errstate(divide="ignore", invalid="ignore"):
            u = np.where(sigma > 0, (x @ v) / np.where(sigma > 0, sigma, 1.0), 0.0)
    u = np.where(sigma > 1e-7 * max(sigma[0], 1e-300), u, 0.0)
    flip = np.sign(u[np.argmax(np.abs(u), axis=0), np.arange(r)])
    flip[flip == 0] = 1.0
    return u * flip
