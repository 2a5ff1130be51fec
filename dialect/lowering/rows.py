"""The row reductions of a stack [B, R, C]: one row-parallel pass computes every plain row
partial (min, max, Σx, Σ|x|, Σx², nnz), one tiny generic reduces them per tensor (partial
then final beats reducing straight to scalars); kurtosis's central moments and adj_sumsq
are row passes of their own. With lanes (`layout.row_lanes`) each row keeps one partial per
vector lane, summed by `lane_sums` or `totals`.
"""

from __future__ import annotations

from opscope.dialect.lowering.emitter import (
    NEG_INF,
    ONE,
    POS_INF,
    ZERO,
    Operand,
    affine_map,
    dim_list,
    f32_hex,
    tensor_type,
    yield_line,
)
from opscope.dialect.lowering.layout import Stack
from opscope.dialect.lowering.signature import StatItem

# Row partial -> (init value, accumulate expression, final combine op).
ROW_PARTIALS = {
    "min": (POS_INF, "arith.minimumf {v}, {acc} : f32", "arith.minimumf"),
    "max": (NEG_INF, "arith.maximumf {v}, {acc} : f32", "arith.maximumf"),
    "sum": (ZERO, "arith.addf {acc}, {v} : f32", "arith.addf"),
    "l1": (ZERO, "arith.addf {acc}, {abs} : f32", "arith.addf"),
    "sumsq": (ZERO, "arith.addf {acc}, {sq} : f32", "arith.addf"),
    "nnz": (ZERO, "arith.addf {acc}, {nz} : f32", "arith.addf"),
}


def needed_partials(items: list[StatItem]) -> list[str]:
    """The row partials the requested statistics need, in a fixed order."""
    kinds = {it.kind for it in items}
    if any(it.kind == "hist" and it.normalize for it in items):
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


def lane_sums(st: Stack, hint: str, parts: list[str], rows: int) -> list[str]:
    """Σ over lanes of several [B, rows, L] partials, to [B, rows], in one generic (no-op at L = 0)."""
    B, L, em = st.B, st.L, st.em
    if not L:
        return parts
    p_ty, r_ty = tensor_type((B, rows, L), "f32"), tensor_type((B, rows), "f32")
    ins = [Operand(p, p_ty, affine_map(3, "d0, d1, d2"), f"%p{i}", "f32") for i, p in enumerate(parts)]
    outs = [
        Operand(em.filled((B, rows), ZERO), r_ty, affine_map(3, "d0, d1"), f"%a{i}", "f32") for i in range(len(parts))
    ]
    body = [f"%s{i} = arith.addf %a{i}, %p{i} : f32" for i in range(len(parts))]
    body.append(yield_line([f"%s{i}" for i in range(len(parts))]))
    return em.generic(hint, ["parallel", "parallel", "reduction"], ins, outs, body)


def totals(st: Stack, hint: str, parts: list[str], ops: list[str], inits: list[str]) -> list[str]:
    """Row partials ([B, R] or [B, R, L]) to one value per tensor ([B]), combined by `ops`."""
    shape = st.row_acc(st.R)[0]
    dims = len(shape)
    p_ty = tensor_type(shape, "f32")
    ins = [Operand(p, p_ty, affine_map(dims, dim_list(dims)), f"%p{i}", "f32") for i, p in enumerate(parts)]
    outs = [
        Operand(st.em.filled((st.B,), init), st.b_ty, affine_map(dims, "d0"), f"%a{i}", "f32")
        for i, init in enumerate(inits)
    ]
    body = [f"%s{i} = {op} %p{i}, %a{i} : f32" for i, op in enumerate(ops)]
    body.append(yield_line([f"%s{i}" for i in range(len(parts))]))
    return st.em.generic(hint, ["parallel"] + ["reduction"] * (dims - 1), ins, outs, body)


