"""How inference-dynamics statistics are computed: one small kernel per tapped tensor.

* attention (`attn_qmax`, `attn_krecv`, `attn_entropy`) of probabilities `[..., S_q, S_k]`,
  viewed as `[G, S_q, S_k]` (G: the leading dims, 1 for rank 2): per query the peak
  probability (max over the last axis, G·S_q values), per key the mass it receives (sum
  over the queries, G·S_k values), per query the entropy −Σ p·ln p (0·ln 0 = 0; G·S_q values)
  and, for a router's softmax, per token the second-largest probability (`gate_top2`: the
  top-1/top-2 gate ratio is qmax / top2);
* routing (`route_load`) of chosen expert indices (any integer type and shape): E counts,
  bin e counting the indices equal to e (others are not counted); or of a routing mask
  (`axis` >= 0: any element type, the experts along dim `axis`): bin e counting the nonzero
  entries of slice e (the tokens sent to expert e);
* residual (`res_a_sumsq`, `res_b_sumsq`, `res_cos`) of a residual add's two inputs, the
  stream h and the block's output d, viewed as rows `[R, D]` (one row per token): Σh², Σd²
  and the mean over rows of cos(h, h + d) = h·(h+d) / (‖h‖·‖h+d‖ + 1e-12), so block
  influence is 1 − res_cos (ShortGPT's BI) and the reference's gap is √(min/max) of the sums.

Everything is f32 (f16/bf16 inputs are extended); results are packed into one 1-D f32
tensor in the order the statistics are listed (`DynamicsKernel.offsets`), or one result
per statistic. The text is written by the stats kernels' emitter (`lowering.emitter`).
"""

from __future__ import annotations

from dataclasses import dataclass
from math import prod

from opscope.dialect.lowering.emitter import NEG_INF, ONE, ZERO, Emitter, Operand, affine_map, tensor_type, yield_line

ATTN_KINDS = ("attn_qmax", "attn_krecv", "attn_entropy", "gate_top2")
ROUTE_KINDS = ("route_load",)
RESIDUAL_KINDS = ("res_a_sumsq", "res_b_sumsq", "res_cos")
DYNAMICS_KINDS = ATTN_KINDS + ROUTE_KINDS + RESIDUAL_KINDS
PAIR_KINDS = RESIDUAL_KINDS  # statistics of two tensors (the stream and the block's output)
COS_EPS = 1e-12


