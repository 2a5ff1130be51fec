"""opscope.online: the reference design's sketch tests, merges, hashes against pure Python, round trips."""

from __future__ import annotations

import json

import numpy as np
import pytest

from opscope.errors import OpscopeError
from opscope.online import FixedQuantiles, Hll, Reservoir, fingerprint, fnv1a_f32, fnv1a_f32_rows, splitmix64

M64 = (1 << 64) - 1


def ref_splitmix64(z: int) -> int:
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
    return z ^ (z >> 31)


def ref_fnv1a_f32(values) -> int:
    h = 0xCBF29CE484222325
    for x in np.asarray(values, dtype=np.float32).ravel():
        h = ((h ^ int.from_bytes(x.tobytes(), "little")) * 0x100000001B3) & M64
    return h


# The reference design's three tests.


def test_reservoir_holds_k():
    r = Reservoir(64)
    r.extend(range(10_000))
    assert len(r.items) == 64 and r.seen == 10_000


def test_fixed_quantiles_uniform_grid():
    q = FixedQuantiles(0.0, 1.0, 100)
    for i in range(10_000):
        q.push(i / 10_000)
    assert abs(q.quantile(0.5) - 0.5) < 0.05
    assert q.quantile(0.9) > q.quantile(0.1)


def test_hll_distinct_and_idempotent():
    h = Hll(12)
    for i in range(10_000):
        h.add_bits(i)
    est = h.estimate()
    assert abs(est - 10_000) / 10_000 < 0.08
    for i in range(10_000):
        h.add_bits(i)
    assert abs(h.estimate() - est) / est < 0.01


# Merges.


def test_hll_merge_equals_whole():
    a, b, whole = Hll(10), Hll(10), Hll(10)
    a.add_bits(np.arange(0, 5000))
    b.add_bits(np.arange(5000, 10_000))
    whole.add_bits(np.arange(10_000))
    merged = a.merge(b)
    assert merged == whole and merged.estimate() == whole.estimate()
    assert a != whole  # merge returned a new sketch
    a.update(b)
    assert a == whole
    with pytest.raises(OpscopeError, match="p=10 and p=12"):
        a.merge(Hll(12))


def test_quantiles_merge_equals_whole():
    rng = np.random.default_rng(0)
    x = rng.normal(size=4000)
    a, b, whole = (FixedQuantiles(-3, 3, 50) for _ in range(3))
    a.extend(x[:1500])
    b.extend(x[1500:])
    whole.extend(x)
    assert np.array_equal(a.merge(b).counts, whole.counts) and whole.n == 4000
    with pytest.raises(OpscopeError):
        a.merge(FixedQuantiles(-3, 3, 51))


def test_reservoir_merge():
    a, b = Reservoir(64), Reservoir(64)
    a.extend(range(0, 5000))
    b.extend(range(5000, 10_000))
    m = a.merge(b)
    assert len(m.items) == 64 and m.seen == 10_000
    assert set(m.items) <= set(a.items) | set(b.items)
    assert abs(np.mean(m.items) - 5000) < 1500
    assert m.to_dict() == a.merge(b).to_dict()  # deterministic
    small = Reservoir(64)
    small.extend([1, 2])
    assert small.merge(small).items == [1, 2, 1, 2]
    with pytest.raises(OpscopeError, match="k=64 and k=8"):
        a.merge(Reservoir(8))


# Hashes against pure-Python references.


def test_splitmix64_vectorized_matches_scalar():
    x = np.random.default_rng(1).integers(0, 2**64, size=500, dtype=np.uint64)
    got = splitmix64(x)
    assert got.dtype == np.uint64
    assert [int(v) for v in got] == [ref_splitmix64(int(v)) for v in x]
    assert [splitmix64(int(v)) for v in x] == [ref_splitmix64(int(v)) for v in x]


def test_splitmix64_generator_first_output():
    assert splitmix64(0x9E3779B97F4A7C15) == 0xE220A8397B1DCDAF


def test_fnv1a_f32():
    assert fnv1a_f32([]) == 0xCBF29CE484222325
    v = np.random.default_rng(2).normal(size=37).astype(np.float32)
    assert fnv1a_f32(v) == ref_fnv1a_f32(v)
    assert fnv1a_f32(v.astype(np.float64)) == fnv1a_f32(v)  # cast to f32 first
    m = np.random.default_rng(3).normal(size=(9, 16)).astype(np.float32)
    rows = fnv1a_f32_rows(m)
    assert rows.dtype == np.uint64 and [int(h) for h in rows] == [fnv1a_f32(r) for r in m]


def test_fingerprint_sensitivity():
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    base = fingerprint([x, np.ones(2)])
    assert fingerprint([x.copy(), np.ones(2)]) == base
    assert fingerprint([np.asfortranarray(x), np.ones(2)]) == base
    y = x.copy()
    y[2, 3] = 99
    assert fingerprint([y, np.ones(2)]) != base
    assert fingerprint([x.astype(np.int32), np.ones(2)]) != base
    assert fingerprint([x.reshape(4, 3), np.ones(2)]) != base
    assert isinstance(base, int) and 0 <= base <= M64


