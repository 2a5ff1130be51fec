"""The histogram of a stack [B, R, C]: one bin index per element (numpy's edges, optionally
normalized by max|x|), then counts with one counter per (slab, bin, vector lane), so the
innermost loop is a vector compare and add with no horizontal reduction; counters are i32,
or i8 where the target counts i8 right (`HIST_LANES`).
"""

from __future__ import annotations

from opscope.dialect.lowering.emitter import ZERO, Operand, affine_map, f32_hex, tensor_type, yield_line
from opscope.dialect.lowering.layout import Stack
from opscope.dialect.lowering.signature import StatItem

EPS_SCALE = 1e-12  # normalized histogram: x / (max|x| + EPS_SCALE)
# Histogram counting layouts per `hist_counts` choice: (index and count type, lanes, most
# indices per lane), first fit wins. i8 indices and counts fill a 512-bit vector with 64
# lanes and count ~1.6x faster on llvm-cpu (one 1024x1024 tensor: 0.84 vs 1.3-1.5 ms),
# but IREE 3.13's default SPIR-V target miscounts i8 tensors on lavapipe (every element
# in bin 0), so i8 is opt-in per target (`lower-opscope{hist-counts=i8}`;
# `Target.hist_counts`). i32 indices with i8 counts were no faster than i32.
#
# Why an i8 count is exact: lane (s, b, l) of `_counts_per_lane` adds 1 for each of the N
# indices n < N of slab s, lane l that equal b, so its true count c is in [0, N] and
# `hist_layout` keeps N <= 255. `arith.addi` on i8 wraps modulo 2^8, and every partial
# sum is in [0, c], so the bits held are c's own 8-bit pattern (a count of 128..255 reads
# as negative when signed); the slab/lane sum reads them with `arith.uitofp`, unsigned,
# which gives back c exactly. The f32 sum over slabs and lanes then adds integers below
# 2^24 exactly (docs/spine.md, "counts"). Bin indices fit too: -1 .. bins-1 with bins <= 127.
I8_MAX_COUNT = 255  # the most indices one unsigned 8-bit lane may count
HIST_LANES: dict[str, tuple[tuple[str, int, int], ...]] = {
    "i32": (("i32", 16, 512),),
    "i8": (("i8", 64, I8_MAX_COUNT), ("i32", 16, 512)),  # i32 where i8 does not fit
}


def hist_layout(numel: int, bins: int, hist_counts: str) -> tuple[int, int, int, str] | None:
    """(S, N, L, index type) splitting one tensor's `numel` flat bin indices into S slabs of N·L, or None.

    The first of `HIST_LANES[hist_counts]` that fits: L lanes fill one 512-bit vector, a
    lane counts at most N <= n_max indices (255 for i8: see `HIST_LANES`); S is the fewest
    slabs that divide the tensor. None when no split keeps N >= 8 (the per-row count is
    then as good).
    """
    E = numel
    for ity, L, n_max in HIST_LANES[hist_counts]:
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


