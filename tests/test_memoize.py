"""Memoization behind an exact guard (`opscope.act.memoize`): the reference's MemoMatmul semantics."""

from __future__ import annotations

import numpy as np
import pytest

from opscope.act import memoize
from opscope.act.memoize import Memoized, fnv1a_f32


def _demo(seed: int = 0x6041D):
    """The reference's demo: W 512×512, 8 distinct inputs [32, 512], 200 picks."""
    rng = np.random.default_rng(seed)
    w = rng.standard_normal((512, 512), dtype=np.float32)
    inputs = [rng.standard_normal((32, 512), dtype=np.float32) for _ in range(8)]
    picks = rng.integers(0, 8, 200)
    return w, inputs, picks


def test_reference_demo_hits_every_repeat_bit_exactly():
    w, inputs, picks = _demo()
    memo = Memoized(lambda x: x @ w, cap=16)
    for i in picks:
        got = memo(inputs[i])
        assert got.tobytes() == (inputs[i] @ w).tobytes()  # a hit is the dense result, bit for bit
    distinct = len(set(picks.tolist()))
    assert memo.misses == distinct and memo.hits == 200 - distinct
    assert memo.hit_rate == pytest.approx(1 - distinct / 200)
    assert len(memo) == distinct


def test_cap_stops_inserting_without_eviction_and_evicts_lru_when_asked():
    calls = []
    memo = Memoized(lambda x: calls.append(1) or x * 2, cap=2)
    a, b, c = (np.full(3, v, np.float32) for v in (1, 2, 3))
    for x in (a, b, c, c, a):
        memo(x)
    assert len(memo) == 2 and memo.hits == 1 and memo.misses == 4  # c was never stored: it runs again
    lru = Memoized(lambda x: x * 2, cap=2, evict=True)
    for x in (a, b, c, a):
        lru(x)
    assert len(lru) == 2 and lru.hits == 0  # a was evicted by c
    assert Memoized(lambda x: x, cap=0)(a) is not None


def test_a_hash_collision_is_verified_and_never_returned(monkeypatch):
    monkeypatch.setattr(memoize, "_key", lambda args: b"same")
    memo = Memoized(lambda x: x + 1, cap=4)
    a, b = np.zeros(4, np.float32), np.ones(4, np.float32)
    assert memo(a).tolist() == [1.0] * 4
    assert memo(b).tolist() == [2.0] * 4  # the same key, other inputs: computed, not a's output
    assert memo.collisions == 1 and memo.hits == 0
    assert memo(a).tolist() == [1.0] * 4 and memo.hits == 1


def test_the_guard_compares_bit_patterns():
    memo = Memoized(lambda x: x.copy(), cap=4)
    memo(np.array([0.0], np.float32))
    memo(np.array([-0.0], np.float32))  # equal as floats, not as bits: a miss
    assert memo.hits == 0 and memo.misses == 2
    out = memo(np.array([0.0], np.float32))
    assert memo.hits == 1 and not out.flags.writeable  # the stored output cannot be written through


def test_fnv1a_is_the_reference_definition():
    assert fnv1a_f32(np.array([], np.float32)) == 0xCBF29CE484222325
    h = 0xCBF29CE484222325
    for word in (0x3F800000, 0x40000000):  # 1.0, 2.0
        h = ((h ^ word) * 0x100000001B3) % 2**64
    assert fnv1a_f32(np.array([1.0, 2.0], np.float32)) == h
