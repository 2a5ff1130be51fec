"""Host probes on a 2-D tensor: what structure a weight has and which kernel it deserves.

§3.13 of the reference design (the `probe` module) and the exploit hint of `opscope-probe`
(§4.5): stable rank, quantization error per tensor / row / group, outlier columns, N:M
sparsity, ternary (TWN) error, value cardinality, and the verdict that picks the first
exploit the numbers allow. Tensors are row-major `[rows, cols]` numpy arrays, taken as
given: a model's weights come as [output channels, K] (`opscope.ir.weights`), so "per row"
is per output channel, as int8 kernels scale them (the reference's files were [in, out]);
every probe computes in float64 and returns Python numbers (float32 arrays for round trips).

Rounding is half away from zero (Rust's `f32::round`), not numpy's half-to-even.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from opscope.errors import OpscopeError

SIGMA_ITERS = 30  # power-iteration rounds of the reference's stable rank
TINY = 1e-20  # the reference's "is zero" threshold for norms, scales and energies
GAP_EPS = 1e-9  # denominator guard of rel_err / block_identity_gap
BITWIDTHS = (3, 4, 6, 8)  # candidates of best_bitwidth, smallest first
CARDINALITY_CAP = 100_000

# Probe's fixed settings (opscope-probe, §4.5)
PROBE_ROUND_TO = 1000.0
PROBE_BUDGET = 0.02
PROBE_OUTLIER_RATIO = 6.0

# The exploit hints, in the reference's words.
HINT_SPARSE24 = "2:4 near-lossless → sparse tensor cores"
HINT_LUT = "LUT/palettized"
HINT_LOWRANK = "low rank → factored matmul"
HINT_OUTLIER = "AWQ/SmoothQuant mixed int4"
HINT_CHANNEL_INT4 = "per-CHANNEL int4 (grouped int4)"
HINT_DENSE = "dense fp — keep f16/bf16"


def as_matrix(x, what: str = "tensor") -> np.ndarray:
    """`x` as a float64 `[rows, cols]` array, or a one-line OpscopeError: probes read 2-D finite weights."""
    try:
        a = np.asarray(x, dtype=np.float64)
    except (TypeError, ValueError):
        raise OpscopeError(f"{what}: probes take a numeric 2-D tensor [rows, cols]; got {type(x).__name__}") from None
    if a.ndim != 2:
        raise OpscopeError(
            f"{what}: probes take a 2-D tensor [rows, cols]; got shape {tuple(a.shape)}: "
            "reshape it, e.g. a conv filter to [out, in·kh·kw]"
        )
    if a.shape[0] < 1 or a.shape[1] < 1:
        raise OpscopeError(f"{what}: probes need at least one row and one column; got shape {tuple(a.shape)}")
    if not np.isfinite(a).all():
        raise OpscopeError(f"{what} holds NaN/Inf values: probes need finite weights")
    return a


def round_half_away(v: np.ndarray) -> np.ndarray:
    """Round to the nearest integer, ties away from zero (Rust's `round`), exactly: no `|v| + 0.5` rounding slip."""
    v = np.asarray(v, dtype=np.float64)
    t = np.trunc(v)
    return t + np.where(np.abs(v - t) >= 0.5, np.sign(v), 0.0)


def _vec(x) -> np.ndarray:
    return np.asarray(x, dtype=np.float64)


def _rel_l2(x: np.ndarray, q: np.ndarray) -> float:
    """sqrt(Σ(x−q)² / Σx²), 0 when x carries no energy (the reference's error of every round trip)."""
    den = float(np.square(x).sum())
    if den < TINY:
        return 0.0
    return float(np.sqrt(np.square(x - q).sum() / den))


def frob(x) -> float:
    """Frobenius (L2) norm of a tensor of any shape."""
    return float(np.sqrt(np.square(_vec(x)).sum()))


def rel_err(a, b) -> float:
    """‖a − b‖ / (‖a‖ + 1e-9): how far approximation `b` is from `a`, relative to `a`."""
    a, b = _vec(a), _vec(b)
    return frob(a - b) / (frob(a) + GAP_EPS)


def block_identity_gap(inp, out) -> float:
    """‖out − in‖ / (‖in‖ + 1e-9): near 0 means a residual block is close to identity (a skip candidate)."""
    return rel_err(inp, out)


# -- spectrum ------------------------------------------------------------------------------------------------------


def sigma_max(x, iters: int = SIGMA_ITERS) -> float:
    """Largest singular value by the reference's power iteration on XᵀX from the uniform unit vector (‖X·v‖)."""
    a = as_matrix(x)
    v = np.full(a.shape[1], 1.0 / np.sqrt(a.shape[1]))
    for _ in range(int(iters)):
        w = a.T @ (a @ v)
        n = np.sqrt(np.square(w).sum())
        if n < TINY:
            break
        v = w / n
    return frob(a @ v)


def stable_rank(x) -> float:
    """‖X‖_F² / σ_max² (σ_max from 30 power rounds; 0 if σ < 1e-20): ≪ min(rows, cols) means low rank."""
    s = sigma_max(x, SIGMA_ITERS)
    if s < TINY:
        return 0.0
    return frob(x) ** 2 / s**2


def spectrum(x) -> np.ndarray:
    """All singular values of X, descending, exact (LAPACK gesdd), as float64."""
    return np.linalg.svd(as_matrix(x), compute_uv=False)


def effective_rank(sigma: np.ndarray, fraction: float) -> int:
    """Smallest r whose top-r energy Σσ² reaches `fraction` of the total, at least 1.

    The total is the energy of the whole spectrum passed in (‖W‖_F² for a full spectrum),
    not, as in the reference's `layers`, of the top min(rows, cols, 48) triplets only, so a
    rank read here is the rank that keeps `fraction` of the weight's real energy.
    """
    e = np.sort(np.square(np.abs(_vec(sigma)).ravel()))[::-1]
    if e.size == 0:
        return 1
    c = np.cumsum(e)
    if c[-1] <= 0:
        return 1
    r = int(np.searchsorted(c, float(fraction) * c[-1], side="left")) + 1
    return max(1, min(r, e.size))


# -- quantization --------------------------------------------------------------------------------------------------


def _levels(bits: int) -> float:
    bits = int(bits)
    if bits < 1:
        raise OpscopeError(f"quantize: bits must be at least 1, got {bits}")
    return float(max(2 ** (bits - 1) - 1, 1))


def _quantize64(x: np.ndarray, bits: int, scope: str = "row", group: int = 0) -> np.ndarray:
    """The symmetric round trip in float64 (see `quantize`)."""
    levels = _levels(bits)
    rows, cols = x.shape
    group = int(group)
    if group < 0:
        raise OpscopeError(f"quantize: group must be 0 (none) or positive, got {group}")
    if group > 0:
        if scope != "row":
            raise OpscopeError(f"quantize: group={group} splits rows, so it needs scope='row' (got {scope!r})")
        if cols % group:
            raise OpscopeError(
                f"quantize: {cols} columns do not split into groups of {group}: "
                "pick a group that divides the column count"
            )
        view = x.reshape(rows, cols // group, group)
    elif scope == "row":
        view = x.reshape(rows, 1, cols)
    elif scope == "tensor":
        view = x.reshape(1, 1, -1)
    else:
        raise OpscopeError(f"quantize: scope must be 'tensor' or 'row', got {scope!r}")
    amax = np.abs(view).max(axis=-1, keepdims=True)
    scale = np.where(amax < TINY, 1.0, amax / levels)
    q = np.clip(round_half_away(view / scale), -levels, levels) * scale
    return q.reshape(rows, cols)


def quantize(x, bits: int, scope: str = "row", group: int = 0) -> np.ndarray:
    """Symmetric `bits`-bit fake-quant round trip (float32): one scale per tensor, per row, or per (row, group).

    L = 2^(bits−1) − 1 (at least 1), scale = amax/L (1 where amax < 1e-20), q = clamp(round(v/scale), −L, L)·scale,
    rounding half away from zero. `group=g > 0` splits each row's columns into consecutive groups of g.
    """
    return _quantize64(as_matrix(x), bits, scope, group).astype(np.float32)


def quant_error(x, bits: int) -> float:
    """Relative L2 error of per-tensor symmetric `bits`-bit quantization (0 for an all-zero tensor)."""
    a = _vec(x).reshape(1, -1)
    if a.size == 0:
        return 0.0
    return _rel_l2(a, _quantize64(a, bits, "tensor"))


def per_channel_quant_error(x, bits: int) -> float:
    """Relative L2 error with one scale per row: far below per-tensor when rows have different ranges."""
    a = as_matrix(x)
    return _rel_l2(a, _quantize64(a, bits, "row"))


def group_quant_error(x, bits: int, group: int) -> float:
    """Relative L2 error with one scale per `group` consecutive columns of each row (grouped int4, g32/g128)."""
    a = as_matrix(x)
    return _rel_l2(a, _quantize64(a, bits, "row", group))


def row_quant_errors(x, bits: int) -> np.ndarray:
    """Per-row relative L2 error of per-row quantization (0 for an all-zero row): which rows quantize worst."""
    a = as_matrix(x)
    d = np.square(a - _quantize64(a, bits, "row")).sum(axis=1)
    e = np.square(a).sum(axis=1)
    return np.sqrt(np.divide(d, e, out=np.zeros_like(d), where=e >= TINY))


def best_bitwidth(x, budget: float) -> int | None:
    """The smallest of 3, 4, 6, 8 bits whose per-row error is under `budget`, else None."""
    a = as_matrix(x)
    for b in BITWIDTHS:
        if _rel_l2(a, _quantize64(a, b, "row")) < budget:
            return b
    return None


def outlier_channels(x, ratio: float) -> tuple[int, float]:
    """(columns whose max|·| exceeds `ratio` × the median column's, max/median): AWQ/SmoothQuant candidates.

    The median is the upper one, sorted[cols // 2], floored at 1e-20, as in the reference.
    """
    cmax = np.abs(as_matrix(x)).max(axis=0)
    srt = np.sort(cmax)
    median = max(float(srt[cmax.size // 2]), TINY)
    return int(np.count_nonzero(cmax > ratio * median)), float(srt[-1]) / median


# -- sparsity, ternary, cardinality ---------------------------------------------------------------------------------


def _nm_keep(a: np.ndarray, n: int, m: int) -> np.ndarray:
    """The boolean mask of the entries N:M pruning keeps (see `nm_prune`)."""
    n, m = int(n), int(m)
    if m < 1 or n < 0:
        raise OpscopeError(f"N:M sparsity needs m >= 1 and n >= 0, got {n}:{m}")
    rows, cols = a.shape
    groups = -(-cols // m)
    key = np.full((rows, groups * m), -1.0)  # padding ranks after every real entry
    key[:, :cols] = np.abs(a)
    key = key.reshape(rows, groups, m)
    order = np.argsort(-key, axis=-1, kind="stable")
    rank = np.empty_like(order)
    np.put_along_axis(rank, order, np.broadcast_to(np.arange(m), order.shape), axis=-1)
    return (rank < n).reshape(rows, groups * m)[:, :cols]


def nm_prune(x, n: int, m: int) -> np.ndarray:
    """N:M structured pruning (float32): in each row, every m consecutive entries keep their n largest |·|.

    The last group of a row may be shorter; ties keep the earlier entry (the reference's stable sort).
    """
    a = as_matrix(x)
    return np.where(_nm_keep(a, n, m), a, 0.0).astype(np.float32)


def nm_sparsity_error(x, n: int, m: int) -> float:
    """sqrt(dropped energy / total energy) of N:M pruning (`nm_prune`): low means a sparse tensor-core GEMM fits."""
    a = as_matrix(x)
    return _rel_l2(a, np.where(_nm_keep(a, n, m), a, 0.0))


def _ternary64(x: np.ndarray) -> np.ndarray:
    mean_abs = np.abs(x).sum() / max(x.size, 1)
    delta = 0.7 * mean_abs
    kept = np.abs(x)[np.abs(x) > delta]
    alpha = kept.mean() if kept.size else 0.0
    return np.where(x > delta, alpha, np.where(x < -delta, -alpha, 0.0))


def ternary(x) -> np.ndarray:
    """TWN ternary weights (float32, Li & Liu 2016): Δ = 0.7·mean|w|, α = mean |w| over |w| > Δ, t ∈ {−α, 0, +α}."""
    return _ternary64(_vec(x)).astype(np.float32)


def ternary_error(x) -> float:
    """Relative L2 error of the TWN ternary round trip: low means an adds-only ~1.6-bit matmul fits."""
    a = _vec(x)
    return _rel_l2(a, _ternary64(a))


def cardinality(x, round_to: float = PROBE_ROUND_TO, cap: int = CARDINALITY_CAP) -> int:
    """Number of distinct round(v·round_to) integers (half away from zero), at most `cap`: few means LUT weights."""
    snapped = round_half_away(_vec(x).ravel() * float(round_to))
    return min(int(np.unique(snapped).size), int(cap))


# -- the probe ------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Probe:
    """Every host probe of one weight `[rows, cols]`, and the exploit hint (`verdict`) they add up to."""

    rows: int
    cols: int
    stable_rank: float
    effective_rank_90: int
    effective_rank_99: int
    int4_tensor: float  # per-tensor int4 relative error
    int4_channel: float  # per-row int4 relative error
    nm24: float  # 2:4 sparsity relative error
    ternary: float  # TWN relative error
    cardinality: int  # distinct values at 1/1000
    best_bits: int | None  # smallest per-row bit width under 2 % error
    outliers: int  # columns above 6 × the median column max
    outlier_ratio: float  # largest / median column max
    density: float  # fraction of nonzeros

    @property
    def verdict(self) -> str:
        """The reference's exploit hint (opscope-probe): the first rule that matches wins."""
        if self.nm24 < 0.10:
            return HINT_SPARSE24
        if self.cardinality <= 32:
            return HINT_LUT
        if self.stable_rank < 0.10 * self.cols:
            return HINT_LOWRANK
        if self.outliers > 0 and self.outlier_ratio > 8.0:
            return HINT_OUTLIER
        if self.int4_channel < 0.05 <= self.int4_tensor:
            return HINT_CHANNEL_INT4
        if self.best_bits is None:
            return HINT_DENSE
        return f"int{self.best_bits} per-channel" if self.best_bits <= 4 else f"int{self.best_bits}"

    def to_dict(self) -> dict:
        """Every field plus the verdict, JSON-ready."""
        return {**asdict(self), "verdict": self.verdict}


def probe(x) -> Probe:
    """All probes of a 2-D weight at opscope-probe's settings (round_to 1000, budget 0.02, outlier ratio 6)."""
    a = as_matrix(x)
    rows, cols = a.shape
    sigma = spectrum(a)
    count, ratio = outlier_channels(a, PROBE_OUTLIER_RATIO)
    return Probe(
        rows=rows,
        cols=cols,
        stable_rank=stable_rank(a),
        effective_rank_90=effective_rank(sigma, 0.90),
        effective_rank_99=effective_rank(sigma, 0.99),
        int4_tensor=quant_error(a, 4),
        int4_channel=per_channel_quant_error(a, 4),
        nm24=nm_sparsity_error(a, 2, 4),
        ternary=ternary_error(a),
        cardinality=cardinality(a, PROBE_ROUND_TO),
        best_bits=best_bitwidth(a, PROBE_BUDGET),
        outliers=count,
        outlier_ratio=ratio,
        density=float(np.count_nonzero(a)) / a.size,
    )
