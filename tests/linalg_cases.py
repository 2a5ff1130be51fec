"""Small modules (linalg, one StableHLO) the end-to-end tests share (one site each, named by its location),
and the IR pieces (accumulators, matmul and conv sites, generic regions) other tests write their modules with.

Each entry of `CASES` is (MLIR text, argument shapes, element type). Sources are plain
strings, so `ModuleCache` compiles each one once per session and target.
"""

from __future__ import annotations

from opscope.models.demo import matmul_module

Shapes = tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]  # lhs, rhs, out

# Regions of a linalg.generic, written after its `outs(...)`: the multiply-accumulate of a
# contraction (acc + lhs·rhs), the sum of two f32 inputs (a bias or a residual add), and the
# copy of a broadcast or transpose. Prefixed value names clash with no module's own.
MAC_REGION = """ {
  ^bb0(%mac_lhs: f32, %mac_rhs: f32, %mac_acc: f32):
    %mac_p = arith.mulf %mac_lhs, %mac_rhs : f32
    %mac_s = arith.addf %mac_acc, %mac_p : f32
    linalg.yield %mac_s : f32
  }"""
ADD_REGION = """ {
  ^bb0(%add_lhs: f32, %add_rhs: f32, %add_out: f32):
    %add_s = arith.addf %add_lhs, %add_rhs : f32
    linalg.yield %add_s : f32
  }"""
COPY_REGION = """ {
  ^bb0(%in: f32, %out: f32):
    linalg.yield %in : f32
  }"""


def tensor_type(*shape: int) -> str:
    """The f32 MLIR tensor type of `shape`: the pieces below take shapes and spell their types one way."""
    return "tensor<" + "".join(f"{d}x" for d in shape) + "f32>"


def map_region(expr: str) -> str:
    """The region of an elementwise f32 map to `expr` of its input `%map_in` (`math.exp %map_in`)."""
    return f""" {{
  ^bb0(%map_in: f32, %map_out: f32):
    %map_v = {expr} : f32
    linalg.yield %map_v : f32
  }}"""


def gather_region(table: str, shape: tuple[int, int]) -> str:
    """The region of an embedding lookup (i64 ids in): row `id` of the f32 `table`, column `linalg.index 1`."""
    return f""" {{
  ^bb0(%gather_id: i64, %gather_out: f32):
    %gather_row = arith.index_cast %gather_id : i64 to index
    %gather_col = linalg.index 1 : index
    %gather_v = tensor.extract {table}[%gather_row, %gather_col] : {tensor_type(*shape)}
    linalg.yield %gather_v : f32
  }}"""


def zero_init(result: str, shape: tuple[int, ...], zero: str = "%zero") -> str:
    """`result`, an f32 `shape` tensor (empty `<result>_e`) filled with `zero`: the accumulator of a contraction."""
    ty = tensor_type(*shape)
    fill = f"{result} = linalg.fill ins({zero} : f32) outs({result}_e : {ty}) -> {ty}"
    return f"{result}_e = tensor.empty() : {ty}\n  {fill}"


def matmul(result: str, lhs: str, rhs: str, shapes: Shapes, loc: str, init: str = "%init") -> str:
    """`result` = `lhs`·`rhs` (f32 shapes: lhs, rhs, out) into the accumulator `init`: one site named `loc`."""
    a, b, out = (tensor_type(*shape) for shape in shapes)
    return f'{result} = linalg.matmul ins({lhs}, {rhs} : {a}, {b})\n      outs({init} : {out}) -> {out} loc("{loc}")'


def conv(result: str, op: str, lhs: str, rhs: str, shapes: Shapes, loc: str) -> str:
    """`result` = unit-stride conv `op` of `lhs` by `rhs` (f32 shapes) into zeros (`%zero`): one site named `loc`."""
    a, b, out = (tensor_type(*shape) for shape in shapes)
    unit = "dilations = dense<1> : tensor<2xi64>, strides = dense<1> : tensor<2xi64>"
    return (
        f"{zero_init(result + '_z', shapes[2])}\n"
        f"  {result} = linalg.{op} {{{unit}}}\n"
        f'       ins({lhs}, {rhs} : {a}, {b}) outs({result}_z : {out}) -> {out} loc("{loc}")'
    )


def contraction(op: str, shapes: Shapes, loc: str, region: str = "") -> str:
    """`@main(%a, %b)` (f32 shapes: lhs, rhs, out) returning `op` (name, attributes[, `region`]) named `loc`."""
    lhs, rhs, out = (tensor_type(*shape) for shape in shapes)
    return f"""
func.func @main(%a: {lhs}, %b: {rhs}) -> {out} {{
  %c = arith.constant 0.0 : f32
  {zero_init("%z", shapes[2], zero="%c")}
  %r = {op}
      ins(%a, %b : {lhs}, {rhs}) outs(%z : {out}){region} -> {out} loc("{loc}")
  return %r : {out}
}}
"""


BATCH_MATMUL = contraction("linalg.batch_matmul", ((2, 8, 12), (2, 12, 10), (2, 8, 10)), "bmm")

# A contraction written as linalg.generic with a 3-D lhs [B, S, K] x [K, N] -> [B, S, N].
GENERIC_3D = contraction(
    """linalg.generic {indexing_maps = [affine_map<(b, m, n, k) -> (b, m, k)>,
                                        affine_map<(b, m, n, k) -> (k, n)>,
                                        affine_map<(b, m, n, k) -> (b, m, n)>],
                       iterator_types = ["parallel", "parallel", "parallel", "reduction"]}""",
    ((2, 6, 12), (12, 10), (2, 6, 10)),
    "proj3d",
    region=MAC_REGION,
)

