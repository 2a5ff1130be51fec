"""opscope: which specialized kernels does a model deserve, and what would they save?

The Python API (the `opscope` command is a thin layer over it)::

    import opscope

    run = opscope.profile("digits")        # inject, compile, run 4 steps, record, mine
    frame = opscope.read_sketches(run)      # the tidy table: a polars DataFrame
    report = opscope.mine(frame)            # signals, ranked findings, cross-step, opportunities
    report.ranked                           # ... each a polars DataFrame
    print(opscope.render(report))           # or "markdown", "json"

For IR users::

    module = opscope.load_model("model.onnx")            # any source, as canonical linalg
    module, manifest = opscope.inject(module, target="llvm-cpu")
    outputs = opscope.load(opscope.compile(module, "llvm-cpu")).invoke("main", x, w)
    rows = list(manifest.rows(outputs))                  # (site, role, stat, idx, value)

Everything here is imported on first use, so `import opscope` stays light; the stages
behind it (`opscope.ir`, `.run`, `.drive`, `.record`, `.mining`, `.analysis`, ...) are
described in docs/layout.md, this API in docs/api.md.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"  # the one place the version is spelled (pyproject.toml reads it)

from opscope.errors import OpscopeError  # noqa: E402

if TYPE_CHECKING:
    import numpy as np
    import polars as pl
    from iree.compiler import ir

    from opscope.act.kernels import KernelReport
    from opscope.act.op_compare import ParityReport
    from opscope.act.specialize import KernelPlan
    from opscope.act.timing import TimingReport
    from opscope.act.whatif import WhatIfReport
    from opscope.analysis.cones import ConeReport
    from opscope.analysis.cost import ModuleCost
    from opscope.analysis.dispatch import DispatchReport
    from opscope.analysis.motifs import MotifReport
    from opscope.analysis.shapes import ShapesReport
    from opscope.drive.live_run import LiveRun
    from opscope.drive.profile import ProfileResult
    from opscope.drive.sequence import SequenceResult
    from opscope.drive.sweep import SweepResult
    from opscope.explorer.export import GraphExport
    from opscope.ir.manifest import Manifest
    from opscope.ir.sites import SiteList
    from opscope.ir.stat_config import StatConfig
    from opscope.mining.report import MineReport
    from opscope.mining.run_view import RunView
    from opscope.online.report import LiveReport
    from opscope.probe.report import ActionsReport, LayersReport, ProbeReport, QuantReport
    from opscope.run.compile import CompiledModule
    from opscope.run.runtime import LoadedModule
    from opscope.run.targets import TargetTable

__all__ = [
    "render",
    "FORMATS",
    "profile",
    "read_sketches",
    "mine",
    "report",
    "load_model",
    "inject",
    "compile",
    "load",
    "parity",
    "whatif",
    "probe_tensors",
    "plan_layers",
    "layer_actions",
    "quant_sweep",
    "dump_tensors",
    "timing",
    "graph",
    "view",
    "kernel_plan",
    "write_calibration",
    "sweep",
    "seq",
    "replay",
    "shapes",
    "ledger",
    "motifs",
    "flow",
    "ridge",
    "live",
    "merge_live",
    "demo",
    "save_model",
    "sites",
    "targets",
    "LiveRun",
    "ProbeReport",
    "LayersReport",
    "ActionsReport",
    "QuantReport",
    "TimingReport",
    "GraphExport",
    "KernelPlan",
    "KernelReport",
    "kernels",
    "demo_numbers",
    "ProfileResult",
    "MineReport",
    "ParityReport",
    "WhatIfReport",
    "Manifest",
    "StatConfig",
    "CompiledModule",
    "LoadedModule",
    "SiteList",
    "TargetTable",
    "RunView",
    "OpscopeError",
]

# Types a user may want to name, loaded when first asked for (PEP 562).
_LAZY = {
    "LiveRun": "opscope.drive.live_run",
    "ProfileResult": "opscope.drive.profile",
    "MineReport": "opscope.mining.report",
    "Manifest": "opscope.ir.manifest",
    "StatConfig": "opscope.ir.stat_config",
    "CompiledModule": "opscope.run.compile",
    "LoadedModule": "opscope.run.runtime",
    "ParityReport": "opscope.act.op_compare",
    "WhatIfReport": "opscope.act.whatif",
    "ProbeReport": "opscope.probe.report",
    "LayersReport": "opscope.probe.report",
    "ActionsReport": "opscope.probe.report",
    "QuantReport": "opscope.probe.report",
    "TimingReport": "opscope.act.timing",
    "GraphExport": "opscope.explorer.export",
    "KernelPlan": "opscope.act.specialize",
    "KernelReport": "opscope.act.kernels",
    "RunView": "opscope.mining.run_view",
    "SiteList": "opscope.ir.sites",
    "TargetTable": "opscope.run.targets",
}
# The vocabularies and defaults the CLI offers in its options and help (the stages own them).
_CONSTANTS = {
    "ZOO": "opscope.models.zoo",
    "DEMO_KINDS": "opscope.models.demo",
    "FAKEQUANT": "opscope.act.whatif",
    "KEEP": "opscope.act.whatif",
    "FLOOR": "opscope.act.whatif",
    "TASKS": "opscope.act.quality",
    "DEFAULT_TOKENS": "opscope.act.evalset",
    "DEFAULT_TOL": "opscope.act.op_compare",
    "FUSION_TOL": "opscope.act.parity",
    "KINDS": "opscope.act.candidates",
    "MAX_ERROR": "opscope.act.specialize",
    "MIN_SPEEDUP": "opscope.act.specialize",
    "AUTO_BYTES": "opscope.ir.parameter_files",
    "WEIGHT_DTYPES": "opscope.ir.parameter_files",
}


def __getattr__(name: str) -> Any:
    """The types of `_LAZY` and the constants of `_CONSTANTS`, imported when first named."""
    if name in _LAZY or name in _CONSTANTS:
        import importlib

        return getattr(importlib.import_module(_LAZY.get(name) or _CONSTANTS[name]), name)
    raise AttributeError(f"module 'opscope' has no attribute {name!r}")


def __dir__() -> list[str]:
    """The module's names and the lazy types, so `dir(opscope)` and `help(opscope)` show them."""
    return sorted(set(globals()) | set(__all__))


FORMATS = ("text", "markdown", "json", "html")

