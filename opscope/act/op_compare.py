"""Op-by-op comparison of two builds' tensors, pure numpy (no compiler, no runtime): prove
that a rewrite, injected taps or another target leave every intermediate tensor alone, or
find the first op where they do not. `opscope.act.parity` builds and runs the two sides.

`compare(a, b, tol)` pairs tensors by name and returns a `ParityReport` (`OpDiff` per pair,
in A's program order; `parity_text`, `parity_markdown`, `.to_dict()`); `by_site` keeps one
tensor per module path (the module's output) and `site_parity` compares those with a
reference's {module path: output} (e.g. PyTorch eager's, `parity.torch_module_outputs`),
so IREE can be compared with PyTorch by site name the same way.

Definitions (A is the reference):
* max_abs = max |a − b|; max_rel = max |a − b| / max(|a|, 1e-6) (the reference's two);
* the tolerance rule: a float tensor is within `tol` when
  max|a − b| ≤ tol · max(max|a|, 1e-6), i.e. its error *relative to the tensor's own
  scale* (`OpDiff.err`) is at most tol. max_rel is reported but not judged: one entry of
  a that happens to be ~0 (a centred activation, a masked score) makes it explode for
  rounding noise, while the scale-relative error stays meaningful; the 1e-6 floor makes
  an all-zero reference need |b| ≤ tol · 1e-6;
* integer and bool tensors are compared exactly (any difference is beyond every tol);
* NaN in both at the same position is equal (counted, `OpDiff.nan`); +inf = +inf is equal;
  NaN or inf facing anything else is a difference of inf (`OpDiff.special` counts them);
* pairing: equal names (`<site>#<k>`) and op labels; where a rewrite added or removed ops
  under a module path, that path's ops are aligned by their labels (difflib), so an
  inserted op does not shift its neighbours' partners; a pair whose shapes differ (beyond
  size-1 dims) is not compared. What pairs with nothing is listed (`only_a`, `only_b`).
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any

import numpy as np

from opscope.errors import OpscopeError
from opscope.text.table import markdown_table, table

TINY = 1e-6  # floor of |a| in max_rel and of max|a| in the tolerance rule (the reference's floor)
DEFAULT_TOL = 1e-3  # scale-relative error allowed by default (see the module docstring)
TOP = 5  # the worst ops a default table shows besides those beyond tolerance


@dataclass(frozen=True)
class Tensor:
    """One named tensor of a build: an exposed op's result, or a module's output."""

    name: str
    value: np.ndarray = field(repr=False, compare=False)
    op: str = ""  # the op's label ("" when unknown: every tensor pairs by name alone)
    index: int = -1  # program order (-1: the order given)
    site: str | None = None  # the op's module path (None: no location, or not an exposed op)

    @property
    def path(self) -> str:
        """The module path the name starts with (`encoder.layer.0.output#3` -> `encoder.layer.0.output`)."""
        return self.name.rpartition("#")[0] or self.name


@dataclass(frozen=True)
class OpDiff:
    """How one op's tensor differs between build A (the reference) and build B."""

    index: int  # A's program order
    name: str
    op: str
    shape: tuple[int, ...]
    dtype: str  # A's element type
    max_abs: float  # max |a − b| (inf when NaN or inf faces another value)
    max_rel: float  # max |a − b| / max(|a|, 1e-6)
    scale: float  # max |a| over finite entries (the tolerance's yardstick; floored at 1e-6 when judged)
    exact: bool = False  # integer or bool: any difference is beyond tolerance
    nan: int = 0  # positions NaN in both builds (counted equal)
    special: int = 0  # positions where NaN or inf in one build faces another value in the other
    b_name: str | None = None  # B's name when it differs (ops aligned under one path)

    @property
    def identical(self) -> bool:
        """max |a − b| == 0 (NaN facing NaN counts as equal)."""
        return self.max_abs == 0

    @property
    def err(self) -> float:
        """max |a − b| / max(max |a|, 1e-6): what the tolerance judges."""
        if self.max_abs == 0:
            return 0.0
        if self.exact or math.isinf(self.max_abs):
            return math.inf
        return self.max_abs / max(self.scale, TINY)

    def within(self, tol: float) -> bool:
        return self.err <= tol


