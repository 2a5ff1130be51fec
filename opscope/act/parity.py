"""Op-by-op parity, the driver: build two sides of a model, run them on the same inputs and
compare every intermediate tensor (`opscope.act.op_compare` holds the comparison, its
tolerance rule and the report).

`op_parity(a, b, ...)`: each side is a model (anything `open_model` takes) plus an optional
opscope-opt pipeline applied first (a rewrite), then `expose-all-ops`, then optionally the
stat taps; each is compiled for its target and run on the same inputs (the model's own
first batch, else generated from its signature), and the exposed results are compared by
name. `exposed_run` builds and runs one side; `torch_module_outputs` runs a torch model
eagerly for the reference side of `op_compare.site_parity`.
"""

from __future__ import annotations

import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from iree.compiler import passmanager

from opscope.act.op_compare import DEFAULT_TOL, ParityReport, Tensor, compare
from opscope.drive.inputs import check_steps, generate, read_files
from opscope.errors import OpscopeError
from opscope.importers import import_source
from opscope.ir.arguments import arguments, function_op, symbol_name
from opscope.ir.loading import module_bytecode, new_context, parse_module
from opscope.ir.stat_config import StatConfig
from opscope.models.source import open_apart, open_model
from opscope.passes.expose_all_ops import ExposeAllOps, exposures
from opscope.pipeline.taps import inject_stats
from opscope.pipeline.textual import Pipeline, add_to_pass_manager, parse_pipeline, run_pipeline
from opscope.run.compile import compile_module
from opscope.run.runtime import load
from opscope.run.targets import get_target, require_runnable
from opscope.run.ticker import ticking

FUSION_TOL = 1e-4  # the reference's bound on a fused build against an unfused one, at the outputs


@dataclass(frozen=True)
class Build:
    """One side of a comparison: what was compiled, and the tensors its run exposed."""

    model: str
    pipeline: str
    target: str
    inject: bool
    flags: tuple[str, ...]
    tensors: tuple[Tensor, ...] = field(repr=False)
    original: int = 0  # the function's original results
    compile_seconds: float = 0.0
    cached: bool = False
    outputs_only: bool = False  # the function's results compared, nothing exposed
    dispatches: int | None = None  # with outputs_only: the dispatches IREE formed

    def __str__(self) -> str:
        steps = [self.model] + ([f"pipeline '{self.pipeline}'"] if self.pipeline else [])
        if self.outputs_only:
            n = len(self.tensors)
            steps.append(f"{n} output{'s' * (n != 1)}" + (f", {self.dispatches} dispatches" if self.dispatches else ""))
        else:
            steps.append(f"{len(self.tensors)} ops exposed")
        if self.inject:
            steps.append("stat taps injected")
        flags = f" {' '.join(self.flags)}" if self.flags else ""
        when = "cached" if self.cached else f"compiled in {self.compile_seconds:.1f} s"
        return ", ".join(steps) + f"; {self.target}{flags} ({when})"


