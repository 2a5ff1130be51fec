"""How opscope statistics are computed: one stats kernel per (tensor type, stat list, count).

`StatsKernel` writes a `func.func` in linalg/tensor/arith/math that takes `count` tensors of
one type and returns all their statistics packed into one 1-D f32 tensor (or one result per
statistic). It is shaped for IREE's dispatch formation:

* Stacked: the tensors are viewed as rows `[R, C]` (leading dims flattened, C = last dim)
  and concatenated into one `[B, R, C]` stack; every stage is one `linalg.generic` with the
  tensor index as its leading parallel dimension, so a kernel costs the same dispatches
  (~14 with the default set) for one tensor or a hundred (dispatches, not arithmetic,
  dominate small tensors; and one dispatch of B small tensors keeps every core busy).
  Tensors above `STACK_MAX_NUMEL` elements are computed one at a time, uncopied.
* One row-parallel pass computes every plain row partial (min, max, Σx, Σ|x|, Σx², nnz;
  max|x| is max(-min, max)), one tiny generic reduces them (partial-then-final reductions
  beat reducing straight to scalars); with `row_lanes` each row keeps one partial per
  vector lane (no horizontal reduction per step on CPUs).
* What needs a global scalar first takes a second pass: kurtosis needs the mean, the
  normalized histogram needs max|x|, each derived in the pass's own body. The histogram
  computes one bin index per element, then counts them with one counter per (slab, bin,
  vector lane), so the innermost loop is a vector compare and add with no horizontal
  reduction; counters are i32, or i8 where the target counts i8 right (`hist_counts`).
* Per-tensor scalar post-processing lives in small [B] generics, never in a host-side
  `tensor.extract`, which would cost a device round trip per site.
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
# Tensors of one kernel are computed as one stack [B, R, C] (a `tensor.concat`, which IREE
# 3.13 copies: it does not write producers in place), so B tensors cost one set of
# dispatches. Above this many elements a tensor is computed alone: copying it costs more
# than the dispatches it saves (~0.35 ns an element against ~3 us a dispatch, x14).
STACK_MAX_NUMEL = 1 << 17
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
    return f"0x{struct.unpack('<I', struct.pack('<f', x))[0]:08X}"


def _tensor(shape: tuple[int, ...], elem: str) -> str:
    return "tensor<" + "".join(f"{d}x" for d in shape) + elem + ">"


def _dims(n: int) -> str:
    """`d0, d1, ..., d{n-1}`: the dimensions of an n-d iteration space."""
    return ", ".join(f"d{i}" for i in range(n))


def _map(dims: int, results: str) -> str:
    return f"affine_map<({_dims(dims)}) -> ({results})>"


def channel_view(
    shape: tuple[int, ...], channel_dims: tuple[int, ...] | None = None
) -> tuple[tuple[int, ...] | None, tuple[int, ...]]:
    """How a tensor whose channels are `channel_dims` (default: the last dim) is read: the
    permutation that moves them last, in order (None when they already are), and the viewed
    shape: the other dims, then one channel dim of their product. An NCHW activation with
    channel dims (1,) is read as NHWC; a grouped [N, G, C/G, H, W] one with (1, 2) as
    [N, H, W, C]. Every statistic of the tensor reads this view."""
    rank = len(shape)
    dims = tuple(channel_dims) if channel_dims else ((rank - 1,) if rank else ())
    others = tuple(d for d in range(rank) if d not in dims)
    perm = others + dims
    channels = 1
    for d in dims:
        channels *= shape[d]
    view = tuple(shape[d] for d in others) + ((channels,) if dims else ())
    return (None if perm == tuple(range(rank)) else perm), view


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
        ins_txt = f"ins({', '.join(o.value for o in ins)} : {', '.join(o.type for o in ins)}) " if ins else ""
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

    def __init__(
        self,
        shape: tuple[int, ...],
        elem: str,
        items: list[StatItem],
        count: int = 1,
        per_dispatch: int = 0,
        hist_counts: str = "i32",
        row_lanes: int = 0,
        channel_dims: tuple[int, ...] | None = None,
    ):
        self.shape = tuple(shape)
        self.channel_dims = tuple(channel_dims) if channel_dims else None
        # The tensors are read channel-last (`channel_view`): permuted, then channels merged.
        self.perm, self.view = channel_view(self.shape, self.channel_dims)
        self.elem = elem
        self.items = list(items)
        self.count = count
        self.per_dispatch = per_dispatch  # most tensors in one stack; 0: all (see `stack_size`)
        if hist_counts not in HIST_LANES:
            raise ValueError(f"hist_counts must be one of {', '.join(HIST_LANES)}, got '{hist_counts}'")
        self.hist_counts = hist_counts  # the histogram's lane counts (`HIST_LANES`)
        if row_lanes < 0:
            raise ValueError(f"row_lanes must be >= 0, got {row_lanes}")
        self.lanes_wanted = row_lanes  # lane partials per row of the row reductions (0: straight)
        self.numel = 1
        for d in self.shape:
            self.numel *= d
        self.cols = self.view[-1] if self.view else 1
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
            "adj_sumsq": self.view[0] - 1 if len(self.view) == 2 else 0,
        }[item.kind]

    @property
    def stack_size(self) -> int:
        """Tensors computed as one stack (one set of dispatches): all of them, or `per_dispatch`
        if smaller; one at a time above STACK_MAX_NUMEL elements, where copying a tensor into
        the stack costs more than the dispatches it saves."""
        if self.numel > STACK_MAX_NUMEL:
            return 1
        return min(self.per_dispatch, self.count) if self.per_dispatch else self.count

    def _partials(self) -> list[str]:
        """The row partials the requested statistics need, in a fixed order."""
        kinds = {it.kind for it in self.items}
        if any(it.kind == "hist" and it.normalize for it in self.items):
            kinds = kinds | {"min", "max"}  # max|x| = max(-min, max): no partial of its own
        return [
            p
            for p, wanted in (
                ("min", {"min"}),
                ("max", {"max"}),
                ("sum", {"mean", "kurtosis"}),
                ("l1", {"l1"}),
                ("sumsq", {"sumsq", "pos_sumsq"}),
                ("nnz", {"nnz"}),
            )
            if kinds & wanted
        ]

    @property
    def tensor_length(self) -> int:
        """Packed f32 elements per tensor."""
        return sum(self.length(it) for it in self.items)

    def check(self) -> str | None:
        """Why this kernel cannot be built, or None."""
        rank = len(self.view)
        if self.numel == 0:
            return "cannot compute statistics of an empty tensor"
        if self.channel_dims is not None and (
            len(set(self.channel_dims)) != len(self.channel_dims)
            or not all(0 <= d < len(self.shape) for d in self.channel_dims)
            or len(self.channel_dims) >= len(self.shape)
        ):
            return (
                f"channel_dims {list(self.channel_dims)} must be distinct dims of the rank-{len(self.shape)} "
                "tensor, leaving at least one position dim"
            )
        for it in self.items:
            if it.kind in ("chan_maxabs", "chan_outlier", "pos_sumsq") and rank < 2:
                return f"{it.kind} needs a tensor of rank >= 2, got rank {rank}"
            if it.kind == "adj_sumsq" and (rank != 2 or self.view[0] < 2):
                return f"adj_sumsq needs a 2-D tensor with >= 2 rows, got {self.view}"
        return None

    # -- the function --------------------------------------------------------------------
    def function(self, name: str, pack: bool = True, noinline: bool = True) -> str:
        """The kernel as a private `func.func` named `name`: the statistics of `count` tensors,
        `stack_size` at a time, each stack one [B, R, C] tensor that every stage reads once."""
        problem = self.check()
        if problem:
            raise ValueError(problem)
        em = _Emitter()
        step = self.stack_size
        chunks: list[tuple[int, dict[str, tuple[str, tuple[int, ...]]]]] = []
        for first in range(0, self.count, step):
            B = min(step, self.count - first)
            stack = self._stack(em, [f"%x{t}" for t in range(first, first + B)])
            chunks.append((B, _Stack(self, em, stack, B).compute()))
        outs: list[tuple[str, str]] = []
        if pack:
            outs.append(self._pack(em, chunks))
        else:
            for B, values in chunks:
                for b in range(B):
                    for it in self.items:
                        val, vshape = values[it.kind]
                        n = self.length(it)
                        one = em.fresh("one")
                        if vshape == ():
                            em.emit(
                                f"{one} = tensor.extract_slice {val}[{b}] [1] [1] : "
                                f"{_tensor((B,), 'f32')} to tensor<1xf32>"
                            )
                        else:
                            em.emit(
                                f"{one} = tensor.extract_slice {val}[{b}, 0] [1, {n}] [1, 1] : "
                                f"{_tensor((B, n), 'f32')} to {_tensor((n,), 'f32')}"
                            )
                        outs.append((one, _tensor((n,), "f32")))
        in_ty = _tensor(self.shape, self.elem)
        params = ", ".join(f"%x{t}: {in_ty}" for t in range(self.count))
        res_tys = ", ".join(t for _, t in outs)
        attrs = " attributes {noinline}" if noinline else ""
        head = f"func.func private @{name}({params}) -> ({res_tys}){attrs} {{"
        ret = f"  return {', '.join(v for v, _ in outs)} : {res_tys}"
        return "\n".join([head, *em.lines, ret, "}"])

    def _stack(self, em: _Emitter, xs: list[str]) -> str:
        """The tensors `xs` as one [B, R, C] stack: a view for one, a concatenation for more
        (each first transposed channel-last when its channels are not the last dim)."""
        R, C = self.rows, self.cols
        rows_ty, one_ty = _tensor((R, C), self.elem), _tensor((1, R, C), self.elem)
        shape = self.shape if self.perm is None else tuple(self.shape[d] for d in self.perm)
        src = _tensor(shape, self.elem)
        rank = len(shape)
        k = len(self.channel_dims) if self.channel_dims else 1  # trailing dims that make C
        ones = []
        for x in xs:
            if self.perm is not None:
                t = em.fresh("chan")
                em.emit(
                    f"{t} = linalg.transpose ins({x} : {_tensor(self.shape, self.elem)}) "
                    f"outs({em.empty(src)} : {src}) permutation = [{', '.join(map(str, self.perm))}]"
                )
                x = t
            v = em.fresh("one")
            if rank == 2 and k == 1:
                em.emit(f"{v} = tensor.expand_shape {x} [[0, 1], [2]] output_shape [1, {R}, {C}] : {src} into {one_ty}")
            elif rank >= 2:  # leading dims to rows, channel dims to C: [a, b, C] -> [a·b, C] -> [1, a·b, C]
                lead = ", ".join(str(i) for i in range(rank - k))
                chans = ", ".join(str(i) for i in range(rank - k, rank))
                em.emit(f"{v} = tensor.collapse_shape {x} [[{lead}], [{chans}]] : {src} into {rows_ty}")
                w = em.fresh("one")
                em.emit(
                    f"{w} = tensor.expand_shape {v} [[0, 1], [2]] output_shape [1, {R}, {C}] : {rows_ty} into {one_ty}"
                )
                v = w
            elif rank == 1:
                em.emit(f"{v} = tensor.expand_shape {x} [[0, 1, 2]] output_shape [1, 1, {C}] : {src} into {one_ty}")
            else:
                em.emit(f"{v} = tensor.expand_shape {x} [] output_shape [1, 1, 1] : {src} into {one_ty}")
            ones.append(v)
        if len(ones) == 1:
            return ones[0]
        st = em.fresh("stack")
        em.emit(
            f"{st} = tensor.concat dim(0) {', '.join(ones)} : ({', '.join(one_ty for _ in ones)}) "
            f"-> {_tensor((len(ones), R, C), self.elem)}"
        )
        return st

    def offset(self, t: int, index: int) -> int:
        """Where statistic `items[index]` of tensor `t` starts in the packed result.

        Stat-major per stack: a stack of B tensors starting at tensor f holds B·tensor_length
        elements from f·tensor_length on, statistic by statistic, each [B, length] row-major,
        so every statistic is one contiguous slice (a plain copy; a tensor-major layout made
        IREE 3.13 emit one strided "slow_memcpy" dispatch per statistic)."""
        step = self.stack_size
        first = (t // step) * step
        B = min(step, self.count - first)
        before = sum(self.length(it) for it in self.items[:index])
        return first * self.tensor_length + B * before + (t - first) * self.length(self.items[index])

    def _pack(self, em: _Emitter, chunks) -> tuple[str, str]:
        """Every statistic of every tensor in one 1-D f32 tensor, laid out as `offset` says."""
        flat_ty = _tensor((self.count * self.tensor_length,), "f32")
        cur, first = em.empty(flat_ty), 0
        for B, values in chunks:
            for i, it in enumerate(self.items):
                val, vshape = values[it.kind]
                n = self.length(it)
                if vshape != ():
                    col = em.fresh("col")
                    em.emit(
                        f"{col} = tensor.collapse_shape {val} [[0, 1]] : "
                        f"{_tensor((B, n), 'f32')} into {_tensor((B * n,), 'f32')}"
                    )
                    val = col
                nxt = em.fresh("pack")
                em.emit(
                    f"{nxt} = tensor.insert_slice {val} into {cur}[{self.offset(first, i)}] [{B * n}] [1] : "
                    f"{_tensor((B * n,), 'f32')} into {flat_ty}"
                )
                cur = nxt
            first += B
        return cur, flat_ty

    @property
    def row_lanes(self) -> int:
        """Lanes a row reduction keeps apart: `row_lanes`, else half of it, where a row holds two
        vectors of them; 0 reduces each row straight."""
        want = self.lanes_wanted
        return next((L for L in (want, want // 2) if L >= 2 and self.cols % L == 0 and self.cols // L >= 2), 0)

    def _hist_layout(self, bins: int) -> tuple[int, int, int, str] | None:
        """(S, N, L, index type) splitting one tensor's flat bin indices into S slabs of N·L, or None.

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