# Each report type and its renderers: format -> "module:function", called as function(report, **options).
# A format not named: json is `to_dict(**options)` written as JSON, markdown the text in a code block,
# html the text in a self-contained page.
_RENDERERS: dict[str, dict[str, str]] = {
    "MineReport": {
        "text": "opscope.mining.render:mine_text",
        "markdown": "opscope.mining.render:mine_markdown",
        "json": "opscope.mining.render:mine_json",
    },
    "ParityReport": {
        "text": "opscope.act.op_compare:parity_text",
        "markdown": "opscope.act.op_compare:parity_markdown",
        "html": "opscope.act.parity_html:parity_html",
    },
    "WhatIfReport": {"text": "opscope.act.render_whatif:whatif_text", "html": "opscope.act.whatif_html:whatif_html"},
    "KernelPlan": {"text": "opscope.act.render_plan:plan_text", "html": "opscope.act.plan_html:plan_html"},
    "KernelReport": {"text": "opscope.act.kernels:kernels_text"},
    "TimingReport": {"text": "opscope.act.timing:timing_text", "html": "opscope.act.timing_html:timing_html"},
    "GraphExport": {"text": "opscope.explorer.export:graph_text"},
    "ProbeReport": {"text": "opscope.probe.render:probe_text", "html": "opscope.probe.probe_html:probe_html"},
    "LayersReport": {"text": "opscope.probe.render:layers_text", "html": "opscope.probe.layers_html:layers_html"},
    "ActionsReport": {"text": "opscope.probe.render:actions_text"},
    "QuantReport": {"text": "opscope.probe.render:quant_text"},
    "LiveRun": {"text": "opscope.drive.live_run:live_text", "html": "opscope.drive.live_html:live_run_html"},
    "LiveReport": {
        "text": "opscope.online.report:live_report_text",
        "html": "opscope.online.report_html:live_report_html",
    },
    "ModuleCost": {"text": "opscope.analysis.ledger:ledger_text", "json": "opscope.analysis.ledger:ledger_json"},
    "DispatchReport": {"text": "opscope.analysis.dispatch:dispatch_text"},
    "ShapeHistogram": {"text": "opscope.analysis.shapes:shapes_text"},
    "ShapesReport": {"text": "opscope.analysis.shapes:shapes_report_text"},
    "MotifReport": {"text": "opscope.analysis.motifs:motifs_text"},
    "ConeReport": {"text": "opscope.analysis.cones:cones_text"},
    "ProfileResult": {"text": "opscope.drive.render:profile_text"},
    "SweepResult": {"text": "opscope.drive.render:sweep_text"},
    "SequenceResult": {"text": "opscope.drive.render:sequence_text"},
    "SiteList": {"text": "opscope.drive.render:site_list_text"},
    "TargetTable": {"text": "opscope.drive.render:target_table_text"},
    "RunView": {"text": "opscope.mining.render:run_view_text", "html": "opscope.mining.render_html:run_html"},
    "DynamicsReport": {
        "text": "opscope.mining.render:dynamics_text",
        "json": "opscope.mining.render:dynamics_json",
    },
}


def render(report: Any, fmt: str = "text", **options: Any) -> str:
    """`report` (any report an API function returns) as `fmt`: "text" (aligned for a terminal),
    "markdown", "json" or "html" (one self-contained page: the reports with pictures of their own
    draw them, the others are their text in a page). `options` go to the renderer: `top` (rows shown) for the static
    analyses and parity, `ridge` for the ledgers, `every` for layers and whatif, `all_ops` for
    parity, `width` for flow cones, `heads` for dynamics, `brief` for a profile; a renderer ignores the options it does not take, so one call
    serves every format. The one way every report is written, by the API and the CLI."""
    import importlib
    import json

    kind = type(report).__name__
    if kind not in _RENDERERS:
        raise OpscopeError(f"render: {kind} is not a report (reports: {', '.join(sorted(_RENDERERS))})")
    if fmt not in FORMATS:
        raise OpscopeError(f"render: unknown format {fmt!r} (choose one of: {', '.join(FORMATS)})")
    named = _RENDERERS[kind].get(fmt)
    if named is not None:
        module, function = named.split(":")
        fn = getattr(importlib.import_module(module), function)
        return fn(report, **_taken(fn, options))
    if fmt == "json":
        return json.dumps(report.to_dict(**_taken(report.to_dict, options)), indent=2, ensure_ascii=False)
    if fmt == "html":
        from opscope.html.page import page, preformatted

        return page(f"opscope: {kind}", preformatted(render(report, "text", **options)))
    return "```\n" + render(report, "text", **options).rstrip("\n") + "\n```\n"


def _taken(fn: Callable[..., Any], options: dict[str, Any]) -> dict[str, Any]:
    """The `options` `fn` takes: one call with every option serves each format."""
    import inspect

    names = inspect.signature(fn).parameters
    return {k: v for k, v in options.items() if k in names}


