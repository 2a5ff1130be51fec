"""A mostly-zero constant weight: dense against ELLPACK forms of it, through IREE, side by side.

x[m, K] · W[K, N] (`opscope kernels`' matmul), W pruned to its largest `keep` share by magnitude
and stored as a constant: `dense` (as is), `ell m,n,l` (what `sparse-weight` writes: idx/val
[N, L], a gather of x[m, idx[n, l]] reduced over l innermost), `ell m,l,n` (idx/val stored [L, N], n innermost: the
gather vectorizes across output channels) and `ell xT n,l,m` (x transposed first, the gather reads
rows of xᵀ contiguous in m). Each is checked against numpy's float64 product, then all are timed by
`iree-benchmark-module` in alternating rounds (`opscope.run.call_timing`): the minimum µs per
call and each form's speedup over dense. docs/rewrites.md (`sparse-weight`) has a run.

    python bench/bench_sparse_weight.py                     # the docs' shapes, 10 % and 2 % nonzero
    python bench/bench_sparse_weight.py --quick             # 32x64x256 at 10 %, one round
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import header, load_line, table  # noqa: E402

SHAPES = ((32, 64, 256, 0.1), (32, 256, 64, 0.1), (128, 1024, 1024, 0.1), (128, 1024, 1024, 0.02),
          (1, 2048, 2048, 0.1), (4, 2048, 2048, 0.1), (1, 4096, 4096, 0.1))  # fmt: skip
QUICK = ((32, 64, 256, 0.1),)


def _hex(a: np.ndarray) -> str:
    return 'dense<"0x' + np.ascontiguousarray(a).tobytes().hex().upper() + '">'


def ell_module(m: int, k: int, n: int, w: np.ndarray, order: str) -> str:
    """An ELLPACK form written by hand: `order` "mln" (idx/val [L, N]) or "xT" (x transposed, (n, l, m))."""
    from opscope.passes.sparse_weight import ellpack

    idx, val = ellpack(w)
    width = idx.shape[1]
    if order == "mln":
        idx, val = np.ascontiguousarray(idx.T), np.ascontiguousarray(val.T)
        store, loops, out, its, m_at, read = (
            f"{width}x{n}",
            "(m, l, n)",
            "(m, n)",
            '"parallel", "reduction", "parallel"',
            0,
            "%x[%m, %ki]",
        )
        maps, pre, src = "(l, n)", "", f"tensor<{m}x{k}xf32>"
    else:
        store, loops, out, its, m_at, read = (
            f"{n}x{width}",
            "(n, l, m)",
            "(m, n)",
            '"parallel", "reduction", "parallel"',
            2,
            "%xt[%ki, %m]",
        )
        maps, src = "(n, l)", f"tensor<{k}x{m}xf32>"
        pre = f"""
  %et = tensor.empty() : tensor<{k}x{m}xf32>
  %xt = linalg.transpose ins(%x : tensor<{m}x{k}xf32>) outs(%et : tensor<{k}x{m}xf32>) permutation = [1, 0]"""
    return f"""
func.func @main(%x: tensor<{m}x{k}xf32>) -> tensor<{m}x{n}xf32> {{{pre}
  %idx = arith.constant {_hex(idx)} : tensor<{store}xi32>
  %val = arith.constant {_hex(val)} : tensor<{store}xf32>
  %z = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<{m}x{n}xf32>
  %c = linalg.fill ins(%z : f32) outs(%e : tensor<{m}x{n}xf32>) -> tensor<{m}x{n}xf32>
  %r = linalg.generic {{indexing_maps = [affine_map<{loops} -> {maps}>, affine_map<{loops} -> {maps}>, affine_map<{loops} -> {out}>], iterator_types = [{its}]}}
      ins(%idx, %val : tensor<{store}xi32>, tensor<{store}xf32>) outs(%c : tensor<{m}x{n}xf32>) {{
  ^bb0(%i: i32, %v: f32, %acc: f32):
    %m = linalg.index {m_at} : index
    %ki = arith.index_cast %i : i32 to index
    %xv = tensor.extract {read} : {src}
    %p = arith.mulf %xv, %v : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  }} -> tensor<{m}x{n}xf32>
  return %r : tensor<{m}x{n}xf32>
}}"""


def forms(m: int, k: int, n: int, keep: float) -> tuple[dict[str, str], np.ndarray]:
    """(form name -> module text, W [K, N]): `opscope kernels`' matmul (a constant global weight) with
    its weight pruned to its largest `keep` share; `ell m,n,l` is `sparse-weight`'s own rewrite of it."""
    from opscope.act.kernels import prune_weight
    from opscope.ir.loading import module_text, new_context, parse_module
    from opscope.ir.weights import read_weights
    from opscope.models.demo import matmul_module
    from opscope.passes.sparse_weight import SparseWeight

    ctx = new_context()
    module = parse_module(matmul_module(m, k, n, weights="globals", name="fc"), ctx, "bench")
    dense, w = prune_weight(module, read_weights(module)[0].values.astype(np.float64), keep)
    w = w.astype(np.float32)
    with ctx:
        SparseWeight(density=1.0).apply(module)
        ell = module_text(module)
    return {
        "dense": dense,
        "ell m,n,l": ell,
        "ell m,l,n": ell_module(m, k, n, w, "mln"),
        "ell xT n,l,m": ell_module(m, k, n, w, "xT"),
    }, w


def main(argv: list[str] | None = None) -> None:
    from opscope.run.call_timing import time_calls
    from opscope.run.compile import compile_module
    from opscope.run.runtime import load

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--quick", action="store_true", help="32x64x256 at 10 %% nonzero, one round")
    args = ap.parse_args(argv)
    header("bench_sparse_weight: a pruned constant weight, dense vs ELLPACK forms, through IREE (llvm-cpu)", argv)
    rng = np.random.default_rng(0)
    rows = []
    for m, k, n, keep in QUICK if args.quick else SHAPES:
        texts, w = forms(m, k, n, keep)
        x = rng.standard_normal((m, k)).astype(np.float32)
        want = x.astype(np.float64) @ w
        built = {name: compile_module(text, "llvm-cpu") for name, text in texts.items()}
        for name, compiled in built.items():
            got = np.asarray(load(compiled).invoke("main", x)[0], np.float64)
            err = float(np.abs(got - want).max() / max(np.abs(want).max(), 1e-30))
            if err > 1e-5:
                raise SystemExit(f"{name} at {m}x{k}x{n}: relative error {err:.2g} against numpy")
        times = time_calls(list(built.values()), "main", [x], rounds=1 if args.quick else args.rounds)
        base = times[0].min_us
        for name, t in zip(built, times):
            rows.append([f"{m}x{k}x{n}", f"{keep:.0%}", name, f"{t.min_us:.1f}", f"{base / t.min_us:.2f}x dense"])
    print(table(rows, ["x·W", "nonzero", "form", "min µs", "speedup"]))
    print(f"# {load_line()}")


if __name__ == "__main__":
    main()
