"""How a stats kernel lays out its tensors: read channel-last (`channel_view`), viewed as rows
[R, C], concatenated into one stack [B, R, C] (`stack`), and each row split into vector lanes
for the row reductions (`row_lanes`); `Stack` is one such stack as the stages see it.
"""

from __future__ import annotations

from dataclasses import dataclass

from opscope.dialect.lowering.emitter import Emitter, Operand, affine_map, tensor_type

# Tensors of one kernel are computed as one stack [B, R, C] (a `tensor.concat`, which IREE
# 3.13 copies: it does not write producers in place), so B tensors cost one set of
# dispatches. Above this many elements a tensor is computed alone: copying it costs more
# than the dispatches it saves (~0.35 ns an element against ~3 us a dispatch, x14).
STACK_MAX_NUMEL = 1 << 17


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


def stack(
    em: Emitter,
    xs: list[str],
    shape: tuple[int, ...],
    elem: str,
    perm: tuple[int, ...] | None,
    channel_dims: tuple[int, ...] | None,
    rows: int,
    cols: int,
) -> str:
    """The tensors `xs` (of `shape`) as one [B, rows, cols] stack: a view for one, a
    concatenation for more (each first transposed by `perm` when its channels are not the
    last dim)."""
    R, C = rows, cols
    rows_ty, one_ty = tensor_type((R, C), elem), tensor_type((1, R, C), elem)
    src_shape = shape if perm is None else tuple(shape[d] for d in perm)
    src = tensor_type(src_shape, elem)
    rank = len(src_shape)
    k = len(channel_dims) if channel_dims else 1  # trailing dims that make C
    ones = []
    for x in xs:
        if perm is not None:
            t = em.fresh("chan")
            em.emit(
                f"{t} = linalg.transpose ins({x} : {tensor_type(shape, elem)}) "
                f"outs({em.empty(src)} : {src}) permutation = [{', '.join(map(str, perm))}]"
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
            em.emit(f"{w} = tensor.expand_shape {v} [[0, 1], [2]] output_shape [1, {R}, {C}] : {rows_ty} into {one_ty}")
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
        f"-> {tensor_type((len(ones), R, C), elem)}"
    )
    return st


# `row_lanes=L`: row reductions keep L partials per row, one per vector lane (the row viewed
# as [C/L, L]), and the small final stages sum the lanes. Reducing each row straight to one
# value with several results per generic made IREE 3.13's llvm-cpu code reduce the vector
# horizontally at every step, 2.6x slower (min and max of a 1024x1024 tensor: 614 vs 238
# us; 128x256: 83 vs 30 us). L, else L/2, where a row holds at least two such vectors; other
# widths reduce straight. 0 (the default) reduces straight: on GPUs the lanes only lengthen
# the final sums (lavapipe summed [R, L] partials serially: kurtosis off by 3e-5).
def row_lanes(cols: int, wanted: int) -> int:
    """Lanes a row reduction keeps apart: `wanted`, else half of it, where a row of `cols`
    holds two vectors of them; 0 reduces each row straight."""
    return next((L for L in (wanted, wanted // 2) if L >= 2 and cols % L == 0 and cols // L >= 2), 0)


@dataclass
class Stack:
    """One stack [B, R, C] of a kernel as its stages read it: every generic has the tensor
    index b as its leading parallel dimension d0, so B tensors cost one set of dispatches.
    `L` lanes per row in the row reductions (0: straight); `numel` elements per tensor."""

    em: Emitter
    x: str
    B: int
    R: int
    C: int
    L: int
    elem: str
    numel: int

    @property
    def x_ty(self) -> str:
        return tensor_type((self.B, self.R, self.C), self.elem)

    @property
    def b_ty(self) -> str:
        return tensor_type((self.B,), "f32")

    def load(self, arg: str, out: str) -> list[str]:
        """Body lines making f32 `out` from element `arg` (nothing to do for f32)."""
        return [] if self.elem == "f32" else [f"{out} = arith.extf {arg} : {self.elem} to f32"]

    def v(self, arg: str, out: str) -> str:
        """The f32 value `load(arg, out)` leaves: `arg` itself for f32."""
        return arg if self.elem == "f32" else out

    # Row reductions: [B, rows, C] -> [B, rows, L] lane partials (or [B, rows] when L = 0).
    def row_dims(self) -> int:
        return 4 if self.L else 3

    def row_iters(self) -> list[str]:
        return ["parallel", "parallel", "parallel", "reduction"] if self.L else ["parallel", "parallel", "reduction"]

    def row_acc(self, rows: int) -> tuple[tuple[int, ...], str]:
        """Shape and indexing map of a row reduction's accumulator."""
        B, L = self.B, self.L
        return ((B, rows, L), affine_map(4, "d0, d1, d2")) if L else ((B, rows), affine_map(3, "d0, d1"))

    def row_in(self, x: str, rows: int, arg: str) -> Operand:
        """`x` ([B, rows, C]) as the input of a row reduction: viewed as [B, rows, C/L, L]."""
        B, C, L, em = self.B, self.C, self.L, self.em
        ty = tensor_type((B, rows, C), self.elem)
        if not L:
            return Operand(x, ty, affine_map(3, "d0, d1, d2"), arg, self.elem)
        v_ty = tensor_type((B, rows, C // L, L), self.elem)
        v = em.fresh("lanes")
        em.emit(
            f"{v} = tensor.expand_shape {x} [[0], [1], [2, 3]] output_shape [{B}, {rows}, {C // L}, {L}] : "
            f"{ty} into {v_ty}"
        )
        return Operand(v, v_ty, affine_map(4, "d0, d1, d3, d2"), arg, self.elem)
