"""The kernel plan: a profile run's findings turned into IREE rewrites, each guarded, checked and timed.

`kernel_plan(run)` reads the run folder (`run.json` names the model, target, steps and
inputs), proposes per recorded site what its sketches and IR support
(`opscope.act.candidates`: a guarded channel skip, int8 weights, a low-rank weight, a
memoized call),
measures each on the site outlined at its real shapes, fed the tensors it saw on the run's
first step (`opscope.act.site_bench`), and decides: an exact rewrite must stay bit-identical,
a lossy one within `max_error` of the site's output (relative L2); either must be at least
`min_speedup` faster at the floor and at the median of the rounds (a gain only the floor
shows is the machine's noise). A site keeps its fastest accepted rewrite. `apply` writes
the module with every kept rewrite and measures the whole model against the original, on
every recorded step's inputs for agreement.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from operator import attrgetter
from pathlib import Path

from opscope.act.candidates import IR_KINDS, KINDS, QUANT, SPARSE, Proposal, propose, sparse_sites
from opscope.act.run_folder import read_run
from opscope.act.site_bench import Measured, measured, parity
from opscope.errors import OpscopeError

MIN_SPEEDUP = 1.05  # measured: below this a rewrite is noise, not a gain
MAX_ERROR = 0.01  # a lossy rewrite's relative L2 error of the site's output, at most
PLAN_SHARDS = "plan.shards"  # in the run folder: `plan --dask`'s site results as they come back (`--resume`)
ACCEPT = "accept"


@dataclass(frozen=True)
class Candidate:
    """One site's specialization: the pass that makes it, why, what it should and does save, the decision."""

    proposal: Proposal
    estimated: float = 1.0  # the cost model's speedup of the site
    measured: Measured | None = None
    parity: str = ""  # "bit-identical" or "max |Δ| …"
    rel_error: float = 0.0
    decision: str = ""
    worker: str = field(default="", compare=False)  # host:pid that measured it under dask (not rendered)

    # the proposal's, read through: site, kind, options, guard, pipeline
    site = property(attrgetter("proposal.site"))
    kind = property(attrgetter("proposal.kind"))
    options = property(attrgetter("proposal.options"))
    guard = property(attrgetter("proposal.guard"))
    pipeline = property(attrgetter("proposal.pipeline"))

    @property
    def accepted(self) -> bool:
        return self.decision == ACCEPT


@dataclass(frozen=True)
class Applied:
    """The specialized module written by `apply`, and the whole model timed against the original."""

    path: Path | None
    pipeline: str
    measured: Measured | None
    parity: str
    rel_error: float
    steps: int
    weights: tuple[tuple[str, Path], ...] = ()  # (scope, file) of the parameter files written beside it
    quality: dict | None = None  # with a quality budget: `quality_summary` of what `assemble` kept and measured


@dataclass
class KernelPlan:
    """Every candidate of a run, measured and decided, and the specialized module when applied."""

    run: Path
    model: str
    target: str
    steps: int
    candidates: list[Candidate] = field(default_factory=list)
    applied: Applied | None = None
    sparse_activations: list[tuple[str, float]] = field(default_factory=list)  # (site, lhs density) below 0.5

    @property
    def accepted(self) -> list[Candidate]:
        return [c for c in self.candidates if c.accepted]

    def to_dict(self) -> dict:
        d = asdict(self)
        d["run"] = str(self.run)
        if self.applied is not None and self.applied.path is not None:
            d["applied"]["path"] = str(self.applied.path)
            d["applied"]["weights"] = [[scope, str(f)] for scope, f in self.applied.weights]
        for c, cd in zip(self.candidates, d["candidates"]):
            cd.pop("worker")
            cd.update(cd.pop("proposal"))
            cd["pipeline"] = c.pipeline
            cd["guard"]["stability"] = c.guard.stability
            if c.measured is not None:
                cd["measured"]["speedup"] = c.measured.speedup
        return d


def check_kinds(kinds) -> tuple[str, ...]:
    """The candidate kinds asked for, each one of KINDS (a one-line error otherwise)."""
    kinds = tuple(kinds)
    bad = [k for k in kinds if k not in KINDS]
    if bad or not kinds:
        raise OpscopeError(f"unknown candidate kind {', '.join(bad) or '(none)'}: choose from {', '.join(KINDS)}")
    return kinds


