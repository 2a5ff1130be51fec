"""`.mlir`/`.mlirbc` files through `import_source`: StableHLO (text, bytecode, VHLO) and linalg.

StableHLO files lower to a plain `func.func` on linalg that compiles on llvm-cpu and
matches numpy within rtol = atol = 1e-5 (f32); a linalg file comes back as is. Bad input
(unsupported op, missing file, unknown suffix, corrupt bytecode) is a one-line error.
"""

from __future__ import annotations

import io

import numpy as np
import pytest
from errors import one_line

from opscope.errors import OpscopeError
from opscope.importers import SUFFIXES, import_source
from opscope.importers.mlir_file import detect_dialect, write_mlir
from opscope.ir.loading import module_text, new_context, parse_module
from opscope.ir.sites import find_sites
from opscope.run.compile import compile_module
from opscope.run.runtime import load

RTOL = ATOL = 1e-5

# What `jax.jit(f).lower(x, w1, w2).as_text(debug_info=True)` prints for
# `relu(x @ w1) @ w2` under scopes fc1 and fc2 (trimmed): a named module, a private
# function called from main, name stacks around tracebacks.
STABLEHLO = """\
#loc1 = loc("x")
#loc2 = loc("w1")
#loc3 = loc("w2")
module @jit_mlp attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%arg0: tensor<4x8xf32> loc("x"), %arg1: tensor<8x16xf32> loc("w1"), %arg2: tensor<16x3xf32> loc("w2")) -> (tensor<4x3xf32> {jax.result_info = "result"}) {
    %0 = stablehlo.dot_general %arg0, %arg1, contracting_dims = [1] x [0], precision = [DEFAULT, DEFAULT] : (tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf32> loc(#loc19)
    %1 = call @relu(%0) : (tensor<4x16xf32>) -> tensor<4x16xf32> loc(#loc20)
    %2 = stablehlo.dot_general %1, %arg2, contracting_dims = [1] x [0], precision = [DEFAULT, DEFAULT] : (tensor<4x16xf32>, tensor<16x3xf32>) -> tensor<4x3xf32> loc(#loc21)
    return %2 : tensor<4x3xf32> loc(#loc18)
  } loc(#loc)
  func.func private @relu(%arg0: tensor<4x16xf32> loc(unknown)) -> tensor<4x16xf32> {
    %cst = stablehlo.constant dense<0.000000e+00> : tensor<f32> loc(#loc)
    %0 = stablehlo.broadcast_in_dim %cst, dims = [] : (tensor<f32>) -> tensor<4x16xf32> loc(#loc9)
    %1 = stablehlo.maximum %arg0, %0 : tensor<4x16xf32> loc(#loc9)
    return %1 : tensor<4x16xf32> loc(#loc)
  } loc(#loc14)
} loc(#loc)
#loc = loc(unknown)
#loc4 = loc("model.py":4:24 to :30)
#loc5 = loc("model.py":8:6 to :31)
#loc6 = loc("model.py":4:12 to :31)
#loc7 = loc("model.py":6:15 to :21)
#loc8 = loc("jit")
#loc9 = loc("max")
#loc10 = loc("mlp"(#loc4))
#loc11 = loc("<module>"(#loc5))
#loc12 = loc("mlp"(#loc6))
#loc13 = loc("mlp"(#loc7))
#loc14 = loc("jit:"(#loc8))
#loc15 = loc(callsite(#loc10 at #loc11))
#loc16 = loc(callsite(#loc12 at #loc11))
#loc17 = loc(callsite(#loc13 at #loc11))
#loc18 = loc("jit(mlp)"(#loc11))
#loc19 = loc("jit(mlp)/fc1/dot_general"(#loc15))
#loc20 = loc("jit(mlp)/fc1/jit(relu)"(#loc16))
#loc21 = loc("jit(mlp)/fc2/dot_general"(#loc17))
"""

LINALG = """\
func.func @main(%a: tensor<4x8xf32>, %b: tensor<8x3xf32>) -> tensor<4x3xf32> {
  %cst = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<4x3xf32>
  %z = linalg.fill ins(%cst : f32) outs(%e : tensor<4x3xf32>) -> tensor<4x3xf32>
  %0 = linalg.matmul ins(%a, %b : tensor<4x8xf32>, tensor<8x3xf32>) outs(%z : tensor<4x3xf32>) -> tensor<4x3xf32> loc("head.proj"("net.py":7:3))
  return %0 : tensor<4x3xf32>
}
"""

UNSUPPORTED = """\
func.func @main(%a: tensor<4xf32>) -> tensor<4xf32> {
  %0 = stablehlo.custom_call @my_kernel(%a) : (tensor<4xf32>) -> tensor<4xf32> loc("jit(f)/net/blk/custom_call"("net.py":3:4))
  return %0 : tensor<4xf32>
}
"""

TORCH = """\
func.func @main(%a: !torch.vtensor<[4,8],f32>, %b: !torch.vtensor<[8,3],f32>) -> !torch.vtensor<[4,3],f32> {
  %0 = torch.aten.mm %a, %b : !torch.vtensor<[4,8],f32>, !torch.vtensor<[8,3],f32> -> !torch.vtensor<[4,3],f32> loc("head.proj"("net.py":7:3))
  return %0 : !torch.vtensor<[4,3],f32>
}
"""


