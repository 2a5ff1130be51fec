"""How inference-dynamics statistics are computed: one small kernel per tapped tensor.

* attention (`attn_qmax`, `attn_krecv`, `attn_entropy`) of probabilities `[..., S_q, S_k]`,
  viewed as `[G, S_q, S_k]` (G: the leading dims, 1 for rank 2): per query the peak
  probability (max over the last axis, G·S_q values), per key the mass it receives (sum
  over the queries, G·S_k values), per query the entropy −Σ p·ln p (0·ln 0 = 0; G·S_q values)
  and, for a router's softmax, per token the second-largest probability (`gate_top2`: the
  top-1/top-2 gate ratio is qmax / top2);
* routing (`route_load`) of chosen expert indices (any integer type and shape): E counts,
  bin e counting the indices equal to e (others are not counted);
* residual (`res_a_sumsq`, `res_b_sumsq`, `res_cos`) of a residual add's two inputs, the
  stream h and the block's output d, viewed as rows `[R, D]` (one row per token): Σh², Σd²
  and the mean over rows of cos(h, h + d) = h·(h+d) / (‖h‖·‖h+d‖ + 1e-12), so block
  influence is 1 − res_cos (ShortGPT's BI) and the reference's gap is √(min/max) of the sums.

Everything is f32 (f16/bf16 inputs are extended); results are packed into one 1-D f32
tensor in the order the statistics are listed (`DynamicsKernel.offsets`), or one result
per statistic.
"""

from __future__ import annotations

from dataclasses import dataclass
from math import prod

ATTN_KINDS = ("attn_qmax", "attn_krecv", "attn_entropy", "gate_top2")
ROUTE_KINDS = ("route_load",)
RESIDUAL_KINDS = ("res_a_sumsq", "res_b_sumsq", "res_cos")
DYNAMICS_KINDS = ATTN_KINDS + ROUTE_KINDS + RESIDUAL_KINDS
PAIR_KINDS = RESIDUAL_KINDS  # statistics of two tensors (the stream and the block's output)
COS_EPS = 1e-12
NEG_INF, ZERO, ONE = "0xFF800000", "0.000000e+00", "1.000000e+00"


def _t(shape: tuple[int, ...], elem: str = "f32") -> str:
    return "tensor<" + "".join(f"{d}x" for d in shape) + elem + ">"


