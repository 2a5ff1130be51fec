"""The main job: tap every matmul of a model, run it step after step, record, mine, report.

`profile` takes a model as a user names it (nothing, a zoo name, a file, MLIR, a module;
`opscope.models.source`); `profile_module` is the whole loop on one module and writes a
run folder:

    sketches.csv     the tidy table (one row per sketch element; `opscope.record.recorder`)
    site_costs.csv   `site,flops` of every tapped matmul
    manifest.json    which function result holds which sketch (`opscope.ir.manifest`)
    report.md        the mined findings (`opscope.mining`), also printed on the terminal
    run.json         (written by `profile`) the model as the user named it, the target, steps and
                     inputs, so `opscope plan RUN` rebuilds the same model and inputs

`default_model` is what runs when given nothing: a 2-layer transformer-style stack built in
MLIR by opscope, fed a realistic mix (`default_inputs`): a residual stream with two hot
channels, dense Gaussian layer-0 weights, 90 %-pruned layer-1 FFN weights, int4-style
quantized layer-1 attention weights; every step feeds a fresh batch of tokens through the
same weights.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from itertools import islice
from operator import attrgetter
from pathlib import Path

import numpy as np
from iree.compiler import ir

from opscope.drive.inputs import (
    check_feed,
    check_steps,
    degenerate_notes,
    generate,
    load_tokenizer,
    read_files,
    read_sentences,
    tokenize,
)
from opscope.drive.profile_shards import ShardedBuild, check_sharding, record_sharded, write_module
from opscope.drive.sequence import record_steps
from opscope.errors import OpscopeError
from opscope.ir.arguments import arguments, function_args
from opscope.ir.loading import new_context, parse_module
from opscope.ir.parameter_files import check_weights_dtype
from opscope.ir.stat_config import StatConfig
from opscope.mining.render import mine_markdown
from opscope.mining.report import MineReport, mine_paths
from opscope.models.demo import transformer_module
from opscope.models.source import (
    WEIGHTS_NAME,
    ModelSource,
    Reference,
    Source,
    is_mlir_text,
    is_model_file,
    is_zoo_name,
    open_model,
    weights_path,
)
from opscope.passes.externalize_weights import externalize, wants_file
from opscope.pipeline.taps import TAPS, check_sites_regex, parse_taps
from opscope.record.run_record import save_run_record
from opscope.record.tidy import MANIFEST_NAME, NOTES_NAME, SITE_COSTS_NAME
from opscope.record.writer_lock import writing
from opscope.run.instrumented import InstrumentedModel
from opscope.run.targets import get_target, require_runnable
from opscope.run.ticker import ticking
from opscope.verify.check import Verification
from opscope.verify.run import verify_run

DEFAULT_NAME = "built-in transformer (2 layers, d_model 64, 32 tokens)"
CSV_NAME, COSTS_NAME, REPORT_NAME = "sketches.csv", SITE_COSTS_NAME, "report.md"
RUNS_DIR = "opscope-runs"  # where `profile` writes run folders by default
# Inputs a caller may give: input files (a path or a list of paths), or per-step argument lists.
InputsSpec = str | Path | Sequence[str | Path] | Iterable[Sequence[np.ndarray]] | None


DEFAULT_LAYERS = 2


def default_model() -> str:
    """The built-in model: 2 transformer-style layers, d_model 64, 32 tokens, 16 matmul sites."""
    return transformer_module(layers=DEFAULT_LAYERS, d_model=64, seq=32)


def _weight(rng: np.random.Generator, name: str, shape: tuple[int, ...]) -> np.ndarray:
    """A weight of the default mix, chosen by its argument name (see the module docstring)."""
    w = rng.standard_normal(shape) / np.sqrt(shape[0])
    if re.fullmatch(r"layer1_w[12]", name):  # magnitude-pruned FFN: keep the largest 10 %
        w = np.where(np.abs(w) >= np.quantile(np.abs(w), 0.9), w, 0.0)
    elif re.fullmatch(r"layer1_w[qkvo]", name):  # symmetric int4 weights, one scale per tensor
        scale = np.abs(w).max() / 7.0
        w = np.clip(np.round(w / scale), -7, 7) * scale
    return w.astype(np.float32)


def default_inputs(arg_names: list[str], arg_shapes: list[tuple[int, ...]], steps: int, seed: int = 0):
    """Per step, the default mix: a fresh batch of activations (arg 0) and the same weights."""
    rng = np.random.Generator(np.random.Philox(seed))
    weights = [_weight(rng, n, s) for n, s in zip(arg_names[1:], arg_shapes[1:])]
    for _ in range(steps):
        x = rng.standard_normal(arg_shapes[0])
        x[..., :2] *= 12.0  # two hot channels, as in real LLM residual streams
        yield [x.astype(np.float32), *weights]


def _run_file(name: str) -> property:
    """The run folder's file `name`, as a read-only property of a result."""
    return property(lambda self: self.out_dir / name)


