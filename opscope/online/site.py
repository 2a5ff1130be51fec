"""One site's live sketches: distinct lhs fingerprints, value quantiles, drift over time, loads.

Every sketch here is bounded whatever the stream length and merges with another worker's
sketch of the same site. Distinct counts use our own `Hll` (the reference's numbers: the
splitmix64 of an FNV-1a fingerprint, linear counting below 2.5·m); value quantiles use Apache
DataSketches' KLL (rank error about 1.3 % at k = 200, any value range, a standard format).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import datasketches
import numpy as np

from opscope.online.hll import Hll

HLL_P = 12  # the reference's precision: 4096 one-byte registers
KLL_K = 200  # DataSketches' default accuracy parameter
EPOCHS = 32  # the drift series keeps at most this many epochs, halving its resolution when full
FIRST_EPOCH = 4  # samples per epoch until the series first fills
LOAD_STATS = ("attn_krecv", "attn_qmax", "route_load")  # vectors summed over samples (who gets the traffic)


FIELDS = ("density", "rms", "crest")


@dataclass
class Drift:
    """Per-epoch sums (and sums of squares) of a site's density, rms and crest factor (max|x| / rms):
    bounded at `EPOCHS` epochs by merging neighbours and doubling the epoch length when full."""

    epoch_len: int = FIRST_EPOCH
    epochs: list[list[float]] = field(default_factory=list)  # [samples, Σd, Σd², Σrms, Σrms², Σcrest, Σcrest²]

    def push(self, density: float, rms: float, crest: float) -> None:
        if not self.epochs or self.epochs[-1][0] >= self.epoch_len:
            self.epochs.append([0.0] * (1 + 2 * len(FIELDS)))
        e = self.epochs[-1]
        e[0] += 1
        for i, v in enumerate((density, rms, crest)):
            e[1 + 2 * i] += v
            e[2 + 2 * i] += v * v
        if len(self.epochs) > EPOCHS:
            self._halve()

    def _halve(self) -> None:
        self.epochs = [
            [a + b for a, b in zip(*self.epochs[i : i + 2])] if i + 1 < len(self.epochs) else self.epochs[i]
            for i in range(0, len(self.epochs), 2)
        ]
        self.epoch_len *= 2

    def merge(self, other: Drift) -> Drift:
        """Both series at the coarser resolution, epoch by epoch (parallel workers' epochs cover
        about the same stretch of time)."""
        a = Drift(self.epoch_len, [list(e) for e in self.epochs])
        b = Drift(other.epoch_len, [list(e) for e in other.epochs])
        while a.epoch_len < b.epoch_len:
            a._halve()
        while b.epoch_len < a.epoch_len:
            b._halve()
        width = max(len(a.epochs), len(b.epochs))
        pad = [[0.0] * (1 + 2 * len(FIELDS))]
        epochs = [
            [x + y for x, y in zip(ea, eb)]
            for ea, eb in zip(a.epochs + pad * (width - len(a.epochs)), b.epochs + pad * (width - len(b.epochs)))
        ]
        out = Drift(a.epoch_len, epochs)
        while len(out.epochs) > EPOCHS:
            out._halve()
        return out

    def thirds(self) -> tuple[list[float], list[float]] | None:
        """The sums of the first and of the last third of the epochs (None: fewer than 3 epochs)."""
        if len(self.epochs) < 3:
            return None
        third = len(self.epochs) // 3
        first = [sum(col) for col in zip(*self.epochs[:third])]
        last = [sum(col) for col in zip(*self.epochs[-third:])]
        return first, last


@dataclass
class SiteSketch:
    """What the sampled calls said about one site (bounded, mergeable)."""

    samples: int = 0
    distinct: Hll = field(default_factory=lambda: Hll(HLL_P))
    values: datasketches.kll_floats_sketch = field(default_factory=lambda: datasketches.kll_floats_sketch(KLL_K))
    drift: Drift = field(default_factory=Drift)
    loads: dict[str, np.ndarray] = field(default_factory=dict)  # "role/stat" -> sum over samples
    load_samples: int = 0

    def fold_lhs(self, fingerprint: int, elemsig: np.ndarray, moments: tuple[float, float, float] | None) -> None:
        """One sampled call's lhs: its elemsig fingerprint (the reference's `hash_f32` of the spread
        elements), those elements as a value sample, its (density, rms, crest factor) for drift."""
        self.samples += 1
        self.distinct.add_bits(fingerprint)
        self.values.update(np.asarray(elemsig, np.float32).ravel())
        if moments is not None:
            self.drift.push(*moments)

    def fold_loads(self, loads: dict[str, np.ndarray], keys: int = 0) -> None:
        """One sampled call's attention or routing vectors, summed: expert loads as they are, attention
        received per key (`keys`: the key count, folding batch and heads), the per-query peak's mean."""
        self.load_samples += 1
        for key, vec in loads.items():
            stat = key.rpartition("/")[2]
            vec = np.asarray(vec, np.float64).ravel()
            if stat == "attn_krecv" and keys > 0 and vec.size % keys == 0:
                vec = vec.reshape(-1, keys).sum(axis=0)
            elif stat == "attn_qmax":
                vec = np.array([vec.mean()]) if vec.size else vec
            have = self.loads.get(key)
            self.loads[key] = vec.copy() if have is None or have.shape != vec.shape else have + vec

    def merge(self, other: SiteSketch) -> SiteSketch:
        values = datasketches.kll_floats_sketch(KLL_K)
        values.merge(self.values)
        values.merge(other.values)
        loads = {k: v.copy() for k, v in self.loads.items()}
        for k, v in other.loads.items():
            loads[k] = loads[k] + v if k in loads and loads[k].shape == v.shape else v.copy()
        return SiteSketch(
            self.samples + other.samples,
            self.distinct.merge(other.distinct),
            values,
            self.drift.merge(other.drift),
            loads,
            self.load_samples + other.load_samples,
        )

    def recurrence(self) -> float:
        """The reference's recurrence over the sampled calls: clamp(1 − distinct/samples, 0, 1)."""
        if not self.samples:
            return 0.0
        return float(min(max(1.0 - self.distinct.estimate() / self.samples, 0.0), 1.0))
