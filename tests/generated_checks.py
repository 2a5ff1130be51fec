"""Every opscope pass and analysis checked on a batch of generated models (`generated_models.Batch`)
against the models' own numpy references; each problem found is a string naming the model.

`check_batch` compiles a batch twice (untapped; every op exposed and every family tapped) and
checks, per model:

* the module verifies; the sites are the program's contractions and convolutions, by name, with
  their kinds and FLOPs (torch's `FlopCounterMode` rule: 2·M·K·N, a convolution 2·N·F·C/g·out·kernel,
  a transposed one per input pixel); attention found exactly where the program has it (softmax over
  q·kᵀ), routing only where it routes (its top-k), residual adds exactly the program's;
* IREE compiles both builds (with one data-tiling choice); the tapped build's original results are
  bit-identical to the untapped build's, or, where a tap split a fused dispatch, to the untapped
  build with the taps' boundaries (`tap_boundaries.barriered`);
* every exposed op equals numpy's computation of it from the device's own operands (tolerances
  below), so an error is blamed on one op, not accumulated;
* every recorded sketch equals `opscope.run.host_stats` of the tensor the program says the taps read
  (a convolution's input unpadded and un-spread, channels where the program puts them); exact for
  counts and selections, 1e-5 relative for float sums (`tests/test_stat_numerics.py`'s rules);
* routing loads equal numpy's count of the top-k indices; attention entropy equals numpy's on the
  device's probabilities.

`check_rewrite(batch, name, seed)` runs one rewrite on the batch and checks it against numpy.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass, field

import numpy as np
from generated_models import NP, Batch, Program, SiteFact
from tap_boundaries import boundary_build

EXACT = ("nnz", "hist", "min", "max", "elemsig", "chan_maxabs")
RTOL = 1e-5
F32_EPS = float(np.finfo(np.float32).eps)


def _parse(text: str):
    from opscope.ir.loading import new_context, parse_module

    return parse_module(text, new_context())


def _tag(name: str) -> str:
    return name.split(".", 1)[0]


def static_problems(batch: Batch, module) -> list[str]:
    """Sites, FLOPs, attention, routing and residual adds as the programs state them."""
    from opscope.ir.dynamics import ATTENTION, RESIDUAL, ROUTING, SOFTMAX, find_dynamics_sites
    from opscope.ir.sites import find_sites

    problems = []
    want = batch.sites()
    got = {s.name: s for s in find_sites(module)}
    for name in sorted(set(want) - set(got)):
        problems.append(f"{_tag(name)}: site {name} ({want[name][1].kind}) not found")
    for name in sorted(set(got) - set(want)):
        problems.append(f"{_tag(name)}: site {name} ({got[name].kind}) found but the program has none there")
    for name in sorted(set(want) & set(got)):
        fact, site = want[name][1], got[name]
        if site.kind != fact.kind:
            problems.append(f"{_tag(name)}: site {name} is {site.kind}, the program's is {fact.kind}")
        if site.flops != fact.flops:
            problems.append(f"{_tag(name)}: site {name} counts {site.flops} FLOPs, the program {fact.flops}")
    from opscope.act.weights import weight_bytes

    stored = weight_bytes(_parse(batch.module()))
    expected = sum(_stored_bytes(p) for p in batch.programs)
    if stored != expected:
        problems.append(f"batch: weight_bytes counts {stored} bytes of matmul weights, the programs store {expected}")
    found = find_dynamics_sites(module, (SOFTMAX, ATTENTION, ROUTING, RESIDUAL), taken=set(got))
    for tag, p in zip(batch.tags, batch.programs):
        mine = [s for s in found.sites if s.name.split(".", 1)[0] == tag]
        counts = {
            "attention softmaxes": (
                sum(s.kind == SOFTMAX and s.block == "attention" for s in mine),
                p.expected.attention,
            ),
            "router softmaxes": (sum(s.kind == SOFTMAX and s.block != "attention" for s in mine), p.expected.gates),
            "routings": (sum(s.kind == ROUTING for s in mine), p.expected.routing),
        }
        for what, (n, expected) in counts.items():
            if n != expected:
                problems.append(f"{tag}: {n} {what} found, the program has {expected}")
        residual = sorted(str(s.op.location).split('"')[1].replace(tag, "@@", 1) for s in mine if s.kind == RESIDUAL)
        expected_res = sorted(p.loc_of[v] for v in p.expected.residual)
        if residual != expected_res:
            problems.append(f"{tag}: residual adds found {residual}, the program's {expected_res}")
    return problems


def _stored_bytes(p: Program) -> int:
    """The bytes at rest of the constants the program's sites read as weights (each once): the
    stored tensors under the transposes, reshapes, casts and dequantizations before the site."""
    leaves: dict[int, int] = {}

    def walk(vid: int) -> None:
        ref = p.refs[vid]
        if ref[0] in ("const", "arg"):
            v = p.values[vid]
            leaves[vid] = int(np.prod(v.shape)) * np.dtype(NP[v.dtype]).itemsize
        elif ref[0] in ("transpose", "reshape", "map", "dequant", "fn"):
            for d in _operands(ref):
                walk(d)

    for fact in p.expected.sites:
        lhs, rhs = _site_operand_ids(p.refs[fact.out])
        if fact.weight or (p.refs[rhs][0] == "arg" and not fact.weight_lhs):  # a weight taken as an input too
            walk(rhs)
        if fact.weight_lhs:
            walk(lhs)
    return sum(leaves.values())


class Device:
    """The device's value of each program value: exposed results, else inputs, constants and
    what numpy computes from them (constant expressions: exact)."""

    def __init__(self, batch: Batch, inputs: list[np.ndarray], exposed: dict[str, np.ndarray]):
        self.batch, self.exposed = batch, exposed
        self.inputs = batch.split(inputs)
        self.cache: dict[tuple[int, int], np.ndarray] = {}

    def value(self, i: int, vid: int) -> np.ndarray:
        key = (i, vid)
        if key not in self.cache:
            p, tag = self.batch.programs[i], self.batch.tags[i]
            loc, suffix = p.expose_suffix.get(vid, (p.loc_of.get(vid, ""), ""))
            name = loc.replace("@@", tag) + "#0" + suffix
            if name in self.exposed:
                self.cache[key] = self.exposed[name]
            else:
                self.cache[key] = self._numpy(p, i, vid)
        return self.cache[key]

    def _numpy(self, p: Program, i: int, vid: int) -> np.ndarray:
        from generated_models import _compute

        ref = p.refs[vid]
        deps = _operands(ref)
        vals = {d: self.value(i, d) for d in deps}
        out = _compute(ref, {d: _wide(v) for d, v in vals.items()}, self.inputs[i])
        v = p.values[vid]
        return out if v.dtype in ("i8", "i32") else out.astype(NP[v.dtype])


def _wide(a: np.ndarray) -> np.ndarray:
    return a if a.dtype.kind in "iu" else a.astype(np.float64)


def _operands(ref) -> list[int]:
    kind = ref[0]
    if kind in ("arg", "const"):
        return []
    if kind == "fn":
        return [ref[2]]
    if kind in ("map", "einsum"):
        return list(ref[2])
    if kind in ("dequant", "div_last", "exp_sub_last", "combine"):
        return [ref[1], ref[2]]
    if kind == "rmsnorm":
        return [ref[1], ref[2], ref[3]]
    if kind in ("conv", "conv_grouped"):
        return [ref[1], ref[2]]
    if kind == "reduce":
        return [ref[2]]
    return [ref[1]]


def op_problems(batch: Batch, dev: Device, only: set[int] | None = None) -> list[str]:
    """Each exposed op (of `only`'s values, default all) against numpy from the device's own operands."""
    problems = []
    for i, (tag, p) in enumerate(zip(batch.tags, batch.programs)):
        for vid, loc in p.loc_of.items():
            if only is not None and vid not in only:
                continue
            name = loc.replace("@@", tag) + "#0"
            if name not in dev.exposed or p.values[vid].dtype not in ("f32",):
                continue
            got = np.asarray(dev.exposed[name], np.float64)
            ref = p.refs[vid]
            deps = {d: _wide(dev.value(i, d)) for d in _operands(ref)}
            from generated_models import _compute

            want = _compute(ref, deps, dev.inputs[i])
            bound = _bound(ref, deps, want)
            bad = ~(np.abs(got - want) <= bound)
            if bad.any():
                j = tuple(int(x) for x in np.argwhere(bad)[0])
                problems.append(
                    f"{tag}: {loc.replace('@@', tag)} ({ref[0]}) differs from numpy at {int(bad.sum())} of {bad.size} "
                    f"elements; first {list(j)}: device {got[j]:.7g}, numpy {want[j]:.7g}"
                )
    return problems


CONTRACTING = ("einsum", "conv", "conv_grouped", "reduce", "rmsnorm", "combine")


def _bound(ref, deps: dict, want: np.ndarray) -> np.ndarray:
    """How far an f32 device result may be from float64 numpy on the device's own operands: 1e-5
    (about 80 f32 roundings) of the magnitudes it sums (a contraction's Σ|a||b|, by the same
    reference on absolute values) or of the result's largest magnitude; far below any semantic
    error (a wrong stride, map, scale axis or channel order is off by O(1))."""
    from generated_models import _compute

    if ref[0] in CONTRACTING:
        mag = np.abs(_compute(ref, {d: np.abs(v) if v.dtype.kind == "f" else v for d, v in deps.items()}, []))
        return 1e-5 * mag + 1e-6 * float(mag.max(initial=0.0)) + 1e-30
    return 1e-5 * (np.abs(want) + float(np.abs(want).max(initial=0.0))) + 1e-30


def end_to_end_problems(batch: Batch, inputs: list[np.ndarray], results: list[np.ndarray]) -> list[str]:
    """Each model's results against numpy float64 from its inputs: the parity gate's rule,
    |x−y| ≤ 1e-3·(1+max|y|), and 2e-2 for a model that rounds to bf16 on the way."""
    problems = []
    for i, (p, args, outs) in enumerate(zip(batch.programs, batch.split(inputs), batch.split(results, "results"))):
        vals = p.evaluate(args)
        tol = 2e-2 if any(v.dtype in ("bf16", "f16") and p.refs[v.id][0] == "map" for v in p.values) else 1e-3
        for r, (o, got) in enumerate(zip(p.outputs, outs)):
            want = vals[o.id]
            bound = tol * (1.0 + float(np.abs(want).max(initial=0.0)))
            err = float(np.abs(np.asarray(got, np.float64) - want).max(initial=0.0))
            if not err <= bound:
                problems.append(f"{batch.tags[i]}: result {r} is {err:.3g} from numpy's (bound {bound:.3g})")
    return problems


def sketch_problems(batch: Batch, dev: Device, values: dict, target_layout) -> list[str]:
    """Every recorded matmul or convolution sketch against host_stats of the tensor it should read."""
    from opscope.run.host_stats import host_stats

    problems = []
    sites = batch.sites()
    by_site: dict[str, dict[str, dict[str, np.ndarray]]] = {}
    for (site, role, stat), v in values.items():
        by_site.setdefault(site, {}).setdefault(role, {})[stat] = v
    for name, (i, fact) in sites.items():
        roles = by_site.get(name)
        if roles is None:
            problems.append(f"{_tag(name)}: site {name} has no sketches")
            continue
        channels = dict(fact.channels)
        for role, got in roles.items():
            vid = getattr(fact, role)
            x = dev.value(i, vid)
            want = host_stats(x, channel_dims=channels.get(role))
            if list(got) != list(want):
                problems.append(f"{_tag(name)}: {name} {role} records {list(got)}, host_stats {list(want)}")
                continue
            for stat, w in want.items():
                why = _stat_mismatch(got[stat], w, stat, x)
                if why:
                    problems.append(f"{_tag(name)}: {name} {role}.{stat}: {why}")
    return problems


def _stat_mismatch(got, want: np.ndarray, stat: str, x: np.ndarray) -> str | None:
    """Why a device sketch differs from host_stats beyond its tolerance, or None. Kurtosis is
    E[d⁴]/E[d²]² of d = x − mean: where the tensor is nearly constant its f32 mean's rounding
    (eps·max|x|) is a large part of each d, so its tolerance grows by 8·eps·max|x|/rms(d) (an
    RMS-normalized vector of one element per row is such a tensor); and Σd² and Σd⁴ are f32 sums of n
    positive terms, each within γ(n−1) ≈ (n−1)·u of its value (Higham), so by 3·n·u more (u = eps/2;
    the long run's chunk 12: a spread transposed convolution's output of 1,036 elements, kurtosis 192,
    off by 4.8e-5 where a sequential f32 two-pass sum is off by up to 3.6e-5 on such tensors)."""
    got = np.asarray(got, np.float64)
    if got.shape != want.shape:
        return f"shape {got.shape} != {want.shape}"
    flat = np.asarray(x, np.float64).reshape(-1)
    if stat in EXACT:
        ok = np.array_equal(got, want)
    elif stat == "mean":
        ok = abs(got[0] - want[0]) <= 1e-5 * np.abs(flat).sum() / max(flat.size, 1)
    elif stat == "kurtosis":
        rms = float(np.sqrt(np.mean((flat - flat.mean()) ** 2))) if flat.size else 0.0
        cond = 8 * F32_EPS * float(np.abs(flat).max(initial=0.0)) / rms if rms > 0 else np.inf
        sums = 3 * flat.size * F32_EPS / 2
        ok = not np.isfinite(cond) or np.allclose(got, want, rtol=RTOL + cond + sums, atol=1e-30)
    else:
        ok = np.allclose(got, want, rtol=RTOL, atol=1e-30)
    return None if ok else f"device {got[:6]} != host {want[:6]}"


def dynamics_problems(batch: Batch, dev: Device, values: dict, found) -> list[str]:
    """Attention, router, routing and residual statistics against numpy on the device's tensors
    (definitions: `opscope/dialect/dynamics.py`'s docstring, rewritten here from the text)."""
    from opscope.ir.dynamics import RESIDUAL, ROUTING, SOFTMAX

    problems = []
    index = {tag: i for i, tag in enumerate(batch.tags)}
    for site in found.sites:
        tag = _tag(site.name)
        i, p = index[tag], batch.programs[index[tag]]
        loc = str(site.op.location).split('"')[1].replace(tag, "@@", 1)
        vid = p.routes.get(loc) if site.kind == ROUTING else next((v for v, lc in p.loc_of.items() if lc == loc), None)
        if vid is None:
            problems.append(f"{tag}: dynamics site {site.name} at an op the program did not write")
            continue
        got = {stat: np.asarray(v, np.float64) for (s, _, stat), v in values.items() if s == site.name}
        if site.kind == SOFTMAX:
            pr = np.asarray(dev.value(i, vid), np.float64)
            pr = pr.reshape((-1,) + pr.shape[-2:])
            top = np.sort(pr, axis=-1)
            with np.errstate(divide="ignore", invalid="ignore"):
                plogp = np.where(pr > 0, pr * np.log(pr), 0.0)
            want = {
                "attn_qmax": (pr.max(-1).reshape(-1), 1e-6),
                "attn_krecv": (pr.sum(-2).reshape(-1), 1e-5),
                "attn_entropy": (-plogp.sum(-1).reshape(-1), 1e-5),
            }
            if site.block != "attention":
                second = top[..., -2] if pr.shape[-1] > 1 else np.zeros(pr.shape[:-1])
                want["gate_top2"] = (second.reshape(-1), 1e-6)
        elif site.kind == ROUTING:
            idx = np.asarray(dev.value(i, vid))
            e = site.n
            want = {"route_load": (np.bincount(idx.reshape(-1), minlength=e)[:e].astype(np.float64), 0.0)}
        elif site.kind == RESIDUAL:
            a, b = p.refs[vid][2]
            h = np.asarray(dev.value(i, a), np.float64)
            d = np.asarray(dev.value(i, b), np.float64)
            h, d = h.reshape(-1, h.shape[-1]), d.reshape(-1, d.shape[-1])
            y = h + d
            cos = (h * y).sum(-1) / (np.linalg.norm(h, axis=-1) * np.linalg.norm(y, axis=-1) + 1e-12)
            want = {
                "res_a_sumsq": (np.array([(h * h).sum()]), 1e-5 * (h * h).sum()),
                "res_b_sumsq": (np.array([(d * d).sum()]), 1e-5 * (d * d).sum()),
                "res_cos": (np.array([cos.mean()]), 1e-5),
            }
        else:
            continue
        if sorted(got) != sorted(want):
            problems.append(f"{tag}: {site.name} records {sorted(got)}, expected {sorted(want)}")
            continue
        for stat, (w, atol) in want.items():
            if got[stat].shape != w.shape or not np.allclose(got[stat], w, rtol=0.0, atol=atol + 1e-12):
                problems.append(f"{tag}: {site.name} {stat}: device {got[stat][:6]} != numpy {w[:6]}")
    return problems


@dataclass
class Outcome:
    """What checking one batch found: the models checked, the models refused before compiling (each
    refusal's one line), and the problems (empty: every check agreed)."""

    checked: int = 0
    refused: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)  # models IREE failed on with no refusal (each a problem)
    problems: list[str] = field(default_factory=list)
    batch: Batch | None = None  # the models checked (the refused taken out)


def compile_refusing(batch: Batch, module, target: str, outcome: Outcome):
    """Compile `module`; a model opscope refuses or IREE fails on (one line naming its op: `refused`,
    prefixed with who said it) is taken out of the batch and the rest compiled again. Returns
    (batch, compiled module or None)."""
    from opscope.errors import OpscopeError
    from opscope.run.compile import CompileFailed, compile_module

    while True:
        try:
            return batch, compile_module(module, target)
        except OpscopeError as e:
            line = str(e)
            tag = next((t for t in batch.tags if f'"{t}.' in line or f" {t}." in line), None)
            if tag is None and isinstance(e, CompileFailed) and len(batch.programs) > 1:
                tag = _culprit(batch, target)  # IREE's line names no op: the model it fails on alone
            if tag is None:
                raise
            i = batch.tags.index(tag)
            if "\n" in line:
                outcome.problems.append(f"{tag} ({batch.programs[i].family}): a refusal of many lines: {line!r}")
                outcome.failed.append(tag)
            else:  # opscope's refusal, or IREE's own failure said in one line naming the op (listed apart)
                who = "IREE" if isinstance(e, CompileFailed) else "opscope"
                outcome.refused.append(f"{who}: {batch.programs[i].family}: {line}")
            batch = Batch(batch.programs[:i] + batch.programs[i + 1 :])
            if not batch.programs:
                return batch, None
            module = _parse(batch.module())


def _culprit(batch: Batch, target: str) -> str | None:
    """The tag of a model of `batch` IREE fails to compile alone (by halves: a failure whose line
    names no op, as a SPIR-V legalization's), or None when each half compiles."""
    from opscope.run.compile import CompileFailed, compile_module

    programs, tags = batch.programs, batch.tags
    while len(programs) > 1:
        half = len(programs) // 2
        try:
            compile_module(Batch(programs[:half]).module(), target)
        except CompileFailed:
            programs, tags = programs[:half], tags[:half]
            continue
        try:
            compile_module(Batch(programs[half:]).module(), target)
        except CompileFailed:
            programs, tags = programs[half:], tags[half:]
            continue
        return None  # each half compiles: the failure needs both
    return tags[0]


def check_batch(batch: Batch, seed: int, target: str = "llvm-cpu") -> Outcome:
    """Every check of the module docstring on one batch."""
    import opscope
    from opscope.ir.dynamics import find_dynamics_sites
    from opscope.ir.sites import find_sites
    from opscope.passes.expose_all_ops import exposures
    from opscope.pipeline.textual import run_pipeline
    from opscope.run.compile import NO_DATA_TILING, CompileFailed, compile_alike, compile_module
    from opscope.run.runtime import load

    outcome = Outcome()
    module = _parse(batch.module())
    if not module.operation.verify():
        outcome.problems.append("batch: the module does not verify")
        return outcome
    batch, plain = compile_refusing(batch, module, target, outcome)
    outcome.batch = batch
    if plain is None:
        return outcome
    text = batch.module()
    module = _parse(text)
    outcome.checked = len(batch.programs)
    problems = outcome.problems
    problems += static_problems(batch, module)
    inputs = batch.inputs(seed)
    base = load(plain).invoke("main", *inputs)
    problems += end_to_end_problems(batch, inputs, base)
    tapped = _parse(text)
    run_pipeline(tapped, "expose-all-ops")
    _, exposed_list = exposures(tapped)
    tapped, manifest = opscope.inject(tapped, target=target)
    alike = (NO_DATA_TILING,) if plain.untiled else ()  # the untapped build's kernels (IREE's fallback)
    try:
        outs = load(compile_module(tapped, target, alike)).invoke("main", *inputs)
    except CompileFailed as e:  # IREE fails on the tapped build alone (one line naming the op): the model out
        line = str(e)
        tag = next((t for t in batch.tags if f'"{t}.' in line or f" {t}." in line), None)
        if tag is None:
            raise
        i = batch.tags.index(tag)
        rest = batch.programs[:i] + batch.programs[i + 1 :]
        again = check_batch(Batch(rest), seed, target) if rest else Outcome(batch=Batch([]))
        again.refused = outcome.refused + [f"IREE (tapped): {batch.programs[i].family}: {line}"] + again.refused
        # its own static problems stay (the rest are checked again, in the smaller batch)
        again.problems = [p for p in outcome.problems if p.startswith((f"{tag}:", f"{tag} "))] + again.problems
        return again
    if _differs(batch, base, outs):  # exposing may change IREE's fusion: the claim is about the taps alone
        taps_only, _ = opscope.inject(_parse(text), target=target)
        untapped, built = compile_alike(text, taps_only, target)
        if untapped.flags != plain.flags:  # the taps need IREE's untiled fallback: the untapped build too
            base = load(untapped).invoke("main", *inputs)
        alone = load(built).invoke("main", *inputs)
        if target == "llvm-cpu" and _differs(batch, base, alone):  # bit for bit there, the boundaries aside
            split = load(boundary_build(_parse(text), target, built)).invoke("main", *inputs)
            for tag, r, delta in _differs(batch, split, alone):
                problems.append(
                    f"{tag}: result {r} not bit-identical after the taps, nor to the build with their "
                    f"dispatch boundaries (max |Δ| {delta:.3g})"
                )
        if target != "llvm-cpu":
            from opscope.errors import OpscopeError
            from opscope.run.instrumented import compare_originals

            for tag, got, want in zip(
                batch.tags, batch.split(alone[: len(base)], "results"), batch.split(base, "results")
            ):
                try:
                    compare_originals(want, got, target)
                except OpscopeError as e:
                    problems.append(f"{tag}: {e}")
    exposed = {e.name: outs[e.result] for e in exposed_list}
    dev = Device(batch, inputs, exposed)
    problems += op_problems(batch, dev)
    values = manifest.values(outs)
    problems += sketch_problems(batch, dev, {k: v for k, v in values.items() if k[0] in batch.sites()}, None)
    found = find_dynamics_sites(module, taken={s.name for s in find_sites(module)})
    problems += dynamics_problems(batch, dev, values, found)
    return outcome


def _differs(batch: Batch, base: list, outs: list) -> list[tuple[str, int, float]]:
    """(model, result, max |Δ|) of each original result of `outs` not bit-identical to `base`."""
    found = []
    for tag, got, want in zip(batch.tags, batch.split(outs[: len(base)], "results"), batch.split(base, "results")):
        for r, (a, b) in enumerate(zip(got, want)):
            if not np.array_equal(a, b, equal_nan=True):
                delta = np.nanmax(np.abs(np.asarray(a, np.float64) - np.asarray(b, np.float64)))
                found.append((tag, r, float(delta)))
    return found


# -- rewrites, each against numpy on the device's own tensors ------------------------------------
REWRITES = (
    "skip-residual-blocks",
    "gate-residual-blocks",
    "fakequant-weights",
    "fakequant-activations",
    "quantize-weight",
    "factor-weight",
    "sparse-weight",
    "skip-zero-channels",
    "split-weight-stats",
    "extract-site",
    "dump-tensors",
    "tap-subset",  # not a rewrite: some sites tapped, as `--sites` picks them
    "vulkan-spirv",  # not a rewrite: every check again on the other target
)


def quantize_f32(x: np.ndarray, reduced: tuple[int, ...], bits: int = 8) -> np.ndarray:
    """The symmetric round trip in float32, written from `opscope.ir.fakequant`'s docstring: amax over
    `reduced`, y = amax·clamp(round(qmax·x·(1/amax)), ±qmax)·(1/qmax), round half away from zero,
    1/amax taken as 0 where amax <= 1e-20."""
    x = np.asarray(x, np.float32)
    q = np.float32((1 << (bits - 1)) - 1)
    amax = np.abs(x).max(axis=reduced, keepdims=True) if reduced else np.abs(x)
    with np.errstate(divide="ignore"):
        inv = np.where(amax > np.float32(1e-20), np.float32(1.0) / amax, np.float32(0.0)).astype(np.float32)
    t = (x * inv).astype(np.float32) * q
    mag = np.floor(np.abs(t))
    rounded = np.sign(t) * (mag + (np.abs(t) - mag >= np.float32(0.5)))
    c = np.clip(rounded, -q, q).astype(np.float32)
    return (amax * (c * (np.float32(1.0) / q)).astype(np.float32)).astype(np.float32)


def _site_operand_ids(ref) -> tuple[int, int]:
    """The value ids a contraction or convolution reference reads as (lhs, rhs)."""
    return (ref[2][0], ref[2][1]) if ref[0] == "einsum" else (ref[1], ref[2])


class Rewritten:
    """A batch's programs as a rewrite leaves them: per model, value id -> its new reference (a site
    whose operands are transformed, a residual add replaced)."""

    def __init__(self, batch: Batch):
        self.batch = batch
        self.refs: list[dict[int, object]] = [dict(p.refs) for p in batch.programs]
        self.values: list[dict] = [dict(enumerate(p.values)) for p in batch.programs]

    def replace(self, i: int, vid: int, ref) -> None:
        self.refs[i][vid] = ref

    def transform_operand(self, i: int, fact: SiteFact, role: str, fn, dtype: str = "") -> int:
        """The site of `fact` reads fn(operand) for `role` instead of the operand, rounded to `dtype`
        (default the operand's own: a fake-quant round trip is stored back in its type); returns
        the new id."""
        p = self.batch.programs[i]
        ref = self.refs[i][fact.out]
        lhs, rhs = _site_operand_ids(p.refs[fact.out])
        src = lhs if role == "lhs" else rhs
        new = max(self.values[i]) + 1  # a fresh id for the transformed operand
        self.refs[i][new] = ("fn", fn, src)
        self.values[i][new] = dataclasses.replace(p.values[src], dtype=dtype or p.values[src].dtype)
        if ref[0] == "einsum":
            ops = list(ref[2])
            ops[0 if role == "lhs" else 1] = new
            self.refs[i][fact.out] = ("einsum", ref[1], tuple(ops))
        else:
            self.refs[i][fact.out] = ref[:1] + ((new, ref[2]) if role == "lhs" else (ref[1], new)) + ref[3:]
        return new


class _View(Program):
    """A program with some references replaced (a rewrite's model of itself)."""

    def __init__(self, p: Program, refs: dict, values: dict):
        self.__dict__.update(p.__dict__)
        self.refs = refs
        self.values = values


def check_rewrite(batch: Batch, name: str, seed: int, target: str = "llvm-cpu") -> list[str]:
    """`name` (one of REWRITES) applied to every model of `batch`, checked against numpy; a rewrite
    that raises on valid models is a problem too (one line), the next one still runs."""
    try:
        return globals()["_rw_" + name.replace("-", "_")](batch, seed, target)
    except Exception as e:  # noqa: BLE001 (any failure of the rewrite, the compiler or a reference)
        return [f"batch: {name} raised {type(e).__name__}: {' '.join(str(e).split())[:300]}"]


def _run(batch: Batch, passes: list, inputs: list, target: str, expose: bool = True, extra: tuple = ()):
    """(outputs, exposed tensors by name, module) of the batch exposed, then rewritten by `passes`
    (the rewrite re-points the exposed results it replaces, so they hold what it computes)."""
    from opscope.passes.expose_all_ops import exposures
    from opscope.pipeline.textual import Pipeline, run_pipeline
    from opscope.run.compile import compile_module
    from opscope.run.runtime import load

    module = _parse(batch.module())
    if expose:
        run_pipeline(module, "expose-all-ops")
    if passes:
        run_pipeline(module, Pipeline(tuple(passes)))
    _, found = exposures(module)
    outs = load(compile_module(module, target)).invoke("main", *inputs, *extra)
    return outs, {e.name: outs[e.result] for e in found}, module


def _checked_ops(rw: Rewritten, exposed: dict, inputs: list) -> list[str]:
    """op_problems on the rewritten references, model by model."""
    problems = []
    for i, (tag, p) in enumerate(zip(rw.batch.tags, rw.batch.programs)):
        view = _View(p, rw.refs[i], rw.values[i])
        mine = {"m0" + k[len(tag) :]: v for k, v in exposed.items() if k.startswith(tag + ".")}
        one = Batch([view])
        dev = Device(one, rw.batch.split(inputs)[i], mine)
        problems += [re.sub(r"\bm0\b", tag, pr) for pr in op_problems(one, dev)]
    return problems


def _residual_blocks(batch: Batch) -> list[tuple[str, str]]:
    """(name, location) of every residual add opscope finds, in IR order (names and locations: a
    site's op dies with its module)."""
    from opscope.ir.dynamics import RESIDUAL, find_dynamics_sites
    from opscope.ir.sites import find_sites

    module = _parse(batch.module())
    found = find_dynamics_sites(module, (RESIDUAL,), taken={s.name for s in find_sites(module)})
    return [(s.name, str(s.op.location)) for s in found.sites if s.kind == RESIDUAL]


def _residual_vid(batch: Batch, site: tuple[str, str]) -> tuple[int, int]:
    """(model index, value id) of the residual add a dynamics site (name, location) names."""
    tag = _tag(site[0])
    i = batch.tags.index(tag)
    loc = site[1].split('"')[1].replace(tag, "@@", 1)
    return i, next(v for v, lc in batch.programs[i].loc_of.items() if lc == loc)


def _rw_skip_residual_blocks(batch: Batch, seed: int, target: str) -> list[str]:
    """Every residual block skipped: each add r = h + d gives h; every op after it on numpy's."""
    from opscope.passes.skip_residual_blocks import SkipResidualBlocks

    inputs, blocks = batch.inputs(seed), _residual_blocks(batch)
    if not blocks:
        return []
    _, exposed, _ = _run(batch, [SkipResidualBlocks(blocks=",".join(map(str, range(len(blocks)))))], inputs, target)
    rw = Rewritten(batch)
    for site in blocks:
        i, vid = _residual_vid(batch, site)
        rw.replace(i, vid, ("map", lambda a: a, (batch.programs[i].refs[vid][2][0],)))
    return _checked_ops(rw, exposed, inputs)


def _rw_gate_residual_blocks(batch: Batch, seed: int, target: str) -> list[str]:
    """One gate per block, each a different value in [0, 1]: r = h + g·d, in the order the
    function's `opscope.gates` argument attribute names the blocks."""
    from opscope.passes.gate_residual_blocks import GateResidualBlocks

    inputs, blocks = batch.inputs(seed), _residual_blocks(batch)
    if not blocks:
        return []
    by_name = dict(blocks)
    gates = np.random.default_rng(seed).uniform(0, 1, len(blocks)).astype(np.float32)
    outs, exposed, module = _run(batch, [GateResidualBlocks(blocks="*")], inputs, target, extra=(gates,))
    names = _gate_names(module)
    if sorted(names) != sorted(by_name):
        return [f"batch: the gates name {sorted(names)}, the residual sites are {sorted(by_name)}"]
    rw = Rewritten(batch)
    for name, g in zip(names, gates):
        i, vid = _residual_vid(batch, (name, by_name[name]))
        h, d = batch.programs[i].refs[vid][2]
        rw.replace(i, vid, ("map", _gated(np.float32(g)), (h, d)))
    return _checked_ops(rw, exposed, inputs)


def _gated(g: np.float32):
    """h + g·d as the gate computes it: g·d rounded to f32, then the add."""
    return lambda h, d: h + (d.astype(np.float32) * g).astype(np.float64)


def _gate_names(module) -> list[str]:
    from iree.compiler import ir

    with module.context:
        fn = next(op.operation for op in module.body.operations if op.operation.name == "func.func")
        attrs = ir.ArrayAttr(fn.attributes["arg_attrs"])
        last = ir.DictAttr(attrs[len(attrs) - 1])
        return [ir.StringAttr(a).value for a in ir.ArrayAttr(last["opscope.gates"])]


def _weight_k(p: Program, fact: SiteFact) -> tuple[int, ...]:
    """The K dims of the weight a rewrite quantizes for `fact`'s site: its rhs (or a weight lhs) as
    the site reads it; a grouped convolution's filter as [F, C/g, window]."""
    if fact.weight_lhs:
        return fact.lhs_k
    return (1, 2, 3) if p.refs[fact.out][0] == "conv_grouped" else fact.rhs_k


def _weight_role(fact: SiteFact) -> str:
    """The operand holding the site's weight: the rhs, or the lhs of a W @ x."""
    return "lhs" if fact.weight_lhs else "rhs"


def _weight_vid(p: Program, fact: SiteFact) -> int:
    """The value id the site reads as its weight (`_weight_role`)."""
    return _site_operand_ids(p.refs[fact.out])[0 if fact.weight_lhs else 1]


def _widened_from(p: Program, vid: int) -> str:
    """The half type a weight is stored in and widened from before its site ("" when none): fakequant's
    round trip is applied to the stored weight and kept in its type (`opscope.ir.fakequant`)."""
    while p.refs[vid][0] in ("transpose", "reshape"):
        vid = p.refs[vid][1]
    op = p.torch_ops.get(vid)
    if op and op[0] == "cast" and op[1] == "f32":
        return p.values[p.refs[vid][2][0]].dtype
    return ""


def _quantized_sites(batch: Batch, rw: Rewritten, weights: bool, lhs: bool) -> None:
    """fakequant's sites: a weight (rhs, or the lhs of W @ x) is quantized per output channel; the
    other operand per token where the weight is a constant or a function argument (a model taking
    its weights as inputs), contractions only."""
    for i, p in enumerate(batch.programs):
        for fact in p.expected.sites:
            argument = p.refs[_site_operand_ids(p.refs[fact.out])[1]][0] == "arg"
            contraction = fact.kind in ("matmul", "batch_matmul", "generic")
            if lhs and contraction and (fact.weight or argument) and not fact.weight_lhs:
                rw.transform_operand(i, fact, "lhs", lambda x, k=fact.lhs_k: quantize_f32(x, k))
            if lhs and contraction and fact.weight_lhs:  # W @ x: x's tokens are the rhs's non-K dims
                rw.transform_operand(i, fact, "rhs", lambda x, k=fact.rhs_k: quantize_f32(x, k))
            if weights and (fact.weight or fact.weight_lhs):
                k = _weight_k(p, fact)
                half = _widened_from(p, _weight_vid(p, fact))
                rw.transform_operand(
                    i,
                    fact,
                    _weight_role(fact),
                    lambda w, k=k, t=half: quantize_f32(w, k).astype(NP[t]) if t else quantize_f32(w, k),
                )


def _rw_fakequant_weights(batch: Batch, seed: int, target: str) -> list[str]:
    """W8 per output channel on every site whose rhs is a weight."""
    from opscope.passes.fakequant_weights import FakequantWeights

    return _fakequant(batch, seed, target, FakequantWeights(), weights=True)


def _rw_fakequant_activations(batch: Batch, seed: int, target: str) -> list[str]:
    """A8 per token on every contraction whose rhs is a weight (convolutions are skipped per token)."""
    from opscope.passes.fakequant_activations import FakequantActivations

    return _fakequant(batch, seed, target, FakequantActivations(), weights=False)


def _fakequant(batch: Batch, seed: int, target: str, rewrite, weights: bool) -> list[str]:
    """`rewrite` (a fakequant pass) on the batch against the round trip of the weights or the lhs."""
    inputs = batch.inputs(seed)
    _, exposed, _ = _run(batch, [rewrite], inputs, target)
    rw = Rewritten(batch)
    _quantized_sites(batch, rw, weights=weights, lhs=not weights)
    return _checked_ops(rw, exposed, inputs)


def _stored_weight(p: Program, fact: SiteFact) -> bool:
    """The site's weight is a stored constant under transposes and reshapes (what quantize-weight and
    factor-weight rewrite; a weight cast or dequantized from another type is computed from one)."""
    vid = _weight_vid(p, fact)
    while p.refs[vid][0] in ("transpose", "reshape"):
        vid = p.refs[vid][1]
    return p.refs[vid][0] == "const" and p.values[vid].dtype in ("f32", "f16", "bf16")


def _rw_quantize_weight(batch: Batch, seed: int, target: str) -> list[str]:
    """int8 codes and f32 scales for every stored weight of a contraction: the site's result is
    lhs x (codes·scale), the scale factored out of the sum (the contraction bound covers it)."""
    from opscope.passes.quantize_weight import QuantizeWeight

    inputs = batch.inputs(seed)
    _, exposed, _ = _run(batch, [QuantizeWeight()], inputs, target)
    rw = Rewritten(batch)
    for i, p in enumerate(batch.programs):
        for fact in p.expected.sites:
            k = _weight_k(p, fact)
            vector = len(k) == len(p.values[_weight_vid(p, fact)].shape)  # no output channel: left alone
            if fact.kind in ("matmul", "batch_matmul", "generic") and _stored_weight(p, fact) and not vector:
                rw.transform_operand(i, fact, _weight_role(fact), lambda w, k=k: quantize_f32(w, k), "f32")
    return _checked_ops(rw, exposed, inputs)


def _rw_factor_weight(batch: Batch, seed: int, target: str) -> list[str]:
    """Rank-r factors holding 99 % of ‖W‖² for every stored 2-D weight where r·(K+N) < K·N: the site
    computes lhs x (truncated SVD of W); the others are unchanged."""
    from opscope.passes.factor_weight import FactorWeight

    inputs = batch.inputs(seed)
    _, exposed, _ = _run(batch, [FactorWeight()], inputs, target)
    rw = Rewritten(batch)
    for i, p in enumerate(batch.programs):
        for fact in p.expected.sites:
            w = _weight_vid(p, fact)
            if fact.kind not in ("matmul", "generic") or len(p.values[w].shape) != 2 or not _stored_type(p, fact):
                continue
            half, k = _stored_type(p, fact), _weight_k(p, fact)
            rw.transform_operand(i, fact, _weight_role(fact), lambda w, k=k, t=half: truncated(w, k[0], t), "f32")
    return _checked_ops(rw, exposed, inputs)


def _rw_sparse_weight(batch: Batch, seed: int, target: str) -> list[str]:
    """Every stored weight of one K and one N loop stored by output channel (density=1: dense weights
    too): the site computes the same product, its nonzero terms only, so every op is checked against
    numpy's reference of the original (the contraction bound covers the summation order)."""
    from opscope.passes.sparse_weight import SparseWeight

    inputs = batch.inputs(seed)
    _, exposed, _ = _run(batch, [SparseWeight(density=1.0)], inputs, target)
    return _checked_ops(Rewritten(batch), exposed, inputs)


def _stored_type(p: Program, fact: SiteFact) -> str:
    """The float type the site's weight constant is stored in, read through transposes, reshapes and a
    widening cast (factor-weight factors a bf16 weight read as f32 into bf16 factors); "" when the
    weight is no stored float constant (an int8 one dequantized, an argument, a computed rhs)."""
    vid = _weight_vid(p, fact)
    while p.refs[vid][0] in ("transpose", "reshape") or p.torch_ops.get(vid, ("",))[0] == "cast":
        vid = p.refs[vid][1] if p.refs[vid][0] != "map" else p.refs[vid][2][0]
    return p.values[vid].dtype if p.refs[vid][0] == "const" and p.values[vid].dtype in ("f32", "f16", "bf16") else ""


def truncated(w: np.ndarray, k_dim: int, dtype: str = "f32", energy: float = 0.99) -> np.ndarray:
    """W (its K on `k_dim`) as its truncated SVD at the smallest rank holding `energy` of ‖W‖², when
    that rank saves FLOPs (r·(K+N) < K·N), else W: U = P·√S and V = √S·Qᵀ stored in the weight's
    `dtype` (factor-weight's factors), their product in float64."""
    m = np.moveaxis(np.asarray(w, np.float64), k_dim, 0)
    kk, n = m.shape
    u, sv, vt = np.linalg.svd(m, full_matrices=False)
    total = float((sv**2).sum())
    r = min(int(np.searchsorted(np.cumsum(sv**2), energy * total) + 1), len(sv)) if total > 0 else 1
    if r * (kk + n) >= kk * n:
        return w
    root = np.sqrt(sv[:r])
    uf = (u[:, :r] * root).astype(NP[dtype]).astype(np.float64)
    vf = (root[:, None] * vt[:r]).astype(NP[dtype]).astype(np.float64)
    return np.moveaxis(uf @ vf, 0, k_dim)


SKIPPED_ZERO_SITES: list[int] = []  # per call, the sites it skipped channels of (the test reports them)


def _rw_skip_zero_channels(batch: Batch, seed: int, target: str) -> list[str]:
    """Each contraction's lhs K columns that are all zero on these inputs (dead ReLU units behind a
    weight's zero rows) skipped behind the guard: every result bit-identical to the dense build
    (llvm-cpu accumulates each output's K terms in order; the pass's own claim)."""
    from opscope.passes.skip_zero_channels import SkipZeroChannels, format_channels

    inputs = batch.inputs(seed)
    base, exposed, _ = _run(batch, [], inputs, target)
    dev = Device(batch, inputs, exposed)
    passes = []
    for i, (tag, p) in enumerate(zip(batch.tags, batch.programs)):
        for fact in p.expected.sites:
            if fact.kind not in ("matmul", "generic") or len(fact.lhs_k) != 1 or len(fact.rhs_k) != 1:
                continue
            x = np.asarray(dev.value(i, fact.lhs), np.float64)
            zero = np.flatnonzero(
                np.all(np.moveaxis(x, fact.lhs_k[0], -1).reshape(-1, x.shape[fact.lhs_k[0]]) == 0, axis=0)
            )
            if zero.size:
                name = fact.name.replace("@@", tag)
                passes.append(SkipZeroChannels(sites=f"^{re.escape(name)}$", channels=format_channels(zero.tolist())))
    if not passes:
        return []
    SKIPPED_ZERO_SITES.append(len(passes))
    outs, _, _ = _run(batch, passes, inputs, target)
    return [
        f"{tag}: result {r} changed by skip-zero-channels (max |Δ| {d:.3g})"
        for tag, r, d in _differs(batch, base, outs)
    ]


def _rw_split_weight_stats(batch: Batch, seed: int, target: str) -> list[str]:
    """The weights' sketches moved into `@main$weights` (called once): every sketch still equals
    host_stats of its tensor, the weights' read from the second function's results."""
    import opscope
    from opscope.passes.expose_all_ops import exposures
    from opscope.pipeline.textual import run_pipeline
    from opscope.run.compile import compile_module
    from opscope.run.instrumented import tapped_outputs
    from opscope.run.runtime import load

    inputs = batch.inputs(seed)
    module = _parse(batch.module())
    run_pipeline(module, "expose-all-ops")
    _, exposed_list = exposures(module)
    module, manifest = opscope.inject(module, target=target, taps="matmul", weights_once=True)
    if not manifest.weights_function:
        return ["batch: split-weight-stats made no weights function"]
    outs = tapped_outputs(load(compile_module(module, target)), manifest, inputs)
    dev = Device(batch, inputs, {e.name: outs[e.result] for e in exposed_list})
    values = manifest.values(outs)
    return sketch_problems(batch, dev, {k: v for k, v in values.items() if k[0] in batch.sites()}, None)


def _rw_tap_subset(batch: Batch, seed: int, target: str) -> list[str]:
    """About half the sites tapped (`keep`, as `--sites` picks them; the seed draws which): the build
    compiles, its original results are the untapped build's bit for bit (or, where a tap split a
    fused dispatch, the untapped build's with the same taps' boundaries), every tapped site's
    sketches equal host_stats and no other site has any. Found needed by hand: an ONNX MoE with one
    site tapped did not compile (`opscope.run.index_remainders`)."""
    import opscope
    from opscope.passes.expose_all_ops import exposures
    from opscope.pipeline.textual import run_pipeline
    from opscope.run.compile import compile_alike
    from opscope.run.runtime import load

    names = sorted(batch.sites())
    if not names:
        return []
    rng = np.random.default_rng(seed)
    chosen = {n for n in names if rng.random() < 0.5} or {names[int(rng.integers(len(names)))]}
    inputs = batch.inputs(seed)
    text = batch.module()
    exposed_text = _parse(text)
    run_pipeline(exposed_text, "expose-all-ops")
    exposed_text = exposed_text.operation.get_asm(enable_debug_info=True)  # the sites' names are locations
    module = _parse(exposed_text)
    _, exposed_list = exposures(module)
    keep = lambda s: s.name in chosen  # noqa: E731 (the inject and the barriered build tap the same sites)
    module, manifest = opscope.inject(module, target=target, taps="matmul", keep=keep)
    plain, built = compile_alike(exposed_text, module, target)
    base = load(plain).invoke("main", *inputs)
    outs = load(built).invoke("main", *inputs)
    problems = []
    if _differs(batch, base, outs):
        split = load(boundary_build(_parse(exposed_text), target, built, "matmul", keep)).invoke("main", *inputs)
        for tag, r, delta in _differs(batch, split, outs):
            if target == "llvm-cpu":
                problems.append(
                    f"{tag}: result {r} not bit-identical with {len(chosen)} of {len(names)} sites tapped, "
                    f"nor to the build with their boundaries (max |Δ| {delta:.3g})"
                )
    values = manifest.values(outs)
    tapped = {k[0] for k in values}
    problems += [f"batch: site {n} was not chosen but has sketches" for n in sorted(tapped - chosen)]
    dev = Device(batch, inputs, {e.name: outs[e.result] for e in exposed_list})
    found = sketch_problems(batch, dev, {k: v for k, v in values.items() if k[0] in chosen}, None)
    return problems + [p for p in found if not any(f"site {n} has no sketches" in p for n in set(names) - chosen)]


def _rw_extract_site(batch: Batch, seed: int, target: str) -> list[str]:
    """Every site outlined as `@site_<name>`: called on the device's own operands (its lhs, then
    each operand that is not a constant) it gives the site's result in the model."""
    from iree.compiler import ir

    from opscope.passes.extract_site import ExtractSite
    from opscope.run.compile import compile_module
    from opscope.run.runtime import load

    inputs = batch.inputs(seed)
    names = {
        f.name.replace("@@", tag): (i, f)
        for i, (tag, p) in enumerate(zip(batch.tags, batch.programs))
        for f in p.expected.sites
    }
    outs, exposed, module = _run(batch, [ExtractSite(site=name) for name in names], inputs, target)
    loaded = load(compile_module(module, target))
    dev = Device(batch, inputs, exposed)
    problems = []
    with module.context:
        fns = {
            ir.StringAttr(op.operation.attributes["opscope.site"]).value: op.operation
            for op in module.body.operations
            if op.operation.name == "func.func" and "opscope.site" in op.operation.attributes
        }
    for name, (i, fact) in names.items():
        fn = fns.get(name)
        if fn is None:
            problems.append(f"{_tag(name)}: extract-site made no function for {name}")
            continue
        p = batch.programs[i]
        lhs, rhs = _site_operand_ids(p.refs[fact.out])
        with module.context:
            arg_types = [
                ir.RankedTensorType(t)
                for t in ir.FunctionType(ir.TypeAttr(fn.attributes["function_type"]).value).inputs
            ]
            sym = ir.StringAttr(fn.attributes["sym_name"]).value
        # the lhs first (the input before its zero padding, or as the site reads it), then a computed rhs;
        # a weight lhs is copied in (W @ x takes x alone)
        if fact.weight_lhs:
            args = [dev.value(i, rhs)]
            firsts = []
        else:
            firsts = [dev.value(i, fact.lhs), dev.value(i, lhs)]
        if p.refs[fact.out][0] == "conv_grouped":  # unpadded, the site reads the input split into groups
            firsts.append(
                dev.value(i, lhs).reshape(tuple(arg_types[0].shape))
                if dev.value(i, lhs).size == int(np.prod(arg_types[0].shape))
                else firsts[0]
            )
        if firsts:
            rest = [] if fact.weight else [dev.value(i, rhs)]
            args = [next((c for c in firsts if tuple(c.shape) == tuple(arg_types[0].shape)), None)] + rest
        if len(args) != len(arg_types) or any(
            a is None or tuple(a.shape) != tuple(t.shape) for a, t in zip(args, arg_types)
        ):
            problems.append(
                f"{_tag(name)}: @{sym} takes {[str(t) for t in arg_types]}, not the site's runtime operands"
            )
        else:
            got = np.asarray(loaded.invoke(sym, *args)[0], np.float64)
            want = np.asarray(dev.value(i, fact.out), np.float64)
            if got.shape != want.shape or not np.allclose(
                got, want, rtol=1e-5, atol=1e-6 * float(np.abs(want).max(initial=1.0))
            ):
                problems.append(f"{_tag(name)}: @{sym} gives {got.ravel()[:3]}, the model's site {want.ravel()[:3]}")
    return problems


def _rw_dump_tensors(batch: Batch, seed: int, target: str) -> list[str]:
    """Every site's whole lhs returned: each equals the device's tensor the program says the site
    reads (a convolution's input before its padding), bit for bit."""
    from opscope.passes.dump_tensors import DumpTensors, dumps

    inputs = batch.inputs(seed)
    outs, exposed, module = _run(batch, [DumpTensors(role="lhs")], inputs, target)
    dev = Device(batch, inputs, exposed)
    with module.context:
        _, dumped = dumps(module)
    names = batch.sites()
    problems = []
    if sorted(d.site for d in dumped) != sorted(names):
        problems.append(f"batch: dumped {len(dumped)} sites' lhs, the programs have {len(names)} sites")
    for d in dumped:
        if d.site not in names:
            continue
        i, fact = names[d.site]
        want = dev.value(i, fact.lhs)
        if not np.array_equal(np.asarray(outs[d.result]), np.asarray(want)):
            problems.append(f"{_tag(d.site)}: {d.site}'s dumped lhs {tuple(outs[d.result].shape)} is not its tensor")
    return problems


def _rw_vulkan_spirv(batch: Batch, seed: int, target: str) -> list[str]:
    """Every check of `check_batch` again on vulkan-spirv (Mesa's lavapipe here), so the two targets
    agree through numpy; the models opscope refuses on this device are left out (its own rule,
    `opscope.run.target_limits.check_target_limits`: f16, i8 and bf16 tensors on lavapipe, where
    IREE 3.13's SPIR-V computes them wrong; the i8 and bf16 cases found by these tests)."""
    from opscope.errors import OpscopeError
    from opscope.run.target_limits import check_target_limits
    from opscope.run.targets import driver_available, get_target

    driver = get_target("vulkan-spirv").driver
    if driver_available(driver):
        return []  # no Vulkan device here: nothing to compare (CI installs lavapipe)

    def refused(p: Program) -> bool:
        try:
            check_target_limits(_parse(Batch([p]).module()), "vulkan-spirv", driver)
        except OpscopeError:
            return True
        return False

    kept = [p for p in batch.programs if not refused(p)]
    if not kept:
        return []
    outcome = check_batch(Batch(kept), seed, "vulkan-spirv")
    return [f"vulkan-spirv: {p}" for p in outcome.problems]
