"""Tensor files: the reference's `.tensor` matrices, `.npy` and `.safetensors`, read as float32.

`.tensor` (reference §3.13) is a u32 little-endian row count, a u32 little-endian column
count, then rows·cols little-endian f32 in row-major order: lossless for 2-D float32.
`.npy` holds one array of any shape; `.safetensors` holds many named tensors (f16, bf16,
f32 and f64 are read, as float32; bf16 through its bits, so no extra package is needed).

Every save is atomic: the bytes go to a hidden temporary file in the target's directory,
which `os.replace` then moves over the target, so a crash or an error never leaves a
half-written file (nor a temporary one). Every problem is one `OpscopeError` line naming
the file, what is wrong and what to do, raised before anything is read or computed.

    save_tensor("w.tensor", w)                 # 2-D only
    save_tensors("out/", {"fc1": w1, "fc2": w2}, fmt="safetensors")   # out/tensors.safetensors
    load_tensors("out/")                       # {"fc1": ..., "fc2": ...}, float32
    check_matrix("fc1", x)                     # a finite float32 [rows, cols], rows, cols >= 2
"""

from __future__ import annotations

import os
import re
import struct
from collections.abc import Mapping
from pathlib import Path
from typing import BinaryIO

import numpy as np

from opscope.errors import OpscopeError
from opscope.jobs.shards import atomic_write

SUFFIXES = (".tensor", ".npy", ".safetensors")
FORMATS = ("tensor", "npy", "safetensors")
SAFETENSORS_FILE = "tensors.safetensors"  # the one file `save_tensors(..., fmt="safetensors")` writes
HEADER = struct.Struct("<II")  # .tensor: rows, cols
LAYOUT = "u32 rows, u32 cols, f32 row-major"
_FLOAT_CODES = {"F16": "<f2", "F32": "<f4", "F64": "<f8"}
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")


# ---------------------------------------------------------------------------------------- saving


def save_tensor(path: str | os.PathLike, x: np.ndarray) -> None:
    """Write one tensor to `path`, in the format its suffix names (`.tensor`: 2-D, stored as
    f32; `.npy`: any shape; `.safetensors`: one tensor named by the file's stem). Float
    arrays keep their dtype in `.npy` (f16, f32, f64) and `.safetensors` (also bf16);
    anything else is stored as float32 (bf16 in `.npy` too: exactly). Atomic: the target
    is either untouched or complete."""
    path = Path(path)
    suffix = _suffix(path)
    data = _storable(path, x, suffix)
    atomic_write(path, lambda f: _write(f, suffix, {path.stem: data}))


def save_tensors(directory: str | os.PathLike, tensors: Mapping[str, np.ndarray], fmt: str = "tensor") -> list[Path]:
    """Write `tensors` under `directory` (created if missing): one `<name>.tensor` or
    `<name>.npy` per tensor (characters outside [A-Za-z0-9._-] of a name become "_"), or
    all of them in one `tensors.safetensors` (names kept as they are). Returns the paths
    written, in the mapping's order; each file is written atomically."""
    if fmt not in FORMATS:
        raise OpscopeError(f"save_tensors: unknown format '{fmt}': use one of {', '.join(FORMATS)}")
    directory = Path(directory)
    if directory.exists() and not directory.is_dir():
        raise OpscopeError(f"{directory}: exists and is not a directory: name a directory to save tensors in")
    suffix = "." + fmt
    if fmt == "safetensors":
        target = directory / SAFETENSORS_FILE
        data = {str(name): _storable(target, x, suffix, str(name)) for name, x in tensors.items()}
        jobs = [(target, data)] if data else []
    else:
        by_file: dict[Path, str] = {}
        jobs = []
        for name, x in tensors.items():
            target = directory / (_file_name(str(name)) + suffix)
            if target in by_file:
                raise OpscopeError(
                    f"{directory}: tensors '{by_file[target]}' and '{name}' would both be saved as "
                    f"{target.name}: rename one (characters outside [A-Za-z0-9._-] become '_')"
                )
            by_file[target] = str(name)
            jobs.append((target, {target.stem: _storable(target, x, suffix, str(name))}))
    directory.mkdir(parents=True, exist_ok=True)
    for target, data in jobs:
        atomic_write(target, lambda f, data=data: _write(f, suffix, data))
    return [target for target, _ in jobs]


