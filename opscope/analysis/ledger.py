"""The bytes ledger (reference §3.1) rendered from a `ModuleCost`: a text report and a JSON-safe dict.

The report: totals (FLOPs, bytes moved, read/written, intensity), the weight share of the
bytes, top ops by bytes and by FLOPs with their FLOP/B and roofline class, the per-kind
breakdown, the memory- vs compute-bound split of bytes and FLOPs at a ridge, hoisted
constant expressions, the loops counted as trip count × body, and every unknown op with
why. Every percentage is of a total that sums the same known parts it is a share of. Like the reference it warns that the
bytes are a floor, not a forecast: they must not drive rewrite decisions on their own.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from opscope.analysis.roofline import DEFAULT_RIDGE, roofline_class
from opscope.ir.flops import FOR
from opscope.text.numbers import count, nbytes, percent, share

if TYPE_CHECKING:
    from opscope.analysis.cost import ModuleCost, OpCost

FLOOR_NOTE = (
    "static floor: each operand read once, each result written once, perfect reuse inside an op, "
    "none across ops; diagnostic only"
)
SCHEMA = "opscope-cost/1"


def _intensity(x: float | None) -> str:
    """FLOP/B with two decimals, `-` when undefined."""
    return "-" if x is None else f"{x:.2f}"


def _op_rows(ops: list[OpCost], ridge: float) -> list[str]:
    """One line per op: bytes, FLOPs, FLOP/B, roofline class, label and name."""
    rows = []
    for c in ops:
        rows.append(
            f"  {nbytes(c.bytes or 0):>11} {count(c.flops or 0):>10} {_intensity(c.intensity):>8}  "
            f"{roofline_class(c, ridge):13} {c.label:24} {c.name}"
        )
    return rows


def ledger_text(cost: ModuleCost, top: int = 12, ridge: float = DEFAULT_RIDGE) -> str:
    """The bytes-ledger report of `cost` (see the module docstring)."""
    ops = cost.ops
    lines = [f"bytes ledger ({FLOOR_NOTE})"]
    if not ops:
        lines.append("  no ops to cost: the module has no func.func with a body (0 FLOPs, 0 B bytes moved)")
        return "\n".join(lines) + "\n"
    unknown = cost.unknown
    lines.append(
        f"  {len(ops)} ops in {len(cost.functions)} function(s)"
        + (f", {len(unknown)} with an unknown part (totals below are lower bounds)" if unknown else "")
    )
    lines.append(
        f"  FLOPs {count(cost.total_flops)} ({cost.total_flops:,}), "
        f"bytes moved {nbytes(cost.total_bytes)} (read {nbytes(cost.total_bytes_read)}, "
        f"written {nbytes(cost.total_bytes_written)}), intensity {cost.intensity:.2f} FLOP/B"
    )
    lines.append(f"  weights read {nbytes(cost.total_weight_bytes)}: {percent(cost.weight_share)} of bytes moved")
    if cost.hoisted:
        hb = sum(c.bytes or 0 for c in cost.hoisted)
        hf = sum(c.flops or 0 for c in cost.hoisted)
        lines.append(
            f"  hoisted constant expressions (weight transposes, broadcasts...): {len(cost.hoisted)} ops, "
            f"{nbytes(hb)}, {count(hf)} FLOPs once at load, 0 per call"
        )
    loops = [c for c in ops if c.label == FOR and c.domain is not None]
    if loops:
        lines.append(
            f"  loops counted as trip count × body: {', '.join(f'{c.name} ×{c.domain}' for c in loops[:top])}"
            + (" ..." if len(loops) > top else "")
        )
    header = f"  {'bytes':>11} {'FLOPs':>10} {'FLOP/B':>8}  {'class':13} {'kind':24} name"
    by_bytes = cost.top(top, by="bytes")
    if by_bytes:
        lines += ["", f"top {len(by_bytes)} ops by bytes:", header, *_op_rows(by_bytes, ridge)]
    by_flops = cost.top(top, by="flops")
    if by_flops:
        lines += ["", f"top {len(by_flops)} ops by FLOPs:", header, *_op_rows(by_flops, ridge)]
    lines += [
        "",
        "per kind (by bytes):",
        f"  {'kind':24} {'count':>6} {'bytes':>11} {'% bytes':>8} {'FLOPs':>10} {'% FLOPs':>8} {'FLOP/B':>8}",
    ]
    for r in cost.by_label():
        lines.append(
            f"  {r.label:24} {r.count:6d} {nbytes(r.bytes):>11} {share(r.bytes, cost.total_bytes):>8} "
            f"{count(r.flops):>10} {share(r.flops, cost.total_flops):>8} {_intensity(r.intensity):>8}"
        )
    split = cost.roofline_split(ridge)
    all_bytes, all_flops = split.memory_bytes + split.compute_bytes, split.memory_flops + split.compute_flops
    lines += ["", f"roofline at ridge {ridge:g} FLOP/B:"]
    for label, b, f in (
        ("memory-bound", split.memory_bytes, split.memory_flops),
        ("compute-bound", split.compute_bytes, split.compute_flops),
    ):
        lines.append(
            f"  {label:13} {nbytes(b):>11} bytes ({share(b, all_bytes)}), {count(f)} FLOPs ({share(f, all_flops)})"
        )
    if split.unknown_ops:
        lines.append(f"  {split.unknown_ops} op(s) unclassified (unknown FLOPs or bytes)")
    if unknown:
        lines += ["", f"unknown ({len(unknown)}):"]
        lines += [f"  {label:24} {name}: {why}" for label, name, why in unknown]
    return "\n".join(lines) + "\n"


def _op_dict(c: OpCost, ridge: float, function: str | None = None) -> dict:
    """One op as a JSON-safe dict (with its function's name when given)."""
    head = {} if function is None else {"function": function}
    return {
        **head,
        "index": c.index,
        "name": c.name,
        "label": c.label,
        "domain": c.domain,
        "flops": c.flops,
        "bytes_read": c.bytes_read,
        "bytes_written": c.bytes_written,
        "bytes_weights": c.bytes_weights,
        "intensity": c.intensity,
        "class": roofline_class(c, ridge),
        "unknown": c.unknown,
    }


def ledger_dict(cost: ModuleCost, ridge: float = DEFAULT_RIDGE) -> dict:
    """A JSON-safe dict: schema, totals, per-kind rows, the roofline split, hoisted, unknown and every op."""
    split = cost.roofline_split(ridge)
    return {
        "schema": SCHEMA,
        "note": FLOOR_NOTE,
        "totals": {
            "ops": len(cost.ops),
            "flops": cost.total_flops,
            "bytes": cost.total_bytes,
            "bytes_read": cost.total_bytes_read,
            "bytes_written": cost.total_bytes_written,
            "bytes_weights": cost.total_weight_bytes,
            "weight_share": cost.weight_share,
            "intensity": cost.intensity,
            "complete": cost.complete,
        },
        "by_label": [
            {
                "label": r.label,
                "count": r.count,
                "flops": r.flops,
                "bytes": r.bytes,
                "bytes_weights": r.bytes_weights,
                "unknown": r.unknown,
            }
            for r in cost.by_label()
        ],
        "roofline": {
            "ridge": ridge,
            "memory_bound_flops": split.memory_flops,
            "compute_bound_flops": split.compute_flops,
            "memory_bound_bytes": split.memory_bytes,
            "compute_bound_bytes": split.compute_bytes,
            "unknown_ops": split.unknown_ops,
        },
        "hoisted": [_op_dict(c, ridge) for c in cost.hoisted],
        "unknown": [{"label": label, "name": name, "why": why} for label, name, why in cost.unknown],
        "ops": [_op_dict(c, ridge, f.name) for f in cost.functions for c in f.ops],
    }


def ledger_json(cost: ModuleCost, ridge: float = DEFAULT_RIDGE) -> str:
    """`ledger_dict` as JSON (`opscope bytes --json`)."""
    return json.dumps(ledger_dict(cost, ridge), indent=2, ensure_ascii=False)
