"""Tensor files (`opscope.probe.tensors`): round trips, the reference's byte layout, refusals, atomic saves.

Round trips are bit-exact (compared as raw bits, so -0.0 and NaN payloads count); the
`.tensor` layout is checked byte for byte against `struct`, both ways; every refusal is one
line naming the file and the problem; a save that fails midway leaves nothing behind.
"""

from __future__ import annotations

import os
import struct

import ml_dtypes
import numpy as np
import pytest
from safetensors.numpy import load_file, save_file

from opscope.errors import OpscopeError
from opscope.probe import tensors
from opscope.probe.tensors import check_matrix, load_tensor, load_tensors, save_tensor, save_tensors


def bits_equal(a: np.ndarray, b: np.ndarray) -> bool:
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


def awkward(shape, seed: int = 0) -> np.ndarray:
    """float32 values with -0.0, ±inf, a NaN, a subnormal and the extremes in them."""
    x = np.random.default_rng(seed).standard_normal(shape).astype(np.float32)
    flat = x.reshape(-1)
    special = np.array([-0.0, np.inf, -np.inf, np.nan, 1e-45, np.finfo(np.float32).max], np.float32)
    flat[: min(len(flat), len(special))] = special[: len(flat)]
    return x


def one_line_error(excinfo, *words: str) -> str:
    message = str(excinfo.value)
    assert "\n" not in message, message
    for word in words:
        assert word in message, f"{word!r} not in {message!r}"
    return message


# ------------------------------------------------------------------------------------ round trips


@pytest.mark.parametrize(
    "suffix,shape",
    [
        (".tensor", (5, 7)),
        (".tensor", (0, 3)),
        (".npy", (2, 3, 4)),
        (".npy", ()),
        (".safetensors", (4, 6)),
        (".safetensors", (3,)),
    ],
)
def test_round_trip_is_bit_exact(tmp_path, suffix, shape):
    x = awkward(shape)
    path = tmp_path / f"w{suffix}"
    save_tensor(path, x)
    back = load_tensor(path)
    assert bits_equal(back, x)
    assert load_tensors(path).keys() == {"w"}
    assert bits_equal(load_tensors(path)["w"], x)


def test_save_tensors_round_trips_every_format(tmp_path):
    named = {"layer0.attn.q": awkward((4, 8), 1), "layer0/ffn up": awkward((8, 4), 2), "head": awkward((3, 3), 3)}
    for fmt in ("tensor", "npy", "safetensors"):
        folder = tmp_path / fmt / "nested"
        paths = save_tensors(folder, named, fmt=fmt)
        if fmt == "safetensors":
            assert paths == [folder / "tensors.safetensors"]
            back = load_tensors(folder)
            assert list(back) == sorted(named)  # keys as given
        else:
            assert [p.name for p in paths] == [f"layer0.attn.q.{fmt}", f"layer0_ffn_up.{fmt}", f"head.{fmt}"]
            back = load_tensors(folder)
            assert list(back) == ["head", "layer0.attn.q", "layer0_ffn_up"]  # sorted by file name
            back = {
                "layer0.attn.q": back["layer0.attn.q"],
                "layer0/ffn up": back["layer0_ffn_up"],
                "head": back["head"],
            }
        for name, x in named.items():
            assert bits_equal(back[name], x), (fmt, name)
        assert not [p for p in folder.iterdir() if p.name.startswith(".")]  # no temporary file left


def test_half_precision_safetensors_read_as_exact_float32(tmp_path):
    rng = np.random.default_rng(4)
    f16 = rng.standard_normal((6, 5)).astype(np.float16)
    bf16 = rng.standard_normal((5, 6)).astype(ml_dtypes.bfloat16)
    f64 = rng.standard_normal((2, 3))
    path = tmp_path / "mixed.safetensors"
    save_file({"a16": f16, "b16": bf16, "d64": f64}, str(path))
    got = load_tensors(path)
    assert bits_equal(got["a16"], f16.astype(np.float32))
    assert bits_equal(got["b16"], bf16.astype(np.float32))  # ml_dtypes' own widening: exact
    expected = (bf16.view(np.uint16).astype(np.uint32) << 16).view(np.float32)
    assert bits_equal(got["b16"], expected)
    assert bits_equal(got["d64"], f64.astype(np.float32))
    with pytest.raises(OpscopeError) as e:
        load_tensor(path)
    one_line_error(e, "mixed.safetensors", "3 tensors", "load_tensors")


