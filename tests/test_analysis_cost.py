"""Cost model, bytes ledger and GEMM shapes: exact FLOPs and bytes against closed forms.

Every count below is a closed form of the shapes (no numpy, no compile). The HF models
check the matmul-like ops' FLOPs against `torch.utils.flop_counter.FlopCounterMode` for
the same forward (measured on torch 2.13: equal for all four eager models). With
`attn_implementation="sdpa"`, PyTorch 2.13 on CPU runs
`aten._scaled_dot_product_flash_attention_for_cpu`, which is not in FlopCounterMode's
registry, so PyTorch reports 0 FLOPs for attention; opscope's `iree_linalg_ext.attention`
counts 2·B·M·K1·K2 + 2·B·M·K2·N (the two bmm's PyTorch counts in eager mode) plus
5·B·M·K2 for the softmax.
"""

from __future__ import annotations

import json

import pytest
from iree.compiler import ir

import opscope
from opscope.analysis.cost import OpCost, analyze, body_costs, executions, is_hoisted, op_cost
from opscope.analysis.roofline import DEFAULT_RIDGE, roofline_class
from opscope.analysis.shapes import shape_histogram
from opscope.ir.flops import SOFTMAX_FLOPS, attention_flops, trip_count
from opscope.ir.loading import parse_module
from opscope.ir.sites import find_sites
from opscope.models.demo import transformer_module
from opscope.record.recorder import read_site_costs, write_site_costs
from opscope.text.numbers import count, nbytes

pytestmark = pytest.mark.filterwarnings("ignore::FutureWarning")  # torch's own pytree deprecation

ID2 = "affine_map<(d0, d1) -> (d0, d1)>"
ROW = "affine_map<(d0, d1) -> (d0)>"


def costs(src: str, **kw) -> dict[str, OpCost]:
    """Analyze `src` and key the op costs by name (the tests name every costed op)."""
    return {c.name: c for c in analyze(parse_module(src), **kw).ops}


def matmul_src(m: int, k: int, n: int, lhs: str = "f32", rhs: str = "f32", weight: str = "global") -> str:
    """C = A·B with a zero-filled accumulator; B a weight (`global`, `const`) or an argument (`arg`)."""
    globs = f"util.global private @w = dense<1.0> : tensor<{k}x{n}x{rhs}>\n" if weight == "global" else ""
    load = {
        "global": f"%b = util.global.load @w : tensor<{k}x{n}x{rhs}>",
        "const": f"%b = arith.constant dense_resource<w> : tensor<{k}x{n}x{rhs}>",
        "arg": "",
    }[weight]
    args = f"%a: tensor<{m}x{k}x{lhs}>" + (f", %b: tensor<{k}x{n}x{rhs}>" if weight == "arg" else "")
    return f"""
{globs}func.func @main({args}) -> tensor<{m}x{n}xf32> {{
  {load}
  %z = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<{m}x{n}xf32>
  %c = linalg.fill ins(%z : f32) outs(%e : tensor<{m}x{n}xf32>) -> tensor<{m}x{n}xf32> loc("acc")
  %r = linalg.matmul ins(%a, %b : tensor<{m}x{k}x{lhs}>, tensor<{k}x{n}x{rhs}>) outs(%c : tensor<{m}x{n}xf32>) -> tensor<{m}x{n}xf32> loc("mm")
  return %r : tensor<{m}x{n}xf32>
}}
"""


# -- matmul-like ops -------------------------------------------------------------------------
def test_matmul_cost_matches_closed_form():
    m, k, n = 64, 128, 32
    c = costs(matmul_src(m, k, n))
    mm = c["mm"]
    assert (mm.label, mm.domain, mm.flops) == ("matmul", m * k * n, 2 * m * k * n)
    assert mm.bytes_read == (m * k + k * n + m * n) * 4  # A, B and the accumulator C
    assert mm.bytes_written == m * n * 4
    assert mm.bytes_weights == k * n * 4  # B is an immutable global
    assert mm.intensity == 2 * m * k * n / ((m * k + k * n + 2 * m * n) * 4)
    fill = c["acc"]
    assert (fill.flops, fill.bytes_read, fill.bytes_written, fill.bytes_weights) == (0, 0, m * n * 4, 0)


def test_constant_weights_count_like_globals_and_arguments_do_not():
    m, k, n = 4, 8, 16
    assert costs(matmul_src(m, k, n, weight="const"))["mm"].bytes_weights == k * n * 4
    arg = costs(matmul_src(m, k, n, weight="arg"))["mm"]
    assert (arg.bytes_weights, arg.bytes_read) == (0, (m * k + k * n + m * n) * 4)


def test_narrower_weights_halve_weight_traffic_and_gemv_is_weight_bound():
    f32 = costs(matmul_src(1, 4096, 4096))["mm"]
    f16 = costs(matmul_src(1, 4096, 4096, lhs="f16", rhs="f16"))["mm"]
    assert f16.bytes_weights * 2 == f32.bytes_weights == 4096 * 4096 * 4
    assert f16.flops == f32.flops == 2 * 4096 * 4096  # the extf's count 0
    assert f32.bytes_weights / f32.bytes > 0.99


def test_roofline_separates_gemv_from_gemm():
    gemv = costs(matmul_src(1, 4096, 4096))["mm"]
    gemm = costs(matmul_src(4096, 4096, 4096))["mm"]
    assert gemv.intensity < DEFAULT_RIDGE < 100 < gemm.intensity
    assert gemm.intensity / gemv.intensity > 50
    assert roofline_class(gemv, DEFAULT_RIDGE) == "memory-bound"
    assert roofline_class(gemm, DEFAULT_RIDGE) == "compute-bound"
    assert roofline_class(gemm, ridge=gemm.intensity * 2) == "memory-bound"


