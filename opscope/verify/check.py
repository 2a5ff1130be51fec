"""A run's recorded sketches and outputs against an independent run of the same model on the same inputs.

For a PyTorch source the exported program runs in PyTorch (`opscope.verify.torch_run`) and a
sample of sites of every family present (matmuls, convolutions, attention softmaxes, routers,
residual adds; `sample` of each, spread over the model) is paired with the nodes it was imported
from (`opscope.verify.keys`): each pair's tensors give the reference sketches
(`opscope.verify.sketches`), compared with the recorded ones of the first step; the sites'
FLOPs are compared with PyTorch's `FlopCounterMode`, the outputs with PyTorch's. For ONNX and
JAX sources, the outputs with onnxruntime's and jax's. A site that cannot be paired (no node at
its place, another size) is listed as not compared, never as a difference.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
from iree.compiler import ir

from opscope.ir.const_expr import is_const_expr, memoized
from opscope.ir.dynamics import RESIDUAL, ROUTING, SOFTMAX, find_dynamics_sites
from opscope.ir.sites import find_sites, is_zeros
from opscope.verify.keys import Key, ir_key
from opscope.verify.sketches import (
    Difference,
    attention_bounds,
    attention_sketches,
    differences,
    residual_bounds,
    residual_sketches,
    route_load,
    tensor_bounds,
    tensor_sketches,
)

SAMPLE = 8  # sites of each family compared
Recorded = Mapping[tuple[str, str, str], np.ndarray]  # (site, role, stat) -> values of one step
_FAMILY_OF = {SOFTMAX: "softmax", ROUTING: "routing", RESIDUAL: "residual"}
_NOUNS = {
    "matmul": "matmul",
    "conv": "convolution",
    "softmax": "attention",
    "routing": "router",
    "residual": "residual add",
}


@dataclass
class Verification:
    """What an independent run confirmed of a recorded run, and what it did not."""

    reference: str  # what ran the model the second time
    compared: dict[str, int] = field(default_factory=dict)  # family -> sites compared
    sketches: int = 0  # sketches compared
    differences: list[Difference] = field(default_factory=list)
    not_compared: list[str] = field(default_factory=list)  # "site: why"
    flops: tuple[int, int] | None = None  # (the sites', the reference's)
    outputs: tuple[int, float, float] | None = None  # (outputs compared, max |Δ|, bound)
    output_problem: str = ""  # outputs that could not be compared, or differ in shape
    failed: str = ""  # why the check could not be made at all (the reference or the pairing failed)

    @property
    def agrees(self) -> bool:
        outputs_ok = self.outputs is None or self.outputs[1] <= self.outputs[2]
        return not self.differences and outputs_ok and not self.output_problem and not self.failed

    def line(self) -> str:
        """One line for the report's first lines: what was verified, what differed."""
        if self.failed:
            return f"verify: could not check against {self.reference}, nothing was verified: {self.failed}"
        parts = []
        if self.sketches:
            sites = ", ".join(f"{n} {_NOUNS[f]}{'s' * (n > 1)}" for f, n in self.compared.items() if n)
            parts.append(f"{self.sketches} sketches of {sum(self.compared.values())} sites ({sites})")
        if self.outputs is not None:
            n, gap, bound = self.outputs
            parts.append(
                f"{n} output{'s' * (n > 1)} (max |Δ| {gap:.2g}{' > ' + f'{bound:.2g}' if gap > bound else ''})"
            )
        if self.flops is not None:
            ours, theirs = self.flops
            same = "=" if ours == theirs else "≠"
            parts.append(f"FLOPs {ours:,} {same} {theirs:,}")
        head = f"verify: {self.reference} {'agrees' if self.agrees else 'DIFFERS'}"
        what = "; ".join(parts) or "nothing comparable"
        tail = []
        if self.differences:
            shown = "; ".join(d.line() for d in self.differences[:3])
            more = f" and {len(self.differences) - 3} more (verify.json)" if len(self.differences) > 3 else ""
            tail.append(f"{len(self.differences)} differ: {shown}{more}")
        if self.output_problem:
            tail.append(self.output_problem)
        if self.not_compared:
            tail.append(f"{len(self.not_compared)} sites not compared (verify.json says why)")
        if self.flops is not None and self.flops[0] != self.flops[1]:
            tail.append("FLOPs differ: the reference counts its own ops (PyTorch's FlopCounterMode)")
        return f"{head}: {what}" + ("; " + "; ".join(tail) if tail else "")

    def to_dict(self) -> dict:
        return {
            "reference": self.reference,
            "agrees": self.agrees,
            "compared": self.compared,
            "sketches": self.sketches,
            "differences": [d.__dict__ for d in self.differences],
            "not_compared": self.not_compared,
            "flops": list(self.flops) if self.flops else None,
            "outputs": list(self.outputs) if self.outputs else None,
            "output_problem": self.output_problem,
            "failed": self.failed,
        }


