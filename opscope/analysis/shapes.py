"""GEMM shape histogram: which (batch, M, K, N, dtype) carry the FLOPs (autotune / dispatch-table targets).

Matmul-like ops are `opscope.ir.sites.find_sites`'s (their FLOPs are `Site.flops`,
2·batch·M·K·N, equal to the cost model's); `iree_linalg_ext.attention` ops are reported
apart by (B, M, K1, K2, N, dtype) with the cost model's formula. Rows are sorted by FLOPs,
descending (ties by count, then shape); a row's share is of the module's total FLOPs
(`analyze(module).total_flops`), so it says what tuning that shape could touch. A site
counts as many times as the total counts it (`opscope.analysis.cost.executions`: × the
trip count of each loop around it), so every share is of a total that contains it and
none exceeds 100 %. Sites with a dynamic size, and sites the total does not contain (in a
loop without a static trip count, hoisted, or with unknown FLOPs), are listed apart with
why, never guessed. The reference's `gemm_shape_histogram` (§3.14) keys by (m, k, n) with
m = lhs dim 0; ours keys by batch as well, and by dtype.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from iree.compiler import ir

from opscope.analysis.cost import RooflineSplit, analyze, executions, op_cost
from opscope.analysis.traffic import TrafficSplit, traffic_split
from opscope.ir.const_expr import memoized
from opscope.ir.flops import ATTENTION, attention_dims
from opscope.ir.opgraph import build_graph
from opscope.ir.sites import find_sites
from opscope.text.numbers import count, percent, share


@dataclass(frozen=True)
class GemmShape:
    """One matmul shape: how many sites have it and the FLOPs they carry."""

    batch: int
    m: int
    k: int
    n: int
    dtype: str
    count: int  # sites (ops) of this shape
    flops: int  # per call of the module: each site's FLOPs × its executions
    share: float  # of the module's total FLOPs
    runs: int = 0  # executions per call, all sites together (count × loop trip counts)

    @property
    def shape(self) -> str:
        """`B×M×K×N` (batch left out when 1)."""
        dims = (self.m, self.k, self.n) if self.batch == 1 else (self.batch, self.m, self.k, self.n)
        return "×".join(str(d) for d in dims)


@dataclass(frozen=True)
class AttentionShape:
    """One fused-attention shape (B, M, K1, K2, N): count and FLOPs."""

    b: int
    m: int
    k1: int
    k2: int
    n: int
    dtype: str
    count: int
    flops: int
    share: float
    runs: int = 0

    @property
    def shape(self) -> str:
        """`B=.. M=.. K1=.. K2=.. N=..`."""
        return f"B={self.b} M={self.m} K1={self.k1} K2={self.k2} N={self.n}"


@dataclass(frozen=True)
class ShapeHistogram:
    """GEMM and attention shapes of a module, by FLOPs."""

    gemms: list[GemmShape]
    attention: list[AttentionShape]
    total_flops: int  # the module's, every op
    dynamic: list[str] = field(default_factory=list)  # names of sites with a dynamic size
    uncounted: list[str] = field(default_factory=list)  # "name: why" of static sites the total does not contain

    @property
    def gemm_flops(self) -> int:
        """FLOPs of every static matmul-like site."""
        return sum(g.flops for g in self.gemms)

    @property
    def attention_flops(self) -> int:
        """FLOPs of every static attention op."""
        return sum(a.flops for a in self.attention)

    def to_dict(self) -> dict:
        """JSON-safe rows."""
        return {
            "total_flops": self.total_flops,
            "gemms": [
                {
                    "batch": g.batch,
                    "m": g.m,
                    "k": g.k,
                    "n": g.n,
                    "dtype": g.dtype,
                    "count": g.count,
                    "runs": g.runs,
                    "flops": g.flops,
                    "share": g.share,
                }
                for g in self.gemms
            ],
            "attention": [
                {
                    "b": a.b,
                    "m": a.m,
                    "k1": a.k1,
                    "k2": a.k2,
                    "n": a.n,
                    "dtype": a.dtype,
                    "count": a.count,
                    "runs": a.runs,
                    "flops": a.flops,
                    "share": a.share,
                }
                for a in self.attention
            ],
            "dynamic": list(self.dynamic),
            "uncounted": list(self.uncounted),
        }


def shapes_text(hist: ShapeHistogram, top: int = 10) -> str:
    """`B×M×K×N dtype ×count %FLOPs (FLOPs)` rows, then attention shapes."""
    lines = [
        f"GEMM shapes ({len(hist.gemms)} distinct, {count(hist.gemm_flops)} FLOPs, "
        f"{share(hist.gemm_flops, hist.total_flops)} of the module's {count(hist.total_flops)}):"
    ]
    for g in hist.gemms[:top]:
        lines.append(
            f"  {g.shape:24} {g.dtype:16} ×{g.count:<4d} {percent(g.share, digits=2):>7}  "
            f"({count(g.flops)} FLOPs{_runs(g.count, g.runs)})"
        )
    if len(hist.gemms) > top:
        lines.append(f"  ... {len(hist.gemms) - top} more")
    if not hist.gemms:
        lines.append("  none")
    if hist.attention:
        lines.append(
            f"attention shapes ({count(hist.attention_flops)} FLOPs, {share(hist.attention_flops, hist.total_flops)}):"
        )
        for a in hist.attention[:top]:
            lines.append(
                f"  {a.shape:24} {a.dtype:16} ×{a.count:<4d} {percent(a.share, digits=2):>7}  "
                f"({count(a.flops)} FLOPs{_runs(a.count, a.runs)})"
            )
    if hist.dynamic:
        lines.append(
            f"{len(hist.dynamic)} site(s) with a dynamic size left out: {', '.join(hist.dynamic[:5])}"
            + (" ..." if len(hist.dynamic) > 5 else "")
        )
    if hist.uncounted:
        lines.append(f"{len(hist.uncounted)} site(s) outside the module's FLOP total left out:")
        lines += [f"  {u}" for u in hist.uncounted[:top]]
        if len(hist.uncounted) > top:
            lines.append(f"  ... {len(hist.uncounted) - top} more")
    return "\n".join(lines) + "\n"


def _runs(count: int, runs: int) -> str:
    """', 5 runs' when loops run the shape's sites more often than once each, else ''."""
    return "" if runs == count else f", {runs} runs"


