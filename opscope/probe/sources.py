"""The 2-D weights a probe reads: a model's matmul weights by site name, or tensor files.

A model source (a zoo name, a model file, MLIR) is imported and every matmul or convolution
site's constant weight is read (`opscope.ir.weights`), once per tensor, as [output channels,
K]; a model that takes its weights as arguments (the digits MLP) gives them from its own
first inputs. A tensor path (a `.tensor`, `.npy`, `.safetensors` file or a directory of
them) is read as it is (`opscope.probe.tensors`). Every matrix is checked before any work:
2-D, both dims ≥ 2, finite.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from opscope.probe.tensors import check_matrix, load_tensors

TENSOR_SUFFIXES = (".tensor", ".npy", ".safetensors")


@dataclass
class WeightSet:
    """Named weight matrices [out, K] and, from a model, its `Weight`s (what a plan rewrites)."""

    name: str
    matrices: dict[str, np.ndarray]
    weights: list = field(default_factory=list)  # its `opscope.ir.weights.Weight`s, in site order
    skipped: list[str] = field(default_factory=list)  # weights left out, with why
    value_bytes: dict[str, int] = field(default_factory=dict)  # stored width of a value, when not f32

    @property
    def params(self) -> int:
        return sum(m.size for m in self.matrices.values())


def is_tensor_path(source) -> bool:
    """A directory or a tensor file (rather than a model)."""
    if not isinstance(source, (str, Path)) or (isinstance(source, str) and ("{" in source or "\n" in source)):
        return False
    path = Path(source)
    return path.is_dir() or path.suffix in TENSOR_SUFFIXES


def open_weights(source=None, sites: str = "", progress: Callable[[str], None] | None = None) -> WeightSet:
    """The weights of `source` (a model or a tensor path; None: the built-in model with its default
    weight mix, which `opscope profile` runs), every one checked."""
    if source is None:
        from opscope.drive.profile import default_source

        model = default_source(1)
        return module_weights(model.name, model.module, sites, first_inputs(model))
    if is_tensor_path(source):
        tensors = _matching(load_tensors(source), sites, str(source))
        return WeightSet(str(source), {k: check_matrix(k, v) for k, v in tensors.items()})
    return _model_weights(source, sites, progress)


def _matching(tensors: dict[str, np.ndarray], pattern: str, where: str) -> dict[str, np.ndarray]:
    """The tensors whose names `pattern` (a regex) finds; all of them when it is empty."""
    if not pattern:
        return tensors
    from opscope.errors import OpscopeError

    try:
        regex = re.compile(pattern)
    except re.error as e:
        raise OpscopeError(f"bad --sites regex '{pattern}': {e}") from None
    kept = {k: v for k, v in tensors.items() if regex.search(k)}
    if not kept:
        from opscope.ir.site_select import MOST_NAMES

        names = list(tensors)
        raise OpscopeError(
            f"{where}: sites='{pattern}' names no tensor (valid: {', '.join(names[:MOST_NAMES])}"
            + (f" and {len(names) - MOST_NAMES} more)" if len(names) > MOST_NAMES else ")")
        )
    return kept


def _model_weights(source, sites: str, progress: Callable[[str], None] | None) -> WeightSet:
    from opscope.models.source import open_model

    model = open_model(source, steps=1, progress=progress)
    return module_weights(model.name, model.module, sites, first_inputs(model))


def first_inputs(model) -> list | None:
    """A `ModelSource`'s first argument list, when it brings inputs (weights it takes as arguments are there)."""
    return next(iter(model.inputs), None) if model.inputs is not None else None


def module_weights(name: str, module, sites: str = "", inputs=None) -> WeightSet:
    """The weights of a model's module (MLIR text, bytecode or `ir.Module`); `inputs`, one call's
    arguments, give the weights a model takes as arguments."""
    from opscope.errors import OpscopeError
    from opscope.ir.loading import new_context, parse_module
    from opscope.ir.weights import read_weights

    parsed = parse_module(module, new_context(), name) if not hasattr(module, "operation") else module
    weights = read_weights(parsed, sites, inputs=inputs)
    if not weights:
        raise OpscopeError(
            f"{name}: no matmul or convolution site{' matching ' + repr(sites) if sites else ''}"
            " reads a constant weight (`opscope sites MODEL` lists its sites)"
        )
    kept, skipped, matrices = [], [], {}
    for w in weights:
        m = w.matrix()
        if min(m.shape) < 2:  # a single output (a regression head): nothing to decompose
            skipped.append(f"{w.name} {m.shape[0]}×{m.shape[1]}: a dim below 2")
            continue
        kept.append(w)
        matrices[w.name] = check_matrix(w.name, m)
    widths = {w.name: w.element_bytes for w in kept if w.element_bytes != 4}
    return WeightSet(name, matrices, kept, skipped, widths)