def test_bf16_read_from_its_bits_when_the_loader_cannot(tmp_path, monkeypatch):
    bf16 = np.random.default_rng(5).standard_normal((3, 4)).astype(ml_dtypes.bfloat16)
    path = tmp_path / "b.safetensors"
    save_file({"b": bf16, "f": np.arange(4, dtype=np.float32)}, str(path))

    def refuse(*_args, **_kwargs):
        raise TypeError("data type 'bfloat16' not understood")

    monkeypatch.setattr("safetensors.numpy.load_file", refuse)
    got = load_tensors(path)
    assert bits_equal(got["b"], bf16.astype(np.float32))
    assert bits_equal(got["f"], np.arange(4, dtype=np.float32))


def test_save_keeps_float_dtypes_and_safetensors_names_by_stem(tmp_path):
    f16 = np.random.default_rng(6).standard_normal((2, 3)).astype(np.float16)
    save_tensor(tmp_path / "half.safetensors", f16)
    raw = load_file(str(tmp_path / "half.safetensors"))
    assert list(raw) == ["half"] and raw["half"].dtype == np.float16
    save_tensor(tmp_path / "half.npy", f16)
    assert np.load(tmp_path / "half.npy").dtype == np.float16
    save_tensor(tmp_path / "ints.tensor", np.arange(6).reshape(2, 3))
    assert bits_equal(load_tensor(tmp_path / "ints.tensor"), np.arange(6, dtype=np.float32).reshape(2, 3))


# ------------------------------------------------------------------------------ the reference layout


def test_tensor_file_bytes_are_u32_header_then_f32_row_major(tmp_path):
    x = awkward((3, 4), 7)
    save_tensor(tmp_path / "m.tensor", x)
    raw = (tmp_path / "m.tensor").read_bytes()
    assert len(raw) == 8 + 3 * 4 * 4
    assert struct.unpack("<II", raw[:8]) == (3, 4)
    values = struct.unpack("<12f", raw[8:])
    assert np.array(values, np.float32).tobytes() == x.tobytes()  # row-major: row 0 first
    assert raw[8:12] == struct.pack("<f", x[0, 0]) and raw[12:16] == struct.pack("<f", x[0, 1])


def test_hand_made_tensor_bytes_read_back(tmp_path):
    rows = [[1.0, -2.5, 0.0], [3.25, 1e-3, -0.0]]
    blob = struct.pack("<II", 2, 3) + b"".join(struct.pack("<f", v) for row in rows for v in row)
    (tmp_path / "h.tensor").write_bytes(blob)
    got = load_tensor(tmp_path / "h.tensor")
    assert got.dtype == np.float32 and got.shape == (2, 3)
    assert bits_equal(got, np.array(rows, np.float32))


# -------------------------------------------------------------------------------------- refusals


def test_wrong_size_header_is_refused_with_both_sizes(tmp_path):
    path = tmp_path / "x.tensor"
    path.write_bytes(struct.pack("<II", 4, 5) + b"\0" * 76)
    with pytest.raises(OpscopeError) as e:
        load_tensor(path)
    message = one_line_error(
        e, "x.tensor", "4×5", "80 bytes", "76", "truncated or not a .tensor file", "u32 rows, u32 cols, f32 row-major"
    )
    assert message == (
        f"{path}: header says 4×5 f32 (80 bytes of data) but the file holds 76: truncated or not "
        "a .tensor file (u32 rows, u32 cols, f32 row-major)"
    )
    path.write_bytes(struct.pack("<II", 1, 1) + b"\0" * 8)  # too long is refused too
    with pytest.raises(OpscopeError) as e:
        load_tensor(path)
    one_line_error(e, "1×1", "holds 8")


