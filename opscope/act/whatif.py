"""What-if: a rewrite's end-to-end cost in quality and what it saves, measured, not guessed.

`whatif(source, variants)` compiles the original model and each rewritten one (a variant is
an opscope-opt pipeline: `skip-residual-blocks{...}`, `fakequant-weights{...}`, any mix),
runs all of them on the same real inputs (`opscope.act.evalset`) and compares their outputs
by what the model does (`opscope.act.quality`: top-1 agreement and perplexity for a causal
LM, embedding cosine and neighbour ranking for an encoder, accuracy for a classifier). The
FLOPs and bytes of every build come from the static analysis of its module
(`opscope.analysis.cost`), so "saved" is what the rewritten IR no longer computes.

`sweep_skips(...)` answers "which blocks can go?": it builds the model once with
`gate-residual-blocks` (a runtime gate per residual block; a gate of 0 computes exactly what
the skip computes), turns one block off at a time, ranks the blocks by what their loss costs,
then walks the greedy curve (skip the k cheapest-to-lose blocks, k = 1, 2, ...) until the
headline metric falls below `floor`. The curve's largest k that keeps `keep` (95 % top-1
agreement by default) is then built for real with `skip-residual-blocks` and measured again,
so its number comes from the skipped module, not from the gates.
"""

from __future__ import annotations

import gc
import logging
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from opscope.act.evalset import EvalSet
from opscope.act.quality import Summary, compare, headline, own, summary
from opscope.errors import OpscopeError

if TYPE_CHECKING:
    pass

# name -> (what it simulates, its pipeline). Weights a model takes as arguments (the digits MLP)
# count as weights; activations are the inputs of projections (a weight rhs), as in the reference.
FAKEQUANT: dict[str, tuple[str, str]] = {
    "w8a8": (
        "W8A8 (int8 weights per output channel, int8 activations per token)",
        "fakequant-activations{bits=8},fakequant-weights{bits=8 arguments=true}",
    ),
    "w8a16": ("W8A16 (int8 weights per output channel)", "fakequant-weights{bits=8 arguments=true}"),
    "w4a16": ("W4A16 (int4 weights per output channel)", "fakequant-weights{bits=4 arguments=true}"),
    "w4g32a16": (
        "W4A16 g32 (int4 weights, a scale per 32 inputs)",
        "fakequant-weights{bits=4 group=32 arguments=true}",
    ),
    "a8": ("A8 (int8 activations per token, f32 weights)", "fakequant-activations{bits=8}"),
}
KEEP = 0.95  # the headline share a "k blocks can go" answer keeps
FLOOR = 0.5  # the greedy curve stops below this


@dataclass(frozen=True)
class Variant:
    """One rewrite: what it is in words and the pipeline that makes it."""

    what: str
    pipeline: str


def skip(blocks: Sequence[str]) -> Variant:
    """Skip the residual blocks named (or numbered) in `blocks`."""
    names = [str(b) for b in blocks]
    if not names:
        raise OpscopeError("skip: name at least one residual block")
    listed = ", ".join(names) if len(names) <= 4 else f"{', '.join(names[:3])} and {len(names) - 3} more"
    return Variant(
        f"skip {len(names)} block{'s' if len(names) > 1 else ''}: {listed}",
        'skip-residual-blocks{blocks="' + ",".join(names) + '"}',
    )


def fakequant(name: str) -> Variant:
    """A named fake-quant scheme of `FAKEQUANT`."""
    try:
        what, pipeline = FAKEQUANT[name.lower()]
    except KeyError:
        raise OpscopeError(
            f"no fake-quant scheme '{name}' (choose one of: {', '.join(FAKEQUANT)}; or give "
            "--pipeline 'fakequant-weights{...},fakequant-activations{...}')"
        ) from None
    return Variant(what, pipeline)


@dataclass(frozen=True)
class Outcome:
    """One build measured: its metrics against the original and its static cost."""

    what: str
    pipeline: str
    metrics: dict[str, float]
    flops: int
    bytes: int
    weights: int  # bytes of its matmul weights at rest, at the precision it simulates (`opscope.act.weights`)
    gated: bool = False  # measured through the gates of one build (a sweep), not a build of its own


