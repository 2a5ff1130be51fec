"""Memoization behind an exact guard (`opscope.act.memoize`): the reference's MemoMatmul semantics."""

from __future__ import annotations

from collections import OrderedDict

import numpy as np
import pytest

from opscope.act import memoize
from opscope.act.memoize import Memoized, fnv1a_f32
from opscope.errors import OpscopeError


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


def _reference_cache(stream: list[int], cap: int, lru: bool) -> list[int]:
    """The keys a `cap`-entry cache runs (misses), in order: least recently used evicted (`lru`), or the
    oldest inserted (FIFO: a hit does not refresh its entry). A plain OrderedDict, independent of `Memoized`."""
    cache: OrderedDict[int, None] = OrderedDict()
    ran = []
    for key in stream:
        if key in cache:
            if lru:
                cache.move_to_end(key)
            continue
        ran.append(key)
        if len(cache) >= cap:
            cache.popitem(last=False)
        cache[key] = None
    return ran


def test_eviction_is_least_recently_used_not_first_in_first_out():
    """cap 2: a b a c a b. LRU: the hit on a refreshes it, c evicts b, a hits, b runs again (2 hits);
    FIFO would evict a (5 of 6 run, 1 hit). Then a 300-call stream over 6 keys, cap 3, where LRU and
    FIFO run different calls: `Memoized` runs exactly the reference LRU's, in order."""
    arrays = [np.full(3, v, np.float32) for v in range(6)]
    ran: list[int] = []
    lru = Memoized(lambda x: ran.append(int(x[0])) or x * 2, cap=2, evict=True)
    for key in (0, 1, 0, 2, 0, 1):
        np.testing.assert_array_equal(lru(arrays[key]), arrays[key] * 2)
    assert ran == [0, 1, 2, 1] == _reference_cache([0, 1, 0, 2, 0, 1], 2, lru=True)
    assert _reference_cache([0, 1, 0, 2, 0, 1], 2, lru=False) == [0, 1, 2, 0, 1]
    assert (lru.hits, lru.misses, len(lru)) == (2, 4, 2)

    rng = np.random.default_rng(11)
    stream = rng.choice(6, size=300, p=[0.4, 0.2, 0.15, 0.1, 0.1, 0.05]).tolist()
    want, fifo = _reference_cache(stream, 3, lru=True), _reference_cache(stream, 3, lru=False)
    assert want != fifo  # the stream tells the two policies apart (they run other calls)
    ran.clear()
    memo = Memoized(lambda x: ran.append(int(x[0])) or x * 2, cap=3, evict=True)
    for key in stream:
        memo(arrays[key])
    assert ran == want
    assert (memo.hits, memo.misses, len(memo)) == (300 - len(want), len(want), 3)


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


# -- one outlined site, compiled (`memoize_site`) -----------------------------------------


@pytest.fixture(scope="module")
def digits_fc1():
    """The digits model for 16 images a call, 6 distinct batches, and its fc1 alone behind the guard."""
    pytest.importorskip("sklearn")
    from opscope.models.digits import digit_images, digits_model

    source, weights = digits_model(batch=16)
    images = digit_images(16 * 6)
    batches = [np.ascontiguousarray(images[i * 16 : (i + 1) * 16]) for i in range(6)]
    return source, weights[0], batches


def test_memoized_outlined_site_hits_every_repeat_bit_exactly(digits_fc1):
    source, w1, batches = digits_fc1
    memo = memoize.memoize_site(source, "fc1", cap=16)
    site = memo.fn  # the un-memoized compiled call of the outlined site
    assert (site.site, site.function) == ("fc1", "site_fc1")
    assert [a.shape for a in site.arguments] == [(16, 64), w1.shape]  # x and fc1's weight: the model's arguments
    picks = np.random.default_rng(5).integers(0, len(batches), 60).tolist()
    for i in picks:
        got = memo(batches[i], w1)
        assert got.tobytes() == site(batches[i], w1).tobytes()
        np.testing.assert_allclose(got, batches[i] @ w1, rtol=1e-5, atol=1e-6)
    distinct = len(set(picks))
    repeats = len(picks) - distinct
    assert memo.hit_rate == pytest.approx(repeats / len(picks))
    assert (memo.hits, memo.misses, memo.collisions, len(memo)) == (repeats, distinct, 0, distinct)
    memo(batches[picks[0]], w1 * 2)  # another weight is another input: a miss, never a stale hit
    assert (memo.hits, memo.misses) == (repeats, distinct + 1)


def test_memoized_site_keeps_its_cap_and_evicts_only_when_asked(digits_fc1):
    source, w1, batches = digits_fc1
    stream = [0, 1, 2, 2, 0]
    kept = memoize.memoize_site(source, 0, cap=2)  # ordinal 0 is fc1
    for i in stream:
        kept(batches[i], w1)
    assert (kept.hits, kept.misses, len(kept)) == (1, 4, 2)  # batch 2 was never stored: it runs again
    lru = memoize.memoize_site(source, "fc1", cap=2, evict=True)
    for i in stream:
        lru(batches[i], w1)
    assert (lru.hits, lru.misses, len(lru)) == (1, 4, 2)  # 2 evicts 0, then hits; 0 runs again
    with pytest.raises(OpscopeError, match=r"^site 'fc1' takes 2 operands \(argument 0 \(tensor<16x64xf32>\)"):
        kept.fn(batches[0])


def test_memoize_site_outlines_a_constant_weight_with_the_site():
    from opscope.models.demo import transformer_module

    memo = memoize.memoize_site(transformer_module(1, 16, 8, weights="globals"), "layer0.ffn.up", cap=4)
    assert [a.shape for a in memo.fn.arguments] == [(8, 16)]  # the weight is a global inside the module
    x = np.random.default_rng(1).standard_normal((8, 16), dtype=np.float32)
    first, again = memo(x), memo(x)
    assert first.tobytes() == again.tobytes() == memo.fn(x).tobytes() and (memo.hits, memo.misses) == (1, 1)
