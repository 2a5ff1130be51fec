"""Memoization behind an exact guard: a repeated input returns the stored output, bit-identical.

The reference's `MemoMatmul` (§3.4) generalized to any call, such as a compiled model's
`invoke`: hash the inputs, and on a hash hit **verify the stored inputs equal these
exactly** (bit patterns, so -0.0 ≠ 0.0 and NaN payloads count) before returning the stored
outputs. Anything else (a miss, or a hash collision) runs the call. A miss is stored only
while the cache holds fewer than `cap` entries (no eviction), unless `evict=True` (then
the least recently used entry makes room). A hit is correct by construction.

The key is BLAKE2b over the raw bytes, shapes and dtypes: fast and in C. The reference's
FNV-1a over f32 bit patterns (`fnv1a_f32`) is kept for its definition; it is sequential,
so slow in Python.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from typing import Callable, Sequence

import numpy as np

FNV_OFFSET, FNV_PRIME = 0xCBF29CE484222325, 0x100000001B3
MASK64 = (1 << 64) - 1


def fnv1a_f32(x: np.ndarray) -> int:
    """The reference's `hash_f32`: 64-bit FNV-1a over the raw f32 bit patterns (XOR the 32-bit word, multiply)."""
    h = FNV_OFFSET
    for word in np.ascontiguousarray(x, dtype=np.float32).reshape(-1).view(np.uint32).tolist():
        h = ((h ^ word) * FNV_PRIME) & MASK64
    return h


def _key(args: Sequence[np.ndarray]) -> bytes:
    h = hashlib.blake2b(digest_size=16)
    for a in args:
        h.update(f"{a.dtype.str}{a.shape}".encode())
        h.update(_raw(a).data if a.size else b"")
    return h.digest()


def _same(a: Sequence[np.ndarray], b: Sequence[np.ndarray]) -> bool:
    """Bit-identical argument lists (dtype, shape and every byte)."""
    return len(a) == len(b) and all(x.dtype == y.dtype and x.shape == y.shape and np.array_equal(_raw(x), _raw(y))
                                    for x, y in zip(a, b))


def _raw(x: np.ndarray) -> np.ndarray:
    """The array's bytes as a flat uint8 view (no copy when contiguous): compared bit for bit."""
    return np.ascontiguousarray(x).reshape(-1).view(np.uint8)


class Memoized:
    """`fn` behind an exact guard: `Memoized(loaded.invoke_fn, cap=16)(*arrays)`; counters `hits`,
    `misses`, `collisions` (a hash hit whose stored inputs differ: run, never returned)."""

    def __init__(self, fn: Callable[..., object], cap: int = 16, evict: bool = False):
        if cap < 0:
            from opscope.errors import OpscopeError

            raise OpscopeError(f"memoize: cap must be >= 0, got {cap}")
        self.fn, self.cap, self.evict = fn, cap, evict
        self.hits = self.misses = self.collisions = 0
        self._cache: OrderedDict[bytes, tuple[list[np.ndarray], object]] = OrderedDict()

    def __call__(self, *args: np.ndarray):
        arrays = [np.asarray(a) for a in args]
        key = _key(arrays)
        stored = self._cache.get(key)
        if stored is not None:
            if _same(stored[0], arrays):
                self.hits += 1
                self._cache.move_to_end(key)
                return stored[1]
            self.collisions += 1
        self.misses += 1
        out = self.fn(*args)
        if stored is None and self.cap:
            if len(self._cache) >= self.cap and self.evict:
                self._cache.popitem(last=False)
            if len(self._cache) < self.cap:
                self._cache[key] = ([a.copy() for a in arrays], _frozen(out))
        return out

    @property
    def hit_rate(self) -> float:
        return self.hits / max(self.hits + self.misses, 1)

    def __len__(self) -> int:
        return len(self._cache)


def _frozen(out):
    """A private, read-only copy of the outputs (an array or a list/tuple of them), so a caller
    that writes into a returned array cannot change what the next hit returns."""
    if isinstance(out, np.ndarray):
        frozen = out.copy()
        frozen.flags.writeable = False
        return frozen
    if isinstance(out, (list, tuple)):
        return type(out)(_frozen(o) for o in out)
    return out