def test_batch_matmul_and_transposed_operands():
    b, m, k, n = 3, 8, 16, 4
    src = f"""
#lhs = affine_map<(d0, d1, d2) -> (d0, d2)>
#rhs_t = affine_map<(d0, d1, d2) -> (d1, d2)>
#out = affine_map<(d0, d1, d2) -> (d0, d1)>
func.func @main(%a: tensor<{b}x{m}x{k}xf32>, %w: tensor<{b}x{k}x{n}xf32>, %x: tensor<{m}x{k}xbf16>,
                %wt: tensor<{n}x{k}xbf16>, %acc: tensor<{m}x{n}xf32>) -> (tensor<{b}x{m}x{n}xf32>, tensor<{m}x{n}xf32>, tensor<{m}x{n}xf32>) {{
  %e = tensor.empty() : tensor<{b}x{m}x{n}xf32>
  %bmm = linalg.batch_matmul ins(%a, %w : tensor<{b}x{m}x{k}xf32>, tensor<{b}x{k}x{n}xf32>) outs(%e : tensor<{b}x{m}x{n}xf32>) -> tensor<{b}x{m}x{n}xf32> loc("bmm")
  %mt = linalg.matmul indexing_maps = [#lhs, #rhs_t, #out] ins(%x, %wt : tensor<{m}x{k}xbf16>, tensor<{n}x{k}xbf16>) outs(%acc : tensor<{m}x{n}xf32>) -> tensor<{m}x{n}xf32> loc("mt")
  %g = linalg.generic {{indexing_maps = [#lhs, #rhs_t, #out], iterator_types = ["parallel", "parallel", "reduction"]}}
      ins(%x, %wt : tensor<{m}x{k}xbf16>, tensor<{n}x{k}xbf16>) outs(%acc : tensor<{m}x{n}xf32>) {{
    ^bb0(%p: bf16, %q: bf16, %o: f32):
      %pe = arith.extf %p : bf16 to f32
      %qe = arith.extf %q : bf16 to f32
      %s = arith.mulf %pe, %qe : f32
      %t = arith.addf %o, %s : f32
      linalg.yield %t : f32
  }} -> tensor<{m}x{n}xf32> loc("gen")
  return %bmm, %mt, %g : tensor<{b}x{m}x{n}xf32>, tensor<{m}x{n}xf32>, tensor<{m}x{n}xf32>
}}
"""
    c = costs(src)
    assert c["bmm"].flops == 2 * b * m * k * n
    assert c["bmm"].bytes_read == (b * m * k + b * k * n + b * m * n) * 4
    for name in ("mt", "gen"):
        assert c[name].flops == 2 * m * k * n
        assert c[name].bytes_read == (m * k + n * k) * 2 + m * n * 4
        assert c[name].bytes_written == m * n * 4
    assert c["gen"].label.startswith("contract<")


def test_integer_matmul_counts_its_macs():
    src = """
func.func @main(%a: tensor<4x8xi8>, %b: tensor<8x2xi8>, %acc: tensor<4x2xi32>) -> tensor<4x2xi32> {
  %r = linalg.matmul ins(%a, %b : tensor<4x8xi8>, tensor<8x2xi8>) outs(%acc : tensor<4x2xi32>) -> tensor<4x2xi32> loc("q")
  return %r : tensor<4x2xi32>
}
"""
    module = parse_module(src)
    (site,) = find_sites(module)
    q = op_cost(site.op)
    assert q.flops == site.flops == 2 * 4 * 8 * 2
    assert (q.bytes_read, q.bytes_written) == (4 * 8 + 8 * 2 + 4 * 2 * 4, 4 * 2 * 4)


def test_conv_2d_domain_from_indexing_maps():
    n, h, w, c, kh, kw, f, s = 2, 9, 9, 3, 3, 3, 8, 2
    oh = ow = (h - kh) // s + 1
    src = f"""
func.func @main(%x: tensor<{n}x{h}x{w}x{c}xf32>, %k: tensor<{kh}x{kw}x{c}x{f}xf32>) -> tensor<{n}x{oh}x{ow}x{f}xf32> {{
  %z = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<{n}x{oh}x{ow}x{f}xf32>
  %acc = linalg.fill ins(%z : f32) outs(%e : tensor<{n}x{oh}x{ow}x{f}xf32>) -> tensor<{n}x{oh}x{ow}x{f}xf32>
  %y = linalg.conv_2d_nhwc_hwcf {{dilations = dense<1> : tensor<2xi64>, strides = dense<{s}> : tensor<2xi64>}}
      ins(%x, %k : tensor<{n}x{h}x{w}x{c}xf32>, tensor<{kh}x{kw}x{c}x{f}xf32>) outs(%acc : tensor<{n}x{oh}x{ow}x{f}xf32>) -> tensor<{n}x{oh}x{ow}x{f}xf32> loc("conv")
  return %y : tensor<{n}x{oh}x{ow}x{f}xf32>
}}
"""
    conv = costs(src)["conv"]
    domain = n * oh * ow * f * kh * kw * c
    assert (conv.label, conv.domain, conv.flops) == ("conv_2d_nhwc_hwcf", domain, 2 * domain)
    assert conv.bytes_read == (n * h * w * c + kh * kw * c * f + n * oh * ow * f) * 4
    assert conv.bytes_written == n * oh * ow * f * 4


ATTENTION = """
#q = affine_map<(b, m, n, k1, k2) -> (b, m, k1)>
#k = affine_map<(b, m, n, k1, k2) -> (b, k2, k1)>
#v = affine_map<(b, m, n, k1, k2) -> (b, k2, n)>
#s = affine_map<(b, m, n, k1, k2) -> ()>
#mask = affine_map<(b, m, n, k1, k2) -> (b, m, k2)>
#o = affine_map<(b, m, n, k1, k2) -> (b, m, n)>
func.func @main(%q: tensor<2x8x16xf16>, %k: tensor<2x12x16xf16>, %v: tensor<2x12x4xf16>,
                %mask: tensor<2x8x12xi1>) -> tensor<2x8x4xf16> {
  %scale = arith.constant 0.25 : f16
  %e = tensor.empty() : tensor<2x8x4xf16>
  %a = iree_linalg_ext.attention <{indexing_maps = [#q, #k, #v, #s, #mask, #o]}>
      ins(%q, %k, %v, %scale, %mask : tensor<2x8x16xf16>, tensor<2x12x16xf16>, tensor<2x12x4xf16>, f16, tensor<2x8x12xi1>)
      outs(%e : tensor<2x8x4xf16>) {
    ^bb0(%x: f32):
      iree_linalg_ext.yield %x : f32
  } -> tensor<2x8x4xf16> loc("attn")
  return %a : tensor<2x8x4xf16>
}
"""


def test_attention_formula_reads_its_maps():
    b, m, k1, k2, n = 2, 8, 16, 12, 4
    att = costs(ATTENTION)["attn"]
    assert att.flops == attention_flops(b, m, k1, k2, n) == 2 * b * m * k1 * k2 + 5 * b * m * k2 + 2 * b * m * k2 * n
    assert att.domain == b * m * k1 * k2 * n
    assert att.bytes_read == (b * m * k1 + b * k2 * k1 + b * k2 * n) * 2 + b * m * k2  # q, k, v f16; mask i1
    assert att.bytes_written == b * m * n * 2