@dataclass(frozen=True)
class ParityReport:
    """Every paired op of two builds, in A's program order, and what paired with nothing."""

    ops: tuple[OpDiff, ...]
    only_a: tuple[str, ...] = ()
    only_b: tuple[str, ...] = ()
    tol: float = DEFAULT_TOL
    a: str = "A"  # what build A is
    b: str = "B"

    @property
    def ops_checked(self) -> int:
        return len(self.ops)

    @property
    def identical(self) -> int:
        """How many ops are bit-identical (max |a − b| == 0)."""
        return sum(d.identical for d in self.ops)

    @property
    def exact(self) -> bool:
        """Every compared op identical (the reference's `exact()`: max_abs == 0)."""
        return all(d.identical for d in self.ops)

    @property
    def max_abs(self) -> float:
        return max((d.max_abs for d in self.ops), default=0.0)

    @property
    def max_rel(self) -> float:
        return max((d.max_rel for d in self.ops), default=0.0)

    @property
    def worst(self) -> OpDiff | None:
        """The op with the largest scale-relative error (the first in program order on a tie);
        None when every op is identical."""
        worst = None
        for d in self.ops:
            if d.err > 0 and (worst is None or d.err > worst.err):
                worst = d
        return worst

    def beyond(self, tol: float | None = None) -> list[OpDiff]:
        """The ops beyond `tol` (default the report's), in program order."""
        t = self.tol if tol is None else tol
        return [d for d in self.ops if not d.within(t)]

    def first_beyond(self, tol: float | None = None) -> OpDiff | None:
        """The first op, in program order, beyond `tol` (default the report's); None if none."""
        return next(iter(self.beyond(tol)), None)

    def within(self, tol: float | None = None) -> bool:
        return self.first_beyond(tol) is None

    # -- rendering -----------------------------------------------------------------------
    def shown(self, all_ops: bool = False, top: int = TOP) -> list[OpDiff]:
        """The rows a table shows: every op, or those beyond tolerance plus the `top` worst, in program order."""
        if all_ops:
            return list(self.ops)
        worst = sorted((d for d in self.ops if d.err > 0), key=lambda d: -d.err)[:top]
        keep = {id(d) for d in self.beyond() + worst}
        return [d for d in self.ops if id(d) in keep]

    def summary(self) -> str:
        """One line: ops compared, bit-identical, worst op, first op beyond tolerance, unmatched."""
        parts = [f"{self.ops_checked} ops compared, {self.identical} bit-identical"]
        w = self.worst
        parts.append(
            f"worst: {w.name}{f' ({w.op})' if w.op else ''} max|Δ| {_g(w.max_abs)} = {_g(w.err)} of max|A|"
            if w
            else "worst: none"
        )
        first = self.first_beyond()
        parts.append(
            f"first beyond tol {self.tol:g}: "
            + (f"{first.name} ({first.op + ', ' if first.op else ''}#{first.index})" if first else "none")
        )
        if self.only_a or self.only_b:
            parts.append(f"unmatched: {len(self.only_a)} only in A, {len(self.only_b)} only in B")
        return "; ".join(parts)

    def rows(self, all_ops: bool = False, top: int = TOP) -> list[list[str]]:
        return [
            [
                str(d.index),
                d.name + (f" (B: {d.b_name})" if d.b_name else ""),
                d.op,
                "x".join(map(str, d.shape)) or "scalar",
                _g(d.max_abs),
                _g(d.max_rel),
                _g(d.err),
                "ok" if d.within(self.tol) else "BEYOND",
            ]
            for d in self.shown(all_ops, top)
        ]

    HEADER = ("#", "op name", "op", "shape", "max|Δ|", "max rel", "|Δ|/max|A|", "tol")

    def to_dict(self) -> dict:
        first, worst = self.first_beyond(), self.worst
        return {
            "a": self.a,
            "b": self.b,
            "tol": self.tol,
            "ops_checked": self.ops_checked,
            "identical": self.identical,
            "exact": self.exact,
            "max_abs": _num(self.max_abs),
            "max_rel": _num(self.max_rel),
            "worst": worst.name if worst else None,
            "first_beyond": first.name if first else None,
            "only_a": list(self.only_a),
            "only_b": list(self.only_b),
            "ops": [
                {
                    **{k: _num(v) for k, v in asdict(d).items()},
                    "shape": list(d.shape),
                    "err": _num(d.err),
                    "within": d.within(self.tol),
                }
                for d in self.ops
            ],
        }


