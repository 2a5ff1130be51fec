"""Small models written directly in MLIR (linalg on tensors) for tests, demos and benchmarks.

Weights are function arguments, so callers feed any distribution; every matmul carries a
`NameLoc` site name (`layer0.attn.q`) the way importers leave them. With
`weights="globals"` every argument but the first becomes a private `util.global` holding
`random_inputs(...)[1:]` as a `dense_resource` blob, the way imported models carry their
weights: the same function of the first argument as the default form fed `random_inputs`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from opscope.errors import OpscopeError


def _t(shape, dtype: str = "f32") -> str:
    return "tensor<" + "".join(f"{d}x" for d in shape) + dtype + ">"


@dataclass
class _Builder:
    """Emits a single `func.func @main` in linalg, one SSA value at a time."""

    dtype: str = "f32"
    weights: str = "args"  # or "globals": every argument after the first is a util.global
    seed: int = 0  # the globals' data: random_inputs(all argument shapes, seed)[1:]
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
        self.lines.append(
            f"{z} = linalg.fill ins({c} : {self.dtype}) outs({e} : {_t(shape, self.dtype)}) -> {_t(shape, self.dtype)}"
        )
        return z

    def matmul(self, a: str, a_shape, b: str, b_shape, name: str, transpose_b: bool = False) -> tuple[str, tuple]:
        m, k = a_shape
        n = b_shape[0] if transpose_b else b_shape[1]
        z = self.zeros((m, n))
        r = self.fresh()
        maps = ""
        if transpose_b:
            maps = (
                "indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d2)>, affine_map<(d0, d1, d2) -> (d1, d2)>, "
                "affine_map<(d0, d1, d2) -> (d0, d1)>] "
            )
        self.lines.append(
            f"{r} = linalg.matmul {maps}ins({a}, {b} : {_t(a_shape, self.dtype)}, {_t(b_shape, self.dtype)}) "
            f'outs({z} : {_t((m, n), self.dtype)}) -> {_t((m, n), self.dtype)} loc("{name}")'
        )
        return r, (m, n)

    def elementwise(self, body: list[str], ins: list[str], shape, name: str) -> str:
        ty = _t(shape, self.dtype)
        rank = len(shape)
        ident = (
            "affine_map<("
            + ", ".join(f"d{i}" for i in range(rank))
            + ") -> ("
            + ", ".join(f"d{i}" for i in range(rank))
            + ")>"
        )
        e, r = self.fresh(), self.fresh()
        self.lines.append(f"{e} = tensor.empty() : {ty}")
        args = ", ".join(f"%in{i}: {self.dtype}" for i in range(len(ins)))
        iters = ", ".join(['"parallel"'] * rank)
        self.lines.append(
            f"{r} = linalg.generic {{indexing_maps = [{', '.join([ident] * (len(ins) + 1))}], "
            f"iterator_types = [{iters}]}} ins({', '.join(ins)} : {', '.join([ty] * len(ins))}) "
            f"outs({e} : {ty}) {{\n  ^bb0({args}, %out: {self.dtype}):\n    "
            + "\n    ".join(body)
            + f'\n  }} -> {ty} loc("{name}")'
        )
        return r

    def relu(self, x: str, shape, name: str) -> str:
        return self.elementwise(
            [
                f"%z = arith.constant 0.000000e+00 : {self.dtype}",
                f"%r = arith.maximumf %in0, %z : {self.dtype}",
                f"linalg.yield %r : {self.dtype}",
            ],
            [x],
            shape,
            name,
        )

    def add(self, a: str, b: str, shape, name: str) -> str:
        return self.elementwise(
            [f"%r = arith.addf %in0, %in1 : {self.dtype}", f"linalg.yield %r : {self.dtype}"], [a, b], shape, name
        )

    def softmax(self, x: str, shape, name: str) -> str:
        e, r = self.fresh(), self.fresh()
        ty = _t(shape, self.dtype)
        self.lines.append(f"{e} = tensor.empty() : {ty}")
        self.lines.append(f'{r} = linalg.softmax dimension(1) ins({x} : {ty}) outs({e} : {ty}) -> {ty} loc("{name}")')
        return r

    def module(self, result: str, result_shape) -> str:
        if self.weights not in ("args", "globals"):
            raise ValueError(f"weights must be 'args' or 'globals', got {self.weights!r}")
        params, glob = (self.args, []) if self.weights == "args" else (self.args[:1], self.args[1:])
        sig = ", ".join(f"%{n}: {_t(s, self.dtype)}" for n, s in params)
        loads = [f"%{n} = util.global.load @{n} : {_t(s, self.dtype)}" for n, s in glob]
        body = "\n    ".join(loads + self.lines)
        decls = "".join(f"  util.global private @{n} = dense_resource<{n}> : {_t(s, self.dtype)}\n" for n, s in glob)
        text = (
            f"module {{\n{decls}  func.func @main({sig}) -> {_t(result_shape, self.dtype)} {{\n    {body}\n"
            f"    return {result} : {_t(result_shape, self.dtype)}\n  }}\n}}\n"
        )
        if glob:  # blobs: a little-endian u32 alignment, then the raw elements
            data = random_inputs([s for _, s in self.args], self.seed, _np_dtype(self.dtype))[1:]
            blobs = ",\n".join(f'      {n}: "0x04000000{a.tobytes().hex()}"' for (n, _), a in zip(glob, data))
            text += f"\n{{-#\n  dialect_resources: {{\n    builtin: {{\n{blobs}\n    }}\n  }}\n#-}}\n"
        return text


def _np_dtype(dtype: str):
    if dtype == "bf16":
        import ml_dtypes

        return ml_dtypes.bfloat16
    return {"f32": np.float32, "f16": np.float16}[dtype]


def matmul_module(m: int, k: int, n: int, dtype: str = "f32", name: str = "matmul", weights: str = "args") -> str:
    """One `linalg.matmul` [m,k] x [k,n] named `name` (the rhs is the weight)."""
    b = _Builder(dtype, weights)
    a, w = b.arg("lhs", (m, k)), b.arg("rhs", (k, n))
    r, shape = b.matmul(a, (m, k), w, (k, n), name)
    return b.module(r, shape)


def mlp_module(layers: int, width: int, tokens: int, dtype: str = "f32", weights: str = "args") -> str:
    """`layers` x (matmul -> relu), all [tokens, width]; sites `fc0`, `fc1`, ..."""
    b = _Builder(dtype, weights)
    x = b.arg("x", (tokens, width))
    shape = (tokens, width)
    for i in range(layers):
        w = b.arg(f"w{i}", (width, width))
        x, shape = b.matmul(x, shape, w, (width, width), f"fc{i}")
        if i < layers - 1:
            x = b.relu(x, shape, f"act{i}")
    return b.module(x, shape)


def bias_mlp_module(layers: int, width: int, tokens: int, dtype: str = "f32", weights: str = "globals") -> str:
    """The reference's `opscope-motifs` graph: `layers` x relu(x·W + b), every layer with a bias
    and an activation; sites `fc0`, `fc1`, ...; weights as globals by default."""
    b = _Builder(dtype, weights)
    x, shape = b.arg("x", (tokens, width)), (tokens, width)
    for i in range(layers):
        w, bias = b.arg(f"w{i}", (width, width)), b.arg(f"b{i}", shape)
        x, shape = b.matmul(x, shape, w, (width, width), f"fc{i}")
        x = b.relu(b.add(x, bias, shape, f"bias{i}"), shape, f"act{i}")
    return b.module(x, shape)


def _attention(b: _Builder, x: str, s: tuple[int, int], p: str) -> str:
    """Single-head attention with a residual: q/k/v, q·kᵀ, softmax, ·v, o; 6 sites."""
    d_model = s[1]
    wq, wk, wv, wo = (b.arg(f"{p}_w{n}", (d_model, d_model)) for n in "qkvo")
    q, _ = b.matmul(x, s, wq, (d_model, d_model), f"{p}.attn.q")
    k, _ = b.matmul(x, s, wk, (d_model, d_model), f"{p}.attn.k")
    v, _ = b.matmul(x, s, wv, (d_model, d_model), f"{p}.attn.v")
    sc, ss = b.matmul(q, s, k, s, f"{p}.attn.scores", transpose_b=True)
    pr = b.softmax(sc, ss, f"{p}.attn.softmax")
    ctx, _ = b.matmul(pr, ss, v, s, f"{p}.attn.context")
    o, _ = b.matmul(ctx, s, wo, (d_model, d_model), f"{p}.attn.o")
    return b.add(x, o, s, f"{p}.attn.residual")


def transformer_module(
    layers: int, d_model: int, seq: int, ffn: int | None = None, dtype: str = "f32", weights: str = "args"
) -> str:
    """A single-head transformer-style stack: q/k/v, scores = q·kᵀ, softmax, ·v, o, relu FFN,
    residual adds; 8 matmul sites per layer (`layer{i}.attn.q`, ... `layer{i}.ffn.down`)."""
    ffn = ffn or 4 * d_model
    b = _Builder(dtype, weights)
    x = b.arg("x", (seq, d_model))
    s = (seq, d_model)
    for i in range(layers):
        p = f"layer{i}"
        x = _attention(b, x, s, p)
        w1, w2 = b.arg(f"{p}_w1", (d_model, ffn)), b.arg(f"{p}_w2", (ffn, d_model))
        h, hs = b.matmul(x, s, w1, (d_model, ffn), f"{p}.ffn.up")
        h = b.relu(h, hs, f"{p}.ffn.act")
        d, _ = b.matmul(h, hs, w2, (ffn, d_model), f"{p}.ffn.down")
        x = b.add(x, d, s, f"{p}.ffn.residual")
    return b.module(x, s)


def pyramid_module(rows: int = 32, widths: tuple[int, ...] = (64, 128, 64, 512, 64), dtype: str = "f32") -> str:
    """The reference replay driver's "pyramid" MLP: matmul -> relu per layer, widths
    64->128->64->512->64 by default (the 512-wide layers dominate FLOPs); sites `fc0`..."""
    b = _Builder(dtype)
    x = b.arg("x", (rows, widths[0]))
    shape = (rows, widths[0])
    for i, (fan_in, fan_out) in enumerate(zip(widths, widths[1:])):
        w = b.arg(f"w{i}", (fan_in, fan_out))
        x, shape = b.matmul(x, shape, w, (fan_in, fan_out), f"fc{i}")
        x = b.relu(x, shape, f"act{i}")
    return b.module(x, shape)


def _map(dims: str, results: str) -> str:
    return f"affine_map<({dims}) -> ({results})>"


def _moe(b: _Builder, x: str, s: tuple[int, int], p: str, experts: int, top_k: int) -> str:
    """Top-k routed experts, evaluated densely: gate = x·wg, the top-k logits per token
    (k = 1 or 2) get softmax weights, expert e sees x with unrouted tokens zeroed (so the
    density of its input is its share of tokens), one batch_matmul over all experts, a
    weighted sum and a residual add. Sites `{p}.moe.gate` and `{p}.moe.experts`."""
    if top_k not in (1, 2):
        raise ValueError("the demo MoE routes each token to 1 or 2 experts")
    seq, d = s
    ty = b.dtype
    wg = b.arg(f"{p}_wg", (d, experts))
    we = b.arg(f"{p}_experts", (experts, d, d))
    g, gs = b.matmul(x, s, wg, (d, experts), f"{p}.moe.gate")
    se, row = "d0, d1", _map("d0, d1", "d0")
    ident2 = _map("d0, d1", "d0, d1")
    red = '["parallel", "reduction"]'
    par = '["parallel", "parallel"]'

    def generic(ins, in_tys, maps, out_ty, out_map, iters, body, init, name, dims=se):
        out = b.fresh()
        if init is None:
            e = b.fresh()
            b.lines.append(f"{e} = tensor.empty() : {out_ty}")
        else:
            e, c = b.fresh(), b.fresh()
            b.lines.append(f"{c} = arith.constant {init} : {ty}")
            b.lines.append(f"{e}_0 = tensor.empty() : {out_ty}")
            b.lines.append(f"{e} = linalg.fill ins({c} : {ty}) outs({e}_0 : {out_ty}) -> {out_ty}")
        args = ", ".join([f"%in{i}: {ty}" for i in range(len(ins))] + [f"%acc: {ty}"])
        b.lines.append(
            f"{out} = linalg.generic {{indexing_maps = [{', '.join(maps + [out_map])}], iterator_types = {iters}}} "
            f"ins({', '.join(ins)} : {', '.join(in_tys)}) outs({e} : {out_ty}) {{\n  ^bb0({args}):\n    "
            + "\n    ".join(body)
            + f'\n  }} -> {out_ty} loc("{name}")'
        )
        return out

    tg, tr = _t(gs, ty), _t((seq,), ty)
    m1 = generic(
        [g],
        [tg],
        [ident2],
        tr,
        row,
        red,
        [f"%r = arith.maximumf %in0, %acc : {ty}", f"linalg.yield %r : {ty}"],
        "0xFF800000",
        f"{p}.moe.top1",
    )
    thresh = m1
    if top_k == 2:
        thresh = generic(
            [g, m1],
            [tg, tr],
            [ident2, row],
            tr,
            row,
            red,
            [
                f"%ninf = arith.constant 0xFF800000 : {ty}",
                f"%lt = arith.cmpf olt, %in0, %in1 : {ty}",
                f"%c = arith.select %lt, %in0, %ninf : {ty}",
                f"%r = arith.maximumf %c, %acc : {ty}",
                f"linalg.yield %r : {ty}",
            ],
            "0xFF800000",
            f"{p}.moe.top2",
        )
    mask = generic(
        [g, thresh],
        [tg, tr],
        [ident2, row],
        tg,
        ident2,
        par,
        [
            f"%one = arith.constant 1.0 : {ty}",
            f"%zero = arith.constant 0.0 : {ty}",
            f"%ge = arith.cmpf oge, %in0, %in1 : {ty}",
            f"%r = arith.select %ge, %one, %zero : {ty}",
            f"linalg.yield %r : {ty}",
        ],
        None,
        f"{p}.moe.route",
    )
    pexp = generic(
        [g, m1, mask],
        [tg, tr, tg],
        [ident2, row, ident2],
        tg,
        ident2,
        par,
        [
            f"%d = arith.subf %in0, %in1 : {ty}",
            f"%e = math.exp %d : {ty}",
            f"%r = arith.mulf %e, %in2 : {ty}",
            f"linalg.yield %r : {ty}",
        ],
        None,
        f"{p}.moe.exp",
    )
    denom = generic(
        [pexp],
        [tg],
        [ident2],
        tr,
        row,
        red,
        [f"%r = arith.addf %in0, %acc : {ty}", f"linalg.yield %r : {ty}"],
        "0.0",
        f"{p}.moe.denom",
    )
    weights = generic(
        [pexp, denom],
        [tg, tr],
        [ident2, row],
        tg,
        ident2,
        par,
        [f"%r = arith.divf %in0, %in1 : {ty}", f"linalg.yield %r : {ty}"],
        None,
        f"{p}.moe.weights",
    )
    es = (experts, seq, d)
    tes = _t(es, ty)
    d3 = "d0, d1, d2"
    routed = generic(
        [x, mask],
        [_t(s, ty), tg],
        [_map(d3, "d1, d2"), _map(d3, "d1, d0")],
        tes,
        _map(d3, d3),
        '["parallel", "parallel", "parallel"]',
        [f"%r = arith.mulf %in0, %in1 : {ty}", f"linalg.yield %r : {ty}"],
        None,
        f"{p}.moe.dispatch",
        d3,
    )
    z = b.fresh()
    b.lines.append(f"{z}_c = arith.constant 0.0 : {ty}")
    b.lines.append(f"{z}_e = tensor.empty() : {tes}")
    b.lines.append(f"{z} = linalg.fill ins({z}_c : {ty}) outs({z}_e : {tes}) -> {tes}")
    ye = b.fresh()
    b.lines.append(
        f"{ye} = linalg.batch_matmul ins({routed}, {we} : {tes}, {_t((experts, d, d), ty)}) "
        f'outs({z} : {tes}) -> {tes} loc("{p}.moe.experts")'
    )
    combined = generic(
        [ye, weights],
        [tes, tg],
        [_map(d3, "d0, d1, d2"), _map(d3, "d1, d0")],
        _t(s, ty),
        _map(d3, "d1, d2"),
        '["reduction", "parallel", "parallel"]',
        [f"%m = arith.mulf %in0, %in1 : {ty}", f"%r = arith.addf %m, %acc : {ty}", f"linalg.yield %r : {ty}"],
        "0.0",
        f"{p}.moe.combine",
        d3,
    )
    return b.add(x, combined, s, f"{p}.moe.residual")


def moe_module(layers: int, d_model: int, seq: int, experts: int = 8, top_k: int = 2, dtype: str = "f32") -> str:
    """The reference demo's `moe` kind: per layer attention, then a top-k routed mixture of
    `experts` [d_model, d_model] experts (see `_moe`); 9 sites per layer (the weighted
    combine of expert outputs is a contraction over experts too)."""
    b = _Builder(dtype)
    x = b.arg("x", (seq, d_model))
    s = (seq, d_model)
    for i in range(layers):
        x = _attention(b, x, s, f"layer{i}")
        x = _moe(b, x, s, f"layer{i}", experts, top_k)
    return b.module(x, s)


def random_inputs(module_args: list[tuple[int, ...]], seed: int = 0, dtype=np.float32) -> list[np.ndarray]:
    """Scaled Gaussian inputs (weights ~ 1/sqrt(fan_in)) for the demo modules' arguments."""
    rng = np.random.Generator(np.random.Philox(seed))
    out = []
    for i, shape in enumerate(module_args):
        scale = 1.0 if i == 0 else 1.0 / np.sqrt(shape[0])
        out.append((rng.standard_normal(shape) * scale).astype(dtype))
    return out


DEMO_KINDS = ("mlp", "transformer", "moe")  # the demo models `opscope demo` and the static analyses name


def demo_module(kind: str, layers: int = 2, d_model: int = 64, seq: int = 16) -> str:
    """The demo `kind` as `opscope demo` prints it: the MLP, the transformer or the MoE."""
    makers = {"mlp": mlp_module, "transformer": transformer_module, "moe": moe_module}
    return makers[_check_kind(kind)](layers, d_model, seq)


def analysis_module(kind: str, layers: int = 6, d_model: int = 64, seq: int = 16) -> str:
    """The demo `kind` the static analyses read: the reference's motifs graph (every layer
    relu(x·W + b)), the transformer with its weights as globals, or the MoE."""
    if _check_kind(kind) == "mlp":
        return bias_mlp_module(layers, d_model, seq)
    if kind == "transformer":
        return transformer_module(layers, d_model, seq, weights="globals")
    return moe_module(layers, d_model, seq)


def _check_kind(kind: str) -> str:
    """`kind`, or a one-line error naming the demos."""
    if kind not in DEMO_KINDS:
        raise OpscopeError(f"no demo {kind!r} (choose one of: {', '.join(DEMO_KINDS)})")
    return kind