def test_truncated_header_is_refused(tmp_path):
    path = tmp_path / "short.tensor"
    path.write_bytes(b"\x02\0\0\0\x03")
    with pytest.raises(OpscopeError) as e:
        load_tensors(path)
    one_line_error(e, "short.tensor", "5 bytes", "too short", "header")


def test_unknown_suffix_lists_the_supported_ones(tmp_path):
    for name in ("w.txt", "w"):
        (tmp_path / name).write_bytes(b"1234")
        with pytest.raises(OpscopeError) as e:
            load_tensor(tmp_path / name)
        one_line_error(e, name, ".tensor", ".npy", ".safetensors")
    with pytest.raises(OpscopeError) as e:
        save_tensor(tmp_path / "w.pt", np.zeros((2, 2), np.float32))
    one_line_error(e, "w.pt", "'.pt'", ".tensor", ".npy", ".safetensors")
    assert not (tmp_path / "w.pt").exists()


def test_missing_path_is_refused(tmp_path):
    for load in (load_tensor, load_tensors):
        with pytest.raises(OpscopeError) as e:
            load(tmp_path / "nowhere.npy")
        one_line_error(e, "nowhere.npy", "no such file")


def test_empty_directory_and_one_without_tensor_files(tmp_path):
    with pytest.raises(OpscopeError) as e:
        load_tensors(tmp_path)
    one_line_error(e, str(tmp_path), "empty", "no *.tensor, *.npy or *.safetensors files in it")
    (tmp_path / "notes.txt").write_text("hello")
    (tmp_path / "sub.npy").mkdir()  # a directory with a tensor suffix is no tensor file
    with pytest.raises(OpscopeError) as e:
        load_tensors(tmp_path)
    one_line_error(e, str(tmp_path), "no *.tensor, *.npy or *.safetensors files in it")
    with pytest.raises(OpscopeError) as e:
        load_tensor(tmp_path)
    one_line_error(e, "directory", "load_tensors")


def test_directory_ignores_unrelated_files_and_refuses_a_name_twice(tmp_path):
    x = awkward((2, 2))
    save_tensor(tmp_path / "a.npy", x)
    (tmp_path / "README.md").write_text("weights")
    assert list(load_tensors(tmp_path)) == ["a"]
    save_tensor(tmp_path / "a.tensor", x)
    with pytest.raises(OpscopeError) as e:
        load_tensors(tmp_path)
    one_line_error(e, "'a'", "a.npy", "a.tensor")


def test_unreadable_npy_and_safetensors_are_one_line(tmp_path):
    (tmp_path / "bad.npy").write_bytes(b"\x93NUMPY\x01\x00garbage\nmore garbage\n")
    with pytest.raises(OpscopeError) as e:
        load_tensor(tmp_path / "bad.npy")
    one_line_error(e, "bad.npy", "unreadable .npy")
    (tmp_path / "bad.safetensors").write_bytes(b"\xff" * 20)
    with pytest.raises(OpscopeError) as e:
        load_tensors(tmp_path / "bad.safetensors")
    one_line_error(e, "bad.safetensors", "unreadable .safetensors")
    np.save(tmp_path / "ints.npy", np.arange(4))
    with pytest.raises(OpscopeError) as e:
        load_tensor(tmp_path / "ints.npy")
    one_line_error(e, "ints.npy", "int64", "float")


def test_tensor_format_needs_a_matrix(tmp_path):
    with pytest.raises(OpscopeError) as e:
        save_tensor(tmp_path / "cube.tensor", np.zeros((2, 3, 4), np.float32))
    one_line_error(e, "cube.tensor", "2-D", "2×3×4", ".npy")
    assert not list(tmp_path.iterdir())
    with pytest.raises(OpscopeError) as e:
        save_tensors(tmp_path / "out", {"a/b": np.zeros((2, 2)), "a_b": np.ones((2, 2))})
    one_line_error(e, "'a/b'", "'a_b'", "a_b.tensor")
    assert not (tmp_path / "out").exists()  # refused before anything was written
    with pytest.raises(OpscopeError) as e:
        save_tensors(tmp_path / "out", {}, fmt="pt")
    one_line_error(e, "'pt'", "tensor, npy, safetensors")


