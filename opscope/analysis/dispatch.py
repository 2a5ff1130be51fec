"""Per-dispatch view: the cost model attributed to the fused dispatches IREE will run.

IREE's flow phase (global optimization, then dispatch-region formation) runs in-process
with the target's flags (`opscope.run.targets`), stopping before any code generation
(`--compile-to=flow`, ~0.1 s on a small stack); the result comes back as bytecode, so the
ops inside each `flow.executable` keep their source locations (`layer0.ffn.up`). Per
executable:

* `flops`: the sum of `opscope.analysis.cost.op_cost` over its compute ops;
* `bytes_external`: what the dispatch moves to and from memory, i.e. every
  `iree_tensor_ext.dispatch.tensor.load` result and every `...tensor.store`d value;
* `bytes_internal`: what fusion keeps on chip: the bytes its ops would move as separate
  ops (Σ op_cost bytes) minus the external ones, never below 0 (a matmul whose bias add and
  activation are fused in does not write and re-read its output);
* `calls`: how many `flow.dispatch` sites run it (IREE deduplicates identical executables);
  totals multiply by it.

A dynamic shape anywhere in a dispatch makes its numbers unknown (None), never guessed.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from iree.compiler import ir

from opscope.analysis.cost import op_cost, value_bytes
from opscope.analysis.roofline import DEFAULT_RIDGE
from opscope.errors import OpscopeError
from opscope.ir.labels import op_label
from opscope.ir.sites import location_name
from opscope.text.numbers import exact
from opscope.text.table import table

LOAD, STORE = "iree_tensor_ext.dispatch.tensor.load", "iree_tensor_ext.dispatch.tensor.store"
ENCODING = "iree_encoding."  # set_encoding / unset_encoding: data tiling's relayouts
NOT_COMPUTE = frozenset(
    {
        LOAD,
        STORE,
        "func.return",
        "arith.constant",
        "tensor.empty",
        "hal.interface.binding.subspan",
        "hal.interface.constant.load",
        "iree_tensor_ext.dispatch.workload.ordinal",
    }
)


@dataclass(frozen=True)
class DispatchCost:
    """One dispatch executable: what it fuses and what it costs per call."""

    name: str
    calls: int
    ops: tuple[str, ...]
    sources: tuple[str, ...]
    flops: int | None
    bytes_external: int | None
    bytes_internal: int | None

    @property
    def intensity(self) -> float | None:
        """FLOPs per external byte: the roofline position of the fused dispatch."""
        if self.flops is None or not self.bytes_external:
            return None
        return self.flops / self.bytes_external

    @property
    def intensity_unfused(self) -> float | None:
        """FLOPs per byte had every op run on its own (external + internal traffic)."""
        if self.flops is None or self.bytes_external is None or self.bytes_internal is None:
            return None
        total = self.bytes_external + self.bytes_internal
        return self.flops / total if total else None


@dataclass(frozen=True)
class DispatchReport:
    """Every dispatch of a module, in executable order, and their per-call totals."""

    target: str
    dispatches: tuple[DispatchCost, ...]
    calls: tuple[tuple[str, str | None], ...] = ()  # per `flow.dispatch`, in order: (executable, its op's name)

    def total(self, field: str) -> int | None:
        """Σ calls × `field` over the dispatches (None if any is unknown)."""
        vals = [getattr(d, field) for d in self.dispatches]
        if any(v is None for v in vals):
            return None
        return sum(d.calls * v for d, v in zip(self.dispatches, vals))

    def to_dict(self, ridge: float = DEFAULT_RIDGE) -> dict:
        """JSON-safe: totals and one record per dispatch."""
        return {
            "target": self.target,
            "ridge": ridge,
            "dispatches": len(self.dispatches),
            "calls": sum(d.calls for d in self.dispatches),
            "flops": self.total("flops"),
            "bytes_external": self.total("bytes_external"),
            "bytes_internal": self.total("bytes_internal"),
            "per_dispatch": [
                {
                    "name": d.name,
                    "calls": d.calls,
                    "ops": list(d.ops),
                    "sources": list(d.sources),
                    "flops": d.flops,
                    "bytes_external": d.bytes_external,
                    "bytes_internal": d.bytes_internal,
                    "intensity": d.intensity,
                    "class": _class(d, ridge),
                }
                for d in self.dispatches
            ],
        }


def dispatch_text(report: DispatchReport, top: int = 20, ridge: float = DEFAULT_RIDGE) -> str:
    """A table of the `top` dispatches by FLOPs, with the totals above it."""
    flops, ext, internal = (report.total(f) for f in ("flops", "bytes_external", "bytes_internal"))
    lines = [
        f"{len(report.dispatches)} dispatches ({sum(d.calls for d in report.dispatches)} calls) on "
        f"{report.target}: {exact(flops)} FLOP, {exact(ext)} B to/from memory, {exact(internal)} B kept "
        f"on chip by fusion (ridge {ridge:g} FLOP/B)"
    ]
    ranked = sorted(report.dispatches, key=lambda d: -(d.flops or 0) * d.calls)[:top]
    head = ["dispatch", "calls", "FLOP", "ext B", "fused B", "FLOP/B", "class", "ops (sources)"]
    rows = [
        [
            d.name,
            str(d.calls),
            exact(d.flops),
            exact(d.bytes_external),
            exact(d.bytes_internal),
            "-" if d.intensity is None else f"{d.intensity:.1f}",
            _class(d, ridge),
            " + ".join(d.ops) + (f"  ({', '.join(d.sources)})" if d.sources else ""),
        ]
        for d in ranked
    ]
    lines += table(head, rows, right=lambda i: i not in (0, 6, 7), rule=True)
    return "\n".join(lines) + "\n"


def _class(d: DispatchCost, ridge: float) -> str:
    if d.flops is None:
        return "unknown"
    if d.flops == 0:
        return "trivial"
    return "memory-bound" if (d.intensity or 0.0) < ridge else "compute-bound"


def flow_module(source: ir.Module | str | bytes, target: str = "llvm-cpu") -> ir.Module:
    """`source` after IREE's dispatch-region formation for `target` (in-process, nothing compiled)."""
    from opscope.ir.loading import module_bytecode, parse_module
    from opscope.run.compile import _compile, check_compilable
    from opscope.run.targets import get_target

    if isinstance(source, ir.Module):
        check_compilable(source)
        source = module_bytecode(source)
    elif isinstance(source, str):
        source = source.encode()
    tgt = get_target(target)
    flow = _compile(source, tgt, tgt.flags, False, output="ir-bytecode", compile_to="flow")
    return parse_module(flow.vmfb, name="<flow>")


