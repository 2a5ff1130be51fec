"""The reference design's HyperLogLog: distinct-count sketch on 2**p uint8 registers."""

from __future__ import annotations

import math

import numpy as np

from opscope.errors import OpscopeError
from opscope.online.hashing import MASK64, splitmix64

_MAGIC, _VERSION = b"OSHL", 1


def _clz64(w: np.ndarray) -> np.ndarray:
    """Leading zeros of each uint64 (64 for zero), by binary search on shifts."""
    lz, x = np.zeros(w.shape, dtype=np.int64), w.copy()
    for s in (32, 16, 8, 4, 2, 1):
        top_zero = x < np.uint64(1 << (64 - s))
        lz += top_zero * s
        x = np.where(top_zero, x << np.uint64(s), x)
    return lz + (x == 0)


class Hll:
    """HyperLogLog over splitmix64-hashed 64-bit keys; merge is register-wise max (union)."""

    def __init__(self, p: int = 12) -> None:
        if isinstance(p, bool) or not isinstance(p, int) or not 4 <= p <= 18:
            raise OpscopeError(f"HyperLogLog precision p must be an int in 4..18, got {p!r}")
        self.p = p
        self.registers = np.zeros(1 << p, dtype=np.uint8)

    def add_bits(self, bits: int | np.ndarray) -> None:
        """Add 64-bit key(s): an int, or an integer array added all at once."""
        p = self.p
        if isinstance(bits, (int, np.integer)):
            h = splitmix64(int(bits))
            rank = min(64 - ((h << p) & MASK64).bit_length(), 64 - p) + 1
            idx = h >> (64 - p)
            self.registers[idx] = max(int(self.registers[idx]), rank)
            return
        h = splitmix64(np.asarray(bits).ravel())
        rank = np.minimum(_clz64(h << np.uint64(p)), 64 - p) + 1
        np.maximum.at(self.registers, (h >> np.uint64(64 - p)).astype(np.intp), rank.astype(np.uint8))

    def add_f32(self, values: object) -> None:
        """Add each element's f32 bit pattern as a key."""
        self.add_bits(np.asarray(values, dtype=np.float32).ravel().view(np.uint32).astype(np.uint64))

    def estimate(self) -> float:
        """Distinct-count estimate, with linear counting for small cardinalities."""
        m = float(1 << self.p)
        raw = 0.7213 / (1 + 1.079 / m) * m * m / float(np.sum(np.exp2(-self.registers.astype(np.float64))))
        zeros = int(np.count_nonzero(self.registers == 0))
        return m * math.log(m / zeros) if raw <= 2.5 * m and zeros else raw

    def merge(self, other: Hll) -> Hll:
        """A new sketch of the union of both streams."""
        out = Hll(self.p)
        out.registers = self.registers.copy()
        out.update(other)
        return out

    def update(self, other: Hll) -> None:
        """Fold `other` into this sketch in place (union)."""
        if other.p != self.p:
            raise OpscopeError(f"cannot merge HyperLogLogs of different precision: p={self.p} and p={other.p}")
        np.maximum(self.registers, other.registers, out=self.registers)

    def to_bytes(self) -> bytes:
        """Header (b"OSHL", version, p) then the registers."""
        return _MAGIC + bytes([_VERSION, self.p]) + self.registers.tobytes()

    @classmethod
    def from_bytes(cls, data: bytes) -> Hll:
        """Parse `to_bytes` output; anything malformed is an OpscopeError."""

        def bad(why: str) -> OpscopeError:
            return OpscopeError(f"not an opscope HyperLogLog: {why}")

        data = bytes(data)
        if len(data) < 6:
            raise bad(f"{len(data)} bytes is shorter than the 6-byte header")
        if data[:4] != _MAGIC or data[4] != _VERSION:
            raise bad(f"header {data[:5]!r} is not {_MAGIC!r} version {_VERSION}")
        p = data[5]
        if not 4 <= p <= 18:
            raise bad(f"precision p={p} is outside 4..18")
        if len(data) != 6 + (1 << p):
            raise bad(f"{len(data) - 6} register bytes for p={p}, expected {1 << p}")
        out = cls(p)
        out.registers = np.frombuffer(data, dtype=np.uint8, offset=6).copy()
        if int(out.registers.max()) > 64 - p + 1:
            raise bad(f"register value {int(out.registers.max())} exceeds {64 - p + 1}")
        return out

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Hll):
            return NotImplemented
        return self.p == other.p and bool(np.array_equal(self.registers, other.registers))

    __hash__ = None  # type: ignore[assignment]

    @property
    def nbytes(self) -> int:
        """Register memory in bytes."""
        return int(self.registers.nbytes)