@dataclass
class ProfileResult:
    """One profile: where it was written, what it found, and what it cost.

    The run folder holds `sketches` (the tidy table), `site_costs` (`site,flops`),
    `manifest_path` and `report_path` (the mined report as Markdown); `report` is the same
    report as polars frames, `model` the loaded instrumented model (call it again at will).
    """

    out_dir: Path
    model: InstrumentedModel
    report: MineReport
    steps: int
    rows: int
    parity: float | None  # largest |Δ| of the original results, injected vs as is, on step 0 (0.0: bit-identical;
    # None: the untapped model does not compile in IREE, so nothing was compared)
    run_seconds: float  # the calls and their recording, not the compile or the parity check
    name: str = "<model>"
    verification: Verification | None = None  # the run checked against its own framework's (`verify`)

    # the files of the run folder: the tidy sketches, the site,flops sidecar, the manifest, the Markdown report
    sketches, site_costs = _run_file(CSV_NAME), _run_file(COSTS_NAME)
    manifest_path, report_path = _run_file(MANIFEST_NAME), _run_file(REPORT_NAME)

    # the instrumented model's, read through: `manifest` (which function result holds which sketch, also
    # saved as `manifest_path`), `target`, `compile_seconds`, `compile_cached` (the compiled module came
    # from the cache: `compile_seconds` is then a lookup)
    manifest = property(attrgetter("model.manifest"))
    target = property(attrgetter("model.target"))
    compile_seconds = property(attrgetter("model.compile_seconds"))
    compile_cached = property(attrgetter("model.compile_cached"))

    def to_dict(self) -> dict:
        """JSON-safe: where the run was written, what it tapped and recorded, parity, the times, the verdict."""
        return {
            "name": self.name,
            "target": self.target,
            "out_dir": str(self.out_dir),
            "sites": len(self.manifest.sites),
            "sketches_per_step": len(self.manifest.entries),
            "steps": self.steps,
            "rows": self.rows,
            "parity": self.parity,
            "compile_seconds": self.compile_seconds,
            "compile_cached": self.compile_cached,
            "run_seconds": self.run_seconds,
            "findings": self.report.ranked.height,
            "verification": None if self.verification is None else self.verification.to_dict(),
        }

    def __repr__(self) -> str:
        return (
            f"ProfileResult({self.name!r} on {self.target}: {len(self.manifest.sites)} sites, {self.steps} steps, "
            f"{self.rows:,} rows in {str(self.out_dir)!r}; {_count(self.report.ranked.height, 'finding')})"
        )


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" + ("" if n == 1 else "s")


def default_out() -> Path:
    """A fresh run folder under `opscope-runs/`, named by the time."""
    return Path(RUNS_DIR) / time.strftime("%Y%m%d-%H%M%S")


