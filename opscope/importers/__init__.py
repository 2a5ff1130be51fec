"""Every model source lands on one canonical level: linalg on tensors in a plain `func.func`.

`import_source` only dispatches; each framework has its own module, imported lazily so
a missing optional framework costs nothing until asked for (then a one-line error names
the extra). Sources: `.mlir`/`.mlirbc` (linalg, StableHLO or torch dialect), `.onnx`,
`.jaxexport` (`jax.export.Exported.serialize()` bytes), `.pt2` (`torch.export.save` of an
ExportedProgram), an in-memory `ir.Module`, a
`jax.export.Exported`, a torch `nn.Module` or a JAX callable with `example_args`.

Given a `parameters` path, the model's weights go to that IREE parameter file (`.irpa`) and
the module refers to them by name: torch models write them straight from their tensors
(`torch_parameters`, never through the module); every other route imports first and then
moves them out with the `externalize-weights` pass.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from iree.compiler import ir

from opscope.errors import OpscopeError

SUFFIXES: dict[str, str] = {
    ".mlir": "MLIR text (linalg, StableHLO or torch dialect)",
    ".mlirbc": "MLIR bytecode (linalg, StableHLO or torch dialect)",
    ".onnx": "an ONNX model",
    ".jaxexport": "a jax.export artifact (Exported.serialize() bytes)",
    ".pt2": "a torch.export program (torch.export.save)",
}

# Model files a framework imports (holding the whole model in memory while it does).
FRAMEWORK_SUFFIXES = (".onnx", ".jaxexport", ".pt2")


def _is_torch_module(source: Any) -> bool:
    """A torch nn.Module, recognised without importing torch."""
    return any(c.__module__ == "torch.nn.modules.module" and c.__name__ == "Module" for c in type(source).__mro__)


def _is_jax_exported(source: Any) -> bool:
    """A `jax.export.Exported`, recognised without importing jax."""
    return type(source).__module__.startswith("jax") and hasattr(source, "mlir_module_serialized")


def describe(source: Any) -> str:
    """What `source` is, in a few words, for error messages."""
    if isinstance(source, (str, Path)):
        return f"{SUFFIXES.get(Path(source).suffix.lower(), 'a file')} at {source}"
    if isinstance(source, ir.Module):
        return "an MLIR module"
    if _is_jax_exported(source):
        return f"a jax.export artifact of {getattr(source, 'fun_name', '?')}"
    if _is_torch_module(source):
        return f"a torch module {type(source).__name__}"
    if callable(source):
        return f"a JAX callable {getattr(source, '__name__', type(source).__name__)}"
    return f"a {type(source).__name__}"


def import_source(
    source: Any,
    *,
    name: str | None = None,
    example_args: Sequence[Any] | None = None,
    parameters: str | Path | None = None,
    isolated: bool = True,
    weights_dtype: str | None = None,
) -> ir.Module:
    """Import `source` (a path, '-', a module or a jax/torch model traced on `example_args`)
    as canonical linalg; `name` labels it in errors; `parameters`: the `.irpa` file its
    weights are written to (None: they stay in the module). A framework's model file with
    `parameters` is imported in a child process unless not `isolated` (`importers.isolated`).
    `weights_dtype` (bf16, f16): float32 weights are stored so in the file and read widened to f32
    (a torch model's straight from its tensors, any other's by `externalize-weights{dtype=...}`)."""
    suffix = Path(source).suffix.lower() if isinstance(source, Path | str) and source != "-" else ""
    torch_model = suffix == ".pt2" or (_is_torch_module(source) and example_args is not None)
    if weights_dtype is not None and parameters is None:
        raise OpscopeError(
            f"{name or describe(source)}: weights_dtype={weights_dtype} stores the weights in a parameter file: "
            "give parameters too"
        )
    if suffix in FRAMEWORK_SUFFIXES and parameters is not None and isolated:
        _check_path(Path(source))
        from opscope.importers.isolated import import_isolated

        return import_isolated(source, name, parameters, weights_dtype)
    if suffix == ".pt2":
        _check_path(Path(source))
        return _load("torch_fx", "import_exported_file", "torch")(
            source, name=name, parameters=parameters, weights_dtype=weights_dtype
        )
    if torch_model:
        return _load("torch_fx", "import_torch", "torch")(
            source, tuple(example_args), name=name, parameters=parameters, weights_dtype=weights_dtype
        )
    module = _import(source, name, example_args)
    if parameters is None:
        return module
    from opscope.passes.externalize_weights import externalize

    return externalize(module, parameters, weights_dtype)


def _import(source: Any, name: str | None, example_args: Sequence[Any] | None) -> ir.Module:
    """`import_source` with the weights left in the module."""
    if isinstance(source, ir.Module):
        from opscope.importers.mlir_file import to_linalg

        return to_linalg(source)
    if isinstance(source, str) and source == "-":
        return _load("mlir_file", "import_mlir", None)("-")
    if isinstance(source, (str, Path)):
        return _import_path(Path(source), name)
    if _is_jax_exported(source):
        from opscope.importers.jax_export import import_jax_export

        return import_jax_export(source, name=name)
    if not (_is_torch_module(source) or callable(source)):
        raise OpscopeError(f"cannot import {describe(source)}: expected a path ({', '.join(SUFFIXES)}) or a model")
    if example_args is None:
        raise OpscopeError(f"importing {describe(source)} needs example_args to trace it with")
    if _is_torch_module(source):
        return _load("torch_fx", "import_torch", "torch")(source, tuple(example_args), name=name)
    return _load("jax_export", "import_jax", "jax")(source, *example_args, name=name)


def _load(module: str, function: str, extra: str | None) -> Callable[..., ir.Module]:
    """`opscope.importers.<module>.<function>`, imported now; a missing framework names its extra."""
    try:
        mod = importlib.import_module(f"opscope.importers.{module}")
    except ImportError as e:
        if extra is None or (e.name or "").startswith("opscope"):
            raise
        raise OpscopeError(
            f"importing {extra} models needs the {extra} extra: pip install 'opscope[{extra}]'"
        ) from None
    return getattr(mod, function)


def _check_path(path: Path) -> None:
    """Refuse an unknown suffix, a missing file or a directory, in one line."""
    suffix = path.suffix.lower()
    if suffix not in SUFFIXES:
        raise OpscopeError(f"{path}: unknown suffix '{suffix}'; opscope imports {', '.join(SUFFIXES)}")
    if not path.exists():
        raise OpscopeError(f"no such file: {path}")
    if path.is_dir():
        raise OpscopeError(f"{path} is a directory, not {SUFFIXES[suffix]}")


def _import_path(path: Path, name: str | None) -> ir.Module:
    """Dispatch a file on its suffix."""
    _check_path(path)
    suffix = path.suffix.lower()
    if suffix in (".mlir", ".mlirbc"):
        from opscope.importers.mlir_file import import_mlir

        return import_mlir(path)
    if suffix == ".onnx":
        return _load("onnx_model", "import_onnx", "onnx")(path, name=name)
    if suffix == ".pt2":
        return _load("torch_fx", "import_exported_file", "torch")(path, name=name)
    return _load("jax_export", "import_jax_export", "jax")(path, name=name or str(path))