@dataclass
class WhatIfReport:
    """The original build's own numbers and every variant's, with the sweep and the greedy curve."""

    model: str
    task: str
    target: str
    data: str
    baseline: dict[str, float]
    flops: int
    bytes: int
    weights: int
    outcomes: list[Outcome] = field(default_factory=list)
    sweep: list[Outcome] = field(default_factory=list)  # one block off at a time, least harmful first
    curve: list[Outcome] = field(default_factory=list)  # the greedy k = 1, 2, ... skips
    layers: list[Outcome] = field(default_factory=list)  # one layer rewritten at a time, most harmful first
    notes: list[str] = field(default_factory=list)
    keep: float = KEEP  # the headline share the sweep's answer keeps

    @property
    def headline(self) -> str:
        return headline(self.task)

    def saved(self, o: Outcome) -> float:
        """The share of the original FLOPs the variant no longer computes (negative: it adds some)."""
        return 1.0 - o.flops / self.flops if self.flops else 0.0

    def weights_saved(self, o: Outcome) -> float:
        """The share of the original matmul weight bytes the variant no longer stores."""
        return 1.0 - o.weights / self.weights if self.weights else 0.0

    def most_skippable(self, keep: float | None = None) -> Outcome | None:
        """The longest prefix of the greedy curve whose headline metric stays >= `keep` (the report's)."""
        keep = self.keep if keep is None else keep
        fine = [o for o in self.curve if o.metrics.get(self.headline, 0.0) >= keep]
        return fine[-1] if fine else None

    def to_dict(self) -> dict:
        def one(o: Outcome) -> dict:
            return {
                "what": o.what,
                "pipeline": o.pipeline,
                "metrics": o.metrics,
                "flops": o.flops,
                "bytes": o.bytes,
                "weights": o.weights,
                "flops_saved": self.saved(o),
                "weights_saved": self.weights_saved(o),
                "gated": o.gated,
            }

        return {
            "schema": "opscope-whatif/1",
            "model": self.model,
            "task": self.task,
            "target": self.target,
            "data": self.data,
            "headline": self.headline,
            "baseline": self.baseline,
            "flops": self.flops,
            "bytes": self.bytes,
            "weights": self.weights,
            "outcomes": [one(o) for o in self.outcomes],
            "sweep": [one(o) for o in self.sweep],
            "curve": [one(o) for o in self.curve],
            "layers": [one(o) for o in self.layers],
            "notes": self.notes,
        }