def test_attention_shapes_reported_apart_from_gemms():
    hist = shape_histogram(parse_module(ATTENTION))
    assert hist.gemms == []
    (a,) = hist.attention
    assert (a.b, a.m, a.k1, a.k2, a.n, a.dtype, a.count) == (2, 8, 16, 12, 4, "f16", 1)
    assert a.flops == hist.total_flops and a.share == 1.0


# -- softmax, elementwise, reductions ---------------------------------------------------------
SOFTMAX = f"""
#id = {ID2}
#row = {ROW}
#bc = affine_map<(d0, d1) -> (d0)>
func.func @main(%x: tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>) {{
  %e = tensor.empty() : tensor<4x8xf32>
  %sm = linalg.softmax dimension(1) ins(%x : tensor<4x8xf32>) outs(%e : tensor<4x8xf32>) -> tensor<4x8xf32> loc("softmax")
  %ninf = arith.constant -3.40282347E+38 : f32
  %zero = arith.constant 0.0 : f32
  %r = tensor.empty() : tensor<4xf32>
  %m0 = linalg.fill ins(%ninf : f32) outs(%r : tensor<4xf32>) -> tensor<4xf32> loc("fill_max")
  %max = linalg.generic {{indexing_maps = [#id, #row], iterator_types = ["parallel", "reduction"]}}
      ins(%x : tensor<4x8xf32>) outs(%m0 : tensor<4xf32>) {{
    ^bb0(%a: f32, %acc: f32):
      %y = arith.maximumf %a, %acc : f32
      linalg.yield %y : f32
  }} -> tensor<4xf32> loc("max")
  %ex = linalg.generic {{indexing_maps = [#id, #bc, #id], iterator_types = ["parallel", "parallel"]}}
      ins(%x, %max : tensor<4x8xf32>, tensor<4xf32>) outs(%e : tensor<4x8xf32>) {{
    ^bb0(%a: f32, %b: f32, %o: f32):
      %d = arith.subf %a, %b : f32
      %y = math.exp %d : f32
      linalg.yield %y : f32
  }} -> tensor<4x8xf32> loc("sub_exp")
  %s0 = linalg.fill ins(%zero : f32) outs(%r : tensor<4xf32>) -> tensor<4xf32> loc("fill_sum")
  %sum = linalg.generic {{indexing_maps = [#id, #row], iterator_types = ["parallel", "reduction"]}}
      ins(%ex : tensor<4x8xf32>) outs(%s0 : tensor<4xf32>) {{
    ^bb0(%a: f32, %acc: f32):
      %y = arith.addf %a, %acc : f32
      linalg.yield %y : f32
  }} -> tensor<4xf32> loc("sum")
  %div = linalg.generic {{indexing_maps = [#id, #bc, #id], iterator_types = ["parallel", "parallel"]}}
      ins(%ex, %sum : tensor<4x8xf32>, tensor<4xf32>) outs(%e : tensor<4x8xf32>) {{
    ^bb0(%a: f32, %b: f32, %o: f32):
      %y = arith.divf %a, %b : f32
      linalg.yield %y : f32
  }} -> tensor<4x8xf32> loc("div")
  return %sm, %div : tensor<4x8xf32>, tensor<4x8xf32>
}}
"""


def test_softmax_formula_equals_its_decomposition():
    rows, cols = 4, 8
    numel = rows * cols
    c = costs(SOFTMAX)
    sm = c["softmax"]
    assert (sm.flops, sm.bytes_read, sm.bytes_written) == (SOFTMAX_FLOPS * numel, numel * 4, numel * 4)
    chain = [c[n] for n in ("fill_max", "max", "sub_exp", "fill_sum", "sum", "div")]
    assert [x.flops for x in chain] == [0, numel, 2 * numel, 0, numel, numel]
    assert sum(x.flops for x in chain) == sm.flops
    # reductions read their input and accumulator, write the accumulator
    assert c["max"].bytes_read == (numel + rows) * 4 and c["max"].bytes_written == rows * 4
    # a broadcast operand is read whole once, not once per use
    assert c["sub_exp"].bytes_read == (numel + rows) * 4 and c["sub_exp"].bytes_written == numel * 4


def test_elementwise_counts_body_ops_and_not_casts_selects_or_setup():
    src = f"""
#id = {ID2}
func.func @main(%x: tensor<4x8xbf16>, %y: tensor<4x8xf32>, %s: f32) -> tensor<4x8xf32> {{
  %e = tensor.empty() : tensor<4x8xf32>
  %half = arith.constant 0.5 : f32
  %g = linalg.generic {{indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]}}
      ins(%x, %y : tensor<4x8xbf16>, tensor<4x8xf32>) outs(%e : tensor<4x8xf32>) {{
    ^bb0(%a: bf16, %b: f32, %o: f32):
      %k = arith.mulf %s, %half : f32
      %ae = arith.extf %a : bf16 to f32
      %t = math.tanh %ae : f32
      %f = math.fma %t, %b, %k : f32
      %c = arith.cmpf ogt, %f, %half : f32
      %r = arith.select %c, %f, %b : f32
      linalg.yield %r : f32
  }} -> tensor<4x8xf32> loc("ew")
  return %g : tensor<4x8xf32>
}}
"""
    ew = costs(src)["ew"]
    # tanh 1 + fma 2 + cmpf 1; extf, select and the loop-invariant mulf of captured scalars 0
    assert ew.flops == 32 * 4
    assert (ew.bytes_read, ew.bytes_written) == (32 * 2 + 32 * 4, 32 * 4)  # the output is not an accumulator


def test_unread_result_of_a_max_argmax_reduction_is_not_counted():
    src = f"""
#id = {ID2}
#row = {ROW}
func.func @main(%x: tensor<4x8xf32>, %m0: tensor<4xf32>, %i0: tensor<4xi64>) -> tensor<4xf32> {{
  %r:2 = linalg.generic {{indexing_maps = [#id, #row, #row], iterator_types = ["parallel", "reduction"]}}
      ins(%x : tensor<4x8xf32>) outs(%m0, %i0 : tensor<4xf32>, tensor<4xi64>) {{
    ^bb0(%a: f32, %m: f32, %i: i64):
      %j = linalg.index 1 : index
      %ji = arith.index_cast %j : index to i64
      %gt = arith.cmpf ogt, %a, %m : f32
      %mx = arith.maximumf %a, %m : f32
      %ix = arith.select %gt, %ji, %i : i64
      linalg.yield %mx, %ix : f32, i64
  }} -> (tensor<4xf32>, tensor<4xi64>) loc("amax")
  return %r#0 : tensor<4xf32>
}}
"""
    amax = costs(src)["amax"]
    assert amax.flops == 32  # maximumf only: the cmpf feeds the unread argmax
    assert (amax.bytes_read, amax.bytes_written) == ((32 + 4) * 4, 4 * 4)


