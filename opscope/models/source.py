"""A model as a user names it: a zoo name, a model file, MLIR text or bytecode, or a module.

`open_model` resolves any of them to one `ModelSource`: the module to inject and compile,
the name reports give it, and, for zoo models, the real inputs they bring (a file or MLIR
brings none: the drivers feed synthetic ones). A bare word that is neither a file nor a
zoo name is a one-line error listing the zoo, before any expensive import.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from iree.compiler import ir

from opscope.errors import OpscopeError
from opscope.models.zoo import ZOO, get_entry

Source = str | bytes | Path | ir.Module


@dataclass(frozen=True)
class ModelSource:
    """A resolved model: what to compile, what to call it, and its own inputs if it has any."""

    name: str
    module: str | bytes | ir.Module  # MLIR text or bytecode, or a module (canonical linalg or importable)
    inputs: Iterable[list[np.ndarray]] | None = None  # one argument list per step, when the model brings them
    dist: str = "synthetic"  # the tidy table's `dist` for those inputs
    tokenizer: Callable[[], Any] | None = None  # loads the model's own tokenizer, when it has one
    task: str = "outputs"  # what its first result is (`opscope.models.zoo.ZooEntry.task`)


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
    return path


def is_mlir_text(text: str) -> bool:
    """MLIR text rather than a name or a path (paths hold neither braces nor line breaks)."""
    return "{" in text or "\n" in text


def open_model(
    source: Source,
    steps: int = 1,
    name: str | None = None,
    named: Callable[[str], None] | None = None,
    batch: int | None = None,
    parameters: str | Path | None = None,
) -> ModelSource:
    """Resolve `source` for `steps` calls: a zoo name (built with its inputs), a model file
    (imported to linalg: .mlir/.mlirbc, .onnx, .pt2, .jaxexport), MLIR text or bytecode, or
    an `ir.Module`. `name` overrides the name reports give it; `named(name)` is called as
    soon as the name is known, before a file's import (which can take a while). `batch` builds
    a zoo model for that many examples per call (None: the entry's own; files have theirs).
    `parameters`: a model file's weights are written to that `.irpa` file as it is imported
    (`opscope.importers.import_source`); other sources keep theirs in the module."""
    if isinstance(source, str) and is_zoo_name(source):
        entry = get_entry(source)
        module, inputs, dist, display = entry.build(steps, batch)
        return _named(ModelSource(name or display, module, inputs, dist, entry.tokenizer, entry.task), named)
    if isinstance(source, (ir.Module, bytes)) or (isinstance(source, str) and is_mlir_text(source)):
        return _named(ModelSource(name or "<model>", source), named)
    if isinstance(source, (str, Path)):
        from opscope.importers import import_source

        path = model_path(source)
        label = name or str(path)
        if named is not None:
            named(label)
        return ModelSource(label, import_source(path, parameters=parameters))
    raise OpscopeError(
        f"cannot open a {type(source).__name__} as a model: give a zoo name, a model file, "
        "MLIR text or bytecode, or an ir.Module"
    )


def _named(model: ModelSource, named: Callable[[str], None] | None) -> ModelSource:
    """`model`, after telling `named` its name."""
    if named is not None:
        named(model.name)
    return model