def _file_name(name: str) -> str:
    """A tensor name as a file stem: unsafe characters replaced, never empty or hidden."""
    safe = _UNSAFE.sub("_", name)
    return "_" + safe if not safe or safe.startswith(".") else safe


def _storable(path: Path, x, suffix: str, name: str | None = None) -> np.ndarray:
    """`x` as the array the format stores, or a one-line error before anything is written."""
    what = f"{path}: tensor '{name}'" if name is not None else str(path)
    try:
        arr = np.asarray(x)
    except (TypeError, ValueError) as e:
        raise OpscopeError(f"{what}: not an array ({_one_line(e)}): pass a numpy array") from None
    if arr.dtype.kind not in "fiub" and not _is_bf16(arr):
        raise OpscopeError(f"{what}: dtype {arr.dtype} cannot be saved: pass a float array")
    if suffix == ".tensor":
        if arr.ndim != 2:
            raise OpscopeError(
                f"{what}: the .tensor format holds a 2-D matrix ({LAYOUT}), got shape "
                f"{_shape(arr.shape)}: reshape to [rows, cols] or save as .npy or .safetensors"
            )
        if max(arr.shape) > 0xFFFFFFFF:
            raise OpscopeError(f"{what}: shape {_shape(arr.shape)} does not fit the u32 header: save as .npy")
        return np.asarray(arr, dtype="<f4", order="C")
    if _is_bf16(arr):  # numpy's .npy cannot name bf16: stored as float32, exactly
        return np.asarray(arr, order="C") if suffix == ".safetensors" else _bf16_to_f32(arr)
    if arr.dtype.kind == "f" and arr.dtype.itemsize in (2, 4, 8):
        return np.asarray(arr, dtype=arr.dtype.newbyteorder("<"), order="C")
    return np.asarray(arr, dtype=np.float32, order="C")


def _write(f: BinaryIO, suffix: str, tensors: dict[str, np.ndarray]) -> None:
    """Write `tensors` to the open file `f` in the format of `suffix`."""
    if suffix == ".tensor":
        (x,) = tensors.values()
        _write_reference(f, x)
    elif suffix == ".npy":
        (x,) = tensors.values()
        np.save(f, x, allow_pickle=False)
    else:
        from safetensors.numpy import save

        f.write(save(tensors))


def _write_reference(f: BinaryIO, x: np.ndarray) -> None:
    """The `.tensor` bytes of a 2-D little-endian f32 array."""
    f.write(HEADER.pack(*x.shape))
    f.write(x.tobytes(order="C"))


# --------------------------------------------------------------------------------------- loading


def load_tensor(path: str | os.PathLike) -> np.ndarray:
    """The one tensor in the file `path`, as float32 (a `.safetensors` file holding several
    tensors is refused: `load_tensors` reads them all)."""
    path = Path(path)
    _exists(path)
    if path.is_dir():
        raise OpscopeError(f"{path}: is a directory: use load_tensors to read every tensor file in it")
    tensors = _read_file(path)
    if len(tensors) != 1:
        names = ", ".join(list(tensors)[:6]) + (", ..." if len(tensors) > 6 else "")
        what = f"holds {len(tensors)} tensors ({names})" if tensors else "holds no tensor"
        raise OpscopeError(f"{path}: {what}, not one: use load_tensors to read them by name")
    return next(iter(tensors.values()))


