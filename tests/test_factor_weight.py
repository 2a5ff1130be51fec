"""`factor-weight` through IREE llvm-cpu, against numpy.

Every form an importer gives a weight is factored and run: a 2-D `nn.Linear`
(`linalg.matmul` of a transposed global), a 3-D one (`linalg.batch_matmul` of its
broadcast), a `linalg.generic` reading W [N, K] with K last in lhs (JAX, StableHLO), a
generic whose lhs is [K, M] into a non-zero accumulator, and a real PyTorch model through
opscope's torch importer. The reference is x @ (U @ V) with U, V from numpy's float64 SVD
(the same split), held to rtol 1e-4 / atol 1e-5: f32 sums of at most 16 products of
values ~1. A weight of exact rank r comes back as the dense product to 1e-5 of the output's
scale. Rank reveal, the no-gain skip, the one-line refusals and the FLOPs saved are checked
on the IR alone.
"""

from __future__ import annotations

import logging

import numpy as np
import pytest
from errors import one_line
from linalg_cases import COPY_REGION, MAC_REGION

from opscope.analysis.cost import analyze
from opscope.errors import OpscopeError
from opscope.ir.loading import module_text, new_context, parse_module
from opscope.ir.sites import find_sites
from opscope.passes.factor_weight import FactorWeight
from opscope.pipeline.textual import run_pipeline
from opscope.run.compile import check_compilable, compile_module
from opscope.run.runtime import load

F32 = np.float32
M, K, N = 4, 16, 12


def run(module, *inputs) -> list[np.ndarray]:
    check_compilable(module)
    return load(compile_module(module, "llvm-cpu")).invoke("main", *inputs)


def dense(a: np.ndarray) -> str:
    shape = "x".join(str(d) for d in a.shape)
    return f'dense<"0x{np.asarray(a, "<f4").tobytes().hex().upper()}"> : tensor<{shape}xf32>'


def reference_factors(w_kn: np.ndarray, r: int) -> np.ndarray:
    """U @ V of the pass's split (U = P·√S, V = √S·Qᵀ), float64."""
    p, s, qt = np.linalg.svd(np.asarray(w_kn, np.float64), full_matrices=False)
    return (p[:, :r] * np.sqrt(s[:r])) @ (np.sqrt(s[:r])[:, None] * qt[:r])


def linear_2d(w_nk: np.ndarray, name: str = "fc") -> str:
    """`x[M,K] @ transpose(W)`, W [N, K] a global: what the torch importer gives a 2-D nn.Linear."""
    n, k = w_nk.shape
    return f"""
func.func @main(%x: tensor<{M}x{k}xf32>) -> tensor<{M}x{n}xf32> {{
  %zero = arith.constant 0.0 : f32
  %w = util.global.load @w : tensor<{n}x{k}xf32>
  %et = tensor.empty() : tensor<{k}x{n}xf32>
  %t = linalg.transpose ins(%w : tensor<{n}x{k}xf32>) outs(%et : tensor<{k}x{n}xf32>) permutation = [1, 0]
  %e = tensor.empty() : tensor<{M}x{n}xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<{M}x{n}xf32>) -> tensor<{M}x{n}xf32>
  %0 = linalg.matmul ins(%x, %t : tensor<{M}x{k}xf32>, tensor<{k}x{n}xf32>) outs(%z : tensor<{M}x{n}xf32>)
      -> tensor<{M}x{n}xf32> loc("{name}")
  return %0 : tensor<{M}x{n}xf32>
}}
util.global private @w = {dense(w_nk)}
"""