def test_embedding_lookup_reads_one_row_per_token_not_the_table():
    vocab, d, seq = 1000, 16, 4
    src = f"""
#tok = affine_map<(d0, d1) -> (d0)>
#id = {ID2}
func.func @main(%ids: tensor<{seq}xi64>) -> tensor<{seq}x{d}xf32> {{
  %table = arith.constant dense_resource<emb> : tensor<{vocab}x{d}xf32>
  %e = tensor.empty() : tensor<{seq}x{d}xf32>
  %g = linalg.generic {{indexing_maps = [#tok, #id], iterator_types = ["parallel", "parallel"]}}
      ins(%ids : tensor<{seq}xi64>) outs(%e : tensor<{seq}x{d}xf32>) {{
    ^bb0(%i: i64, %o: f32):
      %row = arith.index_cast %i : i64 to index
      %col = linalg.index 1 : index
      %v = tensor.extract %table[%row, %col] : tensor<{vocab}x{d}xf32>
      linalg.yield %v : f32
  }} -> tensor<{seq}x{d}xf32> loc("embed")
  return %g : tensor<{seq}x{d}xf32>
}}
"""
    emb = costs(src)["embed"]
    assert emb.flops == 0
    assert emb.bytes_read == seq * 8 + seq * d * 4 and emb.bytes_weights == seq * d * 4
    assert emb.bytes_written == seq * d * 4


def test_dtype_sizes():
    src = f"""
#id = {ID2}
func.func @main(%a: tensor<4x8xi1>, %b: tensor<4x8xi64>, %c: tensor<4x8xbf16>, %d: tensor<4x8xi8>) -> tensor<4x8xf16> {{
  %e = tensor.empty() : tensor<4x8xf16>
  %g = linalg.generic {{indexing_maps = [#id, #id, #id, #id, #id], iterator_types = ["parallel", "parallel"]}}
      ins(%a, %b, %c, %d : tensor<4x8xi1>, tensor<4x8xi64>, tensor<4x8xbf16>, tensor<4x8xi8>) outs(%e : tensor<4x8xf16>) {{
    ^bb0(%p: i1, %q: i64, %r: bf16, %s: i8, %o: f16):
      %qf = arith.sitofp %q : i64 to bf16
      %sf = arith.sitofp %s : i8 to bf16
      %t = arith.addf %qf, %sf : bf16
      %u = arith.select %p, %t, %r : bf16
      %w = arith.extf %u : bf16 to f32
      %v = arith.truncf %w : f32 to f16
      linalg.yield %v : f16
  }} -> tensor<4x8xf16> loc("mix")
  return %g : tensor<4x8xf16>
}}
"""
    mix = costs(src)["mix"]
    assert mix.bytes_read == 32 * (1 + 8 + 2 + 1) and mix.bytes_written == 32 * 2 and mix.flops == 32


# -- leaves, views, hoisting -------------------------------------------------------------------
def test_leaves_and_views_do_not_double_count():
    src = """
util.global private @p = dense<1.0> : tensor<1024xf32>
func.func @main() -> tensor<32x32xf32> {
  %w = util.global.load @p : tensor<1024xf32> loc("param")
  %v = tensor.expand_shape %w [[0, 1]] output_shape [32, 32] : tensor<1024xf32> into tensor<32x32xf32> loc("view")
  %e = tensor.empty() : tensor<32x32xf32> loc("empty")
  %n = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>],
                       iterator_types = ["parallel", "parallel"]} ins(%v : tensor<32x32xf32>) outs(%e : tensor<32x32xf32>) {
    ^bb0(%a: f32, %o: f32):
      %y = arith.negf %a : f32
      linalg.yield %y : f32
  } -> tensor<32x32xf32> loc("neg")
  return %n : tensor<32x32xf32>
}
"""
    mc = analyze(parse_module(src), hoist=False)
    c = {x.name: x for x in mc.ops}
    assert all(c[k].bytes == 0 and c[k].flops == 0 for k in ("param", "view", "empty"))
    assert mc.total_bytes == 2 * 1024 * 4 and mc.total_weight_bytes == 1024 * 4
    assert mc.weight_share == 0.5


def test_weight_transposes_are_hoisted_out_of_the_forward():
    src = """
func.func @main(%x: tensor<8x16xf32>) -> tensor<8x32xf32> {
  %w = arith.constant dense_resource<w> : tensor<32x16xf32>
  %e = tensor.empty() : tensor<16x32xf32>
  %wt = linalg.transpose ins(%w : tensor<32x16xf32>) outs(%e : tensor<16x32xf32>) permutation = [1, 0] loc("wt")
  %z = arith.constant 0.0 : f32
  %o = tensor.empty() : tensor<8x32xf32>
  %acc = linalg.fill ins(%z : f32) outs(%o : tensor<8x32xf32>) -> tensor<8x32xf32> loc("acc")
  %r = linalg.matmul ins(%x, %wt : tensor<8x16xf32>, tensor<16x32xf32>) outs(%acc : tensor<8x32xf32>) -> tensor<8x32xf32> loc("mm")
  return %r : tensor<8x32xf32>
}
"""
    module = parse_module(src)
    hoisted = analyze(module)
    c = {x.name: x for x in hoisted.ops}
    assert (c["wt"].bytes, c["wt"].flops) == (0, 0)
    assert c["acc"].bytes_written == 8 * 32 * 4  # a splat fill is no weight: not hoisted
    assert c["mm"].bytes_weights == 16 * 32 * 4
    (wt,) = hoisted.hoisted
    assert (wt.name, wt.bytes_read, wt.bytes_written) == ("wt", 32 * 16 * 4, 32 * 16 * 4)
    literal = {x.name: x for x in analyze(module, hoist=False).ops}
    assert literal["wt"].bytes == 2 * 32 * 16 * 4 and literal["wt"].bytes_weights == 32 * 16 * 4
    assert "hoisted constant expressions" in opscope.render(hoisted)


