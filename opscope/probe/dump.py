"""Whole tensors out of a model, to files a probe (or the user's own tools) reads.

`dump(source, out)` writes every matmul weight (`opscope.ir.weights`, as [out, K]) and, with
`activations=True`, the whole tapped activations of a few steps: the model is rewritten with
`dump-tensors` (each site's lhs, rhs or result returned as an extra result, bounded by a
byte budget per call), compiled, run on its own or given inputs, and each site's tensor is
written as [rows, last dim] (tokens × features), the steps stacked. Files are written
atomically (`opscope.probe.tensors`): nothing half-written is left behind.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from opscope.errors import OpscopeError

MAX_BYTES = 256 * 2**20  # the tapped tensors of one call


def dump(
    source,
    out: str | Path,
    *,
    weights: bool = True,
    activations: bool = False,
    sites: str = "",
    role: str = "lhs",
    steps: int = 1,
    max_bytes: int = MAX_BYTES,
    fmt: str = "npy",
    target: str = "llvm-cpu",
    inputs=None,
    progress: Callable[[str], None] | None = None,
) -> list[Path]:
    """Write the weights and/or activations of `source` under `out`, one file per tensor; returns them."""
    from opscope.ir.loading import new_context, parse_module
    from opscope.models.source import open_model
    from opscope.probe.sources import first_inputs, module_weights
    from opscope.probe.tensors import save_tensors

    if not weights and not activations:
        raise OpscopeError("nothing to dump: ask for weights, activations or both")
    if steps < 1:
        raise OpscopeError(f"steps must be >= 1, got {steps}")
    if fmt not in ("tensor", "npy", "safetensors"):
        raise OpscopeError(f"format must be tensor, npy or safetensors, got {fmt!r}")
    model = open_model(source, steps=steps, progress=progress)
    tensors: dict[str, np.ndarray] = {}
    first = None
    if activations:
        from opscope.drive.profile import resolve_inputs

        # checked (and the budget refused) before the weights are read or anything compiles
        module = parse_module(model.module, new_context(), model.name)
        batches, _ = resolve_inputs(model, steps, inputs)
        first = batches[0]
        tensors.update(_activations(model, module, sites, role, batches, max_bytes, target, progress))
    else:
        first = first_inputs(model)
    if weights:
        ws = module_weights(model.name, model.module, sites, first)
        tensors.update({f"{name}.weight": m for name, m in ws.matrices.items()})
    return save_tensors(out, tensors, fmt)


def _activations(
    model, module, sites: str, role: str, batches: list, max_bytes: int, target: str, progress
) -> dict[str, np.ndarray]:
    """Each tapped site's `role` tensor over the calls of `batches`, as [rows, last dim], keyed `<site>.<role>`."""
    from opscope.passes.dump_tensors import DumpTensors, dumps
    from opscope.pipeline.textual import Pipeline, run_pipeline
    from opscope.run.compile import compile_module
    from opscope.run.runtime import load
    from opscope.run.ticker import ticking

    run_pipeline(module, Pipeline((DumpTensors(sites=sites, role=role, max_bytes=max_bytes),)))
    function, dumped = dumps(module)
    if not dumped:
        raise OpscopeError(
            f"{model.name}: no float, static-shaped matmul site to dump"
            + (f" matching sites='{sites}'" if sites else "")
        )
    start = time.perf_counter()
    with ticking(f"compile {model.name} with its {len(dumped)} dumped tensors for {target}"):
        loaded = load(compile_module(module, target))
    if progress is not None:
        progress(f"compiled in {time.perf_counter() - start:.1f} s; running {len(batches)} step(s)")
    collected: dict[str, list[np.ndarray]] = {}
    for batch in batches:
        results = loaded.invoke(function, *batch)
        results = results if isinstance(results, (list, tuple)) else [results]
        for d in dumped:
            x = np.asarray(results[d.result], dtype=np.float32)
            collected.setdefault(f"{d.site}.{d.role}", []).append(
                x.reshape(-1, x.shape[-1]) if x.ndim > 1 else x.reshape(1, -1)
            )
    return {k: np.concatenate(v, axis=0) for k, v in collected.items()}