def dtype_of(types: list[str]) -> str:
    """`f32` when every operand has that element type, else `bf16,bf16->f32` (inputs -> output)."""
    if len(set(types)) == 1:
        return types[0]
    return f"{','.join(types[:-1])}->{types[-1]}"


def _element(value: ir.Value) -> str:
    """The element type of a tensor value (the type of a scalar), as text."""
    ty = value.type
    return str(ty.element_type) if isinstance(ty, ir.ShapedType) else str(ty)


def _attention_ops(module) -> list[ir.Operation]:
    """Every `iree_linalg_ext.attention` under `module`, in IR order."""
    found: list[ir.Operation] = []

    def visit(op):  # only gathers: exceptions inside walk callbacks lose their message
        if op.name == ATTENTION:
            found.append(op)
        return ir.WalkResult.ADVANCE

    module.operation.walk(visit)
    return found


@dataclass(frozen=True)
class ShapesReport:
    """`opscope shapes`: a module's totals, its roofline split at `ridge`, and its shape histogram."""

    source: str
    ridge: float
    total_flops: int
    total_bytes: int
    split: RooflineSplit
    histogram: ShapeHistogram
    traffic: TrafficSplit | None = None  # weight / io / fusible bytes (`opscope.analysis.traffic`)

    def to_dict(self) -> dict:
        """JSON-safe: the totals, the roofline split and the histogram's rows."""
        return {
            "source": self.source,
            "ridge": self.ridge,
            "total_flops": self.total_flops,
            "total_bytes": self.total_bytes,
            "roofline": asdict(self.split),
            "traffic": self.traffic.to_dict() if self.traffic else None,
            **self.histogram.to_dict(),
        }