def test_copies_move_what_they_write():
    src = """
func.func @main(%a: tensor<4x8xf32>, %b: tensor<4x8xf32>) -> (tensor<8x8xf32>, tensor<2x8xf32>) {
  %c = tensor.concat dim(0) %a, %b : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<8x8xf32> loc("cat")
  %s = tensor.extract_slice %a[0, 0] [2, 8] [1, 1] : tensor<4x8xf32> to tensor<2x8xf32> loc("slice")
  return %c, %s : tensor<8x8xf32>, tensor<2x8xf32>
}
"""
    c = costs(src)
    assert (c["cat"].flops, c["cat"].bytes_read, c["cat"].bytes_written) == (0, 64 * 4, 64 * 4)
    assert c["slice"].bytes == 0  # a view: its consumer reads the slice


# -- unknowns -----------------------------------------------------------------------------------
def test_dynamic_shapes_are_unknown_not_guessed():
    src = f"""
#id = {ID2}
func.func @main(%x: tensor<?x8xf32>, %w: tensor<8x8xf32>, %acc: tensor<?x8xf32>) -> tensor<?x8xf32> {{
  %r = linalg.matmul ins(%x, %w : tensor<?x8xf32>, tensor<8x8xf32>) outs(%acc : tensor<?x8xf32>) -> tensor<?x8xf32> loc("dyn")
  return %r : tensor<?x8xf32>
}}
"""
    mc = analyze(parse_module(src))
    dyn = {c.name: c for c in mc.ops}["dyn"]
    assert (dyn.domain, dyn.flops, dyn.bytes_read, dyn.bytes, dyn.intensity) == (None, None, None, None, None)
    assert roofline_class(dyn, DEFAULT_RIDGE) == "unknown"
    assert mc.unknown == [("matmul", "dyn", "dynamic shape tensor<?x8xf32>")]
    assert not mc.complete and mc.total_bytes == 0 and mc.total_flops == 0
    assert "dyn: dynamic shape" in opscope.render(mc)
    assert mc.roofline_split().unknown_ops == 1


def test_unmodelled_ops_are_listed_not_crashed_on():
    src = """
func.func @main(%x: tensor<8x4xf32>, %i: tensor<8x4xi64>) -> (tensor<8x4xf32>, tensor<8x4xi64>, tensor<8x4xf32>) {
  %s:2 = iree_linalg_ext.sort dimension(1) outs(%x, %i : tensor<8x4xf32>, tensor<8x4xi64>) {
    ^bb0(%a: f32, %b: f32, %c: i64, %d: i64):
      %p = arith.cmpf oge, %a, %b : f32
      iree_linalg_ext.yield %p : i1
  } -> tensor<8x4xf32>, tensor<8x4xi64> loc("topk")
  %c = "my.custom"(%x) : (tensor<8x4xf32>) -> tensor<8x4xf32> loc("custom")
  return %s#0, %s#1, %c : tensor<8x4xf32>, tensor<8x4xi64>, tensor<8x4xf32>
}
"""
    mc = analyze(parse_module(src))
    assert mc.unknown == [
        ("sort", "topk", "iree_linalg_ext.sort is not modelled"),
        ("my.custom", "custom", "my.custom is not modelled"),
    ]
    text = opscope.render(mc)
    assert "unknown (2):" in text and "lower bounds" in text
    opscope.render(mc, "json")


def test_empty_module_is_zeros_with_a_clear_note():
    mc = analyze(parse_module("module {}"))
    assert (mc.ops, mc.total_flops, mc.total_bytes, mc.weight_share, mc.intensity) == ([], 0, 0, 0.0, 0.0)
    assert mc.by_label() == [] and mc.top(5) == [] and mc.unknown == []
    text = opscope.render(mc)
    assert "bytes moved" in text and "no ops to cost" in text
    assert json.loads(opscope.render(mc, "json"))["totals"]["ops"] == 0
    hist = shape_histogram(parse_module("module {}"))
    assert (hist.gemms, hist.attention, hist.total_flops) == ([], [], 0) and "none" in opscope.render(hist)


# -- loops: trip count × body, or unknown ------------------------------------------------------
# outer trips, inner trips, batch, input width, hidden width
T, J, B, I, H = 5, 3, 4, 8, 16  # noqa: E741
LOOP = f"""
util.global private @w = dense<1.0> : tensor<{I}x{H}xf32>
func.func @main(%x: tensor<{T}x{B}x{I}xf32>, %h0: tensor<{B}x{H}xf32>, %u: tensor<{H}x{H}xf32>) -> tensor<{B}x{H}xf32> {{
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %ct64 = arith.constant {T} : i64
  %ct = arith.index_cast %ct64 : i64 to index
  %cj = arith.constant {J} : index
  %w = util.global.load @w : tensor<{I}x{H}xf32>
  %r = scf.for %i = %c0 to %ct step %c1 iter_args(%h = %h0) -> (tensor<{B}x{H}xf32>) {{
    %xs = tensor.extract_slice %x[%i, 0, 0] [1, {B}, {I}] [1, 1, 1] : tensor<{T}x{B}x{I}xf32> to tensor<{B}x{I}xf32>
    %m = linalg.matmul ins(%xs, %w : tensor<{B}x{I}xf32>, tensor<{I}x{H}xf32>) outs(%h : tensor<{B}x{H}xf32>) -> tensor<{B}x{H}xf32> loc("cell.ih")
    %e = tensor.empty() : tensor<{B}x{H}xf32>
    %t = linalg.generic {{indexing_maps = [{ID2}, {ID2}], iterator_types = ["parallel", "parallel"]}}
        ins(%m : tensor<{B}x{H}xf32>) outs(%e : tensor<{B}x{H}xf32>) {{
      ^bb0(%a: f32, %o: f32):
        %y = math.tanh %a : f32
        linalg.yield %y : f32
    }} -> tensor<{B}x{H}xf32> loc("cell.tanh")
    %g = scf.for %j = %c0 to %cj step %c1 iter_args(%s = %t) -> (tensor<{B}x{H}xf32>) {{
      %hh = linalg.matmul ins(%s, %u : tensor<{B}x{H}xf32>, tensor<{H}x{H}xf32>) outs(%s : tensor<{B}x{H}xf32>) -> tensor<{B}x{H}xf32> loc("cell.hh")
      scf.yield %hh : tensor<{B}x{H}xf32>
    }} loc("refine")
    scf.yield %g : tensor<{B}x{H}xf32>
  }} loc("lstm")
  return %r : tensor<{B}x{H}xf32>
}}
"""