def every_form(w1, w2, w3, w4) -> str:
    """Four sites, one per form a weight reaches a contraction in (see the module docstring)."""
    return f"""
func.func @main(%x: tensor<{M}x{K}xf32>, %xb: tensor<2x{M}x{K}xf32>, %xt: tensor<{K}x{M}xf32>,
                %c: tensor<{M}x{N}xf32>)
    -> (tensor<{M}x{N}xf32>, tensor<2x{M}x{N}xf32>, tensor<2x{M}x{N}xf32>, tensor<{M}x{N}xf32>) {{
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<{M}x{N}xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<{M}x{N}xf32>) -> tensor<{M}x{N}xf32>
  %eb = tensor.empty() : tensor<2x{M}x{N}xf32>
  %zb = linalg.fill ins(%zero : f32) outs(%eb : tensor<2x{M}x{N}xf32>) -> tensor<2x{M}x{N}xf32>

  %w1 = util.global.load @w1 : tensor<{N}x{K}xf32>
  %et1 = tensor.empty() : tensor<{K}x{N}xf32>
  %t1 = linalg.transpose ins(%w1 : tensor<{N}x{K}xf32>) outs(%et1 : tensor<{K}x{N}xf32>) permutation = [1, 0]
  %fc = linalg.matmul ins(%x, %t1 : tensor<{M}x{K}xf32>, tensor<{K}x{N}xf32>) outs(%z : tensor<{M}x{N}xf32>)
      -> tensor<{M}x{N}xf32> loc("fc")

  %w2 = util.global.load @w2 : tensor<{N}x{K}xf32>
  %et2 = tensor.empty() : tensor<{K}x{N}xf32>
  %t2 = linalg.transpose ins(%w2 : tensor<{N}x{K}xf32>) outs(%et2 : tensor<{K}x{N}xf32>) permutation = [1, 0]
  %eb2 = tensor.empty() : tensor<2x{K}x{N}xf32>
  %b2 = linalg.generic {{indexing_maps = [affine_map<(b, k, n) -> (k, n)>, affine_map<(b, k, n) -> (b, k, n)>],
                        iterator_types = ["parallel", "parallel", "parallel"]}}
      ins(%t2 : tensor<{K}x{N}xf32>) outs(%eb2 : tensor<2x{K}x{N}xf32>){COPY_REGION} -> tensor<2x{K}x{N}xf32>
  %proj = linalg.batch_matmul ins(%xb, %b2 : tensor<2x{M}x{K}xf32>, tensor<2x{K}x{N}xf32>)
      outs(%zb : tensor<2x{M}x{N}xf32>) -> tensor<2x{M}x{N}xf32> loc("proj")

  %w3 = util.global.load @w3 : tensor<{N}x{K}xf32>
  %dense = linalg.generic {{indexing_maps = [affine_map<(b, m, n, k) -> (b, m, k)>, affine_map<(b, m, n, k) -> (n, k)>,
                                            affine_map<(b, m, n, k) -> (b, m, n)>],
                           iterator_types = ["parallel", "parallel", "parallel", "reduction"]}}
      ins(%xb, %w3 : tensor<2x{M}x{K}xf32>, tensor<{N}x{K}xf32>) outs(%zb : tensor<2x{M}x{N}xf32>){MAC_REGION} -> tensor<2x{M}x{N}xf32> loc("dense")

  %w4 = arith.constant {dense(w4)}
  %lhs_t = linalg.generic {{indexing_maps = [affine_map<(m, n, k) -> (k, m)>, affine_map<(m, n, k) -> (k, n)>,
                                            affine_map<(m, n, k) -> (m, n)>],
                           iterator_types = ["parallel", "parallel", "reduction"]}}
      ins(%xt, %w4 : tensor<{K}x{M}xf32>, tensor<{K}x{N}xf32>) outs(%c : tensor<{M}x{N}xf32>){MAC_REGION} -> tensor<{M}x{N}xf32> loc("lhs_t")
  return %fc, %proj, %dense, %lhs_t
      : tensor<{M}x{N}xf32>, tensor<2x{M}x{N}xf32>, tensor<2x{M}x{N}xf32>, tensor<{M}x{N}xf32>
}}
util.global private @w1 = {dense(w1)}
util.global private @w2 = {dense(w2)}
util.global private @w3 = {dense(w3)}
"""


def factored(source: str, **options):
    module = parse_module(source, new_context())
    with module.context:
        FactorWeight(**options).apply(module)
        assert module.operation.verify()
    return module


def rank_of(module, site: str) -> int:
    """r of a factored site: the last dim of its first contraction's rhs (U [K, r])."""
    return next(s for s in find_sites(module.operation) if s.name == f"{site}.u").shape("rhs")[-1]