def _bytecode(text: str) -> bytes:
    buf = io.BytesIO()
    parse_module(text, new_context()).operation.write_bytecode(buf)
    return buf.getvalue()


def _mlp_inputs() -> list[np.ndarray]:
    rng = np.random.Generator(np.random.Philox(11))
    return [rng.standard_normal(s, np.float32) for s in ((4, 8), (8, 16), (16, 3))]


def _mlp_numpy(x, w1, w2) -> np.ndarray:
    return np.maximum(x @ w1, 0) @ w2


@pytest.mark.parametrize("form", ["text", "bytecode"])
def test_stablehlo_file_lowers_compiles_and_matches_numpy(tmp_path, form):
    path = tmp_path / ("mlp.mlir" if form == "text" else "mlp.mlirbc")
    path.write_bytes(STABLEHLO.encode() if form == "text" else _bytecode(STABLEHLO))
    module = import_source(path)
    text = module_text(module)
    assert "stablehlo." not in text and "util.func" not in text and "module @" not in text
    assert [s.name for s in find_sites(module)] == ["fc1", "fc2"]
    inputs = _mlp_inputs()
    [got] = load(compile_module(module, "llvm-cpu")).invoke("main", *inputs)
    np.testing.assert_allclose(got, _mlp_numpy(*inputs), rtol=RTOL, atol=ATOL)


def test_vhlo_portable_artifact_file(tmp_path):
    jax = pytest.importorskip("jax")

    def f(x, w):
        with jax.named_scope("proj"):
            return x @ w

    x, w = np.ones((4, 8), np.float32), np.full((8, 2), 0.5, np.float32)
    path = tmp_path / "f.mlirbc"
    path.write_bytes(jax.export.export(jax.jit(f))(x, w).mlir_module_serialized)
    module = import_source(path)
    assert [s.name for s in find_sites(module)] == ["proj"]


def test_linalg_file_comes_back_as_is(tmp_path):
    path = tmp_path / "m.mlir"
    path.write_text(LINALG)
    module = import_source(path)
    assert detect_dialect(module) == "linalg"
    assert module_text(module) == module_text(parse_module(LINALG))
    [site] = find_sites(module)
    assert site.name == "head.proj"


def test_torch_dialect_file_goes_through_torch_lowering(tmp_path):
    path = tmp_path / "t.mlir"
    path.write_text(TORCH)
    module = import_source(path)
    assert detect_dialect(module) == "linalg"
    assert [(s.name, s.kind) for s in find_sites(module)] == [("head.proj", "matmul")]


@pytest.mark.parametrize("suffix", [".mlir", ".mlirbc"])
def test_written_module_reads_back_with_its_site_names(tmp_path, suffix):
    path = tmp_path / f"mlp{suffix}"
    write_mlir(import_source(parse_module(STABLEHLO)), path)
    again = import_source(path)
    assert detect_dialect(again) == "linalg"
    assert [s.name for s in find_sites(again)] == ["fc1", "fc2"]


def test_write_to_a_missing_directory(tmp_path):
    with pytest.raises(OpscopeError, match="^cannot write .*nope/m.mlir: No such file or directory$"):
        write_mlir(parse_module(LINALG), tmp_path / "nope" / "m.mlir")


def test_dialect_detection():
    assert detect_dialect(parse_module(STABLEHLO)) == "stablehlo"
    assert detect_dialect(parse_module(TORCH)) == "torch"
    assert detect_dialect(parse_module(LINALG)) == "linalg"


def test_in_memory_module_is_lowered():
    module = import_source(parse_module(STABLEHLO))
    assert [s.name for s in find_sites(module)] == ["fc1", "fc2"]


def test_unsupported_op_names_op_and_site(tmp_path):
    path = tmp_path / "cc.mlir"
    path.write_text(UNSUPPORTED)
    with pytest.raises(OpscopeError) as e:
        import_source(path)
    msg = one_line(e)
    assert msg.startswith("unsupported op 'stablehlo.custom_call' at net/blk (net.py:3): ")
    assert "reproducer: opscope-opt -p 'iree-stablehlo-input-transformation-pipeline' " in msg


def test_missing_file(tmp_path):
    with pytest.raises(OpscopeError) as e:
        import_source(tmp_path / "nope.mlir")
    assert one_line(e) == f"no such file: {tmp_path / 'nope.mlir'}"


def test_unknown_suffix(tmp_path):
    path = tmp_path / "model.pt"
    path.write_bytes(b"\0")
    with pytest.raises(OpscopeError) as e:
        import_source(path)
    assert one_line(e) == f"{path}: unknown suffix '.pt'; opscope imports {', '.join(SUFFIXES)}"


def test_corrupt_bytecode(tmp_path):
    path = tmp_path / "bad.mlirbc"
    path.write_bytes(_bytecode(LINALG)[:40])
    with pytest.raises(OpscopeError) as e:
        import_source(path)
    assert one_line(e).startswith(f"malformed MLIR at {path}")


def test_directory(tmp_path):
    (tmp_path / "d.mlir").mkdir()
    with pytest.raises(OpscopeError, match="is a directory"):
        import_source(tmp_path / "d.mlir")