# -------------------------------------------------------------------------------------- check_matrix


def test_check_matrix_accepts_a_finite_matrix():
    x = np.arange(12, dtype=np.float64).reshape(3, 4)
    out = check_matrix("fc1", x)
    assert out.dtype == np.float32 and out.shape == (3, 4) and np.array_equal(out, x)
    assert check_matrix("bf", x.astype(ml_dtypes.bfloat16)).dtype == np.float32


@pytest.mark.parametrize(
    "x,words",
    [
        (np.zeros(384), ["fc1: a 1-D tensor of 384 values", "2-D weight [rows, cols]"]),
        (np.float32(3.0), ["fc1: a 0-D tensor", "2-D weight"]),
        (np.zeros((4, 5, 6)), ["fc1: a 3-D tensor", "4×5×6", "reshape it to [out, rest] (4×30)"]),
        (np.zeros((1, 384)), ["fc1", "1×384", "both dims must be ≥ 2"]),
        (np.zeros((8, 1)), ["8×1", "both dims must be ≥ 2"]),
    ],
)
def test_check_matrix_refuses_shapes(x, words):
    with pytest.raises(OpscopeError) as e:
        check_matrix("fc1", x)
    one_line_error(e, *words)


def test_check_matrix_counts_nan_and_inf():
    x = np.ones((4, 4), np.float32)
    x[0, 0], x[1, 2], x[3, 3] = np.nan, np.inf, -np.inf
    with pytest.raises(OpscopeError) as e:
        check_matrix("layer0.q", x)
    assert str(e.value) == "layer0.q: 3 NaN/Inf values; probes need finite weights"


# ------------------------------------------------------------------------------------------ atomicity


@pytest.mark.parametrize("suffix", [".tensor", ".npy", ".safetensors"])
def test_a_failed_save_leaves_nothing_behind(tmp_path, monkeypatch, suffix):
    real_write = tensors._write

    def half_then_fail(f, suffix_, data):
        f.write(b"partial bytes")
        raise RuntimeError("disk on fire")

    monkeypatch.setattr(tensors, "_write", half_then_fail)
    target = tmp_path / f"w{suffix}"
    with pytest.raises(RuntimeError, match="disk on fire"):
        save_tensor(target, np.ones((3, 3), np.float32))
    assert list(tmp_path.iterdir()) == []  # neither the target nor a temporary file

    monkeypatch.setattr(tensors, "_write", real_write)
    old = awkward((3, 3), 8)
    save_tensor(target, old)
    before = target.read_bytes()
    monkeypatch.setattr(tensors, "_write", half_then_fail)
    with pytest.raises(RuntimeError):
        save_tensor(target, np.zeros((3, 3), np.float32))
    assert target.read_bytes() == before  # the existing file is untouched
    assert [p.name for p in tmp_path.iterdir()] == [target.name]
    with pytest.raises(RuntimeError):
        save_tensors(tmp_path / "many", {"a": old, "b": old}, fmt=suffix[1:])
    assert list((tmp_path / "many").iterdir()) == []


def test_a_failed_reference_writer_midway_leaves_nothing(tmp_path, monkeypatch):
    def header_then_fail(f, x):
        f.write(struct.pack("<II", *x.shape))
        raise OSError("no space left on device")

    monkeypatch.setattr(tensors, "_write_reference", header_then_fail)
    with pytest.raises(OSError):
        save_tensor(tmp_path / "w.tensor", np.ones((2, 2), np.float32))
    assert list(tmp_path.iterdir()) == []


def test_a_saved_file_has_ordinary_permissions(tmp_path):
    save_tensor(tmp_path / "w.npy", np.ones((2, 2), np.float32))
    (tmp_path / "plain").write_bytes(b"")
    assert os.stat(tmp_path / "w.npy").st_mode == os.stat(tmp_path / "plain").st_mode