def exposed_run(
    source: Any,
    *,
    pipeline: str = "",
    target: str = "llvm-cpu",
    inject: bool = False,
    flags: Sequence[str] = (),
    inputs: Any = None,
    ops: str = "",
    constants: bool = False,
    label: str = "",
    model=None,
    outputs_only: bool = False,
) -> tuple[Build, list[np.ndarray]]:
    """Build one side and run it once: `source` (anything `open_model` takes, or an opened
    `ModelSource` as `model`) with `pipeline` applied, every op exposed (`ops`, `constants`:
    expose-all-ops' options), the stat taps injected when `inject`, compiled for `target`
    with `flags` and run on `inputs` (see `op_parity`); `outputs_only`: nothing exposed, the
    tensors are the function's results (`output#<i>`), its dispatches counted. Returns (the
    build, the inputs used)."""
    tgt = get_target(target)
    require_runnable(tgt)
    steps = parse_pipeline(pipeline).elements if pipeline.strip() else ()
    expose = ExposeAllOps(ops=ops, constants=constants)
    model = model or open_model(source)
    label = f"{label} ({model.name})" if label else model.name
    base = model.module
    base = module_bytecode(base) if not isinstance(base, (str, bytes)) else base  # a copy: never edit the caller's
    with ticking(f"{label}: prepare"):
        module = import_source(parse_module(base, new_context(), model.name), name=model.name)
        fn_name = symbol_name(function_op(module))
        args = arguments(module, fn_name)
        run_pipeline(module, Pipeline(tuple(steps) + (() if outputs_only else (expose,))))
        function, exposed = exposures(module, fn_name) if not outputs_only else (fn_name, [])
        dispatches = dispatch_count(module, tgt) if outputs_only else None
        if not exposed and not outputs_only:
            raise OpscopeError(
                f"{label}: expose-all-ops found no op to expose in @{fn_name}" + (f" matching '{ops}'" if ops else "")
            )
        if inject:
            inject_stats(module, StatConfig(), **tgt.layout)
    if inputs is None:
        inputs = next(iter(model.inputs), None) if model.inputs is not None else None
        inputs = inputs if inputs is not None else next(generate(args, 1))
    elif isinstance(inputs, (str, Path)) or (
        isinstance(inputs, (list, tuple)) and inputs and all(isinstance(p, (str, Path)) for p in inputs)
    ):
        inputs = read_files([inputs] if isinstance(inputs, (str, Path)) else list(inputs), args, 1)[0]
    inputs = check_steps([inputs], args, 1, f"{label}: inputs")[0]  # dtypes and shapes exactly
    t0 = time.perf_counter()
    what = "the model" if outputs_only else f"{len(exposed)} exposed ops"
    with ticking(f"{label}: compile {what} for {tgt.name}"):
        compiled = compile_module(module, tgt, extra_flags=tuple(flags))
    seconds = time.perf_counter() - t0
    loaded = load(compiled)
    with ticking(f"{label}: run"):
        outputs = loaded.invoke(function, *_as_declared(loaded, function, inputs))
    if outputs_only:
        tensors = tuple(Tensor(f"output#{i}", out, "", i) for i, out in enumerate(outputs))
        original = len(outputs)
    else:
        tensors = tuple(Tensor(e.name, outputs[e.result], e.op, e.index, e.site) for e in exposed)
        original = min(e.result for e in exposed)
    return Build(
        model.name,
        pipeline.strip(),
        tgt.name,
        inject,
        tuple(flags),
        tensors,
        original,
        seconds,
        compiled.cached,
        outputs_only,
        dispatches,
    ), inputs


def dispatch_count(module, target) -> int | None:
    """How many dispatches IREE forms for `module` (its flow phase, nothing compiled), or None
    where that phase fails (the full compile then says why)."""
    from opscope.analysis.dispatch import dispatch_calls, flow_module

    try:
        return sum(dispatch_calls(flow_module(module_bytecode(module), target.name)).values())
    except OpscopeError:
        return None


_DECLARED = re.compile(r"%input(\d+): tensor<(?:[0-9?]+x)*([a-z0-9]+)>")
_INTS = {"i8": np.int8, "i16": np.int16, "i32": np.int32, "i64": np.int64, "i1": np.bool_}


def _as_declared(loaded, function: str, inputs: list[np.ndarray]) -> list[np.ndarray]:
    """`inputs` with integers cast to the width the compiled function declares (flags such
    as `--iree-input-demote-i64-to-i32` change the signature; the runtime refuses i64 then)."""
    try:
        text = loaded.context.modules.module.vm_module.lookup_function(function).reflection["iree.abi.declaration"]
    except (AttributeError, KeyError, TypeError):
        return inputs
    declared = {int(i): t for i, t in _DECLARED.findall(text)}
    out = []
    for i, x in enumerate(inputs):
        want = _INTS.get(declared.get(i, ""))
        out.append(x.astype(want) if want is not None and x.dtype.kind in "biu" and x.dtype != want else x)
    return out


