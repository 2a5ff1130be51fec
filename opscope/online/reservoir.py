"""The reference design's reservoir: deterministic Algorithm R driven by splitmix64."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from opscope.errors import OpscopeError
from opscope.online.hashing import splitmix64


def _is_int(x: object) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


class Reservoir:
    """A k-item uniform sample of a stream; the same stream always gives the same sample."""

    def __init__(self, k: int) -> None:
        if not _is_int(k) or k < 1:
            raise OpscopeError(f"reservoir size k must be an int >= 1, got {k!r}")
        self.k = k
        self.items: list[Any] = []
        self.seen = 0

    def push(self, v: Any) -> None:
        """Offer one stream element (Algorithm R, slot chosen by splitmix64 of the count)."""
        if len(self.items) < self.k:
            self.items.append(v)
        else:
            j = splitmix64(self.seen) % (self.seen + 1)
            if j < self.k:
                self.items[j] = v
        self.seen += 1

    def extend(self, xs: Iterable[Any]) -> None:
        """Push each element in order."""
        for x in xs:
            self.push(x)

    def merge(self, other: Reservoir) -> Reservoir:
        """A deterministic sample of the union of both streams.

        The k slots are k draws without replacement from the union's seen elements: a slot
        comes from a side with probability (its seen elements not yet drawn) / (both sides'),
        as a uniform k-sample of the union would split between them (hypergeometric), and
        takes one of that side's remaining items, chosen by hash. The result is uniform over
        the union in expectation, not bit-identical to one reservoir fed the whole stream.
        """
        if other.k != self.k:
            raise OpscopeError(f"cannot merge reservoirs of different size: k={self.k} and k={other.k}")
        out = Reservoir(self.k)
        out.seen = self.seen + other.seen
        a, b = self.items, other.items
        if len(a) + len(b) <= self.k:
            out.items = a + b
            return out
        rest_a, rest_b = list(a), list(b)
        base = splitmix64(splitmix64(self.seen) ^ other.seen)
        for i in range(self.k):
            wa = self.seen - (len(a) - len(rest_a))  # seen elements of A not yet drawn
            wb = other.seen - (len(b) - len(rest_b))
            h = splitmix64(splitmix64(base ^ i))
            side = rest_a if h / 2.0**64 * (wa + wb) < wa else rest_b
            # any remaining item of the side, not its next: a reservoir's prefix is not a uniform sample
            out.items.append(side.pop(splitmix64(h) % len(side)))
        return out

    def to_dict(self) -> dict[str, Any]:
        """A JSON-able dict; it is only JSON-serializable if the items themselves are."""
        return {"k": self.k, "seen": self.seen, "items": list(self.items)}

    @classmethod
    def from_dict(cls, d: Any) -> Reservoir:
        """Rebuild from `to_dict` output; a malformed dict is an OpscopeError."""
        if not isinstance(d, dict) or set(d) != {"k", "seen", "items"}:
            raise OpscopeError("not an opscope reservoir: want a dict with exactly the keys k, seen, items")
        k, seen, items = d["k"], d["seen"], d["items"]
        if not (_is_int(k) and k >= 1 and _is_int(seen) and isinstance(items, list) and len(items) == min(seen, k)):
            raise OpscopeError(
                f"not an opscope reservoir: k={k!r}, seen={seen!r} and {type(items).__name__} "
                "items disagree (want k >= 1 and len(items) == min(seen, k))"
            )
        out = cls(k)
        out.seen, out.items = seen, list(items)
        return out