def parity_text(report: ParityReport, all_ops: bool = False, top: int = TOP) -> str:
    """The ops beyond tolerance and the worst (`top` of them; every op with `all_ops`), and the summary."""
    lines = [f"A: {report.a}", f"B: {report.b}"]
    rows = report.rows(all_ops, top)
    if rows:
        lines += table(report.HEADER, rows, right={0, 4, 5, 6})
    lines.append(report.summary())
    return "\n".join(lines)


def parity_markdown(report: ParityReport, all_ops: bool = False, top: int = TOP) -> str:
    """`parity_text`'s rows as a Markdown table."""
    lines = [f"* A: {report.a}", f"* B: {report.b}", ""]
    rows = report.rows(all_ops, top)
    if rows:
        lines += markdown_table(report.HEADER, rows)
        lines.append("")
    lines.append(report.summary())
    return "\n".join(lines)


def _g(x: float) -> str:
    return "0" if x == 0 else f"{x:.3g}"


def _num(x: Any) -> Any:
    """Floats JSON can hold: inf and nan as strings."""
    return x if not isinstance(x, float) or math.isfinite(x) else str(x)


def diff(name: str, a: np.ndarray, b: np.ndarray, op: str = "", index: int = -1) -> OpDiff:
    """How `b` differs from the reference `a` (see the module docstring)."""
    a, b = np.asarray(a), np.asarray(b)
    if a.shape != b.shape:
        b = b.reshape(a.shape)  # only size-1 dims differ (checked by the caller)
    exact = a.dtype.kind in "biu" and b.dtype.kind in "biu"
    shape, dtype = tuple(a.shape), str(a.dtype)
    if exact:
        d = np.abs(a.astype(np.int64) - b.astype(np.int64)).astype(np.float64)
        mag = np.abs(a.astype(np.float64))
        scale, extra = float(mag.max(initial=0.0)), {"exact": True}
    else:
        x, y = a.astype(np.float64), b.astype(np.float64)
        nan_x, nan_y = np.isnan(x), np.isnan(y)
        with np.errstate(invalid="ignore"):
            same = (nan_x & nan_y) | (x == y)  # inf == inf of one sign is equal too
            d = np.where(same, 0.0, np.abs(x - y))
        d[np.isnan(d)] = np.inf  # NaN facing a number, +inf facing +inf is `same` already
        finite = np.isfinite(x)
        mag = np.where(finite, np.abs(x), 1.0)
        scale = float(np.abs(x[finite]).max(initial=0.0))
        extra = {
            "nan": int(np.count_nonzero(nan_x & nan_y)),
            "special": int(np.count_nonzero(~same & (~finite | ~np.isfinite(y)))),
        }
    rel = float((d / np.maximum(mag, TINY)).max(initial=0.0))
    return OpDiff(index, name, op, shape, dtype, float(d.max(initial=0.0)), rel, scale, **extra)


def _tensors(side: Sequence[Tensor] | Mapping[str, np.ndarray]) -> list[Tensor]:
    if isinstance(side, Mapping):
        return [Tensor(name, np.asarray(v), index=i) for i, (name, v) in enumerate(side.items())]
    return [t if t.index >= 0 else replace(t, index=i) for i, t in enumerate(side)]


