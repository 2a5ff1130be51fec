"""Where a module's externalized weights live, and their bytes read from there.

A module whose weights went to a parameter file (`externalize-weights`) says so in a module
attribute, `opscope.parameters = {scope = "/abs/path.irpa"}`, and refers to each weight by a
`#flow.parameter.named<"scope"::"key">` global. This module reads and writes the first (the
files a module names), reads the (scope, key) of a parameter attribute, and a parameter's
bytes, through one memory-mapped `iree.runtime.ParameterIndex` per file and process (IREE's
own reader: `.irpa`, `.safetensors` and `.gguf` alike). A missing or unreadable file is a
one-line `OpscopeError` naming it.
"""

from __future__ import annotations

import atexit
import os
import re
from dataclasses import dataclass

from iree.compiler import ir

from opscope.errors import OpscopeError

PARAMETERS_ATTR = "opscope.parameters"
SCOPE = "model"  # the parameter scope opscope writes a model's weights under
MIN_BYTES = 4096  # tensors smaller than this stay inside the module
# a model whose weights (or model file) come to this many bytes has them written to a parameter
# file by default (`parameters=None` of profile, whatif, parity): below it the module keeps them
AUTO_BYTES = 128 << 20
# what a float32 weight may be stored as in the parameter file (`weights_dtype`); the model reads it
# widened back to f32, so it computes as exported, on weights rounded to the stored type
WEIGHT_DTYPES = ("bf16", "f16")
_REF = re.compile(r'^#(?:flow|stream)\.parameter\.named<(?:"((?:[^"\\]|\\.)*)"::)?"((?:[^"\\]|\\.)*)">')


def check_weights_dtype(dtype: str | None) -> str | None:
    """`dtype` if it is one a float32 weight can be stored as (or None); else a one-line error."""
    if dtype is not None and dtype not in WEIGHT_DTYPES:
        raise OpscopeError(f"weights dtype must be one of {', '.join(WEIGHT_DTYPES)}, got {dtype!r}")
    return dtype


def parameter_files(module: ir.Module) -> dict[str, str]:
    """Scope -> parameter file of `module` (empty when its weights are inside it)."""
    attrs = module.operation.attributes
    if PARAMETERS_ATTR not in attrs:
        return {}
    table = ir.DictAttr(attrs[PARAMETERS_ATTR])
    return {table[i].name: ir.StringAttr(table[i].attr).value for i in range(len(table))}


def set_parameter_files(module: ir.Module, files: dict[str, str]) -> None:
    """Record on `module` that its parameters of each scope live in that file."""
    with module.context:
        module.operation.attributes[PARAMETERS_ATTR] = ir.DictAttr.get(
            {scope: ir.StringAttr.get(path) for scope, path in sorted(files.items())}
        )


def parameter_ref(attr: ir.Attribute | None) -> tuple[str, str] | None:
    """(scope, key) of a `#flow/#stream.parameter.named` attribute, else None."""
    if attr is None:
        return None
    found = _REF.match(str(attr))
    return (found.group(1) or "", found.group(2)) if found else None


@dataclass
class _Mapped:
    """One parameter file as this process maps it: the file's (mtime, size) when it was opened,
    IREE's index over it, and its key -> entry table once a parameter was read by key."""

    stamp: tuple[int, int]
    index: object
    entries: dict | None = None


_mapped: dict[str, _Mapped] = {}  # absolute path -> its mapping, oldest first
_MAPPED_MAX = 16  # files kept mapped at once: the oldest is forgotten when another is opened


def open_index(path: str):
    """The `iree.runtime.ParameterIndex` over `path`, mapped once per process (reopened when the
    file changes on disk) until `release_index` forgets it."""
    return _mapped_file(path).index