def kernel_plan(
    run: str | Path,
    model=None,
    *,
    target: str | None = None,
    apply: bool = False,
    out: str | Path | None = None,
    rounds: int = 5,
    min_speedup: float = MIN_SPEEDUP,
    max_error: float | None = None,
    kinds=KINDS,
    progress: Callable[[str], None] | None = None,
    parameters: bool | None = None,
    quality: str | float | None = None,
    dask: str | None = None,
    resume: bool = False,
) -> KernelPlan:
    """Propose, guard, measure and decide each recorded site's specialization; with `apply`,
    write the specialized module to `out` and measure the whole model. `parameters`: the model's
    weights are mapped from one parameter file (in a temporary folder; None: so for a model of
    128 MiB or more, `opscope.models.source.open_apart`) by every build instead of carried in it.
    `quality` (with `apply`): the end-to-end budget on the model's evaluation set
    (`opscope.act.quality_gate`); the applied module is the most lossy rewrites that stay within
    it (`opscope.act.assemble`), and a lossy rewrite is no longer held to `max_error` at its site
    unless `max_error` is given. `max_error` None: MAX_ERROR (without `quality`). `dask`
    (`opscope.jobs.executor`): each site's candidates measured as one job on a worker
    (`opscope.act.site_bench.measure_sites`); what is proposed, checked and decided is the serial
    plan's, the timings the worker's; the whole-model steps (`apply`, `assemble`) stay here. Each
    site's results are kept in the run folder's `plan.shards` as they come back (removed once all are):
    `resume` reads those a killed plan left instead of measuring the sites again."""
    from opscope.drive.profile import CSV_NAME, resolve_inputs
    from opscope.ir.arguments import function_op, symbol_name
    from opscope.record.tidy import read_tidy

    kinds = check_kinds(kinds)
    if dask is not None:
        from opscope.jobs.executor import check_spec

        check_spec(dask)  # a bad option or a missing extra: one line before the run is read
    if resume and dask is None:
        raise OpscopeError("--resume reads the site results a killed `plan --dask` left in the run folder: give --dask")
    if quality is not None and not apply:
        raise OpscopeError("quality is the budget --apply assembles the specialized model against: add --apply")
    if max_error is None:
        max_error = float("inf") if quality is not None else MAX_ERROR
    folder, record = read_run(run)
    store = None
    if dask is not None:
        from opscope.act.site_bench import plan_store

        store = plan_store(folder / PLAN_SHARDS, resume)  # old shards without --resume: one line now
    if model is None and "source" not in record:
        raise OpscopeError(
            f"{folder} does not say which model it profiled (no run.json source): "
            "give the model, e.g. `opscope plan RUN --model model.onnx`"
        )
    target = target or record.get("target", "llvm-cpu")
    steps = int(record.get("steps", 1))
    tidy = read_tidy(folder / CSV_NAME)
    dtype = record.get("weights_dtype") if model is None else None  # the run's weights, rounded as profiled
    source, held, text, module, sites = _model(
        model if model is not None else record["source"], steps, tidy, folder, parameters, dtype
    )
    if progress is not None:
        progress(f"{source.name} on {target} ({folder})")
    batches, _ = resolve_inputs(source, steps, _inputs(record), record.get("text"), record.get("tokenizer"))
    judge = _judge(model if model is not None else record["source"], quality, target, progress) if quality else None
    plan = KernelPlan(folder, source.name, target, steps)
    maxima, path = _calibration(tidy, folder, progress) if QUANT in kinds else ({}, "")
    proposals = propose(tidy, sites, kinds, maxima or None, path, static=quality is not None)
    plan.sparse_activations = sparse_sites(tidy, sites) if SPARSE in kinds else []
    function = symbol_name(function_op(module))
    del sites, module  # the proposals hold names and text, not IR
    if proposals:
        from opscope.act.site_bench import measure_sites, site_tensors

        tensors = site_tensors(text, sorted({p.site for p in proposals}), batches[0], target)
        for p, r in zip(proposals, measure_sites(text, proposals, tensors, target, rounds, dask, progress, store)):
            c = Candidate(p, r.estimated, r.measured, r.parity, r.rel_error, worker=r.worker)
            plan.candidates.append(replace(c, decision=r.skipped or decide(c, min_speedup, max_error)))
        plan.candidates = keep_fastest(plan.candidates, min_speedup)
    if apply:
        assembled = None
        if judge is not None:
            from opscope.act.assemble import assemble, shared_examples

            evaluator, gates = judge
            found = assemble(plan.accepted, evaluator, gates, applied_pipeline, progress)
            assembled = (found, shared_examples(batches, evaluator.evalset.batches))
        plan.applied = _apply(plan, text, function, batches, target, rounds, out, progress, assembled)
    del held  # the temporary parameter file, if any, goes now that nothing builds from it
    return plan