def profile(
    source: str | bytes | Path | ir.Module | None = None,
    *,
    target: str = "llvm-cpu",
    steps: int = 4,
    out: str | Path | None = None,
    config: StatConfig | None = None,
    inputs: str | Path | Iterable[str | Path] | Iterable[list[np.ndarray]] | None = None,
    text: str | Path | Iterable[str] | None = None,
    tokenizer: str | Path | None = None,
    name: str | None = None,
    progress: Callable[[str], None] | None = None,
    taps: str | Iterable[str] | None = None,
    parameters: bool | None = None,
    weights_dtype: str | None = None,
    verify: bool | None = None,
    sites: str = "",
    dask: str | None = None,
    shards: int | None = None,
    resume: bool = False,
) -> ProfileResult:
    """Profile a model: tap every matmul and convolution, every attention (softmax or fused),
    top-k routing and residual add, compile for `target`, run `steps` calls, record
    every sketch, mine them, and write a run folder (`out`, default `opscope-runs/<time>`).

    `source`: None (the built-in model and its realistic input mix), a zoo name
    (`"digits"`, `"minilm"`, ...: real inputs included), a model file (.mlir/.mlirbc,
    .onnx, .pt2, .jaxexport), MLIR text or bytecode, or an `ir.Module`.

    Inputs: a zoo model brings its own; others get inputs generated from their signature
    (token ids below the vocabulary read from the embedding, masks of ones, a fresh
    N(0, 1) float batch as argument 0 per step, fixed weights for other float arguments).
    `inputs` gives them instead: input files (one `.npz`/`.safetensors` with arrays `arg0`,
    `arg1`, ..., or one `.npy` per argument; a leading axis of S holds S steps) or an
    iterable of per-step argument lists; `text` (a file, one sentence per line, or a list
    of sentences) is tokenized by `tokenizer` (a local Hugging Face tokenizer folder) or
    the zoo model's own. Given inputs are checked against the signature before compiling.
    `name` is what reports call the model; `progress` receives a line naming the model before
    the compile (pass `print` to see it). `taps` picks the families tapped: "all" (the
    default) or some of "matmul", "attention", "routing", "residual" (a comma-separated
    string or a list); `sites` a regex on site names (every kind: only those tapped, "" all). `parameters` moves the model's weights into an IREE parameter file in the
    run folder (`weights.irpa`; a torch model's written straight from its tensors, other
    routes through the `externalize-weights` pass) before anything is compiled: the builds
    then carry only the weights' names and share the one mapped file. None (the default):
    so for a model of 128 MiB or more (`opscope.ir.parameter_files.AUTO_BYTES`).
    `weights_dtype` ("bf16" or "f16"): the model's float32 weights are stored so in that file
    (any route), half their bytes on disk and in memory, and read widened to f32: the model
    computes as it was exported, on weights rounded to that type. `verify`: the first step
    checked against the model run by its own framework: PyTorch for a `.pt2` file or a zoo model
    (the recorded sketches of a sample of every family of sites against the tensors PyTorch
    computes, the sites' FLOPs against `FlopCounterMode`, the outputs), onnxruntime or jax for
    `.onnx`/`.jaxexport` (the outputs); the verdict is the report's first line and
    `verify.json`. None (the default): on for models whose weights stay in the module.
    `dask` (`"local"`, `"local:N"`, `"tcp://HOST:PORT"`; the `dask` extra): the steps are split in
    `shards` (default 8) contiguous ranges, each a job on that pool, their rows merged in step order:
    the run folder a serial profile writes, its table byte for byte (docs/jobs.md); `resume` continues
    such a run killed mid-way in `out` (its recorded steps and finished shards kept).

    Returns a `ProfileResult`: `.sketches`, `.site_costs`, `.manifest_path`, `.report_path`
    (the run folder's files), `.report` (a `MineReport`), `.manifest`, `.parity`,
    `.compile_seconds`, `.run_seconds`, `.model` (the loaded model, callable again),
    `.verification` (`opscope.verify.check.Verification`, or None when not verified).
    """
    from opscope.drive.profile import profile as run_profile
    from opscope.ir.stat_config import StatConfig

    return run_profile(
        source,
        out=out,
        target=target,
        steps=steps,
        config=config or StatConfig(),
        inputs=inputs,
        progress=progress,
        name=name,
        text=text,
        tokenizer=tokenizer,
        taps=taps,
        parameters=parameters,
        weights_dtype=weights_dtype,
        verify=verify,
        sites=sites,
        dask=dask,
        shards=shards,
        resume=resume,
    )


def read_sketches(source: str | Path | Iterable[str | Path] | ProfileResult) -> pl.DataFrame:
    """The tidy sketch table as one typed polars DataFrame (13 columns,
    `run_id,step,backend,dist,M,K,N,numel,site,role,stat,idx,value`).

    `source`: a run (`profile`'s result), a CSV or Parquet file, a folder of them, a glob,
    or a list of those (shards are concatenated). Bad files are one-line `OpscopeError`s."""
    from opscope.record.tidy import read_tidy

    return read_tidy(_sketches(source))


def mine(
    source: pl.DataFrame | str | Path | Iterable[str | Path] | ProfileResult,
    *,
    costs: str | Path | Mapping[str, int] | None = None,
) -> MineReport:
    """Mine sketches for exploitable structure; returns a `MineReport` whose tables are
    polars DataFrames: `.signals` (per backend/dist/site/role, with the exploit),
    `.ranked` (the findings, best first), and with two or more steps `.cross_step`,
    `.opportunities` and `.aggregate`; `render(report, fmt)` writes it.

    `source`: a tidy DataFrame (`read_sketches`), a run, or files as `read_sketches` takes
    them. `costs` (a site → FLOPs mapping, or a `site,flops` file) weighs the temporal
    savings; for files and runs the sidecar beside them is read when `costs` is None."""
    import polars as pl

    from opscope.mining.report import GIVEN_COSTS, mine_paths
    from opscope.mining.report import mine as mine_frame
    from opscope.record.recorder import read_site_costs

    if not isinstance(source, pl.DataFrame):
        return mine_paths(_sketches(source), costs=costs)
    if isinstance(costs, (str, Path)):
        return mine_frame(source, read_site_costs(costs), costs_source=str(costs))
    if costs is None:
        return mine_frame(source)
    return mine_frame(source, dict(costs), costs_source=GIVEN_COSTS)


def report(
    run: str | Path | Iterable[str | Path] | ProfileResult, *, costs: str | Path | Mapping[str, int] | None = None
) -> RunView:
    """A recorded run (a profile's folder, tidy files, or a `ProfileResult`) read and mined with what
    its pictures need: `render(view, "html")` is one self-contained page (findings that sort and
    filter, a layer × site-kind heatmap per statistic, the dynamics, each tensor's histogram,
    per-channel max|x| and range per step), as `opscope report RUN` writes it. `costs` as `mine`'s."""
    from opscope.mining.run_view import run_view

    return run_view(_sketches(run), costs=costs)


def _sketches(source: Any) -> Any:
    """A run's sketch table (anything with a `sketches` path, like `ProfileResult`), else
    `source` itself: a file, folder, glob or list of them."""
    return getattr(source, "sketches", source)


def load_model(source: Any, *, example_args: Iterable[Any] | None = None, name: str | None = None) -> ir.Module:
    """Any model as canonical linalg (an `ir.Module` whose op locations name its layers):
    a zoo name, a file (.mlir/.mlirbc in linalg, StableHLO or torch form, .onnx, .pt2,
    .jaxexport), MLIR text or bytecode, an `ir.Module`, a `jax.export.Exported`, or a
    torch `nn.Module` / JAX callable traced on `example_args`."""
    from opscope.importers import import_source
    from opscope.ir.loading import new_context, parse_module
    from opscope.models.source import open_model

    module = source
    if isinstance(source, (str, Path)) and example_args is None:
        module = open_model(source, name=name).module
    if isinstance(module, (str, bytes)):
        module = parse_module(module, new_context(), name or "<model>")
    return import_source(module, name=name, example_args=None if example_args is None else list(example_args))


