"""JAX → canonical linalg: `jax.jit(fn).lower(*args)` or a `jax.export` artifact, via StableHLO.

A callable is lowered with `keep_unused=True` and printed with debug info, so the function
takes the flattened leaves of `example_args` (`jax.tree_util.tree_leaves`) in order and
every op keeps its name stack (the site names). A `jax.export.Exported`, or its
`serialize()` bytes in a `.jaxexport` file, brings its StableHLO portable artifact (VHLO
bytecode, locations included), which IREE's pipeline deserializes; its printed text is
the fallback when the artifact is newer than IREE's VHLO.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from iree.compiler import ir

from opscope.errors import OpscopeError
from opscope.importers.stablehlo import lower_stablehlo
from opscope.ir.arguments import dynamic_dim_error
from opscope.ir.loading import new_context, parse_module


def require_jax():
    """The `jax` module, or a one-line error saying which extra installs it."""
    try:
        import jax
        import jax.export  # noqa: F401  (a submodule; older jax lacks it)
    except ImportError:
        raise OpscopeError("importing jax models needs the jax extra: pip install 'opscope[jax]'") from None
    return jax


def _short(e: BaseException) -> str:
    """The first line of a framework's message, bounded."""
    lines = [ln for ln in str(e).strip().splitlines() if ln.strip()]
    first = lines[0] if lines else type(e).__name__
    return first if len(first) <= 200 else first[:197] + "..."


def import_jax(
    fn: Callable[..., Any], *example_args: Any, name: str | None = None, context: ir.Context | None = None
) -> ir.Module:
    """Trace `fn` on `example_args` with `jax.jit`, lower its StableHLO to linalg."""
    jax = require_jax()
    label = name or getattr(fn, "__name__", None) or type(fn).__name__
    try:
        lowered = jax.jit(fn, keep_unused=True).lower(*example_args)
        text = lowered.as_text(dialect="stablehlo", debug_info=True)
    except Exception as e:  # jax's tracing errors are many types; the message is what helps
        raise OpscopeError(
            f"jax could not trace {label}: {type(e).__name__}: {_short(e)} "
            "(check that example_args match its signature and that it is jit-compatible)"
        ) from None
    module = parse_module(text, context or new_context(), label)
    return lower_stablehlo(module)


_MLIR_TYPES = {"float32": "f32", "float16": "f16", "bfloat16": "bf16", "float64": "f64", "int64": "i64"}
_MLIR_TYPES.update({"int32": "i32", "int16": "i16", "int8": "i8", "uint8": "ui8", "bool": "i1"})


def _refuse_symbolic(exported) -> None:
    """A symbolic dim (`jax.export.symbolic_shape`) in an argument is the one line every route gives
    for a dynamic dim, before lowering (IREE's StableHLO pipeline would fail at a reshape instead)."""
    for i, aval in enumerate(getattr(exported, "in_avals", ())):
        dims = [d for d, size in enumerate(aval.shape) if not isinstance(size, int)]
        if dims:
            shape = "x".join("?" if d in dims else str(size) for d, size in enumerate(aval.shape))
            raise dynamic_dim_error(i, f"tensor<{shape}x{_MLIR_TYPES.get(str(aval.dtype), aval.dtype)}>", dims)


def import_jax_export(source: Any, *, name: str | None = None, context: ir.Context | None = None) -> ir.Module:
    """Lower a `jax.export.Exported`, its `serialize()` bytes or a `.jaxexport` file to linalg."""
    jax = require_jax()
    label = name or (str(source) if isinstance(source, (str, Path)) else "<jax.export>")
    if isinstance(source, (str, Path)):
        path = Path(source)
        if not path.is_file():
            raise OpscopeError(f"no such file: {path}")
        source = path.read_bytes()
    if isinstance(source, (bytes, bytearray, memoryview)):
        try:
            exported = jax.export.deserialize(bytearray(source))
        except Exception as e:  # flatbuffers raises assorted types on garbage
            raise OpscopeError(
                f"{label} is not a jax.export serialization ({type(e).__name__}: {_short(e)}); "
                "write one with jax.export.export(jax.jit(f))(*args).serialize()"
            ) from None
    else:
        exported = source
    _refuse_symbolic(exported)
    ctx = context or new_context()
    try:
        module = ir.Module.parse(bytes(exported.mlir_module_serialized), ctx)
    except ir.MLIRError:  # an artifact newer than IREE's VHLO: its printed text may still parse
        module = parse_module(exported.mlir_module(), ctx, label)
    return lower_stablehlo(module)