class _Stack:
    """The stages of one stack [B, R, C] of a kernel: every generic has the tensor index b as
    its leading parallel dimension d0, so B tensors cost one set of dispatches."""

    def __init__(self, k: StatsKernel, em: _Emitter, x: str, B: int):
        self.k, self.em, self.x, self.B = k, em, x, B
        self.R, self.C, self.L = k.rows, k.cols, k.row_lanes
        self.elem = k.elem
        self.x_ty = _tensor((B, self.R, self.C), k.elem)
        self.b_ty = _tensor((B,), "f32")

    # -- helpers -------------------------------------------------------------------------
    def _load(self, arg: str, out: str) -> list[str]:
        """Body lines making f32 `out` from element `arg` (nothing to do for f32)."""
        return [] if self.elem == "f32" else [f"{out} = arith.extf {arg} : {self.elem} to f32"]

    def _v(self, arg: str, out: str) -> str:
        return arg if self.elem == "f32" else out

    def _yield(self, names: list[str], ty: str = "f32") -> str:
        return f"linalg.yield {', '.join(names)} : {', '.join(ty for _ in names)}"

    # Row reductions: [B, rows, C] -> [B, rows, L] lane partials (or [B, rows] when L = 0).
    def _row_dims(self) -> int:
        return 4 if self.L else 3

    def _row_iters(self) -> list[str]:
        return ["parallel", "parallel", "parallel", "reduction"] if self.L else ["parallel", "parallel", "reduction"]

    def _row_acc(self, rows: int) -> tuple[tuple[int, ...], str]:
        """Shape and indexing map of a row reduction's accumulator."""
        B, L = self.B, self.L
        return ((B, rows, L), _map(4, "d0, d1, d2")) if L else ((B, rows), _map(3, "d0, d1"))

    def _row_in(self, x: str, rows: int, arg: str) -> Operand:
        """`x` ([B, rows, C]) as the input of a row reduction: viewed as [B, rows, C/L, L]."""
        B, C, L, em = self.B, self.C, self.L, self.em
        ty = _tensor((B, rows, C), self.elem)
        if not L:
            return Operand(x, ty, _map(3, "d0, d1, d2"), arg, self.elem)
        v_ty = _tensor((B, rows, C // L, L), self.elem)
        v = em.fresh("lanes")
        em.emit(
            f"{v} = tensor.expand_shape {x} [[0], [1], [2, 3]] output_shape [{B}, {rows}, {C // L}, {L}] : "
            f"{ty} into {v_ty}"
        )
        return Operand(v, v_ty, _map(4, "d0, d1, d3, d2"), arg, self.elem)

    def _lane_sums(self, hint: str, parts: list[str], rows: int) -> list[str]:
        """Σ over lanes of several [B, rows, L] partials, to [B, rows], in one generic (no-op at L = 0)."""
        B, L, em = self.B, self.L, self.em
        if not L:
            return parts
        p_ty, r_ty = _tensor((B, rows, L), "f32"), _tensor((B, rows), "f32")
        ins = [Operand(p, p_ty, _map(3, "d0, d1, d2"), f"%p{i}", "f32") for i, p in enumerate(parts)]
        outs = [
            Operand(em.filled((B, rows), ZERO), r_ty, _map(3, "d0, d1"), f"%a{i}", "f32") for i in range(len(parts))
        ]
        body = [f"%s{i} = arith.addf %a{i}, %p{i} : f32" for i in range(len(parts))]
        body.append(self._yield([f"%s{i}" for i in range(len(parts))]))
        return em.generic(hint, ["parallel", "parallel", "reduction"], ins, outs, body)

    def _totals(self, hint: str, parts: list[str], ops: list[str], inits: list[str]) -> list[str]:
        """Row partials ([B, R] or [B, R, L]) to one value per tensor ([B]), combined by `ops`."""
        shape = self._row_acc(self.R)[0]
        dims = len(shape)
        p_ty = _tensor(shape, "f32")
        ins = [Operand(p, p_ty, _map(dims, _dims(dims)), f"%p{i}", "f32") for i, p in enumerate(parts)]
        outs = [
            Operand(self.em.filled((self.B,), init), self.b_ty, _map(dims, "d0"), f"%a{i}", "f32")
            for i, init in enumerate(inits)
        ]
        body = [f"%s{i} = {op} %p{i}, %a{i} : f32" for i, op in enumerate(ops)]
        body.append(self._yield([f"%s{i}" for i in range(len(parts))]))
        return self.em.generic(hint, ["parallel"] + ["reduction"] * (dims - 1), ins, outs, body)

    def _scalars(
        self, ins: dict[str, str], exprs: list[tuple[str, list[str]]], consts: dict[str, str] | None = None
    ) -> list[str]:
        """One elementwise generic over the B tensors: inputs `ins` (name -> [B] value) and
        outputs `%<name>` per expr."""
        opnds = [Operand(v, self.b_ty, _map(1, "d0"), f"%{k}", "f32") for k, v in ins.items()]
        outs = [Operand(self.em.empty(self.b_ty), self.b_ty, _map(1, "d0"), f"%out_{n}", "f32") for n, _ in exprs]
        body = [f"%n = arith.constant {_f32(float(self.k.numel))} : f32"]
        body += [f"%{k} = arith.constant {v} : f32" for k, v in (consts or {}).items()]
        for _, lines in exprs:
            body += lines
        body.append(self._yield([f"%{n}" for n, _ in exprs]))
        return self.em.generic("fin", ["parallel"], opnds, outs, body)

    # -- the stages ----------------------------------------------------------------------
    def compute(self) -> dict[str, tuple[str, tuple[int, ...]]]:
        """kind -> ([B, ...] value, per-tensor shape) for every requested statistic."""
        k = self.k
        kinds = {it.kind for it in k.items}
        hist = next((it for it in k.items if it.kind == "hist"), None)
        R, C = self.R, self.C
        values: dict[str, tuple[str, tuple[int, ...]]] = {}

        need = k._partials()
        partials = self._row_pass(need) if need else {}
        totals = self._final_reduce(partials, need) if need else {}
        if "pos_sumsq" in kinds:
            values["pos_sumsq"] = (self._lane_sums("pos", [partials["sumsq"]], R)[0], (R,))
        for kind in ("min", "max", "l1", "sumsq", "nnz"):
            if kind in kinds:
                values[kind] = (totals[kind], ())

        # The second passes derive the global scalars they need (the mean, the histogram
        # scale) from the totals in their own body: loop-invariant, so computed once per
        # tile, and no generic (one dispatch) in between.
        moments = self._moments(totals["sum"]) if "kurtosis" in kinds else None
        if hist is not None:
            scale = (totals["min"], totals["max"]) if hist.normalize else None
            values["hist"] = (self._hist(hist, scale), (hist.bins,))
        if "elemsig" in kinds:
            values["elemsig"] = (self._elemsig(), (min(ELEMSIG_MAX, k.numel),))
        chan = None
        if kinds & {"chan_maxabs", "chan_outlier"}:
            chan = self._chan_maxabs()
            if "chan_maxabs" in kinds:
                values["chan_maxabs"] = (chan, (C,))
        if "adj_sumsq" in kinds:
            values["adj_sumsq"] = (self._adj(), (R - 1,))

        # Final scalars: mean, kurtosis and channel peak/mean, in one elementwise generic.
        ins, exprs, names = {}, [], []
        if "mean" in kinds:
            ins["sum"] = totals["sum"]
            exprs.append(("mean", ["%mean = arith.divf %sum, %n : f32"]))
            names.append("mean")
        if moments is not None:
            ins["s2"], ins["s4"] = moments
            exprs.append(
                (
                    "kurt",
                    [
                        "%m2 = arith.divf %s2, %n : f32",
                        "%m4 = arith.divf %s4, %n : f32",
                        "%m22 = arith.mulf %m2, %m2 : f32",
                        "%den = arith.addf %m22, %eps : f32",
                        "%kurt = arith.divf %m4, %den : f32",
                    ],
                )
            )
            names.append("kurtosis")
        if "chan_outlier" in kinds:
            ins["cmax"], ins["csum"] = self._chan_reduce(chan)
            exprs.append(
                (
                    "cout",
                    [
                        "%cmean = arith.divf %csum, %chans : f32",
                        "%cden = arith.addf %cmean, %eps : f32",
                        "%cout = arith.divf %cmax, %cden : f32",
                    ],
                )
            )
            names.append("chan_outlier")
        if exprs:
            res = self._scalars(ins, exprs, {"eps": _f32(EPS_RATIO), "chans": _f32(float(C))})
            for name, v in zip(names, res):
                values[name] = (v, ())
        return values

    def _row_pass(self, need: list[str]) -> dict[str, str]:
        """Row partials (min, max, Σx, Σ|x|, Σx², nnz as needed) in one generic."""
        acc_shape, acc_map = self._row_acc(self.R)
        r_ty = _tensor(acc_shape, "f32")
        ins = [self._row_in(self.x, self.R, "%in")]
        v = self._v("%in", "%v")
        body = [f"%zero = arith.constant {ZERO} : f32", "%one = arith.constant 1.000000e+00 : f32"] + self._load(
            "%in", "%v"
        )
        if "l1" in need:
            body.append(f"%abs = math.absf {v} : f32")
        if "sumsq" in need:
            body.append(f"%sq = arith.mulf {v}, {v} : f32")
        if "nnz" in need:
            body += [f"%isnz = arith.cmpf une, {v}, %zero : f32", "%nz = arith.select %isnz, %one, %zero : f32"]
        outs = []
        for p in need:
            outs.append(Operand(self.em.filled(acc_shape, _ROW_PARTIALS[p][0]), r_ty, acc_map, f"%a_{p}", "f32"))
            expr = _ROW_PARTIALS[p][1].format(v=v, acc=f"%a_{p}", abs="%abs", sq="%sq", nz="%nz")
            body.append(f"%r_{p} = {expr}")
        body.append(self._yield([f"%r_{p}" for p in need]))
        return dict(zip(need, self.em.generic("rowp", self._row_iters(), ins, outs, body)))

    def _final_reduce(self, partials: dict[str, str], need: list[str]) -> dict[str, str]:
        """Every row partial to one value per tensor, in one generic."""
        res = self._totals(
            "tot", [partials[p] for p in need], [_ROW_PARTIALS[p][2] for p in need], [_ROW_PARTIALS[p][0] for p in need]
        )
        return dict(zip(need, res))

    def _moments(self, sums: str) -> tuple[str, str]:
        """Σ(x-μ)² and Σ(x-μ)⁴ per tensor, μ = Σx / n from its total `sums` (the same division
        as the mean statistic): a row pass, then a final sum."""
        acc_shape, acc_map = self._row_acc(self.R)
        r_ty, dims = _tensor(acc_shape, "f32"), self._row_dims()
        ins = [self._row_in(self.x, self.R, "%in"), Operand(sums, self.b_ty, _map(dims, "d0"), "%sum", "f32")]
        outs = [
            Operand(self.em.filled(acc_shape, ZERO), r_ty, acc_map, "%a2", "f32"),
            Operand(self.em.filled(acc_shape, ZERO), r_ty, acc_map, "%a4", "f32"),
        ]
        body = (
            [f"%n = arith.constant {_f32(float(self.k.numel))} : f32"]
            + self._load("%in", "%v")
            + [
                "%mu = arith.divf %sum, %n : f32",
                f"%d = arith.subf {self._v('%in', '%v')}, %mu : f32",
                "%d2 = arith.mulf %d, %d : f32",
                "%d4 = arith.mulf %d2, %d2 : f32",
                "%n2 = arith.addf %a2, %d2 : f32",
                "%n4 = arith.addf %a4, %d4 : f32",
                self._yield(["%n2", "%n4"]),
            ]
        )
        rows = self.em.generic("mom", self._row_iters(), ins, outs, body)
        s2, s4 = self._totals("momt", rows, ["arith.addf", "arith.addf"], [ZERO, ZERO])
        return s2, s4

    def _hist(self, h: StatItem, scale: tuple[str, str] | None) -> str:
        """Bin index of every element (elementwise), then one-hot counts, then their sum.

        The index is `floor((u - lo) / width)` corrected against the f32 edges `lo + k·width`,
        which is numpy's rule exactly whenever those edges are exact in f32 (true for the
        default ranges [-1, 1] and [-6, 6] with 32 bins): `e_k <= u < e_k+1`, the last bin also
        takes `u == hi`; values outside `[lo, hi]` and NaN get index -1 and are dropped.
        Normalized (`scale`: each tensor's min and max), u = x / (max(-min, max) +
        EPS_SCALE), the scale computed in the body (loop-invariant).

        Counting (`_hist_lanes`): each tensor's flat indices are viewed as [S, N, L] and every
        lane keeps its own count per bin, so the innermost loop is one compare and one add
        per vector of L indices and bin, with no horizontal reduction (per-row counts made
        IREE reduce the lanes at every step: 2x slower). Indices and counts are i32 (16
        lanes), or with `hist_counts="i8"` i8 (64 lanes, at most 255 indices a lane: exact,
        see `HIST_LANES`; ~1.6x faster on llvm-cpu, miscounted by IREE 3.13's SPIR-V). Shapes
        that do not split evenly count per row in i32 (`_hist_rows`).
        """
        B, R, C, nb = self.B, self.R, self.C, h.bins
        width = (h.hi - h.lo) / nb
        lanes = self.k._hist_layout(nb)
        ity = lanes[3] if lanes else "i32"
        idx_ty = _tensor((B, R, C), ity)
        ins = [Operand(self.x, self.x_ty, _map(3, "d0, d1, d2"), "%in", self.elem)]
        if scale is not None:
            ins += [
                Operand(scale[0], self.b_ty, _map(3, "d0"), "%min", "f32"),
                Operand(scale[1], self.b_ty, _map(3, "d0"), "%max", "f32"),
            ]
        outs = [Operand(self.em.empty(idx_ty), idx_ty, _map(3, "d0, d1, d2"), "%o", ity)]
        body = [
            f"%lo = arith.constant {_f32(h.lo)} : f32",
            f"%hi = arith.constant {_f32(h.hi)} : f32",
            f"%w = arith.constant {_f32(width)} : f32",
            f"%invw = arith.constant {_f32(1.0 / width)} : f32",
            f"%fz = arith.constant {ZERO} : f32",
            f"%fl = arith.constant {_f32(float(nb - 1))} : f32",
            "%c1 = arith.constant 1 : i32",
            "%cm1 = arith.constant -1 : i32",
            f"%clast = arith.constant {nb - 1} : i32",
            f"%eps = arith.constant {_f32(EPS_SCALE)} : f32",
        ] + self._load("%in", "%v")
        u = self._v("%in", "%v")
        if scale is not None:
            body += [
                "%nmin = arith.negf %min : f32",
                "%maxabs = arith.maximumf %nmin, %max : f32",
                "%s = arith.addf %maxabs, %eps : f32",
                f"%u = arith.divf {u}, %s : f32",
            ]
            u = "%u"
        body += [
            f"%t0 = arith.subf {u}, %lo : f32",
            "%t1 = arith.mulf %t0, %invw : f32",
            "%t2 = math.floor %t1 : f32",
            # clamp in f32 first so the conversion to i32 never overflows
            "%t3 = arith.maximumf %t2, %fz : f32",
            "%t4 = arith.minimumf %t3, %fl : f32",
            "%k0 = arith.fptosi %t4 : f32 to i32",
            "%kf = arith.sitofp %k0 : i32 to f32",
            "%ek = arith.mulf %kf, %w : f32",
            "%elo = arith.addf %lo, %ek : f32",
            "%ehi = arith.addf %elo, %w : f32",
            f"%below = arith.cmpf olt, {u}, %elo : f32",
            f"%above = arith.cmpf oge, {u}, %ehi : f32",
            "%notlast = arith.cmpi slt, %k0, %clast : i32",
            "%up = arith.andi %above, %notlast : i1",
            "%kdn = arith.subi %k0, %c1 : i32",
            "%kup = arith.addi %k0, %c1 : i32",
            "%k1 = arith.select %below, %kdn, %k0 : i32",
            "%k2 = arith.select %up, %kup, %k1 : i32",
            f"%ge = arith.cmpf oge, {u}, %lo : f32",
            f"%le = arith.cmpf ole, {u}, %hi : f32",
            "%inr = arith.andi %ge, %le : i1",
            f"%k{'w' if ity != 'i32' else ''} = arith.select %inr, %k2, %cm1 : i32",
        ]
        if ity != "i32":
            body.append(f"%k = arith.trunci %kw : i32 to {ity}")
        body.append(self._yield(["%k"], ity))
        bins = self.em.generic("bin", ["parallel"] * 3, ins, outs, body)[0]
        return self._hist_lanes(bins, nb, lanes) if lanes else self._hist_rows(bins, nb)

    def _hist_lanes(self, bins: str, nb: int, layout) -> str:
        """Counts per (tensor, slab, bin, lane) over each tensor's [S, N, L] view, then Σ slabs
        and lanes."""
        S, N, L, ity = layout
        B, em = self.B, self.em
        E = self.k.numel
        idx_ty, flat_ty = _tensor((B, self.R, self.C), ity), _tensor((B, E), ity)
        v_ty, acc_ty = _tensor((B, S, N, L), ity), _tensor((B, S, nb, L), ity)
        zero_i = em.fresh("zi")
        em.emit(f"{zero_i} = arith.constant 0 : {ity}")
        flat, view = em.fresh("flat"), em.fresh("hlanes")
        em.emit(f"{flat} = tensor.collapse_shape {bins} [[0], [1, 2]] : {idx_ty} into {flat_ty}")
        em.emit(
            f"{view} = tensor.expand_shape {flat} [[0], [1, 2, 3]] output_shape [{B}, {S}, {N}, {L}] : "
            f"{flat_ty} into {v_ty}"
        )
        e, f = em.empty(acc_ty), em.fresh("initi")
        em.emit(f"{f} = linalg.fill ins({zero_i} : {ity}) outs({e} : {acc_ty}) -> {acc_ty}")
        body = [
            "%b = linalg.index 2 : index",
            f"%bi = arith.index_cast %b : index to {ity}",
            f"%hit = arith.cmpi eq, %k, %bi : {ity}",
            f"%cnt = arith.extui %hit : i1 to {ity}",
            f"%next = arith.addi %acc, %cnt : {ity}",
            self._yield(["%next"], ity),
        ]
        counts = em.generic(
            "hcount",
            ["parallel"] * 4 + ["reduction"],
            [Operand(view, v_ty, _map(5, "d0, d1, d4, d3"), "%k", ity)],
            [Operand(f, acc_ty, _map(5, "d0, d1, d2, d3"), "%acc", ity)],
            body,
        )[0]
        out_ty = _tensor((B, nb), "f32")
        body = [
            f"%cf = arith.uitofp %c : {ity} to f32",  # an i8 count is c mod 256 with c <= 255
            "%s = arith.addf %acc, %cf : f32",
            self._yield(["%s"]),
        ]
        return em.generic(
            "hist",
            ["parallel", "reduction", "parallel", "reduction"],
            [Operand(counts, acc_ty, _map(4, "d0, d1, d2, d3"), "%c", ity)],
            [Operand(em.filled((B, nb), ZERO), out_ty, _map(4, "d0, d2"), "%acc", "f32")],
            body,
        )[0]

    def _hist_rows(self, bins: str, nb: int) -> str:
        """Counts per (tensor, row, bin) with the bins innermost, then Σ rows (the fallback)."""
        B, R, C, em = self.B, self.R, self.C, self.em
        idx_ty, rb_ty = _tensor((B, R, C), "i32"), _tensor((B, R, nb), "i32")
        zero_i = em.fresh("zi")
        em.emit(f"{zero_i} = arith.constant 0 : i32")
        e, f = em.empty(rb_ty), em.fresh("initi")
        em.emit(f"{f} = linalg.fill ins({zero_i} : i32) outs({e} : {rb_ty}) -> {rb_ty}")
        body = [
            "%b = linalg.index 3 : index",
            "%bi = arith.index_cast %b : index to i32",
            "%hit = arith.cmpi eq, %k, %bi : i32",
            "%cnt = arith.extui %hit : i1 to i32",
            "%next = arith.addi %acc, %cnt : i32",
            self._yield(["%next"], "i32"),
        ]
        rows = em.generic(
            "hrows",
            ["parallel", "parallel", "reduction", "parallel"],
            [Operand(bins, idx_ty, _map(4, "d0, d1, d2"), "%k", "i32")],
            [Operand(f, rb_ty, _map(4, "d0, d1, d3"), "%acc", "i32")],
            body,
        )[0]
        out_ty = _tensor((B, nb), "f32")
        body = ["%cf = arith.sitofp %c : i32 to f32", "%s = arith.addf %acc, %cf : f32", self._yield(["%s"])]
        return em.generic(
            "hist",
            ["parallel", "reduction", "parallel"],
            [Operand(rows, rb_ty, _map(3, "d0, d1, d2"), "%c", "i32")],
            [Operand(em.filled((B, nb), ZERO), out_ty, _map(3, "d0, d2"), "%acc", "f32")],
            body,
        )[0]

    def _elemsig(self) -> str:
        """Elements at flat indices floor(j·n/k) + (j·ELEMSIG_SKEW mod floor(n/k)), j < k =
        min(16, n): one per window of n/k elements, at varying columns; a gather generic."""
        numel = self.k.numel
        kk = min(ELEMSIG_MAX, numel)
        out_ty = _tensor((self.B, kk), "f32")
        body = (
            [
                "%t = linalg.index 0 : index",
                "%j = linalg.index 1 : index",
                f"%n = arith.constant {numel} : index",
                f"%k = arith.constant {kk} : index",
                f"%cols = arith.constant {self.C} : index",
                f"%skew = arith.constant {ELEMSIG_SKEW} : index",
                f"%win = arith.constant {max(1, numel // kk)} : index",
                "%jn = arith.muli %j, %n : index",
                "%start = arith.divui %jn, %k : index",
                "%js = arith.muli %j, %skew : index",
                "%into = arith.remui %js, %win : index",
                "%flat = arith.addi %start, %into : index",
                "%r = arith.divui %flat, %cols : index",
                "%c = arith.remui %flat, %cols : index",
                f"%in = tensor.extract {self.x}[%t, %r, %c] : {self.x_ty}",
            ]
            + self._load("%in", "%v")
            + [self._yield([self._v("%in", "%v")])]
        )
        return self.em.generic(
            "sig",
            ["parallel", "parallel"],
            [],
            [Operand(self.em.empty(out_ty), out_ty, _map(2, "d0, d1"), "%o", "f32")],
            body,
        )[0]

    def _chan_maxabs(self) -> str:
        """max|x| per last-axis channel of each tensor, reducing over all rows."""
        out_ty = _tensor((self.B, self.C), "f32")
        body = self._load("%in", "%v") + [
            f"%abs = math.absf {self._v('%in', '%v')} : f32",
            "%m = arith.maximumf %abs, %acc : f32",
            self._yield(["%m"]),
        ]
        return self.em.generic(
            "chan",
            ["parallel", "reduction", "parallel"],
            [Operand(self.x, self.x_ty, _map(3, "d0, d1, d2"), "%in", self.elem)],
            [Operand(self.em.filled((self.B, self.C), ZERO), out_ty, _map(3, "d0, d2"), "%acc", "f32")],
            body,
        )[0]

    def _chan_reduce(self, chan: str) -> tuple[str, str]:
        """(max, Σ) of each tensor's channel maxima, in one generic."""
        c_ty = _tensor((self.B, self.C), "f32")
        outs = [
            Operand(self.em.filled((self.B,), ZERO), self.b_ty, _map(2, "d0"), "%am", "f32"),
            Operand(self.em.filled((self.B,), ZERO), self.b_ty, _map(2, "d0"), "%as", "f32"),
        ]
        body = ["%m = arith.maximumf %c, %am : f32", "%s = arith.addf %as, %c : f32", self._yield(["%m", "%s"])]
        m, s = self.em.generic(
            "cred", ["parallel", "reduction"], [Operand(chan, c_ty, _map(2, "d0, d1"), "%c", "f32")], outs, body
        )
        return m, s

    def _adj(self) -> str:
        """Σ_j (x[t+1, j] - x[t, j])² for t < R-1, over two row slices of each tensor."""
        B, R, C, em = self.B, self.R, self.C, self.em
        part = _tensor((B, R - 1, C), self.elem)
        nxt, prev = em.fresh("next"), em.fresh("prev")
        em.emit(f"{nxt} = tensor.extract_slice {self.x}[0, 1, 0] [{B}, {R - 1}, {C}] [1, 1, 1] : {self.x_ty} to {part}")
        em.emit(
            f"{prev} = tensor.extract_slice {self.x}[0, 0, 0] [{B}, {R - 1}, {C}] [1, 1, 1] : {self.x_ty} to {part}"
        )
        acc_shape, acc_map = self._row_acc(R - 1)
        ins = [self._row_in(nxt, R - 1, "%a"), self._row_in(prev, R - 1, "%b")]
        outs = [Operand(em.filled(acc_shape, ZERO), _tensor(acc_shape, "f32"), acc_map, "%acc", "f32")]
        body = (
            self._load("%a", "%fa")
            + self._load("%b", "%fb")
            + [
                f"%d = arith.subf {self._v('%a', '%fa')}, {self._v('%b', '%fb')} : f32",
                "%d2 = arith.mulf %d, %d : f32",
                "%s = arith.addf %acc, %d2 : f32",
                self._yield(["%s"]),
            ]
        )
        return self._lane_sums("adjl", em.generic("adj", self._row_iters(), ins, outs, body), R - 1)[0]
