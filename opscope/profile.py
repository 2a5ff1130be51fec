"""The main job: inject statistics into a model, compile it, run it, and summarize the sketches.

`profile_module` is the whole loop on one module; `default_model` is the built-in
transformer-style stack it runs when given nothing.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from opscope.compile import compile_module
from opscope.demo import transformer_module
from opscope.errors import OpscopeError
from opscope.instrument import inject_matmul_stats
from opscope.loading import new_context, parse_module
from opscope.manifest import Manifest
from opscope.runtime import load
from opscope.stat_config import StatConfig


def default_model() -> str:
    """The built-in model: 2 transformer-style layers, d_model 64, 32 tokens, 16 matmul sites."""
    return transformer_module(layers=2, d_model=64, seq=32)


def default_inputs(arg_shapes: list[tuple[int, ...]], seed: int) -> list[np.ndarray]:
    """Activations with two hot channels (like real LLM residual streams), 1/sqrt(fan-in) weights."""
    rng = np.random.Generator(np.random.Philox(seed))
    out = []
    for i, shape in enumerate(arg_shapes):
        if i == 0:
            x = rng.standard_normal(shape).astype(np.float32)
            x[..., :2] *= 12.0
        else:
            x = (rng.standard_normal(shape) / np.sqrt(shape[0])).astype(np.float32)
        out.append(x)
    return out


@dataclass
class ProfileResult:
    """One profile: the manifest, every step's statistics, and where they were written."""

    manifest: Manifest
    steps: list[dict] = field(default_factory=list)
    out_dir: Path | None = None
    compile_seconds: float = 0.0
    run_seconds: float = 0.0

    def summary(self) -> list[dict]:
        """Per (site, role): density, channel peak/mean, kurtosis, top histogram bin (step mean)."""
        rows = []
        # Manifest entries already come in site, then lhs/rhs/out order.
        numel = {(e.site, e.role): e.numel for e in self.manifest.entries}
        for site, role in numel:
            def avg(stat, f=lambda v: float(v[0])):
                vals = [f(s[(site, role, stat)]) for s in self.steps if (site, role, stat) in s]
                return float(np.mean(vals)) if vals else float("nan")

            rows.append({
                "site": site, "role": role, "numel": numel[(site, role)],
                "density": avg("nnz") / numel[(site, role)],
                "chan_outlier": avg("chan_outlier"),
                "kurtosis": avg("kurtosis"),
                "hist_top": avg("hist", lambda v: float(v.max() / max(v.sum(), 1))),
            })
        return rows


def arg_shapes(module) -> list[tuple[int, ...]]:
    from iree.compiler import ir

    fn = next(op.operation for op in module.body.operations if op.operation.name == "func.func")
    fty = ir.FunctionType(ir.TypeAttr(fn.attributes["function_type"]).value)
    shapes = []
    for t in fty.inputs:
        if not isinstance(t, ir.RankedTensorType) or not t.has_static_shape:
            raise OpscopeError(f"profile needs static tensor arguments, got {t}")
        if str(t.element_type) != "f32":
            raise OpscopeError(f"profile feeds f32 inputs; argument type {t} is not supported yet")
        shapes.append(tuple(t.shape))
    return shapes


def profile_module(
    source: str | bytes,
    target: str = "llvm-cpu",
    steps: int = 3,
    config: StatConfig = StatConfig(),
    out_dir: str | Path | None = None,
    name: str = "<model>",
) -> ProfileResult:
    """Inject, compile for `target`, run `steps` times on seeded inputs, collect sketches."""
    module = parse_module(source, new_context(), name)
    shapes = arg_shapes(module)
    module, manifest = inject_matmul_stats(module, config)
    if not manifest.entries:
        raise OpscopeError(f"{name}: no matmul sites found, nothing to profile")
    t0 = time.perf_counter()
    compiled = compile_module(module, target)
    t1 = time.perf_counter()
    loaded = load(compiled)
    result = ProfileResult(manifest, compile_seconds=t1 - t0)
    fn = manifest.function
    t2 = time.perf_counter()
    for step in range(steps):
        outs = loaded.invoke(fn, *default_inputs(shapes, seed=step))
        result.steps.append(manifest.values(outs))
    result.run_seconds = time.perf_counter() - t2
    if out_dir is not None:
        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        manifest.flags = list(compiled.flags)
        manifest.save(out / "manifest.json")
        (out / "summary.json").write_text(json.dumps(result.summary(), indent=1))
        result.out_dir = out
    return result