@dataclass(frozen=True)
class DynamicsKernel:
    """The kernel of one tapped tensor (two for residual statistics) and its statistics."""

    shape: tuple[int, ...]
    elem: str
    kinds: tuple[str, ...]
    experts: int = 0  # route_load's bins

    @property
    def family(self) -> str:
        first = self.kinds[0]
        return "attn" if first in ATTN_KINDS else "route" if first in ROUTE_KINDS else "residual"

    def check(self) -> str | None:
        """Why this kernel cannot be built, or None."""
        families = {("attn" if k in ATTN_KINDS else "route" if k in ROUTE_KINDS else "residual") for k in self.kinds}
        if len(families) != 1:
            return f"statistics of different families on one tensor: {list(self.kinds)}"
        if self.family == "attn" and len(self.shape) < 2:
            return f"attention statistics need probabilities of rank >= 2, got {self.shape}"
        if self.family == "route" and self.experts <= 0:
            return "route_load needs experts > 0"
        if self.family == "residual" and not self.shape:
            return "residual statistics need a tensor of rank >= 1"
        return None

    # -- sizes -----------------------------------------------------------------------------
    @property
    def groups(self) -> tuple[int, int, int]:
        """(G, S_q, S_k) of attention probabilities."""
        s = self.shape
        return (prod(s[:-2]) if len(s) > 2 else 1), s[-2], s[-1]

    @property
    def rows(self) -> tuple[int, int]:
        """(R, D) of a residual tensor."""
        return (prod(self.shape[:-1]) if len(self.shape) > 1 else 1), self.shape[-1]

    def length(self, kind: str) -> int:
        """f32 elements of one statistic."""
        if kind in ATTN_KINDS:
            g, q, k = self.groups
            return g * k if kind == "attn_krecv" else g * q
        if kind == "route_load":
            return self.experts
        return 1

    @property
    def numel(self) -> int:
        return prod(self.shape)

    def offsets(self) -> list[int]:
        """Where each statistic starts in the packed result."""
        out, at = [], 0
        for kind in self.kinds:
            out.append(at)
            at += self.length(kind)
        return out

    @property
    def total(self) -> int:
        return sum(self.length(k) for k in self.kinds)

    # -- the function ------------------------------------------------------------------------
    def function(self, name: str, pack: bool = True, noinline: bool = True) -> str:
        """The kernel as a private `func.func` named `name` (its arguments: the tensor, or the
        stream and the block's output)."""
        problem = self.check()
        if problem:
            raise ValueError(problem)
        em = _Emit()
        args = ["%x0"] + (["%x1"] if self.family == "residual" else [])
        pieces = {"attn": self._attn, "route": self._route, "residual": self._residual}[self.family](em, args)
        outs: list[tuple[str, str]] = []
        if pack:
            res_ty = _t((self.total,))
            acc = em.line("tensor.empty() : " + res_ty, "packed")
            for kind, off in zip(self.kinds, self.offsets()):
                n = self.length(kind)
                acc = em.line(
                    f"tensor.insert_slice {pieces[kind]} into {acc}[{off}] [{n}] [1] : {_t((n,))} into {res_ty}",
                    "packed",
                )
            outs.append((acc, res_ty))
        else:
            outs = [(pieces[k], _t((self.length(k),))) for k in self.kinds]
        in_ty = _t(self.shape, self.elem)
        params = ", ".join(f"{a}: {in_ty}" for a in args)
        res_tys = ", ".join(t for _, t in outs)
        attrs = " attributes {noinline}" if noinline else ""
        return "\n".join(
            [
                f"func.func private @{name}({params}) -> ({res_tys}){attrs} {{",
                *em.lines,
                f"  return {', '.join(v for v, _ in outs)} : {res_tys}",
                "}",
            ]
        )

    def _attn(self, em: _Emit, args: list[str]) -> dict[str, str]:
        g, q, k = self.groups
        src, view_ty = _t(self.shape, self.elem), _t((g, q, k), self.elem)
        rank = len(self.shape)
        if rank == 2:
            p = em.line(
                f"tensor.expand_shape {args[0]} [[0, 1], [2]] output_shape [1, {q}, {k}] : {src} into {view_ty}", "p"
            )
        elif rank == 3:
            p = args[0]
        else:
            lead = ", ".join(str(i) for i in range(rank - 2))
            p = em.line(
                f"tensor.collapse_shape {args[0]} [[{lead}], [{rank - 2}], [{rank - 1}]] : {src} into {view_ty}", "p"
            )
        out: dict[str, str] = {}
        ext = f"%v = arith.extf %in : {self.elem} to f32" if self.elem != "f32" else None
        v = "%v" if ext else "%in"
        row_kinds = [kd for kd in ("attn_qmax", "gate_top2", "attn_entropy") if kd in self.kinds]
        if row_kinds:  # one pass over each query's row: its max, second largest and entropy
            acc_ty = _t((g, q))
            body_q, yields, inits, names = [], [], [], []
            if "attn_qmax" in self.kinds or "gate_top2" in self.kinds:
                inits.append(em.filled(acc_ty, NEG_INF))
                body_q.append(f"%mx = arith.maximumf {v}, %a0 : f32")
                yields.append("%mx")
                names.append("attn_qmax")
            if "gate_top2" in self.kinds:  # the larger of the old second and min(old max, x)
                inits.append(em.filled(acc_ty, NEG_INF))
                a = f"%a{len(yields)}"
                body_q += [f"%lo = arith.minimumf {v}, %a0 : f32", f"%t2 = arith.maximumf {a}, %lo : f32"]
                yields.append("%t2")
                names.append("gate_top2")
            if "attn_entropy" in self.kinds:
                inits.append(em.filled(acc_ty, ZERO))
                a = f"%a{len(yields)}"
                body_q += [
                    f"%lg = math.log {v} : f32",
                    f"%pl = arith.mulf {v}, %lg : f32",
                    f"%pos = arith.cmpf ogt, {v}, %zero : f32",
                    "%term = arith.select %pos, %pl, %zero : f32",
                    f"%ent = arith.subf {a}, %term : f32",
                ]
                yields.append("%ent")
                names.append("attn_entropy")
            maps = ["affine_map<(d0, d1, d2) -> (d0, d1, d2)>"] + ["affine_map<(d0, d1, d2) -> (d0, d1)>"] * len(inits)
            accs = [f"%a{i}: f32" for i in range(len(inits))]
            res = em.generic(
                maps,
                ["parallel", "parallel", "reduction"],
                [(p, view_ty)],
                [(x, acc_ty) for x in inits],
                f"%in: {self.elem}, " + ", ".join(accs),
                ([ext] if ext else []) + [f"%zero = arith.constant {ZERO} : f32"] + body_q,
                yields,
            )
            for kd, r in zip(names, res):
                if kd in self.kinds:
                    out[kd] = em.flat(r, (g, q))
        if "attn_krecv" in self.kinds:
            acc_ty = _t((g, k))
            init = em.filled(acc_ty, ZERO)
            res = em.generic(
                ["affine_map<(d0, d1, d2) -> (d0, d2, d1)>", "affine_map<(d0, d1, d2) -> (d0, d1)>"],
                ["parallel", "parallel", "reduction"],
                [(p, view_ty)],
                [(init, acc_ty)],
                f"%in: {self.elem}, %a0: f32",
                ([ext] if ext else []) + [f"%s = arith.addf %a0, {v} : f32"],
                ["%s"],
            )
            out["attn_krecv"] = em.flat(res[0], (g, k))
        return out

    def _route(self, em: _Emit, args: list[str]) -> dict[str, str]:
        n, e = self.numel, self.experts
        src = _t(self.shape, self.elem)
        flat_ty = _t((n,), self.elem)
        rank = len(self.shape)
        if rank == 1:
            flat = args[0]
        elif rank == 0:
            flat = em.line(f"tensor.expand_shape {args[0]} [] output_shape [1] : {src} into {flat_ty}", "idx")
        else:
            flat = em.line(
                f"tensor.collapse_shape {args[0]} [[{', '.join(str(i) for i in range(rank))}]] : {src} into {flat_ty}",
                "idx",
            )
        acc_ty = _t((e,))
        init = em.filled(acc_ty, ZERO)
        res = em.generic(
            ["affine_map<(d0, d1) -> (d0)>", "affine_map<(d0, d1) -> (d1)>"],
            ["reduction", "parallel"],
            [(flat, flat_ty)],
            [(init, acc_ty)],
            f"%in: {self.elem}, %a0: f32",
            [
                "%bin = linalg.index 1 : index",
                f"%i = arith.index_cast %in : {self.elem} to index",
                "%hit = arith.cmpi eq, %i, %bin : index",
                f"%one = arith.constant {ONE} : f32",
                "%inc = arith.addf %a0, %one : f32",
                "%c = arith.select %hit, %inc, %a0 : f32",
            ],
            ["%c"],
        )
        return {"route_load": res[0]}

    def _residual(self, em: _Emit, args: list[str]) -> dict[str, str]:
        r, d = self.rows
        src, rows_ty = _t(self.shape, self.elem), _t((r, d), self.elem)
        rank = len(self.shape)
        views = []
        for a in args:
            if rank == 2:
                views.append(a)
            elif rank == 1:
                views.append(
                    em.line(f"tensor.expand_shape {a} [[0, 1]] output_shape [1, {d}] : {src} into {rows_ty}", "h")
                )
            else:
                lead = ", ".join(str(i) for i in range(rank - 1))
                views.append(em.line(f"tensor.collapse_shape {a} [[{lead}], [{rank - 1}]] : {src} into {rows_ty}", "h"))
        row_ty = _t((r,))
        inits = [em.filled(row_ty, ZERO) for _ in range(4)]
        ext = (
            [f"%h = arith.extf %x : {self.elem} to f32", f"%d = arith.extf %y : {self.elem} to f32"]
            if self.elem != "f32"
            else ["%h = arith.addf %x, %zero : f32", "%d = arith.addf %y, %zero : f32"]
        )
        rows = em.generic(
            ["affine_map<(d0, d1) -> (d0, d1)>"] * 2 + ["affine_map<(d0, d1) -> (d0)>"] * 4,
            ["parallel", "reduction"],
            [(views[0], rows_ty), (views[1], rows_ty)],
            [(x, row_ty) for x in inits],
            f"%x: {self.elem}, %y: {self.elem}, %na: f32, %nb: f32, %nh: f32, %dot: f32",
            [
                f"%zero = arith.constant {ZERO} : f32",
                *ext,
                "%o = arith.addf %h, %d : f32",
                "%hh = arith.mulf %h, %h : f32",
                "%dd = arith.mulf %d, %d : f32",
                "%oo = arith.mulf %o, %o : f32",
                "%ho = arith.mulf %h, %o : f32",
                "%na2 = arith.addf %na, %hh : f32",
                "%nb2 = arith.addf %nb, %dd : f32",
                "%nh2 = arith.addf %nh, %oo : f32",
                "%dot2 = arith.addf %dot, %ho : f32",
            ],
            ["%na2", "%nb2", "%nh2", "%dot2"],
        )
        one_ty = _t((1,))
        totals = [em.filled(one_ty, ZERO) for _ in range(3)]
        sums = em.generic(
            ["affine_map<(d0) -> (d0)>"] * 4 + ["affine_map<(d0) -> (0)>"] * 3,
            ["reduction"],
            [(x, row_ty) for x in rows],
            [(x, one_ty) for x in totals],
            "%na: f32, %nb: f32, %nh: f32, %dot: f32, %sa: f32, %sb: f32, %sc: f32",
            [
                "%ra = math.sqrt %na : f32",
                "%rh = math.sqrt %nh : f32",
                "%den0 = arith.mulf %ra, %rh : f32",
                f"%eps = arith.constant {COS_EPS:e} : f32",
                "%den = arith.addf %den0, %eps : f32",
                "%cos = arith.divf %dot, %den : f32",
                "%sa2 = arith.addf %sa, %na : f32",
                "%sb2 = arith.addf %sb, %nb : f32",
                "%sc2 = arith.addf %sc, %cos : f32",
            ],
            ["%sa2", "%sb2", "%sc2"],
        )
        mean = em.generic(
            ["affine_map<(d0) -> (d0)>"] * 2,
            ["parallel"],
            [(sums[2], one_ty)],
            [(em.line("tensor.empty() : " + one_ty, "e"), one_ty)],
            "%s: f32, %o: f32",
            [f"%inv = arith.constant {1.0 / r:e} : f32", "%m = arith.mulf %s, %inv : f32"],
            ["%m"],
        )
        return {"res_a_sumsq": sums[0], "res_b_sumsq": sums[1], "res_cos": mean[0]}