def load_tensors(path: str | os.PathLike) -> dict[str, np.ndarray]:
    """Every tensor in `path`, by name, as float32: a file (a `.safetensors` gives each
    tensor by its key, a `.tensor` or `.npy` gives {stem: tensor}), or a directory (every
    `*.tensor`, `*.npy` and `*.safetensors` in it, files sorted by name; a name given by
    two files is refused)."""
    path = Path(path)
    _exists(path)
    if not path.is_dir():
        return _read_file(path)
    files = sorted(p for p in path.iterdir() if p.suffix in SUFFIXES and p.is_file() and not p.name.startswith("."))
    if not files:
        what = "is empty" if not any(path.iterdir()) else "has no tensor files"
        raise OpscopeError(f"{path}: {what}: no *.tensor, *.npy or *.safetensors files in it")
    out: dict[str, np.ndarray] = {}
    origin: dict[str, str] = {}
    for file in files:
        for name, x in _read_file(file).items():
            if name in out:
                raise OpscopeError(
                    f"{path}: tensor name '{name}' comes from both {origin[name]} and {file.name}: "
                    "rename or move one of them"
                )
            out[name], origin[name] = x, file.name
    return out


def _exists(path: Path) -> None:
    if not path.exists():
        raise OpscopeError(f"{path}: no such file or directory: check the path")


def _read_file(path: Path) -> dict[str, np.ndarray]:
    suffix = _suffix(path)
    if suffix == ".tensor":
        return {path.stem: _read_reference(path)}
    if suffix == ".npy":
        return {path.stem: _read_npy(path)}
    return _read_safetensors(path)


def _suffix(path: Path) -> str:
    if path.suffix not in SUFFIXES:
        got = f"suffix '{path.suffix}'" if path.suffix else "no suffix"
        raise OpscopeError(f"{path}: {got} is no tensor format: name it .tensor ({LAYOUT}), .npy or .safetensors")
    return path.suffix


def _read_reference(path: Path) -> np.ndarray:
    """A `.tensor` file, its header checked against its length before the data is read."""
    with open(path, "rb") as f:
        head = f.read(HEADER.size)
        if len(head) < HEADER.size:
            raise OpscopeError(
                f"{path}: {len(head)} bytes, too short for the 8-byte header: truncated or not a "
                f".tensor file ({LAYOUT})"
            )
        rows, cols = HEADER.unpack(head)
        want = rows * cols * 4
        have = os.fstat(f.fileno()).st_size - HEADER.size
        if have != want:
            raise OpscopeError(
                f"{path}: header says {rows}×{cols} f32 ({want} bytes of data) but the file holds "
                f"{have}: truncated or not a .tensor file ({LAYOUT})"
            )
        data = np.frombuffer(f.read(want), dtype="<f4")
    return data.astype(np.float32).reshape(rows, cols)


def _read_npy(path: Path) -> np.ndarray:
    try:
        x = np.load(path, allow_pickle=False)
    except Exception as e:  # numpy raises ValueError, OSError, EOFError... for a damaged file
        raise OpscopeError(f"{path}: unreadable .npy file ({_one_line(e)}): rewrite it with numpy.save") from None
    return _as_float32(path, "", x)


def _read_safetensors(path: Path) -> dict[str, np.ndarray]:
    """Every tensor of a `.safetensors` file, as float32. bf16 is read from its bits when the
    package's numpy loader cannot make a numpy array of it."""
    try:
        from safetensors.numpy import load_file
    except ImportError:
        raise OpscopeError(
            f"{path}: reading .safetensors needs the 'safetensors' package: pip install safetensors"
        ) from None
    try:
        raw = load_file(str(path))
    except Exception as e:  # the package raises SafetensorError, TypeError... for what it cannot read
        try:
            raw = _read_safetensors_raw(path)
        except OpscopeError:
            raise
        except Exception:
            raise OpscopeError(
                f"{path}: unreadable .safetensors file ({_one_line(e)}): rewrite it with safetensors.numpy.save_file"
            ) from None
    return {name: _as_float32(path, name, x) for name, x in raw.items()}