def inject(
    module: ir.Module | str | bytes,
    config: StatConfig | None = None,
    *,
    target: str | None = None,
    sites: str = "",
    keep: Callable[[Any], bool] | None = None,
    taps: str | Iterable[str] | None = None,
    every_add: bool = False,
    **lowering: Any,
) -> tuple[ir.Module, Manifest]:
    """Tap every matmul, attention, routing and residual site of `module` (edited in place;
    text and bytecode are parsed first):
    `opscope.stat` ops say what is recorded, `lower-opscope` computes them as extra
    function results after the original ones. Returns (module, manifest); the manifest
    says which result holds which sketch (`manifest.rows(outputs)` decodes a call).

    `config` picks the sketches (default `StatConfig()`, the reference's 13; `StatConfig.lean()`
    a cheaper set); `taps` the families ("all", default, or some of "matmul", "attention",
    "routing", "residual"); `every_add` taps every add of two same-typed tensors as a
    residual site (the reference's rule) instead of the skip-connection rule; `sites` is a
    regex on site names (every kind), `keep(site)` a predicate on matmul and convolution
    `Site`s;
    `target` picks that target's fastest kernel layout (default: one every target runs);
    `lowering` passes lower-opscope's options (`pack`, `outline`, `batch`,
    `hoist_constants`, `hist_counts`, `row_lanes`), and `weights_once=True` moves the sketches
    of constant tensors (weights) into `@<function>$weights`, to call once
    (`manifest.weights_function`; `opscope.run.instrumented.tapped_outputs` joins the two)."""
    from opscope.ir.loading import new_context, parse_module
    from opscope.ir.stat_config import StatConfig
    from opscope.pipeline.taps import inject_stats

    if isinstance(module, (str, bytes)):
        module = parse_module(module, new_context())
    if target is not None:
        from opscope.run.targets import get_target

        lowering = {**get_target(target).layout, **lowering}
    return inject_stats(module, config or StatConfig(), taps, keep=keep, sites=sites, every_add=every_add, **lowering)


def demo(kind: str, *, layers: int = 2, d_model: int = 64, seq: int = 16) -> str:
    """A demo model as MLIR text (linalg on tensors): "mlp", "transformer" or "moe", `layers` deep,
    `d_model` wide, on `seq` tokens."""
    from opscope.models.demo import demo_module

    return demo_module(kind, layers, d_model, seq)


def save_model(module: ir.Module, path: str | Path) -> Path:
    """Write `module` to `path`: `.mlirbc` as bytecode, anything else as text with its locations
    (the site names; MLIR's default printing drops them)."""
    from opscope.importers.mlir_file import write_mlir

    write_mlir(module, Path(path))
    return Path(path)


def sites(source: Any) -> SiteList:
    """The matmul and convolution sites of a model (`load_model`'s sources or an `ir.Module`): a list
    (`SiteList`, which `render` writes as a table) of `opscope.ir.sites.Site`s with `.name`, `.kind`,
    `.batch`, `.m`, `.k`, `.n`, `.flops`, `.dynamic`."""
    from opscope.ir.sites import SiteList, find_sites

    if hasattr(source, "operation"):
        return SiteList(find_sites(source))
    return SiteList(find_sites(load_model(source)), source=str(source))


def targets() -> TargetTable:
    """Every compile target (`opscope.run.targets.Target`: name, driver, note, ridge) with why it
    cannot run here (None: it runs here): a list of pairs (`TargetTable`, which `render` writes)."""
    from opscope.run.targets import TARGETS, TargetTable, driver_available

    return TargetTable((t, driver_available(t.driver)) for t in TARGETS.values())


def compile(module: ir.Module | str | bytes, target: str = "llvm-cpu", **options: Any) -> CompiledModule:
    """Compile `module` with IREE for `target` (`llvm-cpu`, `vulkan-spirv`, `cuda`,
    `metal-spirv`, `rocm`: `opscope targets`), in-process and cached by IR hash + flags.
    `options`: `extra_flags` (iree-compile flags), `statistics`, `use_cache`."""
    from opscope.run.compile import compile_module

    return compile_module(module, target, **options)


def load(compiled: CompiledModule) -> LoadedModule:
    """Load a compiled module on its target's device; `.invoke(function, *arrays)` calls it
    and returns every result as a numpy array."""
    from opscope.run.runtime import load as load_compiled

    return load_compiled(compiled)


def sweep(
    out: str | Path = "opscope.csv",
    *,
    target: str = "llvm-cpu",
    shapes: Iterable[tuple[int, int, int]] | None = None,
    seeds: Iterable[int] | None = None,
    resume: bool = False,
    force: bool = False,
    parquet: bool = False,
    config: StatConfig | None = None,
    dask: str | None = None,
    progress: Callable[[str], None] | None = None,
) -> SweepResult:
    """The reference's sweep: one matmul per (M, K, N) of `shapes` (default its three) × the seven
    input distributions × `seeds` (default 1, 2, 3), each a run recorded into the tidy CSV `out`;
    `resume` continues an interrupted sweep there, `force` overwrites it, `parquet` also writes
    `out` as Parquet beside it; `config` picks the sketches (default `StatConfig()`; a resumed sweep
    keeps the one it was recorded with, `<out>.config.json`). `dask`: the runs as jobs on "local:N"
    worker processes or a Dask scheduler's "tcp://HOST:PORT" (the file the same, byte for byte;
    needs the `dask` extra), `progress` told of each job's end. Returns a `SweepResult` (runs
    recorded and skipped, parity per shape)."""
    from opscope.drive.sweep import SEEDS, SHAPES
    from opscope.drive.sweep import sweep as run_sweep
    from opscope.ir.stat_config import StatConfig
    from opscope.jobs.executor import check_spec

    if dask is not None:
        check_spec(dask)  # a bad option or a missing extra: one line before anything is written
    if not resume:
        _fresh(out, force)
    res = run_sweep(
        out,
        target,
        shapes=SHAPES if shapes is None else tuple(map(tuple, shapes)),
        seeds=SEEDS if seeds is None else tuple(seeds),
        resume=resume,
        config=config or StatConfig(),
        dask=dask,
        say=progress,
    )
    _parquet(out, parquet)
    return res


def seq(
    out: str | Path = "opscope_seq.csv",
    *,
    target: str = "llvm-cpu",
    steps: int = 16,
    force: bool = False,
    parquet: bool = False,
) -> SequenceResult:
    """The reference's `seq`: `steps` decode-like calls of one matmul (drifting activations, a fixed
    weight) recorded into the tidy CSV `out` (`force` overwrites it, `parquet` adds a Parquet copy)."""
    from opscope.drive.sequence import seq as run_seq

    _fresh(out, force)
    res = run_seq(out, target, steps=steps)
    _parquet(out, parquet)
    return res


def replay(
    out: str | Path = "opscope_replay.csv",
    *,
    target: str = "llvm-cpu",
    steps: int = 20,
    pool: int = 4,
    force: bool = False,
    parquet: bool = False,
) -> SequenceResult:
    """The reference's `replay`: `steps` calls of a layer pyramid on inputs drawn from a pool of `pool`
    (0: a slow random walk), recorded into the tidy CSV `out` (`force`, `parquet` as `seq`'s); mine
    it for the repeats (`mine(out, costs=result.site_costs)`)."""
    from opscope.drive.sequence import replay as run_replay

    _fresh(out, force)
    res = run_replay(out, target, steps=steps, pool=pool)
    _parquet(out, parquet)
    return res