def row_pass(st: Stack, need: list[str]) -> dict[str, str]:
    """Row partials (min, max, Σx, Σ|x|, Σx², nnz as needed) in one generic."""
    acc_shape, acc_map = st.row_acc(st.R)
    r_ty = tensor_type(acc_shape, "f32")
    ins = [st.row_in(st.x, st.R, "%in")]
    v = st.v("%in", "%v")
    body = [f"%zero = arith.constant {ZERO} : f32", f"%one = arith.constant {ONE} : f32"] + st.load("%in", "%v")
    if "l1" in need:
        body.append(f"%abs = math.absf {v} : f32")
    if "sumsq" in need:
        body.append(f"%sq = arith.mulf {v}, {v} : f32")
    if "nnz" in need:
        body += [f"%isnz = arith.cmpf une, {v}, %zero : f32", "%nz = arith.select %isnz, %one, %zero : f32"]
    outs = []
    for p in need:
        outs.append(Operand(st.em.filled(acc_shape, ROW_PARTIALS[p][0]), r_ty, acc_map, f"%a_{p}", "f32"))
        expr = ROW_PARTIALS[p][1].format(v=v, acc=f"%a_{p}", abs="%abs", sq="%sq", nz="%nz")
        body.append(f"%r_{p} = {expr}")
    body.append(yield_line([f"%r_{p}" for p in need]))
    return dict(zip(need, st.em.generic("rowp", st.row_iters(), ins, outs, body)))


def final_reduce(st: Stack, partials: dict[str, str], need: list[str]) -> dict[str, str]:
    """Every row partial to one value per tensor, in one generic."""
    res = totals(
        st, "tot", [partials[p] for p in need], [ROW_PARTIALS[p][2] for p in need], [ROW_PARTIALS[p][0] for p in need]
    )
    return dict(zip(need, res))


def moments(st: Stack, sums: str) -> tuple[str, str]:
    """Σ(x-μ)² and Σ(x-μ)⁴ per tensor, μ = Σx / n from its total `sums` (the same division
    as the mean statistic): a row pass, then a final sum."""
    acc_shape, acc_map = st.row_acc(st.R)
    r_ty, dims = tensor_type(acc_shape, "f32"), st.row_dims()
    ins = [st.row_in(st.x, st.R, "%in"), Operand(sums, st.b_ty, affine_map(dims, "d0"), "%sum", "f32")]
    outs = [
        Operand(st.em.filled(acc_shape, ZERO), r_ty, acc_map, "%a2", "f32"),
        Operand(st.em.filled(acc_shape, ZERO), r_ty, acc_map, "%a4", "f32"),
    ]
    body = (
        [f"%n = arith.constant {f32_hex(float(st.numel))} : f32"]
        + st.load("%in", "%v")
        + [
            "%mu = arith.divf %sum, %n : f32",
            f"%d = arith.subf {st.v('%in', '%v')}, %mu : f32",
            "%d2 = arith.mulf %d, %d : f32",
            "%d4 = arith.mulf %d2, %d2 : f32",
            "%n2 = arith.addf %a2, %d2 : f32",
            "%n4 = arith.addf %a4, %d4 : f32",
            yield_line(["%n2", "%n4"]),
        ]
    )
    rows = st.em.generic("mom", st.row_iters(), ins, outs, body)
    s2, s4 = totals(st, "momt", rows, ["arith.addf", "arith.addf"], [ZERO, ZERO])
    return s2, s4


def adj(st: Stack) -> str:
    """Σ_j (x[t+1, j] - x[t, j])² for t < R-1, over two row slices of each tensor."""
    B, R, C, em = st.B, st.R, st.C, st.em
    part = tensor_type((B, R - 1, C), st.elem)
    nxt, prev = em.fresh("next"), em.fresh("prev")
    em.emit(f"{nxt} = tensor.extract_slice {st.x}[0, 1, 0] [{B}, {R - 1}, {C}] [1, 1, 1] : {st.x_ty} to {part}")
    em.emit(f"{prev} = tensor.extract_slice {st.x}[0, 0, 0] [{B}, {R - 1}, {C}] [1, 1, 1] : {st.x_ty} to {part}")
    acc_shape, acc_map = st.row_acc(R - 1)
    ins = [st.row_in(nxt, R - 1, "%a"), st.row_in(prev, R - 1, "%b")]
    outs = [Operand(em.filled(acc_shape, ZERO), tensor_type(acc_shape, "f32"), acc_map, "%acc", "f32")]
    body = (
        st.load("%a", "%fa")
        + st.load("%b", "%fb")
        + [
            f"%d = arith.subf {st.v('%a', '%fa')}, {st.v('%b', '%fb')} : f32",
            "%d2 = arith.mulf %d, %d : f32",
            "%s = arith.addf %acc, %d2 : f32",
            yield_line(["%s"]),
        ]
    )
    return lane_sums(st, "adjl", em.generic("adj", st.row_iters(), ins, outs, body), R - 1)[0]