def test_every_weight_form_computes_x_at_u_v():
    rng = np.random.default_rng(0)
    w1, w2, w3 = (rng.standard_normal((N, K)).astype(F32) for _ in range(3))
    w4 = rng.standard_normal((K, N)).astype(F32)
    module = factored(every_form(w1, w2, w3, w4), rank=3)
    names = [s.name for s in find_sites(module.operation)]
    assert names == ["fc.u", "fc", "proj.u", "proj", "dense.u", "dense", "lhs_t.u", "lhs_t"]
    text = module_text(module)
    assert "linalg.transpose" not in text and "linalg.batch_matmul" not in text
    x, xb, c = (rng.standard_normal(s).astype(F32) for s in ((M, K), (2, M, K), (M, N)))
    fc, proj, dense_, lhs_t = run(module, x, xb, np.ascontiguousarray(x.T), c)
    tol = dict(rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(fc, x @ reference_factors(w1.T, 3), **tol)
    np.testing.assert_allclose(proj, xb @ reference_factors(w2.T, 3), **tol)
    np.testing.assert_allclose(dense_, xb @ reference_factors(w3.T, 3), **tol)
    np.testing.assert_allclose(lhs_t, c + x @ reference_factors(w4, 3), **tol)


def test_weight_of_exact_rank_is_reproduced():
    rng = np.random.default_rng(1)
    w = (rng.standard_normal((N, 2)) @ rng.standard_normal((2, K))).astype(F32)
    module = factored(linear_2d(w))  # rank reveal: energy 0.99 of an exact rank-2 weight is rank 2
    assert rank_of(module, "fc") == 2
    x = rng.standard_normal((M, K)).astype(F32)
    (got,) = run(module, x)
    want = x.astype(np.float64) @ w.T
    assert np.abs(got - want).max() <= 1e-5 * np.abs(want).max()


def test_weight_over_two_k_and_two_n_loops():
    """A generic reading W[h, c, d, j] with K = (c, j) and N = (h, d): U [c, j, r], V [r, h, d]."""
    rng = np.random.default_rng(6)
    w = rng.standard_normal((3, 2, 4, 5)).astype(F32)
    maps = (
        "affine_map<(m, h, d, c, j) -> (m, j, c)>, affine_map<(m, h, d, c, j) -> (h, c, d, j)>, "
        "affine_map<(m, h, d, c, j) -> (m, h, d)>"
    )
    source = f"""
func.func @main(%x: tensor<6x5x2xf32>, %c: tensor<6x3x4xf32>) -> tensor<6x3x4xf32> {{
  %w = arith.constant {dense(w)}
  %0 = linalg.generic {{indexing_maps = [{maps}],
                       iterator_types = ["parallel", "parallel", "parallel", "reduction", "reduction"]}}
      ins(%x, %w : tensor<6x5x2xf32>, tensor<3x2x4x5xf32>) outs(%c : tensor<6x3x4xf32>){MAC_REGION} -> tensor<6x3x4xf32> loc("heads")
  return %0 : tensor<6x3x4xf32>
}}
"""
    module = factored(source, rank=3)
    assert [(s.name, s.shape("rhs")) for s in find_sites(module.operation)] == [
        ("heads.u", (2, 5, 3)),
        ("heads", (3, 3, 4)),
    ]
    x, c = rng.standard_normal((6, 5, 2)).astype(F32), rng.standard_normal((6, 3, 4)).astype(F32)
    (got,) = run(module, x, c)
    uv = reference_factors(w.transpose(1, 3, 0, 2).reshape(10, 12), 3).reshape(2, 5, 3, 4)
    np.testing.assert_allclose(got, c + np.einsum("mjc,cjhd->mhd", x, uv), rtol=1e-4, atol=1e-5)


def test_torch_linear_layers_are_factored():
    torch = pytest.importorskip("torch")
    from opscope.importers.torch_fx import import_torch

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(K, N), torch.nn.ReLU(), torch.nn.Linear(N, 10, bias=False))
    x = torch.randn(2, 3, K)
    module = import_torch(model, (x,))
    with module.context:
        run_pipeline(module, "factor-weight{rank=3}")
    assert [s.name for s in find_sites(module.operation)] == ["0.u", "0", "2.u", "2"]
    (got,) = run(module, x.numpy())
    w0, b0, w2 = (p.detach().numpy() for p in (model[0].weight, model[0].bias, model[2].weight))
    h = np.maximum(x.numpy() @ reference_factors(w0.T, 3) + b0, 0)
    np.testing.assert_allclose(got, h @ reference_factors(w2.T, 3), rtol=1e-4, atol=1e-5)


