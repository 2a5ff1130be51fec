"""`StatsKernel`: the stats kernel of `count` tensors of one type and one list of statistics,
assembled from the stacks (`layout`), the stages of each (`rows`, `histogram`, `stages`)
and the results (`signature`) into one private `func.func`.
"""

from __future__ import annotations

from opscope.dialect.lowering import histogram, rows, stages
from opscope.dialect.lowering.emitter import Emitter, tensor_type
from opscope.dialect.lowering.layout import STACK_MAX_NUMEL, Stack, channel_view, row_lanes, stack
from opscope.dialect.lowering.signature import (
    ELEMSIG_MAX,
    SCALAR_KINDS,
    StackValues,
    StatItem,
    one_per_stat,
    packed,
    packed_offset,
)


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
        if hist_counts not in histogram.HIST_LANES:
            raise ValueError(f"hist_counts must be one of {', '.join(histogram.HIST_LANES)}, got '{hist_counts}'")
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

    @property
    def tensor_length(self) -> int:
        """Packed f32 elements per tensor."""
        return sum(self.length(it) for it in self.items)

    def offset(self, t: int, index: int) -> int:
        """Where statistic `items[index]` of tensor `t` starts in the packed result (`packed_offset`)."""
        return packed_offset([self.length(it) for it in self.items], self.count, self.stack_size, t, index)

    @property
    def row_lanes(self) -> int:
        """Lanes a row reduction keeps apart (`layout.row_lanes`); 0 reduces each row straight."""
        return row_lanes(self.cols, self.lanes_wanted)

    def _hist_layout(self, bins: int) -> tuple[int, int, int, str] | None:
        """How the histogram of `bins` bins counts one tensor (`histogram.hist_layout`)."""
        return histogram.hist_layout(self.numel, bins, self.hist_counts)

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
        em = Emitter()
        step = self.stack_size
        chunks: list[tuple[int, StackValues]] = []
        for first in range(0, self.count, step):
            B = min(step, self.count - first)
            xs = [f"%x{t}" for t in range(first, first + B)]
            x = stack(em, xs, self.shape, self.elem, self.perm, self.channel_dims, self.rows, self.cols)
            st = Stack(em, x, B, self.rows, self.cols, self.row_lanes, self.elem, self.numel)
            chunks.append((B, self._compute(st)))
        kinds, lengths = [it.kind for it in self.items], [self.length(it) for it in self.items]
        if pack:
            outs = [packed(em, chunks, kinds, lengths, self.count, step)]
        else:
            outs = one_per_stat(em, chunks, kinds, lengths)
        in_ty = tensor_type(self.shape, self.elem)
        return em.function(name, ", ".join(f"%x{t}: {in_ty}" for t in range(self.count)), outs, noinline)

    def _compute(self, st: Stack) -> StackValues:
        """Every requested statistic of one stack, its stages in a fixed order."""
        kinds = {it.kind for it in self.items}
        hist = next((it for it in self.items if it.kind == "hist"), None)
        R, C = st.R, st.C
        values: StackValues = {}

        need = rows.needed_partials(self.items)
        partials = rows.row_pass(st, need) if need else {}
        totals = rows.final_reduce(st, partials, need) if need else {}
        if "pos_sumsq" in kinds:
            values["pos_sumsq"] = (rows.lane_sums(st, "pos", [partials["sumsq"]], R)[0], (R,))
        for kind in ("min", "max", "l1", "sumsq", "nnz"):
            if kind in kinds:
                values[kind] = (totals[kind], ())

        # The second passes derive the global scalars they need (the mean, the histogram
        # scale) from the totals in their own body: loop-invariant, so computed once per
        # tile, and no generic (one dispatch) in between.
        moments = rows.moments(st, totals["sum"]) if "kurtosis" in kinds else None
        if hist is not None:
            scale = (totals["min"], totals["max"]) if hist.normalize else None
            values["hist"] = (histogram.hist(st, hist, scale, self._hist_layout(hist.bins)), (hist.bins,))
        if "elemsig" in kinds:
            values["elemsig"] = (stages.elemsig(st), (min(ELEMSIG_MAX, self.numel),))
        chan = None
        if kinds & {"chan_maxabs", "chan_outlier"}:
            chan = stages.chan_maxabs(st)
            if "chan_maxabs" in kinds:
                values["chan_maxabs"] = (chan, (C,))
        if "adj_sumsq" in kinds:
            values["adj_sumsq"] = (rows.adj(st), (R - 1,))

        # Final scalars: mean, kurtosis and channel peak/mean, in one elementwise generic.
        final = stages.final_scalars(
            st,
            totals["sum"] if "mean" in kinds else None,
            moments,
            chan if "chan_outlier" in kinds else None,
        )
        for name, v in final.items():
            values[name] = (v, ())
        return values