# rhs and out are rank 1: 9 statistics each.
MATVEC = contraction("linalg.matvec", ((16, 24), (24,), (16,)), "mv")

# lhs [M, K] x rhs [N, K] -> [M, N] through linalg.matmul's indexing_maps.
TRANSPOSED = contraction(
    """linalg.matmul indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d2)>,
                                      affine_map<(d0, d1, d2) -> (d1, d2)>,
                                      affine_map<(d0, d1, d2) -> (d0, d1)>]""",
    ((16, 24), (8, 24), (16, 8)),
    "qk",
)

# The same batched contraction as StableHLO (sites also match stablehlo.dot_general).
DOT_GENERAL = """
func.func @main(%a: tensor<2x8x12xf32>, %b: tensor<2x12x10xf32>) -> tensor<2x8x10xf32> {
  %0 = stablehlo.dot_general %a, %b, batching_dims = [0] x [0], contracting_dims = [2] x [1]
      : (tensor<2x8x12xf32>, tensor<2x12x10xf32>) -> tensor<2x8x10xf32> loc("hlo.bmm")
  return %0 : tensor<2x8x10xf32>
}
"""

# Three 8x8 sites whose operands are of every residency IREE distinguishes: an argument,
# constants (splat and dense), intermediates, the returned result; one shared stats kernel.
_ROW = "[" + ", ".join(f"{float(i)}" for i in range(1, 9)) + "]"
CONST_WEIGHTS = f"""
func.func @main(%a: tensor<8x8xf32>) -> tensor<8x8xf32> {{
  %c = arith.constant 0.0 : f32
  %w = arith.constant dense<0.5> : tensor<8x8xf32>
  %w2 = arith.constant dense<[{", ".join([_ROW] * 8)}]> : tensor<8x8xf32>
  %e = tensor.empty() : tensor<8x8xf32>
  %z = linalg.fill ins(%c : f32) outs(%e : tensor<8x8xf32>) -> tensor<8x8xf32>
  %r = linalg.matmul ins(%a, %w : tensor<8x8xf32>, tensor<8x8xf32>) outs(%z : tensor<8x8xf32>) -> tensor<8x8xf32> loc("c1")
  %r2 = linalg.matmul ins(%r, %w2 : tensor<8x8xf32>, tensor<8x8xf32>) outs(%z : tensor<8x8xf32>) -> tensor<8x8xf32> loc("c2")
  %r3 = linalg.matmul ins(%r2, %r : tensor<8x8xf32>, tensor<8x8xf32>) outs(%z : tensor<8x8xf32>) -> tensor<8x8xf32> loc("c3")
  return %r3 : tensor<8x8xf32>
}}
"""

# Two sites whose tensors share types, so the lowering batches them into shared kernel
# calls; every tapped tensor is observable: arguments, returned results, and relu(%h),
# which the host recomputes exactly from the returned %h.
TWO_LAYER = """
func.func @main(%x: tensor<8x16xf32>, %w0: tensor<16x16xf32>, %w1: tensor<16x16xf32>)
    -> (tensor<8x16xf32>, tensor<8x16xf32>) {
  %c = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<8x16xf32>
  %z = linalg.fill ins(%c : f32) outs(%e : tensor<8x16xf32>) -> tensor<8x16xf32>
  %h = linalg.matmul ins(%x, %w0 : tensor<8x16xf32>, tensor<16x16xf32>)
                     outs(%z : tensor<8x16xf32>) -> tensor<8x16xf32> loc("fc0")
  %a = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>],
                       iterator_types = ["parallel", "parallel"]}
      ins(%h : tensor<8x16xf32>) outs(%e : tensor<8x16xf32>) {
  ^bb0(%in: f32, %out: f32):
    %r = arith.maximumf %in, %c : f32
    linalg.yield %r : f32
  } -> tensor<8x16xf32>
  %y = linalg.matmul ins(%a, %w1 : tensor<8x16xf32>, tensor<16x16xf32>)
                     outs(%z : tensor<8x16xf32>) -> tensor<8x16xf32> loc("fc1")
  return %h, %y : tensor<8x16xf32>, tensor<8x16xf32>
}
"""

CASES: dict[str, tuple[str, tuple[tuple[int, ...], ...], str]] = {
    "matmul_16x24x8": (matmul_module(16, 24, 8), ((16, 24), (24, 8)), "f32"),
    "matmul_64x128x32": (matmul_module(64, 128, 32), ((64, 128), (128, 32)), "f32"),
    # i8 histogram lanes at their limit: lhs 510x64 and out 510x96 split into slabs of 255
    # indices per lane (the most an unsigned i8 count holds), rhs 64x96 into one of 96.
    "matmul_510x64x96": (matmul_module(510, 64, 96), ((510, 64), (64, 96)), "f32"),
    "batch_matmul_2x8x12x10": (BATCH_MATMUL, ((2, 8, 12), (2, 12, 10)), "f32"),
    "generic_3d_lhs": (GENERIC_3D, ((2, 6, 12), (12, 10)), "f32"),
    "matvec_16x24": (MATVEC, ((16, 24), (24,)), "f32"),
    "stablehlo_dot_general": (DOT_GENERAL, ((2, 8, 12), (2, 12, 10)), "f32"),
    "matmul_f16_16x24x8": (matmul_module(16, 24, 8, dtype="f16"), ((16, 24), (24, 8)), "f16"),
    "matmul_bf16_16x24x8": (matmul_module(16, 24, 8, dtype="bf16"), ((16, 24), (24, 8)), "bf16"),
}