def analyze_dispatches(source: ir.Module | str | bytes, target: str = "llvm-cpu") -> DispatchReport:
    """Costs per dispatch executable of `source` as IREE forms them for `target`."""
    flow = flow_module(source, target)
    calls = dispatch_calls(flow)
    out = []
    for op in flow.body.operations:
        op = op.operation
        if op.name == "flow.executable":
            name = ir.StringAttr(op.attributes["sym_name"]).value
            out.append(_dispatch_cost(op, name, calls.get(name, 0)))
    return DispatchReport(target, tuple(out), dispatch_sites(flow))


def dispatch_sites(flow: ir.Module) -> tuple[tuple[str, str | None], ...]:
    """(executable, the module path of the op it was formed from) of every `flow.dispatch`, in order:
    IREE deduplicates executables (six layers, one executable), each call keeps its own location."""
    found: list[tuple[str, str | None]] = []

    def visit(op):
        if op.name == "flow.dispatch":
            root = str(op.attributes["entry_points"]).lstrip("[").split("::")[0].lstrip("@")
            found.append((root, location_name(op.location)))
        return ir.WalkResult.ADVANCE

    flow.operation.walk(visit)
    return tuple(found)


def dispatch_calls(flow: ir.Module) -> dict[str, int]:
    """Executable symbol -> number of `flow.dispatch` ops that run it."""
    return dict(Counter(executable for executable, _ in dispatch_sites(flow)))


def _dispatch_cost(executable: ir.Operation, name: str, calls: int) -> DispatchCost:
    fn = _inner_function(executable)
    labels, sources = [], []
    flops: int | None = 0
    op_bytes: int | None = 0
    external: int | None = 0
    for i, op in enumerate(fn.regions[0].blocks[0].operations):
        op = op.operation
        if op.name == LOAD:
            external = _add(external, value_bytes(op.results[0]))
            continue
        if op.name == STORE:
            external = _add(external, value_bytes(op.operands[0]))
            continue
        if op.name in NOT_COMPUTE or not any(isinstance(r.type, ir.RankedTensorType) for r in op.results):
            continue
        if op.name.startswith(ENCODING):  # a data-tiling relayout: moves bytes, computes nothing
            moved = [value_bytes(v) for v in [*op.operands, *op.results]]
            op_bytes = _add(op_bytes, None if None in moved else sum(moved))
        else:
            cost = op_cost(op, i)
            flops = _add(flops, cost.flops)
            op_bytes = _add(op_bytes, cost.bytes)
        labels.append(op_label(op))
        src = location_name(op.location)
        if src and src not in sources:
            sources.append(src)
    internal = None if op_bytes is None or external is None else max(0, op_bytes - external)
    return DispatchCost(name, calls, tuple(labels), tuple(sources), flops, external, internal)


def _inner_function(executable: ir.Operation) -> ir.Operation:
    """The one `func.func` inside a `flow.executable`'s inner `builtin.module`."""
    for op in executable.regions[0].blocks[0].operations:
        if op.operation.name == "builtin.module":
            for inner in op.operation.regions[0].blocks[0].operations:
                if inner.operation.name == "func.func":
                    return inner.operation
    raise OpscopeError(f"{executable.attributes['sym_name']}: no function inside the executable")


def _add(total: int | None, x: int | None) -> int | None:
    return None if total is None or x is None else total + x
