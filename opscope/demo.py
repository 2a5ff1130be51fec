"""Small models written directly in MLIR (linalg on tensors) for tests, demos and benchmarks.

Weights are function arguments, so callers feed any distribution; every matmul carries a
`NameLoc` site name (`layer0.attn.q`) the way importers leave them.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


def _t(shape, dtype: str = "f32") -> str:
    return "tensor<" + "".join(f"{d}x" for d in shape) + dtype + ">"


@dataclass
class _Builder:
    """Emits a single `func.func @main` in linalg, one SSA value at a time."""

    dtype: str = "f32"
    args: list[tuple[str, tuple[int, ...]]] = field(default_factory=list)
    lines: list[str] = field(default_factory=list)
    n: int = 0

    def arg(self, name: str, shape: tuple[int, ...]) -> str:
        self.args.append((name, tuple(shape)))
        return f"%{name}"

    def fresh(self) -> str:
        self.n += 1
        return f"%v{self.n}"

    def zeros(self, shape) -> str:
        e, z, c = self.fresh(), self.fresh(), self.fresh()
        self.lines.append(f"{c} = arith.constant 0.000000e+00 : {self.dtype}")
        self.lines.append(f"{e} = tensor.empty() : {_t(shape, self.dtype)}")
        self.lines.append(f"{z} = linalg.fill ins({c} : {self.dtype}) outs({e} : {_t(shape, self.dtype)}) -> {_t(shape, self.dtype)}")
        return z

    def matmul(self, a: str, a_shape, b: str, b_shape, name: str, transpose_b: bool = False) -> tuple[str, tuple]:
        m, k = a_shape
        n = b_shape[0] if transpose_b else b_shape[1]
        z = self.zeros((m, n))
        r = self.fresh()
        maps = ""
        if transpose_b:
            maps = ("indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d2)>, affine_map<(d0, d1, d2) -> (d1, d2)>, "
                    "affine_map<(d0, d1, d2) -> (d0, d1)>] ")
        self.lines.append(
            f"{r} = linalg.matmul {maps}ins({a}, {b} : {_t(a_shape, self.dtype)}, {_t(b_shape, self.dtype)}) "
            f"outs({z} : {_t((m, n), self.dtype)}) -> {_t((m, n), self.dtype)} loc(\"{name}\")"
        )
        return r, (m, n)

    def elementwise(self, body: list[str], ins: list[str], shape, name: str) -> str:
        ty = _t(shape, self.dtype)
        rank = len(shape)
        ident = "affine_map<(" + ", ".join(f"d{i}" for i in range(rank)) + ") -> (" + ", ".join(f"d{i}" for i in range(rank)) + ")>"
        e, r = self.fresh(), self.fresh()
        self.lines.append(f"{e} = tensor.empty() : {ty}")
        args = ", ".join(f"%in{i}: {self.dtype}" for i in range(len(ins)))
        iters = ", ".join(['"parallel"'] * rank)
        self.lines.append(
            f"{r} = linalg.generic {{indexing_maps = [{', '.join([ident] * (len(ins) + 1))}], "
            f"iterator_types = [{iters}]}} ins({', '.join(ins)} : {', '.join([ty] * len(ins))}) "
            f"outs({e} : {ty}) {{\n  ^bb0({args}, %out: {self.dtype}):\n    "
            + "\n    ".join(body) + f"\n  }} -> {ty} loc(\"{name}\")"
        )
        return r

    def relu(self, x: str, shape, name: str) -> str:
        return self.elementwise([f"%z = arith.constant 0.000000e+00 : {self.dtype}",
                                 f"%r = arith.maximumf %in0, %z : {self.dtype}", f"linalg.yield %r : {self.dtype}"],
                                [x], shape, name)

    def add(self, a: str, b: str, shape, name: str) -> str:
        return self.elementwise([f"%r = arith.addf %in0, %in1 : {self.dtype}", f"linalg.yield %r : {self.dtype}"],
                                [a, b], shape, name)

    def softmax(self, x: str, shape, name: str) -> str:
        e, r = self.fresh(), self.fresh()
        ty = _t(shape, self.dtype)
        self.lines.append(f"{e} = tensor.empty() : {ty}")
        self.lines.append(f"{r} = linalg.softmax dimension(1) ins({x} : {ty}) outs({e} : {ty}) -> {ty} loc(\"{name}\")")
        return r

    def module(self, result: str, result_shape) -> str:
        sig = ", ".join(f"%{n}: {_t(s, self.dtype)}" for n, s in self.args)
        body = "\n    ".join(self.lines)
        return (f"module {{\n  func.func @main({sig}) -> {_t(result_shape, self.dtype)} {{\n    {body}\n"
                f"    return {result} : {_t(result_shape, self.dtype)}\n  }}\n}}\n")


def matmul_module(m: int, k: int, n: int, dtype: str = "f32", name: str = "matmul") -> str:
    """One `linalg.matmul` [m,k] x [k,n] named `name`."""
    b = _Builder(dtype)
    a, w = b.arg("lhs", (m, k)), b.arg("rhs", (k, n))
    r, shape = b.matmul(a, (m, k), w, (k, n), name)
    return b.module(r, shape)


def mlp_module(layers: int, width: int, tokens: int, dtype: str = "f32") -> str:
    """`layers` x (matmul -> relu), all [tokens, width]; sites `fc0`, `fc1`, ..."""
    b = _Builder(dtype)
    x = b.arg("x", (tokens, width))
    shape = (tokens, width)
    for i in range(layers):
        w = b.arg(f"w{i}", (width, width))
        x, shape = b.matmul(x, shape, w, (width, width), f"fc{i}")
        if i < layers - 1:
            x = b.relu(x, shape, f"act{i}")
    return b.module(x, shape)


def transformer_module(layers: int, d_model: int, seq: int, ffn: int | None = None, dtype: str = "f32") -> str:
    """A single-head transformer-style stack: q/k/v, scores = q·kᵀ, softmax, ·v, o, relu FFN,
    residual adds; 8 matmul sites per layer (`layer{i}.attn.q`, ... `layer{i}.ffn.down`)."""
    ffn = ffn or 4 * d_model
    b = _Builder(dtype)
    x = b.arg("x", (seq, d_model))
    s = (seq, d_model)
    for i in range(layers):
        p = f"layer{i}"
        wq, wk, wv, wo = (b.arg(f"{p}_w{n}", (d_model, d_model)) for n in "qkvo")
        w1, w2 = b.arg(f"{p}_w1", (d_model, ffn)), b.arg(f"{p}_w2", (ffn, d_model))
        q, _ = b.matmul(x, s, wq, (d_model, d_model), f"{p}.attn.q")
        k, _ = b.matmul(x, s, wk, (d_model, d_model), f"{p}.attn.k")
        v, _ = b.matmul(x, s, wv, (d_model, d_model), f"{p}.attn.v")
        sc, ss = b.matmul(q, s, k, s, f"{p}.attn.scores", transpose_b=True)
        pr = b.softmax(sc, ss, f"{p}.attn.softmax")
        ctx, _ = b.matmul(pr, ss, v, s, f"{p}.attn.context")
        o, _ = b.matmul(ctx, s, wo, (d_model, d_model), f"{p}.attn.o")
        x = b.add(x, o, s, f"{p}.attn.residual")
        h, hs = b.matmul(x, s, w1, (d_model, ffn), f"{p}.ffn.up")
        h = b.relu(h, hs, f"{p}.ffn.act")
        d, _ = b.matmul(h, hs, w2, (ffn, d_model), f"{p}.ffn.down")
        x = b.add(x, d, s, f"{p}.ffn.residual")
    return b.module(x, s)


def random_inputs(module_args: list[tuple[int, ...]], seed: int = 0, dtype=np.float32) -> list[np.ndarray]:
    """Scaled Gaussian inputs (weights ~ 1/sqrt(fan_in)) for the demo modules' arguments."""
    rng = np.random.Generator(np.random.Philox(seed))
    out = []
    for i, shape in enumerate(module_args):
        scale = 1.0 if i == 0 else 1.0 / np.sqrt(shape[0])
        out.append((rng.standard_normal(shape) * scale).astype(dtype))
    return out