# --------------------------------------------------------------------------------------- outputs


def compare_outputs(check: Verification, ours: Sequence[np.ndarray], theirs: Sequence[np.ndarray]) -> None:
    """The model's outputs against the reference's: float ones within 1e-3 of the largest |value|
    (+1e-5), integer ones exactly."""
    if len(ours) != len(theirs):
        check.output_problem = f"the reference gave {len(theirs)} outputs, the run {len(ours)}"
        return
    worst, bound = 0.0, 0.0
    for i, (a, b) in enumerate(zip(ours, theirs)):
        a, b = np.asarray(a), np.asarray(b)
        if a.size != b.size:
            check.output_problem = f"output {i} has {a.size} elements here, {b.size} in the reference"
            return
        a, b = a.reshape(-1).astype(np.float64), b.reshape(-1).astype(np.float64)
        tol = (
            0.0
            if np.issubdtype(np.asarray(ours[i]).dtype, np.integer)
            else 1e-3 * float(np.abs(b).max(initial=0)) + 1e-5
        )
        gap = float(np.abs(a - b).max(initial=0))
        if gap - tol > worst - bound or i == 0:
            worst, bound = gap, tol
    check.outputs = (len(ours), worst, bound)


# ---------------------------------------------------------------------------------------- PyTorch


@dataclass(frozen=True)
class _IRSite:
    name: str
    family: str  # matmul | softmax | routing | residual (how it pairs with FX nodes)
    group: str  # what it is sampled and reported as: matmul | conv | softmax | routing | residual
    key: Key
    ordinal: int  # among the sites of its key and family, in IR order
    site: object  # opscope.ir.sites.Site or DynamicsSite


def ir_sites(module: ir.Module) -> list[_IRSite]:
    """Every matmul, convolution and dynamics site of `module` with its key and ordinal."""
    found = []
    with module.context:
        matmuls = find_sites(module.operation)
        for s in matmuls:
            found.append((s.name, "matmul", "conv" if "conv" in s.kind else "matmul", ir_key(s.op.location), s))
        dyn = find_dynamics_sites(module, taken={s.name for s in matmuls})
        for d in dyn.sites:
            fam = _FAMILY_OF.get(d.kind)
            if fam is not None:
                found.append((d.name, fam, fam, ir_key(d.op.location), d))
    adds = _adds_by_key(module)
    ordinals: dict[tuple[Key, str], int] = {}
    out = []
    for name, fam, group, key, site in found:
        n = ordinals.get((key, fam), 0)
        ordinals[(key, fam)] = n + 1
        if fam == "residual":  # among every add of two like tensors at its place, as PyTorch's adds are counted
            at_key = adds.get(key, [])
            n = next((i for i, op in enumerate(at_key) if op == site.op), n)
        out.append(_IRSite(name, fam, group, key, n, site))
    return out


def _adds_by_key(module: ir.Module) -> dict[Key, list[ir.Operation]]:
    """The elementwise adds of two tensors of the result's type (`linalg.generic` with an `addf`),
    by key, in IR order: a residual add's place among them is its node's among PyTorch's adds."""
    found: dict[Key, list[ir.Operation]] = {}

    def visit(op):
        if op.name == "linalg.generic" and len(op.results) == 1 and len(op.operands) == 3:
            ty = op.results[0].type
            body = [o.name for o in op.regions[0].blocks[0].operations]
            if "arith.addf" in body and all(v.type == ty for v in list(op.operands)[:2]):
                found.setdefault(ir_key(op.location), []).append(op)
        return ir.WalkResult.ADVANCE

    module.operation.walk(visit)
    return found


def sample_sites(sites: Sequence[_IRSite], recorded_sites: set[str], per_group: int = SAMPLE) -> list[_IRSite]:
    """Up to `per_group` recorded sites of each group, spread evenly over the model."""
    chosen = []
    for group in dict.fromkeys(s.group for s in sites):
        members = [s for s in sites if s.group == group and s.name in recorded_sites]
        if len(members) > per_group:
            picks = np.linspace(0, len(members) - 1, per_group).round().astype(int)
            members = [members[i] for i in dict.fromkeys(picks.tolist())]
        chosen += members
    return chosen


