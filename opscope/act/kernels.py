"""`opscope kernels`: the reference's kernel bench (`opscope-kernels`), through IREE on every target here.

One matmul x[m, K] · W[K, N], W a constant (an immutable global of seeded normal values), m = 1
(decode) and m = 32 (prefill), K×N 1024×1024, 1024×3072, 3072×1024 (the reference's qwen-like
attention, MLP-up and MLP-down shapes). Each specialization is the same module rewritten by an
opscope pass and compiled by IREE for the target:

* f32: as is;
* W8A16: `quantize-weight{bits=8}` (int8 weights, per-channel scales in the contraction);
* W4A16 g128: `quantize-weight{bits=4 group=128}`;
* W8A8: `quantize-weight{bits=8 activations=true}` (int8 activations per row, i32 sums);
* factored: `factor-weight{rank=r}`, r = K·N / (2(K+N)) (half the FLOPs; W is random, so its error
  is large: the time is the point);
* sparse-skip: `skip-zero-channels` over the first half of K, on an x whose first half of K is zero
  (the guarded slice), and the same without its guard.
* sparse-weight 10 %: the same W pruned to its largest 10 % by magnitude (the reference's sparse90),
  stored by output channel by `sparse-weight` (ELLPACK: the nonzeros' K indices and values), timed
  against the dense f32 product (pruning alone changes no dense time).

Times are `iree-benchmark-module`'s on `.npy` inputs (no Python in the loop), the variants in
alternating rounds, the minimum µs per call; errors ‖y − x·W‖ / ‖x·W‖ against numpy's float64
product (W read back from the module); the compiled module's size. Then cache against DRAM: an
f32 x[1, n]·W[n, n] at n = 2048 (16 MiB of weight) and 6144 (144 MiB), the weight an argument,
as GB/s of weight streamed per call: a last-level cache the first fits in and the second does
not shows as a gap. The host's dot-product features come from IREE's own `iree-cpuinfo` (what
llvm-cpu's `host` CPU compiles for: AVX-512 VNNI and BF16 here; dotprod and i8mm on Arm).
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field

import numpy as np

from opscope.errors import OpscopeError
from opscope.text.table import table

SHAPES = ((1024, 1024), (1024, 3072), (3072, 1024))
ROWS = (1, 32)
CACHE_SIZES = (2048, 6144)
QUICK_SHAPES, QUICK_ROWS, QUICK_CACHE = ((128, 384),), (32,), (256, 1024)
# the error each variant promises against numpy's f32 product (a random weight: factored promises none)
SPARSE_VARIANT, SPARSE_KEEP = "sparse-weight 10%", 0.1  # the reference's sparse90: W's largest 10 % kept
BOUNDS = {
    "f32": 1e-5,
    "sparse-skip": 1e-5,
    "sparse-skip, no guard": 1e-5,
    "W8A16": 0.02,
    "W8A8": 0.03,
    SPARSE_VARIANT: 1e-5,
}
W4_BOUND = 0.2
DOT_FEATURES = ("avx512vnni", "avxvnni", "avx512bf16", "avx512fp16", "amx-int8", "amx-bf16", "dotprod", "i8mm", "bf16")


@dataclass(frozen=True)
class KernelRow:
    """One variant of one shape on one target."""

    target: str
    shape: str  # m×K×N
    variant: str
    us: float
    vs_f32: float  # the f32 variant's time over this one's (> 1: faster)
    rel_error: float
    vmfb_bytes: int

    @property
    def bound(self) -> float | None:
        """The error this variant promises (None: factored, a random weight's truncation)."""
        return W4_BOUND if self.variant.startswith("W4A16") else BOUNDS.get(self.variant)

    @property
    def wrong(self) -> bool:
        """Its error is beyond what the variant promises: the target computed it wrong."""
        return self.bound is not None and not self.rel_error <= self.bound


@dataclass(frozen=True)
class CacheRow:
    """An f32 x[1, n]·W[n, n], the weight streamed per call."""

    target: str
    n: int
    weight_bytes: int
    us: float

    @property
    def gbps(self) -> float:
        return self.weight_bytes / (self.us * 1e3)


@dataclass
class KernelReport:
    """Every target's variants and cache rows, and the host's dot-product features."""

    targets: tuple[str, ...]
    features: dict[str, bool]
    rows: list[KernelRow] = field(default_factory=list)
    cache: list[CacheRow] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)  # variants a target could not build, one line each

    def to_dict(self) -> dict:
        return {
            "targets": list(self.targets),
            "dot_product_features": dot_features(self.features),
            "cpu_features": self.features,
            "rows": [asdict(r) | {"bound": r.bound, "wrong": r.wrong} for r in self.rows],
            "cache": [asdict(c) | {"gbps": c.gbps} for c in self.cache],
            "skipped": self.skipped,
        }