class Bench:
    """The original model compiled and run once on the evaluation set; variants measured against it."""

    def __init__(self, evalset: EvalSet, target: str = "llvm-cpu", progress: Callable[[str], None] | None = None):
        from opscope.act.weights import weight_bytes
        from opscope.analysis.cost import analyze
        from opscope.ir.arguments import function_op, symbol_name

        self.evalset = evalset
        self.target = target
        self.progress = progress or (lambda line: None)
        module = self.module()
        cost = analyze(module)
        self.flops, self.bytes = cost.total_flops, cost.total_bytes
        self.weights = weight_bytes(module)  # no pipeline: reads `module`, rewrites nothing
        self.function = symbol_name(function_op(module))
        self.reference = self.run(module, "the original", cache=True)
        self.report = WhatIfReport(
            evalset.name, evalset.task, target, evalset.data, own(self.reference), self.flops, self.bytes, self.weights
        )

    def module(self):
        """A fresh parse of the original module (rewrites work in place)."""
        return parse_module_of(self.evalset)

    def loaded(self, module, label: str, cache: bool = False):
        """`module` compiled for the target (with progress) and loaded. Only the original is cached
        (`cache`); a variant compiles in a child process, uncached: each would otherwise keep a
        model-sized vmfb in the cache (30 SmolLM2 variants: 16 GB) and its weights in this
        process (`compile_isolated`)."""
        from opscope.run.compile import compile_isolated, compile_module
        from opscope.run.runtime import load
        from opscope.run.ticker import ticking

        start = time.perf_counter()
        with ticking(f"compile {label} for {self.target}"):
            compiled = compile_module(module, self.target) if cache else compile_isolated(module, self.target)
        self.progress(
            f"compiled {label} in {time.perf_counter() - start:.1f} s{' (cached)' if compiled.cached else ''}"
        )
        return load(compiled)

    def run(self, module, label: str, cache: bool = False) -> Summary:
        """Compile `module` and summarize its outputs on every batch; the loaded build is freed at once
        (iree.runtime's context sits in a reference cycle: without a collection each SmolLM2 variant
        kept its 540 MB until the process ran out of memory)."""
        result = self.summarize(self.loaded(module, label, cache), label)
        gc.collect()
        return result

    def summarize(self, loaded, label: str, extra: Sequence[np.ndarray] = ()) -> Summary:
        """Run `loaded` on every batch (with `extra` arguments appended) and summarize its outputs."""
        result = summary(self.evalset.task)
        start = time.perf_counter()
        labels = self.evalset.labels or [None] * len(self.evalset.batches)
        for batch, lab in zip(self.evalset.batches, labels):
            result.add(batch, loaded.invoke(self.function, *batch, *extra), lab)
        self.progress(f"ran {label} on {self.evalset.data} in {time.perf_counter() - start:.1f} s")
        return result

    def measure(self, variant: Variant) -> Outcome:
        """Build `variant`, run it, compare it with the original."""
        from opscope.act.weights import weight_bytes
        from opscope.analysis.cost import analyze
        from opscope.pipeline.textual import run_pipeline

        module = self.module()
        with _quiet():  # `check_variants` showed this pipeline's warnings
            run_pipeline(module, variant.pipeline)
            weights = weight_bytes(self.module(), variant.pipeline)
        cost = analyze(module)
        metrics = compare(self.reference, self.run(module, variant.what))
        outcome = Outcome(variant.what, variant.pipeline, metrics, cost.total_flops, cost.total_bytes, weights)
        self.report.outcomes.append(outcome)
        return outcome

    def skipped_cost(self, blocks: Sequence[str]) -> tuple[int, int, int]:
        """(FLOPs, bytes, weight bytes) of the module with `blocks` skipped, from the static analysis."""
        from opscope.act.weights import weight_bytes
        from opscope.analysis.cost import analyze

        module = self.module()
        with _quiet():
            weights = weight_bytes(module, skip(blocks).pipeline)  # skips `module` in place
        cost = analyze(module)
        return cost.total_flops, cost.total_bytes, weights


def check_variants(evalset: EvalSet, pipelines: Sequence[str]) -> None:
    """Apply each pipeline to a fresh parse of the model and throw the result away: a block or site
    that does not exist, a bad option or an invalid rewrite fails here, before anything compiles."""
    from opscope.pipeline.textual import run_pipeline

    for pipeline in pipelines:
        run_pipeline(parse_module_of(evalset), pipeline)  # its warnings are shown: the build repeats none


@contextmanager
def _quiet() -> Iterator[None]:
    """Pass warnings off while a pipeline is re-run for its static cost (the build already said them)."""
    log = logging.getLogger("opscope")
    level = log.level
    log.setLevel(logging.ERROR)
    try:
        yield
    finally:
        log.setLevel(level)


def whatif(
    evalset: EvalSet,
    variants: Sequence[Variant],
    *,
    target: str = "llvm-cpu",
    progress: Callable[[str], None] | None = None,
) -> WhatIfReport:
    """Measure each variant against the original on `evalset` (see the module docstring)."""
    check_variants(evalset, [v.pipeline for v in variants])
    bench = Bench(evalset, target, progress)
    for v in variants:
        bench.measure(v)
    return bench.report


