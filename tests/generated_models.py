"""Random valid models written as linalg, each with its own numpy reference: the generator the
differential tests (`tests/test_generated_models.py`) run every pass and analysis against.

A `Program` is a small SSA graph built op by op (`matmul`, `conv`, `softmax`, `topk`, ...); it
knows each value's shape and type, writes itself as MLIR text (`emit`), computes itself in numpy
float64 (`evaluate`, every intermediate kept) and states what opscope should find in it
(`expected`: the sites with their kinds, FLOPs and channel dims, attention, routing, residual
adds). Nothing in it comes from opscope: it is the independent side of each comparison.

The hypothesis strategies (`models()`) draw programs from five families a user's model is made
of: MLP stacks (transposed, half-precision and int8 weights, norms, gating, residual adds),
attention (split or fused QKV, GQA, causal or padded masks), convolutions (1-D, 2-D, strided,
dilated, depthwise, grouped, transposed), MoE routing (top-k, experts run batched) and einsum
contractions with arbitrary index maps; shapes with 1s, primes and K much larger than M.
Shrinking works on the drawn choices, so a failure shrinks to a small program.
"""

from __future__ import annotations

import math
import re
from contextlib import contextmanager
from dataclasses import dataclass, field

import ml_dtypes
import numpy as np
from hypothesis import strategies as st

NP = {"f32": np.float32, "f16": np.float16, "bf16": ml_dtypes.bfloat16, "i8": np.int8, "i32": np.int32}
FLOAT_MIN = float(np.finfo(np.float32).min)  # the mask value HF models add (torch.finfo(f32).min)


def ttype(shape: tuple[int, ...], dtype: str = "f32") -> str:
    """The MLIR tensor type of `shape` and `dtype`."""
    return "tensor<" + "".join(f"{d}x" for d in shape) + dtype + ">"


def hex_dense(a: np.ndarray, dtype: str) -> str:
    """`a` as an exact MLIR dense literal (its little-endian bytes in hex)."""
    return 'dense<"0x' + np.ascontiguousarray(a.astype(NP[dtype])).tobytes().hex().upper() + '">'


def flit(x: float) -> str:
    """An MLIR float literal of `x` rounded to f32 (exact: the f32 value written in full)."""
    return f"{float(np.float32(x)):.17e}"


def affine(rank: int, results: list[str]) -> str:
    """`affine_map<(d0, ..) -> (results)>` over `rank` loop dims."""
    return f"affine_map<({', '.join(f'd{i}' for i in range(rank))}) -> ({', '.join(results)})>"


@dataclass
class Value:
    """One SSA value: its id (`%v<id>`), shape and element type; `array` for a constant."""

    id: int
    shape: tuple[int, ...]
    dtype: str = "f32"
    array: np.ndarray | None = field(default=None, repr=False)

    @property
    def ref(self) -> str:
        return f"%v{self.id}"

    @property
    def type(self) -> str:
        return ttype(self.shape, self.dtype)


@dataclass(frozen=True)
class SiteFact:
    """A contraction or convolution the program contains, as opscope should report it."""

    name: str
    kind: str  # matmul, batch_matmul, generic, conv_2d_nchw_fchw, ...
    flops: int
    lhs: int  # value ids of the operands as the taps should read them (a conv's input unpadded)
    rhs: int
    out: int
    channels: tuple[tuple[str, tuple[int, ...]], ...] = ()  # role -> channel dims, where not the last dim
    weight: bool = True  # the rhs is a constant (a weight)
    lhs_k: tuple[int, ...] = ()  # the dims of lhs and rhs the site contracts (its K)
    rhs_k: tuple[int, ...] = ()
    weight_lhs: bool = False  # the lhs is the weight (W @ x, JAX's and some einsums' order), the rhs computed


@dataclass
class Expected:
    """What opscope should find in a program."""

    sites: list[SiteFact] = field(default_factory=list)
    attention: int = 0  # softmaxes over q·kᵀ scores
    gates: int = 0  # softmaxes over a router's logits
    routing: int = 0  # top-k ops
    residual: list[int] = field(default_factory=list)  # value ids of the residual adds
    params: int = 0  # weight elements
    param_bytes: int = 0


