"""The reference design's fixed-bin quantiles: a histogram over [lo, hi) read back as quantiles."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from opscope.errors import OpscopeError


def _check(lo: object, hi: object, nbins: object) -> None:
    ok_bins = isinstance(nbins, int) and not isinstance(nbins, bool) and nbins >= 1
    ok_range = all(isinstance(x, (int, float)) and math.isfinite(x) for x in (lo, hi)) and lo < hi  # type: ignore
    if not (ok_bins and ok_range):
        raise OpscopeError(f"fixed quantiles need finite lo < hi and int nbins >= 1, got {lo!r}, {hi!r}, {nbins!r}")


class FixedQuantiles:
    """Counts in `nbins` equal bins over [lo, hi]; out-of-range values land in the edge bins, NaN is ignored."""

    def __init__(self, lo: float, hi: float, nbins: int) -> None:
        _check(lo, hi, nbins)
        self.lo, self.hi, self.nbins = float(lo), float(hi), nbins
        self.counts = np.zeros(nbins, dtype=np.int64)

    @property
    def n(self) -> int:
        """Number of values counted."""
        return int(self.counts.sum())

    def push(self, v: float) -> None:
        """Count one value."""
        self.extend([v])

    def extend(self, values: object) -> None:
        """Count many values at once (NaN dropped, out-of-range clamped to the edge bins)."""
        v = np.asarray(values, dtype=np.float64).ravel()
        v = v[~np.isnan(v)]
        bins = np.clip(np.floor((v - self.lo) / (self.hi - self.lo) * self.nbins), 0, self.nbins - 1)
        self.counts += np.bincount(bins.astype(np.int64), minlength=self.nbins)

    def quantile(self, q: float) -> float:
        """Centre of the first bin whose cumulative count reaches ceil(q*n); lo when empty."""
        if math.isnan(q):
            raise OpscopeError("quantile q must be a number in [0, 1], got NaN")
        n = self.n
        if n == 0:
            return self.lo
        target = math.ceil(min(max(q, 0.0), 1.0) * n)
        i = int(np.searchsorted(np.cumsum(self.counts), target, side="left"))
        if i >= self.nbins:
            return self.hi
        return self.lo + (i + 0.5) / self.nbins * (self.hi - self.lo)

    def merge(self, other: FixedQuantiles) -> FixedQuantiles:
        """A new sketch of both streams; the bin layouts must match."""
        if (self.lo, self.hi, self.nbins) != (other.lo, other.hi, other.nbins):
            raise OpscopeError(
                f"cannot merge fixed quantiles over different bins: ({self.lo}, {self.hi}, "
                f"{self.nbins}) and ({other.lo}, {other.hi}, {other.nbins})"
            )
        out = FixedQuantiles(self.lo, self.hi, self.nbins)
        out.counts = self.counts + other.counts
        return out

    def to_dict(self) -> dict[str, Any]:
        """A JSON-able dict."""
        return {"lo": self.lo, "hi": self.hi, "nbins": self.nbins, "counts": self.counts.tolist()}

    @classmethod
    def from_dict(cls, d: Any) -> FixedQuantiles:
        """Rebuild from `to_dict` output; a malformed dict is an OpscopeError."""
        if not isinstance(d, dict) or set(d) != {"lo", "hi", "nbins", "counts"}:
            raise OpscopeError("not opscope fixed quantiles: want a dict with exactly the keys lo, hi, nbins, counts")
        out = cls(d["lo"], d["hi"], d["nbins"])
        counts = d["counts"]
        if not (
            isinstance(counts, list)
            and len(counts) == out.nbins
            and all(isinstance(c, int) and not isinstance(c, bool) and c >= 0 for c in counts)
        ):
            raise OpscopeError(f"not opscope fixed quantiles: counts must be {out.nbins} non-negative ints")
        out.counts = np.array(counts, dtype=np.int64)
        return out