def _fresh(out: str | Path, force: bool) -> None:
    from opscope.record.recorder import fresh_output

    fresh_output(out, force)


def _parquet(out: str | Path, wanted: bool) -> None:
    """With `wanted`, the tidy CSV `out` also as Parquet (zstd, the same 13 columns) beside it."""
    if wanted:
        from opscope.record.recorder import write_parquet

        write_parquet(Path(out), Path(out).with_suffix(".parquet"))


def ridge(target: str = "llvm-cpu") -> float:
    """`target`'s nominal roofline ridge, FLOP/byte (`opscope targets` says where each comes from)."""
    from opscope.run.targets import get_target

    return get_target(target).ridge


def shapes(
    source: Any = "transformer",
    *,
    target: str = "llvm-cpu",
    ridge: float | None = None,
    layers: int = 6,
    d_model: int = 64,
    seq: int = 16,
) -> ShapesReport:
    """A model's hot GEMM and attention shapes (batch, M, K, N, dtype) by FLOP share, its totals and
    the share of FLOPs in compute-bound ops at `ridge` (default: `target`'s). Static: nothing runs.
    `source`: a model as `load_model` takes it, or a demo ("mlp", "transformer", "moe", sized by
    `layers`, `d_model`, `seq`)."""
    from opscope.analysis.shapes import shapes_report

    name = source if isinstance(source, (str, Path)) else "<module>"
    return shapes_report(_static_module(source, layers, d_model, seq), str(name), _ridge_of(target, ridge))


def ledger(
    source: Any = "transformer",
    *,
    dispatches: bool = False,
    target: str = "llvm-cpu",
    layers: int = 6,
    d_model: int = 64,
    seq: int = 16,
) -> ModuleCost | DispatchReport:
    """Exact FLOPs and bytes per op (a `ModuleCost`: the bytes ledger), or with `dispatches` per
    fused dispatch as IREE forms them for `target` (a `DispatchReport`). Static: nothing runs.
    `source` as `shapes` takes it; `render(report, ridge=...)` classifies them on a roofline."""
    module = _static_module(source, layers, d_model, seq)
    if dispatches:
        from opscope.analysis.dispatch import analyze_dispatches

        return analyze_dispatches(module, target)
    from opscope.analysis.cost import analyze

    return analyze(module)


def motifs(
    source: Any = "transformer",
    *,
    min_len: int = 2,
    max_len: int = 6,
    min_count: int = 2,
    layers: int = 6,
    d_model: int = 64,
    seq: int = 16,
    dump: str | Path | None = None,
) -> MotifReport:
    """Recurring op chains of `min_len`..`max_len` ops seen at least `min_count` times (fusion
    candidates), best first. Static. `source` as `shapes` takes it, or a graph dump (`.txt`, `flow`'s
    `dump`); `dump` writes the graph it mines there."""
    from opscope.analysis.motifs import mine_motifs

    title, graph = _static_graph(source, layers, d_model, seq, dump)
    return _noted(mine_motifs(graph, min_len, max_len, min_count), title, graph, source)


def flow(
    source: Any = "transformer",
    *,
    min_depth: int = 2,
    max_depth: int = 6,
    min_count: int = 2,
    layers: int = 6,
    d_model: int = 64,
    seq: int = 16,
    dump: str | Path | None = None,
) -> ConeReport:
    """Repeated dataflow cones (input sub-DAGs of `min_depth`..`max_depth`, seen at least `min_count`
    times) with fusion hints. Static. `source` as `shapes` takes it, or a graph dump (`.txt`: the
    reference's `idx label in0 in1 …` lines, `opscope.analysis.graph_dump`), so a graph another tool
    wrote is mined alike; `dump` writes the graph it mines there (a path)."""
    from opscope.analysis.cones import mine_cones

    title, graph = _static_graph(source, layers, d_model, seq, dump)
    return _noted(mine_cones(graph, min_depth, max_depth, min_count), title, graph, source)


def _static_graph(source: Any, layers: int, d_model: int, seq: int, dump: str | Path | None):
    """(title, dataflow graph) of a model or demo, or of a dump file; written to `dump` when given."""
    from opscope.analysis.graph_dump import dump_text, is_dump, load_dump
    from opscope.ir.opgraph import build_graph

    if is_dump(source):
        title, graph = load_dump(source)
    else:
        title = str(source) if isinstance(source, (str, Path)) else "<module>"
        graph = build_graph(_static_module(source, layers, d_model, seq))
    if dump is not None:
        Path(dump).write_text(dump_text(graph, title))
    return title, graph


def _noted(report, title: str, graph, source: Any):
    """A dump's report says which graph it read (the reference prints its title and node count)."""
    from dataclasses import replace

    from opscope.analysis.graph_dump import is_dump

    if not is_dump(source):
        return report
    said = f"dump {source}: {title or 'untitled'}, {len(graph)} nodes"
    return replace(report, note=f"{said}; {report.note}" if report.note else said)


def _static_module(source: Any, layers: int, d_model: int, seq: int) -> ir.Module:
    """The module a static analysis reads: a demo by name, else any model `load_model` takes."""
    from opscope.models.demo import DEMO_KINDS, analysis_module

    if isinstance(source, str) and source in DEMO_KINDS:
        from opscope.ir.loading import parse_module

        return parse_module(analysis_module(source, layers, d_model, seq))
    return load_model(source)


def _ridge_of(target: str, given: float | None) -> float:
    return ridge(target) if given is None else given


def parity(a: Any, b: Any = None, **options: Any) -> ParityReport:
    """Compare two builds of a model op by op: every intermediate tensor exposed
    (`expose-all-ops`), both run on the same inputs, paired by site name. `a`, `b` (default
    `a`): models as `profile` takes them; `options`: `a_pipeline`/`b_pipeline` (opscope-opt
    pipelines applied first: a rewrite), `a_target`/`b_target`, `a_flags`/`b_flags`
    (iree-compile flags), `inject_b` (B gets the stat taps), `inputs`, `tol` (an op is within
    it when max|a−b| ≤ tol·max|a|), `ops` (a regex), `constants`, `progress`, `parameters` (both
    builds map the weights from one parameter file in a temporary folder; None: so for a model of
    128 MiB or more), `weights_dtype` (as `profile`'s), `outputs_only` (nothing exposed: the
    outputs compared, each build's dispatches counted), `fusion` (A fused against B unfused, every
    op its own dispatch: outputs only, `tol` default FUSION_TOL = 1e-4). Returns a
    `ParityReport`: `.ops` (one `OpDiff` per op, in program order), `.exact`, `.worst`,
    `.first_beyond(tol)`; `render(report, fmt, all_ops=...)` writes it."""
    from opscope.act.parity import op_parity

    return op_parity(a, b, **options)