class Program:
    """A model built op by op: MLIR text, numpy reference and expectations kept together."""

    def __init__(self, prefix: str, seed: int = 0):
        self.prefix = prefix
        self.values: list[Value] = []
        self.args: list[Value] = []
        self.lines: list[str] = []
        self.refs: dict[int, object] = {}  # value id -> how numpy computes it
        self.torch_ops: dict[int, tuple] = {}  # value id of an elementwise map -> (torch op name, args)
        self.loc_of: dict[int, str] = {}  # value id -> the location of the op computing it (exposed as `<loc>#0`)
        self.expose_suffix: dict[int, tuple[str, str]] = {}  # value id -> (location, `:i`) of an op's result i > 0
        self.routes: dict[str, int] = {}  # location of a routing op (top-k, sort) -> the chosen indices' value id
        self.outputs: list[Value] = []
        self.expected = Expected()
        self.rng = np.random.default_rng(seed)
        self.seed = seed
        self.family = ""
        self._op = 0
        self._aux = 0
        self._last_loc = ""

    # -- values ---------------------------------------------------------------------------
    def _new(self, shape, dtype="f32", array=None) -> Value:
        v = Value(len(self.values), tuple(int(d) for d in shape), dtype, array)
        self.values.append(v)
        return v

    def _loc(self, what: str, aux: bool = False) -> str:
        """The location of the next op: `<prefix>.<what><n>` (`.aux` for its helper ops, which
        keeps the op's own exposed name `<path>#0`)."""
        if not aux:
            return f"{self.prefix}.{what}{self._op}"
        self._aux += 1
        return f"{self.prefix}.{what}{self._op}.aux{self._aux}"

    def _remember(self, loc: str) -> str:
        self._last_loc = loc
        return loc

    def _step(self) -> None:
        self._op += 1

    def arg(self, shape, dtype: str = "f32") -> Value:
        v = self._new(shape, dtype)
        self.args.append(v)
        self.refs[v.id] = ("arg", len(self.args) - 1)
        return v

    def const(self, array: np.ndarray, dtype: str = "f32", param: bool = True) -> Value:
        array = np.asarray(array).astype(NP[dtype])
        v = self._new(array.shape, dtype, array)
        self.lines.append(f"{v.ref} = arith.constant {hex_dense(array, dtype)} : {v.type}")
        self.refs[v.id] = ("const", array)
        if param:
            self.expected.params += array.size
            self.expected.param_bytes += array.nbytes
        return v

    def weight(self, shape, scale: float | None = None, zero_rows: int = 0) -> np.ndarray:
        """A random float32 weight, N(0, 1/fan_in); `zero_rows` of its first dim zeroed (dead channels)."""
        fan_in = int(np.prod(shape[1:])) if len(shape) > 1 else int(shape[0])
        w = self.rng.standard_normal(shape) * (scale if scale is not None else 1.0 / math.sqrt(max(fan_in, 1)))
        if zero_rows and shape[0] > 1:  # never all of them: an all-zero constant is a splat filler, no weight
            w[self.rng.choice(shape[0], size=min(zero_rows, shape[0] - 1), replace=False)] = 0.0
        return w.astype(np.float32)

    def _zeros(self, shape, dtype="f32") -> str:
        """The name of a zero-filled tensor of `shape` (an accumulator), its ops written."""
        e, z, f = (f"%z{len(self.lines)}_{s}" for s in "ezf")
        ty = ttype(shape, dtype)
        zero = "0.0" if dtype != "i32" else "0"
        self.lines.append(f"{z} = arith.constant {zero} : {dtype}")
        self.lines.append(f"{e} = tensor.empty() : {ty}")
        self.lines.append(f"{f} = linalg.fill ins({z} : {dtype}) outs({e} : {ty}) -> {ty}")
        return f

    def _empty(self, shape, dtype="f32") -> str:
        e = f"%e{len(self.lines)}"
        self.lines.append(f"{e} = tensor.empty() : {ttype(shape, dtype)}")
        return e

    # -- ops ------------------------------------------------------------------------------
    def generic(
        self,
        ins: list[Value],
        out_shape,
        maps: list[str],
        iters: list[str],
        body: list[str],
        what: str,
        out_dtype: str = "f32",
        init: str | None = None,
        ref=None,
        aux: bool = False,
    ) -> Value:
        """One `linalg.generic`: `body` lines use %a0.. for the inputs' elements, %acc for the
        output's, and end by defining %r (what it yields)."""
        out = self._new(out_shape, out_dtype)
        self.loc_of[out.id] = self._loc(what, aux)
        init = init or self._empty(out_shape, out_dtype)
        args = ", ".join(f"%a{i}: {v.dtype}" for i, v in enumerate(ins)) + f", %acc: {out_dtype}"
        self.lines.append(
            f"{out.ref} = linalg.generic {{indexing_maps = [{', '.join(maps)}], iterator_types = "
            f"[{', '.join(repr(i).replace(chr(39), chr(34)) for i in iters)}]}} "
            f"ins({', '.join(v.ref for v in ins)} : {', '.join(v.type for v in ins)}) "
            f"outs({init} : {out.type}) {{\n  ^bb0({args}):\n    "
            + "".join(line + "\n    " for line in body)
            + f'linalg.yield {"%r" if body else "%a0"} : {out_dtype}\n  }} -> {out.type} loc("{self._loc(what, aux)}")'
        )
        self.refs[out.id] = ref
        return out

    def elementwise(self, ins: list[Value], body: list[str], what: str, ref, out_dtype="f32", aux=False) -> Value:
        """An elementwise generic over the first input's shape (later inputs broadcast from the right)."""
        shape = ins[0].shape
        rank = len(shape)
        maps = []
        for v in ins:
            lead = rank - len(v.shape)
            maps.append(
                affine(rank, [f"d{lead + i}" if d != 1 or shape[lead + i] == 1 else "0" for i, d in enumerate(v.shape)])
            )
        maps.append(affine(rank, [f"d{i}" for i in range(rank)]))
        return self.generic(ins, shape, maps, ["parallel"] * rank, body, what, out_dtype, ref=ref, aux=aux)

    def unary(self, x: Value, fn: str) -> Value:
        bodies = {
            "relu": (
                ["%k0 = arith.constant 0.0 : f32", "%r = arith.maximumf %a0, %k0 : f32"],
                lambda a: np.maximum(a, 0),
            ),
            "tanh": (["%r = math.tanh %a0 : f32"], np.tanh),
            "sigmoid": (
                [
                    "%n = arith.negf %a0 : f32",
                    "%e = math.exp %n : f32",
                    "%k1 = arith.constant 1.0 : f32",
                    "%d = arith.addf %k1, %e : f32",
                    "%r = arith.divf %k1, %d : f32",
                ],
                lambda a: 1.0 / (1.0 + np.exp(-a)),
            ),
            "silu": (
                [
                    "%n = arith.negf %a0 : f32",
                    "%e = math.exp %n : f32",
                    "%k1 = arith.constant 1.0 : f32",
                    "%d = arith.addf %k1, %e : f32",
                    "%r = arith.divf %a0, %d : f32",
                ],
                lambda a: a / (1.0 + np.exp(-a)),
            ),
            "square": (["%r = arith.mulf %a0, %a0 : f32"], np.square),
        }
        body, ref = bodies[fn]
        v = self.elementwise([x], body, fn, ("map", ref, (x.id,)))
        self.torch_ops[v.id] = (fn,)
        self._step()
        return v

    def add(self, a: Value, b: Value, residual: bool = False) -> Value:
        v = self.elementwise([a, b], ["%r = arith.addf %a0, %a1 : f32"], "add", ("map", np.add, (a.id, b.id)))
        self.torch_ops[v.id] = ("add",)
        if residual:
            self.expected.residual.append(v.id)
        self._step()
        return v

    def mul(self, a: Value, b: Value) -> Value:
        v = self.elementwise([a, b], ["%r = arith.mulf %a0, %a1 : f32"], "mul", ("map", np.multiply, (a.id, b.id)))
        self.torch_ops[v.id] = ("mul",)
        self._step()
        return v

    def scale(self, a: Value, s: float) -> Value:
        v = self.elementwise(
            [a],
            [f"%s = arith.constant {flit(s)} : f32", "%r = arith.mulf %a0, %s : f32"],
            "scale",
            ("map", lambda x: x * np.float64(np.float32(s)), (a.id,)),
        )
        self.torch_ops[v.id] = ("scale", float(np.float32(s)))
        self._step()
        return v

    def cast(self, x: Value, dtype: str) -> Value:
        """A float cast (truncf to a half type, extf back); numpy rounds the same way."""
        wide = dtype == "f32"
        op = "arith.extf" if wide else "arith.truncf"
        v = self.elementwise(
            [x],
            [f"%r = {op} %a0 : {x.dtype} to {dtype}"],
            "cast",
            ("map", lambda a, t=dtype: a.astype(NP[t]).astype(np.float64), (x.id,)),
            out_dtype=dtype,
            aux=False,
        )
        self.torch_ops[v.id] = ("cast", dtype)
        self._step()
        return v

    def reduce(self, x: Value, axis: int, kind: str = "sum") -> Value:
        """Sum or max over `axis` (kept as size 1 dropped: the result has rank - 1)."""
        rank = len(x.shape)
        axis %= rank
        out_shape = tuple(d for i, d in enumerate(x.shape) if i != axis)
        init = self._zeros(out_shape) if kind == "sum" else self._fill(out_shape, FLOAT_MIN)
        body = ["%r = arith.addf %a0, %acc : f32"] if kind == "sum" else ["%r = arith.maximumf %a0, %acc : f32"]
        ref = ("reduce", np.sum if kind == "sum" else np.max, x.id, axis)
        v = self.generic(
            [x],
            out_shape,
            [affine(rank, [f"d{i}" for i in range(rank)]), affine(rank, [f"d{i}" for i in range(rank) if i != axis])],
            ["reduction" if i == axis else "parallel" for i in range(rank)],
            body,
            f"r{kind}",
            init=init,
            ref=ref,
        )
        self._step()
        return v

    def _fill(self, shape, value: float) -> str:
        c, e, f = (f"%c{len(self.lines)}_{s}" for s in "cef")
        lit = "0xFF800000" if value == float("-inf") else flit(value)
        ty = ttype(shape)
        self.lines.append(f"{c} = arith.constant {lit} : f32")
        self.lines.append(f"{e} = tensor.empty() : {ty}")
        self.lines.append(f"{f} = linalg.fill ins({c} : f32) outs({e} : {ty}) -> {ty}")
        return f

    def by_row(self, a: Value, r: Value, body: list[str], what: str, ref) -> Value:
        """An elementwise generic of `a` and `r`, a reduction of `a` over its last axis broadcast back
        (%a0 an element of a, %a1 its row's value of r)."""
        rank = len(a.shape)
        every, rows = [f"d{i}" for i in range(rank)], [f"d{i}" for i in range(rank - 1)]
        maps = [affine(rank, every), affine(rank, rows), affine(rank, every)]
        return self.generic([a, r], a.shape, maps, ["parallel"] * rank, body, what, ref=ref)

    def broadcast_div(self, a: Value, b: Value, what: str) -> Value:
        """a / b with b reduced over a's last axis (a softmax's normalization)."""
        return self.by_row(a, b, ["%r = arith.divf %a0, %a1 : f32"], what, ("div_last", a.id, b.id))

    def softmax(self, x: Value) -> Value:
        """Softmax over the last axis, decomposed as torch-mlir writes it: max, exp(x - max), sum, divide."""
        m = self.reduce(x, -1, "max")
        body = ["%d = arith.subf %a0, %a1 : f32", "%r = math.exp %d : f32"]
        e = self.by_row(x, m, body, "exp", ("exp_sub_last", x.id, m.id))
        self._step()
        s = self.reduce(e, -1, "sum")
        p = self.broadcast_div(e, s, "softmax")
        self._step()
        return p

    def rmsnorm(self, x: Value, eps: float = 1e-5) -> Value:
        """x · rsqrt(mean(x²) + eps) · g over the last axis (g a weight)."""
        d = x.shape[-1]
        sq = self.unary(x, "square")
        ss = self.reduce(sq, -1, "sum")
        g = self.const(1.0 + 0.1 * self.rng.standard_normal(d))
        rank = len(x.shape)
        maps = [
            affine(rank, [f"d{i}" for i in range(rank)]),
            affine(rank, [f"d{i}" for i in range(rank - 1)]),
            affine(rank, [f"d{rank - 1}"]),
            affine(rank, [f"d{i}" for i in range(rank)]),
        ]
        body = [
            f"%n = arith.constant {flit(d)} : f32",
            "%m = arith.divf %a1, %n : f32",
            f"%ep = arith.constant {flit(eps)} : f32",
            "%me = arith.addf %m, %ep : f32",
            "%rs = math.rsqrt %me : f32",
            "%xn = arith.mulf %a0, %rs : f32",
            "%r = arith.mulf %xn, %a2 : f32",
        ]
        v = self.generic(
            [x, ss, g], x.shape, maps, ["parallel"] * rank, body, "norm", ref=("rmsnorm", x.id, ss.id, g.id, d, eps)
        )
        self._step()
        return v

    def transpose(self, x: Value, perm: tuple[int, ...], aux: bool = False) -> Value:
        out = self._new(tuple(x.shape[p] for p in perm), x.dtype)
        init = self._empty(out.shape, x.dtype)
        self.lines.append(
            f"{out.ref} = linalg.transpose ins({x.ref} : {x.type}) outs({init} : {out.type}) "
            f'permutation = [{", ".join(map(str, perm))}] loc("{self._remember(self._loc("t", aux))}")'
        )
        self.refs[out.id] = ("transpose", x.id, perm)
        self.loc_of[out.id] = self._last_loc
        if not aux:
            self._step()
        return out

    def reshape(self, x: Value, shape: tuple[int, ...], groups: list[list[int]]) -> Value:
        """`tensor.expand_shape` (more dims) or `tensor.collapse_shape` (fewer), row-major, with the
        reassociation `groups` (indices of the larger shape, one group per dim of the smaller)."""
        out = self._new(shape, x.dtype)
        ra = "[" + ", ".join("[" + ", ".join(map(str, g)) + "]" for g in groups) + "]"
        if len(shape) > len(x.shape):
            op = (
                f"{out.ref} = tensor.expand_shape {x.ref} {ra} output_shape "
                f"[{', '.join(map(str, shape))}] : {x.type} into {out.type}"
            )
        else:
            op = f"{out.ref} = tensor.collapse_shape {x.ref} {ra} : {x.type} into {out.type}"
        self.lines.append(op + f' loc("{self._remember(self._loc("reshape", True))}")')
        self.refs[out.id] = ("reshape", x.id, shape)
        self.loc_of[out.id] = self._last_loc
        return out

    def slice(self, x: Value, axis: int, start: int, size: int) -> Value:
        """`tensor.extract_slice` of `size` entries of `axis` from `start` (a fused QKV split)."""
        shape = tuple(size if i == axis else d for i, d in enumerate(x.shape))
        out = self._new(shape, x.dtype)
        offs = ", ".join(str(start if i == axis else 0) for i in range(len(shape)))
        self.lines.append(
            f"{out.ref} = tensor.extract_slice {x.ref}[{offs}] [{', '.join(map(str, shape))}] "
            f'[{", ".join(["1"] * len(shape))}] : {x.type} to {out.type} loc("{self._remember(self._loc("slice", True))}")'
        )
        self.refs[out.id] = ("slice", x.id, axis, start, size)
        self.loc_of[out.id] = self._last_loc
        return out

    def repeat_heads(self, x: Value, rep: int) -> Value:
        """[G, S, D] -> [G·rep, S, D], each group repeated `rep` times (GQA's repeat_kv: a broadcast
        generic then a collapse, as HF models export)."""
        g, s_, d = x.shape
        b = self.generic(
            [x],
            (g, rep, s_, d),
            [affine(4, ["d0", "d2", "d3"]), affine(4, ["d0", "d1", "d2", "d3"])],
            ["parallel"] * 4,
            [],
            "repeat",
            ref=("repeat", x.id, rep),
            aux=True,
        )
        return self.reshape(b, (g * rep, s_, d), [[0, 1], [2], [3]])

    def mask(self, x: Value, kind: str, padded: int = 0) -> Value:
        """Scores [H, S, S] plus a constant mask [S, S]: `causal` (FLOAT_MIN above the diagonal) or
        `padded` (FLOAT_MIN on the last `padded` keys), as HF models add them."""
        s_ = x.shape[-1]
        m = np.zeros((x.shape[-2], s_), np.float32)
        if kind == "causal":
            m[np.triu_indices(x.shape[-2], 1, s_)] = FLOAT_MIN
        else:
            m[:, s_ - padded :] = FLOAT_MIN
        mv = self.const(m, param=False)
        return self.add(x, mv)

    # -- contractions ---------------------------------------------------------------------
    def _site(self, name, kind, flops, lhs, rhs, out, channels=(), weight=True, k=((), ()), weight_lhs=False):
        fact = SiteFact(name, kind, flops, lhs.id, rhs.id, out.id, channels, weight, *k, weight_lhs=weight_lhs)
        self.expected.sites.append(fact)

    def matmul(self, a: Value, b: Value, weight: bool = True, weight_lhs: bool = False) -> Value:
        """`linalg.matmul` (f32, or half-type inputs with an f32 accumulator); `weight_lhs`: `a` is
        the weight, `b` computed (W @ x)."""
        return self._named("matmul", "mm", "mk,kn->mn", a, b, weight, ((1,), (0,)), weight_lhs)

    def batch_matmul(self, a: Value, b: Value, weight: bool = False) -> Value:
        """`linalg.batch_matmul`."""
        return self._named("batch_matmul", "bmm", "bmk,bkn->bmn", a, b, weight, ((2,), (1,)))

    def _named(
        self, op: str, what: str, spec: str, a: Value, b: Value, weight: bool, k: tuple, weight_lhs: bool = False
    ) -> Value:
        """A named contraction `linalg.<op>` of `a` and `b` (its einsum `spec`) into zeros: one site."""
        sizes = dict(zip(spec[: len(a.shape)], a.shape)) | dict(zip(spec[len(a.shape) + 1 :], b.shape))
        out = self._new(tuple(sizes[c] for c in spec.split("->")[1]))
        init = self._zeros(out.shape)
        loc = self._loc(what)
        self.lines.append(
            f"{out.ref} = linalg.{op} ins({a.ref}, {b.ref} : {a.type}, {b.type}) "
            f'outs({init} : {out.type}) -> {out.type} loc("{loc}")'
        )
        self.refs[out.id] = ("einsum", spec, (a.id, b.id))
        self.loc_of[out.id] = loc
        self._site(
            loc, op, 2 * int(np.prod(list(sizes.values()))), a, b, out, weight=weight, k=k, weight_lhs=weight_lhs
        )
        self._step()
        return out

    def einsum(
        self, a: Value, b: Value, spec: str, sizes: dict[str, int], weight: bool = True, weight_lhs: bool = False
    ) -> Value:
        """A contraction `linalg.generic` for an einsum `spec` ("bik,kj->bij"); loops in the order
        of the output's letters, then the contracted ones; `weight`: `b` is a weight, `weight_lhs`: `a` is."""
        ins, out_s = spec.split("->")
        sa, sb = ins.split(",")
        loops = list(out_s) + [c for c in dict.fromkeys(sa + sb) if c not in out_s]
        rank = len(loops)
        pos = {c: i for i, c in enumerate(loops)}
        maps = [affine(rank, [f"d{pos[c]}" for c in s]) for s in (sa, sb, out_s)]
        iters = ["parallel" if c in out_s else "reduction" for c in loops]
        out_shape = tuple(sizes[c] for c in out_s)
        init = self._zeros(out_shape)
        v = self.generic(
            [a, b],
            out_shape,
            maps,
            iters,
            ["%p = arith.mulf %a0, %a1 : f32", "%r = arith.addf %acc, %p : f32"],
            "ein",
            init=init,
            ref=("einsum", spec, (a.id, b.id)),
        )
        flops = 2 * int(np.prod([sizes[c] for c in loops]))
        contracted = [c for c in loops if c not in out_s]
        k = (
            tuple(i for i, c in enumerate(sa) if c in contracted),
            tuple(i for i, c in enumerate(sb) if c in contracted),
        )
        self._site(self._loc("ein"), "generic", flops, a, b, v, weight=weight, k=k, weight_lhs=weight_lhs)
        self._step()
        return v

    def linear(
        self, x: Value, n: int, *, form: str = "plain", wdtype: str = "f32", bias: bool = False, zero_rows: int = 0
    ) -> Value:
        """x·W for a weight W [K, N] stored as `form` says: `plain`, `transposed` ([N, K] then a
        `linalg.transpose`, as importers write nn.Linear), `generic` (a contraction generic
        reading [N, K] directly) or `lhs` ((W [N, K] @ xᵀ)ᵀ: the weight on the matmul's lhs, as
        JAX's `W @ x` writes it); `wdtype` f16/bf16 (extf before use) or i8 (codes · per-channel scale)."""
        k = x.shape[-1]
        w = self.weight((n, k), zero_rows=zero_rows)  # [N, K], nn.Linear's layout
        if wdtype in ("f16", "bf16"):
            wc = self.const(w, wdtype)
            wv = self.cast(wc, "f32")
        elif wdtype == "i8":
            amax = np.abs(w).max(axis=1, keepdims=True)
            sc = np.where(amax > 0, amax / 127.0, 1.0).astype(np.float32)
            codes = np.clip(np.round(w / sc), -127, 127).astype(np.int8)
            wc = self.const(codes, "i8")
            sv = self.const(sc[:, 0])
            wv = self.elementwise(
                [wc, self.reshape(sv, (n, 1), [[0, 1]])],
                ["%f = arith.sitofp %a0 : i8 to f32", "%r = arith.mulf %f, %a1 : f32"],
                "deq",
                ("dequant", wc.id, sv.id),
                aux=True,
            )
        else:
            wv = self.const(w)
        if form == "generic":
            y = self.einsum(x, wv, "mk,nk->mn", {"m": x.shape[0], "k": k, "n": n})
        elif form == "lhs":
            xt = self.transpose(x, (1, 0), aux=True)
            y = self.transpose(self.matmul(wv, xt, weight=False, weight_lhs=True), (1, 0), aux=True)
        else:
            wt = self.transpose(wv, (1, 0), aux=True)
            y = self.matmul(x, wt)
        if bias:
            y = self.add(y, self.const(0.1 * self.rng.standard_normal(n)))
        return y

    def conv(
        self,
        x: Value,
        f: int,
        kernel: tuple[int, ...],
        *,
        stride=1,
        dilation=1,
        pad=0,
        groups=1,
        depthwise=False,
        transposed=False,
        zero_rows: int = 0,
    ) -> Value:
        """A 1-D (`x` NCW) or 2-D (`x` NCHW) convolution, as torch-mlir writes it: zero padding as
        `tensor.pad`; groups split with `tensor.expand_shape` (`conv_2d_ngchw_fgchw`); depthwise
        `depthwise_conv_2d_nchw_chw`; transposed as the input spread over zeros (stride) then a
        stride-1 convolution of the flipped kernel."""
        nd = len(kernel)
        c = x.shape[1]
        cg = c if depthwise else c // groups
        wshape = (c,) + kernel if depthwise else (f, cg) + kernel
        w = self.weight(wshape, zero_rows=zero_rows)
        if transposed:  # torch's ConvTranspose weight [C, F, k..] as the direct kernel [F, C, k..], flipped
            w = np.ascontiguousarray(np.flip(self.weight((c, f) + kernel), axis=tuple(range(2, 2 + nd))).swapaxes(0, 1))
        wv = self.const(w)
        src = x
        spread = False
        if transposed:  # torch-mlir's form: the input inserted (strided) into a zero image padded by
            # q = d·(k-1) - p on each side, then a stride-1 convolution of the flipped kernel
            q = [dilation * (kk - 1) - pad for kk in kernel]
            spread = stride > 1 or any(q)
            if spread:
                spread_shape = x.shape[:2] + tuple((d - 1) * stride + 1 + 2 * qq for d, qq in zip(x.shape[2:], q))
                zeros = self._zeros(spread_shape)
                sp = self._new(spread_shape)
                strides = [1, 1] + [stride] * nd
                self.lines.append(
                    f"{sp.ref} = tensor.insert_slice {x.ref} into {zeros}[0, 0, {', '.join(map(str, q))}] "
                    f"[{', '.join(map(str, x.shape))}] [{', '.join(map(str, strides))}] : {x.type} into {sp.type}"
                    f' loc("{self._remember(self._loc("spread", True))}")'
                )
                self.refs[sp.id] = ("spread", x.id, stride, tuple(q))
                self.loc_of[sp.id] = self._last_loc
                src = sp
            pads = [0] * nd
            stride_conv = 1
        else:
            pads = [pad] * nd
            stride_conv = stride
        if any(pads):
            padded_shape = src.shape[:2] + tuple(d + 2 * p for d, p in zip(src.shape[2:], pads))
            pv = self._new(padded_shape)
            lows = ", ".join(["0", "0"] + [str(p) for p in pads])
            zero = f"%pz{len(self.lines)}"
            self.lines.append(
                f"{pv.ref} = tensor.pad {src.ref} low[{lows}] high[{lows}] {{\n  ^bb0("
                + ", ".join(f"%i{i}: index" for i in range(nd + 2))
                + f"):\n    {zero} = arith.constant 0.0 : f32\n    tensor.yield {zero} : f32\n  }} : "
                f'{src.type} to {pv.type} loc("{self._remember(self._loc("pad", True))}")'
            )
            self.refs[pv.id] = ("pad", src.id, tuple(pads))
            self.loc_of[pv.id] = self._last_loc
            src = pv
        sizes = tuple((d - dilation * (kk - 1) - 1) // stride_conv + 1 for d, kk in zip(src.shape[2:], kernel))
        n = x.shape[0]
        loc = self._loc("conv")
        attrs = (
            f"{{dilations = dense<{dilation}> : tensor<{nd}xi64>, strides = dense<{stride_conv}> : tensor<{nd}xi64>}}"
        )
        lhs_fact = x
        if depthwise:
            out = self._new((n, c) + sizes)
            kind = "depthwise_conv_2d_nchw_chw"
            self._conv_op(out, kind, attrs, src, wv, loc)
            self.refs[out.id] = ("conv", src.id, wv.id, stride_conv, dilation, c, True)
            flops = 2 * n * c * int(np.prod(sizes)) * int(np.prod(kernel))
            channels = (("lhs", (1,)), ("out", (1,)), ("rhs", (0,)))
        elif groups > 1:
            g = groups
            xs = self.reshape(src, (n, g, c // g) + src.shape[2:], [[0], [1, 2], [3], [4]])
            ws = self.reshape(wv, (g, f // g, cg) + kernel, [[0, 1], [2], [3], [4]])
            # fgchw wants [F/G, G, C/G, kh, kw]
            wsp = self.transpose(ws, (1, 0, 2, 3, 4), aux=True)
            og = self._new((n, g, f // g) + sizes)
            kind = "conv_2d_ngchw_fgchw"
            self._conv_op(og, kind, attrs, xs, wsp, loc)
            self.refs[og.id] = ("conv_grouped", src.id, wv.id, stride_conv, dilation, g)
            out = self.reshape(og, (n, f) + sizes, [[0], [1, 2], [3], [4]])
            flops = 2 * n * f * int(np.prod(sizes)) * cg * int(np.prod(kernel))
            channels = (("lhs", (1,)), ("out", (1, 2)), ("rhs", (0, 1)))
            self._site(loc, kind, flops, lhs_fact, wsp, og, channels, k=((1,), (2, 3, 4)))
            self._step()
            return out
        else:
            out = self._new((n, f) + sizes)
            kind = "conv_1d_ncw_fcw" if nd == 1 else "conv_2d_nchw_fchw"
            self._conv_op(out, kind, attrs, src, wv, loc)
            self.refs[out.id] = ("conv", src.id, wv.id, stride_conv, dilation, 1, False)
            flops = 2 * n * f * int(np.prod(sizes)) * cg * int(np.prod(kernel))
            channels = (("lhs", (1,)), ("out", (1,)), ("rhs", (0,)))
        if spread:  # a transposed convolution that neither strides nor pads is a plain one in the IR
            kind = kind.replace("conv_", "conv_transpose_", 1)
            flops = (
                2 * n * int(np.prod(x.shape[2:])) * f * c * int(np.prod(kernel))
            )  # torch's count: one row per input pixel
        window = tuple(range(1, 1 + nd)) if depthwise else tuple(range(1, 2 + nd))
        self._site(loc, kind, flops, lhs_fact, wv, out, channels, k=((1,), window))
        self._step()
        return out

    def _conv_op(self, out: Value, kind: str, attrs: str, x: Value, w: Value, loc: str) -> None:
        self.loc_of[out.id] = loc
        init = self._zeros(out.shape)
        self.lines.append(
            f"{out.ref} = linalg.{kind} {attrs} ins({x.ref}, {w.ref} : {x.type}, {w.type}) "
            f'outs({init} : {out.type}) -> {out.type} loc("{loc}")'
        )

    def topk(self, x: Value, k: int) -> tuple[Value, Value]:
        """`iree_linalg_ext.topk` over the last axis: values and i32 indices (the largest first). Its
        outs are the running top-k it merges into (as torch-mlir writes it: -inf and 0)."""
        shape = x.shape[:-1] + (k,)
        vals, idx = self._new(shape), self._new(shape, "i32")
        ev, ei = self._fill(shape, float("-inf")), self._zeros(shape, "i32")  # topk merges into its outs
        loc = self._loc("topk")
        self.lines.append(
            f"{vals.ref}, {idx.ref} = iree_linalg_ext.topk dimension({len(x.shape) - 1}) ins({x.ref} : {x.type}) "
            f"outs({ev}, {ei} : {vals.type}, {idx.type}) {{\n  ^bb0(%ta: f32, %tb: f32):\n"
            f"    %tc = arith.cmpf ogt, %ta, %tb : f32\n    iree_linalg_ext.yield %tc : i1\n  }} -> "
            f'{vals.type}, {idx.type} loc("{loc}")'
        )
        self.loc_of[vals.id] = loc
        self.expose_suffix[idx.id] = (loc, ":1")  # the op's second result
        self.refs[vals.id] = ("topk_values", x.id, k)
        self.refs[idx.id] = ("topk_indices", x.id, k)
        self.routes[loc] = idx.id
        self.expected.routing += 1
        self._step()
        return vals, idx

    def sort_topk(self, x: Value, k: int) -> tuple[Value, Value]:
        """The top-k as the Mixtral import writes it: an `iree_linalg_ext.sort` of `x` with an iota of
        i32 indices along the last axis (largest first), then the first k of each (`tensor.extract_slice`)."""
        rank = len(x.shape)
        full, shape = ttype(x.shape, "i32"), x.shape[:-1] + (k,)
        iota, sv, si = (f"%s{len(self.lines)}_{s}" for s in ("iota", "v", "i"))
        loc = self._loc("topk")
        ident = affine(rank, [f"d{j}" for j in range(rank)])
        parallel = ", ".join(['"parallel"'] * rank)
        self.lines.append(f"{iota}_e = tensor.empty() : {full}")
        self.lines.append(
            f"{iota} = linalg.generic {{indexing_maps = [{ident}], iterator_types = [{parallel}]}} "
            f"outs({iota}_e : {full}) {{\n  ^bb0(%o: i32):\n    %ix = linalg.index {rank - 1} : index\n"
            f"    %ic = arith.index_cast %ix : index to i32\n    linalg.yield %ic : i32\n"
            f'  }} -> {full} loc("{loc}.aux_iota")'
        )
        self.lines.append(
            f"{sv}, {si} = iree_linalg_ext.sort dimension({rank - 1}) outs({x.ref}, {iota} : {x.type}, {full}) {{\n"
            f"  ^bb0(%sa: f32, %sb: f32, %sc: i32, %sd: i32):\n    %sp = arith.cmpf ogt, %sa, %sb : f32\n"
            f'    iree_linalg_ext.yield %sp : i1\n  }} -> {x.type}, {full} loc("{loc}.aux_sort")'
        )
        vals, idx = self._new(shape), self._new(shape, "i32")
        offs, sizes, ones = ", ".join(["0"] * rank), ", ".join(map(str, shape)), ", ".join(["1"] * rank)
        self.lines.append(
            f'{vals.ref} = tensor.extract_slice {sv}[{offs}] [{sizes}] [{ones}] : {x.type} to {vals.type} loc("{loc}")'
        )
        self.lines.append(
            f"{idx.ref} = tensor.extract_slice {si}[{offs}] [{sizes}] [{ones}] : {full} to {idx.type} "
            f'loc("{loc}.aux_idx")'
        )
        self.loc_of[vals.id] = loc
        self.loc_of[idx.id] = f"{loc}.aux_idx"
        self.refs[vals.id] = ("topk_values", x.id, k)
        self.refs[idx.id] = ("topk_indices", x.id, k)
        self.routes[f"{loc}.aux_sort"] = idx.id
        self.expected.routing += 1
        self._step()
        return vals, idx

    def broadcast_lead(self, x: Value, n: int) -> Value:
        """x [..] -> [n, ..] (a token batch given to every expert)."""
        rank = len(x.shape) + 1
        return self.generic(
            [x],
            (n,) + x.shape,
            [affine(rank, [f"d{i}" for i in range(1, rank)]), affine(rank, [f"d{i}" for i in range(rank)])],
            ["parallel"] * rank,
            [],
            "bcast",
            ref=("bcast", x.id, n),
            aux=True,
        )

    def combine_weights(self, vals: Value, idx: Value, experts: int) -> Value:
        """[T, E] routing weights from a top-k: entry (t, e) the value whose index is e (0 elsewhere)."""
        t, k = vals.shape
        v = self.generic(
            [vals, idx],
            (t, experts),
            [affine(3, ["d0", "d2"]), affine(3, ["d0", "d2"]), affine(3, ["d0", "d1"])],
            ["parallel", "parallel", "reduction"],
            [
                "%ei = linalg.index 1 : index",
                "%ii = arith.index_cast %a1 : i32 to index",
                "%eq = arith.cmpi eq, %ii, %ei : index",
                "%k0 = arith.constant 0.0 : f32",
                "%sel = arith.select %eq, %a0, %k0 : f32",
                "%r = arith.addf %acc, %sel : f32",
            ],
            "combine",
            init=self._zeros((t, experts)),
            ref=("combine", vals.id, idx.id, experts),
        )
        self._step()
        return v

    # -- the function ---------------------------------------------------------------------
    def output(self, *vs: Value) -> None:
        self.outputs.extend(vs)

    def emit_body(self) -> str:
        return "\n    ".join(self.lines)

    def evaluate(self, inputs: list[np.ndarray]) -> dict[int, np.ndarray]:
        """Every value of the program in numpy (float64 for floats, half types rounded where cast)."""
        vals: dict[int, np.ndarray] = {}
        for v in self.values:
            vals[v.id] = _compute(self.refs[v.id], vals, inputs)
        return vals

    def inputs(self, seed: int) -> list[np.ndarray]:
        rng = np.random.default_rng(seed)
        return [rng.standard_normal(a.shape).astype(NP[a.dtype]) for a in self.args]


def _compute(ref, vals: dict, inputs: list[np.ndarray]) -> np.ndarray:
    kind = ref[0]
    f64 = np.float64
    if kind == "arg":
        a = inputs[ref[1]]
        return a.astype(f64) if a.dtype.kind == "f" or a.dtype == ml_dtypes.bfloat16 else a
    if kind == "const":
        a = ref[1]
        return a if a.dtype.kind in "iu" else a.astype(f64)
    if kind == "map":
        return ref[1](*(vals[i] for i in ref[2])).astype(f64)
    if kind == "fn":  # a rewrite's transform of one value (tests/generated_checks.py)
        return np.asarray(ref[1](vals[ref[2]]), f64)
    if kind == "dequant":
        return vals[ref[1]].astype(f64) * vals[ref[2]][:, None]
    if kind == "reduce":
        return ref[1](vals[ref[2]], axis=ref[3])
    if kind == "div_last":
        return vals[ref[1]] / vals[ref[2]][..., None]
    if kind == "exp_sub_last":
        return np.exp(vals[ref[1]] - vals[ref[2]][..., None])
    if kind == "rmsnorm":
        x, ss, g, d, eps = vals[ref[1]], vals[ref[2]], vals[ref[3]], ref[4], ref[5]
        return x / np.sqrt(ss[..., None] / d + eps) * g
    if kind == "transpose":
        return np.transpose(vals[ref[1]], ref[2])
    if kind == "reshape":
        return vals[ref[1]].reshape(ref[2])
    if kind == "einsum":
        return np.einsum(ref[1], *(vals[i].astype(f64) for i in ref[2]))
    if kind == "slice":
        return np.take(vals[ref[1]], range(ref[3], ref[3] + ref[4]), axis=ref[2])
    if kind == "repeat":
        x = vals[ref[1]]
        return np.broadcast_to(x[:, None], (x.shape[0], ref[2]) + x.shape[1:]).copy()
    if kind == "bcast":
        x = vals[ref[1]]
        return np.broadcast_to(x, (ref[2],) + x.shape).copy()
    if kind == "combine":
        v, i, e = vals[ref[1]], vals[ref[2]], ref[3]
        out = np.zeros((v.shape[0], e))
        for j in range(v.shape[1]):
            out[np.arange(v.shape[0]), i[:, j]] += v[:, j]
        return out
    if kind == "pad":
        pads = ((0, 0), (0, 0)) + tuple((p, p) for p in ref[2])
        return np.pad(vals[ref[1]], pads)
    if kind == "spread":
        x, s, q = vals[ref[1]], ref[2], ref[3]
        out = np.zeros(x.shape[:2] + tuple((d - 1) * s + 1 + 2 * qq for d, qq in zip(x.shape[2:], q)))
        out[(slice(None), slice(None)) + tuple(slice(qq, qq + (d - 1) * s + 1, s) for d, qq in zip(x.shape[2:], q))] = x
        return out
    if kind == "conv":
        return _conv_ref(vals[ref[1]], vals[ref[2]], ref[3], ref[4], ref[6])
    if kind == "conv_grouped":
        x, w, s, d, g = vals[ref[1]], vals[ref[2]], ref[3], ref[4], ref[5]
        c, f = x.shape[1] // g, w.shape[0] // g
        outs = [_conv_ref(x[:, i * c : (i + 1) * c], w[i * f : (i + 1) * f], s, d, False) for i in range(g)]
        y = np.concatenate(outs, axis=1)
        return y.reshape((y.shape[0], g, f) + y.shape[2:])
    if kind in ("topk_values", "topk_indices"):
        x, k = vals[ref[1]], ref[2]
        order = np.argsort(-x, axis=-1, kind="stable")[..., :k]
        return np.take_along_axis(x, order, -1) if kind == "topk_values" else order.astype(np.int32)
    raise ValueError(f"no reference for {kind}")


def _conv_ref(x: np.ndarray, w: np.ndarray, stride: int, dilation: int, depthwise: bool) -> np.ndarray:
    """Cross-correlation of an already padded NC(H)(W) `x` with `w` ([F, C, k..] or depthwise [C, k..])."""
    nd = x.ndim - 2
    kernel = w.shape[1:] if depthwise else w.shape[2:]
    out_sp = tuple((d - dilation * (k - 1) - 1) // stride + 1 for d, k in zip(x.shape[2:], kernel))
    chans = x.shape[1] if depthwise else w.shape[0]
    y = np.zeros((x.shape[0], chans) + out_sp)
    for off in np.ndindex(*kernel):
        sl = tuple(slice(o * dilation, o * dilation + (n - 1) * stride + 1, stride) for o, n in zip(off, out_sp))
        patch = x[(slice(None), slice(None)) + sl]  # [N, C, out..]
        if depthwise:
            y += patch * w[(slice(None),) + off].reshape((1, -1) + (1,) * nd)
        else:
            y += np.einsum("nc...,fc->nf...", patch, w[(slice(None), slice(None)) + off])
    return y


# -- the families a model is drawn from -----------------------------------------------------
SMALL = st.sampled_from([1, 2, 3, 4, 5, 7, 8])
WIDTH = st.sampled_from([1, 2, 3, 4, 7, 8, 12, 16, 31])
ROWS = st.sampled_from([1, 2, 3, 5, 8, 13])


@st.composite
def mlp(draw) -> Program:
    """Linear layers (plain, transposed or generic weights; f32, f16, bf16 or int8), activations,
    RMS norms, SwiGLU gating, residual adds; sometimes one row with K much larger than M, or
    activations in bf16 feeding a bf16 matmul that accumulates in f32."""
    p = Program("@@", draw(st.integers(0, 2**16)))
    m = draw(ROWS)
    d = draw(st.sampled_from([128, 509])) if m == 1 and draw(st.booleans()) else draw(WIDTH)
    x = p.arg((m, d))
    for _ in range(draw(st.integers(1, 3))):
        layer = draw(st.sampled_from(["linear", "residual", "swiglu", "norm", "bf16"]))
        form = draw(st.sampled_from(["plain", "transposed", "generic", "lhs"]))
        wdtype = draw(st.sampled_from(["f32", "f32", "f16", "bf16", "i8"]))
        dead = draw(st.sampled_from([0, 0, 1, 2]))
        if layer == "linear":
            x = p.linear(x, draw(WIDTH), form=form, wdtype=wdtype, bias=draw(st.booleans()), zero_rows=dead)
            act = draw(st.sampled_from(["", "relu", "tanh", "silu", "sigmoid"]))
            x = p.unary(x, act) if act else x
        elif layer == "residual":
            h = p.unary(p.linear(x, draw(WIDTH), form=form, wdtype=wdtype, zero_rows=dead), "relu")
            x = p.add(x, p.linear(h, x.shape[-1], form=form), residual=True)
        elif layer == "swiglu":
            f = draw(WIDTH)
            g = p.mul(p.unary(p.linear(x, f, form=form), "silu"), p.linear(x, f, form=form, wdtype=wdtype))
            x = p.add(x, p.linear(g, x.shape[-1], form=form), residual=True)
        elif layer == "norm":
            x = p.rmsnorm(x)
        else:
            xb = p.cast(x, "bf16")
            w = p.weight((x.shape[-1], draw(WIDTH)))
            x = p.matmul(xb, p.const(w, "bf16"))
    p.output(x)
    return p


@st.composite
def attention(draw) -> Program:
    """One pre-norm attention block: split or fused QKV, heads split by reshape and transpose,
    GQA's repeated KV heads, q·kᵀ scaled, a causal or padded mask, softmax, the output
    projection and the residual add."""
    p = Program("@@", draw(st.integers(0, 2**16)))
    s = draw(st.sampled_from([1, 2, 3, 5, 8]))
    kvh = draw(st.sampled_from([1, 2]))
    h = kvh * draw(st.sampled_from([1, 2]))
    dh = draw(st.sampled_from([1, 2, 4, 8]))
    d = h * dh
    x = p.arg((s, d))
    xn = p.rmsnorm(x) if draw(st.booleans()) else x
    if draw(st.booleans()):
        qkv = p.linear(xn, (h + 2 * kvh) * dh, form=draw(st.sampled_from(["plain", "transposed"])))
        q, k, v = (p.slice(qkv, 1, a, b) for a, b in ((0, h * dh), (h * dh, kvh * dh), ((h + kvh) * dh, kvh * dh)))
    else:
        q, k, v = (p.linear(xn, n * dh) for n in (h, kvh, kvh))

    def heads(t: Value, n: int) -> Value:
        return p.transpose(p.reshape(t, (s, n, dh), [[0], [1, 2]]), (1, 0, 2))

    q, k, v = heads(q, h), heads(k, kvh), heads(v, kvh)
    if kvh < h:
        k, v = p.repeat_heads(k, h // kvh), p.repeat_heads(v, h // kvh)
    scores = p.scale(p.batch_matmul(q, p.transpose(k, (0, 2, 1))), 1.0 / math.sqrt(dh))
    mask = draw(st.sampled_from(["", "causal", "padded"]))
    if mask == "causal" or (mask == "padded" and s > 1):
        scores = p.mask(scores, mask, padded=draw(st.integers(1, max(1, s - 1))))
    p.expected.attention += 1
    o = p.batch_matmul(p.softmax(scores), v)
    o = p.reshape(p.transpose(o, (1, 0, 2)), (s, d), [[0], [1, 2]])
    p.output(p.add(x, p.linear(o, d), residual=True))
    return p


@st.composite
def moe(draw) -> Program:
    """A mixture of experts: a router's softmax, its top-k (`iree_linalg_ext.topk`, or a sort and a
    slice as the Mixtral import writes it), every expert run batched over the tokens (as
    `experts_implementation="batched_mm"` exports), combined by the routing weights."""
    p = Program("@@", draw(st.integers(0, 2**16)))
    t, d = draw(ROWS), draw(WIDTH)
    e = draw(st.sampled_from([2, 3, 4, 8]))
    k = draw(st.integers(1, min(2, e)))
    f = draw(WIDTH)
    x = p.arg((t, d))
    gates = p.softmax(p.linear(x, e))
    p.expected.gates += 1
    # a sort's first k of E (k = E would be the whole sort, its slice folded away: no top-k to find)
    vals, idx = (p.sort_topk if k < e and draw(st.booleans()) else p.topk)(gates, k)
    weights = p.combine_weights(vals, idx, e)
    y = p.unary(p.batch_matmul(p.broadcast_lead(x, e), p.const(p.weight((e, d, f))), weight=True), "relu")
    out = p.einsum(weights, y, "te,etf->tf", {"t": t, "e": e, "f": f}, weight=False)
    p.output(out)
    return p


@st.composite
def conv(draw) -> Program:
    """1-D or 2-D convolutions: strided, dilated, padded, depthwise, grouped, transposed; ReLU,
    residual adds where the shape is kept, dead output channels."""
    p = Program("@@", draw(st.integers(0, 2**16)))
    nd = draw(st.sampled_from([1, 2, 2]))
    n, c = draw(st.sampled_from([1, 2])), draw(st.sampled_from([1, 2, 3, 4, 6]))
    spatial = tuple(draw(st.integers(1, 9)) for _ in range(nd))
    x = p.arg((n, c) + spatial)
    for _ in range(draw(st.integers(1, 3))):
        kind = draw(
            st.sampled_from(
                ["plain", "plain", "depthwise", "grouped", "transposed"] if nd == 2 else ["plain", "transposed"]
            )
        )
        c = x.shape[1]
        kk = tuple(draw(st.sampled_from([1, 2, 3])) for _ in range(nd))
        dil, stride = draw(st.sampled_from([1, 1, 2])), draw(st.sampled_from([1, 1, 2, 3]))
        dead = draw(st.sampled_from([0, 0, 1]))
        if kind == "transposed":
            room = min((d - 1) * stride + dil * (k_ - 1) for d, k_ in zip(x.shape[2:], kk)) // 2  # output >= 1
            pad = draw(st.integers(0, min(dil * (min(kk) - 1), room)))
            x = p.conv(x, draw(st.sampled_from([1, 2, 4])), kk, stride=stride, dilation=dil, pad=pad, transposed=True)
        else:
            pad = draw(st.integers(0, 2))
            span = [d + 2 * pad - dil * (kk_ - 1) for d, kk_ in zip(x.shape[2:], kk)]
            if min(span) < 1:
                continue  # the kernel does not fit: no layer
            groups = 1
            if kind == "grouped":
                groups = draw(st.sampled_from([g for g in (2, 3) if c % g == 0] or [1]))
                if groups == 1:
                    kind = "plain"
            f = c if kind == "depthwise" else groups * draw(st.sampled_from([1, 2, 3]))
            keep = kind != "depthwise" and stride == 1 and all(2 * pad == dil * (kk_ - 1) for kk_ in kk) and f == c
            y = p.conv(
                x,
                f,
                kk,
                stride=stride,
                dilation=dil,
                pad=pad,
                groups=groups,
                depthwise=kind == "depthwise",
                zero_rows=dead if kind == "plain" else 0,
            )
            y = p.unary(y, "relu") if draw(st.booleans()) else y
            x = p.add(x, y, residual=True) if keep and draw(st.booleans()) else y
    p.output(x)
    return p


@st.composite
def einsum(draw) -> Program:
    """A contraction `linalg.generic` with arbitrary index maps: batch, free and contracted letters,
    each operand's letters in any order, the weight a constant or an input, on either side."""
    p = Program("@@", draw(st.integers(0, 2**16)))
    letters = iter("abcdefgh")
    groups = {
        g: [next(letters) for _ in range(draw(st.integers(lo, 2)))]
        for g, lo in (("batch", 0), ("m", 1), ("n", 0), ("k", 1))
    }
    sizes = {c: draw(SMALL) for g in groups.values() for c in g}
    lhs = draw(st.permutations(groups["batch"] + groups["m"] + groups["k"]))
    rhs = draw(st.permutations(groups["batch"] + groups["k"] + groups["n"]))
    out = draw(st.permutations(groups["batch"] + groups["m"] + groups["n"]))
    x = p.arg(tuple(sizes[c] for c in lhs))
    weight = draw(st.booleans())
    rshape = tuple(sizes[c] for c in rhs)
    w = p.const(p.weight(rshape)) if weight else p.arg(rshape)
    ls, rs, os_ = "".join(lhs), "".join(rhs), "".join(out)
    if weight and draw(st.booleans()):  # the weight first: W ×_K x
        p.output(p.einsum(w, x, f"{rs},{ls}->{os_}", sizes, weight=False, weight_lhs=True))
    else:
        p.output(p.einsum(x, w, f"{ls},{rs}->{os_}", sizes, weight=weight))
    return p


@contextmanager
def seed_only():
    """Draws that depend on hypothesis's seed alone. Hypothesis (6.131+) also draws literals it finds
    in the local modules loaded (`providers._get_local_constants`: every module outside site-packages
    and the stdlib in `sys.modules`), so the same seed drew other models once `opscope` was imported:
    a long run's later chunks, and a CI slice drawn after other tests, replayed alone as other
    models (found replaying the long run's chunk 11). Here that pool is empty, whatever is loaded."""
    try:
        from hypothesis.internal.conjecture import providers

        saved, cache = providers._get_local_constants, providers.CONSTANTS_CACHE
    except (ImportError, AttributeError):  # a hypothesis without the feature: nothing to pin
        yield
        return
    empty = providers.Constants()
    providers._get_local_constants = lambda: empty
    cache.cache.clear()
    try:
        yield
    finally:
        providers._get_local_constants = saved
        cache.cache.clear()


FAMILIES = {"mlp": mlp(), "attention": attention(), "moe": moe(), "conv": conv(), "einsum": einsum()}


def models(families: tuple[str, ...] = tuple(sorted(FAMILIES))) -> st.SearchStrategy[Program]:
    """One model from any of `families` (its `family` set)."""
    return st.one_of(*(FAMILIES[f].map(lambda p, f=f: _named(p, f)) for f in families))


def _named(p: Program, family: str) -> Program:
    p.family = family
    return p


class Batch:
    """Programs side by side in one function `@main` (each its own arguments and results, names
    prefixed `m<i>.`): one compile checks many models, and a rewrite of one model must leave the
    others bit-identical."""

    def __init__(self, programs: list[Program]):
        self.programs = programs
        self.tags = [f"m{i}" for i in range(len(programs))]

    def module(self) -> str:
        args, rets, rtypes, body = [], [], [], []
        for tag, p in zip(self.tags, self.programs):
            text = _OUTER.sub(lambda m, tag=tag: f"%{tag}_{m.group(1)}", p.emit_body()).replace("@@", tag)
            args += [f"%{tag}_v{a.id}: {a.type}" for a in p.args]
            rets += [f"%{tag}_v{o.id}" for o in p.outputs]
            rtypes += [o.type for o in p.outputs]
            body.append(text)
        return (
            f"func.func @main({', '.join(args)}) -> ({', '.join(rtypes)}) {{\n    "
            + "\n    ".join(body)
            + f"\n    return {', '.join(rets)} : {', '.join(rtypes)}\n}}\n"
        )

    def inputs(self, seed: int) -> list[np.ndarray]:
        return [a for i, p in enumerate(self.programs) for a in p.inputs(seed + i)]

    def split(self, flat: list, per: str = "args") -> list[list]:
        """`flat` (the function's arguments or results) cut into each program's."""
        out, i = [], 0
        for p in self.programs:
            n = len(p.args if per == "args" else p.outputs)
            out.append(flat[i : i + n])
            i += n
        return out

    def sites(self) -> dict[str, tuple[int, SiteFact]]:
        """Every expected site by its name in the module: (program index, fact)."""
        return {
            f.name.replace("@@", tag): (i, f)
            for i, (tag, p) in enumerate(zip(self.tags, self.programs))
            for f in p.expected.sites
        }


_OUTER = re.compile(r"%(v\d+|z\d+_[ezf]|e\d+|c\d+_[cef]|pz\d+|s\d+_(?:iota_e|iota|v|i))\b")