def op_parity(
    a: Any,
    b: Any = None,
    *,
    a_pipeline: str = "",
    b_pipeline: str = "",
    a_target: str = "llvm-cpu",
    b_target: str | None = None,
    inject_b: bool = False,
    inputs: Any = None,
    tol: float | None = None,
    ops: str = "",
    constants: bool = False,
    a_flags: Sequence[str] = (),
    b_flags: Sequence[str] | None = None,
    progress=None,
    parameters: bool | None = None,
    weights_dtype: str | None = None,
    outputs_only: bool = False,
    fusion: bool = False,
) -> ParityReport:
    """Compare two builds op by op: every intermediate tensor of A (`a` with `a_pipeline`,
    for `a_target`) against B's (`b`, default `a`, with `b_pipeline`, for `b_target`,
    default A's, with the stat taps when `inject_b`), both run on the same `inputs`: the
    model's own first batch (a zoo model's), else generated from its signature, unless
    given (one call's arrays, or input files as `opscope profile --inputs` reads them).
    The pipelines are opscope-opt pipelines (opscope passes, `canonicalize`, IREE passes)
    applied before exposing; `ops`/`constants` are expose-all-ops' options;
    `a_flags`/`b_flags` extra iree-compile flags (B's default: A's when B's target is A's),
    e.g. `--iree-input-demote-i64-to-i32` for models with i64 inputs on vulkan-spirv.
    `progress` receives a line per build. `parameters`: each model's weights go to a parameter file
    in a temporary folder that its builds map (`opscope.models.source.open_apart`; None: so for
    a large model; float32 ones stored as `weights_dtype`). `outputs_only`: nothing exposed (exposing
    changes how IREE fuses), the function's results compared (`output#<i>`), each build's dispatches
    counted; `fusion`: the reference's fusion parity, A fused as IREE builds it against B with
    every op its own dispatch (`unfuse` after `b_pipeline`), outputs only, `tol` default
    FUSION_TOL. Returns a `ParityReport` (`tol`: see the module docstring; default DEFAULT_TOL)."""
    if fusion:
        outputs_only = True
        b_pipeline = f"{b_pipeline},unfuse" if b_pipeline.strip() else "unfuse"
    tol = (FUSION_TOL if fusion else DEFAULT_TOL) if tol is None else tol
    if outputs_only and (ops or constants):
        raise OpscopeError(
            "parity: ops/constants choose the ops to expose, and outputs_only (or fusion) exposes none: drop one"
        )
    if not tol >= 0:
        raise OpscopeError(f"parity: the tolerance must be a number >= 0, got {tol}")
    same_target = b_target is None or get_target(b_target) == get_target(a_target)
    b_target = a_target if b_target is None else b_target
    b_flags = (tuple(a_flags) if same_target else ()) if b_flags is None else tuple(b_flags)
    for target in (a_target, b_target):
        get_target(target)
    for pipeline in (a_pipeline, b_pipeline):
        check_pipeline(pipeline)
    model_a, folder_a = open_apart(a, parameters=parameters, weights_dtype=weights_dtype)
    same = b is None or (isinstance(b, str) and isinstance(a, str) and b == a)
    model_b, folder_b = (model_a, None) if same else open_apart(b, parameters=parameters, weights_dtype=weights_dtype)
    sides = []
    for label, source, model, pipeline, target, flags, inject in (
        ("A", a, model_a, a_pipeline, a_target, a_flags, False),
        ("B", b, model_b, b_pipeline, b_target, b_flags, inject_b),
    ):
        side, used = exposed_run(
            source,
            pipeline=pipeline,
            target=target,
            inject=inject,
            flags=flags,
            inputs=inputs,
            ops=ops,
            constants=constants,
            label=label,
            model=model,
            outputs_only=outputs_only,
        )
        inputs = used  # B runs on exactly the inputs A ran on
        sides.append(side)
        if progress:
            progress(f"{label}: {side}")
    side_a, side_b = sides
    b_label = str(side_b)
    if fusion and side_a.dispatches and side_b.dispatches and side_b.dispatches <= side_a.dispatches:
        b_label += "; no more dispatches than A: IREE fused nothing here, the comparison shows no fusion's effect"
    report = compare(side_a.tensors, side_b.tensors, tol=tol, a_label=str(side_a), b_label=b_label)
    del folder_a, folder_b  # the parameter files, once both builds ran
    if not report.ops:
        raise OpscopeError(
            f"parity: no exposed op of A pairs with one of B by name ({len(side_a.tensors)} in A, "
            f"{len(side_b.tensors)} in B): are they the same model?"
        )
    return report


def check_pipeline(text: str) -> None:
    """Refuse, in one line and before any model is opened, a pipeline naming an unknown pass."""
    if not text.strip():
        return
    with new_context():
        pm = passmanager.PassManager("builtin.module")
        for element in parse_pipeline(text).elements:
            add_to_pass_manager(pm, element)


def torch_module_outputs(
    model, kwargs: Mapping[str, Any] | None = None, args: Sequence[Any] = ()
) -> dict[str, np.ndarray]:
    """{module path: its output} of one eager forward of a torch `model` on `args`/`kwargs`,
    read by forward hooks on every named submodule (the first tensor of what it returns; a
    module called twice keeps its last call's), as float arrays on the host."""
    import torch  # lazy: an optional extra (`opscope[torch]`), and seconds to import

    seen: dict[str, np.ndarray] = {}

    def first_tensor(out):
        if isinstance(out, torch.Tensor):
            return out
        values = out.values() if isinstance(out, Mapping) else out if isinstance(out, (tuple, list)) else ()
        for v in values:
            found = first_tensor(v)
            if found is not None:
                return found
        return None

    def hook(name):
        def record(module, inputs, output):
            t = first_tensor(output)
            if t is not None:
                seen[name] = t.detach().cpu().numpy()

        return record

    handles = [m.register_forward_hook(hook(name)) for name, m in model.named_modules() if name]
    try:
        with torch.no_grad():
            model(*args, **dict(kwargs or {}))
    finally:
        for h in handles:
            h.remove()
    return seen
