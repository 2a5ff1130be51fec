"""The roofline: the ridge that splits memory-bound from compute-bound work, and the class
of an op's cost at a ridge. Shared by the cost model, the bytes ledger and the per-dispatch
view (every cost with `flops` and `bytes`, None when unknown).
"""

from __future__ import annotations

from typing import Protocol

DEFAULT_RIDGE = 10.0  # FLOP/byte: below it an op is memory-bound (the reference's shapes ridge)


class Costed(Protocol):
    """What the classification reads: FLOPs and bytes moved, None when unknown."""

    @property
    def flops(self) -> int | None: ...

    @property
    def bytes(self) -> int | None: ...


def roofline_class(cost: Costed, ridge: float = DEFAULT_RIDGE) -> str:
    """The roofline class at `ridge`: trivial (0 FLOPs), memory-bound (intensity < ridge), compute-bound, or unknown."""
    if cost.flops is None:
        return "unknown"
    if cost.flops == 0:
        return "trivial"
    if cost.bytes is None:
        return "unknown"
    if cost.bytes == 0:
        return "compute-bound"  # FLOPs on scalars only
    return "memory-bound" if cost.flops / cost.bytes < ridge else "compute-bound"