def sweep_skips(
    evalset: EvalSet,
    *,
    blocks: str = "*",
    target: str = "llvm-cpu",
    keep: float = KEEP,
    floor: float = FLOOR,
    verify: bool = True,
    variants: Sequence[Variant] = (),
    progress: Callable[[str], None] | None = None,
) -> WhatIfReport:
    """The skip sensitivity sweep and greedy curve over `blocks` (see the module docstring); `variants`
    are measured too, and, with `verify`, the curve's answer at `keep` is built as a real skip. Its
    evaluations as jobs on many processes: `opscope.act.whatif_jobs.sweep_skip_jobs`, the same report."""
    gate = gate_pipeline(blocks)
    check_variants(evalset, [gate] + [v.pipeline for v in variants])
    bench = Bench(evalset, target, progress)
    report = bench.report
    report.keep = keep
    metric = report.headline
    names, loaded = gated_build(bench, gate)
    ones = np.ones(len(names), np.float32)
    note = gates_on_note(metric, compare(bench.reference, bench.summarize(loaded, "all gates on", [ones])))
    report.notes += [note] if note else []
    singles = [gated_outcome(bench, loaded, names, [name], f"skip {name}", f"without {name}") for name in names]
    order = sensitivity_order(singles, metric)
    report.sweep = [singles[i] for i in order]
    for k in range(1, len(names) + 1):
        blocks_off = [names[i] for i in order[:k]]
        point = gated_outcome(bench, loaded, names, blocks_off, skip(blocks_off).what, f"without {k} blocks")
        report.curve.append(point)
        if point.metrics.get(metric, 0.0) < floor:
            break
    del loaded
    gc.collect()
    best = report.most_skippable(keep)
    if verify and best is not None:
        note = built_note(metric, bench.measure(Variant(best.what + " (built)", best.pipeline)), best)
        report.notes += [note] if note else []
    for v in variants:
        bench.measure(v)
    return report


def gate_pipeline(blocks: str) -> str:
    """The pipeline that gives each residual block of `blocks` a runtime gate (one build for a whole sweep)."""
    return 'gate-residual-blocks{blocks="' + blocks + '"}'


def gate_names(evalset: EvalSet, gate: str) -> list[str]:
    """The gated blocks' names, in gate order, from a gated parse (no compile): what a sweep's jobs name."""
    from opscope.pipeline.textual import run_pipeline

    gated = parse_module_of(evalset)
    with _quiet():
        run_pipeline(gated, gate)
    return _gate_names(gated)


def gated_build(bench: Bench, gate: str) -> tuple[list[str], object]:
    """(the gated blocks' names, the gated build compiled and loaded): what every sweep evaluation runs."""
    from opscope.pipeline.textual import run_pipeline

    gated = bench.module()
    with _quiet():
        run_pipeline(gated, gate)
    names = _gate_names(gated)
    return names, bench.loaded(gated, f"the gated build ({len(names)} blocks)")


def gated_outcome(bench: Bench, loaded, names: Sequence[str], off: Sequence[str], what: str, label: str) -> Outcome:
    """The gated build run with the blocks `off` gated to 0, compared with the original, priced as their real skip."""
    gates = np.ones(len(names), np.float32)
    gates[[names.index(name) for name in off]] = 0.0
    metrics = compare(bench.reference, bench.summarize(loaded, label, [gates]))
    return Outcome(what, skip(off).pipeline, metrics, *bench.skipped_cost(off), gated=True)


def sensitivity_order(singles: Sequence[Outcome], metric: str) -> list[int]:
    """The singles' indices, least harmful first (the greedy curve's order; ties keep block order)."""
    return sorted(range(len(singles)), key=lambda i: -singles[i].metrics.get(metric, 0.0))


def gates_on_note(metric: str, same: dict[str, float]) -> str | None:
    """The report's note when the gated build with every gate on is not the original, else None."""
    if same.get(metric, 1.0) == 1.0:
        return None
    return (
        f"with every gate on the gated build differs from the original ({metric} "
        f"{same.get(metric):.4f}): gate arithmetic changed the schedule"
    )


