"""A model as a user names it: a zoo name, a model file, MLIR text or bytecode, or a module.

`open_model` resolves any of them to one `ModelSource`: the module to inject and compile,
the name reports give it, and, for zoo models, the real inputs they bring (a file or MLIR
brings none: the drivers feed synthetic ones). A bare word that is neither a file nor a
zoo name is a one-line error listing the zoo, before any expensive import. `open_apart`
does the same with a large model's weights written to a parameter file of a temporary
folder, for the commands that build a model several times and keep no run folder (whatif,
parity): every build then maps that one file.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from pathlib import Path
from tempfile import TemporaryDirectory
from typing import Any

import numpy as np
from iree.compiler import ir

from opscope.errors import OpscopeError
from opscope.models.zoo import ZOO, get_entry

Source = str | bytes | Path | ir.Module
WEIGHTS_NAME = "weights.irpa"  # a model's parameter file in the folder that holds it


@dataclass(frozen=True)
class Reference:
    """The model as its own framework runs it, for `opscope.verify`: `kind` torch (`load()` gives the
    exported program opscope imports, decomposed as the importer does), onnx or jax (`load()` gives
    the file's path)."""

    kind: str
    load: Callable[[], Any]


def file_reference(path: Path) -> Reference | None:
    """The reference of a model file: its exported program (.pt2), or the file for onnxruntime or jax."""
    suffix = Path(path).suffix
    if suffix == ".pt2":

        def program():
            from opscope.importers.torch_fx import decompose_program, load_exported_file

            return decompose_program(load_exported_file(path, str(path)))

        return Reference("torch", program)
    if suffix in (".onnx", ".jaxexport"):
        return Reference("onnx" if suffix == ".onnx" else "jax", lambda: path)
    return None


@dataclass(frozen=True)
class ModelSource:
    """A resolved model: what to compile, what to call it, and its own inputs if it has any."""

    name: str
    module: str | bytes | ir.Module  # MLIR text or bytecode, or a module (canonical linalg or importable)
    inputs: Iterable[list[np.ndarray]] | None = None  # one argument list per step, when the model brings them
    dist: str = "synthetic"  # the tidy table's `dist` for those inputs
    tokenizer: Callable[[], Any] | None = None  # loads the model's own tokenizer, when it has one
    task: str = "outputs"  # what its first result is (`opscope.models.zoo.ZooEntry.task`)
    reference: Reference | None = None  # how its own framework runs it (`opscope.verify`), when known


def zoo_names() -> list[str]:
    """The zoo's model names, in registry order."""
    return list(ZOO)


def is_zoo_name(text: str) -> bool:
    """A bare name (no path separator, no suffix) that names a zoo model."""
    return "/" not in text and "." not in text and text in ZOO


def model_path(source: str | Path) -> Path:
    """`source` as an existing model file; a bare word that is neither says the zoo's names too."""
    path = Path(source)
    if not path.exists():
        text = str(source)
        if "/" in text or "." in text:
            raise OpscopeError(f"no such file: {path}")
        raise OpscopeError(f"no such file or zoo model: {text} (zoo: {', '.join(zoo_names())})")
    if path.is_file() and path.stat().st_size == 0:
        raise OpscopeError(f"{path} is empty (0 bytes): not a model; it may have been cut off while written")
    return path


def is_mlir_text(text: str) -> bool:
    """MLIR text rather than a name or a path (paths hold neither braces nor line breaks)."""
    return "{" in text or "\n" in text


def is_model_file(source: Source) -> bool:
    """A path to a model file (not a zoo name, MLIR text, bytecode or a module in memory)."""
    return isinstance(source, (str, Path)) and not is_zoo_name(str(source)) and not is_mlir_text(str(source))


def large_model_file(source: Source) -> bool:
    """A model file of `AUTO_BYTES` or more (its weights, near enough: the default for writing
    them to a parameter file as it is imported)."""
    from opscope.ir import parameter_files

    if not isinstance(source, (str, Path)) or (
        isinstance(source, str) and (is_mlir_text(source) or is_zoo_name(source))
    ):
        return False
    try:
        return Path(source).stat().st_size >= parameter_files.AUTO_BYTES
    except OSError:
        return False


def weights_apart(source: Source, parameters: bool | None, weights_dtype: str | None = None) -> bool:
    """Whether `source`'s weights go to a parameter file as it is imported: `parameters`, or with
    None a large model file or a `weights_dtype` to store them in. A weights dtype with
    `parameters=False` is refused in one line (the file is what stores them so)."""
    if weights_dtype is not None and parameters is False:
        raise OpscopeError(
            f"a weights dtype ({weights_dtype}) stores the weights in a parameter file: drop --no-parameters"
        )
    return bool(parameters or (parameters is None and (weights_dtype is not None or large_model_file(source))))


def weights_path(
    source: Source, parameters: bool | None, folder: str | Path, weights_dtype: str | None = None
) -> Path | None:
    """`folder/weights.irpa` when `source`'s weights go to a parameter file (`weights_apart`), else None."""
    return Path(folder) / WEIGHTS_NAME if weights_apart(source, parameters, weights_dtype) else None


def open_apart(
    source: Source,
    steps: int = 1,
    *,
    parameters: bool | None = None,
    name: str | None = None,
    progress: Callable[[str], None] | None = None,
    weights_dtype: str | None = None,
    batch: int | None = None,
) -> tuple[ModelSource, TemporaryDirectory | None]:
    """`open_model`, with the weights written to a parameter file in a new temporary folder when
    `parameters` asks, or (None) when the model file or its module's stored weights come to
    `AUTO_BYTES` or more: every build of the model then maps that one file instead of carrying
    its weights (float32 ones stored as `weights_dtype`, whatever the source; a zoo model built for
    `batch`, as `open_model`). Returns the model and the folder, which lives as long as that handle
    (None when the weights stayed in the module). A caller's `ir.Module` is copied, never changed."""
    from opscope.ir.loading import module_bytecode, new_context, parse_module
    from opscope.passes.externalize_weights import externalize, wants_file

    folder = _scratch() if weights_apart(source, parameters, weights_dtype) else None
    path = Path(folder.name) / WEIGHTS_NAME if folder is not None else None
    imported_dtype = weights_dtype if is_model_file(source) else None  # else stored so below
    model = open_model(
        source, steps, name=name, progress=progress, parameters=path, weights_dtype=imported_dtype, batch=batch
    )
    if parameters is False:
        return model, folder
    module = model.module
    if not isinstance(module, ir.Module) or module is source:
        module = parse_module(
            module if not isinstance(module, ir.Module) else module_bytecode(module), new_context(), model.name
        )
    if wants_file(module, True if weights_dtype is not None else parameters):
        folder = folder or _scratch()
        externalize(module, Path(folder.name) / WEIGHTS_NAME, weights_dtype)
        model = replace(model, module=module_bytecode(module))
    return model, folder


def _scratch() -> TemporaryDirectory:
    """A temporary folder for a parameter file; when it goes, the cached index over the file goes too."""
    from opscope.ir.parameter_files import release_indexes

    folder = TemporaryDirectory(prefix="opscope-weights-")
    weakref.finalize(folder, release_indexes)
    return folder


def open_model(
    source: Source,
    steps: int = 1,
    name: str | None = None,
    progress: Callable[[str], None] | None = None,
    batch: int | None = None,
    parameters: str | Path | None = None,
    weights_dtype: str | None = None,
) -> ModelSource:
    """Resolve `source` for `steps` calls: a zoo name (built with its inputs), a model file
    (imported to linalg: .mlir/.mlirbc, .onnx, .pt2, .jaxexport), MLIR text or bytecode, or
    an `ir.Module`. `name` overrides the name reports give it; `progress` gets `model NAME` as
    soon as the name is known, before a file's import (which can take a while). `batch` builds
    a zoo model for that many examples per call (None: the entry's own; files have theirs).
    `parameters`: a model file's weights are written to that `.irpa` file as it is imported
    (`opscope.importers.import_source`); other sources keep theirs in the module. `weights_dtype`
    (bf16, f16): a model file's float32 weights are stored so there, read widened to f32; refused
    in one line for a zoo name or a model in memory (`open_apart` stores theirs so)."""
    from opscope.ir.parameter_files import check_weights_dtype

    if check_weights_dtype(weights_dtype) is not None and not is_model_file(source):
        raise OpscopeError(
            f"storing float32 weights as {weights_dtype} is for model files (.pt2, .onnx, .jaxexport, .mlir): "
            "give one, or drop the weights dtype"
        )
    if isinstance(source, str) and is_zoo_name(source):
        entry = get_entry(source)
        module, inputs, dist, display = entry.build(steps, batch)
        program = entry.program
        ref = Reference("torch", lambda: program(batch)) if program is not None else None
        return _named(ModelSource(name or display, module, inputs, dist, entry.tokenizer, entry.task, ref), progress)
    if isinstance(source, (ir.Module, bytes)) or (isinstance(source, str) and is_mlir_text(source)):
        return _named(ModelSource(name or "<model>", source), progress)
    if isinstance(source, (str, Path)):
        from opscope.importers import import_source
        from opscope.models.idx import is_idx, mnist_source

        path = model_path(source)
        if is_idx(path):  # MNIST images: the reference's MNIST MLP fed them
            module, inputs, display = mnist_source(path, steps)
            return _named(ModelSource(name or display, module, inputs, "mnist"), progress)
        label = name or str(path)
        if progress is not None:
            progress(f"model {label}")
        module = import_source(path, parameters=parameters, weights_dtype=weights_dtype)
        return ModelSource(label, module, reference=file_reference(path))
    raise OpscopeError(
        f"cannot open a {type(source).__name__} as a model: give a zoo name, a model file, "
        "MLIR text or bytecode, or an ir.Module"
    )


def _named(model: ModelSource, progress: Callable[[str], None] | None) -> ModelSource:
    """`model`, after saying `model NAME` to `progress`."""
    if progress is not None:
        progress(f"model {model.name}")
    return model
