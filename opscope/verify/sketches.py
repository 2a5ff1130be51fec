"""The sketches a site's tensors have, computed on the host from another framework's tensors, and
how close a recorded sketch must be to count as the same.

Matmul and convolution roles: the scalar sketches (min, max, mean, l1, sumsq, nnz, kurtosis) of
`opscope.run.host_stats`, the numpy twin of the device's kernels. Attention probabilities:
per query the peak, the second peak and the entropy, per key the mass received
(`dialect.dynamics`' definitions). Routing: each expert's count of chosen indices. Residual adds:
Σh², Σd² and the mean over rows of cos(h, h + d).

Tolerances are for f32 computed in another order (IREE tiles and vectorizes its sums; PyTorch
calls oneDNN or its own loops): relative 1e-3 on sums and extremes against the tensor's scale
(measured: 1e-6 .. 3e-5 on the models of `tests/test_verify.py`), counts exact up to 1 in 1,000
elements (a value rounding to zero on one side), attention and cosine values 1e-4 absolute.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from opscope.ir.stat_config import StatConfig
from opscope.run.host_stats import host_stats

SCALAR_KINDS = ("min", "max", "mean", "l1", "sumsq", "nnz", "kurtosis")
RTOL = 1e-3
ATOL_PROB = 1e-4
_SCALARS_ONLY = StatConfig(hist_bins=0, per_channel=False, per_position=False, adjacency=False)


@dataclass(frozen=True)
class Difference:
    """One recorded sketch that is not the reference's: where, what, both values and the bound."""

    site: str
    role: str
    stat: str
    recorded: float
    reference: float
    bound: float
    index: int = 0

    def line(self) -> str:
        at = f"[{self.index}]" if self.index else ""
        return (
            f"{self.site} {self.role} {self.stat}{at}: recorded {self.recorded:.6g}, "
            f"reference {self.reference:.6g} (|Δ| {abs(self.recorded - self.reference):.3g} > {self.bound:.3g})"
        )


def tensor_sketches(x: np.ndarray) -> dict[str, np.ndarray]:
    """The scalar sketches of `x`."""
    got = host_stats(np.asarray(x, np.float32), _SCALARS_ONLY)
    return {k: got[k] for k in SCALAR_KINDS}


def tensor_bounds(x: np.ndarray, ref: dict[str, np.ndarray]) -> dict[str, float]:
    """How far each scalar sketch of `x` may be from the reference's."""
    x = np.asarray(x, np.float64)
    n = max(1, x.size)
    rms = float(np.sqrt(ref["sumsq"][0] / n)) if ref["sumsq"][0] > 0 else 0.0
    scale = max(rms, float(np.abs(x).max()) if x.size else 0.0)
    return {
        "min": RTOL * scale + 1e-7,
        "max": RTOL * scale + 1e-7,
        "mean": RTOL * rms + 1e-7,
        "l1": RTOL * abs(float(ref["l1"][0])) + 1e-7,
        "sumsq": RTOL * abs(float(ref["sumsq"][0])) + 1e-7,
        "nnz": 1e-3 * n + 0.5,
        "kurtosis": 1e-2 * abs(float(ref["kurtosis"][0])) + 1e-2,
    }


def attention_sketches(probs: np.ndarray) -> dict[str, np.ndarray]:
    """Per query peak, second peak and entropy, per key received mass, of probabilities `[..., Sq, Sk]`."""
    p = np.asarray(probs, np.float64)
    p = p.reshape(-1, *p.shape[-2:]) if p.ndim >= 2 else p.reshape(1, 1, -1)
    top = np.sort(p, axis=-1)
    with np.errstate(divide="ignore", invalid="ignore"):
        plogp = np.where(p > 0, p * np.log(np.where(p > 0, p, 1.0)), 0.0)
    return {
        "attn_qmax": top[..., -1].reshape(-1),
        "gate_top2": (top[..., -2] if p.shape[-1] > 1 else np.zeros(p.shape[:-1])).reshape(-1),
        "attn_entropy": (-plogp.sum(-1)).reshape(-1),
        "attn_krecv": p.sum(-2).reshape(-1),
    }


def attention_bounds(probs: np.ndarray) -> dict[str, float]:
    """Attention sketches' bounds: absolute, the key mass's scaled by the queries summed."""
    sq = np.asarray(probs).shape[-2] if np.ndim(probs) >= 2 else 1
    return {
        "attn_qmax": ATOL_PROB,
        "gate_top2": ATOL_PROB,
        "attn_entropy": 10 * ATOL_PROB,
        "attn_krecv": ATOL_PROB * sq,
    }


def route_load(indices: np.ndarray, experts: int) -> np.ndarray:
    """Each expert's count among the chosen `indices` (others are not counted)."""
    flat = np.asarray(indices).reshape(-1).astype(np.int64)
    flat = flat[(flat >= 0) & (flat < experts)]
    return np.bincount(flat, minlength=experts).astype(np.float64)


def residual_sketches(h: np.ndarray, d: np.ndarray) -> dict[str, np.ndarray]:
    """Σh², Σd² and the mean over rows of cos(h, h + d) (rows: the last dim)."""
    h = np.asarray(h, np.float64).reshape(-1, np.shape(h)[-1])
    d = np.asarray(d, np.float64).reshape(h.shape)
    s = h + d
    cos = (h * s).sum(1) / (np.linalg.norm(h, axis=1) * np.linalg.norm(s, axis=1) + 1e-12)
    return {
        "res_a_sumsq": np.array([np.square(h).sum()]),
        "res_b_sumsq": np.array([np.square(d).sum()]),
        "res_cos": np.array([cos.mean()]),
    }


def residual_bounds(ref: dict[str, np.ndarray]) -> dict[str, float]:
    return {
        "res_a_sumsq": RTOL * float(ref["res_a_sumsq"][0]) + 1e-7,
        "res_b_sumsq": RTOL * float(ref["res_b_sumsq"][0]) + 1e-7,
        "res_cos": ATOL_PROB,
    }


def differences(
    site: str, role: str, recorded: dict[str, np.ndarray], ref: dict[str, np.ndarray], bounds: dict[str, float]
) -> tuple[int, list[Difference]]:
    """(how many sketches were compared, those beyond their bound): every stat both sides have."""
    compared, found = 0, []
    for stat, want in ref.items():
        got = recorded.get(stat)
        if got is None:
            continue
        want = np.asarray(want, np.float64).reshape(-1)
        got = np.asarray(got, np.float64).reshape(-1)
        compared += 1
        if got.shape != want.shape:
            found.append(Difference(site, role, stat, float(got.size), float(want.size), 0.0))
            continue
        gap = np.abs(got - want)
        gap = np.where(np.isnan(got) != np.isnan(want), np.inf, np.nan_to_num(gap))
        worst = int(np.argmax(gap)) if gap.size else 0
        if gap.size and gap[worst] > bounds[stat]:
            found.append(Difference(site, role, stat, float(got[worst]), float(want[worst]), bounds[stat], worst))
    return compared, found