def _judge(source, quality, target: str, progress):
    """(a `Bench` of `source`'s evaluation set, the gates `quality` states for its task), built
    before any candidate is measured: a bad budget is a one-line error at once."""
    from opscope.act.evalset import eval_set
    from opscope.act.quality_gate import parse_quality
    from opscope.act.whatif import Bench

    evalset = eval_set(source, progress=progress)
    gates = parse_quality(quality, evalset.task)
    return Bench(evalset, target, progress), gates


def quality_summary(found, shared: tuple[int, int]) -> dict:
    """What `assemble` found, as plain data for the plan's JSON and text."""
    return {
        "gates": [str(g) for g in found.gates],
        "passed": found.passed,
        "metrics": found.metrics,
        "own": found.own,
        "data": found.data,
        "lossy_kept": sum(1 for c in found.kept if not c.proposal.exact),
        "left_out": [list(x) for x in found.left_out],
        "builds": found.builds,
        "tried": [[k, m, list(f)] for k, m, f in found.tried],
        "shared_examples": list(shared),
    }


def _calibration(tidy, folder: Path, progress) -> tuple[dict, str]:
    """The run's lhs maxima per site over every step but the first, and the calibration file they
    are written to (the run folder's `calibration.npz`), for the smoothed and statically scaled
    W8A8 candidates: each site is measured on the first step's tensors, so its error is measured on
    data its calibration never saw (calibrated on the same tensors, a 4-row torch MLP's plan kept
    smoothed W8A8 rewrites at an in-sample error under 1 % whose written module then missed
    numpy's output on another input at 4 of 32 elements by more than 5 %). None when the run
    kept no chan_maxabs or recorded one step."""
    import polars as pl

    from opscope.act.calibration import CALIBRATION_NAME, save_calibration, site_maxima

    maxima = site_maxima(tidy.filter(pl.col("step") != tidy["step"].min())) if not tidy.is_empty() else {}
    if not maxima:
        if progress is not None and site_maxima(tidy):
            progress(
                "one recorded step: no SmoothQuant candidates (their maxima would come from the very step "
                "their error is measured on); profile two steps or more"
            )
        return {}, ""
    return maxima, str(save_calibration(maxima, folder.resolve() / CALIBRATION_NAME))


def _model(model, steps: int, tidy, folder: Path, parameters: bool | None, weights_dtype: str | None):
    """(the model source, the temporary folder of its parameter file or None, its module text with
    locations, the parsed module, its recorded sites by name: they live as long as the module);
    one line if the run recorded sites the model lacks."""
    import polars as pl

    from opscope.drive.profile import default_source
    from opscope.ir.loading import module_text, new_context, parse_module
    from opscope.ir.sites import ROLES, find_sites
    from opscope.models.source import open_apart

    source, held = (
        (default_source(steps), None)
        if model is None
        else open_apart(model, steps, parameters=parameters, weights_dtype=weights_dtype)
    )
    if isinstance(source.module, str):
        text = source.module
    else:
        parsed = (
            source.module
            if hasattr(source.module, "operation")
            else parse_module(source.module, new_context(), source.name)
        )
        text = module_text(parsed, debug_info=True)
    module = parse_module(text, new_context(), source.name)
    every = {s.name: s for s in find_sites(module.operation)}
    recorded = (
        tidy.filter(pl.col("role").cast(pl.String).is_in(ROLES))["site"]
        .cast(pl.String)
        .unique(maintain_order=True)
        .to_list()
    )  # the matmul sites: attention, routing and residual taps have roles of their own
    missing = [s for s in recorded if s not in every]
    if missing:
        raise OpscopeError(
            f"{folder} records sites the model lacks ({', '.join(missing[:6])}): "
            f"profile this model again, or give the model the run was recorded on (--model)"
        )
    return source, held, text, module, {name: site for name, site in every.items() if name in set(recorded)}


def _inputs(record: dict):
    """The input files a run recorded, if it was fed any (else the model's own or generated inputs)."""
    given = record.get("inputs")
    if given == "in-memory":
        raise OpscopeError(
            "the run was fed inputs in memory: rebuild its plan through the Python API with the same inputs"
        )
    return given


def decide(c: Candidate, min_speedup: float, max_error: float) -> str:
    """Accept a rewrite that keeps its promise (exact: bit-identical; lossy: within `max_error`)
    and is `min_speedup` faster both at the floor and at the median."""
    m = c.measured
    if c.proposal.exact and c.parity != "bit-identical":
        return f"reject: not bit-identical ({c.parity})"
    if not c.proposal.exact and c.rel_error > max_error:
        return f"reject: error {c.rel_error:.2g} > {max_error:g}"
    if m.speedup < min_speedup:
        return f"no gain (measured {m.speedup:.2f}×)"
    if m.median_speedup < min_speedup:
        return f"no gain (noisy: {m.speedup:.2f}× at the floor, {m.median_speedup:.2f}× at the median)"
    return ACCEPT


