"""The probe commands' answers: per-tensor probes, per-layer plans under a budget, actions, the quant sweep.

Each builder takes a `WeightSet` (`opscope.probe.sources`) and returns a report that renders
itself (`opscope.probe.render`) and says how long each stage took.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np
from tqdm import tqdm

from opscope.errors import OpscopeError
from opscope.probe.allocate import Allocation, DadoConfig, dado_allocate, greedy_allocate
from opscope.probe.layers import LayerProfile, QuantStat, profile_layer, quant_stat
from opscope.probe.sources import WeightSet
from opscope.probe.stats import Probe, probe

ACTION_BUDGET = 0.02  # `actions`: the cheapest option within this weight error
SKIP_GAP = 0.02  # `actions`: a block whose output moves its input less than this is a skip candidate
INT4_BUDGET = 0.10  # the quant sweep's recipe: int4 where per-channel int4 error is within this


def _bar(items, desc: str, unit: str):
    """A progress bar on a terminal (as tqdm decides), nothing elsewhere."""
    return tqdm(items, desc=desc, unit=unit, leave=False, disable=None)


@dataclass
class ProbeReport:
    """Every tensor's probes."""

    name: str
    probes: dict[str, Probe]
    seconds: float
    skipped: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        return {
            "schema": "opscope-probe/1",
            "name": self.name,
            "seconds": self.seconds,
            "skipped": self.skipped,
            "tensors": {k: {**p.to_dict(), "verdict": p.verdict} for k, p in self.probes.items()},
        }


def probe_weights(weights: WeightSet) -> ProbeReport:
    """Probe every matrix of `weights`."""
    start = time.perf_counter()
    probes = {name: probe(m) for name, m in _bar(weights.matrices.items(), "probe", "tensor")}
    return ProbeReport(weights.name, probes, time.perf_counter() - start, weights.skipped)


@dataclass
class PlanOutcome:
    """A plan built into the model and measured end to end (`opscope.act.plan`)."""

    label: str
    choice: tuple[int, ...]
    total_err: float
    bytes: int
    metrics: dict[str, float]


@dataclass
class LayersReport:
    """Every layer's options, the greedy and DADO allocations at `budget`, what it took."""

    name: str
    budget: float
    allocator: str  # the plan the table shows: greedy or dado
    profiles: list[LayerProfile]
    greedy: Allocation
    dado: Allocation | None
    seconds: dict[str, float]  # profile, greedy, dado (and per option kind: `profile:<kind>`)
    skipped: list[str] = field(default_factory=list)
    measured: list[PlanOutcome] = field(default_factory=list)
    headline: str = ""  # the metric `measured` is ranked by
    baseline: dict[str, float] = field(default_factory=dict)
    columns: list[tuple[str, str, str]] = field(default_factory=list)  # (metric, header, format: pct or a spec)
    data: str = ""  # what the plans were measured on
    error: str = "sum"  # what the allocators minimized (`opscope.probe.allocate.ERRORS`)
    objective: str = "weights"  # weights: Σ rel_err picks the plan; measured: the headline metric does
    picked: str = ""  # the measured objective's plan (a label of `measured`)

    @property
    def plan(self) -> Allocation:
        return self.dado if self.allocator == "dado" and self.dado is not None else self.greedy

    @property
    def dense_flops(self) -> int:
        return sum(p.dense().flops for p in self.profiles)

    def flops(self, alloc: Allocation) -> int:
        return sum(p.options[c].flops for p, c in zip(self.profiles, alloc.choice))

    def to_dict(self) -> dict:
        def alloc(a: Allocation | None) -> dict | None:
            if a is None:
                return None
            return {
                "choice": [p.options[c].label for p, c in zip(self.profiles, a.choice)],
                "total_err": a.total_err,
                "bytes": a.total_bytes,
                "dense_bytes": a.dense_bytes,
                "budget_bytes": a.budget,
                "compression": a.compression,
                "flops": self.flops(a),
            }

        return {
            "schema": "opscope-layers/1",
            "name": self.name,
            "budget": self.budget,
            "allocator": self.allocator,
            "seconds": self.seconds,
            "skipped": self.skipped,
            "layers": [
                {
                    "name": p.name,
                    "rows": p.rows,
                    "cols": p.cols,
                    "dense_bytes": p.dense_bytes,
                    "options": [
                        {"label": o.label, "rel_err": o.rel_err, "bytes": o.bytes, "flops": o.flops} for o in p.options
                    ],
                }
                for p in self.profiles
            ],
            "greedy": alloc(self.greedy),
            "dado": alloc(self.dado),
            "headline": self.headline,
            "data": self.data,
            "baseline": self.baseline,
            "objective": self.objective,
            "error": self.error,
            "picked": self.picked,
            "measured": [
                {"label": m.label, "total_err": m.total_err, "bytes": m.bytes, "metrics": m.metrics}
                for m in self.measured
            ],
        }


def profile_weights(weights: WeightSet) -> tuple[list[LayerProfile], dict[str, float]]:
    """Every layer's profile and the seconds it took, in total and per option kind."""
    seconds: dict[str, float] = {}
    start = time.perf_counter()
    profiles = [
        profile_layer(name, m, seconds, weights.value_bytes.get(name, 4))
        for name, m in _bar(weights.matrices.items(), "profile", "layer")
    ]
    return profiles, {"profile": time.perf_counter() - start, **{f"profile:{k}": v for k, v in seconds.items()}}