def cpu_features() -> dict[str, bool]:
    """`iree-cpuinfo`'s table (feature -> present), {} where the tool cannot run."""
    from opscope.run.tools import find_tool

    try:
        out = subprocess.run([find_tool("iree-cpuinfo")], capture_output=True, text=True, timeout=60).stdout
    except (OSError, OpscopeError, subprocess.TimeoutExpired):
        return {}
    found = {}
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[1] in ("0", "1"):
            found[parts[0]] = parts[1] == "1"
    return found


def dot_features(features: dict[str, bool]) -> dict[str, list[str]]:
    """The dot-product and low-precision features the host has and lacks (of those it reports)."""
    known = [f for f in DOT_FEATURES if f in features]
    return {"present": [f for f in known if features[f]], "absent": [f for f in known if not features[f]]}


def variants(k: int, n: int) -> dict[str, str]:
    """Variant name -> the opscope pipeline that makes it (empty: the module as is)."""
    rank = max(1, k * n // (2 * (k + n)))
    half = f'"0-{k // 2 - 1}"'
    return {
        "f32": "",
        "W8A16": "quantize-weight{bits=8}",
        "W4A16 g128" if k % 128 == 0 else "W4A16": "quantize-weight{bits=4 group=128}"
        if k % 128 == 0
        else "quantize-weight{bits=4}",
        "W8A8": "quantize-weight{bits=8 activations=true}",
        f"factored r={rank}": f"factor-weight{{rank={rank}}}",
        "sparse-skip": f"skip-zero-channels{{channels={half}}}",
        "sparse-skip, no guard": f"skip-zero-channels{{channels={half} guard=false}}",
    }


def _rewritten(text: str, pipeline: str) -> str:
    from opscope.ir.loading import module_text, new_context, parse_module
    from opscope.pipeline.textual import parse_pipeline, run_pipeline

    if not pipeline:
        return text
    ctx = new_context()
    module = parse_module(text, ctx, "kernel")
    with ctx:
        run_pipeline(module, parse_pipeline(pipeline))
        return module_text(module, debug_info=True)


def bench_shape(m: int, k: int, n: int, target: str, rounds: int, report: KernelReport) -> None:
    """Every variant of x[m, k]·W[k, n] on `target`, appended to `report`."""
    from opscope.ir.loading import new_context, parse_module
    from opscope.ir.weights import read_weights
    from opscope.models.demo import matmul_module
    from opscope.run.call_timing import time_calls
    from opscope.run.compile import compile_module
    from opscope.run.runtime import load

    text = matmul_module(m, k, n, weights="globals", name="fc")
    module = parse_module(text, new_context(), "kernel")
    w = read_weights(module)[0].values.astype(np.float64)
    x = np.random.default_rng(0).standard_normal((m, k)).astype(np.float32)
    x[:, : k // 2] = 0.0  # every variant gets the same x: half of K zero, for the sparse skip
    pruned_text, pruned = prune_weight(module, w)
    cases = [(name, text, pipeline, w) for name, pipeline in variants(k, n).items()]
    cases.append((SPARSE_VARIANT, pruned_text, "sparse-weight", pruned))
    built = []
    for name, source, pipeline, weight in cases:
        want = x.astype(np.float64) @ weight
        try:
            compiled = compile_module(_rewritten(source, pipeline), target)
            got = load(compiled).invoke("main", x)[0].astype(np.float64)
        except OpscopeError as e:
            report.skipped.append(f"{target} {m}×{k}×{n} {name}: {str(e).splitlines()[0][:200]}")
            continue
        built.append((name, compiled, float(np.linalg.norm(got - want) / np.linalg.norm(want))))
    times = time_calls([c for _, c, _ in built], "main", [x], rounds=rounds)
    base = next((t.min_us for (name, _, _), t in zip(built, times) if name == "f32"), None)
    for (name, compiled, err), t in zip(built, times):
        speed = base / t.min_us if base else float("nan")
        report.rows.append(KernelRow(target, f"{m}×{k}×{n}", name, t.min_us, speed, err, len(compiled.vmfb)))


def prune_weight(module, w: np.ndarray, keep: float = SPARSE_KEEP) -> tuple[str, np.ndarray]:
    """The one-weight `module` (edited in place) with its weight W [K, N] (`w`) pruned to its largest
    `keep` share by magnitude, as text, and that pruned W."""
    from opscope.ir.loading import module_text
    from opscope.ir.weights import read_weights, replace_weights

    pruned = np.where(np.abs(w) >= np.quantile(np.abs(w), 1.0 - keep), w, 0.0)
    (weight,) = read_weights(module)
    replace_weights(module, {weight.name: np.ascontiguousarray(pruned.T, np.float32)})  # as [out, K]
    return module_text(module, debug_info=True), pruned


def bench_cache(n: int, target: str, rounds: int, report: KernelReport) -> None:
    """x[1, n]·W[n, n] with W an argument (f32), its weight streamed per call."""
    from opscope.models.demo import matmul_module
    from opscope.run.call_timing import time_calls
    from opscope.run.compile import compile_module

    rng = np.random.default_rng(1)
    x, w = rng.standard_normal((1, n)).astype(np.float32), rng.standard_normal((n, n)).astype(np.float32)
    try:
        compiled = compile_module(matmul_module(1, n, n, name="gemv"), target)
        (t,) = time_calls([compiled], "main", [x, w], rounds=rounds)
    except OpscopeError as e:
        report.skipped.append(f"{target} cache {n}²: {str(e).splitlines()[0][:200]}")
        return
    report.cache.append(CacheRow(target, n, w.nbytes, t.min_us))


def kernel_bench(
    targets: Sequence[str] | None = None,
    *,
    quick: bool = False,
    rounds: int = 5,
    progress: Callable[[str], None] | None = None,
) -> KernelReport:
    """The bench on `targets` (default every target that runs here); `quick`: one 32×128×384 shape,
    cache sizes 256 and 1024, one round (a smoke test)."""
    from opscope.run.targets import TARGETS, driver_available, get_target, require_runnable

    if rounds < 1:
        raise OpscopeError(f"kernels: rounds must be >= 1, got {rounds}")
    if targets:
        chosen = [get_target(t).name for t in targets]
        for t in chosen:
            require_runnable(get_target(t))
    else:
        chosen = [name for name, t in TARGETS.items() if driver_available(t.driver) is None]
    report = KernelReport(tuple(chosen), cpu_features())
    rounds = 1 if quick else rounds
    for target in chosen:
        for m in QUICK_ROWS if quick else ROWS:
            for k, n in QUICK_SHAPES if quick else SHAPES:
                if progress:
                    progress(f"{target}: {m}×{k}×{n}, {len(variants(k, n)) + 1} variants")
                bench_shape(m, k, n, target, rounds, report)
        for n in QUICK_CACHE if quick else CACHE_SIZES:
            if progress:
                progress(f"{target}: cache vs DRAM, {n}² f32")
            bench_cache(n, target, rounds, report)
    return report


def kernels_text(report: KernelReport) -> str:
    """The host's dot-product features, every variant's time, speedup and error, the cache rows."""
    dots = dot_features(report.features)
    lines = [
        "host (iree-cpuinfo): "
        + (
            f"dot-product features {', '.join(dots['present']) or 'none'}"
            + (f"; absent: {', '.join(dots['absent'])}" if dots["absent"] else "")
            if report.features
            else "iree-cpuinfo did not run"
        ),
        "",
    ]
    head = ["target", "m×K×N", "variant", "µs/call", "vs f32", "rel err", "vmfb", "check"]
    rows = [
        [
            r.target,
            r.shape,
            r.variant,
            f"{r.us:.1f}",
            f"{r.vs_f32:.2f}×",
            f"{r.rel_error:.2e}",
            f"{r.vmfb_bytes / 2**20:.2f} MiB",
            "-" if r.bound is None else f"WRONG (> {r.bound:g})" if r.wrong else "ok",
        ]
        for r in report.rows
    ]
    lines += table(head, rows, right=lambda i: 3 <= i <= 6, rule=True)
    wrong = [r for r in report.rows if r.wrong]
    if wrong:
        lines += ["", f"WRONG: {len(wrong)} variant{'s' * (len(wrong) > 1)} computed beyond the error they promise:"]
        for r in wrong:
            right = [o.target for o in report.rows if (o.shape, o.variant) == (r.shape, r.variant) and not o.wrong]
            where = f" (within it on {', '.join(right)}: the target's compiler, not the rewrite)" if right else ""
            lines.append(f"  {r.target} {r.shape} {r.variant}: {r.rel_error:.2g} > {r.bound:g}{where}")
    if report.cache:
        lines += ["", "cache vs DRAM (x[1, n]·W[n, n], f32, the weight streamed per call):"]
        lines += table(
            ["target", "n", "weight", "µs/call", "GB/s"],
            [
                [c.target, str(c.n), f"{c.weight_bytes / 2**20:.0f} MiB", f"{c.us:.1f}", f"{c.gbps:.1f}"]
                for c in report.cache
            ],
            right=lambda i: i >= 1,
            rule=True,
        )
    if report.skipped:
        lines += ["", f"not built or not run ({len(report.skipped)}):", *(f"  {s}" for s in report.skipped)]
    return "\n".join(lines) + "\n"