def _mapped_file(path: str) -> _Mapped:
    try:
        stat = os.stat(path)
    except OSError:
        raise OpscopeError(
            f"parameter file {path} is missing: the module's weights live there; "
            "import the model again to write it (or put the file back)"
        ) from None
    key, stamp = os.path.abspath(path), (stat.st_mtime_ns, stat.st_size)
    held = _mapped.get(key)
    if held is None or held.stamp != stamp:
        held = _mapped[key] = _Mapped(stamp, _load_index(key))
        while len(_mapped) > _MAPPED_MAX:
            _mapped.pop(next(iter(_mapped)))
    return held


def _load_index(path: str):
    import iree.runtime as rt

    index = rt.ParameterIndex()
    try:
        index.load(path)
    except (ValueError, RuntimeError, IndexError, OSError) as e:  # IndexError: a file cut inside its data
        found = re.search(r"\b[A-Z_]{4,}; (.*)", " ".join(str(e).split()))  # after IREE's status code
        detail = (found.group(1) if found else " ".join(str(e).split()))[:160]
        raise OpscopeError(
            f"parameter file {path} cannot be read as a parameter archive ({detail}): "
            "import the model again to rewrite it"
        ) from None
    return index


def parameter_bytes(path: str, key: str) -> bytes:
    """The stored bytes of parameter `key` in the file `path` (a splat expanded)."""
    mapped = _mapped_file(path)
    if mapped.entries is None:  # listed once per mapping, not per parameter read
        mapped.entries = {mapped.index[i].key: mapped.index[i] for i in range(len(mapped.index))}
    if key not in mapped.entries:
        raise OpscopeError(f"parameter file {path} has no parameter '{key}': import the model again to rewrite it")
    entry = mapped.entries[key]
    if entry.is_splat:
        pattern = bytes(entry.splat_pattern)
        return (pattern * (entry.length // max(len(pattern), 1) + 1))[: entry.length]
    return bytes(entry.file_view)


def narrow_file(path: str, keys: set[str], dtype: str) -> None:
    """Rewrite the parameter file `path` with its float32 parameters `keys` stored as `dtype` (bf16
    rounded to nearest even, as torch's `.to(torch.bfloat16)`; f16), every other one as it was;
    atomically (a partly written file never has its name). A one-line error names the file."""
    import iree.runtime as rt
    import ml_dtypes
    import numpy as np
    from iree.runtime.io import parameter_index_add_numpy_ndarray

    narrow = {"bf16": ml_dtypes.bfloat16, "f16": np.float16}[check_weights_dtype(dtype)]
    source, index, held = _load_index(path), rt.ParameterIndex(), []
    tmp = f"{path}.narrow{os.getpid()}"
    try:
        for i in range(len(source)):
            entry = source[i]
            if entry.is_splat:
                data = np.frombuffer(parameter_bytes(path, entry.key), np.uint8)
            else:
                data = np.frombuffer(entry.file_view, np.uint8)
            if entry.key in keys:
                data = data.view(np.float32).astype(narrow).view(np.uint16)
            held.append(data)  # alive until the archive is written
            parameter_index_add_numpy_ndarray(index, entry.key, data)
        index.create_archive_file(tmp)
        os.replace(tmp, path)
    except (OSError, ValueError, RuntimeError) as e:
        if os.path.exists(tmp):
            os.unlink(tmp)
        detail = " ".join(str(e).split())[:200]
        raise OpscopeError(f"could not store the weights as {dtype} in the parameter file {path}: {detail}") from None
    finally:
        release_index(path)


def release_index(path: str) -> None:
    """Forget this process's mapping of `path`: its pages leave the process once no loaded module
    holds a provider over it (a module loaded from it keeps its own until it is released)."""
    _mapped.pop(os.path.abspath(path), None)


def release_indexes() -> None:
    """Forget every mapping (as `release_index`): called when a temporary parameter file is
    deleted, so its mapping does not hold the disk space."""
    _mapped.clear()


atexit.register(release_indexes)  # an index still held at exit makes nanobind report a leak