def profile(
    source: Source | None = None,
    out: str | Path | None = None,
    target: str = "llvm-cpu",
    steps: int = 4,
    config: StatConfig = StatConfig(),
    inputs: InputsSpec = None,
    progress: Callable[[str], None] | None = None,
    name: str | None = None,
    text: str | Path | Sequence[str] | None = None,
    tokenizer: str | Path | None = None,
    taps: str | Sequence[str] | None = None,
    parameters: bool | None = None,
    weights_dtype: str | None = None,
    verify: bool | None = None,
    sites: str = "",
    dask: str | None = None,
    shards: int | None = None,
    resume: bool = False,
) -> ProfileResult:
    """The main job on any model: `source` is None (the built-in model and its input mix), a
    zoo name (with its real inputs), a model file, MLIR text or bytecode, or an `ir.Module`.

    Writes the run folder `out` (default `opscope-runs/<time>`). Inputs, per step: the
    zoo's own, else generated from the signature (`opscope.drive.inputs.generate`), unless
    `inputs` gives them (input files: a path or a list of paths; or an iterable of argument
    lists) or `text` does (a text file or a list of sentences, through `tokenizer`, a local
    Hugging Face tokenizer folder, or the zoo model's own). Given inputs are checked
    against the model's signature before the compile. `progress` gets one line naming the model
    before the compile (the CLI passes `print`); `name` is what reports call the model
    (default: the zoo's description, the file's path, `<model>`). The target and the run
    folder are checked before anything is imported or compiled. `taps` picks what is
    tapped (`opscope.pipeline.taps.parse_taps`: "all", the default, or some of matmul,
    attention, routing, residual). `parameters`: the weights go to `out/weights.irpa` as the
    model is imported (`opscope.importers.import_source`: a torch model's straight from its
    tensors) and every build reads them there; None (default): so for a model of
    `opscope.ir.parameter_files.AUTO_BYTES` or more. `weights_dtype` (bf16, f16): the model's
    float32 weights are stored so in that file (half the bytes, on disk and in memory; any route:
    `externalize-weights{dtype=...}`) and read widened to f32: the model computes as exported, on
    weights rounded to that type. `verify`: the first step checked against the model run by its
    own framework (PyTorch for a `.pt2` file or a zoo model: a sample of every family of sites,
    FLOPs and outputs; onnxruntime or jax: outputs), one line first in the report; None: on for
    models whose weights stay in the module (`profile_module`). `sites`: a regex on site names
    (every kind), only those tapped ("" all; checked before anything is imported). `dask`
    (`local[:N]`, `tcp://HOST:PORT`): the steps split in `shards` (default 8) contiguous ranges run as
    jobs there, their rows merged in step order (`opscope.drive.profile_shards`: the serial table,
    byte for byte); `progress` then also gets a line per shard; `resume` continues such a run killed
    mid-way in `out` (its recorded steps and finished shards kept; the same model, steps and shards).
    """
    tgt = get_target(target)
    taps = parse_taps(taps)
    check_sites_regex(sites)
    require_runnable(tgt)
    if steps < 1:
        raise OpscopeError(f"steps must be >= 1, got {steps}")
    check_feed(inputs, text, tokenizer)
    check_sharding(dask, shards, steps, resume)
    if weights_dtype is not None and source is None:
        raise OpscopeError("a weights dtype is for a model's float32 weights: the built-in model has its own")
    if resume and out is None:
        raise OpscopeError("--resume continues the run folder of a profile killed mid-way: give its --out")
    out = Path(out) if out is not None else default_out()
    if not resume:
        _check_fresh(out)

    def model_line(line: str) -> None:
        """open_model's `model NAME` as the profile's first line: `opscope profile: NAME on TARGET`."""
        if progress is not None:
            progress(f"opscope profile: {line.removeprefix('model ')} on {tgt.name}")

    if source is None:
        model = default_source(steps)
        model = ModelSource(name or model.name, model.module, model.inputs, model.dist)
        model_line(f"model {model.name}")
        if verify:
            raise OpscopeError(
                "verify needs a model file (.pt2, .onnx, .jaxexport) or a zoo model, not the built-in one"
            )
    else:
        weights = weights_path(source, parameters, out, weights_dtype)
        imported = weights_dtype if is_model_file(source) else None  # else stored so by profile_module
        with ticking("import the model" + (f" and write its weights to {weights}" if weights else "")):
            model = open_model(
                source, steps, name=name, progress=model_line, parameters=weights, weights_dtype=imported
            )
    feed, dist = resolve_inputs(model, steps, inputs, text, tokenizer)
    result = profile_module(
        model.module,
        out,
        tgt.name,
        steps,
        config,
        model.name,
        dist,
        feed,
        taps=taps,
        parameters=parameters,
        weights_dtype=weights_dtype,
        reference=model.reference,
        verify=verify,
        sites=sites,
        dask=dask,
        shards=shards,
        progress=progress,
        resume=resume,
    )
    write_run_record(out, source, tgt.name, steps, dist, inputs, text, tokenizer, weights_dtype, config)
    return result