def whatif(
    source: str | bytes | Path | ir.Module,
    *,
    skip: Iterable[str | Iterable[str]] = (),
    skip_lowest: int | None = None,
    run: str | Path | None = None,
    fakequant: Iterable[str] = (),
    pipelines: Iterable[str] = (),
    sweep: bool = False,
    sweep_layers: str | None = None,
    blocks: str = "*",
    keep: float = 0.95,
    floor: float = 0.5,
    verify: bool = True,
    target: str = "llvm-cpu",
    tokens: int = 2000,
    steps: int | None = None,
    task: str | None = None,
    inputs: Any = None,
    text: str | Path | Iterable[str] | None = None,
    tokenizer: str | Path | None = None,
    progress: Callable[[str], None] | None = None,
    parameters: bool | None = None,
    weights_dtype: str | None = None,
    dask: str | None = None,
    shards_dir: str | Path | None = None,
    resume: bool = False,
) -> WhatIfReport:
    """Measure rewrites end to end on real data: the original and each variant compiled and run on
    the same inputs, compared by what the model does (top-1 agreement and perplexity for a causal
    LM, embedding cosine and neighbour ranking for an encoder, accuracy for a classifier, output
    error otherwise), with the FLOPs and weight bytes each build no longer needs.

    Variants: `skip` (each item a list of residual-block names or ordinals, or one comma-separated
    string, skipped together), `skip_lowest` (the K blocks of least influence in the recorded `run`,
    recorded with the residual taps), `fakequant` (schemes: w8a8, w8a16, w4a16, w4g32a16, a8),
    `pipelines` (opscope-opt pipelines). Or one of two sweeps: `sweep=True`, each block of `blocks`
    off in turn and the greedy skip curve down to `floor` (the answer at `keep` of the headline,
    built as a real skip when `verify`), the variants measured beside it; `sweep_layers=SCHEME`,
    that fake-quant scheme on one layer at a time and on the whole model.
    Data: the zoo model's own held-out data (`tokens` predicted tokens for a causal LM), else
    `inputs` / `text` + `tokenizer` / generated; `task` says what the first result is. `parameters`:
    every build maps the weights from one parameter file in a temporary folder instead of carrying
    them (None: so for a model of 128 MiB or more), float32 ones stored as `weights_dtype` (bf16,
    f16). `dask` (with `sweep` or `sweep_layers`): each evaluation or build a job on "local:N" worker
    processes or a Dask scheduler's "tcp://HOST:PORT" (the same report; needs the `dask` extra);
    `shards_dir`: each job's result also a JSON shard there, removed once the report is complete;
    `resume`: the shards an interrupted run left there are read, not run again. Bad requests are
    one-line errors before the model is read.
    Returns a `WhatIfReport` (`.to_dict()`; `render(report)`)."""
    from opscope.act.evalset import eval_set
    from opscope.act.whatif import check_request, variants_of
    from opscope.act.whatif_jobs import check_jobs, measure_request

    variants = variants_of(skip, skip_lowest, None if run is None else str(run), fakequant, pipelines)
    check_request(variants, sweep, sweep_layers, keep, floor)
    check_jobs(sweep, sweep_layers, dask, shards_dir, resume)
    evalset = eval_set(
        source,
        task=task,
        tokens=tokens,
        steps=steps,
        inputs=inputs,
        text=text,
        tokenizer=tokenizer,
        progress=progress,
        parameters=parameters,
        weights_dtype=weights_dtype,
    )
    return measure_request(
        evalset,
        variants,
        sweep=sweep,
        sweep_layers_scheme=sweep_layers,
        blocks=blocks,
        keep=keep,
        floor=floor,
        verify=verify,
        target=target,
        progress=progress,
        dask=dask,
        shards_dir=shards_dir,
        resume=resume,
    )


def probe_tensors(
    source: str | Path | ir.Module | None = None, *, sites: str = "", progress: Callable[[str], None] | None = None
) -> ProbeReport:
    """Host probes of every weight: stable and effective rank, int4 error per tensor and per channel,
    2:4 and ternary error, cardinality, fewest bits under 2 % error, outlier columns and a verdict.
    `source`: a model (zoo name, model file, MLIR; its matmul weights by site name, `sites` a regex)
    or tensors (a .tensor/.npy/.safetensors file or a directory of them); None: the built-in
    transformer with the weights `profile` feeds it."""
    from opscope.probe.report import probe_weights
    from opscope.probe.sources import open_weights

    return probe_weights(open_weights(source, sites, progress))


def plan_layers(
    source: str | Path | ir.Module | None = None,
    *,
    budget: float = 0.4,
    allocator: str = "dado",
    error: str = "sum",
    sites: str = "",
    measure: bool = False,
    objective: str = "weights",
    target: str = "llvm-cpu",
    tokens: int = 2000,
    steps: int | None = None,
    task: str | None = None,
    progress: Callable[[str], None] | None = None,
    parameters: bool | None = None,
    dask: str | None = None,
    shards_dir: str | Path | None = None,
    resume: bool = False,
) -> LayersReport:
    """One storage option per layer (dense, int8/int4 per channel, group-wise int4, ternary, 2:4, low
    rank, Monarch, Tucker, tensor train) within `budget` of the dense bytes, chosen by `allocator`
    (greedy or dado) to minimize `error`: sum (Σ rel_err, the reference's), squares (Σ rel_err²) or
    energy (Σ ‖W − Ŵ‖²_F, a layer counted by its size). `measure=True` builds the plan into the
    model, with greedy's plan and uniform int8/int4 (and the plan at their bytes), and measures each
    end to end on the model's real data (`whatif`'s metrics). `objective="measured"` (implies
    `measure`) also builds the plans for the other two errors and picks, among every plan within the budget,
    the one that keeps most of the headline metric (`report.picked`). `parameters` (with `measure`):
    the model's weights are mapped from one parameter file by every build, each plan's rewritten
    weights inside its module (None: so for a model of 128 MiB or more). `dask` (with `measure`):
    local, local:N or tcp://HOST:PORT, each plan's build a job on those workers (`opscope.jobs`),
    the serial report but for its `seconds`; `shards_dir` keeps each build's result there as it comes
    back, and `resume` reads those of a killed run instead of building them again. Returns a `LayersReport`."""
    from opscope.probe.report import check_plan_request
    from opscope.probe.report import plan_layers as plan
    from opscope.probe.sources import module_weights, open_weights

    measure = check_plan_request(source, budget, allocator, error, objective, measure)
    if dask is not None:
        from opscope.jobs.executor import check_spec

        if not measure:
            raise OpscopeError("--dask spreads --measure's builds over workers: add --measure, or drop --dask")
        check_spec(dask)  # a bad option or a missing extra: one line before any weight is read
    from opscope.jobs.store import check_resume

    check_resume(dask, shards_dir, resume)
    if shards_dir is not None:
        from opscope.act.plan import layers_store

        layers_store(shards_dir, resume)  # a folder of other files, or old shards without resume: one line now
    if not measure:
        return plan(open_weights(source, sites, progress), budget, allocator, error=error)
    from opscope.act.evalset import eval_set
    from opscope.act.plan import measure_plans

    # each plan's rewritten weights go into its module as constants (`replace_weights`); the others
    # stay in the parameter file every build maps, when the model has one
    evalset = eval_set(source, task=task, tokens=tokens, steps=steps, progress=progress, parameters=parameters)
    weights = module_weights(evalset.name, evalset.module, sites, evalset.batches[0])
    return measure_plans(
        evalset,
        weights,
        plan(weights, budget, allocator, error=error),
        target=target,
        objective=objective,
        progress=progress,
        dask=dask,
        shards_dir=shards_dir,
        resume=resume,
    )


