"""PyTorch → canonical linalg: `torch.export`, IREE's FX importer, then the torch lowering.

Phases, in order: export (`torch.export.export`, non-strict), decompose (a small table:
ops the importer or torch-mlir cannot take whole), import (`FxImporter.import_frozen_program`,
weights inlined as constants, every op located by `NameLoc(<nn.Module path>)` around the
file:line callsite the importer emits), lower (`torch_lowering.lower_torch`). The result is
one plain `func.func @main` whose arguments are the example tensors, flattened in
`torch.export`'s order (`flat_inputs`), and whose results are the forward's tensor leaves.
"""

from __future__ import annotations

import inspect
import logging
import re
import warnings
from typing import Iterable

import numpy as np
from iree.compiler import ir

from opscope.errors import OpscopeError
from opscope.importers.torch_lowering import lower_torch
from opscope.ir.loading import new_context

# aten ops decomposed after export: `aten.__and__.Tensor` (transformers-5 attention masks)
# has no torch-mlir lowering; its decomposition is `bitwise_and`.
DEFAULT_DECOMPOSITIONS: tuple[str, ...] = ("aten.__and__.Tensor",)

_TRY = {
    "data-dependent": "make the shape static or guard it with torch._check",
    "Dynamic control flow": "replace Python control flow on tensor values with torch.cond or torch.where",
    "Unsupported": "simplify forward() or pass example inputs exactly as the model is called",
}


def require_torch():
    """Import torch, or say which extra to install."""
    try:
        import torch
    except ImportError:
        raise OpscopeError("PyTorch is not installed: pip install 'opscope[torch]'") from None
    return torch


def module_path(node) -> str:
    """The dotted nn.Module path an FX node ran in ('encoder.layer.3.attention.self.query'), '' at the root."""
    stack = node.meta.get("nn_module_stack") or {}
    if not stack:
        return ""
    path = list(stack.values())[-1][0]
    return normalize_path(path)


def normalize_path(path: str) -> str:
    """Strict-mode spellings (`L['self'].layer[3]`, `getattr(..., 'x')`) to plain dotted paths."""
    path = re.sub(r"^L\['self'\]\.?|^L__self___?", "", path)
    path = re.sub(r"getattr\((.*?), '([^']+)'\)", r"\1.\2", path)
    path = re.sub(r"\._modules\['([^']+)'\]", r".\1", path)
    path = re.sub(r"\[(\d+)\]", r".\1", path)
    path = re.sub(r"\[['\"]([^'\"]+)['\"]\]", r".\1", path)
    return path.strip(".")


def _named_context_cache():
    """IREE's `ContextCache`, with each node's location wrapped in `NameLoc(<module path>)`."""
    from iree.compiler.extras import fx_importer

    class NamedLocations(fx_importer.ContextCache):
        """Keeps the importer's file:line callsite and names it by the nn.Module that ran the node."""

        __slots__ = ()

        def get_node_location(self, node):
            loc = super().get_node_location(node)
            path = module_path(node)
            if not path:
                return loc
            return ir.Location.name(path, childLoc=loc or ir.Location.unknown(self._c), context=self._c)

    return NamedLocations


def _decomposition_table(names: Iterable[str]):
    torch = require_torch()
    from torch._decomp import get_decompositions

    ops = []
    for name in names:
        ns, _, rest = name.partition(".")
        packet, _, overload = rest.rpartition(".")
        try:
            ops.append(getattr(getattr(getattr(torch.ops, ns), packet), overload))
        except AttributeError:
            raise OpscopeError(f"unknown decomposition '{name}': expected namespace.op.overload") from None
    table = get_decompositions(ops)
    if "aten.__and__.Tensor" in names and torch.ops.aten.__and__.Tensor not in table:
        table[torch.ops.aten.__and__.Tensor] = torch.ops.aten.bitwise_and.Tensor
    return table


def _ordered_kwargs(model, kwargs: dict) -> dict:
    """kwargs in the order of forward()'s signature, the order torch.export flattens them in."""
    try:
        names = list(inspect.signature(model.forward).parameters)
    except (TypeError, ValueError):
        return dict(kwargs)
    rank = {n: i for i, n in enumerate(names)}
    return dict(sorted(kwargs.items(), key=lambda kv: rank.get(kv[0], len(rank))))


def flat_inputs(model, example_args: tuple, example_kwargs: dict | None = None) -> list[np.ndarray]:
    """The example tensors as numpy, in the imported function's argument order."""
    torch = require_torch()
    leaves = torch.utils._pytree.tree_leaves((tuple(example_args), _ordered_kwargs(model, example_kwargs or {})))
    return [t.detach().cpu().numpy() for t in leaves if isinstance(t, torch.Tensor)]