def write_run_record(
    out: Path,
    source,
    target: str,
    steps: int,
    dist: str,
    inputs,
    text,
    tokenizer,
    weights_dtype: str | None = None,
    config: StatConfig | None = None,
) -> None:
    """`run.json`: the model as the user named it (a zoo name or an absolute file path; null for
    the built-in model; no `source` key when it came in memory), the target, the steps, the dtype
    its weights were stored as and where the inputs came from, so a later command
    (`opscope plan RUN`) rebuilds the same model and inputs; the histogram's range and bins, so
    a picture of the run labels them."""
    record: dict = {"target": target, "steps": steps, "dist": dist}
    if config is not None:
        record["histogram"] = {"min": config.hist_min, "max": config.hist_max, "bins": config.hist_bins}
    if weights_dtype is not None:
        record["weights_dtype"] = weights_dtype
    if source is None or isinstance(source, str) and is_zoo_name(source):
        record["source"] = source
    elif isinstance(source, Path) or isinstance(source, str) and not is_mlir_text(source):
        if Path(source).exists():  # a file; MLIR text (braces, line breaks) came in memory
            record["source"] = str(Path(source).resolve())
    files = [inputs] if isinstance(inputs, (str, Path)) else inputs
    if isinstance(files, (list, tuple)) and files and all(isinstance(f, (str, Path)) for f in files):
        record["inputs"] = [str(Path(f).resolve()) for f in files]
    elif inputs is not None:
        record["inputs"] = "in-memory"
    if text is not None:
        record["text"] = [str(t) for t in text] if isinstance(text, (list, tuple)) else str(text)
    if tokenizer is not None:
        record["tokenizer"] = str(tokenizer)
    save_run_record(out, record)  # what was profiled, so `opscope plan RUN` can rebuild the model and its inputs


def resolve_inputs(
    model: ModelSource,
    steps: int,
    inputs: InputsSpec = None,
    text: str | Path | Sequence[str] | None = None,
    tokenizer: str | Path | None = None,
) -> tuple[list[list[np.ndarray]], str]:
    """`steps` checked argument lists for `model` and the `dist` that labels them."""
    args = arguments(
        model.module if isinstance(model.module, ir.Module) else parse_module(model.module, new_context(), model.name)
    )
    if text is not None:
        sentences = [str(s) for s in text] if isinstance(text, (list, tuple)) else read_sentences(text)
        if tokenizer is not None:
            tok = load_tokenizer(tokenizer)
        elif model.tokenizer is not None:
            tok = model.tokenizer()
        else:
            raise OpscopeError(
                f"{model.name}: text needs a tokenizer: pass --tokenizer DIR (a local Hugging Face tokenizer folder)"
            )
        label = "text" if isinstance(text, (list, tuple)) else Path(text).name
        return tokenize(sentences, tok, args, steps, label), label
    if isinstance(inputs, (str, Path)) or (
        isinstance(inputs, (list, tuple)) and inputs and all(isinstance(p, (str, Path)) for p in inputs)
    ):
        paths = [inputs] if isinstance(inputs, (str, Path)) else list(inputs)
        return read_files(paths, args, steps), Path(paths[0]).name
    if inputs is not None:
        return check_steps(inputs, args, steps), "inputs"
    if model.inputs is not None:
        return check_steps(model.inputs, args, steps, model.name), model.dist
    return list(generate(args, steps)), model.dist


def _check_fresh(out: Path) -> None:
    """Refuse a run folder that already holds sketches."""
    csv = out / CSV_NAME
    if csv.exists() and csv.stat().st_size:
        raise OpscopeError(f"{csv} exists: choose another --out")