def test_rank_reveal_finds_rank_5_under_tiny_noise():
    rng = np.random.default_rng(2)
    p, _ = np.linalg.qr(rng.standard_normal((40, 5)))
    q, _ = np.linalg.qr(rng.standard_normal((48, 5)))
    w = (p * [5.0, 4.0, 3.0, 2.0, 1.5]) @ q.T + 1e-6 * rng.standard_normal((40, 48))  # [N, K]
    source = linear_2d(w.astype(F32))
    assert rank_of(factored(source), "fc") == 5
    energy = np.cumsum(np.square([5.0, 4.0, 3.0, 2.0, 1.5])) / np.square([5.0, 4.0, 3.0, 2.0, 1.5]).sum()
    assert rank_of(factored(source, energy=0.8), "fc") == int(np.argmax(energy >= 0.8)) + 1 == 3
    assert rank_of(factored(source, rank=7), "fc") == 7


def test_no_gain_is_skipped_with_a_warning(caplog):
    w = np.random.default_rng(3).standard_normal((6, 8)).astype(F32)  # full rank 6: r·(K+N) >= K·N
    source = linear_2d(w)
    before = module_text(parse_module(source, new_context()))
    for options in ({}, {"rank": 4}):
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="opscope"):
            module = factored(source, **options)
        assert module_text(module) == before
        assert "factor-weight: skipping site 'fc' at loc(\"fc\"): rank " in caplog.text
        assert "saves no FLOPs on its 8×6 weight" in caplog.text
        assert "factor-weight: no matmul site of this module has a constant weight worth factoring" in caplog.text


def test_flops_drop_by_the_factored_product():
    w = np.random.default_rng(4).standard_normal((N, K)).astype(F32)
    source = linear_2d(w)
    before = analyze(parse_module(source, new_context())).total_flops
    after = analyze(factored(source, rank=3)).total_flops
    assert before - after == 2 * M * K * N - 2 * M * 3 * (K + N)


def test_sites_and_keep_choose_the_sites():
    rng = np.random.default_rng(5)
    source = every_form(
        *(rng.standard_normal((N, K)).astype(F32) for _ in range(3)), rng.standard_normal((K, N)).astype(F32)
    )
    module = factored(source, rank=2, keep=lambda s: s.name in ("proj", "lhs_t"))
    assert [s.name for s in find_sites(module.operation)] == ["fc", "proj.u", "proj", "dense", "lhs_t.u", "lhs_t"]
    module = factored(source, rank=2, sites="^(fc|dense)$")
    assert [s.name for s in find_sites(module.operation)] == ["fc.u", "fc", "proj", "dense.u", "dense", "lhs_t"]


ARGUMENT_WEIGHT = """
func.func @main(%x: tensor<3x8xf32>, %w: tensor<8x6xf32>, %c: tensor<3x6xf32>) -> tensor<3x6xf32> {
  %0 = linalg.matmul ins(%x, %w : tensor<3x8xf32>, tensor<8x6xf32>) outs(%c : tensor<3x6xf32>)
      -> tensor<3x6xf32> loc("fc")
  return %0 : tensor<3x6xf32>
}
"""


def test_argument_weight_is_skipped_unless_named(caplog):
    with caplog.at_level(logging.INFO, logger="opscope"):
        factored(ARGUMENT_WEIGHT, rank=1)
    assert "skipping site 'fc': its rhs is a function argument, not a constant weight" in caplog.text
    with pytest.raises(OpscopeError) as e:
        factored(ARGUMENT_WEIGHT, rank=1, sites="fc")
    assert one_line(e) == (
        "factor-weight: site 'fc' at loc(\"fc\"): its rhs is a function argument, not a "
        "constant weight; narrow sites='fc' to sites with a stored weight"
    )


def test_refusals_are_one_line():
    source = linear_2d(np.ones((6, 8), F32))
    with pytest.raises(OpscopeError) as e:
        factored(source, rank=7)
    assert one_line(e) == (
        "factor-weight: site 'fc' at loc(\"fc\"): rank 7 exceeds the weight's 8×6 matrix; choose rank < min(K,N) = 6"
    )
    with pytest.raises(OpscopeError, match=r"^factor-weight: option 'rank' expects an integer >= 0 .*got -1$"):
        FactorWeight(rank=-1)
    with pytest.raises(OpscopeError, match=r"^factor-weight: option 'energy' expects a fraction in \(0, 1\] .*1.5$"):
        factored(source, energy=1.5)