def eager_outputs(model, example_args: tuple, example_kwargs: dict | None = None) -> list[np.ndarray]:
    """PyTorch eager results, flattened like the imported function's results."""
    torch = require_torch()
    with torch.no_grad():
        out = model(*example_args, **(example_kwargs or {}))
    return [t.detach().cpu().numpy() for t in torch.utils._pytree.tree_leaves(out) if isinstance(t, torch.Tensor)]


def export_program(
    model,
    example_args: tuple = (),
    example_kwargs: dict | None = None,
    name: str | None = None,
    decompositions: Iterable[str] = DEFAULT_DECOMPOSITIONS,
):
    """Phase export + decompose: a `torch.export.ExportedProgram`, or a one-line error saying what to try."""
    torch = require_torch()
    label = name or type(model).__name__
    with warnings.catch_warnings():  # torch 2.13's own pytree deprecation (LeafSpec), not the user's
        warnings.filterwarnings("ignore", category=FutureWarning, message=".*LeafSpec")
        try:
            prog = torch.export.export(model, tuple(example_args), _ordered_kwargs(model, example_kwargs or {}),
                                       strict=False)
        except Exception as e:  # torch raises many types; all become one line
            raise OpscopeError(f"{label}: torch.export failed: {_short(e)}; try: {_hint(e)}") from None
        table = _decomposition_table(tuple(decompositions))
        if table:
            prog = prog.run_decompositions(table)
    return prog


def import_program(prog, context: ir.Context | None = None, name: str | None = None) -> ir.Module:
    """Phase import: an ExportedProgram → a torch-dialect module with NameLoc'd ops (not yet lowered)."""
    require_torch()
    from iree.compiler.extras import fx_importer

    ctx = context or new_context()
    importer = fx_importer.FxImporter(context=ctx)
    importer._cc = _named_context_cache()(ctx, py_attr_tracker=importer._py_attr_tracker)
    for key, value in prog.constants.items():  # lifted tensor constants are looked up in state_dict
        if key not in prog.state_dict and hasattr(value, "dtype"):
            prog.state_dict[key] = value
    try:
        importer.import_frozen_program(prog, func_name="main")
    except Exception as e:
        raise OpscopeError(
            f"{name or type(prog).__name__}: the FX importer failed: {_short(e)}; try: add the op to `decompositions`"
        ) from None
    return importer.module


def import_torch(
    model,
    example_args: tuple = (),
    name: str | None = None,
    decompositions: Iterable[str] = DEFAULT_DECOMPOSITIONS,
    example_kwargs: dict | None = None,
    context: ir.Context | None = None,
) -> ir.Module:
    """An nn.Module and example inputs → the canonical linalg module (`func.func @main`)."""
    prog = export_program(model, example_args, example_kwargs, name, decompositions)
    module = import_program(prog, context, name)
    try:
        return lower_torch(module)
    except OpscopeError as e:
        raise OpscopeError(f"{name or type(model).__name__}: {e}") from None


def import_exported_file(path, name: str | None = None,
                         decompositions: Iterable[str] = DEFAULT_DECOMPOSITIONS) -> ir.Module:
    """A `.pt2` file (`torch.export.save` of an ExportedProgram) → the canonical linalg module."""
    torch = require_torch()
    label = name or str(path)
    quiet = logging.getLogger("torch.export")  # it logs the whole traceback of a failed load
    level, quiet.level = quiet.level, logging.CRITICAL
    try:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", category=FutureWarning, message=".*LeafSpec")
            prog = torch.export.load(str(path))
            table = _decomposition_table(tuple(decompositions))
            if table:
                prog = prog.run_decompositions(table)
    except Exception as e:
        raise OpscopeError(f"{label}: not a readable torch.export program ({_short(e)})") from None
    finally:
        quiet.setLevel(level)
    module = import_program(prog, None, label)
    try:
        return lower_torch(module)
    except OpscopeError as e:
        raise OpscopeError(f"{label}: {e}") from None


def _short(e: BaseException, limit: int = 240) -> str:
    """The first meaningful line of an exception message, trimmed."""
    lines = [ln.strip() for ln in str(e).splitlines() if ln.strip()]
    text = lines[0] if lines else type(e).__name__
    text = f"{type(e).__name__}: {text}"
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _hint(e: BaseException) -> str:
    text = str(e)
    for key, hint in _TRY.items():
        if key.lower() in text.lower():
            return hint
    return "call the model once eagerly with the same inputs, then simplify forward() where the message points"

