"""One site outlined at its real shapes, rewritten, checked and timed against itself.

`extract-site{only=true}` makes the site a module of its own; the proposal's pass rewrites
it (in the outlined module it is the only site); IREE compiles both for the target; they
run on the tensors the site saw (`site_tensors`: `dump-tensors` on the same model and
inputs) for parity, and `opscope.run.call_timing` times them side by side. Sites of one
shape and rewrite share one timing (a model's six identical layers are timed once); each
site's parity is its own. The estimate is the static cost model's: roofline time
max(FLOPs / ridge, bytes) of the outlined site before over after (`opscope.analysis.cost`).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from opscope.act.candidates import FACTOR, MEMO, SKIP, SPARSE, Proposal
from opscope.jobs.store import Codec, Store

UNCHANGED = {
    FACTOR: "no gain: the rank keeping 99 % of the energy saves no FLOPs",
    SPARSE: "no gain: its fullest output channel holds half of K or more (the padded density)",
}


@dataclass(frozen=True)
class Measured:
    """Minimum (and median) µs per call over alternating rounds: original, rewritten, unguarded."""

    original_us: float
    rewritten_us: float
    unguarded_us: float | None = None  # the rewrite without its guard: what the guard costs
    rounds: int = 0
    original_median_us: float | None = None
    rewritten_median_us: float | None = None
    baked_us: float | None = None  # a baked argument weight, dense: what baking alone changes

    @property
    def speedup(self) -> float:
        """At the floor: the minimum times' ratio."""
        return self.original_us / self.rewritten_us

    @property
    def median_speedup(self) -> float:
        """At the median: a gain that only shows at the floor is the machine's noise."""
        if self.original_median_us is None or self.rewritten_median_us is None:
            return self.speedup
        return self.original_median_us / self.rewritten_median_us


@dataclass(frozen=True)
class SiteResult:
    """A proposal measured: estimate, times, parity and the rewrite's relative output error."""

    estimated: float
    measured: Measured | None
    parity: str
    rel_error: float
    skipped: str = ""  # why the rewrite did not apply to this site (it left the module unchanged)
    worker: str = ""  # host:pid of the Dask worker that measured it (`measure_sites` with dask), else ""


def measured(times, third: str = "unguarded") -> Measured:
    """A Measured from `time_calls` results: original, rewritten and (optional) a third variant,
    the unguarded rewrite or (`third="baked"`) the original with its argument weight baked in."""
    extra = times[2].min_us if len(times) > 2 else None
    return Measured(
        times[0].min_us,
        times[1].min_us,
        extra if third == "unguarded" else None,
        times[0].rounds,
        times[0].median_us,
        times[1].median_us,
        extra if third == "baked" else None,
    )


def parity(a: np.ndarray, b: np.ndarray) -> tuple[str, float]:
    """("bit-identical" or "max |Δ| …", ‖b − a‖ / ‖a‖)."""
    a, b = np.asarray(a), np.asarray(b)
    if a.shape == b.shape and a.tobytes() == b.tobytes():
        return "bit-identical", 0.0
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    rel = float(np.linalg.norm(b64 - a64) / max(np.linalg.norm(a64), 1e-30))
    return f"max |Δ| {float(np.max(np.abs(a64 - b64))):.3g}", rel