def test_a_static_loop_counts_trip_count_times_its_body():
    """An LSTM-like `scf.for` over tensor iter_args, with a nested `scf.for`: every body op
    costed by the usual rules, times the trips of every loop around it."""
    module = parse_module(LOOP)
    mc = analyze(module)
    loop = {c.name: c for c in mc.ops}["lstm"]
    ih, tanh, hh = 2 * B * I * H, B * H, 2 * B * H * H  # FLOPs per execution
    f32 = 4
    ih_read, ih_written = (B * I + I * H + B * H) * f32, B * H * f32  # slice, weight, accumulator
    tanh_read, tanh_written = B * H * f32, B * H * f32
    hh_read, hh_written = (B * H + H * H + B * H) * f32, B * H * f32  # %s as input and as accumulator
    assert (loop.label, loop.domain, loop.unknown) == ("scf.for", T, None)
    assert loop.flops == T * (ih + tanh + J * hh) == 36_160
    assert loop.bytes_read == T * (ih_read + tanh_read + J * hh_read) == 28_800
    assert loop.bytes_written == T * (ih_written + tanh_written + J * hh_written) == 6_400
    assert loop.bytes_weights == T * I * H * f32  # the global is read every step
    assert mc.total_flops == loop.flops and mc.complete  # the constants, the load and the return cost 0
    inner = {c.name: c for c in body_costs(_op(module, "lstm"))}
    assert (inner["cell.ih"].flops, inner["cell.tanh"].flops, inner["refine"].flops, inner["refine"].domain) == (
        ih,
        tanh,
        J * hh,
        J,
    )
    assert "loops counted as trip count × body: lstm ×5" in opscope.render(mc)
    assert json.loads(opscope.render(mc, "json"))["totals"]["flops"] == 36_160
    # GEMM shapes: each site × its executions, shares of a total that contains them
    assert [executions(s.op) for s in find_sites(module)] == [(T, None), (T * J, None)]
    hist = shape_histogram(module)
    rows = [(g.m, g.k, g.n, g.count, g.runs, g.flops) for g in hist.gemms]
    assert rows == [(B, H, H, 1, T * J, T * J * hh), (B, I, H, 1, T, T * ih)]
    assert hist.gemm_flops == T * ih + T * J * hh == 35_840 and hist.total_flops == 36_160
    assert [g.share for g in hist.gemms] == [T * J * hh / 36_160, T * ih / 36_160]
    assert hist.uncounted == [] and "99.1% of the module's 36.16 K" in opscope.render(hist)
    assert "(30.72 K FLOPs, 15 runs)" in opscope.render(hist)


def _op(module, name: str):
    """The first op under `module` whose location name is `name`."""
    from opscope.ir.sites import location_name

    found = []
    module.operation.walk(
        lambda op: (found.append(op.operation) if location_name(op.location) == name else None, ir.WalkResult.ADVANCE)[
            1
        ]
    )
    return found[0]


@pytest.mark.parametrize("lb,ub,step,trips", [(0, 8, 1, 8), (1, 10, 4, 3), (5, 2, 1, 0), (3, 3, 2, 0)])
def test_trip_count_reads_constant_bounds(lb, ub, step, trips):
    src = f"""
func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {{
  %lb = arith.constant {lb} : i32
  %ub = arith.constant {ub} : i32
  %st = arith.constant {step} : i32
  %r = scf.for %i = %lb to %ub step %st iter_args(%a = %x) -> (tensor<4xf32>) : i32 {{
    %y = arith.addf %a, %a : tensor<4xf32>
    scf.yield %y : tensor<4xf32>
  }} loc("loop")
  return %r : tensor<4xf32>
}}
"""
    module = parse_module(src)
    assert trip_count(_op(module, "loop")) == (trips, None)
    assert costs(src)["loop"].flops == 4 * trips  # one addf per element per trip; 0 trips is 0, known


LOOPS_WITHOUT_TRIP_COUNT = """
func.func @main(%x: tensor<4x8xf32>, %w: tensor<8x8xf32>, %n: index) -> (tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %false = arith.constant false
  %a = scf.for %i = %c0 to %n step %c1 iter_args(%h = %x) -> (tensor<4x8xf32>) {
    %m = linalg.matmul ins(%h, %w : tensor<4x8xf32>, tensor<8x8xf32>) outs(%h : tensor<4x8xf32>) -> tensor<4x8xf32> loc("step")
    scf.yield %m : tensor<4x8xf32>
  } loc("until_n")
  %b = scf.while (%h = %x) : (tensor<4x8xf32>) -> tensor<4x8xf32> {
    scf.condition(%false) %h : tensor<4x8xf32>
  } do {
  ^bb0(%h2: tensor<4x8xf32>):
    %m2 = linalg.matmul ins(%h2, %w : tensor<4x8xf32>, tensor<8x8xf32>) outs(%h2 : tensor<4x8xf32>) -> tensor<4x8xf32> loc("wstep")
    scf.yield %m2 : tensor<4x8xf32>
  } loc("until_done")
  %c = scf.for %i = %c0 to %c2 step %c1 iter_args(%h = %x) -> (tensor<4x8xf32>) {
    %m3 = linalg.matmul ins(%h, %w : tensor<4x8xf32>, tensor<8x8xf32>) outs(%h : tensor<4x8xf32>) -> tensor<4x8xf32> loc("known")
    %q = "my.custom"(%m3) : (tensor<4x8xf32>) -> tensor<4x8xf32> loc("custom")
    scf.yield %q : tensor<4x8xf32>
  } loc("opaque_body")
  %top = linalg.matmul ins(%x, %w : tensor<4x8xf32>, tensor<8x8xf32>) outs(%x : tensor<4x8xf32>) -> tensor<4x8xf32> loc("top")
  return %a, %b, %c, %top : tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>
}
"""


def test_loops_without_a_static_trip_count_are_unknown_and_their_sites_left_out():
    module = parse_module(LOOPS_WITHOUT_TRIP_COUNT)
    mc = analyze(module)
    by_name = {c.name: c for c in mc.ops}
    for name in ("until_n", "until_done", "opaque_body"):
        c = by_name[name]
        assert (c.flops, c.bytes_read, c.bytes_written, c.bytes_weights) == (None, None, None, None)
        assert roofline_class(c) == "unknown"
    assert by_name["opaque_body"].domain == 2  # its trips are known, its body is not
    assert mc.unknown == [
        ("scf.for", "until_n", "scf.for: no static trip count (upper bound not a constant)"),
        ("scf.while", "until_done", "scf.while: no static trip count (it loops until its condition fails)"),
        ("scf.for", "opaque_body", "body op custom: my.custom is not modelled"),
    ]
    top = 2 * 4 * 8 * 8
    assert mc.total_flops == top and not mc.complete  # never guessed, never 0: listed and left out
    text = opscope.render(mc)
    assert "unknown (3):" in text and "until_done: scf.while: no static trip count" in text
    assert "loops counted as trip count × body: opaque_body ×2" in text
    hist = shape_histogram(module)
    assert [(g.count, g.runs, g.flops, g.share) for g in hist.gemms] == [(1, 1, top, 1.0)]
    assert hist.uncounted == [
        "step: inside loop until_n: scf.for: no static trip count (upper bound not a constant)",
        "wstep: inside loop until_done: scf.while: no static trip count (it loops until its condition fails)",
        "known: its loop's FLOPs are unknown (body op custom: my.custom is not modelled)",
    ]
    text = opscope.render(hist)
    assert "100.0% of the module's 512" in text and "3 site(s) outside the module's FLOP total left out:" in text
    assert json.loads(json.dumps(hist.to_dict()))["uncounted"] == hist.uncounted


