"""What a live stream says: recurrence per site with the memoize verdict, hot inputs, drift, loads.

Two recurrences per site. The reference's, over the sampled calls: 1 − distinct/samples. And
the stream's, what a cache in front of the site would hit over *every* call: a 1-in-N sample
sees fewer repeats than the stream holds (500 calls over 8 inputs repeat 98.4 %, their every
5th only 92 %), so the stream's distinct count is scaled from the distinct inputs of every call
(fingerprinted on the host, cheap): D_site ≈ D_site,sampled · D_inputs / D_inputs,sampled (a
site that tells inputs apart counts as many as the inputs; one that merges them keeps its
share), and recurrence = 1 − D_site / calls. The verdict reads the stream's when inputs were
fingerprinted, the reference's otherwise: above 0.5, memoize.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import datasketches
import numpy as np

from opscope.online.site import FIELDS
from opscope.online.stream import StreamSketch

MEMOIZE_ABOVE = 0.5  # the reference's threshold on recurrence
TOP_SITES = 12  # the reference's report length
HOT = 5
DENSITY_SHIFT = 0.05  # absolute change of the nonzero fraction that counts as drift
SCALE_SHIFT = 1.25  # rms or crest factor changing by more than this factor (either way) counts as drift
DRIFT_Z = 4.0  # standard errors a change must exceed (first third vs last third, Welch)
DRIFT_MIN_SAMPLES = 8  # sampled calls each third needs before drift is judged
QUANTILES = (0.01, 0.5, 0.99)


@dataclass(frozen=True)
class SiteRecurrence:
    site: str
    samples: int
    distinct: float  # HyperLogLog estimate over the sampled calls
    sampled: float  # the reference's recurrence: 1 − distinct/samples
    stream: float | None  # the estimate over every call (None: inputs not fingerprinted)
    quantiles: tuple[float, ...]  # of the sampled lhs elements, at QUANTILES
    verdict: str


@dataclass(frozen=True)
class HotInput:
    label: str
    calls: int  # DataSketches' estimate (exact for inputs above 1/96 of the traffic)
    share: float


@dataclass(frozen=True)
class SiteDrift:
    site: str
    first: tuple[float, ...]  # mean (density, rms, crest) over the first third of the sampled calls
    last: tuple[float, ...]  # ... over the last third
    first_samples: int
    last_samples: int
    verdict: str


@dataclass(frozen=True)
class SiteLoad:
    site: str
    stat: str
    summary: str
    shares: list[float]  # per key or per expert, summing to 1 (attn_qmax: the mean per-query peak)


@dataclass(frozen=True)
class LiveReport:
    calls: int
    samples: int
    every: int
    distinct_inputs: float | None  # every call's inputs, HyperLogLog (None: not fingerprinted)
    input_recurrence: float | None
    sites: list[SiteRecurrence]
    hot: list[HotInput]
    drift: list[SiteDrift]
    loads: list[SiteLoad]
    requests: list[str]  # the reservoir: a uniform sample of the traffic

    def to_dict(self) -> dict:
        return asdict(self)


def _clamp(x: float) -> float:
    return float(min(max(x, 0.0), 1.0))


def _verdict(recur: float) -> str:
    if recur > MEMOIZE_ABOVE:
        return f"memoize — inputs repeat {recur:.0%}"
    return "(inputs mostly distinct)"


def _recurrences(sk: StreamSketch) -> list[SiteRecurrence]:
    d_in = sk.inputs.estimate() if sk.fingerprinted else 0.0
    d_in_sampled = sk.sampled_inputs.estimate()
    rows = []
    for name, s in sk.sites.items():
        if not s.samples:
            continue
        distinct = s.distinct.estimate()
        stream = None
        if sk.fingerprinted and d_in_sampled > 0:
            stream = _clamp(1.0 - min(d_in, distinct * d_in / d_in_sampled) / sk.fingerprinted)
        recur = s.recurrence()
        qs = tuple(float(q) for q in s.values.get_quantiles(list(QUANTILES))) if not s.values.is_empty() else ()
        rows.append(
            SiteRecurrence(
                name, s.samples, distinct, recur, stream, qs, _verdict(stream if stream is not None else recur)
            )
        )
    rows.sort(key=lambda r: (-(r.stream if r.stream is not None else r.sampled), r.site))
    return rows


def _hot(sk: StreamSketch) -> list[HotInput]:
    if not sk.fingerprinted:
        return []
    items = sk.hot.get_frequent_items(datasketches.frequent_items_error_type.NO_FALSE_POSITIVES, 1)
    return [HotInput(sk.labels.get(key, key), int(est), est / sk.fingerprinted) for key, est, _, _ in items[:HOT]]


def _moments(sums: list[float], i: int) -> tuple[float, float]:
    """(mean, variance of the mean) of field `i` from [n, Σ, Σ², ...] sums."""
    n, total, squares = sums[0], sums[1 + 2 * i], sums[2 + 2 * i]
    mean = total / n
    var = max(squares / n - mean * mean, 0.0) * n / max(n - 1, 1)
    return mean, var / n


def _drift(sk: StreamSketch) -> list[SiteDrift]:
    """First third of the sampled calls against the last third: a field moved when the change is both
    large (DENSITY_SHIFT, SCALE_SHIFT) and beyond DRIFT_Z standard errors (not one unlucky sample)."""
    out = []
    for name, s in sk.sites.items():
        thirds = s.drift.thirds()
        if thirds is None or min(thirds[0][0], thirds[1][0]) < DRIFT_MIN_SAMPLES:
            continue
        (a, b), moved = thirds, []
        first, last = [], []
        for i, what in enumerate(FIELDS):
            (m1, v1), (m2, v2) = _moments(a, i), _moments(b, i)
            first.append(m1)
            last.append(m2)
            big = (
                abs(m2 - m1) > DENSITY_SHIFT
                if what == "density"
                else (m1 > 0 and m2 > 0 and max(m1 / m2, m2 / m1) > SCALE_SHIFT)
            )
            if big and abs(m2 - m1) > DRIFT_Z * np.sqrt(v1 + v2):
                moved.append(f"{what} {m1:.3g} → {m2:.3g}")
        out.append(
            SiteDrift(
                name,
                tuple(first),
                tuple(last),
                int(a[0]),
                int(b[0]),
                "drifting: " + ", ".join(moved) if moved else "stable",
            )
        )
    return out


def _load_summary(role: str, stat: str, vec: np.ndarray, samples: int) -> tuple[str, list[float]] | None:
    """One line on who gets the traffic: attention per key, a router's probability or picks per expert."""
    if stat == "attn_qmax":
        what = "mean top-1 gate probability" if role == "gate" else "mean per-query peak"
        return f"{what} {vec.mean() / samples:.3f}", [float(vec.mean() / samples)]
    total = float(vec.sum())
    if total <= 0:
        return None
    shares = vec / total
    order = np.argsort(-shares, kind="stable")
    if stat == "attn_krecv" and role != "gate":
        top = order[:4]
        return (
            f"top-4 of {len(vec)} keys take {shares[top].sum():.0%} of the attention (keys "
            f"{', '.join(str(int(i)) for i in top)}; uniform: {min(4, len(vec)) / len(vec):.0%})",
            [float(x) for x in shares],
        )
    what = "gate probability" if stat == "attn_krecv" else "routed tokens"
    cold = [int(i) for i in np.flatnonzero(shares < 0.5 / len(vec))]
    return (
        f"{what}: hottest expert {int(order[0])} takes {shares[order[0]]:.0%} (uniform {1 / len(vec):.0%}); "
        + (f"cold experts {', '.join(map(str, cold))}" if cold else "no cold expert"),
        [float(x) for x in shares],
    )


