"""The stages of a stack [B, R, C] besides the row passes and the histogram, a generic or two
each: elemsig's gather, max|x| per channel, and the per-tensor final scalars (mean,
kurtosis, chan_outlier) in small [B] generics, never a host-side `tensor.extract`, which
would cost a device round trip per site.
"""

from __future__ import annotations

from opscope.dialect.lowering.emitter import ZERO, Operand, affine_map, f32_hex, tensor_type, yield_line
from opscope.dialect.lowering.layout import Stack
from opscope.dialect.lowering.signature import ELEMSIG_MAX, ELEMSIG_SKEW

EPS_RATIO = 1e-20  # kurtosis and chan_outlier denominators


def elemsig(st: Stack) -> str:
    """Elements at flat indices floor(j·n/k) + (j·ELEMSIG_SKEW mod floor(n/k)), j < k =
    min(16, n): one per window of n/k elements, at varying columns; a gather generic."""
    numel = st.numel
    kk = min(ELEMSIG_MAX, numel)
    out_ty = tensor_type((st.B, kk), "f32")
    body = (
        [
            "%t = linalg.index 0 : index",
            "%j = linalg.index 1 : index",
            f"%n = arith.constant {numel} : index",
            f"%k = arith.constant {kk} : index",
            f"%cols = arith.constant {st.C} : index",
            f"%skew = arith.constant {ELEMSIG_SKEW} : index",
            f"%win = arith.constant {max(1, numel // kk)} : index",
            "%jn = arith.muli %j, %n : index",
            "%start = arith.divui %jn, %k : index",
            "%js = arith.muli %j, %skew : index",
            "%into = arith.remui %js, %win : index",
            "%flat = arith.addi %start, %into : index",
            "%r = arith.divui %flat, %cols : index",
            "%c = arith.remui %flat, %cols : index",
            f"%in = tensor.extract {st.x}[%t, %r, %c] : {st.x_ty}",
        ]
        + st.load("%in", "%v")
        + [yield_line([st.v("%in", "%v")])]
    )
    return st.em.generic(
        "sig",
        ["parallel", "parallel"],
        [],
        [Operand(st.em.empty(out_ty), out_ty, affine_map(2, "d0, d1"), "%o", "f32")],
        body,
    )[0]


def chan_maxabs(st: Stack) -> str:
    """max|x| per last-axis channel of each tensor, reducing over all rows."""
    out_ty = tensor_type((st.B, st.C), "f32")
    body = st.load("%in", "%v") + [
        f"%abs = math.absf {st.v('%in', '%v')} : f32",
        "%m = arith.maximumf %abs, %acc : f32",
        yield_line(["%m"]),
    ]
    return st.em.generic(
        "chan",
        ["parallel", "reduction", "parallel"],
        [Operand(st.x, st.x_ty, affine_map(3, "d0, d1, d2"), "%in", st.elem)],
        [Operand(st.em.filled((st.B, st.C), ZERO), out_ty, affine_map(3, "d0, d2"), "%acc", "f32")],
        body,
    )[0]


def _chan_reduce(st: Stack, chan: str) -> tuple[str, str]:
    """(max, Σ) of each tensor's channel maxima, in one generic."""
    c_ty = tensor_type((st.B, st.C), "f32")
    outs = [
        Operand(st.em.filled((st.B,), ZERO), st.b_ty, affine_map(2, "d0"), "%am", "f32"),
        Operand(st.em.filled((st.B,), ZERO), st.b_ty, affine_map(2, "d0"), "%as", "f32"),
    ]
    body = ["%m = arith.maximumf %c, %am : f32", "%s = arith.addf %as, %c : f32", yield_line(["%m", "%s"])]
    m, s = st.em.generic(
        "cred", ["parallel", "reduction"], [Operand(chan, c_ty, affine_map(2, "d0, d1"), "%c", "f32")], outs, body
    )
    return m, s


def final_scalars(
    st: Stack, total_sum: str | None, moments: tuple[str, str] | None, chan: str | None
) -> dict[str, str]:
    """Of each tensor, in one elementwise generic over the B tensors: the mean from its Σx
    `total_sum`, kurtosis from its central `moments` (Σ(x-μ)², Σ(x-μ)⁴), chan_outlier (peak
    over mean of the channel maxima `chan`); each only when given. kind -> [B] value."""
    ins, exprs, names = {}, [], []
    if total_sum is not None:
        ins["sum"] = total_sum
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
    if chan is not None:
        ins["cmax"], ins["csum"] = _chan_reduce(st, chan)
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
    if not exprs:
        return {}
    consts = {"eps": f32_hex(EPS_RATIO), "chans": f32_hex(float(st.C))}
    opnds = [Operand(v, st.b_ty, affine_map(1, "d0"), f"%{k}", "f32") for k, v in ins.items()]
    outs = [Operand(st.em.empty(st.b_ty), st.b_ty, affine_map(1, "d0"), f"%out_{n}", "f32") for n, _ in exprs]
    body = [f"%n = arith.constant {f32_hex(float(st.numel))} : f32"]
    body += [f"%{k} = arith.constant {v} : f32" for k, v in consts.items()]
    for _, lines in exprs:
        body += lines
    body.append(yield_line([f"%{n}" for n, _ in exprs]))
    return dict(zip(names, st.em.generic("fin", ["parallel"], opnds, outs, body)))