class _Emit:
    """The body lines of one kernel, with fresh SSA names."""

    def __init__(self):
        self.lines: list[str] = []
        self.n = 0

    def line(self, rhs: str, hint: str = "v") -> str:
        self.n += 1
        name = f"%_{hint}{self.n}"
        self.lines.append(f"  {name} = {rhs}")
        return name

    def filled(self, ty: str, value: str) -> str:
        e = self.line(f"tensor.empty() : {ty}", "e")
        c = self.line(f"arith.constant {value} : f32", "c")
        return self.line(f"linalg.fill ins({c} : f32) outs({e} : {ty}) -> {ty}", "init")

    def flat(self, value: str, shape: tuple[int, int]) -> str:
        """A [a, b] f32 tensor as [a·b]."""
        return self.line(
            f"tensor.collapse_shape {value} [[0, 1]] : {_t(shape)} into {_t((shape[0] * shape[1],))}", "flat"
        )

    def generic(
        self,
        maps: list[str],
        iterators: list[str],
        ins: list[tuple[str, str]],
        outs: list[tuple[str, str]],
        args: str,
        body: list[str],
        yields: list[str],
    ) -> list[str]:
        """One `linalg.generic` (its block arguments `args`, its body lines, what it yields)."""
        self.n += 1
        res = f"%_g{self.n}"
        head = f"{res}:{len(outs)}" if len(outs) > 1 else res
        its = ", ".join(f'"{i}"' for i in iterators)
        out_tys = ", ".join(t for _, t in outs)
        self.lines.append(
            f"  {head} = linalg.generic {{indexing_maps = [{', '.join(maps)}], iterator_types = [{its}]}} "
            f"ins({', '.join(v for v, _ in ins)} : {', '.join(t for _, t in ins)}) "
            f"outs({', '.join(v for v, _ in outs)} : {out_tys}) {{"
        )
        self.lines.append(f"  ^bb0({args}):")
        self.lines += [f"    {b}" for b in body]
        self.lines.append(f"    linalg.yield {', '.join(yields)} : {', '.join('f32' for _ in yields)}")
        self.lines.append(f"  }} -> ({out_tys})" if len(outs) > 1 else f"  }} -> {out_tys}")
        return [f"{res}#{i}" for i in range(len(outs))] if len(outs) > 1 else [res]
