"""One way to write each kind of number a report shows.

Counts and FLOPs in base 1000 and bytes in base 1024, each with two decimals (the reference
design's format: `1.50 K`, `6.85 M FLOPs`, `1.50 KB`); percentages of a fraction with one
decimal, as Python's `%` format writes them (`12.3%`); `-` wherever a value is unknown (None).
"""

from __future__ import annotations

import math


def _scaled(n: float, base: int, units: tuple[str, ...], small: str) -> str:
    """`n` in the largest unit of `base` that keeps it under `base` (two decimals); below one
    unit, the integer with `small` appended."""
    if n < base:
        return f"{int(n)}{small}"
    for unit in units:
        n /= base
        if n < base or unit == units[-1]:
            return f"{n:.2f} {unit}"
    raise AssertionError("unreachable")


def count(n: float) -> str:
    """A count in base 1000 with two decimals: `999`, `1.50 K`, `2.00 M`, `G`, `T`."""
    return _scaled(n, 1000, ("K", "M", "G", "T"), "")


def nbytes(n: float) -> str:
    """Bytes in base 1024 with two decimals: `512 B`, `1.50 KB`, ... `TB`."""
    return _scaled(n, 1024, ("KB", "MB", "GB", "TB"), " B")


def exact(n: int | None) -> str:
    """An exact integer with thousands separators: `1,234,567`; `-` when unknown."""
    return "-" if n is None else f"{n:,}"


def flops(n: float) -> str:
    """FLOPs as a count: `512 FLOPs`, `6.85 M FLOPs`."""
    return f"{count(n)} FLOPs"


def percent(x: float | None, digits: int = 1, sign: bool = False) -> str:
    """The fraction `x` as a percentage: `12.3%` (`+12.3%` with `sign`), `-` when unknown."""
    if x is None:
        return "-"
    spec = ("+" if sign else "") + f".{digits}f"
    return f"{num(100 * x, spec)}%"


def share(part: float, whole: float) -> str:
    """`part` of `whole` as a percentage (`0.0%` when `whole` is 0)."""
    return percent(part / whole if whole else 0.0)


def num(x: float | None, spec: str = "g") -> str:
    """`x` formatted with `spec`; `-` when unknown, `inf`/`-inf`/`nan` spelled out."""
    if x is None:
        return "-"
    if isinstance(x, float) and not math.isfinite(x):
        return "inf" if x > 0 else ("-inf" if x < 0 else "nan")
    return format(x, spec)


def seconds(s: float) -> str:
    """A duration: `850 µs`, `12.3 ms`, `4.7 s`."""
    if s < 1e-3:
        return f"{s * 1e6:.0f} µs"
    if s < 1:
        return f"{s * 1e3:.1f} ms"
    return f"{s:.1f} s"
