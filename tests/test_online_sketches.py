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