def test_no_share_exceeds_the_total_that_holds_it(transformer):
    """Every GEMM/attention share and every per-kind percentage is ≤ 100 %, loops or not."""
    for module in (transformer, parse_module(LOOP), parse_module(LOOPS_WITHOUT_TRIP_COUNT), parse_module(ATTENTION)):
        mc = analyze(module)
        hist = shape_histogram(module)
        assert hist.gemm_flops + hist.attention_flops <= hist.total_flops == mc.total_flops
        assert all(0 <= r.share <= 1 for r in [*hist.gemms, *hist.attention])
        assert sum(r.flops for r in mc.by_label()) == mc.total_flops
        assert sum(r.bytes for r in mc.by_label()) <= mc.total_bytes


def test_hoisted_site_is_left_out_of_the_shares():
    """A matmul of two weights is a constant expression: computed once at load, in no per-call total."""
    src = """
util.global private @a = dense<1.0> : tensor<4x8xf32>
util.global private @b = dense<1.0> : tensor<8x8xf32>
func.func @main(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %a = util.global.load @a : tensor<4x8xf32>
  %b = util.global.load @b : tensor<8x8xf32>
  %z = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<4x8xf32>
  %c = linalg.fill ins(%z : f32) outs(%e : tensor<4x8xf32>) -> tensor<4x8xf32>
  %ab = linalg.matmul ins(%a, %b : tensor<4x8xf32>, tensor<8x8xf32>) outs(%c : tensor<4x8xf32>) -> tensor<4x8xf32> loc("folded")
  %r = arith.addf %x, %ab : tensor<4x8xf32> loc("add")
  return %r : tensor<4x8xf32>
}
"""
    hist = shape_histogram(parse_module(src))
    assert hist.gemms == [] and hist.total_flops == 32
    assert hist.uncounted == ["folded: a hoisted constant expression (computed once at load, 0 per call)"]


def test_a_weight_transpose_in_a_loop_body_is_hoisted_like_one_outside():
    src = """
util.global private @w = dense<1.0> : tensor<8x4xf32>
func.func @main(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c3 = arith.constant 3 : index
  %w = util.global.load @w : tensor<8x4xf32>
  %r = scf.for %i = %c0 to %c3 step %c1 iter_args(%h = %x) -> (tensor<4x8xf32>) {
    %e = tensor.empty() : tensor<4x8xf32>
    %wt = linalg.transpose ins(%w : tensor<8x4xf32>) outs(%e : tensor<4x8xf32>) permutation = [1, 0] loc("wt")
    %y = arith.addf %h, %wt : tensor<4x8xf32> loc("add")
    scf.yield %y : tensor<4x8xf32>
  } loc("loop")
  return %r : tensor<4x8xf32>
}
"""
    mc = analyze(parse_module(src))
    loop = {c.name: c for c in mc.ops}["loop"]
    assert (loop.flops, loop.bytes_read, loop.bytes_written) == (3 * 32, 3 * 2 * 32 * 4, 3 * 32 * 4)  # the adds only
    assert [(c.name, c.bytes_read, c.bytes_written) for c in mc.hoisted] == [("wt", 32 * 4, 32 * 4)]
    literal = {c.name: c for c in analyze(parse_module(src), hoist=False).ops}["loop"]
    assert literal.bytes_read == 3 * (32 * 4 + 2 * 32 * 4)  # the transpose read its weight every step


# -- module view: rankings, kinds, roofline, renderers --------------------------------------------
@pytest.fixture(scope="module")
def transformer():
    """A 2-layer single-head transformer (d_model 32, seq 8, FFN 128) with weights in globals."""
    return parse_module(transformer_module(2, 32, 8, weights="globals"))


def test_rankings_kinds_and_roofline_split(transformer):
    mc = analyze(transformer)
    ops = mc.ops
    assert [c.index for c in ops] == list(range(len(ops)))
    assert mc.total_flops == sum(c.flops for c in ops) and mc.complete
    by_flops = mc.top(3)
    assert [c.flops for c in by_flops] == sorted((c.flops for c in ops), reverse=True)[:3]
    assert mc.top(3, by="bytes")[0].bytes == max(c.bytes for c in ops)
    kinds = {r.label: r for r in mc.by_label()}
    sites = find_sites(transformer)
    assert kinds["matmul"].count == len(sites) and kinds["matmul"].flops == sum(s.flops for s in sites)
    assert sum(r.bytes for r in kinds.values()) == mc.total_bytes
    split = mc.roofline_split(ridge=2.5)  # FFN matmuls above (2.56, 2.91), the others below
    assert split.memory_bytes + split.compute_bytes == mc.total_bytes
    assert split.memory_flops + split.compute_flops == mc.total_flops
    assert split.compute_flops == sum(c.flops for c in ops if roofline_class(c, 2.5) == "compute-bound") > 0
    assert mc.roofline_split(ridge=1e9).compute_flops == 0
    d = json.loads(opscope.render(mc, "json", ridge=2.5))
    assert d["totals"]["flops"] == mc.total_flops and len(d["ops"]) == len(ops)
    assert d["roofline"]["compute_bound_flops"] == split.compute_flops
    with pytest.raises(ValueError, match="choose 'flops' or 'bytes'"):
        mc.top(by="time")


def test_ledger_text_has_the_reference_sections(transformer):
    text = opscope.render(analyze(transformer), top=3, ridge=4.0)
    for part in (
        "bytes moved",
        "weights read",
        "% of bytes moved",
        "top 3 ops by bytes:",
        "top 3 ops by FLOPs:",
        "per kind (by bytes):",
        "roofline at ridge 4 FLOP/B:",
        "memory-bound",
        "compute-bound",
        "layer0.ffn.up",
    ):
        assert part in text