def test_hll_vectorized_matches_scalar():
    keys = np.random.default_rng(4).integers(0, 2**64, size=3000, dtype=np.uint64)
    keys[:5] = [0, 1, 2**63, M64, 7]
    vec, one = Hll(8), Hll(8)
    vec.add_bits(keys)
    for k in keys:
        one.add_bits(int(k))
    assert vec == one
    f = Hll(8)
    f.add_f32([1.5, -0.0, 1.5])
    g = Hll(8)
    for bits in np.array([1.5, -0.0], dtype=np.float32).view(np.uint32):
        g.add_bits(int(bits))
    assert f == g


# Serialization and refusals.


def test_round_trips():
    h = Hll(6)
    h.add_bits(np.arange(100))
    assert Hll.from_bytes(h.to_bytes()) == h and h.nbytes == 64
    r = Reservoir(5)
    r.extend(range(40))
    r2 = Reservoir.from_dict(json.loads(json.dumps(r.to_dict())))
    assert (r2.k, r2.seen, r2.items) == (r.k, r.seen, r.items)
    q = FixedQuantiles(-1, 1, 8)
    q.extend([-5, 0.1, 0.2, np.nan, 5])
    assert q.n == 4 and q.counts[0] == 1 and q.counts[-1] == 1
    q2 = FixedQuantiles.from_dict(json.loads(json.dumps(q.to_dict())))
    assert np.array_equal(q2.counts, q.counts) and q2.quantile(0.5) == q.quantile(0.5)
    assert FixedQuantiles(2, 3, 4).quantile(0.5) == 2


def test_hll_corrupt_bytes():
    data = Hll(6).to_bytes()
    for bad in (
        data[:3],
        data[:-1],
        b"XSHL" + data[4:],
        data[:4] + b"\x02" + data[5:],
        data[:5] + b"\x07" + data[6:],
        data[:-1] + bytes([60]),
    ):
        with pytest.raises(OpscopeError, match="not an opscope HyperLogLog"):
            Hll.from_bytes(bad)


@pytest.mark.parametrize(
    "d",
    [
        None,
        {},
        {"k": 0, "seen": 0, "items": []},
        {"k": 2, "seen": 5, "items": [1]},
        {"k": 2, "seen": 1, "items": "a"},
        {"k": 2, "seen": 0, "items": [], "x": 1},
    ],
)
def test_reservoir_bad_dicts(d):
    with pytest.raises(OpscopeError):
        Reservoir.from_dict(d)


@pytest.mark.parametrize(
    "d",
    [
        [],
        {"lo": 0, "hi": 1, "nbins": 2},
        {"lo": 1, "hi": 0, "nbins": 2, "counts": [0, 0]},
        {"lo": 0, "hi": 1, "nbins": 2, "counts": [0]},
        {"lo": 0, "hi": 1, "nbins": 2, "counts": [0, -1]},
        {"lo": 0, "hi": 1, "nbins": 2, "counts": [0, 1.5]},
    ],
)
def test_quantiles_bad_dicts(d):
    with pytest.raises(OpscopeError):
        FixedQuantiles.from_dict(d)


def test_bad_constructor_args():
    for make in (
        lambda: Hll(3),
        lambda: Hll(19),
        lambda: Hll(True),
        lambda: Reservoir(0),
        lambda: FixedQuantiles(1, 1, 4),
        lambda: FixedQuantiles(0, 1, 0),
        lambda: FixedQuantiles(0, float("inf"), 4),
    ):
        with pytest.raises(OpscopeError):
            make()


# Both estimators of HyperLogLog, and merges of unequal streams.


@pytest.mark.parametrize("n", [100, 1_000, 5_000, 20_000, 50_000, 100_000, 200_000])
def test_hll_estimate_within_three_sigma_in_both_ranges(n):
    """p = 12 (m = 4096): linear counting below 2.5·m = 10,240 distinct, the raw (bias-constant) estimate
    above. Keys 0..n-1 (deterministic); each estimate within 3σ of n, σ = 1.04/√m · n (the raw
    estimator's standard error; linear counting's is smaller in its range)."""
    m = 1 << 12
    h = Hll(12)
    h.add_bits(np.arange(n, dtype=np.uint64))
    sigma = 1.04 / np.sqrt(m) * n
    assert abs(h.estimate() - n) <= 3 * sigma, (n, h.estimate(), sigma)
    zeros = int(np.count_nonzero(h.registers == 0))
    raw = 0.7213 / (1 + 1.079 / m) * m * m / float(np.sum(np.exp2(-h.registers.astype(np.float64))))
    # the branch this n exercises: the small sizes count empty registers, the large ones never do
    assert (raw <= 2.5 * m and zeros > 0) == (n < 10_000), (n, raw, zeros)