def _squeezed(shape: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(d for d in shape if d != 1)


def pair(a: Sequence[Tensor], b: Sequence[Tensor]) -> tuple[list[tuple[Tensor, Tensor]], list[Tensor], list[Tensor]]:
    """(pairs in A's order, A's unpaired, B's unpaired): per module path, the ops of A and
    B aligned by their labels (equal sequences pair one to one; by name where a side has no
    labels), then checked for shape."""
    groups_a: dict[str, list[Tensor]] = {}
    groups_b: dict[str, list[Tensor]] = {}
    for t in a:
        groups_a.setdefault(t.path, []).append(t)
    for t in b:
        groups_b.setdefault(t.path, []).append(t)
    pairs: list[tuple[Tensor, Tensor]] = []
    for path, ga in groups_a.items():
        gb = groups_b.get(path, [])
        if not gb:
            continue
        labeled = all(t.op for t in ga + gb)  # else (a mapping, a torch module) names alone pair them
        key = (lambda t: t.op) if labeled else (lambda t: t.name)
        matcher = difflib.SequenceMatcher(None, [key(t) for t in ga], [key(t) for t in gb], autojunk=False)
        for block in matcher.get_matching_blocks():
            pairs += [(ga[block.a + i], gb[block.b + i]) for i in range(block.size)]
    pairs = [
        (x, y)
        for x, y in pairs
        if x.value.shape == y.value.shape or _squeezed(x.value.shape) == _squeezed(y.value.shape)
    ]
    paired_a = {id(x) for x, _ in pairs}
    paired_b = {id(y) for _, y in pairs}
    pairs.sort(key=lambda p: p[0].index)
    return pairs, [t for t in a if id(t) not in paired_a], [t for t in b if id(t) not in paired_b]


def compare(
    a: Sequence[Tensor] | Mapping[str, np.ndarray],
    b: Sequence[Tensor] | Mapping[str, np.ndarray],
    *,
    tol: float = DEFAULT_TOL,
    a_label: str = "A",
    b_label: str = "B",
) -> ParityReport:
    """Compare build B's tensors with the reference A's, op by op (see the module docstring).
    Each side is a sequence of `Tensor`s in program order or a {name: array} mapping."""
    if not tol >= 0:
        raise OpscopeError(f"parity: the tolerance must be a number >= 0, got {tol}")
    pairs, only_a, only_b = pair(_tensors(a), _tensors(b))
    ops = tuple(
        replace(diff(x.name, x.value, y.value, x.op or y.op, x.index), b_name=None if y.name == x.name else y.name)
        for x, y in pairs
    )
    return ParityReport(ops, tuple(t.name for t in only_a), tuple(t.name for t in only_b), tol, a_label, b_label)


def by_site(tensors: Sequence[Tensor]) -> dict[str, np.ndarray]:
    """{module path: its output} of exposed tensors: for each path P that names an op or a
    module above one, the last tensor in program order whose op lies under P (its name's
    path is P or starts with `P.`). That is what a torch module returns (the residual add
    named `encoder.layer.0.output` comes before its child LayerNorm, whose output is the
    module's): compare it with `torch_module_outputs`. Tensors without a location
    (`Tensor.site` None) and second results of multi-result ops are left out."""
    out: dict[str, np.ndarray] = {}
    for t in sorted(_tensors(tensors), key=lambda t: t.index):
        if not t.site or ":" in t.name.rpartition("#")[2]:
            continue
        parts = t.site.split(".")
        for i in range(1, len(parts) + 1):
            out[".".join(parts[:i])] = t.value
    return out


def site_parity(
    reference: Mapping[str, np.ndarray],
    build: Iterable[Tensor],
    *,
    tol: float = DEFAULT_TOL,
    a_label: str = "reference",
    b_label: str = "build",
) -> ParityReport:
    """Compare a build's module outputs (`by_site` of its exposed tensors) with a reference's
    {module path: output} (e.g. `parity.torch_module_outputs`), by site name; A is the reference."""
    return compare(dict(reference), by_site(list(build)), tol=tol, a_label=a_label, b_label=b_label)