def built_note(metric: str, built: Outcome, best: Outcome) -> str | None:
    """The report's note when the built skip measures otherwise than its gates did, else None."""
    if built.metrics.get(metric) == best.metrics.get(metric):
        return None
    return f"the built skip measures {metric} {built.metrics.get(metric):.4f}, the gates {best.metrics.get(metric):.4f}"


def layer_prefixes(evalset: EvalSet) -> list[str]:
    """The layers of a model, as the site-name prefixes of its residual blocks (`model.layers.3` of
    `model.layers.3.attn` and `.ffn`), in IR order."""
    from opscope.ir.blocks import residual_blocks

    module = parse_module_of(evalset)
    prefixes = [b.name.rsplit(".", 1)[0] for b in residual_blocks("layer sweep", module) if "." in b.name]
    layers = list(dict.fromkeys(prefixes))
    if not layers:
        raise OpscopeError(f"{evalset.name}: no residual blocks, so no layers to sweep one at a time")
    return layers


def sweep_layers(
    evalset: EvalSet, scheme: str, *, target: str = "llvm-cpu", progress: Callable[[str], None] | None = None
) -> WhatIfReport:
    """Fake-quant `scheme` (`FAKEQUANT`) on one layer at a time (its sites, by name prefix), plus the whole
    model: which layers a quantization hurts most. One build per layer (as jobs on many processes:
    `opscope.act.whatif_jobs.sweep_layer_jobs`, the same report)."""
    variants = layer_variants(evalset, scheme)  # a bad site selection fails before the original compiles
    bench = Bench(evalset, target, progress)
    return by_layer(bench.report, [bench.measure(v) for v in variants])


def layer_variants(evalset: EvalSet, scheme: str) -> list[Variant]:
    """`scheme` on the whole model, then on each layer alone (its sites by name prefix), checked to build."""
    import re

    whole = fakequant(scheme)
    per_layer = [
        Variant(f"{scheme.upper()} on {layer}", _with_sites(whole.pipeline, "^" + re.escape(layer) + r"\."))
        for layer in layer_prefixes(evalset)
    ]
    check_variants(evalset, [whole.pipeline] + [per_layer[0].pipeline])
    return [whole, *per_layer]


def by_layer(report: WhatIfReport, outcomes: Sequence[Outcome]) -> WhatIfReport:
    """`report` with the whole model's outcome (the first) and the layers' (the rest), most harmful first."""
    report.outcomes = list(outcomes[:1])
    report.layers = sorted(outcomes[1:], key=lambda o: o.metrics.get(report.headline, 0.0))
    return report


def _with_sites(pipeline: str, regex: str) -> str:
    """`pipeline` with every opscope pass that selects sites restricted to the sites `regex` names."""
    import dataclasses

    from opscope.pipeline.textual import Pipeline, parse_pipeline

    elements = [
        dataclasses.replace(e, sites=regex) if not isinstance(e, str) and hasattr(e, "sites") else e
        for e in parse_pipeline(pipeline).elements
    ]
    return str(Pipeline(tuple(elements)))


def parse_module_of(evalset: EvalSet):
    """A fresh parse of the evaluation set's model."""
    from opscope.ir.loading import new_context, parse_module

    return parse_module(evalset.module, new_context(), evalset.name)


def lowest_influence(run: str, k: int) -> list[str]:
    """The `k` residual blocks of least block influence (BI = 1 − mean cos(h, h + d)) in the recorded
    run `run` (`opscope infer`/`profile` with the residual taps), least first."""
    from opscope.mining.report import residual_table

    names = list(dict.fromkeys(residual_table(run).sort("bi")["site"].to_list()))
    if not 1 <= k <= len(names):
        raise OpscopeError(f"{run} has {len(names)} residual blocks: k must be 1 to {len(names)}, got {k}")
    return names[:k]