def test_human_units():
    assert [nbytes(x) for x in (0, 1023, 1024, 1536, 1024**3 * 2.5)] == [
        "0 B",
        "1023 B",
        "1.00 KB",
        "1.50 KB",
        "2.50 GB",
    ]
    assert [count(x) for x in (999, 1500, 2_000_000, 3e12)] == ["999", "1.50 K", "2.00 M", "3.00 T"]


def test_gemm_histogram_sorted_by_flops(transformer):
    hist = shape_histogram(transformer)
    d, s, f = 32, 8, 128
    rows = {(g.batch, g.m, g.k, g.n): g for g in hist.gemms}
    # per layer: q, k, v, o [s,d]x[d,d]; scores [s,d]x[d,s]; context [s,s]x[s,d]; up [s,d]x[d,f]; down [s,f]x[f,d]
    assert rows[(1, s, d, d)].count == 8 and rows[(1, s, d, d)].flops == 8 * 2 * s * d * d
    assert rows[(1, s, d, f)].count == 2 and rows[(1, s, f, d)].count == 2
    assert [g.flops for g in hist.gemms] == sorted((g.flops for g in hist.gemms), reverse=True)
    assert hist.gemm_flops == sum(x.flops for x in find_sites(transformer))
    assert hist.total_flops == analyze(transformer).total_flops
    assert abs(sum(g.share for g in hist.gemms) - hist.gemm_flops / hist.total_flops) < 1e-12
    assert all(g.dtype == "f32" for g in hist.gemms)
    assert "8×32×32" in opscope.render(hist) and json.dumps(hist.to_dict())


def test_site_costs_sidecar_equals_the_cost_model(transformer, tmp_path):
    """The recorder's `site,flops` sidecar (fed from `Site.flops` through the manifest) agrees with op_cost."""
    from opscope.pipeline.taps import inject_matmul_stats

    module = parse_module(transformer_module(2, 32, 8, weights="globals"))
    expected = {s.name: op_cost(s.op).flops for s in find_sites(module)}
    assert expected == {s.name: s.flops for s in find_sites(module)}
    _, manifest = inject_matmul_stats(module)
    write_site_costs(tmp_path / "run.csv.sites", manifest)
    assert read_site_costs(tmp_path / "run.csv.sites") == expected


# -- real models against PyTorch's FlopCounterMode ----------------------------------------------
MODELS = ("minilm", "gpt2", "llama", "mixtral")


def _import_with_flop_count(name: str, attn: str):
    """(linalg module, FlopCounterMode total) of one HF model's forward."""
    torch = pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from torch.utils.flop_counter import FlopCounterMode

    from opscope.importers.torch_fx import import_torch
    from opscope.models import huggingface

    build = huggingface.minilm if name == "minilm" else huggingface.BUILDERS[name]
    model, kwargs = build(attn_implementation=attn) if name != "minilm" else build(seq=16, attn_implementation=attn)
    with torch.no_grad(), FlopCounterMode(display=False) as counter:
        model(**kwargs)
    return import_torch(model, (), example_kwargs=kwargs), counter.get_total_flops()


@pytest.fixture(scope="module", params=MODELS)
def eager_model(request):
    return request.param, *_import_with_flop_count(request.param, "eager")


@pytest.fixture(scope="module")
def llama_sdpa():
    return _import_with_flop_count("llama", "sdpa")


def test_matmul_flops_equal_flop_counter_mode(eager_model):
    name, module, torch_flops = eager_model
    sites = find_sites(module)
    assert sum(s.flops for s in sites) == torch_flops
    assert all(op_cost(s.op).flops == s.flops for s in sites)  # the sidecar's Site.flops is the cost model's


def test_real_models_cost_completely_except_sort(eager_model):
    name, module, _ = eager_model
    mc = analyze(module)
    unknown = {label for label, _, _ in mc.unknown}
    assert unknown == ({"sort"} if name == "mixtral" else set())  # top-k routing's sort
    assert mc.total_flops > sum(s.flops for s in find_sites(module)) and 0 < mc.weight_share < 1


def test_sdpa_attention_is_counted_where_flop_counter_mode_reports_zero(llama_sdpa):
    module, torch_flops = llama_sdpa
    hist = shape_histogram(module)
    assert hist.gemm_flops == torch_flops  # PyTorch counts nothing for the CPU flash-attention kernel
    (a,) = hist.attention  # tiny Llama: 4 heads (K/V repeated from 2), 8 tokens, head_dim 8, two layers
    assert (a.b, a.m, a.k1, a.k2, a.n, a.count) == (4, 8, 8, 8, 8, 2)
    bmm = 2 * (2 * 4 * 8 * 8 * 8) * 2  # q·kᵀ and p·v per layer: PyTorch's eager bmm count
    assert a.flops == bmm + SOFTMAX_FLOPS * 4 * 8 * 8 * 2


CAPTURE = """
util.global private @table = dense<[1.0, 2.0, 3.0, 4.0]> : tensor<4xf32>
func.func @main(%x: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  %t = util.global.load @table : tensor<4xf32>
  %e = tensor.empty() : tensor<4xf32>
  %from_arg = linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>], iterator_types = ["parallel"]}
      outs(%e : tensor<4xf32>) {
    ^bb0(%o: f32):
      %i = linalg.index 0 : index
      %v = tensor.extract %x[%i] : tensor<4xf32>
      linalg.yield %v : f32
  } -> tensor<4xf32>
  %from_table = linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>], iterator_types = ["parallel"]}
      outs(%e : tensor<4xf32>) {
    ^bb0(%o: f32):
      %i = linalg.index 0 : index
      %v = tensor.extract %t[%i] : tensor<4xf32>
      linalg.yield %v : f32
  } -> tensor<4xf32>
  return %from_arg, %from_table : tensor<4xf32>, tensor<4xf32>
}
"""


def test_a_body_reading_an_activation_is_no_constant_expression():
    """Its only operand is `tensor.empty`, but the body reads the argument: computed per call,
    never hoisted; the same body reading an immutable global is a weight expression."""
    from opscope.ir.const_expr import captures, is_const_expr, is_weight

    module = parse_module(CAPTURE)
    (fn,) = [op.operation for op in module.body.operations if op.operation.name == "func.func"]
    ops = [op.operation for op in fn.regions[0].blocks[0].operations]
    from_arg, from_table = ops[2], ops[3]
    assert [str(v.type) for v in captures(from_arg)] == ["tensor<4xf32>"]
    assert not is_const_expr(from_arg.results[0])
    assert is_const_expr(from_table.results[0]) and is_weight(from_table.results[0])
    assert not is_hoisted(from_arg) and is_hoisted(from_table)