def _read_safetensors_raw(path: Path) -> dict[str, np.ndarray]:
    """The safetensors layout read directly (u64 LE header size, a JSON header, the data),
    for the dtypes the package's numpy loader cannot map (bf16 without ml_dtypes)."""
    import json

    blob = path.read_bytes()
    (size,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8 : 8 + size])
    data = memoryview(blob)[8 + size :]
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        begin, end = info["data_offsets"]
        dtype = info["dtype"]
        if dtype == "BF16":
            out[name] = _bf16_to_f32(np.frombuffer(data[begin:end], dtype="<u2").reshape(info["shape"]))
        elif dtype in _FLOAT_CODES:
            out[name] = np.frombuffer(data[begin:end], dtype=_FLOAT_CODES[dtype]).reshape(info["shape"])
        else:
            raise OpscopeError(
                f"{path}: tensor '{name}' is {dtype}; only F16, BF16, F32 and F64 tensors are read: "
                "convert it to a float type"
            )
    return out


def _is_bf16(x: np.ndarray) -> bool:
    return x.dtype.name == "bfloat16"  # ml_dtypes' bfloat16, as safetensors' loader returns it


def _as_float32(path: Path, name: str, x: np.ndarray) -> np.ndarray:
    """A loaded array as float32 (bf16 through its bits: exact), or a one-line refusal."""
    what = f"{path}: tensor '{name}'" if name else str(path)
    if _is_bf16(x):
        return _bf16_to_f32(x)
    if x.dtype.kind != "f" or x.dtype.itemsize not in (2, 4, 8):
        raise OpscopeError(
            f"{what}: dtype {x.dtype}; only f16, bf16, f32 and f64 tensors are read: convert it to a float type"
        )
    out = x.astype(np.float32, copy=False)
    return out if out.flags.writeable else out.copy()  # the loader's memory map is read-only


def _bf16_to_f32(x: np.ndarray) -> np.ndarray:
    """bf16 values (any 2-byte dtype holding bf16 bits) as float32: the bits shifted up 16, exact."""
    bits = np.asarray(x, order="C").view(np.uint16).astype(np.uint32) << 16
    return bits.view(np.float32).reshape(x.shape)


# ---------------------------------------------------------------------------------------- checks


def check_matrix(name: str, x) -> np.ndarray:
    """`x` as a float32 2-D array with both dims >= 2 and every value finite: what probes and
    decompositions take; else a one-line error naming `name` and what to do."""
    arr = np.asarray(x)
    if arr.dtype.kind not in "fiub" and not _is_bf16(arr):
        raise OpscopeError(f"{name}: dtype {arr.dtype}; probes and decompositions need a float weight")
    if arr.ndim == 0:
        raise OpscopeError(
            f"{name}: a 0-D tensor (one value); probes and decompositions need a 2-D weight [rows, cols]"
        )
    if arr.ndim == 1:
        raise OpscopeError(
            f"{name}: a 1-D tensor of {arr.size} values; probes and decompositions need a 2-D weight [rows, cols]"
        )
    if arr.ndim > 2:
        rest = int(np.prod(arr.shape[1:]))
        raise OpscopeError(
            f"{name}: a {arr.ndim}-D tensor of shape {_shape(arr.shape)}; probes and decompositions "
            f"need a 2-D weight [rows, cols]: reshape it to [out, rest] ({arr.shape[0]}×{rest})"
        )
    if min(arr.shape) < 2:
        raise OpscopeError(f"{name}: shape {_shape(arr.shape)}; both dims must be ≥ 2 for probes and decompositions")
    out = _bf16_to_f32(arr) if _is_bf16(arr) else np.asarray(arr, dtype=np.float32)
    bad = int(np.count_nonzero(~np.isfinite(out)))
    if bad:
        raise OpscopeError(f"{name}: {bad} NaN/Inf value{'s' if bad != 1 else ''}; probes need finite weights")
    return out


def _shape(shape) -> str:
    return "×".join(str(d) for d in shape) if len(shape) else "()"


def _one_line(e: BaseException) -> str:
    text = " ".join(str(e).split()) or type(e).__name__
    return text if len(text) <= 200 else text[:197] + "..."
