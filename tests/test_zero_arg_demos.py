"""The reference's zero-argument demos: `opscope infer` with no model (its sink + band attention and
top-2 MoE gate, with its numbers), and a user's MNIST files (IDX) driving the 784→128→10 MLP.

References are numpy's, from the demo's own inputs and from the images the test writes: the
attention's peaks and key shares from softmax(logits), the experts' loads from numpy's top-2 of
tokens·Wg, the fc1 input's nonzero count from the images scaled to [0, 1].
"""

from __future__ import annotations

import numpy as np
import pytest

import opscope
from opscope.cli import main
from opscope.errors import OpscopeError
from opscope.models import infer_demo
from opscope.models.idx import MNIST_BATCH, read_idx


def _idx(path, array: np.ndarray, code: int) -> None:
    head = b"\x00\x00" + bytes([code, array.ndim]) + b"".join(int(d).to_bytes(4, "big") for d in array.shape)
    path.write_bytes(head + array.astype(array.dtype.newbyteorder(">")).tobytes())


def test_infer_without_a_model_runs_the_reference_demo(tmp_path, capsys):
    assert main(["infer", "--steps", "1", "--out", str(tmp_path / "run")]) == 0
    out = capsys.readouterr().out
    logits = infer_demo.sink_band_logits().astype(np.float64)
    p = np.exp(logits - logits.max(1, keepdims=True))
    p /= p.sum(1, keepdims=True)
    received = p.sum(0)
    tokens, wg = infer_demo.gate_inputs()
    chosen = np.argsort(-(tokens.astype(np.float64) @ wg), axis=1, kind="stable")[:, : infer_demo.K]
    loads = np.bincount(chosen.ravel(), minlength=infer_demo.E) / chosen.size
    peak = p.max(1)
    assert round(peak.mean(), 3) == 0.347 and (peak > 0.30).sum() == 3  # the reference's own numbers
    top4 = np.sort(received)[::-1][:4].sum() / received.sum()
    assert f"attention: mean peak {peak.mean():.3f}; 3 of 16 queries peak above 0.30" in out
    assert f"the top 4 keys take {top4:.1%} of the attention (keys 0, " in out
    order = np.argsort(-loads, kind="stable")
    assert "MoE gate: expert loads " + ", ".join(f"{loads[e]:.1%} (expert {e})" for e in order) in out
    assert f"{int((loads < 0.02).sum())} cold" in out and "key 0 is a sink" in out


@pytest.fixture(scope="module")
def images(tmp_path_factory):
    """130 MNIST-like images, a zero border around random pixels (two steps of 64, two spare)."""
    rng = np.random.default_rng(0)
    imgs = np.zeros((130, 28, 28), np.uint8)
    imgs[:, 4:24, 6:22] = rng.integers(0, 256, (130, 20, 16))
    path = tmp_path_factory.mktemp("mnist") / "train-images-idx3-ubyte"
    _idx(path, imgs, 0x08)
    return path, imgs


def test_mnist_files_drive_the_784_128_10_mlp(images, tmp_path):
    path, imgs = images
    run = opscope.profile(str(path), steps=2, out=tmp_path / "run")
    tidy = opscope.read_sketches(run.out_dir)
    assert set(tidy["dist"].unique().to_list()) == {"mnist"}
    assert tidy.filter(tidy["step"] == 0).height and len(set(zip(tidy["site"], tidy["role"], tidy["stat"]))) == 78
    for step in (0, 1):
        x = imgs[step * MNIST_BATCH : (step + 1) * MNIST_BATCH].reshape(MNIST_BATCH, -1) / 255
        row = tidy.filter((tidy["step"] == step) & (tidy["site"] == "fc1") & (tidy["role"] == "lhs"))
        assert row.filter(row["stat"] == "nnz")["value"].to_list() == [np.count_nonzero(x)]
        assert row.filter(row["stat"] == "max")["value"].to_list() == [pytest.approx(x.max())]
    assert {r for r in tidy.filter(tidy["site"] == "fc1")["M"].unique().to_list()} == {MNIST_BATCH}


def test_too_few_images_is_one_line_before_compiling(images, capsys):
    path, _ = images
    assert main(["profile", str(path), "--steps", "3"]) == 1
    err = capsys.readouterr().err.strip()
    assert err == f"opscope: error: {path}: 130 images, 192 asked for (3 steps of 64): use fewer steps"


@pytest.mark.parametrize("code,dtype", [(0x08, np.uint8), (0x0B, np.int16), (0x0D, np.float32), (0x0E, np.float64)])
def test_read_idx_round_trips(tmp_path, code, dtype):
    array = (np.arange(24).reshape(2, 3, 4) - 5).astype(dtype) if code != 0x08 else np.arange(24, dtype=dtype)
    _idx(tmp_path / "a.idx", array, code)
    got = read_idx(tmp_path / "a.idx")
    assert got.dtype == dtype and got.shape == array.shape and np.array_equal(got, array)


@pytest.mark.parametrize(
    "data,words",
    [
        (b"\x01\x02\x08\x03", "not an IDX file (expected 00 00 <type> <dims> at its start, got 01020803)"),
        (b"\x00\x00\x08\x03\x00\x00", "IDX header cut off (6 bytes for 3 dims)"),
        (b"\x00\x00\x08\x01\x00\x00\x00\x05\x01\x02", "IDX data cut off: 5 uint8 needs 5 bytes, the file has 2"),
    ],
)
def test_a_broken_idx_file_is_one_line(tmp_path, data, words):
    (tmp_path / "x-idx").write_bytes(data)
    with pytest.raises(OpscopeError) as info:
        read_idx(tmp_path / "x-idx")
    assert str(info.value) == f"{tmp_path / 'x-idx'}: {words}"