def test_hll_estimate_is_the_published_closed_form():
    """Flajolet et al.'s estimators on hand-set registers (p = 12, m = 4096), rel 1e-12: raw
    α_m·m²/Σ2^-M with α_m = 0.7213/(1 + 1.079/m); all registers 5 gives α_m·m·32 ≈ 94,500 (above 2.5·m:
    raw). Half the registers empty, the rest 1: raw α_m·m²/(m/2 + m/4) ≈ 3,937 ≤ 2.5·m with empty
    registers, so linear counting m·ln(m/V) = m·ln 2."""
    m = 4096
    alpha = 0.7213 / (1 + 1.079 / m)
    h = Hll(12)
    h.registers[:] = 5
    assert h.estimate() == pytest.approx(alpha * m * 32, rel=1e-12)
    h.registers[: m // 2] = 0
    h.registers[m // 2 :] = 1
    assert alpha * m * m / (m / 2 + m / 4) <= 2.5 * m
    assert h.estimate() == pytest.approx(m * np.log(2), rel=1e-12)
    h.registers[:] = 1  # no empty register left: raw, however small
    assert h.estimate() == pytest.approx(alpha * m * 2, rel=1e-12)


def test_fixed_quantiles_return_the_bin_centre_of_the_ceil_rank():
    """Ten bins of width 1 over [0, 10), one value per bin: quantile q is the centre of bin ceil(q·10) − 1
    (the first bin whose cumulative count reaches ceil(q·n)); 0 → the first bin, 1 → the last."""
    q = FixedQuantiles(0.0, 10.0, 10)
    q.extend(np.arange(10) + 0.25)
    for p, want in ((0.0, 0.5), (0.05, 0.5), (0.1, 0.5), (0.11, 1.5), (0.5, 4.5), (0.55, 5.5), (1.0, 9.5)):
        assert q.quantile(p) == want, p
    q.extend([3.5] * 10)  # bin 3 now holds 11 of 20 (cumulative 3, 14, 15, ...): ranks 4 to 14 fall in it
    assert q.quantile(0.5) == 3.5 and q.quantile(0.2) == 3.5 and q.quantile(0.75) == 4.5  # cum 14, 15


def _tagged(side: str, k: int, seen: int) -> Reservoir:
    """A k-reservoir that saw `seen` items, holding min(seen, k) items tagged with its side."""
    return Reservoir.from_dict({"k": k, "seen": seen, "items": [(side, i) for i in range(min(seen, k))]})


def _unequal_merges(k: int = 64, trials: int = 200) -> tuple[int, float, float]:
    """(slots the small side got, their expectation Σ k·n_a/(n_a+n_b), its binomial σ) over `trials`
    merges of a side that saw ~100 items with one that saw ~10,000 (sizes varied, so every merge
    draws other hashes; half of them with the small side second). Each merge is checked whole."""
    expected, variance, small = 0.0, 0.0, 0
    for t in range(trials):
        n_a, n_b = 100 + t, 10_000 + 37 * t
        a, b = _tagged("a", k, n_a), _tagged("b", k, n_b)
        merged = a.merge(b) if t % 2 else b.merge(a)
        assert merged.seen == n_a + n_b and len(merged.items) == k
        assert len(set(merged.items)) == k  # no item taken twice
        p = n_a / (n_a + n_b)
        expected += k * p
        variance += k * p * (1 - p)
        small += sum(side == "a" for side, _ in merged.items)
    return small, expected, float(np.sqrt(variance))


def test_reservoir_merge_of_unequal_streams_favours_the_side_that_saw_more():
    """A uniform sample of the union takes n_a/(n_a+n_b) ≈ 1.4 % of its slots from the small side
    (180 of 12,800 here); weighing both sides equally would take half (6,400), swapping the weights
    99 %. Held to under 10 % here; the next test holds it to the binomial bound."""
    small, expected, _ = _unequal_merges()
    assert small < 0.10 * 200 * 64, (small, expected)
    assert small > 0  # the small side is not dropped either
    # one real pair of streams, pushed item by item: 100 and 10,000 items (expected 0.63 from the small)
    a, b = Reservoir(64), Reservoir(64)
    a.extend(("a", i) for i in range(100))
    b.extend(("b", i) for i in range(10_000))
    merged = a.merge(b)
    assert merged.seen == 10_100 and sum(side == "a" for side, _ in merged.items) <= 5
    # sides that fit in k together are kept whole
    both = _tagged("a", 64, 10).merge(_tagged("b", 64, 20)).items
    assert both == [("a", i) for i in range(10)] + [("b", i) for i in range(20)]


def test_reservoir_merge_of_unequal_streams_is_uniform_over_the_union():
    """The small side's slot count within 4 binomial σ of its expectation (draws without replacement
    within a merge only shrink the variance, so σ is conservative). A merge that weighed a side by
    (items left)·seen/len(items) drained the side that saw more: 545 of 12,800, uniform 180 ± 13."""
    small, expected, sigma = _unequal_merges()
    assert abs(small - expected) <= 4 * sigma, (small, expected, sigma)