def verify_torch(
    program,
    module: ir.Module,
    recorded: Recorded,
    inputs: Sequence[np.ndarray],
    outputs: Sequence[np.ndarray] | None = None,
    row_stride: int = 1,
    weights_dtype: str | None = None,
    per_group: int = SAMPLE,
) -> Verification:
    """`recorded` (one step's sketches of the run of `module`, the untapped canonical linalg imported
    from the exported `program`) and `outputs` against `program` run in PyTorch on `inputs`."""
    from opscope.verify.torch_run import run_program

    check = Verification("PyTorch")
    recorded_sites = {site for site, _, _ in recorded}
    with memoized():
        every = ir_sites(module)
        chosen = sample_sites(every, recorded_sites, per_group)
        wanted = {(s.key, s.family, s.ordinal) for s in chosen if s.family != "residual"}
        residual_keys = {s.key for s in chosen if s.family == "residual"}
        run = run_program(
            program.module(),
            inputs,
            lambda key, fam, n: (key, fam, n) in wanted or (fam == "residual" and key in residual_keys),
            weights_dtype,
        )
        for s in chosen:
            why = _compare_site(check, s, run.nodes, recorded, row_stride)
            if why:
                check.not_compared.append(f"{s.name}: {why}")
    check.flops = (sum(s.site.flops for s in every if s.family == "matmul"), run.flops)
    if outputs is not None:
        compare_outputs(check, outputs, run.outputs)
    return check


def _compare_site(check: Verification, s: _IRSite, nodes: dict, recorded: Recorded, row_stride: int) -> str:
    """Compare one site's recorded sketches with its node's; '' when compared, else why not."""
    at_key = nodes.get((s.key, s.family), {})
    if s.family == "residual":  # the n-th residual add of its place: the n-th add of two like tensors there
        adds = [at_key[n] for n in sorted(at_key) if _two_tensors(at_key[n])]
        if s.ordinal >= len(adds):
            return "no residual add at its place in the program"
        return _compare_residual(check, s, adds[s.ordinal], recorded, row_stride)
    captured = at_key.get(s.ordinal)
    if captured is None:
        return "no op at its place in the program"
    if s.family == "matmul":
        return _compare_matmul(check, s, captured, recorded, row_stride)
    if s.family == "softmax":
        probs = _as_tapped(captured.result.numpy(), s.site.values[0], row_stride)
        if probs is None:
            return "its probabilities have another size than PyTorch's softmax"
        return _count(check, s, s.site.role, recorded, attention_sketches(probs), attention_bounds(probs))
    load = recorded.get((s.name, "route", "route_load"))
    if load is None:
        return "no route_load recorded"
    indices = _as_tapped(captured.result[1].numpy(), s.site.values[0], row_stride)
    if indices is None:
        return "its indices have another size than PyTorch's top-k"
    ref = {"route_load": route_load(indices, len(load))}
    return _count(check, s, "route", recorded, ref, {"route_load": 0.0})


def _as_tapped(x: np.ndarray, value: ir.Value, row_stride: int) -> np.ndarray | None:
    """`x` in the shape of the IR tensor the taps read, its rows sampled as `sample-rows` samples
    them (every `row_stride`-th of the second-to-last dim, rank >= 2); None when the sizes differ."""
    shape = tuple(ir.RankedTensorType(value.type).shape)
    if x.size != int(np.prod(shape)):
        return None
    x = x.reshape(shape)
    return x[..., ::row_stride, :] if row_stride > 1 and x.ndim >= 2 else x


def _two_tensors(c) -> bool:
    import torch

    a = c.args[:2]
    return (
        len(a) == 2
        and all(isinstance(t, torch.Tensor) and t.is_floating_point() for t in a)
        and (a[0].numel() == a[1].numel())
    )


def _compare_residual(check: Verification, s: _IRSite, add, recorded: Recorded, row_stride: int) -> str:
    a, b = (_as_tapped(t.numpy(), s.site.values[0], row_stride) for t in add.args[:2])
    if a is None or b is None:
        return "its tensors have another size than PyTorch's add"
    got = recorded.get((s.name, "residual", "res_a_sumsq"))
    if got is None:
        return "no residual sketches recorded"
    first, second = residual_sketches(a, b), residual_sketches(b, a)
    # the stream is whichever operand the taps called h: the assignment whose Σh² is the recorded one
    ref = min((first, second), key=lambda r: abs(float(r["res_a_sumsq"][0]) - float(got[0])))
    return _count(check, s, "residual", recorded, ref, residual_bounds(ref))


