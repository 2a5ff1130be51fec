"""`sparse-weight` (a mostly-zero constant weight stored by output channel) against numpy, and
`opscope plan` proposing and measuring it on the built-in model's 90 %-zero FFN weights."""

from __future__ import annotations

import numpy as np
import pytest

from opscope.errors import OpscopeError

TOL = 1e-5  # relative to max |reference|: the nonzero terms summed in K order, in f32 (bf16 weights: exact
# in f32 once widened, so the same bound holds)


def _pruned(rng, shape, keep=0.1) -> np.ndarray:
    w = rng.standard_normal(shape).astype(np.float32)
    return np.where(np.abs(w) >= np.quantile(np.abs(w), 1 - keep), w, 0.0).astype(np.float32)


def _hex(a: np.ndarray) -> str:
    return 'dense<"0x' + np.ascontiguousarray(a).tobytes().hex().upper() + '">'


def _bf16(a: np.ndarray) -> np.ndarray:
    """float32 → bf16 bits (round to nearest even) and the float32 values they hold."""
    bits = a.view(np.uint32)
    bits = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)
    return bits, (bits.astype(np.uint32) << 16).view(np.float32)


def test_ellpack_holds_each_output_channel_nonzeros_in_order():
    from opscope.passes.sparse_weight import ellpack

    w = np.array([[0, 2, 0], [1, 0, 0], [0, 3, 0], [4, 5, 0]], np.float32)  # column 2 all zero
    idx, val = ellpack(w)
    assert idx.tolist() == [[1, 3, 0], [0, 2, 3], [0, 0, 0]]
    assert val.tolist() == [[1, 4, 0], [2, 3, 5], [0, 0, 0]]
    back = np.zeros_like(w)
    for n in range(3):
        np.add.at(back[:, n], idx[n], val[n])
    np.testing.assert_array_equal(back, w)


def test_rewritten_sites_compute_numpys_product():
    """One module, one compile: a torch-style x·Wᵀ (global under a transpose), a weight broadcast over
    a batch, a bf16 weight widened into an f32 product, and a weight too dense to rewrite."""
    from opscope.ir.loading import module_text, new_context, parse_module
    from opscope.passes.sparse_weight import SparseWeight
    from opscope.run.compile import compile_module
    from opscope.run.runtime import load

    rng = np.random.default_rng(7)
    w_t = _pruned(rng, (48, 64))  # [N, K] as torch stores it
    w_b = _pruned(rng, (64, 40))
    bits, w_h = _bf16(_pruned(rng, (64, 24)))
    w_d = _pruned(rng, (64, 16), keep=0.7)
    text = f"""
func.func @f(%x: tensor<5x64xf32>, %xb: tensor<2x5x64xf32>) -> (tensor<5x48xf32>, tensor<2x5x40xf32>, tensor<5x24xf32>, tensor<5x16xf32>) {{
  %z = arith.constant 0.0 : f32
  %wt = util.global.load @wt : tensor<48x64xf32>
  %et = tensor.empty() : tensor<64x48xf32>
  %t = linalg.transpose ins(%wt : tensor<48x64xf32>) outs(%et : tensor<64x48xf32>) permutation = [1, 0]
  %e0 = tensor.empty() : tensor<5x48xf32>
  %c0 = linalg.fill ins(%z : f32) outs(%e0 : tensor<5x48xf32>) -> tensor<5x48xf32>
  %0 = linalg.matmul ins(%x, %t : tensor<5x64xf32>, tensor<64x48xf32>) outs(%c0 : tensor<5x48xf32>) -> tensor<5x48xf32> loc("fc")
  %wb = arith.constant {_hex(w_b)} : tensor<64x40xf32>
  %eb = tensor.empty() : tensor<2x64x40xf32>
  %b = linalg.broadcast ins(%wb : tensor<64x40xf32>) outs(%eb : tensor<2x64x40xf32>) dimensions = [0]
  %e1 = tensor.empty() : tensor<2x5x40xf32>
  %c1 = linalg.fill ins(%z : f32) outs(%e1 : tensor<2x5x40xf32>) -> tensor<2x5x40xf32>
  %1 = linalg.batch_matmul ins(%xb, %b : tensor<2x5x64xf32>, tensor<2x64x40xf32>) outs(%c1 : tensor<2x5x40xf32>) -> tensor<2x5x40xf32> loc("proj")
  %wh = arith.constant {_hex(bits)} : tensor<64x24xbf16>
  %e2 = tensor.empty() : tensor<5x24xf32>
  %c2 = linalg.fill ins(%z : f32) outs(%e2 : tensor<5x24xf32>) -> tensor<5x24xf32>
  %2 = linalg.matmul ins(%x, %wh : tensor<5x64xf32>, tensor<64x24xbf16>) outs(%c2 : tensor<5x24xf32>) -> tensor<5x24xf32> loc("half")
  %wd = arith.constant {_hex(w_d)} : tensor<64x16xf32>
  %e3 = tensor.empty() : tensor<5x16xf32>
  %c3 = linalg.fill ins(%z : f32) outs(%e3 : tensor<5x16xf32>) -> tensor<5x16xf32>
  %3 = linalg.matmul ins(%x, %wd : tensor<5x64xf32>, tensor<64x16xf32>) outs(%c3 : tensor<5x16xf32>) -> tensor<5x16xf32> loc("dense")
  return %0, %1, %2, %3 : tensor<5x48xf32>, tensor<2x5x40xf32>, tensor<5x24xf32>, tensor<5x16xf32>
}}
util.global private @wt = {_hex(w_t)} : tensor<48x64xf32>
"""
    ctx = new_context()
    module = parse_module(text, ctx, "sparse")
    with ctx:
        SparseWeight().apply(module)
        rewritten = module_text(module)
    assert rewritten.count("tensor.extract") == 3 and rewritten.count("linalg.matmul") == 1  # "dense" stays
    assert "linalg.transpose" not in rewritten and "linalg.broadcast" not in rewritten
    x = rng.standard_normal((5, 64)).astype(np.float32)
    xb = rng.standard_normal((2, 5, 64)).astype(np.float32)
    got = load(compile_module(rewritten, "llvm-cpu")).invoke("f", x, xb)
    x64 = x.astype(np.float64)
    for out, ref in zip(got, [x64 @ w_t.T, xb.astype(np.float64) @ w_b, x64 @ w_h, x64 @ w_d]):
        out = np.asarray(out)
        assert out.shape == ref.shape
        assert np.abs(out - ref).max() <= TOL * np.abs(ref).max()