def site_tensors(text: str, names: list[str], batch: list[np.ndarray], target: str) -> dict[str, list[np.ndarray]]:
    """Each named site's runtime operands on `batch` (a lhs that is no weight, and a rhs that is no
    weight), as the model computes them: the arguments of its `extract-site` function, in order."""
    from opscope.ir.const_expr import is_const_expr
    from opscope.ir.loading import new_context, parse_module
    from opscope.ir.sites import find_sites
    from opscope.ir.weight_source import lhs_weight
    from opscope.passes.dump_tensors import DumpTensors, dumps
    from opscope.pipeline.textual import Pipeline, run_pipeline
    from opscope.run.compile import compile_module
    from opscope.run.runtime import load
    from opscope.run.ticker import ticking

    module = parse_module(text, new_context(), "model")
    chosen = set(names)
    sites = [s for s in find_sites(module.operation) if s.name in chosen]
    computed_rhs = {s.name for s in sites if not is_const_expr(s.value("rhs"))}
    weight_lhs = {s.name for s in sites if lhs_weight(s)}  # W @ x: its function takes x alone
    taps = [DumpTensors(keep=lambda s: s.name in chosen and s.name not in weight_lhs, role="lhs")]
    if computed_rhs:  # a site whose rhs is no weight takes it as an argument once outlined
        taps.append(DumpTensors(keep=lambda s: s.name in computed_rhs, role="rhs"))
    run_pipeline(module, Pipeline(tuple(taps)))
    function, dumped = dumps(module)
    with ticking(f"compile the model with {len(dumped)} dumped tensors for {target}"):
        loaded = load(compile_module(module, target))
    results = loaded.invoke(function, *batch)
    out: dict[str, list[np.ndarray]] = {n: [] for n in names}
    for d in sorted(dumped, key=lambda d: (d.site, d.role != "lhs")):
        out[d.site].append(np.asarray(results[d.result]))
    return out


def outlined(text: str, site: str) -> str:
    """The site alone, as a module (`extract-site{only=true}`), locations kept."""
    from opscope.passes.extract_site import ExtractSite

    return _transformed(text, lambda module: ExtractSite(site=site, only=True).apply(module))


def rewritten(text: str, pipeline: str) -> str:
    """`text` after an opscope-opt pipeline, locations kept."""
    from opscope.pipeline.textual import parse_pipeline, run_pipeline

    return _transformed(text, lambda module: run_pipeline(module, parse_pipeline(pipeline)))


def baked(text: str, rhs: np.ndarray) -> str:
    """The outlined site `text` with its rhs argument replaced by a constant holding `rhs` (the
    recorded weight), the argument kept (unread) so both builds take the same inputs."""
    from iree.compiler import ir
    from iree.compiler.dialects import arith

    from opscope.ir.arguments import function_op
    from opscope.ir.sites import find_sites
    from opscope.ir.weight_trace import copy_source
    from opscope.ir.weights import resource_attr

    def bake(module) -> None:
        (site,) = find_sites(module.operation)
        argument, _, _ = copy_source(site.op.operands[1], ())
        entry = function_op(module).regions[0].blocks[0]
        ty = ir.RankedTensorType(argument.type)
        with site.op.location, ir.InsertionPoint.at_block_begin(entry):
            const = arith.ConstantOp(ty, resource_attr(np.array(rhs, np.float32), ty, f"{site.name}.rhs")).result
        argument.replace_all_uses_with(const)

    return _transformed(text, bake)


def _transformed(text: str, fn: Callable) -> str:
    import logging

    from opscope.ir.loading import module_text, new_context, parse_module

    ctx = new_context()
    module = parse_module(text, ctx, "site")
    quiet = logging.getLogger("opscope")
    level = quiet.level
    quiet.setLevel(logging.ERROR)  # a rewrite that skips the site says so in the plan, not as a warning
    try:
        with ctx:
            fn(module)
            return module_text(module, debug_info=True)
    finally:
        quiet.setLevel(level)


def estimate(before: str, after: str) -> float:
    """The cost model's speedup: roofline time max(FLOPs / ridge, bytes) before over after."""
    from opscope.analysis.cost import analyze
    from opscope.analysis.roofline import DEFAULT_RIDGE
    from opscope.ir.loading import new_context, parse_module

    def seconds(text: str) -> float:
        cost = analyze(parse_module(text, new_context(), "site"))
        return max(cost.total_flops / DEFAULT_RIDGE, cost.total_bytes)

    return seconds(before) / max(seconds(after), 1e-30)