def profile_module(
    source: str | bytes | ir.Module,
    out_dir: str | Path,
    target: str = "llvm-cpu",
    steps: int = 4,
    config: StatConfig = StatConfig(),
    name: str = "<model>",
    dist: str = "synthetic",
    inputs=None,
    batch: int = 0,
    taps: Sequence[str] = TAPS,
    parameters: bool | None = None,
    weights_dtype: str | None = None,
    reference: Reference | None = None,
    verify: bool | None = None,
    sites: str = "",
    dask: str | None = None,
    shards: int | None = None,
    progress: Callable[[str], None] | None = None,
    resume: bool = False,
) -> ProfileResult:
    """Inject, compile for `target`, run `steps` times, record the run folder and mine it.

    `inputs` is an iterable of per-step argument lists; by default generated from the
    signature (`opscope.drive.inputs.generate`). `batch` is lower-opscope's tensors per
    stats call (0: as many as a dispatch binds); `taps` what is tapped (default all), `sites` which
    sites by a regex on their names ("" all).
    `parameters`: the module's weights are written to `out/weights.irpa` (`externalize-weights`)
    before it is tapped, and every build reads them from there (a module whose weights already
    live in a parameter file keeps it); None: when its weights come to `opscope.ir.parameter_files.AUTO_BYTES`
    (or a `weights_dtype`, bf16 or f16, asks to store its float32 weights so there).
    `reference` (`opscope.models.source.Reference`): the model as its own framework runs it; with
    `verify` the first step is checked against it (`opscope.verify.run.verify_run`: `verify.json`,
    a line first in every report); None: when its weights stay in the module (under
    `opscope.ir.parameter_files.AUTO_BYTES`). `dask`: the steps run as `shards` jobs on that pool
    (`opscope.drive.profile_shards`; `progress` gets a line per shard), the table the serial one;
    `resume` continues such a run killed mid-way in `out_dir`: its recorded steps and finished shards
    are kept, the rest run (the same model, steps and shards; refused without `dask`).
    """
    if verify and reference is None:
        raise OpscopeError(
            "verify needs the model as its own framework runs it: give a .pt2, .onnx or .jaxexport file or a zoo model"
        )
    if steps < 1:
        raise OpscopeError(f"steps must be >= 1, got {steps}")
    shards = check_sharding(dask, shards, steps, resume)
    if check_weights_dtype(weights_dtype) is not None and parameters is False:
        raise OpscopeError(
            f"a weights dtype ({weights_dtype}) stores the weights in a parameter file: drop --no-parameters"
        )
    out = Path(out_dir)
    if not resume:
        _check_fresh(out)
    with writing(out):  # one writer per run folder: a second is refused before it writes
        if not resume:
            _check_fresh(out)  # again, held: a writer that finished while this one waited is not written over
        csv = out / CSV_NAME
        external = False
        if parameters is not False:
            module = source if isinstance(source, ir.Module) else parse_module(source, new_context(), name)
            if wants_file(module, True if weights_dtype is not None else parameters):
                with ticking(f"{name}: write the weights to {out / WEIGHTS_NAME}"):
                    externalize(module, out / WEIGHTS_NAME, weights_dtype)
                external = True
            source = module
        model = InstrumentedModel.build(
            source, target, config, name=name, batch=batch, taps=tuple(taps), sites=check_sites_regex(sites)
        )
        inputs = list(islice(generate(model.args, steps) if inputs is None else inputs, steps))
        if resume:
            _same_manifest(out / MANIFEST_NAME, model.manifest.to_json())
        model.manifest.save(out / MANIFEST_NAME)  # the folder: made by `writing`
        if notes := degenerate_notes(model.args, inputs):  # said by every report mined from the run
            (out / NOTES_NAME).write_text(json.dumps(notes, indent=1) + "\n")
        # a progress bar of the steps on a terminal (None: as tqdm decides), nothing elsewhere
        if dask is None:
            run = record_steps(model, inputs, steps, csv, dist, None, out / COSTS_NAME, f"profile {model.target}", None)
        else:
            module_file, digest = write_module(model, csv)
            build = ShardedBuild(module_file, digest, model.target, config, name, batch, tuple(taps), sites)
            run = record_sharded(model, build, inputs, csv, dist, out / COSTS_NAME, dask, shards, progress, resume)
        checked = None
        if reference is not None and (verify or (verify is None and not external)):
            with ticking(f"{name}: verify step 0 against {reference.kind}"):
                base = parse_module(model.base_source, new_context(), name)
                checked = verify_run(
                    reference, base, out, csv, inputs[0], run.first_outputs, model.manifest.row_stride, weights_dtype
                )
        model.loaded.release()  # the device's memory and the mapped weights leave before mining; a later call reloads
        report = mine_paths(csv, costs=out / COSTS_NAME)
        (out / REPORT_NAME).write_text(mine_markdown(report))
        return ProfileResult(out, model, report, steps, run.rows, run.parity, run.seconds, name, checked)


def _same_manifest(path: Path, manifest: str) -> None:
    """On resume, refuse a run folder whose sketches another build recorded (another model, taps or sketches)."""
    if path.exists() and path.read_text() != manifest:
        raise OpscopeError(
            f"{path.parent} was recorded from another build (its manifest differs): resume it with the same model, "
            "taps, sites and sketches, or choose another --out"
        )


def default_source(steps: int) -> ModelSource:
    """The built-in model with `steps` batches of its default mix of distributions."""
    text = default_model()
    args = function_args(parse_module(text, new_context(), "default"))
    names = ["x"] + [f"layer{i}_w{w}" for i in range(DEFAULT_LAYERS) for w in "qkvo12"]  # demo's order
    return ModelSource(DEFAULT_NAME, text, default_inputs(names, [s for s, _ in args], steps), "default-mix")