def _gate_names(module) -> list[str]:
    """The block names of the gated function's `opscope.gates` argument."""
    from iree.compiler import ir

    from opscope.ir.arguments import function_op
    from opscope.passes.gate_residual_blocks import GATES_ATTR

    fn = function_op(module)
    attrs = ir.ArrayAttr(fn.attributes["arg_attrs"])
    last = ir.DictAttr(attrs[len(attrs) - 1])  # (a negative index crashes the 3.13 bindings)
    return [ir.StringAttr(a).value for a in ir.ArrayAttr(last[GATES_ATTR])]


def variants_of(
    skips: Iterable[str | Iterable[str]] = (),
    skip_lowest: int | None = None,
    run: str | None = None,
    schemes: Iterable[str] = (),
    pipelines: Iterable[str] = (),
) -> list[Variant]:
    """The variants a what-if request names, in order: each `skips` item (a list of residual-block
    names or ordinals, or one comma-separated string) skipped together; the `skip_lowest` blocks of
    least influence in the recorded `run`; each fake-quant scheme of `schemes`; each pipeline. Bad names, schemes
    and pipelines are one-line errors before any model is read."""
    from opscope.ir.blocks import parse_blocks
    from opscope.pipeline.textual import parse_pipeline

    variants = [skip(parse_blocks(s) if isinstance(s, str) else list(s)) for s in skips]
    if skip_lowest is not None:
        if not run:
            raise OpscopeError(
                "--skip-lowest reads block influence from a recorded run: give --from RUN (from Python: "
                "skip_lowest=K, run=RUN; record one with `opscope infer MODEL --taps residual --out RUN`)"
            )
        variants.append(skip(lowest_influence(str(run), skip_lowest)))
    elif run:
        raise OpscopeError("--from RUN (run=) goes with --skip-lowest K (skip_lowest=)")
    variants += [fakequant(s) for s in schemes]
    variants += [Variant(p, p) for p in pipelines]
    for v in variants:
        parse_pipeline(v.pipeline)  # unknown passes and options fail here, in one line
    return variants


def check_request(
    variants: Sequence[Variant], sweep: bool, sweep_layers: str | None, keep: float, floor: float
) -> None:
    """Refuse a request that cannot work, before anything is built: no question, two runs in one,
    a layer sweep with other variants, an unknown scheme, `keep`/`floor` out of range."""
    if not variants and not sweep and not sweep_layers:
        raise OpscopeError(
            "nothing to measure: give --skip, --skip-lowest, --fakequant, --pipeline, --sweep or --sweep-layers "
            "(from Python: skip, skip_lowest, fakequant, pipelines, sweep or sweep_layers)"
        )
    if sweep and sweep_layers:
        raise OpscopeError("--sweep and --sweep-layers (sweep, sweep_layers) are two runs: give one of them")
    if sweep_layers and variants:
        raise OpscopeError("--sweep-layers (sweep_layers) measures its scheme alone: drop the other variants")
    if sweep_layers:
        fakequant(sweep_layers)  # an unknown scheme fails before the model is built
    if not 0 < keep <= 1 or not 0 <= floor <= 1:
        raise OpscopeError(f"--keep must be in (0, 1] and --floor in [0, 1], got {keep} and {floor}")


def measure(
    evalset: EvalSet,
    variants: Sequence[Variant],
    *,
    sweep: bool = False,
    sweep_layers_scheme: str | None = None,
    blocks: str = "*",
    keep: float = KEEP,
    floor: float = FLOOR,
    verify: bool = True,
    target: str = "llvm-cpu",
    progress: Callable[[str], None] | None = None,
) -> WhatIfReport:
    """The request `check_request` accepted, run in this process: the skip sweep and greedy curve (`sweep`),
    a scheme one layer at a time (`sweep_layers_scheme`), or the variants against the original."""
    if sweep:
        return sweep_skips(
            evalset,
            blocks=blocks,
            target=target,
            keep=keep,
            floor=floor,
            verify=verify,
            variants=variants,
            progress=progress,
        )
    if sweep_layers_scheme:
        return sweep_layers(evalset, sweep_layers_scheme, target=target, progress=progress)
    return whatif(evalset, variants, target=target, progress=progress)