def hist(st: Stack, h: StatItem, scale: tuple[str, str] | None, lanes: tuple[int, int, int, str] | None) -> str:
    """Bin index of every element (elementwise), then one-hot counts, then their sum.

    The index is `floor((u - lo) / width)` corrected against the f32 edges `lo + k·width`,
    which is numpy's rule exactly whenever those edges are exact in f32 (true for the
    default ranges [-1, 1] and [-6, 6] with 32 bins): `e_k <= u < e_k+1`, the last bin also
    takes `u == hi`; values outside `[lo, hi]` and NaN get index -1 and are dropped.
    Normalized (`scale`: each tensor's min and max), u = x / (max(-min, max) +
    EPS_SCALE), the scale computed in the body (loop-invariant).

    Counting (`lanes`: `hist_layout`'s split, None: per row): each tensor's flat indices are
    viewed as [S, N, L] and every lane keeps its own count per bin, so the innermost loop is
    one compare and one add per vector of L indices and bin, with no horizontal reduction
    (per-row counts made IREE reduce the lanes at every step: 2x slower). Indices and
    counts are i32 (16 lanes), or with `hist_counts="i8"` i8 (64 lanes, at most 255 indices
    a lane: exact, see `HIST_LANES`; ~1.6x faster on llvm-cpu, miscounted by IREE 3.13's
    SPIR-V). Shapes that do not split evenly count per row in i32 (`_counts_per_row`).
    """
    B, R, C, nb = st.B, st.R, st.C, h.bins
    width = (h.hi - h.lo) / nb
    ity = lanes[3] if lanes else "i32"
    idx_ty = tensor_type((B, R, C), ity)
    ins = [Operand(st.x, st.x_ty, affine_map(3, "d0, d1, d2"), "%in", st.elem)]
    if scale is not None:
        ins += [
            Operand(scale[0], st.b_ty, affine_map(3, "d0"), "%min", "f32"),
            Operand(scale[1], st.b_ty, affine_map(3, "d0"), "%max", "f32"),
        ]
    outs = [Operand(st.em.empty(idx_ty), idx_ty, affine_map(3, "d0, d1, d2"), "%o", ity)]
    body = [
        f"%lo = arith.constant {f32_hex(h.lo)} : f32",
        f"%hi = arith.constant {f32_hex(h.hi)} : f32",
        f"%w = arith.constant {f32_hex(width)} : f32",
        f"%invw = arith.constant {f32_hex(1.0 / width)} : f32",
        f"%fz = arith.constant {ZERO} : f32",
        f"%fl = arith.constant {f32_hex(float(nb - 1))} : f32",
        "%c1 = arith.constant 1 : i32",
        "%cm1 = arith.constant -1 : i32",
        f"%clast = arith.constant {nb - 1} : i32",
        f"%eps = arith.constant {f32_hex(EPS_SCALE)} : f32",
    ] + st.load("%in", "%v")
    u = st.v("%in", "%v")
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
    body.append(yield_line(["%k"], ity))
    bins = st.em.generic("bin", ["parallel"] * 3, ins, outs, body)[0]
    return _counts_per_lane(st, bins, nb, lanes) if lanes else _counts_per_row(st, bins, nb)


def _counts_per_lane(st: Stack, bins: str, nb: int, layout: tuple[int, int, int, str]) -> str:
    """Counts per (tensor, slab, bin, lane) over each tensor's [S, N, L] view, then Σ slabs
    and lanes."""
    S, N, L, ity = layout
    B, em = st.B, st.em
    E = st.numel
    idx_ty, flat_ty = tensor_type((B, st.R, st.C), ity), tensor_type((B, E), ity)
    v_ty, acc_ty = tensor_type((B, S, N, L), ity), tensor_type((B, S, nb, L), ity)
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
        yield_line(["%next"], ity),
    ]
    counts = em.generic(
        "hcount",
        ["parallel"] * 4 + ["reduction"],
        [Operand(view, v_ty, affine_map(5, "d0, d1, d4, d3"), "%k", ity)],
        [Operand(f, acc_ty, affine_map(5, "d0, d1, d2, d3"), "%acc", ity)],
        body,
    )[0]
    out_ty = tensor_type((B, nb), "f32")
    body = [
        f"%cf = arith.uitofp %c : {ity} to f32",  # an i8 count is c mod 256 with c <= 255
        "%s = arith.addf %acc, %cf : f32",
        yield_line(["%s"]),
    ]
    return em.generic(
        "hist",
        ["parallel", "reduction", "parallel", "reduction"],
        [Operand(counts, acc_ty, affine_map(4, "d0, d1, d2, d3"), "%c", ity)],
        [Operand(em.filled((B, nb), ZERO), out_ty, affine_map(4, "d0, d2"), "%acc", "f32")],
        body,
    )[0]


def _counts_per_row(st: Stack, bins: str, nb: int) -> str:
    """Counts per (tensor, row, bin) with the bins innermost, then Σ rows (the fallback)."""
    B, R, C, em = st.B, st.R, st.C, st.em
    idx_ty, rb_ty = tensor_type((B, R, C), "i32"), tensor_type((B, R, nb), "i32")
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
        yield_line(["%next"], "i32"),
    ]
    rows = em.generic(
        "hrows",
        ["parallel", "parallel", "reduction", "parallel"],
        [Operand(bins, idx_ty, affine_map(4, "d0, d1, d2"), "%k", "i32")],
        [Operand(f, rb_ty, affine_map(4, "d0, d1, d3"), "%acc", "i32")],
        body,
    )[0]
    out_ty = tensor_type((B, nb), "f32")
    body = ["%cf = arith.sitofp %c : i32 to f32", "%s = arith.addf %acc, %cf : f32", yield_line(["%s"])]
    return em.generic(
        "hist",
        ["parallel", "reduction", "parallel"],
        [Operand(rows, rb_ty, affine_map(3, "d0, d1, d2"), "%c", "i32")],
        [Operand(em.filled((B, nb), ZERO), out_ty, affine_map(3, "d0, d2"), "%acc", "f32")],
        body,
    )[0]
