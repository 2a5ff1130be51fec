"""The manifest: which function result holds which statistic, read back from the IR.

`Manifest.from_module` reads the result attributes `lower-opscope` writes (either form:
`opscope.pack` on a packed result, or `opscope.site/role/stat/numel` on a single-stat
result) and the site table `opscope.sites`, so it can never drift from the IR. It saves
as a JSON sidecar and decodes a run's outputs into (site, role, stat, idx, value) rows.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
from iree.compiler import ir

from opscope.errors import OpscopeError

ROW_STRIDE_ATTR = "opscope.row_stride"  # sample-rows: the function's activations sketched on 1 row in K
WEIGHTS_SUFFIX = "$weights"  # split-weight-stats: @f's weight statistics live in @f$weights, called once


@dataclass(frozen=True)
class StatEntry:
    """One statistic: function result `result`, elements [offset, offset+length)."""

    result: int
    offset: int
    length: int
    site: str
    role: str
    stat: str
    numel: int


@dataclass(frozen=True)
class SiteInfo:
    """A tapped site's shape and cost."""

    name: str
    kind: str
    batch: int
    m: int
    k: int
    n: int
    flops: int


@dataclass
class Manifest:
    """What the appended results of one function hold."""

    function: str
    num_results: int
    num_original_results: int
    entries: list[StatEntry] = field(default_factory=list)
    sites: list[SiteInfo] = field(default_factory=list)
    flags: list[str] = field(default_factory=list)
    weights_function: str = ""  # the function returning the weights' statistics, called once (split-weight-stats)
    weights_results: int = 0  # how many results it returns (the last of num_results)
    row_stride: int = 1  # activations sketched on rows 0, K, 2K, ... (`sample-rows`); weights exact

    # -- reading the IR ------------------------------------------------------------------
    @classmethod
    def from_module(cls, module, function: str | None = None) -> Manifest:
        """Read the manifest of `function` (default: the public function with statistics)."""
        fns = [
            op.operation for op in module.operation.regions[0].blocks[0].operations if op.operation.name == "func.func"
        ]
        public = [
            f
            for f in fns
            if "sym_visibility" not in f.attributes or ir.StringAttr(f.attributes["sym_visibility"]).value == "public"
        ]
        if function is not None:
            chosen = [f for f in fns if ir.StringAttr(f.attributes["sym_name"]).value == function]
            if not chosen:
                raise OpscopeError(f"no function @{function} in the module")
        else:
            chosen = [
                f
                for f in public
                if "res_attrs" in f.attributes and _has_stats(f) and not _name(f).endswith(WEIGHTS_SUFFIX)
            ] or public[:1]
            if not chosen:
                raise OpscopeError("the module has no public function")
        manifest = cls._from_function(chosen[0])
        weights = [f for f in fns if _name(f) == manifest.function + WEIGHTS_SUFFIX]
        if weights and "res_attrs" in weights[0].attributes and _has_stats(weights[0]):
            manifest = manifest._with_weights(cls._from_function(weights[0]))
        return manifest

    def _with_weights(self, weights: Manifest) -> Manifest:
        """This call's manifest, followed by the results of its weights' function (called once)."""
        moved = [dataclasses.replace(e, result=e.result + self.num_results) for e in weights.entries]
        return Manifest(
            self.function,
            self.num_results + weights.num_results,
            self.num_original_results,
            _reference_order(self.entries + moved, self.sites),
            self.sites,
            list(self.flags),
            weights.function,
            weights.num_results,
            self.row_stride,
        )

    @property
    def call_results(self) -> int:
        """How many results one call of `function` returns (the weights' statistics follow them)."""
        return self.num_results - self.weights_results

    @classmethod
    def _from_function(cls, fn) -> Manifest:
        name = ir.StringAttr(fn.attributes["sym_name"]).value
        fty = ir.FunctionType(ir.TypeAttr(fn.attributes["function_type"]).value)
        n_results = len(fty.results)
        entries: list[StatEntry] = []
        first_stat = n_results
        if "res_attrs" in fn.attributes:
            for idx, attr in enumerate(ir.ArrayAttr(fn.attributes["res_attrs"])):
                d = ir.DictAttr(attr)
                got = _entries_of(idx, d, _length(fty.results[idx]))
                if got:
                    first_stat = min(first_stat, idx)
                    entries += got
        sites = []
        if "opscope.sites" in fn.attributes:
            for attr in ir.ArrayAttr(fn.attributes["opscope.sites"]):
                d = ir.DictAttr(attr)
                sites.append(
                    SiteInfo(
                        ir.StringAttr(d["name"]).value,
                        ir.StringAttr(d["kind"]).value,
                        *(ir.IntegerAttr(d[k]).value for k in ("batch", "m", "k", "n", "flops")),
                    )
                )
        stride = ir.IntegerAttr(fn.attributes[ROW_STRIDE_ATTR]).value if ROW_STRIDE_ATTR in fn.attributes else 1
        return cls(name, n_results, first_stat, _reference_order(entries, sites), sites, row_stride=stride)

    # -- JSON sidecar --------------------------------------------------------------------
    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=1)

    @classmethod
    def from_json(cls, text: str) -> Manifest:
        d = json.loads(text)
        return cls(
            d["function"],
            d["num_results"],
            d["num_original_results"],
            [StatEntry(**e) for e in d["entries"]],
            [SiteInfo(**s) for s in d["sites"]],
            list(d.get("flags", [])),
            d.get("weights_function", ""),
            int(d.get("weights_results", 0)),
            int(d.get("row_stride", 1)),
        )

    def save(self, path: str | Path) -> None:
        Path(path).write_text(self.to_json())

    @classmethod
    def load(cls, path: str | Path) -> Manifest:
        p = Path(path)
        if not p.exists():
            raise OpscopeError(f"no such manifest: {p}")
        try:
            return cls.from_json(p.read_text())
        except (json.JSONDecodeError, KeyError, TypeError) as e:
            raise OpscopeError(f"{p} is not an opscope manifest: {e}") from None

    # -- decoding outputs ----------------------------------------------------------------
    def values(self, outputs: list[np.ndarray]) -> dict[tuple[str, str, str], np.ndarray]:
        """(site, role, stat) -> the statistic's values, from one run's outputs."""
        if len(outputs) != self.num_results:
            raise OpscopeError(f"expected {self.num_results} outputs for @{self.function}, got {len(outputs)}")
        out = {}
        for e in self.entries:
            flat = np.asarray(outputs[e.result]).reshape(-1)
            out[(e.site, e.role, e.stat)] = flat[e.offset : e.offset + e.length]
        return out

    def rows(self, outputs: list[np.ndarray]):
        """Yield (site, role, stat, idx, value) for every statistic element."""
        for (site, role, stat), vals in self.values(outputs).items():
            for i, v in enumerate(vals.tolist()):
                yield site, role, stat, i, v

    def site_flops(self) -> dict[str, int]:
        return {s.name: s.flops for s in self.sites}