def _loads(sk: StreamSketch) -> list[SiteLoad]:
    out = []
    for name, s in sk.sites.items():
        for key, vec in s.loads.items():
            role, _, stat = key.rpartition("/")
            line = _load_summary(role, stat, vec, s.load_samples)
            if line is not None:
                out.append(SiteLoad(name, stat, line[0], line[1]))
    return out


def live_report(sketch: StreamSketch) -> LiveReport:
    """Everything the sketches say about the stream so far."""
    d_in = sketch.inputs.estimate() if sketch.fingerprinted else None
    recur_in = _clamp(1.0 - d_in / sketch.fingerprinted) if d_in is not None else None
    return LiveReport(
        sketch.calls,
        sketch.samples,
        sketch.every,
        d_in,
        recur_in,
        _recurrences(sketch),
        _hot(sketch),
        _drift(sketch),
        _loads(sketch),
        [str(r) for r in sketch.requests.items],
    )


def live_report_text(r: LiveReport, top: int = TOP_SITES) -> str:
    """The report as the terminal shows it."""
    lines = [f"live: {r.calls} calls, {r.samples} sampled (1 in {r.every})"]
    if r.distinct_inputs is not None:
        lines.append(
            f"  inputs: ≈ {r.distinct_inputs:.1f} distinct over every call → "
            f"{r.input_recurrence:.1%} of calls repeat an earlier one"
        )
    if r.sites:
        lines += [
            "",
            f"recurrence per site (top {min(top, len(r.sites))} of {len(r.sites)}; sampled: the reference's "
            "1 − distinct/samples; stream: over every call)",
            f"  {'site':<40} {'samples':>7} {'distinct':>8} {'sampled':>7} {'stream':>7}  verdict",
        ]
        for s in r.sites[:top]:
            stream = f"{s.stream:7.3f}" if s.stream is not None else f"{'-':>7}"
            lines.append(
                f"  {s.site[:40]:<40} {s.samples:>7} {s.distinct:>8.1f} {s.sampled:>7.3f} {stream}  {s.verdict}"
            )
    else:
        lines.append("  no sampled call yet (the first sampled call is call number N)")
    if r.hot:
        lines += ["", "hot inputs (every call)"]
        lines += [f"  {h.calls:>6} calls ({h.share:5.1%})  {h.label[:90]}" for h in r.hot]
    drifting = [d for d in r.drift if d.verdict != "stable"]
    if r.drift:
        lines += [
            "",
            f"drift (first third vs last third of the sampled calls): {len(drifting)} of {len(r.drift)} sites moved",
        ]
        lines += [f"  {d.site[:40]:<40} {d.verdict}" for d in drifting[:top]]
    if r.loads:
        lines += ["", "attention and routing loads (sampled calls)"]
        lines += [f"  {ld.site[:40]:<40} {ld.summary}" for ld in r.loads[:top]]
    return "\n".join(lines)