def test_bad_options_and_sites_are_one_line_errors():
    from opscope.ir.loading import new_context, parse_module
    from opscope.passes.sparse_weight import SparseWeight

    text = """func.func @f(%x: tensor<2x4xf32>, %w: tensor<4x3xf32>, %c: tensor<2x3xf32>) -> tensor<2x3xf32> {
  %0 = linalg.matmul ins(%x, %w : tensor<2x4xf32>, tensor<4x3xf32>) outs(%c : tensor<2x3xf32>) -> tensor<2x3xf32> loc("fc")
  return %0 : tensor<2x3xf32>
}"""
    ctx = new_context()
    module = parse_module(text, ctx, "args")
    with ctx, pytest.raises(OpscopeError, match=r"option 'density' expects a fraction in \(0, 1\]"):
        SparseWeight(density=0.0).apply(module)
    with ctx, pytest.raises(OpscopeError, match="its rhs is argument, not a constant weight; narrow sites='fc'"):
        SparseWeight(sites="fc").apply(module)


@pytest.fixture(scope="module")
def built_in_plan(tmp_path_factory):
    import opscope

    out = tmp_path_factory.mktemp("sparse-plan") / "run"
    opscope.profile(out=out, steps=3)
    return opscope.kernel_plan(out, kinds=["sparse-weight"], rounds=1)


def test_plan_proposes_and_measures_the_built_in_pruned_ffn_weights(built_in_plan):
    """The built-in model prunes layer1's FFN weights to their largest 10 % (numpy counts the
    nonzeros of the weights it feeds); the plan proposes them stored sparse, measured on the site
    with the recorded weight baked in, estimated as 1/density, judged like any lossy rewrite."""
    from opscope.act.specialize import MAX_ERROR, MIN_SPEEDUP, decide
    from opscope.drive.profile import default_source

    source = default_source(1)
    (batch,) = list(source.inputs)
    names = ["x"] + [f"layer{i}_w{w}" for i in range(2) for w in "qkvo12"]
    weights = dict(zip(names, batch))
    plan = built_in_plan
    by_site = {c.site: c for c in plan.candidates}
    assert set(by_site) == {"layer1.ffn.up", "layer1.ffn.down"}
    for site, arg in (("layer1.ffn.up", "layer1_w1"), ("layer1.ffn.down", "layer1_w2")):
        c = by_site[site]
        density = np.count_nonzero(weights[arg]) / weights[arg].size
        assert c.kind == "sparse-weight" and c.proposal.baked
        assert c.proposal.density == pytest.approx(density)
        assert c.estimated == pytest.approx(1 / density)
        m = c.measured
        assert m is not None and m.original_us > 0 and m.rewritten_us > 0 and m.baked_us > 0
        assert c.rel_error < 1e-6 and c.parity != "-"
        assert c.decision == decide(c, MIN_SPEEDUP, MAX_ERROR)
        assert c.guard.samples == (density,) * 3 and c.guard.stability == "stable"