class SiteBench:
    """Measures proposals on their outlined sites; timings shared by sites of one shape and rewrite."""

    def __init__(self, text: str, target: str, rounds: int):
        self.text, self.target, self.rounds = text, target, rounds
        self._times: dict[str, Measured] = {}
        self._sites: dict[str, str] = {}

    def site(self, name: str) -> str:
        if name not in self._sites:
            self._sites[name] = outlined(self.text, name)
        return self._sites[name]

    def measure(self, p: Proposal, args: list[np.ndarray]) -> SiteResult:
        """`p` on its outlined site: estimate, parity on `args`, and the (shared) timing."""
        if p.kind == MEMO:
            return self.memoized(p, args)
        from opscope.ir.arguments import function_op, symbol_name
        from opscope.ir.loading import new_context, parse_module
        from opscope.run.call_timing import time_calls
        from opscope.run.compile import compile_module
        from opscope.run.runtime import load

        site = self.site(p.site)
        dense = baked(site, args[-1]) if p.baked else site  # the recorded weight as a constant
        new = rewritten(dense, p.pipeline_for(""))  # the outlined module holds this one site
        if new == dense:
            return SiteResult(1.0, None, "-", 0.0, skipped=UNCHANGED.get(p.kind, f"{p.kind} leaves this site as it is"))
        function = symbol_name(function_op(parse_module(site, new_context(), "site")))
        variants = [site, new] + ([rewritten(site, p.pipeline_for("", "guard=false"))] if p.kind == SKIP else [])
        variants += [dense] if p.baked else []
        compiled = [compile_module(v, self.target) for v in variants]
        a, b = (load(m).invoke(function, *args)[0] for m in compiled[:2])
        same, rel = parity(a, b)
        key = hashlib.sha256(
            "\0".join(
                [
                    p.kind,
                    p.options if p.kind == SKIP else p.label,
                    *(f"{x.shape}{x.dtype}" for x in args),
                    _shape_key(site),
                    _shape_key(new) if p.kind == SPARSE else "",  # its padded width L
                ]
            ).encode()
        ).hexdigest()
        if key not in self._times:
            times = time_calls(compiled, function, args, rounds=self.rounds)
            self._times[key] = measured(times, "baked" if p.baked else "unguarded")
        if p.kind == SPARSE:  # the reference's estimate: the share of the dense product left
            return SiteResult(1.0 / max(p.density, 1e-9), self._times[key], same, rel)
        # the cost model sees no branch: a skip is priced as its slice (the check reads only the skipped columns)
        priced = rewritten(site, p.pipeline_for("", "guard=false") + ",canonicalize") if p.kind == SKIP else new
        return SiteResult(estimate(site, priced), self._times[key], same, rel)

    def memoized(self, p: Proposal, args: list[np.ndarray]) -> SiteResult:
        """The outlined site called directly and behind `Memoized` (host-side, Python calls both):
        a hit must return the direct call's bits; the time is at the recorded repeat rate."""
        from opscope.act.memoize import Memoized, compile_site

        site = compile_site(self.text, p.site, self.target)
        memo = Memoized(site, cap=16)
        direct, first = site(*args), memo(*args)
        hit = memo(*args)
        same, rel = parity(direct, hit)
        if memo.hits != 1 or parity(direct, first)[0] != "bit-identical":
            same = "the guard missed a repeat"
        call_us = _median_us(lambda: site(*args), MEMO_CALLS)
        hit_us = _median_us(lambda: memo(*args), MEMO_CALLS)
        recur = p.repeat_rate
        return SiteResult(1.0 / max(1.0 - recur, 1e-9), memo_measured(call_us, hit_us, recur), same, rel)


def measure_sites(
    text: str,
    proposals: list[Proposal],
    tensors: dict[str, list[np.ndarray]],
    target: str,
    rounds: int,
    dask: str | None = None,
    progress: Callable[[str], None] | None = None,
    store: Store | None = None,
) -> list[SiteResult]:
    """Each proposal measured on its outlined site, in `proposals`' order: here one after another, or with
    `dask` one job per site (every candidate of a site on one worker: its timings compare on one machine),
    each site's results a shard of `store` as they come back (`plan_store`), read back when it resumes."""
    if dask is None:
        bench = SiteBench(text, target, rounds)
        results = []
        for i, p in enumerate(proposals):
            if progress is not None:
                progress(f"[{i + 1}/{len(proposals)}] {p.site}: {p.label}")
            results.append(bench.measure(p, tensors[p.site]))
        return results
    return _site_jobs(text, proposals, tensors, target, rounds, dask, progress, store or plan_store(None))