def shapes_report(module, source: str, ridge: float) -> ShapesReport:
    """`module`'s totals, roofline split at `ridge` and shape histogram; `source` is what reports call it."""
    cost = analyze(module)
    hist = shape_histogram(module, cost.total_flops)
    traffic = traffic_split(build_graph(module))
    return ShapesReport(source, ridge, cost.total_flops, cost.total_bytes, cost.roofline_split(ridge), hist, traffic)


def shapes_report_text(report: ShapesReport, top: int = 10) -> str:
    """One line of totals and the compute-bound share, then the histogram (`shapes_text`)."""
    split = report.split
    classified = split.memory_flops + split.compute_flops
    per_byte = f"{report.total_flops / report.total_bytes:.2f}" if report.total_bytes else "-"
    return (
        f"{report.source}: {report.total_flops:,} FLOPs, {report.total_bytes:,} bytes moved (static floor), "
        f"{per_byte} FLOP/B; at ridge {report.ridge:g} FLOP/B "
        f"{share(split.compute_flops, classified) if classified else '-'} of FLOPs are in compute-bound ops\n"
        + _traffic_line(report.traffic)
        + shapes_text(report.histogram, top)
    )


def _traffic_line(t: TrafficSplit | None) -> str:
    """Where the tensor bytes go (weights, inputs and outputs, fusible intermediates), or nothing."""
    if t is None or not t.total:
        return ""
    unknown = f"; {t.unknown} tensors of dynamic size not counted" if t.unknown else ""
    return (
        f"traffic: weights {t.weight:,} B, inputs+outputs {t.io:,} B, intermediates {t.fusible:,} B "
        f"({share(t.fusible, t.total)} fusible at most){unknown}\n"
    )


def shape_histogram(module, total_flops: int | None = None) -> ShapeHistogram:
    """The GEMM and attention shape histograms of `module`. `total_flops` defaults to
    `analyze(module).total_flops`; a caller that has it already (the CLI) passes that
    number, which is what makes every share ≤ 100 %."""
    with memoized():  # constant-expression answers shared by the hoisting checks
        return _histogram(module, total_flops)


def _histogram(module, total_flops: int | None) -> ShapeHistogram:
    total = analyze(module).total_flops if total_flops is None else total_flops
    gemm: dict[tuple, list[int]] = {}
    dynamic: list[str] = []
    uncounted: list[str] = []
    memo: dict = {}
    for s in find_sites(module):
        if s.dynamic:
            dynamic.append(s.name)
            continue
        runs, why = executions(s.op, memo)
        if runs is None:
            uncounted.append(f"{s.name}: {why}")
            continue
        key = (s.batch, s.m, s.k, s.n, dtype_of([s.element_type(r) for r in ("lhs", "rhs", "out")]))
        acc = gemm.setdefault(key, [0, 0, 0])
        acc[0] += 1
        acc[1] += s.flops * runs
        acc[2] += runs
    att: dict[tuple, list[int]] = {}
    for op in _attention_ops(module):
        dims = attention_dims(op)
        cost = op_cost(op)
        if dims is None or cost.flops is None:
            dynamic.append(cost.name)
            continue
        runs, why = executions(op, memo)
        if runs is None:
            uncounted.append(f"{cost.name}: {why}")
            continue
        operands = list(op.operands)
        types = [_element(v) for v in operands[:3]] + [_element(op.results[0])]
        acc = att.setdefault((*dims, dtype_of(types)), [0, 0, 0])
        acc[0] += 1
        acc[1] += cost.flops * runs
        acc[2] += runs

    def share(f: int) -> float:
        """`f` over the module's FLOPs."""
        return f / total if total else 0.0

    gemms = [GemmShape(*k, c, f, share(f), r) for k, (c, f, r) in gemm.items()]
    gemms.sort(key=lambda g: (-g.flops, -g.count, g.batch, g.m, g.k, g.n, g.dtype))
    attention = [AttentionShape(*k, c, f, share(f), r) for k, (c, f, r) in att.items()]
    attention.sort(key=lambda a: (-a.flops, -a.count, a.b, a.m, a.k1, a.k2, a.n, a.dtype))
    return ShapeHistogram(gemms, attention, total, dynamic, uncounted)