def layer_actions(
    source: str | Path | ir.Module | None = None,
    *,
    budget: float = 0.02,
    run: str | Path | None = None,
    sites: str = "",
    progress: Callable[[str], None] | None = None,
) -> ActionsReport:
    """Per layer, the cheapest storage option whose weight error is within `budget`, as an action
    (keep, quantize, replace); with `run` (recorded with the residual taps), the residual blocks
    whose output moves the stream by under 2 % (skip candidates)."""
    from opscope.mining.report import block_gaps
    from opscope.probe.report import plan_actions
    from opscope.probe.sources import open_weights

    if not 0 < budget < 1:
        raise OpscopeError(f"budget is a relative weight error in (0, 1), got {budget}")
    gaps = None if run is None else block_gaps(str(run))
    return plan_actions(open_weights(source, sites, progress), budget, gaps)


def quant_sweep(
    source: str | Path | ir.Module | None = None,
    *,
    int4_budget: float = 0.1,
    sites: str = "",
    progress: Callable[[str], None] | None = None,
) -> QuantReport:
    """int8 per tensor and per channel, int4 and int3 per channel, outliers and best bits of every
    weight; by depth and by projection kind, with a mixed int4/int8 recipe."""
    from opscope.probe.report import quant_sweep as sweep
    from opscope.probe.sources import open_weights

    if not 0 < int4_budget < 1:
        raise OpscopeError(f"int4_budget is a relative weight error in (0, 1), got {int4_budget}")
    return sweep(open_weights(source, sites, progress), int4_budget)


def dump_tensors(
    source: str | Path | ir.Module,
    out: str | Path,
    *,
    weights: bool = True,
    activations: bool = False,
    sites: str = "",
    role: str = "lhs",
    steps: int = 1,
    max_bytes: int = 256 * 2**20,
    fmt: str = "npy",
    target: str = "llvm-cpu",
    inputs: Any = None,
    progress: Callable[[str], None] | None = None,
) -> list[Path]:
    """Write a model's matmul weights ([out, K]) and, with `activations=True`, the whole tensors its
    sites read (`role` lhs/rhs/out) over `steps` calls ([tokens, features]) to `out`, one file per
    tensor in `fmt` (npy, tensor, safetensors); one call's tensors over `max_bytes` are refused
    before anything compiles. Returns the files written."""
    from opscope.probe.dump import dump

    return dump(
        source,
        out,
        weights=weights,
        activations=activations,
        sites=sites,
        role=role,
        steps=steps,
        max_bytes=max_bytes,
        fmt=fmt,
        target=target,
        inputs=inputs,
        progress=progress,
    )


def timing(
    source: str | Path | ir.Module | None = None,
    *,
    target: str = "llvm-cpu",
    repetitions: int = 5,
    inputs: Any = None,
    progress: Callable[[str], None] | None = None,
    trace: str | Path | None = None,
) -> TimingReport:
    """Every dispatch of a model timed by IREE's own dispatch benchmarks, joined with its static FLOPs
    and bytes into a measured roofline, next to the whole call's median time on the model's inputs
    (its own, `inputs`, or generated). `source` None: the built-in transformer. `trace`: a file the
    dispatches are also written to as Chrome trace-event JSON (Perfetto, chrome://tracing: one event
    per timed dispatch with its measured time, FLOPs and bytes; a counter track of achieved GFLOP/s;
    `opscope.act.timeline`). Returns a `TimingReport`."""
    from opscope.act.timeline import trace_path, write_trace
    from opscope.act.timing import time_source

    path = None if trace is None else trace_path(trace)  # a bad path is refused before anything is timed
    report = time_source(source, target=target, repetitions=repetitions, inputs=inputs, progress=progress)
    if path is not None:
        write_trace(report, path)
        if progress is not None:
            progress(f"wrote {path}: {len(report.dispatches) - len(report.untimed)} dispatches for Perfetto")
    return report


def graph(
    source: str | Path | ir.Module | ProfileResult | None,
    out: str | Path,
    *,
    model: str | Path | ir.Module | None = None,
    progress: Callable[[str], None] | None = None,
) -> GraphExport:
    """The model's linalg module as Model Explorer's graph JSON (`out/graph.json`: every op of every
    function a node, namespaced by module path so layers fold, SSA uses as edges, tensor shapes on
    the outputs, the tapped sites marked), and for a profile run (its folder or `ProfileResult`; the
    model its run.json names, or `model`) one node-data file per statistic (`out/node_data/`:
    density, zero channels, outliers, kurtosis per role, attention entropy, block influence; keyed by
    the tapped ops' node ids, coloured on a log scale where the values span decades). `source` as
    `load_model` takes it otherwise. Returns a `GraphExport`; `opscope.view(out)` serves it."""
    from opscope.explorer.export import export_graph

    return export_graph(source, out, model=model, progress=progress)


def view(
    source: str | Path | ProfileResult | None,
    *,
    out: str | Path | None = None,
    host: str = "127.0.0.1",
    port: int = 8080,
    browser: bool = True,
    progress: Callable[[str], None] | None = None,
) -> None:
    """Start Model Explorer (the optional extra: `pip install 'opscope[viewer]'`) on `host` with the
    graph and node data of `source` loaded (a folder `graph` wrote, or what `graph` takes, written to
    `out` or a temporary folder), and serve until Ctrl+C; `browser=False` only prints the address.
    `port` 8080 (Model Explorer's default) moves on to the next free one up to 8099."""
    from opscope.explorer.viewer import view as serve

    serve(source, out=out, host=host, port=port, browser=browser, progress=progress)