def _site_jobs(
    text: str,
    proposals: list[Proposal],
    tensors: dict[str, list[np.ndarray]],
    target: str,
    rounds: int,
    dask: str,
    progress: Callable[[str], None] | None,
    store: Store,
) -> list[SiteResult]:
    """One job per site on the `dask` pool (its id: the model's digest, target, rounds, site and its
    candidates' rewrites); the results put back in `proposals`' order."""
    from opscope.jobs.executor import open_pool
    from opscope.jobs.run import Job
    from opscope.jobs.shards import content_digest, job_id
    from opscope.jobs.store import Waves

    key = content_digest([text.encode()])
    by_site: dict[str, list[int]] = {}
    for i, p in enumerate(proposals):
        by_site.setdefault(p.site, []).append(i)
    jobs = []
    for site, where in by_site.items():
        mine = [proposals[i] for i in where]
        params = {
            "model": key,
            "target": target,
            "rounds": rounds,
            "site": site,
            "rewrites": [_job_name(p) for p in mine],
        }
        label = f"{site}: {len(mine)} candidate{'s' if len(mine) != 1 else ''}"
        jobs.append(Job(job_id("plan-site", params), label, site_job, (text, target, rounds, mine, tensors[site])))
    with open_pool(dask) as pool:
        done = Waves(pool, store, progress).run(jobs, f"{len(proposals)} candidates of {len(jobs)} sites")
    store.remove()
    out: list[SiteResult | None] = [None] * len(proposals)
    for job, where in zip(jobs, by_site.values()):
        for i, r in zip(where, done[job.id]):
            out[i] = r
    return out


def plan_store(folder: str | Path | None, resume: bool = False) -> Store:
    """Where `plan --dask` keeps each site's results as they come back (the run folder's `plan.shards`),
    as JSON, read back by `--resume`."""
    return Store.of(folder, resume, Codec(_encode_sites, _decode_sites), "plan-site", "the plan's shard folder")


def _encode_sites(results: list[SiteResult]) -> bytes:
    """A site job's results as the JSON of its shard (floats round-trip exactly)."""
    return json.dumps([asdict(r) for r in results]).encode()


def _decode_sites(data: bytes) -> list[SiteResult]:
    """The results `_encode_sites` wrote."""
    return [
        SiteResult(**{**d, "measured": Measured(**d["measured"]) if d["measured"] is not None else None})
        for d in json.loads(data)
    ]


def _job_name(p: Proposal) -> str:
    """A candidate as its job names it: its rewrite of the outlined site (the label where the rewrite is
    host-side, a memoized call)."""
    return p.label if p.kind == MEMO else f"{p.pipeline_for('')}{' baked' if p.baked else ''}"


def site_job(
    text: str, target: str, rounds: int, proposals: list[Proposal], args: list[np.ndarray]
) -> list[SiteResult]:
    """Every candidate of one site measured on a worker, by a bench of its own: a site is timed afresh
    in each plan (a worker keeping benches would hand a later plan an earlier plan's timings), so sites
    of one shape and rewrite, which one process times once, are timed each in its own job."""
    from dataclasses import replace

    from opscope.jobs.run import worker_name

    bench, here = SiteBench(text, target, rounds), worker_name()
    return [replace(bench.measure(p, args), worker=here) for p in proposals]


def _shape_key(site: str) -> str:
    """The outlined site without its constants' values and names: what its timing depends on."""
    import re

    body = site.split("{-#", 1)[0]
    body = re.sub(r"dense(_resource)?<[^>]*>", "dense<>", body)
    body = re.sub(r'loc\([^)]*\)|#loc\d*|@[\w$.]+|"[^"]*"', "", body)
    return body


MEMO_CALLS = 50  # timed calls of the outlined site, and of its memoized hits


def _median_us(fn: Callable[[], object], calls: int) -> float:
    import time

    fn()
    times = []
    for _ in range(calls):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return float(np.median(times)) * 1e6


def memo_measured(call_us: float, hit_us: float, recur: float) -> Measured:
    """The memoized site at the recorded repeat rate: a hit costs the guard (hash + compare),
    a miss the call and the guard: r·hit + (1 − r)·(call + hit)."""
    expected = recur * hit_us + (1.0 - recur) * (call_us + hit_us)
    return Measured(call_us, expected, None, MEMO_CALLS, call_us, expected)