def check_plan_request(source, budget: float, allocator: str, error: str, objective: str, measure: bool) -> bool:
    """Refuse a layer plan that cannot be made, before any weight is read: an unknown allocator,
    error or objective, a budget outside (0, 1], a measured plan without a model to build it into.
    Returns whether the plan is measured (`objective="measured"` implies it)."""
    from opscope.probe.allocate import ERRORS
    from opscope.probe.sources import is_tensor_path

    if allocator not in ("greedy", "dado"):
        raise OpscopeError(f"allocator must be greedy or dado, got {allocator!r}")
    if not 0 < budget <= 1:
        raise OpscopeError(f"budget is a share of the dense weight bytes in (0, 1], got {budget}")
    if error not in ERRORS:
        raise OpscopeError(f"error must be one of {', '.join(ERRORS)}, got {error!r}")
    if objective not in ("weights", "measured"):
        raise OpscopeError(f"objective must be weights or measured, got {objective!r}")
    measure = measure or objective == "measured"
    if measure and (source is None or is_tensor_path(source)):
        raise OpscopeError(
            "measure builds the plan into a model and runs it on the model's data: give a model "
            "(a zoo name or a model file), not tensor files or the built-in default"
        )
    return measure


def plan_layers(
    weights: WeightSet, budget: float, allocator: str = "dado", cfg: DadoConfig = DadoConfig(), error: str = "sum"
) -> LayersReport:
    """Profile every layer of `weights` and allocate `budget` of its dense bytes, minimizing `error`
    (Σ rel_err, Σ rel_err² or Σ ‖W − Ŵ‖²_F: `opscope.probe.allocate.ERRORS`)."""
    profiled, seconds = profile_weights(weights)
    start = time.perf_counter()
    greedy = greedy_allocate(profiled, budget, error)
    seconds["greedy"] = time.perf_counter() - start
    dado = None
    if allocator == "dado":
        start = time.perf_counter()
        with tqdm(total=cfg.iters, desc="dado", unit="round", leave=False, disable=None) as bar:
            dado = dado_allocate(profiled, budget, cfg, progress=lambda _: bar.update(), error=error)
        seconds["dado"] = time.perf_counter() - start
    return LayersReport(
        weights.name, budget, allocator, profiled, greedy, dado, seconds, list(weights.skipped), error=error
    )


@dataclass
class Action:
    """One layer's verdict: the cheapest option within the error budget and what to do with it."""

    name: str
    option: str
    rel_err: float
    bytes: int
    dense_bytes: int
    verb: str  # keep, quantize, REPLACE (structural), REPLACE ⇒ ternary (adds-only)


@dataclass
class ActionsReport:
    """Per-layer actions within `budget`, and the residual blocks near enough identity to skip."""

    name: str
    budget: float
    actions: list[Action]
    gaps: dict[str, float] | None  # block -> ‖out − in‖/‖in‖, from a recorded run; None: not given
    seconds: float

    @property
    def skips(self) -> list[str]:
        return [b for b, g in (self.gaps or {}).items() if g < SKIP_GAP]


def _verb(kind: str) -> str:
    if kind == "dense":
        return "keep"
    if kind == "ternary":
        return "REPLACE ⇒ ternary (adds-only)"
    if kind in ("int8", "int4", "int4g"):
        return "quantize"
    return "REPLACE (structural)"


def plan_actions(
    weights: WeightSet, budget: float = ACTION_BUDGET, gaps: dict[str, float] | None = None
) -> ActionsReport:
    """The cheapest option within `budget` per layer (the reference's `best_within`), classified."""
    start = time.perf_counter()
    actions = []
    for p in profile_weights(weights)[0]:
        o = p.options[p.best_within(budget)]
        actions.append(Action(p.name, o.label, o.rel_err, o.bytes, p.dense_bytes, _verb(o.kind)))
    return ActionsReport(weights.name, budget, actions, gaps, time.perf_counter() - start)


@dataclass
class QuantReport:
    """The quant sweep: every weight's headroom, by depth and by projection kind, and a mixed recipe."""

    name: str
    stats: list[QuantStat]
    int4_budget: float
    seconds: float

    def recipe(self) -> dict[str, int]:
        """Bits per weight: 4 where per-channel int4 is within the budget, else 8."""
        return {s.name: 4 if s.int4_pc <= self.int4_budget else 8 for s in self.stats}

    def by_layer(self) -> dict[int, tuple[float, float]]:
        """Block index -> (mean per-channel int8 error, mean per-channel int4 error)."""
        out: dict[int, list[QuantStat]] = {}
        for s in self.stats:
            if s.layer is not None:
                out.setdefault(s.layer, []).append(s)
        return {
            k: (float(np.mean([s.int8_pc for s in v])), float(np.mean([s.int4_pc for s in v])))
            for k, v in sorted(out.items())
        }

    def by_kind(self) -> dict[str, list[QuantStat]]:
        out: dict[str, list[QuantStat]] = {}
        for s in self.stats:
            out.setdefault(s.kind, []).append(s)
        return out


def quant_sweep(weights: WeightSet, int4_budget: float = INT4_BUDGET) -> QuantReport:
    """Per-tensor and per-channel int8, int4, int3 errors, outliers and best bits of every weight."""
    start = time.perf_counter()
    rows = [quant_stat(name, m) for name, m in _bar(weights.matrices.items(), "quant", "tensor")]
    return QuantReport(weights.name, rows, int4_budget, time.perf_counter() - start)
