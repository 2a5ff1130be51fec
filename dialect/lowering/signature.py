"""What a stats kernel is asked for and what it returns: the statistics (`StatItem`), and
its results, either every statistic of every tensor packed into one 1-D f32 tensor
(`packed_offset` says where each lands) or one result per statistic and tensor.
"""

from __future__ import annotations

from dataclasses import dataclass

from opscope.dialect.lowering.emitter import Emitter, tensor_type

SCALAR_KINDS = ("min", "max", "mean", "l1", "sumsq", "nnz", "kurtosis", "chan_outlier")
ELEMSIG_MAX = 16  # elemsig length: min(ELEMSIG_MAX, numel) spread elements
# Sample j of elemsig sits (j·ELEMSIG_SKEW) mod floor(n/k) into the j-th of k equal windows
# (the reference takes each window's first element, which for a row-major [R, C] tensor
# with C dividing n/k is column 0 every time: a [CLS] dimension, a border pixel).
ELEMSIG_SKEW = 37

# The statistics of one stack of B tensors: kind -> ([B, ...] value, per-tensor shape).
StackValues = dict[str, tuple[str, tuple[int, ...]]]


@dataclass(frozen=True)
class StatItem:
    """One requested statistic: kind plus its options (only hist has any)."""

    kind: str
    bins: int = 0
    lo: float = 0.0
    hi: float = 0.0
    normalize: bool = False


def packed_offset(lengths: list[int], count: int, step: int, t: int, index: int) -> int:
    """Where statistic `index` (of per-tensor `lengths`) of tensor `t` of `count` starts in the
    packed result, the tensors computed `step` at a time.

    Stat-major per stack: a stack of B tensors starting at tensor f holds B·tensor_length
    elements from f·tensor_length on, statistic by statistic, each [B, length] row-major,
    so every statistic is one contiguous slice (a plain copy; a tensor-major layout made
    IREE 3.13 emit one strided "slow_memcpy" dispatch per statistic)."""
    first = (t // step) * step
    B = min(step, count - first)
    return first * sum(lengths) + B * sum(lengths[:index]) + (t - first) * lengths[index]


def packed(
    em: Emitter,
    chunks: list[tuple[int, StackValues]],
    kinds: list[str],
    lengths: list[int],
    count: int,
    step: int,
) -> tuple[str, str]:
    """Every statistic of every tensor in one 1-D f32 tensor, laid out as `packed_offset` says;
    (value, type)."""
    flat_ty = tensor_type((count * sum(lengths),), "f32")
    cur, first = em.empty(flat_ty), 0
    for B, values in chunks:
        for i, (kind, n) in enumerate(zip(kinds, lengths)):
            val, vshape = values[kind]
            if vshape != ():
                val = em.flat(val, (B, n), "col")
            nxt = em.fresh("pack")
            em.emit(
                f"{nxt} = tensor.insert_slice {val} into {cur}[{packed_offset(lengths, count, step, first, i)}] "
                f"[{B * n}] [1] : {tensor_type((B * n,), 'f32')} into {flat_ty}"
            )
            cur = nxt
        first += B
    return cur, flat_ty


def one_per_stat(
    em: Emitter, chunks: list[tuple[int, StackValues]], kinds: list[str], lengths: list[int]
) -> list[tuple[str, str]]:
    """Every statistic of every tensor as a result of its own, tensor by tensor; (value, type) each."""
    outs = []
    for B, values in chunks:
        for b in range(B):
            for kind, n in zip(kinds, lengths):
                val, vshape = values[kind]
                one = em.fresh("one")
                if vshape == ():
                    em.emit(
                        f"{one} = tensor.extract_slice {val}[{b}] [1] [1] : {tensor_type((B,), 'f32')} to tensor<1xf32>"
                    )
                else:
                    em.emit(
                        f"{one} = tensor.extract_slice {val}[{b}, 0] [1, {n}] [1, 1] : "
                        f"{tensor_type((B, n), 'f32')} to {tensor_type((n,), 'f32')}"
                    )
                outs.append((one, tensor_type((n,), "f32")))
    return outs
