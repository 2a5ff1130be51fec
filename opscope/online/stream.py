"""A stream of calls in bounded memory: what every call and every sampled call leave behind.

Every call leaves its input fingerprint: a HyperLogLog of distinct inputs, DataSketches'
frequent-items sketch of the hot ones (with a label for each hot one, when the caller gives
labels), a reservoir of requests. A sampled call (1 in N, instrumented) also leaves each
site's sketches (`SiteSketch`) and the period's running aggregate of every statistic, which a
periodic snapshot writes as tidy rows. Memory depends on the model, never on the stream length;
two workers' `StreamSketch`es merge into the sketch of both streams.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import datasketches
import numpy as np

from opscope.errors import OpscopeError
from opscope.online.hashing import fnv1a_f32_rows
from opscope.online.hll import Hll
from opscope.online.reservoir import Reservoir
from opscope.online.site import HLL_P, LOAD_STATS, SiteSketch

HOT_LG_MAP = 7  # frequent items: up to 3/4 · 2^7 = 96 inputs tracked, counts exact above total/96
RESERVOIR = 32  # requests kept as a uniform sample of the traffic (the reference's reservoir size)
LABELS = 256  # labels kept for hot inputs, pruned to the frequent-items sketch's when exceeded
Key = tuple[str, str, str]  # (site, role, stat)


@dataclass
class Period:
    """Every statistic since the last snapshot, flat in the sampled call's order: count, element-wise
    sum, min, max and the last value (one numpy operation per call, whatever the model's size)."""

    keys: tuple[Key, ...] = ()
    lengths: tuple[int, ...] = ()
    count: int = 0
    total: np.ndarray = field(default_factory=lambda: np.zeros(0))
    low: np.ndarray = field(default_factory=lambda: np.zeros(0))
    high: np.ndarray = field(default_factory=lambda: np.zeros(0))
    last: np.ndarray = field(default_factory=lambda: np.zeros(0))

    def add(self, keys: tuple[Key, ...], lengths: tuple[int, ...], flat: np.ndarray) -> None:
        if not self.count or keys != self.keys:  # the first call of a period (a model has one layout)
            self.keys, self.lengths, self.count = keys, lengths, 1
            self.total, self.low, self.high, self.last = flat.copy(), flat.copy(), flat.copy(), flat.copy()
            return
        self.count += 1
        self.total += flat
        np.minimum(self.low, flat, out=self.low)
        np.maximum(self.high, flat, out=self.high)
        self.last = flat.copy()

    def values(self) -> dict[Key, np.ndarray]:
        """What a snapshot row holds: the period's min of `min`, max of `max`, the last `elemsig`
        (a fingerprint is not averaged), the mean of every other statistic."""
        out, start = {}, 0
        for key, n in zip(self.keys, self.lengths):
            stat, part = key[2], slice(start, start + n)
            src = {"min": self.low, "max": self.high, "elemsig": self.last}.get(stat)
            out[key] = src[part].copy() if src is not None else self.total[part] / self.count
            start += n
        return out

    def merge(self, other: Period) -> Period:
        if not other.count:
            return Period(
                self.keys,
                self.lengths,
                self.count,
                self.total.copy(),
                self.low.copy(),
                self.high.copy(),
                self.last.copy(),
            )
        if not self.count:
            return other.merge(self)
        if other.keys != self.keys:
            raise OpscopeError("cannot merge live sketches of different models (their statistics differ)")
        return Period(
            self.keys,
            self.lengths,
            self.count + other.count,
            self.total + other.total,
            np.minimum(self.low, other.low),
            np.maximum(self.high, other.high),
            other.last.copy(),
        )


@dataclass(frozen=True)
class _Layout:
    """Where each site's pieces sit in a sampled call's statistics (computed once per model)."""

    keys: tuple[Key, ...]
    lengths: tuple[int, ...]
    signatures: dict[int, list[tuple[str, Key]]]  # elemsig length -> (site, key) of every lhs elemsig
    moments: dict[str, tuple[int, int, int, int, int]]  # site -> flat index of lhs nnz, sumsq, min, max; numel
    loads: dict[str, list[tuple[str, Key]]]  # site -> ("role/stat", key)

    @classmethod
    def of(cls, values: Mapping[Key, np.ndarray], numel: Mapping[tuple[str, str], int]) -> _Layout:
        keys = tuple(values)
        lengths = tuple(int(np.asarray(v).size) for v in values.values())
        starts = dict(zip(keys, np.cumsum((0,) + lengths[:-1]).tolist()))
        signatures: dict[int, list[tuple[str, Key]]] = {}
        moments, loads = {}, {}
        for key, n in zip(keys, lengths):
            site, role, stat = key
            if role == "lhs" and stat == "elemsig":
                signatures.setdefault(n, []).append((site, key))
                parts = [(site, "lhs", k) for k in ("nnz", "sumsq", "min", "max")]
                if all(p in starts for p in parts) and numel.get((site, "lhs"), 0) > 0:
                    moments[site] = (*(starts[p] for p in parts), int(numel[(site, "lhs")]))
            elif stat in LOAD_STATS:
                loads.setdefault(site, []).append((f"{role}/{stat}", key))
        return cls(keys, lengths, signatures, moments, loads)


def config_fields(config) -> dict:
    """A `StatConfig` as the JSON-able fields a saved sketch keeps (its roles as a list)."""
    from dataclasses import asdict

    return {k: list(v) if isinstance(v, tuple) else v for k, v in asdict(config).items()}


@dataclass
class StreamSketch:
    """The live sampler's state: bounded in the stream's length, mergeable, saved by `opscope.online.snapshot`."""

    every: int
    calls: int = 0
    samples: int = 0
    fingerprinted: int = 0  # calls whose inputs were fingerprinted
    inputs: Hll = field(default_factory=lambda: Hll(HLL_P))  # every fingerprinted call
    sampled_inputs: Hll = field(default_factory=lambda: Hll(HLL_P))  # the sampled ones
    hot: datasketches.frequent_strings_sketch = field(
        default_factory=lambda: datasketches.frequent_strings_sketch(HOT_LG_MAP)
    )
    labels: dict[str, str] = field(default_factory=dict)  # fingerprint (hex) -> label, for hot inputs
    requests: Reservoir = field(default_factory=lambda: Reservoir(RESERVOIR))
    sites: dict[str, SiteSketch] = field(default_factory=dict)
    period: Period = field(default_factory=Period)  # its count: sampled calls since the last snapshot
    snapshots: int = 0  # periods written so far (the next snapshot's step)
    config: dict | None = None  # the StatConfig its sampled calls recorded (`config_fields`; None: not said)
    _layout: _Layout | None = field(default=None, repr=False, compare=False)

    def __post_init__(self) -> None:
        if isinstance(self.every, bool) or not isinstance(self.every, int) or self.every < 1:
            raise OpscopeError(f"live sampling: every must be an integer >= 1 (1 call in N), got {self.every!r}")

    def fold_call(self, fingerprint: int | None, label: str | None = None) -> None:
        """One call, sampled or not: its input fingerprint (None: not fingerprinted)."""
        self.calls += 1
        if fingerprint is None:
            return
        self.fingerprinted += 1
        key = f"{fingerprint:016x}"
        self.inputs.add_bits(fingerprint)
        self.hot.update(key)
        self.requests.push(label if label is not None else key)
        if label is not None and key not in self.labels:
            self.labels[key] = label
            if len(self.labels) > LABELS:
                self._prune_labels()

    def _prune_labels(self) -> None:
        """Keep the labels of inputs the frequent-items sketch still tracks (bounded memory)."""
        tracked = {
            item[0]
            for item in self.hot.get_frequent_items(datasketches.frequent_items_error_type.NO_FALSE_NEGATIVES, 0)
        }
        self.labels = {k: v for k, v in self.labels.items() if k in tracked}

    def fold_sample(
        self,
        values: Mapping[Key, np.ndarray],
        numel: Mapping[tuple[str, str], int],
        fingerprint: int | None = None,
        keys: Mapping[str, int] | None = None,
    ) -> None:
        """One sampled call's statistics, `(site, role, stat) -> values` as the manifest decodes them
        (`numel` per (site, role); `keys`: an attention site's key count, to fold its loads per key)."""
        self.samples += 1
        if fingerprint is not None:
            self.sampled_inputs.add_bits(fingerprint)
        layout = self._layout
        if layout is None or layout.keys != tuple(values):
            layout = self._layout = _Layout.of(values, numel)
        flat = np.concatenate([np.asarray(v, np.float64).ravel() for v in values.values()])
        self.period.add(layout.keys, layout.lengths, flat)
        moments = self._moments(layout, flat)
        for rows in layout.signatures.values():
            sigs = np.stack([np.asarray(values[key], np.float32).ravel() for _, key in rows])
            for (site, _), fp, sig in zip(rows, fnv1a_f32_rows(sigs).tolist(), sigs):
                self.sites.setdefault(site, SiteSketch()).fold_lhs(fp, sig, moments.get(site))
        for site, parts in layout.loads.items():
            self.sites.setdefault(site, SiteSketch()).fold_loads(
                {name: values[key] for name, key in parts}, (keys or {}).get(site, 0)
            )

    @staticmethod
    def _moments(layout: _Layout, flat: np.ndarray) -> dict[str, tuple[float, float, float]]:
        """Every site's (density, rms, crest factor) at once, from its lhs nnz, sumsq, min and max."""
        if not layout.moments:
            return {}
        idx = np.array(list(layout.moments.values()), dtype=np.int64)
        nnz, sumsq, lo, hi = (flat[idx[:, i]] for i in range(4))
        numel = idx[:, 4].astype(np.float64)
        rms = np.sqrt(np.maximum(sumsq, 0.0) / numel)
        peak = np.maximum(np.abs(lo), np.abs(hi))
        crest = np.divide(peak, rms, out=np.zeros_like(rms), where=rms > 0)
        return {
            site: (float(d), float(r), float(c))
            for site, d, r, c in zip(layout.moments, (nnz / numel).tolist(), rms.tolist(), crest.tolist())
        }

    def take_period(self) -> tuple[int, dict[Key, np.ndarray]]:
        """(step, values) of the period since the last snapshot, then a fresh period."""
        step, values = self.snapshots, self.period.values()
        self.period = Period()
        self.snapshots += 1
        return step, values

    def merge(self, other: StreamSketch) -> StreamSketch:
        """The sketch of both streams (another worker's, the same model and sampling rate)."""
        if other.every != self.every:
            raise OpscopeError(f"cannot merge live sketches sampled 1 in {self.every} and 1 in {other.every}")
        if self.sites and other.sites and not self.sites.keys() & other.sites.keys():
            raise OpscopeError("cannot merge live sketches of different models (no site in common)")
        if self.config is not None and other.config is not None and self.config != other.config:
            differ = sorted(
                k for k in self.config.keys() | other.config.keys() if self.config.get(k) != other.config.get(k)
            )
            raise OpscopeError(
                f"cannot merge live sketches recorded with different sketch settings ({', '.join(differ)}): "
                "sample both with the same --roles and --hist-bins"
            )
        hot = datasketches.frequent_strings_sketch(HOT_LG_MAP)
        hot.merge(self.hot)
        hot.merge(other.hot)
        # fresh site sketches, even for a site only one side has: the merge shares no sketch with its
        # inputs, which may go on folding calls
        empty = SiteSketch()
        sites = {name: s.merge(other.sites.get(name, empty)) for name, s in self.sites.items()}
        sites.update({name: s.merge(empty) for name, s in other.sites.items() if name not in sites})
        period = self.period.merge(other.period)
        out = StreamSketch(
            self.every,
            self.calls + other.calls,
            self.samples + other.samples,
            self.fingerprinted + other.fingerprinted,
            self.inputs.merge(other.inputs),
            self.sampled_inputs.merge(other.sampled_inputs),
            hot,
            {**other.labels, **self.labels},
            self.requests.merge(other.requests),
            sites,
            period,
            max(self.snapshots, other.snapshots),
            self.config if self.config is not None else other.config,
        )
        if len(out.labels) > LABELS:
            out._prune_labels()
        return out
