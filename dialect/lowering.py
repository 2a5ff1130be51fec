"""How opscope statistics are computed: one stats kernel per (tensor type, stat list).

`StatsKernel` writes a `func.func` in linalg/tensor/arith/math that takes the tapped tensor
and returns its statistics, packed into one 1-D f32 tensor (or one result per statistic).
The kernel is shaped for IREE's dispatch formation rather than for brevity:

* the tensor is viewed as rows `[R, C]` (all leading dims flattened, C = last dim);
* one row-parallel pass computes every plain row partial (min, max, sum, |x|, x², nnz,
  max|x|) in a single multi-result `linalg.generic`, then one tiny generic reduces the
  partials to scalars (partial-then-final reductions beat reducing straight to scalars);
* the statistics that need a global scalar first (kurtosis needs the mean, the normalized
  histogram needs max|x|) share a second row-parallel pass; the histogram is a per-row
  one-hot count against constant bin edges, so its edge rule equals numpy's exactly
  (`lo <= v < hi`, the last bin also takes `v == hi`, values outside are dropped);
* scalar post-processing happens in 0-d `linalg.generic`s, never through `tensor.extract`
  on the host side, which would force a device-to-host round trip per site.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

EPS_SCALE = 1e-12  # normalized histogram: x / (max|x| + EPS_SCALE)
EPS_RATIO = 1e-20  # kurtosis and chan_outlier denominators

SCALAR_KINDS = ("min", "max", "mean", "l1", "sumsq", "nnz", "kurtosis", "chan_outlier")

# Row partial -> (init value, accumulate body, final combine op).
_ROW_PARTIALS = {
    "min": ("0x7F800000", "arith.minimumf {v}, {acc} : f32", "arith.minimumf"),
    "max": ("0xFF800000", "arith.maximumf {v}, {acc} : f32", "arith.maximumf"),
    "sum": ("0.000000e+00", "arith.addf {acc}, {v} : f32", "arith.addf"),
    "l1": ("0.000000e+00", "arith.addf {acc}, {abs} : f32", "arith.addf"),
    "sumsq": ("0.000000e+00", "arith.addf {acc}, {sq} : f32", "arith.addf"),
    "nnz": ("0.000000e+00", "arith.addf {acc}, {nz} : f32", "arith.addf"),
    "maxabs": ("0.000000e+00", "arith.maximumf {abs}, {acc} : f32", "arith.maximumf"),
}


def _f32(x: float) -> str:
    """An f32 literal MLIR prints and parses exactly (hex bit pattern)."""
    return "0x%08X" % struct.unpack("<I", struct.pack("<f", x))[0]


def _tensor(shape: tuple[int, ...], elem: str) -> str:
    return "tensor<" + "".join(f"{d}x" for d in shape) + elem + ">"


@dataclass(frozen=True)
class StatItem:
    """One requested statistic: kind plus its options (only hist has any)."""

    kind: str
    bins: int = 0
    lo: float = 0.0
    hi: float = 0.0
    normalize: bool = False


@dataclass
class _Emitter:
    """Accumulates the lines of one function body with fresh SSA names."""

    lines: list[str] = field(default_factory=list)
    counter: int = 0

    def fresh(self, hint: str) -> str:
        self.counter += 1
        return f"%{hint}{self.counter}"

    def emit(self, line: str) -> None:
        self.lines.append("  " + line)

    def filled(self, shape: tuple[int, ...], init: str) -> str:
        ty = _tensor(shape, "f32")
        e = self.fresh("e")
        self.emit(f"{e} = tensor.empty() : {ty}")
        c = self.fresh("c")
        self.emit(f"{c} = arith.constant {init} : f32")
        f = self.fresh("init")
        self.emit(f"{f} = linalg.fill ins({c} : f32) outs({e} : {ty}) -> {ty}")
        return f


def _map(dims: int, results: str) -> str:
    ds = ", ".join(f"d{i}" for i in range(dims))
    return f"affine_map<({ds}) -> ({results})>"


class StatsKernel:
    """The stats kernel for one tensor type and one ordered list of statistics."""

    def __init__(self, shape: tuple[int, ...], elem: str, items: list[StatItem]):
        self.shape = tuple(shape)
        self.elem = elem
        self.items = list(items)
        self.numel = 1
        for d in self.shape:
            self.numel *= d
        rank = len(self.shape)
        self.cols = self.shape[-1] if rank else 1
        self.rows = self.numel // self.cols if self.cols else 0
        kinds = [it.kind for it in self.items]
        if len(set(kinds)) != len(kinds):
            raise ValueError(f"duplicate statistics in one kernel: {kinds}")

    # -- lengths -----------------------------------------------------------------------
    def length(self, item: StatItem) -> int:
        """Number of f32 elements `item` occupies."""
        if item.kind in SCALAR_KINDS:
            return 1
        return {
            "hist": item.bins,
            "elemsig": min(16, self.numel),
            "chan_maxabs": self.cols,
            "pos_sumsq": self.rows,
            "adj_sumsq": self.shape[0] - 1 if len(self.shape) == 2 else 0,
        }[item.kind]

    def check(self) -> str | None:
        """Why this kernel cannot be built, or None."""
        rank = len(self.shape)
        for it in self.items:
            if it.kind in ("chan_maxabs", "chan_outlier", "pos_sumsq") and rank < 2:
                return f"{it.kind} needs a tensor of rank >= 2, got rank {rank}"
            if it.kind == "adj_sumsq" and (rank != 2 or self.shape[0] < 2):
                return f"adj_sumsq needs a 2-D tensor with >= 2 rows, got {self.shape}"
            if it.kind == "elemsig" and self.numel == 0:
                return "elemsig needs a non-empty tensor"
        if self.numel == 0:
            return "cannot compute statistics of an empty tensor"
        return None

    # -- text --------------------------------------------------------------------------
    def function(self, name: str, pack: bool = True, noinline: bool = True) -> str:
        """The kernel as a private `func.func` named `name`."""
        problem = self.check()
        if problem:
            raise ValueError(problem)
        em = _Emitter()
        x2 = self._rows_view(em)
        values = self._compute(em, x2)
        outs: list[tuple[str, str]] = []
        if pack:
            total = sum(self.length(it) for it in self.items)
            ty = _tensor((total,), "f32")
            cur = em.fresh("pack")
            em.emit(f"{cur} = tensor.empty() : {ty}")
            off = 0
            for it in self.items:
                val, vshape = values[it.kind]
                n = self.length(it)
                nxt = em.fresh("pack")
                em.emit(
                    f"{nxt} = tensor.insert_slice {val} into {cur}[{off}] [{n}] [1] : "
                    f"{_tensor(vshape, 'f32')} into {ty}"
                )
                cur, off = nxt, off + n
            outs.append((cur, ty))
        else:
            for it in self.items:
                val, vshape = values[it.kind]
                if vshape == ():
                    one = em.fresh("one")
                    em.emit(
                        f"{one} = tensor.expand_shape {val} [] output_shape [1] : "
                        "tensor<f32> into tensor<1xf32>"
                    )
                    val, vshape = one, (1,)
                outs.append((val, _tensor(vshape, "f32")))
        in_ty = _tensor(self.shape, self.elem)
        res_tys = ", ".join(t for _, t in outs)
        attrs = " attributes {noinline}" if noinline else ""
        head = f"func.func private @{name}(%x: {in_ty}) -> ({res_tys}){attrs} {{"
        ret = f"  return {', '.join(v for v, _ in outs)} : {res_tys}"
        return "\n".join([head, *em.lines, ret, "}"])

    def _rows_view(self, em: _Emitter) -> str:
        rank = len(self.shape)
        src = _tensor(self.shape, self.elem)
        dst = _tensor((self.rows, self.cols), self.elem)
        if rank == 2:
            return "%x"
        x2 = em.fresh("rows")
        if rank > 2:
            lead = ", ".join(str(i) for i in range(rank - 1))
            em.emit(f"{x2} = tensor.collapse_shape %x [[{lead}], [{rank - 1}]] : {src} into {dst}")
        elif rank == 1:
            em.emit(
                f"{x2} = tensor.expand_shape %x [[0, 1]] output_shape [1, {self.cols}] : "
                f"{src} into {dst}"
            )
        else:
            em.emit(f"{x2} = tensor.expand_shape %x [] output_shape [1, 1] : {src} into {dst}")
        return x2

    def _load(self, arg: str) -> list[str]:
        """Body lines turning an element `arg` into f32 `%v`."""
        if self.elem == "f32":
            return []
        return [f"%v = arith.extf {arg} : {self.elem} to f32"]

    def _v(self, arg: str) -> str:
        return arg if self.elem == "f32" else "%v"

    def _compute(self, em: _Emitter, x2: str) -> dict[str, tuple[str, tuple[int, ...]]]:
        kinds = {it.kind for it in self.items}
        hist = next((it for it in self.items if it.kind == "hist"), None)
        R, C = self.rows, self.cols
        x2_ty = _tensor((R, C), self.elem)
        values: dict[str, tuple[str, tuple[int, ...]]] = {}

        # Pass 1: row partials in one multi-result generic, then one tiny final reduction.
        need = []
        for partial, wanted_by in (
            ("min", {"min"}),
            ("max", {"max"}),
            ("sum", {"mean", "kurtosis"}),
            ("l1", {"l1"}),
            ("sumsq", {"sumsq", "pos_sumsq"}),
            ("nnz", {"nnz"}),
        ):
            if kinds & wanted_by:
                need.append(partial)
        if hist is not None and hist.normalize:
            need.append("maxabs")
        partials: dict[str, str] = {}
        scalars: dict[str, str] = {}
        if need:
            partials = self._row_pass(em, x2, x2_ty, need)
            scalars = self._final_reduce(em, partials, need)
        if "pos_sumsq" in kinds:
            values["pos_sumsq"] = (partials["sumsq"], (R,))
        for k in ("min", "max", "l1", "sumsq", "nnz"):
            if k in kinds:
                values[k] = (scalars[k], ())
        mean = None
        if kinds & {"mean", "kurtosis"}:
            mean = self._scalar_map(em, [scalars["sum"]], "%r = arith.divf %a0, %n : f32")
            if "mean" in kinds:
                values["mean"] = (mean, ())

        # Pass 2: what needs a global scalar first.
        if "kurtosis" in kinds:
            values["kurtosis"] = (self._kurtosis(em, x2, x2_ty, mean), ())
        if hist is not None:
            scale = None
            if hist.normalize:
                scale = self._scalar_map(
                    em, [scalars["maxabs"]], f"%r = arith.addf %a0, %eps : f32",
                    consts={"eps": _f32(EPS_SCALE)},
                )
            values["hist"] = (self._hist(em, x2, x2_ty, hist, scale), (hist.bins,))
        if "elemsig" in kinds:
            values["elemsig"] = (self._elemsig(em, x2, x2_ty), (min(16, self.numel),))
        if kinds & {"chan_maxabs", "chan_outlier"}:
            chan = self._chan_maxabs(em, x2, x2_ty)
            if "chan_maxabs" in kinds:
                values["chan_maxabs"] = (chan, (C,))
            if "chan_outlier" in kinds:
                values["chan_outlier"] = (self._chan_outlier(em, chan), ())
        if "adj_sumsq" in kinds:
            values["adj_sumsq"] = (self._adj(em, x2), (R - 1,))
        return values

    def _row_pass(self, em: _Emitter, x2: str, x2_ty: str, need: list[str]) -> dict[str, str]:
        R = self.rows
        r_ty = _tensor((R,), "f32")
        inits = [em.filled((R,), _ROW_PARTIALS[p][0]) for p in need]
        res = em.fresh("rowp")
        maps = [_map(2, "d0, d1")] + [_map(2, "d0")] * len(need)
        accs = [f"%acc{i}: f32" for i in range(len(need))]
        em.emit(
            f"{res}:{len(need)} = linalg.generic {{indexing_maps = [{', '.join(maps)}], "
            f'iterator_types = ["parallel", "reduction"]}} ins({x2} : {x2_ty}) '
            f"outs({', '.join(inits)} : {', '.join([r_ty] * len(need))}) {{"
        )
        em.emit(f"^bb0(%in: {self.elem}, {', '.join(accs)}):")
        body = self._load("%in")
        v = self._v("%in")
        body += [
            f"%abs = math.absf {v} : f32",
            f"%sq = arith.mulf {v}, {v} : f32",
            "%zero = arith.constant 0.000000e+00 : f32",
            "%onef = arith.constant 1.000000e+00 : f32",
            f"%isnz = arith.cmpf une, {v}, %zero : f32",
            "%nz = arith.select %isnz, %onef, %zero : f32",
        ]
        outs = []
        for i, p in enumerate(need):
            expr = _ROW_PARTIALS[p][1].format(v=v, acc=f"%acc{i}", abs="%abs", sq="%sq", nz="%nz")
            body.append(f"%o{i} = {expr}")
            outs.append(f"%o{i}")
        body.append(f"linalg.yield {', '.join(outs)} : {', '.join(['f32'] * len(outs))}")
        for line in body:
            em.emit("  " + line)
        em.emit(f"}} -> ({', '.join([r_ty] * len(need))})")
        return {p: f"{res}#{i}" for i, p in enumerate(need)}

    def _final_reduce(self, em: _Emitter, partials: dict[str, str], need: list[str]) -> dict[str, str]:
        R = self.rows
        r_ty = _tensor((R,), "f32")
        inits = [em.filled((), _ROW_PARTIALS[p][0]) for p in need]
        res = em.fresh("fin")
        maps = [_map(1, "d0")] * len(need) + [_map(1, "")] * len(need)
        ins = [partials[p] for p in need]
        args = [f"%p{i}: f32" for i in range(len(need))] + [f"%a{i}: f32" for i in range(len(need))]
        em.emit(
            f"{res}:{len(need)} = linalg.generic {{indexing_maps = [{', '.join(maps)}], "
            f'iterator_types = ["reduction"]}} ins({", ".join(ins)} : {", ".join([r_ty] * len(need))}) '
            f"outs({', '.join(inits)} : {', '.join(['tensor<f32>'] * len(need))}) {{"
        )
        em.emit(f"^bb0({', '.join(args)}):")
        outs = []
        for i, p in enumerate(need):
            em.emit(f"  %f{i} = {_ROW_PARTIALS[p][2]} %p{i}, %a{i} : f32")
            outs.append(f"%f{i}")
        em.emit(f"  linalg.yield {', '.join(outs)} : {', '.join(['f32'] * len(outs))}")
        em.emit(f"}} -> ({', '.join(['tensor<f32>'] * len(need))})")
        return {p: f"{res}#{i}" for i, p in enumerate(need)}

    def _scalar_map(
        self, em: _Emitter, ins: list[str], body: str, consts: dict[str, str] | None = None
    ) -> str:
        """A 0-d elementwise generic: `%r` computed from `%a0..` (f32), `%n` = numel."""
        init = em.fresh("e")
        em.emit(f"{init} = tensor.empty() : tensor<f32>")
        res = em.fresh("s")
        maps = [_map(0, "")] * (len(ins) + 1)
        args = [f"%a{i}: f32" for i in range(len(ins))] + ["%out: f32"]
        em.emit(
            f"{res} = linalg.generic {{indexing_maps = [{', '.join(maps)}], iterator_types = []}} "
            f"ins({', '.join(ins)} : {', '.join(['tensor<f32>'] * len(ins))}) "
            f"outs({init} : tensor<f32>) {{"
        )
        em.emit(f"^bb0({', '.join(args)}):")
        em.emit(f"  %n = arith.constant {_f32(float(self.numel))} : f32")
        for name, val in (consts or {}).items():
            em.emit(f"  %{name} = arith.constant {val} : f32")
        for line in body.split("\n"):
            em.emit("  " + line)
        em.emit("  linalg.yield %r : f32")
        em.emit("} -> tensor<f32>")
        return res

    def _kurtosis(self, em: _Emitter, x2: str, x2_ty: str, mean: str) -> str:
        R = self.rows
        r_ty = _tensor((R,), "f32")
        i2, i4 = em.filled((R,), "0.000000e+00"), em.filled((R,), "0.000000e+00")
        res = em.fresh("mom")
        maps = [_map(2, "d0, d1"), _map(2, ""), _map(2, "d0"), _map(2, "d0")]
        em.emit(
            f"{res}:2 = linalg.generic {{indexing_maps = [{', '.join(maps)}], "
            f'iterator_types = ["parallel", "reduction"]}} ins({x2}, {mean} : {x2_ty}, tensor<f32>) '
            f"outs({i2}, {i4} : {r_ty}, {r_ty}) {{"
        )
        em.emit(f"^bb0(%in: {self.elem}, %mu: f32, %a2: f32, %a4: f32):")
        for line in self._load("%in") + [
            f"%d = arith.subf {self._v('%in')}, %mu : f32",
            "%d2 = arith.mulf %d, %d : f32",
            "%d4 = arith.mulf %d2, %d2 : f32",
            "%n2 = arith.addf %a2, %d2 : f32",
            "%n4 = arith.addf %a4, %d4 : f32",
            "linalg.yield %n2, %n4 : f32, f32",
        ]:
            em.emit("  " + line)
        em.emit(f"}} -> ({r_ty}, {r_ty})")
        fin = self._final_reduce(em, {"sum": f"{res}#0", "sumsq": f"{res}#1"}, ["sum", "sumsq"])
        return self._scalar_map(
            em,
            [fin["sum"], fin["sumsq"]],
            "%m2 = arith.divf %a0, %n : f32\n"
            "%m4 = arith.divf %a1, %n : f32\n"
            "%m22 = arith.mulf %m2, %m2 : f32\n"
            "%den = arith.addf %m22, %eps : f32\n"
            "%r = arith.divf %m4, %den : f32",
            consts={"eps": _f32(EPS_RATIO)},
        )

    def _hist(self, em: _Emitter, x2: str, x2_ty: str, h: StatItem, scale: str | None) -> str:
        """Bin index per element once (elementwise), then a per-row one-hot count (bins innermost).

        The index is `floor((u - lo) / width)` corrected against the f32 edges `lo + k·width`,
        which gives numpy's rule exactly whenever those edges are exact in f32 (true for the
        default ranges [-1, 1] and [-6, 6] with 32 bins): `e_k <= u < e_k+1`, the last bin also
        takes `u == hi`, values outside `[lo, hi]` and NaN get index -1 (dropped).
        """
        R, C, B = self.rows, self.cols, h.bins
        width = (h.hi - h.lo) / B
        idx_ty = _tensor((R, C), "i32")
        e = em.fresh("e")
        em.emit(f"{e} = tensor.empty() : {idx_ty}")
        ins, tys, maps, args = [x2], [x2_ty], [_map(2, "d0, d1")], [f"%in: {self.elem}"]
        if scale is not None:
            ins.append(scale)
            tys.append("tensor<f32>")
            maps.append(_map(2, ""))
            args.append("%s: f32")
        maps.append(_map(2, "d0, d1"))
        args.append("%o: i32")
        bins = em.fresh("bin")
        em.emit(
            f"{bins} = linalg.generic {{indexing_maps = [{', '.join(maps)}], "
            f'iterator_types = ["parallel", "parallel"]}} ins({", ".join(ins)} : {", ".join(tys)}) '
            f"outs({e} : {idx_ty}) {{"
        )
        em.emit(f"^bb0({', '.join(args)}):")
        body = self._load("%in")
        v = self._v("%in")
        if scale is not None:
            body.append(f"%u = arith.divf {v}, %s : f32")
            v = "%u"
        body += [
            f"%lo = arith.constant {_f32(h.lo)} : f32",
            f"%hi = arith.constant {_f32(h.hi)} : f32",
            f"%w = arith.constant {_f32(width)} : f32",
            f"%invw = arith.constant {_f32(1.0 / width)} : f32",
            "%c0 = arith.constant 0 : i32",
            "%c1 = arith.constant 1 : i32",
            "%cm1 = arith.constant -1 : i32",
            f"%clast = arith.constant {B - 1} : i32",
            f"%t0 = arith.subf {v}, %lo : f32",
            "%t1 = arith.mulf %t0, %invw : f32",
            "%t2 = math.floor %t1 : f32",
            # clamp in f32 first so the int conversion never overflows
            "%fz = arith.constant 0.000000e+00 : f32",
            f"%fl = arith.constant {_f32(float(B - 1))} : f32",
            "%t3 = arith.maximumf %t2, %fz : f32",
            "%t4 = arith.minimumf %t3, %fl : f32",
            "%k0 = arith.fptosi %t4 : f32 to i32",
            "%kf = arith.sitofp %k0 : i32 to f32",
            "%ek = arith.mulf %kf, %w : f32",
            "%elo = arith.addf %lo, %ek : f32",
            "%ehi = arith.addf %elo, %w : f32",
            f"%below = arith.cmpf olt, {v}, %elo : f32",
            f"%above = arith.cmpf oge, {v}, %ehi : f32",
            "%notlast = arith.cmpi slt, %k0, %clast : i32",
            "%up = arith.andi %above, %notlast : i1",
            "%kdn = arith.subi %k0, %c1 : i32",
            "%kup = arith.addi %k0, %c1 : i32",
            "%k1 = arith.select %below, %kdn, %k0 : i32",
            "%k2 = arith.select %up, %kup, %k1 : i32",
            f"%ge = arith.cmpf oge, {v}, %lo : f32",
            f"%le = arith.cmpf ole, {v}, %hi : f32",
            "%inr = arith.andi %ge, %le : i1",
            "%k = arith.select %inr, %k2, %cm1 : i32",
            "linalg.yield %k : i32",
        ]
        for line in body:
            em.emit("  " + line)
        em.emit(f"}} -> {idx_ty}")
        init = em.filled((R, B), "0.000000e+00")
        rows = em.fresh("hrows")
        em.emit(
            f"{rows} = linalg.generic {{indexing_maps = [{_map(3, 'd0, d1')}, {_map(3, 'd0, d2')}], "
            f'iterator_types = ["parallel", "reduction", "parallel"]}} ins({bins} : {idx_ty}) '
            f"outs({init} : {_tensor((R, B), 'f32')}) {{"
        )
        em.emit("^bb0(%k: i32, %acc: f32):")
        for line in [
            "%b = linalg.index 2 : index",
            "%bi = arith.index_cast %b : index to i32",
            "%hit = arith.cmpi eq, %k, %bi : i32",
            "%one = arith.constant 1.000000e+00 : f32",
            "%zero = arith.constant 0.000000e+00 : f32",
            "%cnt = arith.select %hit, %one, %zero : f32",
            "%next = arith.addf %acc, %cnt : f32",
            "linalg.yield %next : f32",
        ]:
            em.emit("  " + line)
        em.emit(f"}} -> {_tensor((R, B), 'f32')}")
        binit = em.filled((B,), "0.000000e+00")
        res = em.fresh("hist")
        em.emit(
            f"{res} = linalg.generic {{indexing_maps = [{_map(2, 'd0, d1')}, {_map(2, 'd1')}], "
            f'iterator_types = ["reduction", "parallel"]}} ins({rows} : {_tensor((R, B), "f32")}) '
            f"outs({binit} : tensor<{B}xf32>) {{"
        )
        em.emit("^bb0(%c: f32, %acc: f32):")
        em.emit("  %s = arith.addf %acc, %c : f32")
        em.emit("  linalg.yield %s : f32")
        em.emit(f"}} -> tensor<{B}xf32>")
        return res

    def _elemsig(self, em: _Emitter, x2: str, x2_ty: str) -> str:
        k = min(16, self.numel)
        init = em.fresh("e")
        em.emit(f"{init} = tensor.empty() : tensor<{k}xf32>")
        res = em.fresh("sig")
        em.emit(
            f"{res} = linalg.generic {{indexing_maps = [{_map(1, 'd0')}], "
            f'iterator_types = ["parallel"]}} outs({init} : tensor<{k}xf32>) {{'
        )
        em.emit("^bb0(%out: f32):")
        body = [
            "%j = linalg.index 0 : index",
            f"%n = arith.constant {self.numel} : index",
            f"%k = arith.constant {k} : index",
            f"%cols = arith.constant {self.cols} : index",
            "%jn = arith.muli %j, %n : index",
            "%flat = arith.divui %jn, %k : index",
            "%r = arith.divui %flat, %cols : index",
            "%c = arith.remui %flat, %cols : index",
            f"%in = tensor.extract {x2}[%r, %c] : {x2_ty}",
        ]
        body += self._load("%in")
        body.append(f"linalg.yield {self._v('%in')} : f32")
        for line in body:
            em.emit("  " + line)
        em.emit(f"}} -> tensor<{k}xf32>")
        return res

    def _chan_maxabs(self, em: _Emitter, x2: str, x2_ty: str) -> str:
        """max|x| per last-axis channel, reducing over all rows."""
        C = self.cols
        init = em.filled((C,), "0.000000e+00")
        res = em.fresh("chan")
        em.emit(
            f"{res} = linalg.generic {{indexing_maps = [{_map(2, 'd0, d1')}, {_map(2, 'd1')}], "
            f'iterator_types = ["reduction", "parallel"]}} ins({x2} : {x2_ty}) '
            f"outs({init} : tensor<{C}xf32>) {{"
        )
        em.emit(f"^bb0(%in: {self.elem}, %acc: f32):")
        for line in self._load("%in") + [
            f"%abs = math.absf {self._v('%in')} : f32",
            "%m = arith.maximumf %abs, %acc : f32",
            "linalg.yield %m : f32",
        ]:
            em.emit("  " + line)
        em.emit(f"}} -> tensor<{C}xf32>")
        return res

    def _chan_outlier(self, em: _Emitter, chan: str) -> str:
        C = self.cols
        imax, isum = em.filled((), "0.000000e+00"), em.filled((), "0.000000e+00")
        red = em.fresh("cred")
        em.emit(
            f"{red}:2 = linalg.generic {{indexing_maps = [{_map(1, 'd0')}, {_map(1, '')}, "
            f'{_map(1, "")}], iterator_types = ["reduction"]}} ins({chan} : tensor<{C}xf32>) '
            f"outs({imax}, {isum} : tensor<f32>, tensor<f32>) {{"
        )
        em.emit("^bb0(%c: f32, %am: f32, %as: f32):")
        em.emit("  %m = arith.maximumf %c, %am : f32")
        em.emit("  %s = arith.addf %as, %c : f32")
        em.emit("  linalg.yield %m, %s : f32, f32")
        em.emit("} -> (tensor<f32>, tensor<f32>)")
        return self._scalar_map(
            em,
            [f"{red}#0", f"{red}#1"],
            f"%chans = arith.constant {_f32(float(C))} : f32\n"
            "%mean = arith.divf %a1, %chans : f32\n"
            "%den = arith.addf %mean, %eps : f32\n"
            "%r = arith.divf %a0, %den : f32",
            consts={"eps": _f32(EPS_RATIO)},
        )

    def _adj(self, em: _Emitter, x2: str) -> str:
        R, C = self.rows, self.cols
        src = _tensor((R, C), self.elem)
        part = _tensor((R - 1, C), self.elem)
        nxt, prev = em.fresh("next"), em.fresh("prev")
        em.emit(f"{nxt} = tensor.extract_slice {x2}[1, 0] [{R - 1}, {C}] [1, 1] : {src} to {part}")
        em.emit(f"{prev} = tensor.extract_slice {x2}[0, 0] [{R - 1}, {C}] [1, 1] : {src} to {part}")
        init = em.filled((R - 1,), "0.000000e+00")
        res = em.fresh("adj")
        em.emit(
            f"{res} = linalg.generic {{indexing_maps = [{_map(2, 'd0, d1')}, {_map(2, 'd0, d1')}, "
            f'{_map(2, "d0")}], iterator_types = ["parallel", "reduction"]}} '
            f"ins({nxt}, {prev} : {part}, {part}) outs({init} : tensor<{R - 1}xf32>) {{"
        )
        em.emit(f"^bb0(%a: {self.elem}, %b: {self.elem}, %acc: f32):")
        if self.elem == "f32":
            lines = ["%d = arith.subf %a, %b : f32"]
        else:
            lines = [
                f"%fa = arith.extf %a : {self.elem} to f32",
                f"%fb = arith.extf %b : {self.elem} to f32",
                "%d = arith.subf %fa, %fb : f32",
            ]
        lines += ["%d2 = arith.mulf %d, %d : f32", "%s = arith.addf %acc, %d2 : f32", "linalg.yield %s : f32"]
        for line in lines:
            em.emit("  " + line)
        em.emit(f"}} -> tensor<{R - 1}xf32>")
        return res