def add_site_rows(fn, rows: list[SiteInfo]) -> None:
    """Append `rows` to function `fn`'s site table (`opscope.sites`, what the manifest reads),
    leaving out names the table already has."""
    i64 = ir.IntegerType.get_signless(64)
    table = list(ir.ArrayAttr(fn.attributes["opscope.sites"])) if "opscope.sites" in fn.attributes else []
    known = {ir.StringAttr(ir.DictAttr(d)["name"]).value for d in table}
    for row in rows:
        if row.name in known:
            continue
        known.add(row.name)
        table.append(
            ir.DictAttr.get(
                {
                    "name": ir.StringAttr.get(row.name),
                    "kind": ir.StringAttr.get(row.kind),
                    **{k: ir.IntegerAttr.get(i64, getattr(row, k)) for k in ("batch", "m", "k", "n", "flops")},
                }
            )
        )
    fn.attributes["opscope.sites"] = ir.ArrayAttr.get(table)


def site_names(module) -> set[str]:
    """The names in every function's site table: what a new site's name must not repeat."""
    names = set()
    for op in module.operation.regions[0].blocks[0].operations:
        if op.operation.name == "func.func" and "opscope.sites" in op.operation.attributes:
            names |= {
                ir.StringAttr(ir.DictAttr(d)["name"]).value
                for d in ir.ArrayAttr(op.operation.attributes["opscope.sites"])
            }
    return names


def _reference_order(entries: list[StatEntry], sites: list[SiteInfo]) -> list[StatEntry]:
    """Entries in the reference's order (site, then role lhs/rhs/out, then stat order; the
    inference-dynamics statistics after, in their own order), whatever order the lowering
    packed them in; unknown sites keep their IR order."""
    from opscope.dialect.dynamics import DYNAMICS_KINDS
    from opscope.ir.stat_config import STAT_ORDER

    order = tuple(STAT_ORDER) + DYNAMICS_KINDS

    site_rank = {s.name: i for i, s in enumerate(sites)}
    first_seen: dict[str, int] = {}
    for e in entries:
        first_seen.setdefault(e.site, len(first_seen))
    roles = {"lhs": 0, "rhs": 1, "out": 2}
    return sorted(
        entries,
        key=lambda e: (
            site_rank.get(e.site, len(site_rank) + first_seen[e.site]),
            roles.get(e.role, 3),
            order.index(e.stat) if e.stat in order else len(order),
        ),
    )


def _length(ty: ir.Type) -> int:
    shaped = ir.ShapedType(ty)
    n = 1
    for s in shaped.shape:
        n *= s
    return n


def _entries_of(idx: int, d: ir.DictAttr, length: int = 0) -> list[StatEntry]:
    if "opscope.pack" in d:
        out = []
        for attr in ir.ArrayAttr(d["opscope.pack"]):
            e = ir.DictAttr(attr)
            out.append(StatEntry(idx, *(e[k].value for k in ("offset", "length", "site", "role", "stat", "numel"))))
        return out
    if "opscope.stat" in d:
        return [StatEntry(idx, 0, length, *(d[f"opscope.{k}"].value for k in ("site", "role", "stat", "numel")))]
    return []


def _name(fn) -> str:
    return ir.StringAttr(fn.attributes["sym_name"]).value


def _has_stats(fn) -> bool:
    return any(_entries_of(i, ir.DictAttr(a), 0) for i, a in enumerate(ir.ArrayAttr(fn.attributes["res_attrs"])))