def keep_fastest(candidates: list[Candidate], min_speedup: float = MIN_SPEEDUP) -> list[Candidate]:
    """One rewrite per site: its fastest accepted candidate stays accepted, the others say which won.
    Candidates within `min_speedup` of the fastest are as fast as it (the machine's noise): of
    those the one with the smallest output error wins (an exact rewrite, or the SmoothQuant
    strength that loses least)."""
    noise = max(min_speedup, 1.0)
    fastest: dict[str, float] = {}
    for c in candidates:
        if c.accepted:
            fastest[c.site] = max(fastest.get(c.site, 0.0), c.measured.speedup)
    best: dict[str, Candidate] = {}
    for c in candidates:
        if not c.accepted or c.measured.speedup * noise < fastest[c.site]:
            continue
        if c.site not in best or (c.rel_error, -c.measured.speedup) < (
            best[c.site].rel_error,
            -best[c.site].measured.speedup,
        ):
            best[c.site] = c
    return [
        c
        if not c.accepted or best[c.site] is c
        else replace(
            c,
            decision=f"accept, but {best[c.site].proposal.label} is "
            + (
                f"faster ({best[c.site].measured.speedup:.2f}×)"
                if c.measured.speedup * noise < best[c.site].measured.speedup
                else f"as fast with less error ({best[c.site].rel_error:.2g})"
            ),
        )
        for c in candidates
    ]


def write_module(text: str, path: Path) -> tuple[tuple[str, Path], ...]:
    """Write the module `text` to `path`; a parameter file it reads its weights from goes beside it
    (`PATH.irpa`, or `PATH.SCOPE.irpa` for several; a hard link where the file system allows) and
    the written module names it, so it outlives a temporary file. Returns (scope, file) of each
    file written beside."""
    import os
    import shutil

    from opscope.ir.loading import module_text, new_context, parse_module
    from opscope.ir.parameter_files import parameter_files, set_parameter_files

    module = parse_module(text, new_context(), str(path))
    files = parameter_files(module)
    if not files:
        path.write_text(text)
        return ()
    beside = {scope: path.with_suffix(".irpa" if len(files) == 1 else f".{scope or 'default'}.irpa") for scope in files}
    for scope, source in files.items():
        target = beside[scope]
        if target.resolve() == Path(source).resolve():
            continue
        target.unlink(missing_ok=True)
        try:
            os.link(source, target)
        except OSError:  # another file system, or links not allowed
            shutil.copyfile(source, target)
    set_parameter_files(module, {scope: str(f.resolve()) for scope, f in beside.items()})
    path.write_text(module_text(module, debug_info=True))
    return tuple(beside.items())


def applied_pipeline(accepted: list[Candidate]) -> str:
    """The rewrites `--apply` builds into the module: every accepted IR rewrite but a memoized call
    (host-side) and a weight stored sparse from an argument baked for its measurement (the model
    would stop reading the argument)."""
    return ",".join(c.pipeline for c in accepted if c.kind in IR_KINDS and not c.proposal.baked)


def _apply(
    plan: KernelPlan, text: str, function: str, batches: list, target: str, rounds: int, out, progress, assembled=None
) -> Applied:
    """The module with every accepted rewrite (or, with a quality budget, those `assemble` kept),
    written to `out`, timed and compared with the original."""
    from opscope.act.site_bench import rewritten
    from opscope.run.call_timing import time_calls
    from opscope.run.compile import compile_module
    from opscope.run.runtime import load

    pipeline = applied_pipeline(list(assembled[0].kept) if assembled else plan.accepted)
    summary = quality_summary(*assembled) if assembled else None
    specialized = rewritten(text, pipeline) if pipeline else text
    path, kept = None, ()
    if out is not None:
        path = Path(out)
        kept = write_module(specialized, path)
        if progress is not None:
            progress(
                f"wrote {path} ({pipeline.count('{')} rewrite(s))" + "".join(f", its weights {f}" for _, f in kept)
            )
    if not pipeline:
        return Applied(path, pipeline, None, "bit-identical", 0.0, len(batches), kept, summary)
    compiled = [compile_module(text, target), compile_module(specialized, target)]
    loaded = [load(m) for m in compiled]
    worst, worst_rel = "bit-identical", 0.0
    for batch in batches:
        got = [m.invoke(function, *batch) for m in loaded]
        for a, b in zip(*got):
            same, rel = parity(a, b)
            if same != "bit-identical" and rel >= worst_rel:
                worst, worst_rel = same, rel
    times = time_calls(compiled, function, batches[0], rounds=rounds)
    return Applied(path, pipeline, measured(times), worst, worst_rel, len(batches), kept, summary)
