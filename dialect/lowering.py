"""How opscope statistics are computed: one stats kernel per (tensor type, stat list, count).

`StatsKernel` writes a `func.func` in linalg/tensor/arith/math that takes `count` tensors of
one type and returns all their statistics packed into one 1-D f32 tensor (or one result per
statistic). It is shaped for IREE's dispatch formation:

* Batched: every stage is ONE multi-input, multi-result `linalg.generic` over all `count`
  tensors, so a kernel costs the same number of dispatches whether it sketches one tensor
  or sixteen (dispatches, not arithmetic, dominate small tensors).
* Each tensor is viewed as rows `[R, C]` (leading dims flattened, C = last dim). One
  row-parallel pass computes every plain row partial (min, max, Σx, Σ|x|, Σx², nnz; max|x|
  is max(-min, max)), one tiny generic reduces them (partial-then-final reductions beat reducing straight to
  scalars).
* What needs a global scalar first takes a second pass: kurtosis needs the mean, the
  normalized histogram needs max|x|. The histogram computes one bin index per element,
  then counts them with one counter per (slab, bin, vector lane), so the innermost loop
  is a vector compare and add with no horizontal reduction; counters are i32, or i8 where
  the target counts i8 right (`hist_counts`).
* Scalar post-processing lives in 0-d generics, never in a host-side `tensor.extract`,
  which would cost a device round trip per site.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

EPS_SCALE = 1e-12  # normalized histogram: x / (max|x| + EPS_SCALE)
EPS_RATIO = 1e-20  # kurtosis and chan_outlier denominators
ELEMSIG_MAX = 16  # elemsig length: min(ELEMSIG_MAX, numel) spread elements
# Sample j of elemsig sits (j·ELEMSIG_SKEW) mod floor(n/k) into the j-th of k equal windows
# (the reference takes each window's first element, which for a row-major [R, C] tensor
# with C dividing n/k is column 0 every time: a [CLS] dimension, a border pixel).
ELEMSIG_SKEW = 37

SCALAR_KINDS = ("min", "max", "mean", "l1", "sumsq", "nnz", "kurtosis", "chan_outlier")

# Row partial -> (init value, accumulate expression, final combine op).
_ROW_PARTIALS = {
    "min": ("0x7F800000", "arith.minimumf {v}, {acc} : f32", "arith.minimumf"),
    "max": ("0xFF800000", "arith.maximumf {v}, {acc} : f32", "arith.maximumf"),
    "sum": ("0.000000e+00", "arith.addf {acc}, {v} : f32", "arith.addf"),
    "l1": ("0.000000e+00", "arith.addf {acc}, {abs} : f32", "arith.addf"),
    "sumsq": ("0.000000e+00", "arith.addf {acc}, {sq} : f32", "arith.addf"),
    "nnz": ("0.000000e+00", "arith.addf {acc}, {nz} : f32", "arith.addf"),
}
ZERO = "0.000000e+00"
# `row_lanes=L`: row reductions keep L partials per row, one per vector lane (the row viewed
# as [C/L, L]), and the small final stages sum the lanes. Reducing each row straight to one
# value with several results per generic made IREE 3.13's llvm-cpu code reduce the vector
# horizontally at every step, 2.6x slower (min and max of a 1024x1024 tensor: 614 vs 238
# us; 128x256: 83 vs 30 us). L, else L/2, where a row holds at least two such vectors; other
# widths reduce straight. 0 (the default) reduces straight: on GPUs the lanes only lengthen
# the final sums (lavapipe summed [R, L] partials serially: kurtosis off by 3e-5).
BINDING_BUDGET = 32  # IREE 3.13's runtime limit on buffer bindings per dispatch
# Histogram counting layouts per `hist_counts` choice: (index and count type, lanes, most
# indices per lane), first fit wins. i8 indices and counts fill a 512-bit vector with 64
# lanes and count ~1.6x faster on llvm-cpu (one 1024x1024 tensor: 0.84 vs 1.3-1.5 ms),
# but IREE 3.13's default SPIR-V target miscounts i8 tensors on lavapipe (every element
# in bin 0), so i8 is opt-in per target (`lower-opscope{hist-counts=i8}`;
# `Target.hist_counts`). i32 indices with i8 counts were no faster than i32.
#
# Why an i8 count is exact: lane (s, b, l) of `_hist_lanes` adds 1 for each of the N
# indices n < N of slab s, lane l that equal b, so its true count c is in [0, N] and
# `_hist_layout` keeps N <= 255. `arith.addi` on i8 wraps modulo 2^8, and every partial
# sum is in [0, c], so the bits held are c's own 8-bit pattern (a count of 128..255 reads
# as negative when signed); the slab/lane sum reads them with `arith.uitofp`, unsigned,
# which gives back c exactly. The f32 sum over slabs and lanes then adds integers below
# 2^24 exactly (docs/spine.md, "counts"). Bin indices fit too: -1 .. bins-1 with bins <= 127.
I8_MAX_COUNT = 255  # the most indices one unsigned 8-bit lane may count
HIST_LANES: dict[str, tuple[tuple[str, int, int], ...]] = {
    "i32": (("i32", 16, 512),),
    "i8": (("i8", 64, I8_MAX_COUNT), ("i32", 16, 512)),  # i32 where i8 does not fit
}


def _f32(x: float) -> str:
    """An f32 literal that MLIR prints and parses exactly (hex bit pattern)."""
    return "0x%08X" % struct.unpack("<I", struct.pack("<f", x))[0]


def _tensor(shape: tuple[int, ...], elem: str) -> str:
    return "tensor<" + "".join(f"{d}x" for d in shape) + elem + ">"


def _map(dims: int, results: str) -> str:
    ds = ", ".join(f"d{i}" for i in range(dims))
    return f"affine_map<({ds}) -> ({results})>"


@dataclass(frozen=True)
class StatItem:
    """One requested statistic: kind plus its options (only hist has any)."""

    kind: str
    bins: int = 0
    lo: float = 0.0
    hi: float = 0.0
    normalize: bool = False


@dataclass(frozen=True)
class Operand:
    """One generic operand: SSA value, type, indexing map, block argument name and type."""

    value: str
    type: str
    map: str
    arg: str
    arg_type: str


@dataclass
class _Emitter:
    """Accumulates the lines of one function body with fresh SSA names."""

    lines: list[str] = field(default_factory=list)
    counter: int = 0

    def fresh(self, hint: str) -> str:
        self.counter += 1
        return f"%_{hint}{self.counter}"  # body names never start with "_"

    def emit(self, line: str) -> None:
        self.lines.append("  " + line)

    def filled(self, shape: tuple[int, ...], init: str) -> str:
        ty = _tensor(shape, "f32")
        e, c, f = self.fresh("e"), self.fresh("c"), self.fresh("init")
        self.emit(f"{e} = tensor.empty() : {ty}")
        self.emit(f"{c} = arith.constant {init} : f32")
        self.emit(f"{f} = linalg.fill ins({c} : f32) outs({e} : {ty}) -> {ty}")
        return f

    def empty(self, ty: str) -> str:
        e = self.fresh("e")
        self.emit(f"{e} = tensor.empty() : {ty}")
        return e

    def generic(
        self, hint: str, iterators: list[str], ins: list[Operand], outs: list[Operand], body: list[str]
    ) -> list[str]:
        """One `linalg.generic`; returns the SSA names of its results."""
        res = self.fresh(hint)
        maps = ", ".join(o.map for o in ins + outs)
        its = ", ".join(f'"{i}"' for i in iterators)
        ins_txt = (f"ins({', '.join(o.value for o in ins)} : {', '.join(o.type for o in ins)}) "
                   if ins else "")
        out_tys = ", ".join(o.type for o in outs)
        n = len(outs)
        head = f"{res}:{n}" if n > 1 else res
        self.emit(
            f"{head} = linalg.generic {{indexing_maps = [{maps}], iterator_types = [{its}]}} "
            f"{ins_txt}outs({', '.join(o.value for o in outs)} : {out_tys}) {{"
        )
        self.emit("^bb0(" + ", ".join(f"{o.arg}: {o.arg_type}" for o in ins + outs) + "):")
        for line in body:
            self.emit("  " + line)
        self.emit(f"}} -> ({out_tys})" if n > 1 else f"}} -> {out_tys}")
        return [f"{res}#{i}" for i in range(n)] if n > 1 else [res]


class StatsKernel:
    """The stats kernel for `count` tensors of one type and one ordered list of statistics."""

    def __init__(self, shape: tuple[int, ...], elem: str, items: list[StatItem], count: int = 1,
                 per_dispatch: int = 0, hist_counts: str = "i32", row_lanes: int = 0):
        self.shape = tuple(shape)
        self.elem = elem
        self.items = list(items)
        self.count = count
        self.per_dispatch = per_dispatch  # tensors computed together; 0: as many as the bindings allow
        if hist_counts not in HIST_LANES:
            raise ValueError(f"hist_counts must be one of {', '.join(HIST_LANES)}, got '{hist_counts}'")
        self.hist_counts = hist_counts  # the histogram's lane counts (`HIST_LANES`)
        if row_lanes < 0:
            raise ValueError(f"row_lanes must be >= 0, got {row_lanes}")
        self.lanes_wanted = row_lanes  # lane partials per row of the row reductions (0: straight)
        self.numel = 1
        for d in self.shape:
            self.numel *= d
        self.cols = self.shape[-1] if self.shape else 1
        self.rows = self.numel // self.cols if self.cols else 0
        kinds = [it.kind for it in self.items]
        if len(set(kinds)) != len(kinds):
            raise ValueError(f"duplicate statistics in one kernel: {kinds}")
        if count < 1:
            raise ValueError("a stats kernel needs at least one tensor")

    # -- sizes -----------------------------------------------------------------------------
    def length(self, item: StatItem) -> int:
        """Number of f32 elements `item` occupies for one tensor."""
        if item.kind in SCALAR_KINDS:
            return 1
        return {
            "hist": item.bins,
            "elemsig": min(ELEMSIG_MAX, self.numel),
            "chan_maxabs": self.cols,
            "pos_sumsq": self.rows,
            "adj_sumsq": self.shape[0] - 1 if len(self.shape) == 2 else 0,
        }[item.kind]

    def bindings_per_tensor(self) -> int:
        """The most buffers one tensor adds to any single dispatch of this kernel.

        The row pass reads the tensor and writes its P partials; the last scalar stage reads
        four totals and writes two. (The final reduction of the partials, P in and P out,
        is split into as many generics as the budget needs: see `_final_reduce`.)
        """
        return max(1 + len(self._partials()), 6)

    @property
    def group_size(self) -> int:
        """Tensors whose statistics share each generic (so each dispatch): as many as IREE's
        BINDING_BUDGET allows, or `per_dispatch` if smaller."""
        fits = max(1, BINDING_BUDGET // self.bindings_per_tensor())
        return min(self.per_dispatch, fits) if self.per_dispatch else fits

    def _partials(self) -> list[str]:
        """The row partials the requested statistics need, in a fixed order."""
        kinds = {it.kind for it in self.items}
        if any(it.kind == "hist" and it.normalize for it in self.items):
            kinds = kinds | {"min", "max"}  # max|x| = max(-min, max): no partial of its own
        return [p for p, wanted in (
            ("min", {"min"}), ("max", {"max"}), ("sum", {"mean", "kurtosis"}), ("l1", {"l1"}),
            ("sumsq", {"sumsq", "pos_sumsq"}), ("nnz", {"nnz"}),
        ) if kinds & wanted]

    @property
    def tensor_length(self) -> int:
        """Packed f32 elements per tensor."""
        return sum(self.length(it) for it in self.items)

    def check(self) -> str | None:
        """Why this kernel cannot be built, or None."""
        rank = len(self.shape)
        if self.numel == 0:
            return "cannot compute statistics of an empty tensor"
        for it in self.items:
            if it.kind in ("chan_maxabs", "chan_outlier", "pos_sumsq") and rank < 2:
                return f"{it.kind} needs a tensor of rank >= 2, got rank {rank}"
            if it.kind == "adj_sumsq" and (rank != 2 or self.shape[0] < 2):
                return f"adj_sumsq needs a 2-D tensor with >= 2 rows, got {self.shape}"
        return None

    # -- the function --------------------------------------------------------------------
    def function(self, name: str, pack: bool = True, noinline: bool = True) -> str:
        """The kernel as a private `func.func` named `name`: the statistics of `count` tensors,
        computed `group_size` tensors at a time (one set of generics, so dispatches, each)."""
        problem = self.check()
        if problem:
            raise ValueError(problem)
        em = _Emitter()
        xs = [self._rows_view(em, f"%x{t}") for t in range(self.count)]
        values: list[dict[str, tuple[str, tuple[int, ...]]]] = []
        step = self.group_size
        for first in range(0, self.count, step):
            group = xs[first:first + step]
            values += StatsKernel(self.shape, self.elem, self.items, count=len(group),
                                  hist_counts=self.hist_counts, row_lanes=self.lanes_wanted)._compute(em, group)
        outs: list[tuple[str, str]] = []
        if pack:
            total = self.count * self.tensor_length
            ty = _tensor((total,), "f32")
            cur = em.empty(ty)
            off = 0
            for t in range(self.count):
                for it in self.items:
                    val, vshape = values[t][it.kind]
                    n = self.length(it)
                    nxt = em.fresh("pack")
                    em.emit(f"{nxt} = tensor.insert_slice {val} into {cur}[{off}] [{n}] [1] : "
                            f"{_tensor(vshape, 'f32')} into {ty}")
                    cur, off = nxt, off + n
            outs.append((cur, ty))
        else:
            for t in range(self.count):
                for it in self.items:
                    val, vshape = values[t][it.kind]
                    if vshape == ():
                        one = em.fresh("one")
                        em.emit(f"{one} = tensor.expand_shape {val} [] output_shape [1] : "
                                "tensor<f32> into tensor<1xf32>")
                        val, vshape = one, (1,)
                    outs.append((val, _tensor(vshape, "f32")))
        in_ty = _tensor(self.shape, self.elem)
        params = ", ".join(f"%x{t}: {in_ty}" for t in range(self.count))
        res_tys = ", ".join(t for _, t in outs)
        attrs = " attributes {noinline}" if noinline else ""
        head = f"func.func private @{name}({params}) -> ({res_tys}){attrs} {{"
        ret = f"  return {', '.join(v for v, _ in outs)} : {res_tys}"
        return "\n".join([head, *em.lines, ret, "}"])

    # -- helpers -------------------------------------------------------------------------
    @property
    def rows_type(self) -> str:
        return _tensor((self.rows, self.cols), self.elem)

    def _rows_view(self, em: _Emitter, x: str) -> str:
        rank = len(self.shape)
        src, dst = _tensor(self.shape, self.elem), self.rows_type
        if rank == 2:
            return x
        x2 = em.fresh("rows")
        if rank > 2:
            lead = ", ".join(str(i) for i in range(rank - 1))
            em.emit(f"{x2} = tensor.collapse_shape {x} [[{lead}], [{rank - 1}]] : {src} into {dst}")
        elif rank == 1:
            em.emit(f"{x2} = tensor.expand_shape {x} [[0, 1]] output_shape [1, {self.cols}] : {src} into {dst}")
        else:
            em.emit(f"{x2} = tensor.expand_shape {x} [] output_shape [1, 1] : {src} into {dst}")
        return x2

    def _load(self, arg: str, out: str) -> list[str]:
        """Body lines making f32 `out` from element `arg` (nothing to do for f32)."""
        return [] if self.elem == "f32" else [f"{out} = arith.extf {arg} : {self.elem} to f32"]

    def _v(self, arg: str, out: str) -> str:
        return arg if self.elem == "f32" else out

    def _x(self, x: str, t: int, m: str) -> Operand:
        return Operand(x, self.rows_type, m, f"%in{t}", self.elem)

    # -- row reductions: [rows, C] -> [rows, L] lane partials (or [rows] when L = 0) -------
    @property
    def row_lanes(self) -> int:
        """Lanes a row reduction keeps apart: `row_lanes`, else half of it, where a row holds two
        vectors of them; 0 reduces each row straight."""
        want = self.lanes_wanted
        return next((L for L in (want, want // 2) if L >= 2 and self.cols % L == 0 and self.cols // L >= 2), 0)

    def _row_dims(self) -> int:
        return 3 if self.row_lanes else 2

    def _row_iters(self) -> list[str]:
        return ["parallel", "parallel", "reduction"] if self.row_lanes else ["parallel", "reduction"]

    def _row_acc(self, rows: int) -> tuple[tuple[int, ...], str]:
        """Shape and indexing map of a row reduction's accumulator."""
        L = self.row_lanes
        return ((rows, L), _map(3, "d0, d1")) if L else ((rows,), _map(2, "d0"))

    def _row_in(self, em: _Emitter, x: str, rows: int, arg: str) -> Operand:
        """`x` ([rows, C]) as the input of a row reduction: viewed as [rows, C/L, L]."""
        C, L = self.cols, self.row_lanes
        ty = _tensor((rows, C), self.elem)
        if not L:
            return Operand(x, ty, _map(2, "d0, d1"), arg, self.elem)
        v_ty = _tensor((rows, C // L, L), self.elem)
        v = em.fresh("lanes")
        em.emit(f"{v} = tensor.expand_shape {x} [[0], [1, 2]] output_shape [{rows}, {C // L}, {L}] : "
                f"{ty} into {v_ty}")
        return Operand(v, v_ty, _map(3, "d0, d2, d1"), arg, self.elem)

    def _lane_sums(self, em: _Emitter, hint: str, parts: list[str], rows: int) -> list[str]:
        """Σ over lanes of several [rows, L] partials, to [rows], in one generic (no-op at L = 0)."""
        L = self.row_lanes
        if not L:
            return parts
        p_ty, r_ty = _tensor((rows, L), "f32"), _tensor((rows,), "f32")
        ins = [Operand(p, p_ty, _map(2, "d0, d1"), f"%p{i}", "f32") for i, p in enumerate(parts)]
        outs = [Operand(em.filled((rows,), ZERO), r_ty, _map(2, "d0"), f"%a{i}", "f32")
                for i in range(len(parts))]
        body = [f"%s{i} = arith.addf %a{i}, %p{i} : f32" for i in range(len(parts))]
        body.append("linalg.yield " + ", ".join(f"%s{i}" for i in range(len(parts))) + " : "
                    + ", ".join("f32" for _ in parts))
        return em.generic(hint, ["parallel", "reduction"], ins, outs, body)

    def _scalars(self, em: _Emitter, ins: dict[str, str], exprs: list[tuple[str, list[str]]],
                 consts: dict[str, str] | None = None) -> list[str]:
        """One 0-d generic: inputs `ins` (name -> 0-d value) and outputs `%<name>` per expr."""
        opnds = [Operand(v, "tensor<f32>", _map(0, ""), f"%{k}", "f32") for k, v in ins.items()]
        outs = [Operand(em.empty("tensor<f32>"), "tensor<f32>", _map(0, ""), f"%out_{n}", "f32")
                for n, _ in exprs]
        body = [f"%n = arith.constant {_f32(float(self.numel))} : f32"]
        body += [f"%{k} = arith.constant {v} : f32" for k, v in (consts or {}).items()]
        for _, lines in exprs:
            body += lines
        body.append("linalg.yield " + ", ".join(f"%{n}" for n, _ in exprs) + " : "
                    + ", ".join("f32" for _ in exprs))
        return em.generic("fin", [], opnds, outs, body)

    # -- the stages ----------------------------------------------------------------------
    def _compute(self, em: _Emitter, xs: list[str]) -> list[dict[str, tuple[str, tuple[int, ...]]]]:
        kinds = {it.kind for it in self.items}
        hist = next((it for it in self.items if it.kind == "hist"), None)
        R, C, T = self.rows, self.cols, self.count
        values: list[dict] = [{} for _ in range(T)]

        need = self._partials()
        partials = self._row_pass(em, xs, need) if need else [{} for _ in range(T)]
        totals = self._final_reduce(em, partials, need) if need else [{} for _ in range(T)]
        pos = self._lane_sums(em, "pos", [p["sumsq"] for p in partials], R) if "pos_sumsq" in kinds else None
        for t in range(T):
            if pos is not None:
                values[t]["pos_sumsq"] = (pos[t], (R,))
            for k in ("min", "max", "l1", "sumsq", "nnz"):
                if k in kinds:
                    values[t][k] = (totals[t][k], ())

        # The second passes derive the global scalars they need (the mean, the histogram
        # scale) from the totals in their own body: loop-invariant, so computed once per
        # tile, and no 0-d generic (one dispatch) in between.
        moments = self._moments(em, xs, [tot["sum"] for tot in totals]) if "kurtosis" in kinds else None
        if hist is not None:
            scales = [(tot["min"], tot["max"]) for tot in totals] if hist.normalize else None
            for t, h in enumerate(self._hist(em, xs, hist, scales)):
                values[t]["hist"] = (h, (hist.bins,))
        if "elemsig" in kinds:
            k = min(ELEMSIG_MAX, self.numel)
            for t, s in enumerate(self._elemsig(em, xs)):
                values[t]["elemsig"] = (s, (k,))
        chan = None
        if kinds & {"chan_maxabs", "chan_outlier"}:
            chan = self._chan_maxabs(em, xs)
            if "chan_maxabs" in kinds:
                for t in range(T):
                    values[t]["chan_maxabs"] = (chan[t], (C,))
        if "adj_sumsq" in kinds:
            for t, a in enumerate(self._adj(em, xs)):
                values[t]["adj_sumsq"] = (a, (R - 1,))

        # Final scalars: mean, kurtosis and channel peak/mean, all tensors in one 0-d generic.
        ins, exprs = {}, []
        chan_red = self._chan_reduce(em, chan) if "chan_outlier" in kinds else None
        for t in range(T):
            if "mean" in kinds:
                ins[f"sum{t}"] = totals[t]["sum"]
                exprs.append((f"mean{t}", [f"%mean{t} = arith.divf %sum{t}, %n : f32"]))
            if moments is not None:
                ins[f"s2_{t}"], ins[f"s4_{t}"] = moments[t]
                exprs.append((f"kurt{t}", [
                    f"%m2_{t} = arith.divf %s2_{t}, %n : f32",
                    f"%m4_{t} = arith.divf %s4_{t}, %n : f32",
                    f"%m22_{t} = arith.mulf %m2_{t}, %m2_{t} : f32",
                    f"%den_{t} = arith.addf %m22_{t}, %eps : f32",
                    f"%kurt{t} = arith.divf %m4_{t}, %den_{t} : f32",
                ]))
            if chan_red is not None:
                ins[f"cmax{t}"], ins[f"csum{t}"] = chan_red[t]
                exprs.append((f"cout{t}", [
                    f"%cmean{t} = arith.divf %csum{t}, %chans : f32",
                    f"%cden{t} = arith.addf %cmean{t}, %eps : f32",
                    f"%cout{t} = arith.divf %cmax{t}, %cden{t} : f32",
                ]))
        if exprs:
            res = iter(self._scalars(em, ins, exprs, {"eps": _f32(EPS_RATIO), "chans": _f32(float(C))}))
            for t in range(T):
                if "mean" in kinds:
                    values[t]["mean"] = (next(res), ())
                if moments is not None:
                    values[t]["kurtosis"] = (next(res), ())
                if chan_red is not None:
                    values[t]["chan_outlier"] = (next(res), ())
        return values

    def _row_pass(self, em: _Emitter, xs: list[str], need: list[str]) -> list[dict[str, str]]:
        """Row partials of every tensor in one (row parallel, column reduction) generic."""
        R = self.rows
        acc_shape, acc_map = self._row_acc(R)
        r_ty = _tensor(acc_shape, "f32")
        ins = [self._row_in(em, x, R, f"%in{t}") for t, x in enumerate(xs)]
        outs, body = [], []
        for t in range(self.count):
            v = self._v(f"%in{t}", f"%v{t}")
            body += self._load(f"%in{t}", f"%v{t}")
            if "l1" in need:
                body.append(f"%abs{t} = math.absf {v} : f32")
            if "sumsq" in need:
                body.append(f"%sq{t} = arith.mulf {v}, {v} : f32")
            if "nnz" in need:
                body += [
                    f"%isnz{t} = arith.cmpf une, {v}, %zero : f32",
                    f"%nz{t} = arith.select %isnz{t}, %one, %zero : f32",
                ]
            for p in need:
                init = em.filled(acc_shape, _ROW_PARTIALS[p][0])
                outs.append(Operand(init, r_ty, acc_map, f"%a_{p}{t}", "f32"))
                expr = _ROW_PARTIALS[p][1].format(v=v, acc=f"%a_{p}{t}", abs=f"%abs{t}",
                                                  sq=f"%sq{t}", nz=f"%nz{t}")
                body.append(f"%r_{p}{t} = {expr}")
        head = [f"%zero = arith.constant {ZERO} : f32", "%one = arith.constant 1.000000e+00 : f32"]
        yields = [f"%r_{p}{t}" for t in range(self.count) for p in need]
        body = head + body + [f"linalg.yield {', '.join(yields)} : {', '.join('f32' for _ in yields)}"]
        res = iter(em.generic("rowp", self._row_iters(), ins, outs, body))
        return [{p: next(res) for p in need} for _ in range(self.count)]

    def _final_reduce(self, em: _Emitter, partials: list[dict[str, str]], need: list[str]) -> list[dict[str, str]]:
        """Every [R] partial of every tensor to a scalar: one generic per chunk of partials,
        each chunk small enough that the generic stays within BINDING_BUDGET buffers."""
        per_chunk = max(1, BINDING_BUDGET // (2 * self.count))
        out: list[dict[str, str]] = [{} for _ in range(self.count)]
        for i in range(0, len(need), per_chunk):
            chunk = need[i:i + per_chunk]
            for t, got in enumerate(self._final_reduce_chunk(em, partials, chunk)):
                out[t].update(got)
        return out

    def _final_reduce_chunk(self, em: _Emitter, partials: list[dict[str, str]], need: list[str]) -> list[dict[str, str]]:
        shape = self._row_acc(self.rows)[0]
        dims = len(shape)
        r_ty, p_map = _tensor(shape, "f32"), _map(dims, ", ".join(f"d{i}" for i in range(dims)))
        ins, outs, body, yields = [], [], [], []
        for t in range(self.count):
            for p in need:
                ins.append(Operand(partials[t][p], r_ty, p_map, f"%p_{p}{t}", "f32"))
                outs.append(Operand(em.filled((), _ROW_PARTIALS[p][0]), "tensor<f32>", _map(dims, ""),
                                    f"%a_{p}{t}", "f32"))
                body.append(f"%f_{p}{t} = {_ROW_PARTIALS[p][2]} %p_{p}{t}, %a_{p}{t} : f32")
                yields.append(f"%f_{p}{t}")
        body.append(f"linalg.yield {', '.join(yields)} : {', '.join('f32' for _ in yields)}")
        res = iter(em.generic("tot", ["reduction"] * dims, ins, outs, body))
        return [{p: next(res) for p in need} for _ in range(self.count)]

    def _sum_rows(self, em: _Emitter, hint: str, parts: list[str]) -> list[str]:
        """Σ over rows (and lanes) of several row partials, to 0-d tensors, in one generic."""
        shape = self._row_acc(self.rows)[0]
        dims = len(shape)
        r_ty, p_map = _tensor(shape, "f32"), _map(dims, ", ".join(f"d{i}" for i in range(dims)))
        ins = [Operand(p, r_ty, p_map, f"%p{i}", "f32") for i, p in enumerate(parts)]
        outs = [Operand(em.filled((), ZERO), "tensor<f32>", _map(dims, ""), f"%a{i}", "f32")
                for i in range(len(parts))]
        body = [f"%s{i} = arith.addf %a{i}, %p{i} : f32" for i in range(len(parts))]
        body.append("linalg.yield " + ", ".join(f"%s{i}" for i in range(len(parts))) + " : "
                    + ", ".join("f32" for _ in parts))
        return em.generic(hint, ["reduction"] * dims, ins, outs, body)

    def _moments(self, em: _Emitter, xs: list[str], sums: list[str]) -> list[tuple[str, str]]:
        """Σ(x-μ)² and Σ(x-μ)⁴ of every tensor, μ = Σx / n from its 0-d total `sums[t]` (the
        same division as the mean statistic): a row pass, then a final sum."""
        R = self.rows
        acc_shape, acc_map = self._row_acc(R)
        r_ty, dims = _tensor(acc_shape, "f32"), self._row_dims()
        ins, outs, body, yields = [], [], [], []
        for t, x in enumerate(xs):
            ins += [self._row_in(em, x, R, f"%in{t}"),
                    Operand(sums[t], "tensor<f32>", _map(dims, ""), f"%sum{t}", "f32")]
            outs += [Operand(em.filled(acc_shape, ZERO), r_ty, acc_map, f"%a2_{t}", "f32"),
                     Operand(em.filled(acc_shape, ZERO), r_ty, acc_map, f"%a4_{t}", "f32")]
            body += self._load(f"%in{t}", f"%v{t}") + [
                f"%mu{t} = arith.divf %sum{t}, %n : f32",
                f"%d{t} = arith.subf {self._v(f'%in{t}', f'%v{t}')}, %mu{t} : f32",
                f"%d2_{t} = arith.mulf %d{t}, %d{t} : f32",
                f"%d4_{t} = arith.mulf %d2_{t}, %d2_{t} : f32",
                f"%n2_{t} = arith.addf %a2_{t}, %d2_{t} : f32",
                f"%n4_{t} = arith.addf %a4_{t}, %d4_{t} : f32",
            ]
            yields += [f"%n2_{t}", f"%n4_{t}"]
        body = [f"%n = arith.constant {_f32(float(self.numel))} : f32"] + body
        body.append(f"linalg.yield {', '.join(yields)} : {', '.join('f32' for _ in yields)}")
        rows = em.generic("mom", self._row_iters(), ins, outs, body)
        tot = iter(self._sum_rows(em, "momt", rows))
        return [(next(tot), next(tot)) for _ in xs]

    def _hist(self, em: _Emitter, xs: list[str], h: StatItem,
              scales: list[tuple[str, str]] | None) -> list[str]:
        """Bin index of every element (elementwise), then one-hot counts, then their sum.

        The index is `floor((u - lo) / width)` corrected against the f32 edges `lo + k·width`,
        which is numpy's rule exactly whenever those edges are exact in f32 (true for the
        default ranges [-1, 1] and [-6, 6] with 32 bins): `e_k <= u < e_k+1`, the last bin also
        takes `u == hi`; values outside `[lo, hi]` and NaN get index -1 and are dropped.

        Normalized (`scales`: each tensor's 0-d min and max), u = x / (max(-min, max) +
        EPS_SCALE), the scale computed in the body (loop-invariant).

        Counting (`_hist_lanes`): the flat indices are viewed as [S, N, L] and every lane
        keeps its own count per bin, so the innermost loop is one compare and one subtract per
        vector of L indices and bin, with no horizontal reduction (per-row counts made IREE
        reduce the lanes at every step: 2x slower). Indices and counts are i32 (16 lanes), or
        with `hist_counts="i8"` i8 (64 lanes, at most 255 indices a lane: exact, see
        `HIST_LANES`; ~1.6x faster on llvm-cpu, miscounted by IREE 3.13's SPIR-V). Shapes that
        do not split evenly count per row in i32 (`_hist_rows`).
        """
        R, C, B = self.rows, self.cols, h.bins
        width = (h.hi - h.lo) / B
        lanes = self._hist_layout(B)
        ity = lanes[3] if lanes else "i32"
        idx_ty = _tensor((R, C), ity)
        ins, outs = [], []
        body = [
            f"%lo = arith.constant {_f32(h.lo)} : f32",
            f"%hi = arith.constant {_f32(h.hi)} : f32",
            f"%w = arith.constant {_f32(width)} : f32",
            f"%invw = arith.constant {_f32(1.0 / width)} : f32",
            f"%fz = arith.constant {ZERO} : f32",
            f"%fl = arith.constant {_f32(float(B - 1))} : f32",
            "%c1 = arith.constant 1 : i32",
            "%cm1 = arith.constant -1 : i32",
            f"%clast = arith.constant {B - 1} : i32",
            f"%eps = arith.constant {_f32(EPS_SCALE)} : f32",
        ]
        for t, x in enumerate(xs):
            ins.append(self._x(x, t, _map(2, "d0, d1")))
            if scales is not None:
                ins += [Operand(scales[t][0], "tensor<f32>", _map(2, ""), f"%min{t}", "f32"),
                        Operand(scales[t][1], "tensor<f32>", _map(2, ""), f"%max{t}", "f32")]
            outs.append(Operand(em.empty(idx_ty), idx_ty, _map(2, "d0, d1"), f"%o{t}", ity))
            body += self._load(f"%in{t}", f"%v{t}")
            u = self._v(f"%in{t}", f"%v{t}")
            if scales is not None:
                body += [
                    f"%nmin{t} = arith.negf %min{t} : f32",
                    f"%maxabs{t} = arith.maximumf %nmin{t}, %max{t} : f32",
                    f"%s{t} = arith.addf %maxabs{t}, %eps : f32",
                    f"%u{t} = arith.divf {u}, %s{t} : f32",
                ]
                u = f"%u{t}"
            body += [
                f"%t0_{t} = arith.subf {u}, %lo : f32",
                f"%t1_{t} = arith.mulf %t0_{t}, %invw : f32",
                f"%t2_{t} = math.floor %t1_{t} : f32",
                # clamp in f32 first so the conversion to i32 never overflows
                f"%t3_{t} = arith.maximumf %t2_{t}, %fz : f32",
                f"%t4_{t} = arith.minimumf %t3_{t}, %fl : f32",
                f"%k0_{t} = arith.fptosi %t4_{t} : f32 to i32",
                f"%kf_{t} = arith.sitofp %k0_{t} : i32 to f32",
                f"%ek_{t} = arith.mulf %kf_{t}, %w : f32",
                f"%elo_{t} = arith.addf %lo, %ek_{t} : f32",
                f"%ehi_{t} = arith.addf %elo_{t}, %w : f32",
                f"%below_{t} = arith.cmpf olt, {u}, %elo_{t} : f32",
                f"%above_{t} = arith.cmpf oge, {u}, %ehi_{t} : f32",
                f"%notlast_{t} = arith.cmpi slt, %k0_{t}, %clast : i32",
                f"%up_{t} = arith.andi %above_{t}, %notlast_{t} : i1",
                f"%kdn_{t} = arith.subi %k0_{t}, %c1 : i32",
                f"%kup_{t} = arith.addi %k0_{t}, %c1 : i32",
                f"%k1_{t} = arith.select %below_{t}, %kdn_{t}, %k0_{t} : i32",
                f"%k2_{t} = arith.select %up_{t}, %kup_{t}, %k1_{t} : i32",
                f"%ge_{t} = arith.cmpf oge, {u}, %lo : f32",
                f"%le_{t} = arith.cmpf ole, {u}, %hi : f32",
                f"%inr_{t} = arith.andi %ge_{t}, %le_{t} : i1",
                f"%k{t}{'w' if ity != 'i32' else ''} = arith.select %inr_{t}, %k2_{t}, %cm1 : i32",
            ]
            if ity != "i32":
                body.append(f"%k{t} = arith.trunci %k{t}w : i32 to {ity}")
        body.append("linalg.yield " + ", ".join(f"%k{t}" for t in range(self.count)) + " : "
                    + ", ".join(ity for _ in xs))
        bins = em.generic("bin", ["parallel", "parallel"], ins, outs, body)
        if lanes:
            return self._hist_lanes(em, bins, B, lanes)
        return self._hist_rows(em, bins, B)

    def _hist_layout(self, bins: int) -> tuple[int, int, int, str] | None:
        """(S, N, L, index type) splitting the flat bin indices into S slabs of N·L, or None.

        The first of `HIST_LANES[hist_counts]` that fits: L lanes fill one 512-bit vector, a
        lane counts at most N <= n_max indices (255 for i8: see `HIST_LANES`); S is the fewest
        slabs that divide the tensor. None when no split keeps N >= 8 (the per-row count is
        then as good).
        """
        E = self.numel
        for ity, L, n_max in HIST_LANES[self.hist_counts]:
            if ity == "i8" and bins > 127:
                continue
            if E % L:
                continue
            chunks = E // L
            s = -(-chunks // n_max)  # s only grows from here, so N = chunks / s <= n_max
            while s <= chunks and chunks % s:
                s += 1
            if chunks // s >= 8:
                assert chunks // s <= n_max
                return s, chunks // s, L, ity
        return None

    def _hist_lanes(self, em: _Emitter, bins: list[str], B: int, layout) -> list[str]:
        """Counts per (slab, bin, lane) over the [S, N, L] view, then Σ slabs and lanes."""
        S, N, L, ity = layout
        E = self.numel
        idx_ty, flat_ty, v_ty = _tensor((self.rows, self.cols), ity), _tensor((E,), ity), _tensor((S, N, L), ity)
        acc_ty = _tensor((S, B, L), ity)
        zero_i = em.fresh("zi")
        em.emit(f"{zero_i} = arith.constant 0 : {ity}")
        ins, outs = [], []
        for t, b in enumerate(bins):
            flat, view = em.fresh("flat"), em.fresh("lanes")
            em.emit(f"{flat} = tensor.collapse_shape {b} [[0, 1]] : {idx_ty} into {flat_ty}")
            em.emit(f"{view} = tensor.expand_shape {flat} [[0, 1, 2]] output_shape [{S}, {N}, {L}] : "
                    f"{flat_ty} into {v_ty}")
            ins.append(Operand(view, v_ty, _map(4, "d0, d3, d2"), f"%k{t}", ity))
            e, f = em.empty(acc_ty), em.fresh("initi")
            em.emit(f"{f} = linalg.fill ins({zero_i} : {ity}) outs({e} : {acc_ty}) -> {acc_ty}")
            outs.append(Operand(f, acc_ty, _map(4, "d0, d1, d2"), f"%acc{t}", ity))
        body = ["%b = linalg.index 1 : index", f"%bi = arith.index_cast %b : index to {ity}"]
        for t in range(self.count):
            body += [
                f"%hit{t} = arith.cmpi eq, %k{t}, %bi : {ity}",
                f"%cnt{t} = arith.extui %hit{t} : i1 to {ity}",
                f"%next{t} = arith.addi %acc{t}, %cnt{t} : {ity}",
            ]
        body.append("linalg.yield " + ", ".join(f"%next{t}" for t in range(self.count)) + " : "
                    + ", ".join(ity for _ in bins))
        counts = em.generic("hlanes", ["parallel", "parallel", "parallel", "reduction"], ins, outs, body)

        b_ty = _tensor((B,), "f32")
        ins = [Operand(c, acc_ty, _map(3, "d0, d1, d2"), f"%c{t}", ity) for t, c in enumerate(counts)]
        outs = [Operand(em.filled((B,), ZERO), b_ty, _map(3, "d1"), f"%acc{t}", "f32") for t in range(self.count)]
        body = []
        for t in range(self.count):  # an i8 count is c mod 256 with c <= 255: read unsigned
            body += [f"%cf{t} = arith.uitofp %c{t} : {ity} to f32", f"%s{t} = arith.addf %acc{t}, %cf{t} : f32"]
        body.append("linalg.yield " + ", ".join(f"%s{t}" for t in range(self.count)) + " : "
                    + ", ".join("f32" for _ in bins))
        return em.generic("hist", ["reduction", "parallel", "reduction"], ins, outs, body)

    def _hist_rows(self, em: _Emitter, bins: list[str], B: int) -> list[str]:
        """Counts per (row, bin) with the bins innermost, then Σ rows (the fallback)."""
        R, C = self.rows, self.cols
        idx_ty = _tensor((R, C), "i32")

        rb_ty = _tensor((R, B), "i32")
        zero_i = em.fresh("zi")
        em.emit(f"{zero_i} = arith.constant 0 : i32")
        ins = [Operand(b, idx_ty, _map(3, "d0, d1"), f"%k{t}", "i32") for t, b in enumerate(bins)]
        outs = []
        for t in range(self.count):
            e = em.empty(rb_ty)
            f = em.fresh("initi")
            em.emit(f"{f} = linalg.fill ins({zero_i} : i32) outs({e} : {rb_ty}) -> {rb_ty}")
            outs.append(Operand(f, rb_ty, _map(3, "d0, d2"), f"%acc{t}", "i32"))
        body = ["%b = linalg.index 2 : index", "%bi = arith.index_cast %b : index to i32"]
        for t in range(self.count):
            body += [
                f"%hit{t} = arith.cmpi eq, %k{t}, %bi : i32",
                f"%cnt{t} = arith.extui %hit{t} : i1 to i32",
                f"%next{t} = arith.addi %acc{t}, %cnt{t} : i32",
            ]
        body.append("linalg.yield " + ", ".join(f"%next{t}" for t in range(self.count)) + " : "
                    + ", ".join("i32" for _ in bins))
        rows = em.generic("hrows", ["parallel", "reduction", "parallel"], ins, outs, body)

        b_ty = _tensor((B,), "f32")
        ins = [Operand(r, rb_ty, _map(2, "d0, d1"), f"%c{t}", "i32") for t, r in enumerate(rows)]
        outs = [Operand(em.filled((B,), ZERO), b_ty, _map(2, "d1"), f"%acc{t}", "f32") for t in range(self.count)]
        body = []
        for t in range(self.count):
            body += [f"%cf{t} = arith.sitofp %c{t} : i32 to f32", f"%s{t} = arith.addf %acc{t}, %cf{t} : f32"]
        body.append("linalg.yield " + ", ".join(f"%s{t}" for t in range(self.count)) + " : "
                    + ", ".join("f32" for _ in bins))
        return em.generic("hist", ["reduction", "parallel"], ins, outs, body)

    def _elemsig(self, em: _Emitter, xs: list[str]) -> list[str]:
        """Elements at flat indices floor(j·n/k) + (j·ELEMSIG_SKEW mod floor(n/k)), j < k =
        min(16, n): one per window of n/k elements, at varying columns; a gather generic."""
        k = min(ELEMSIG_MAX, self.numel)
        k_ty = f"tensor<{k}xf32>"
        outs = [Operand(em.empty(k_ty), k_ty, _map(1, "d0"), f"%o{t}", "f32") for t in range(self.count)]
        body = [
            "%j = linalg.index 0 : index",
            f"%n = arith.constant {self.numel} : index",
            f"%k = arith.constant {k} : index",
            f"%cols = arith.constant {self.cols} : index",
            f"%skew = arith.constant {ELEMSIG_SKEW} : index",
            f"%win = arith.constant {max(1, self.numel // k)} : index",
            "%jn = arith.muli %j, %n : index",
            "%start = arith.divui %jn, %k : index",
            "%js = arith.muli %j, %skew : index",
            "%into = arith.remui %js, %win : index",
            "%flat = arith.addi %start, %into : index",
            "%r = arith.divui %flat, %cols : index",
            "%c = arith.remui %flat, %cols : index",
        ]
        for t, x in enumerate(xs):
            body.append(f"%in{t} = tensor.extract {x}[%r, %c] : {self.rows_type}")
            body += self._load(f"%in{t}", f"%v{t}")
        body.append("linalg.yield " + ", ".join(self._v(f"%in{t}", f"%v{t}") for t in range(self.count))
                    + " : " + ", ".join("f32" for _ in xs))
        return em.generic("sig", ["parallel"], [], outs, body)

    def _chan_maxabs(self, em: _Emitter, xs: list[str]) -> list[str]:
        """max|x| per last-axis channel, reducing over all rows."""
        C = self.cols
        ins = [self._x(x, t, _map(2, "d0, d1")) for t, x in enumerate(xs)]
        outs = [Operand(em.filled((C,), ZERO), f"tensor<{C}xf32>", _map(2, "d1"), f"%acc{t}", "f32")
                for t in range(self.count)]
        body = []
        for t in range(self.count):
            body += self._load(f"%in{t}", f"%v{t}") + [
                f"%abs{t} = math.absf {self._v(f'%in{t}', f'%v{t}')} : f32",
                f"%m{t} = arith.maximumf %abs{t}, %acc{t} : f32",
            ]
        body.append("linalg.yield " + ", ".join(f"%m{t}" for t in range(self.count)) + " : "
                    + ", ".join("f32" for _ in xs))
        return em.generic("chan", ["reduction", "parallel"], ins, outs, body)

    def _chan_reduce(self, em: _Emitter, chans: list[str]) -> list[tuple[str, str]]:
        """(max, Σ) of every tensor's channel maxima, in one generic."""
        C = self.cols
        ins = [Operand(c, f"tensor<{C}xf32>", _map(1, "d0"), f"%c{t}", "f32") for t, c in enumerate(chans)]
        outs, body, yields = [], [], []
        for t in range(self.count):
            outs += [Operand(em.filled((), ZERO), "tensor<f32>", _map(1, ""), f"%am{t}", "f32"),
                     Operand(em.filled((), ZERO), "tensor<f32>", _map(1, ""), f"%as{t}", "f32")]
            body += [f"%m{t} = arith.maximumf %c{t}, %am{t} : f32", f"%s{t} = arith.addf %as{t}, %c{t} : f32"]
            yields += [f"%m{t}", f"%s{t}"]
        body.append(f"linalg.yield {', '.join(yields)} : {', '.join('f32' for _ in yields)}")
        res = iter(em.generic("cred", ["reduction"], ins, outs, body))
        return [(next(res), next(res)) for _ in chans]

    def _adj(self, em: _Emitter, xs: list[str]) -> list[str]:
        """Σ_j (x[t+1, j] - x[t, j])² for t < R-1, over two row slices."""
        R, C = self.rows, self.cols
        part = _tensor((R - 1, C), self.elem)
        acc_shape, acc_map = self._row_acc(R - 1)
        ins, outs, body = [], [], []
        for t, x in enumerate(xs):
            nxt, prev = em.fresh("next"), em.fresh("prev")
            em.emit(f"{nxt} = tensor.extract_slice {x}[1, 0] [{R - 1}, {C}] [1, 1] : {self.rows_type} to {part}")
            em.emit(f"{prev} = tensor.extract_slice {x}[0, 0] [{R - 1}, {C}] [1, 1] : {self.rows_type} to {part}")
            ins += [self._row_in(em, nxt, R - 1, f"%a{t}"), self._row_in(em, prev, R - 1, f"%b{t}")]
            outs.append(Operand(em.filled(acc_shape, ZERO), _tensor(acc_shape, "f32"), acc_map, f"%acc{t}", "f32"))
            body += self._load(f"%a{t}", f"%fa{t}") + self._load(f"%b{t}", f"%fb{t}") + [
                f"%d{t} = arith.subf {self._v(f'%a{t}', f'%fa{t}')}, {self._v(f'%b{t}', f'%fb{t}')} : f32",
                f"%d2_{t} = arith.mulf %d{t}, %d{t} : f32",
                f"%s{t} = arith.addf %acc{t}, %d2_{t} : f32",
            ]
        body.append("linalg.yield " + ", ".join(f"%s{t}" for t in range(self.count)) + " : "
                    + ", ".join("f32" for _ in xs))
        return self._lane_sums(em, "adjl", em.generic("adj", self._row_iters(), ins, outs, body), R - 1)
