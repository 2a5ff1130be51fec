"""A model compiled twice for one target: as is, and with matmul sketches appended.

Every driver (sweep, seq, replay, profile) does the same three things: inject once,
compile once, call many times; and it checks once that injection left the original
results alone. `InstrumentedModel` holds that, so drivers only choose inputs.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

import numpy as np
from iree.compiler import ir

from opscope.errors import OpscopeError
from opscope.ir.arguments import Argument, arguments
from opscope.ir.loading import module_bytecode, new_context, parse_module
from opscope.ir.manifest import Manifest
from opscope.ir.stat_config import StatConfig
from opscope.pipeline.taps import TAPS, inject_stats
from opscope.run.compile import NO_DATA_TILING, CompileFailed, compile_module, mark_checked
from opscope.run.runtime import LoadedModule, load
from opscope.run.target_limits import check_target_limits
from opscope.run.targets import Target, get_target, require_runnable
from opscope.run.ticker import ticking

log = logging.getLogger("opscope")


@dataclass
class InstrumentedModel:
    """One model, injected and compiled for `target`, loaded and ready to call."""

    manifest: Manifest
    target: str
    args: list[Argument]  # the model's own arguments (shape, element type, index bounds), before injection
    loaded: LoadedModule
    compile_seconds: float
    base_source: bytes
    compile_cached: bool = False  # the compiled module came from the cache (compile_seconds is a lookup)

    @classmethod
    def build(
        cls,
        source: str | bytes | ir.Module,
        target: str = "llvm-cpu",
        config: StatConfig = StatConfig(),
        name: str = "<model>",
        batch: int = 0,
        taps: tuple[str, ...] = TAPS,
        weights_once: bool = True,
        sites: str = "",
    ) -> InstrumentedModel:
        """Parse `source` (text, bytecode, or a module, e.g. an importer's), tap `taps` (every
        matmul, attention, routing and residual site by default: `opscope.pipeline.taps.TAPS`),
        compile for `target` and load it. `batch` is lower-opscope's (most tensors per stack,
        0: all of a call); the kernel layout is the target's (`Target.hist_counts`,
        `Target.row_lanes`); `sites` a regex on site names (every kind; "" all). `weights_once` (default) computes the statistics of constant tensors
        (an imported model's weights) once per loaded module instead of every call
        (`split-weight-stats`; the recorded values and rows are the same); False: every call."""
        tgt = get_target(target)
        require_runnable(tgt)
        if isinstance(source, ir.Module):
            base = module_bytecode(source)  # keeps the importer's locations (site names)
        else:
            base = source.encode() if isinstance(source, str) else bytes(source)
        module = parse_module(base, new_context(), name)
        check_target_limits(module, tgt.name, tgt.driver, name)
        mark_checked(module, base, tgt)  # the parity gate compiles `base` without parsing it again
        args = arguments(module)
        with ticking(f"{name}: inject"):
            module, manifest = inject_stats(
                module, config, taps, sites=sites, batch=batch, weights_once=weights_once, **tgt.layout
            )
        if not manifest.entries:
            which = f" named like {sites!r}" if sites else ""
            raise OpscopeError(
                f"{name}: no {' or '.join(taps)} sites{which} found, nothing to record"
                + ("; `opscope sites MODEL` lists the matmul sites' names" if sites else "")
            )
        t0 = time.perf_counter()
        try:
            with ticking(f"{name}: compile {len(manifest.sites)} tapped sites for {tgt.name}"):
                compiled = compile_module(module, tgt)
        except CompileFailed as e:
            raise _blame(e, base, tgt, name) from None
        seconds = time.perf_counter() - t0
        manifest.flags = list(compiled.flags)
        return cls(manifest, tgt.name, args, load(compiled), seconds, base, compiled.cached)

    @property
    def function(self) -> str:
        return self.manifest.function

    def __call__(self, *inputs: np.ndarray) -> list[np.ndarray]:
        """Every result of one call: the original ones, then the sketches."""
        return tapped_outputs(self.loaded, self.manifest, inputs)

    def original(self, outputs: list[np.ndarray]) -> list[np.ndarray]:
        return outputs[: self.manifest.num_original_results]

    def check_parity(self, inputs: list[np.ndarray], outputs: list[np.ndarray]) -> float | None:
        """Run the un-instrumented model on `inputs`; raise unless its results equal the
        instrumented run's original results (the reference's gate, |x−y| ≤ 1e-3·(1+max|·|); a
        16-bit float result within its type's rounding: `compare_originals`).
        Returns the largest absolute difference (0.0 when bit-identical), or None with a
        warning when IREE cannot compile the untapped model though it compiled the tapped
        one (an IREE limitation: the recording goes on, unchecked)."""
        untiled = (NO_DATA_TILING,) if NO_DATA_TILING in self.manifest.flags else ()  # the same kernels
        # Its device goes before the compile: its memory, and on lavapipe the polling threads an idle
        # Vulkan device keeps (opscope.run.runtime), which would take the compiler's cores.
        self.loaded.release(files=False)
        try:
            with ticking(f"compile the untapped model for {self.target} (parity)"):
                compiled = compile_module(self.base_source, self.target, untiled)
        except CompileFailed as e:
            log.warning(
                "the untapped model does not compile for %s though the tapped one does (an IREE "
                "limitation): original results not compared; %s",
                self.target,
                e,
            )
            return None
        if compiled.untiled and not untiled:
            log.info(
                "parity: IREE compiles the untapped model only without data tiling (the tapped one with it): "
                "their matmul kernels differ, so the originals may differ in their last bits"
            )
        base = load(compiled).invoke(self.function, *inputs)
        return compare_originals(base, self.original(outputs), self.target)


def compare_originals(base: list[np.ndarray], tapped: list[np.ndarray], target: str) -> float:
    """The parity gate: raise unless the tapped build's original results equal the untapped
    build's, |x−y| ≤ 1e-3·(1+max|·|) everywhere (the reference's rule) for a 32-bit result, within
    its own type's rounding for a 16-bit float one (`within_rounding`), a NaN or an infinity only
    where the other build has the same; returns the largest |x−y| (0.0: bit-identical)."""
    if len(base) != len(tapped):
        raise OpscopeError(
            f"parity: the instrumented build returns {len(tapped)} original results, the untapped one {len(base)}"
        )
    worst = 0.0
    for i, (x, y) in enumerate(zip(base, tapped)):
        eps = _float16_eps(np.asarray(x).dtype)
        x, y = np.asarray(x, np.float64), np.asarray(y, np.float64)
        if x.shape != y.shape:
            raise OpscopeError(f"parity: result {i} has shape {y.shape} instrumented, {x.shape} as is")
        same = (x == y) | (np.isnan(x) & np.isnan(y))  # equal infinities and NaN at the same place agree
        with np.errstate(invalid="ignore"):
            diff = np.where(same, 0.0, np.abs(x - y))  # an unmatched NaN or infinity stays NaN or inf
        if eps is None:
            bound = PARITY_TOL * (1.0 + np.maximum(np.abs(x), np.abs(y)))
        else:
            bound = ROUNDING_MAX * eps * float(np.abs(x[np.isfinite(x)]).max(initial=0.0))
        bad = ~same & ~(np.isfinite(diff) & (diff <= bound))
        if bad.any():
            where = tuple(int(j) for j in np.argwhere(bad)[0])
            off = diff[bad]
            off = off[~np.isnan(off)]
            raise OpscopeError(
                f"parity: result {i} differs after injection on {target} at {int(bad.sum())} of "
                f"{bad.size} elements (max |Δ| {off.max() if off.size else float('nan'):.3g}; first at "
                f"{list(where)}: {y[where]:.6g} instrumented, {x[where]:.6g} as is){WHICH}"
            )
        if eps is not None:
            finite = np.isfinite(x) & np.isfinite(y)
            norm = float(np.linalg.norm(x[finite]))
            rel = float(np.linalg.norm(x[finite] - y[finite])) / norm if norm else 0.0
            if rel > ROUNDING_L2 * eps:
                raise OpscopeError(
                    f"parity: result {i} differs after injection on {target} by a relative L2 error of "
                    f"{rel:.3g}, more than {ROUNDING_L2} roundings of its 16-bit type ({ROUNDING_L2 * eps:.3g}){WHICH}"
                )
        worst = max(worst, float(diff.max(initial=0.0)))
    return worst


# A tap changes what IREE fuses, and a miscompile can sit in either build: the long run's GQA attention
# differed on vulkan-spirv because the untapped build was wrong (docs/testing.md).
WHICH = "; either build may be the wrong one (taps change what IREE fuses): run both on llvm-cpu to tell"
PARITY_TOL = 1e-3  # the reference's gate for a 32-bit result: |x−y| ≤ 1e-3·(1+max|·|)
# A 16-bit float result (a bf16 or f16 model's) may differ by its type's rounding: a tap that
# splits a fused dispatch makes IREE round an intermediate that the fused build kept in f32, and
# a deep model carries those roundings to its output (SmolLM2-135M's shape in bf16, 30 layers:
# 88 % of the logits differ, relative L2 1.5e-2 = 1.9 eps, max |Δ| 2.5 eps of max|x|). The gate:
# relative L2 error ≤ ROUNDING_L2 eps and every |x−y| ≤ ROUNDING_MAX eps·max|x|.
ROUNDING_L2 = 8
ROUNDING_MAX = 16


def _float16_eps(dtype: np.dtype) -> float | None:
    """The epsilon of a 16-bit float type (bf16 2^-7, f16 2^-10), else None."""
    try:
        import ml_dtypes

        info = ml_dtypes.finfo(dtype)
    except (TypeError, ValueError, ImportError):
        return None
    return float(info.eps) if info.bits == 16 else None


def tapped_outputs(loaded: LoadedModule, manifest: Manifest, inputs) -> list[np.ndarray]:
    """One call's results as the manifest numbers them: the call's own, then (split-weight-stats)
    the weights' statistics, computed once per loaded module."""
    outs = loaded.invoke(manifest.function, *inputs)
    if manifest.weights_function:
        outs = outs + loaded.invoke_once(manifest.weights_function)
    return outs


def _blame(failed: CompileFailed, base: bytes, target: Target, name: str) -> OpscopeError:
    """Whose failure it is: compile the untapped model for the same target; when it fails
    too, IREE cannot compile the model at all (an IREE limitation, not the taps)."""
    try:
        with ticking(f"{name}: compile the untapped model for {target.name}, to see whose failure it is"):
            compile_module(base, target)
    except CompileFailed as plain:
        other = "; try --target llvm-cpu" if target.name != "llvm-cpu" else ""
        return OpscopeError(
            f"{name}: IREE cannot compile this model for {target.name}, with or without opscope's taps (an IREE "
            f"limitation: plain iree-compile fails the same way{other}): {plain.first}"
            + (f" (all diagnostics: {plain.log})" if plain.log else "")
        )
    return OpscopeError(
        f"{name}: the untapped model compiles for {target.name} but the tapped one does not "
        f"(opscope's taps broke it; please report it with the log): {failed}"
    )