def _compare_matmul(check: Verification, s: _IRSite, c, recorded: Recorded, row_stride: int) -> str:
    site = s.site
    try:
        tensors = _matmul_tensors(c, bias_in_out=not is_zeros(site.op.operands[-1]))
    except (TypeError, IndexError, RuntimeError) as e:
        return f"its op {c.target} could not be read ({str(e)[:80]})"
    prepared = []
    for role, t in tensors.items():
        if (s.name, role, "min") not in recorded:
            continue
        x, want = t.numpy(), int(np.prod(site.shape(role)))
        if role == "lhs" and x.size != want and 0 in c.unpadded:  # the site reads the input before its zero pad
            x = c.unpadded[0].numpy()
        per_call = not is_const_expr(site.value(role))
        if x.size != want and not per_call and x.size and want % x.size == 0:
            x = np.tile(x.reshape(-1), want // x.size)  # a weight broadcast over a batch: each copy sketched
        tapped = _as_tapped(x, site.value(role), row_stride if per_call else 1)  # weights are read whole
        if tapped is None:
            return f"{role} has {want} elements, {c.target}'s {x.size}"
        prepared.append((role, tapped))
    if not prepared:
        return "no matmul sketches recorded"
    for i, (role, x) in enumerate(prepared):
        ref = tensor_sketches(x)
        why = _count(check, s, role, recorded, ref, tensor_bounds(x, ref), count_site=i == 0)
        if why:
            return why
    return ""


def _matmul_tensors(c, bias_in_out: bool) -> dict:
    """lhs, rhs and out of a matmul-like ATen op as the site reads them (out with the bias only
    where the site's own result includes it: a convolution accumulating into the broadcast bias)."""
    import torch

    name = c.target.split(".")[1]
    args = c.args
    if name == "linear":
        x, w = args[0], args[1]
        b = args[2] if len(args) > 2 else None
        return {"lhs": x, "rhs": w, "out": c.op(x, w, b if bias_in_out else None)}
    if name == "addmm":
        b, m1, m2 = args[:3]
        out = torch.mm(m1, m2)
        return {"lhs": m1, "rhs": m2, "out": out + b if bias_in_out else out}
    if name == "baddbmm":
        b, m1, m2 = args[:3]
        out = torch.bmm(m1, m2)
        return {"lhs": m1, "rhs": m2, "out": out + b if bias_in_out else out}
    if name in ("mm", "bmm", "matmul"):
        return {"lhs": args[0], "rhs": args[1], "out": c.result}
    x, w = args[0], args[1]
    b = args[2] if len(args) > 2 else None
    out = c.result if bias_in_out or b is None else c.op(x, w, None, *args[3:])
    return {"lhs": x, "rhs": w, "out": out}


def _count(
    check: Verification,
    s: _IRSite,
    role: str,
    recorded: Recorded,
    ref: dict,
    bounds: dict,
    count_site: bool = True,
) -> str:
    mine = {stat: v for (site, r, stat), v in recorded.items() if site == s.name and r == role}
    if not mine:
        return f"no {role} sketches recorded"
    n, found = differences(s.name, role, mine, ref, bounds)
    if not n:
        return f"none of its {role} sketches has a reference"
    check.sketches += n
    check.differences += found
    if count_site:
        check.compared[s.group] = check.compared.get(s.group, 0) + 1
    return ""


def recorded_step(csv) -> dict[tuple[str, str, str], np.ndarray]:
    """The first recorded step of a run's tidy table: (site, role, stat) -> its values by index."""
    import polars as pl

    from opscope.record.tidy import read_tidy

    df = read_tidy(csv)
    if df.is_empty():
        return {}
    first = df.select(pl.col("run_id").min(), pl.col("step").min()).row(0)
    df = df.filter((pl.col("run_id") == first[0]) & (pl.col("step") == first[1])).sort("idx")
    out = {}
    for (site, role, stat), part in df.group_by(["site", "role", "stat"], maintain_order=True):
        out[(str(site), str(role), str(stat))] = part["value"].cast(pl.Float64).to_numpy()
    return out