@dataclass(frozen=True)
class DynamicsKernel:
    """The kernel of one tapped tensor (two for residual statistics) and its statistics."""

    shape: tuple[int, ...]
    elem: str
    kinds: tuple[str, ...]
    experts: int = 0  # route_load's bins
    axis: int = -1  # route_load of a mask: its experts' dim (-1: the tensor holds expert indices)

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
        if (
            self.family == "route"
            and self.axis >= 0
            and (self.axis >= len(self.shape) or self.shape[self.axis] != self.experts)
        ):
            return f"route_load of a mask needs its dim {self.axis} of size experts = {self.experts}, got {self.shape}"
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
        em = Emitter()
        args = ["%x0"] + (["%x1"] if self.family == "residual" else [])
        pieces = {"attn": self._attn, "route": self._route, "residual": self._residual}[self.family](em, args)
        outs: list[tuple[str, str]] = []
        if pack:
            res_ty = tensor_type((self.total,))
            acc = em.line("tensor.empty() : " + res_ty, "packed")
            for kind, off in zip(self.kinds, self.offsets()):
                n = self.length(kind)
                acc = em.line(
                    f"tensor.insert_slice {pieces[kind]} into {acc}[{off}] [{n}] [1] : {tensor_type((n,))} into {res_ty}",
                    "packed",
                )
            outs.append((acc, res_ty))
        else:
            outs = [(pieces[k], tensor_type((self.length(k),))) for k in self.kinds]
        in_ty = tensor_type(self.shape, self.elem)
        return em.function(name, ", ".join(f"{a}: {in_ty}" for a in args), outs, noinline)

    def _attn(self, em: Emitter, args: list[str]) -> dict[str, str]:
        g, q, k = self.groups
        src, view_ty = tensor_type(self.shape, self.elem), tensor_type((g, q, k), self.elem)
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
            acc_ty = tensor_type((g, q))
            body_q, yields, inits, names = [], [], [], []
            if "attn_qmax" in self.kinds or "gate_top2" in self.kinds:
                inits.append(em.filled((g, q), NEG_INF))
                body_q.append(f"%mx = arith.maximumf {v}, %a0 : f32")
                yields.append("%mx")
                names.append("attn_qmax")
            if "gate_top2" in self.kinds:  # the larger of the old second and min(old max, x)
                inits.append(em.filled((g, q), NEG_INF))
                a = f"%a{len(yields)}"
                body_q += [f"%lo = arith.minimumf {v}, %a0 : f32", f"%t2 = arith.maximumf {a}, %lo : f32"]
                yields.append("%t2")
                names.append("gate_top2")
            if "attn_entropy" in self.kinds:
                inits.append(em.filled((g, q), ZERO))
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
            res = em.generic(
                "g",
                ["parallel", "parallel", "reduction"],
                [Operand(p, view_ty, affine_map(3, "d0, d1, d2"), "%in", self.elem)],
                [Operand(x, acc_ty, affine_map(3, "d0, d1"), f"%a{i}", "f32") for i, x in enumerate(inits)],
                ([ext] if ext else []) + [f"%zero = arith.constant {ZERO} : f32"] + body_q + [yield_line(yields)],
            )
            for kd, r in zip(names, res):
                if kd in self.kinds:
                    out[kd] = em.flat(r, (g, q))
        if "attn_krecv" in self.kinds:
            res = em.generic(
                "g",
                ["parallel", "parallel", "reduction"],
                [Operand(p, view_ty, affine_map(3, "d0, d2, d1"), "%in", self.elem)],
                [Operand(em.filled((g, k), ZERO), tensor_type((g, k)), affine_map(3, "d0, d1"), "%a0", "f32")],
                ([ext] if ext else []) + [f"%s = arith.addf %a0, {v} : f32", yield_line(["%s"])],
            )
            out["attn_krecv"] = em.flat(res[0], (g, k))
        return out

    def _route(self, em: Emitter, args: list[str]) -> dict[str, str]:
        if self.axis >= 0:
            return self._route_mask(em, args)
        n, e = self.numel, self.experts
        src = tensor_type(self.shape, self.elem)
        flat_ty = tensor_type((n,), self.elem)
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
        res = em.generic(
            "g",
            ["reduction", "parallel"],
            [Operand(flat, flat_ty, affine_map(2, "d0"), "%in", self.elem)],
            [Operand(em.filled((e,), ZERO), tensor_type((e,)), affine_map(2, "d1"), "%a0", "f32")],
            [
                "%bin = linalg.index 1 : index",
                f"%i = arith.index_cast %in : {self.elem} to index",
                "%hit = arith.cmpi eq, %i, %bin : index",
                f"%one = arith.constant {ONE} : f32",
                "%inc = arith.addf %a0, %one : f32",
                "%c = arith.select %hit, %inc, %a0 : f32",
                yield_line(["%c"]),
            ],
        )
        return {"route_load": res[0]}

    def _route_mask(self, em: Emitter, args: list[str]) -> dict[str, str]:
        """Per expert the nonzero entries of its slice of the mask (dim `axis`)."""
        rank = len(self.shape)
        dims = ", ".join(f"d{i}" for i in range(rank))
        iters = ["parallel" if i == self.axis else "reduction" for i in range(rank)]
        nonzero = (
            f"%nz = arith.cmpf une, %in, %zero : {self.elem}"
            if self.elem in ("f32", "f16", "bf16", "f64")
            else f"%nz = arith.cmpi ne, %in, %zero : {self.elem}"
        )
        zero = "0.0" if self.elem in ("f32", "f16", "bf16", "f64") else "0"
        res = em.generic(
            "g",
            iters,
            [Operand(args[0], tensor_type(self.shape, self.elem), affine_map(rank, dims), "%in", self.elem)],
            [
                Operand(
                    em.filled((self.experts,), ZERO),
                    tensor_type((self.experts,)),
                    affine_map(rank, f"d{self.axis}"),
                    "%a0",
                    "f32",
                )
            ],
            [
                f"%zero = arith.constant {zero} : {self.elem}",
                nonzero,
                f"%one = arith.constant {ONE} : f32",
                "%inc = arith.addf %a0, %one : f32",
                "%c = arith.select %nz, %inc, %a0 : f32",
                yield_line(["%c"]),
            ],
        )
        return {"route_load": res[0]}

    def _residual(self, em: Emitter, args: list[str]) -> dict[str, str]:
        r, d = self.rows
        src, rows_ty = tensor_type(self.shape, self.elem), tensor_type((r, d), self.elem)
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
        row_ty = tensor_type((r,))
        inits = [em.filled((r,), ZERO) for _ in range(4)]
        ext = (
            [f"%h = arith.extf %x : {self.elem} to f32", f"%d = arith.extf %y : {self.elem} to f32"]
            if self.elem != "f32"
            else ["%h = arith.addf %x, %zero : f32", "%d = arith.addf %y, %zero : f32"]
        )
        rows = em.generic(
            "g",
            ["parallel", "reduction"],
            [Operand(x, rows_ty, affine_map(2, "d0, d1"), a, self.elem) for x, a in zip(views, ("%x", "%y"))],
            [Operand(x, row_ty, affine_map(2, "d0"), a, "f32") for x, a in zip(inits, ("%na", "%nb", "%nh", "%dot"))],
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
                yield_line(["%na2", "%nb2", "%nh2", "%dot2"]),
            ],
        )
        one_ty = tensor_type((1,))
        totals = [em.filled((1,), ZERO) for _ in range(3)]
        sums = em.generic(
            "g",
            ["reduction"],
            [Operand(x, row_ty, affine_map(1, "d0"), a, "f32") for x, a in zip(rows, ("%na", "%nb", "%nh", "%dot"))],
            [Operand(x, one_ty, affine_map(1, "0"), a, "f32") for x, a in zip(totals, ("%sa", "%sb", "%sc"))],
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
                yield_line(["%sa2", "%sb2", "%sc2"]),
            ],
        )
        mean = em.generic(
            "g",
            ["parallel"],
            [Operand(sums[2], one_ty, affine_map(1, "d0"), "%s", "f32")],
            [Operand(em.empty(one_ty), one_ty, affine_map(1, "d0"), "%o", "f32")],
            [f"%inv = arith.constant {1.0 / r:e} : f32", "%m = arith.mulf %s, %inv : f32", yield_line(["%m"])],
        )
        return {"res_a_sumsq": sums[0], "res_b_sumsq": sums[1], "res_cos": mean[0]}