def kernel_plan(
    run: str | Path,
    model: str | Path | ir.Module | None = None,
    *,
    target: str | None = None,
    apply: bool = False,
    out: str | Path | None = None,
    rounds: int = 5,
    min_speedup: float = 1.05,
    max_error: float | None = None,
    kinds: Iterable[str] = ("skip-zero-channels", "quantize-weight", "factor-weight", "sparse-weight", "memoize"),
    progress: Callable[[str], None] | None = None,
    parameters: bool | None = None,
    quality: str | float | None = None,
    dask: str | None = None,
    resume: bool = False,
) -> KernelPlan:
    """A profile run's findings as guarded IREE rewrites of its model: per site the candidate, its
    guard's stability over the recorded steps, the estimated and the measured speedup of the site
    outlined at its real shapes, parity and the decision (exact rewrites bit-identical, lossy ones
    within `max_error` of the site's output, both `min_speedup` faster); `apply` writes every
    accepted rewrite to `out` and measures the whole model. `model` defaults to the one the run's
    run.json names; `kinds` picks the candidates (skip-zero-channels, quantize-weight, factor-weight,
    sparse-weight, memoize); a recorded site whose activations stayed mostly zero is named in
    `sparse_activations` (no IREE form skips zeros found at run time). `parameters`: every build maps the weights from one parameter file instead of carrying
    them (None: so for a model of 128 MiB or more); `apply` then writes them beside `out` (OUT.irpa).
    `max_error` None: 0.01. `quality` (with `apply`): an end-to-end budget on the model's evaluation set
    (the zoo's held-out data): a share Q of the task's headline metric to lose, or gates such as
    "cosine_mean>=0.999,nn_agreement>=0.98" or "top1_agreement>=0.97,perplexity<=1.02x"; the applied
    module keeps the lossy rewrites, least site error per µs saved first, as far as its build stays within it
    (`applied.quality` says what it measured), and sites are then not held to `max_error` unless given.
    `dask`: local, local:N or tcp://HOST:PORT, each site's candidates measured as one job on those
    workers (`opscope.jobs`: a site's timings all from one worker); the rest stays in this process. Each
    site's results wait in the run folder's `plan.shards` until all are back: `resume` reads those a
    killed plan left instead of measuring those sites again."""
    from opscope.act.specialize import kernel_plan as build

    if rounds < 1:
        raise OpscopeError(f"rounds must be >= 1, got {rounds}")
    return build(
        run,
        model,
        target=target,
        apply=apply,
        out=out,
        rounds=rounds,
        min_speedup=min_speedup,
        max_error=max_error,
        kinds=kinds,
        progress=progress,
        parameters=parameters,
        quality=quality,
        dask=dask,
        resume=resume,
    )


def write_calibration(run: str | Path, out: str | Path | None = None) -> Path:
    """The calibration file `quantize-weight{smooth=α calibration=FILE}` and `static=true` read: per
    recorded site, its lhs' max|x| per channel over every step of profile run `run`, as an .npz
    (default `RUN/calibration.npz`); `kernel_plan` writes it itself for its SmoothQuant candidates."""
    from opscope.act.calibration import write_calibration as write

    return write(run, out)


def demo_numbers(run: str | Path) -> list[str]:
    """The reference's `opscope-infer` numbers, read off a run of the `sink-band` demo (what `opscope
    infer` prints without a model): the attention's mean peak, its concentrated queries and top-4
    keys' share, the experts' loads, the hottest against uniform, the cold ones."""
    from opscope.models.infer_demo import summary

    return summary(read_sketches(run))


def kernels(
    targets: Iterable[str] | None = None,
    *,
    quick: bool = False,
    rounds: int = 5,
    progress: Callable[[str], None] | None = None,
) -> KernelReport:
    """The reference's kernel bench through IREE (`opscope kernels`): one matmul as f32, W8A16, W4A16 in
    groups of 128, W8A8, factored and sparse-skip, each the same module rewritten by an opscope pass,
    timed side by side with its error against numpy, on `targets` (default every target that runs
    here); cache against DRAM (2048² and 6144² weights streamed); the host's dot-product features
    (`iree-cpuinfo`). `quick`: one small shape, one round."""
    from opscope.act.kernels import kernel_bench

    return kernel_bench(list(targets) if targets else None, quick=quick, rounds=rounds, progress=progress)


def merge_live(states: Iterable[str | Path]) -> LiveReport:
    """The live report of saved sketches (`live(state=...)` files of runs of one model, from any
    worker or machine) merged, as if one sampler had seen every call."""
    from opscope.drive.live_run import merge_saved

    return merge_saved(list(states))


def live(
    source: str | Path | ir.Module | None = None,
    *,
    every: int | None = None,
    requests: int | None = None,
    pool: int | None = None,
    zipf: float | None = None,
    seed: int = 0,
    workers: int = 1,
    target: str = "llvm-cpu",
    csv: str | Path | None = None,
    parquet: str | Path | None = None,
    state: str | Path | None = None,
    snapshot_every: int = 0,
    force: bool = False,
    parameters: bool | None = None,
    sites: str = "",
    config: StatConfig | None = None,
    dask: str | None = None,
    progress: Callable[[str], None] | None = None,
) -> LiveRun:
    """Serve `source` (None: the reference's live demo) over a trace of `requests` drawn from a `pool` of its
    inputs (Zipf `zipf`), 1 call in `every` instrumented, in `workers` shares merged; a `LiveRun` whose report
    has recurrence per site with the memoize verdict, hot inputs, drift and loads, beside the trace's truth.
    `csv`/`parquet` get the sampled statistics as tidy steps, `state` the mergeable sketches (JSON).
    `parameters`: both builds map the weights from one parameter file instead of carrying them (None:
    so for a model of 128 MiB or more); `sites` a regex on site names: only those sampled ("" all); `config`
    what a sampled call records (default `StatConfig.live()`: each site's lhs, seven scalars and the
    elemsig fingerprint; more roles, a fixed-range histogram: `StatConfig.live().replace(...)`; it must keep
    role lhs). `workers` K > 1: share w serves requests w, w + K, ... as a job on `dask`'s pool ("local:N"
    worker processes or a Dask scheduler's "tcp://HOST:PORT"; None: "local:K"; needs the `dask` extra), the
    shares' sketches merged in order (a worker that dies has its share served again elsewhere: nothing
    lost); `progress` told of each job's end. A served model of your own: `opscope.drive.live.LiveSampler`."""
    from opscope.drive.live_run import run_live

    return run_live(
        source,
        every=every,
        requests=requests,
        pool=pool,
        zipf=zipf,
        seed=seed,
        workers=workers,
        target=target,
        csv=csv,
        parquet=parquet,
        state=state,
        snapshot_every=snapshot_every,
        force=force,
        parameters=parameters,
        sites=sites,
        config=config,
        dask=dask,
        say=progress,
    )