def test_plan_text_says_what_was_baked_and_what_no_form_skips(built_in_plan):
    from opscope.act.render_plan import plan_text

    text = plan_text(built_in_plan)
    assert "layer1.ffn.up: its weight is an argument, baked for the measurement" in text
    assert "sparse 10%" in text
    sites = dict(built_in_plan.sparse_activations)
    assert "layer1.attn.context" in sites and sites["layer1.attn.context"] < 0.5
    assert "mostly-zero activations at" in text and "layer1.attn.context lhs" in text


def test_apply_leaves_a_baked_weight_out(built_in_plan):
    """An accepted sparse rewrite of an argument weight is not built into the module (the model
    would stop reading its argument); the pipeline `--apply` builds is empty here."""
    from dataclasses import replace

    from opscope.act.specialize import applied_pipeline

    accepted = [replace(c, decision="accept") for c in built_in_plan.candidates]
    assert applied_pipeline(accepted) == ""
    stored = [replace(c, proposal=replace(c.proposal, baked=False)) for c in accepted]
    assert (
        applied_pipeline(stored)
        == 'sparse-weight{sites="^layer1\\.ffn\\.up$"},sparse-weight{sites="^layer1\\.ffn\\.down$"}'
    )


def test_iree_still_fails_a_bf16_dense_resource_read_in_a_gather_dispatch():
    """Pins the IREE 3.13 bug `sparse-weight` works around (its values are a `dense` constant,
    `opscope.ir.weights.elements_attr`): a bf16 `dense_resource` read by a generic that gathers a
    bf16 tensor fails llvm-cpu codegen. When an upgrade fixes it this test fails: the values can go
    back to `dense_resource` (printed once, not inline)."""
    from opscope.run.compile import compile_module

    text = (
        """
#nl = affine_map<(m, n, l) -> (n, l)>
#mn = affine_map<(m, n, l) -> (m, n)>
func.func @main(%x: tensor<8x4xbf16>) -> tensor<8x16xf32> {
  %z = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<8x16xf32>
  %c = linalg.fill ins(%z : f32) outs(%e : tensor<8x16xf32>) -> tensor<8x16xf32>
  %idx = arith.constant dense<1> : tensor<16x4xi32>
  %val = arith.constant dense_resource<w> : tensor<16x4xbf16>
  %0 = linalg.generic {indexing_maps = [#nl, #nl, #mn], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%idx, %val : tensor<16x4xi32>, tensor<16x4xbf16>) outs(%c : tensor<8x16xf32>) {
  ^bb0(%k: i32, %v: bf16, %acc: f32):
    %m = linalg.index 0 : index
    %ki = arith.index_cast %k : i32 to index
    %xv = tensor.extract %x[%m, %ki] : tensor<8x4xbf16>
    %xf = arith.extf %xv : bf16 to f32
    %vf = arith.extf %v : bf16 to f32
    %p = arith.mulf %xf, %vf : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  } -> tensor<8x16xf32>
  return %0 : tensor<8x16xf32>
}
{-#
  dialect_resources: {
    builtin: {
      w: "0x02000000"""
        + "803F" * 64
        + """"
    }
  }
#-}
"""
    )
    with pytest.raises(OpscopeError, match="'arith.constant' op failed to verify that all of"):
        compile_module(text, "llvm-cpu")
    compile_module(text.replace("dense_resource<w>", "dense<1.0>"), "llvm-cpu")  # the workaround's form builds


def test_the_sparse_form_computes_numpys_product_on_vulkan(vulkan):
    """The same gather-and-reduce generic through IREE's SPIR-V code (lavapipe here)."""
    from opscope.ir.loading import module_text, new_context, parse_module
    from opscope.passes.sparse_weight import SparseWeight
    from opscope.run.compile import compile_module
    from opscope.run.runtime import load

    rng = np.random.default_rng(3)
    w, x = _pruned(rng, (64, 48)), rng.standard_normal((8, 64)).astype(np.float32)
    text = f"""func.func @f(%x: tensor<8x64xf32>) -> tensor<8x48xf32> {{
  %w = arith.constant {_hex(w)} : tensor<64x48xf32>
  %z = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<8x48xf32>
  %c = linalg.fill ins(%z : f32) outs(%e : tensor<8x48xf32>) -> tensor<8x48xf32>
  %0 = linalg.matmul ins(%x, %w : tensor<8x64xf32>, tensor<64x48xf32>) outs(%c : tensor<8x48xf32>) -> tensor<8x48xf32> loc("fc")
  return %0 : tensor<8x48xf32>
}}"""
    ctx = new_context()
    module = parse_module(text, ctx, "sparse")
    with ctx:
        SparseWeight().apply(module)
        rewritten = module_text(module)
    assert "tensor.extract" in rewritten
    got = np.asarray(load(compile_module(rewritten, vulkan)).invoke("f", x)[0])
    ref = x.astype(np.float64) @ w
    assert np.abs(got - ref).max() <= TOL * np.abs(ref).max()
