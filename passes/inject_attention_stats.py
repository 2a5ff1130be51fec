"""`inject-attention-stats`: the attention statistics of a fused attention, from a shadow of
its probabilities.

An `iree_linalg_ext.attention` (what SDPA imports become) never materializes its
probabilities, so `inject-infer-stats` cannot see them. This pass rebuilds them beside it:
a private function `@opscope_attention_probs_<hash>` computes softmax(Q·Kᵀ·scale + mask)
(a boolean mask keeps where true, -inf elsewhere, as the fused op does; a float mask is
added) over the key axis, in f32, from the op's own operands and indexing maps, and is
called right after the op; the probabilities get the same `attn_qmax`, `attn_krecv` and
`attn_entropy` taps (role `attn`) as an eager softmax, so an SDPA import and an eager one
record the same values. The fused op is untouched, so the model's results are
bit-identical; the shadow costs one extra Q·Kᵀ and softmax per site (IREE inlines it).

Handled: one query axis and one key axis in the indexing maps (any number of batch/head
dims), plain dim results in every map, no score modifier in the op's region. Anything else
is skipped with a warning naming the op and why.

    %o = iree_linalg_ext.attention {...} ins(%q, %k, %v, %scale, %mask : ...) outs(%e : ...) {...} loc("layers.0.self_attn")
    %p = call @opscope_attention_probs_8d3c(%q, %k, %scale, %mask) : (...) -> tensor<4x8x8xf32>
    "opscope.stat"(%p) {kind = "attn_qmax", options = {}, role = "attn", site = "layers.0.self_attn.attention"} : (tensor<4x8x8xf32>) -> ()
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import ClassVar

from iree.compiler import ir
from iree.compiler.dialects import func

from opscope.ir.dynamics import (
    ATTENTION,
    DynamicsSite,
    attention_stats,
    insert_stats,
    select_sites,
    tap_each,
)

log = logging.getLogger("opscope")

SHADOW_PREFIX = "opscope_attention_probs"


@dataclass(frozen=True)
class InjectAttentionStats:
    """Rebuild each fused attention's probabilities beside it and tap them like a softmax."""

    name: ClassVar[str] = "inject-attention-stats"

    entropy: bool = True
    sites: str = ""
    keep: Callable[[DynamicsSite], bool] | None = field(default=None, compare=False, metadata={"api_only": True})

    def selected(self, module) -> list[DynamicsSite]:
        """The fused attentions this pass taps (after the name regex and the keep predicate)."""
        return select_sites(self.name, module, (ATTENTION,), self.sites, self.keep)

    def apply(self, module) -> None:
        symbols = {
            str(ir.StringAttr(op.operation.attributes["sym_name"]).value)
            for op in module.operation.regions[0].blocks[0].operations
            if "sym_name" in op.operation.attributes
        }
        kinds = attention_stats(self.entropy)

        def tap(site: DynamicsSite) -> bool:
            shadow = Shadow.of(site.op)
            if isinstance(shadow, str):
                log.warning("%s: attention '%s' at %s skipped: %s", self.name, site.name, site.location, shadow)
                return False
            callee = shadow.symbol()
            if callee not in symbols:
                fn = ir.Operation.parse(
                    shadow.function(callee), source_name=f"opscope-kernel:{callee}", context=module.context
                )
                module.operation.regions[0].blocks[0].append(fn.operation)
                symbols.add(callee)
            with site.op.location:
                call = func.CallOp(
                    [ir.RankedTensorType.get(shadow.probs_shape, ir.F32Type.get())],
                    ir.FlatSymbolRefAttr.get(callee),
                    shadow.operands,
                    ip=ir.InsertionPoint.after(site.op),
                )
            insert_stats(site, call.results[0], kinds, ir.InsertionPoint.after(call))
            return True

        tap_each(self.name, self.selected(module), "fused attention", tap)


@dataclass(frozen=True)
class Shadow:
    """The probabilities of one fused attention as a function of (q, k, scale[, mask])."""

    operands: list = field(compare=False)
    types: tuple[str, ...]
    dims: int  # loop dims kept (the attention's, minus the value-head dims)
    q_map: str
    k_map: str
    mask_map: str | None
    p_map: str
    reduced: tuple[int, ...]  # the kept dims Q·Kᵀ sums over
    probs_shape: tuple[int, ...]

    @classmethod
    def of(cls, op: ir.Operation) -> Shadow | str:
        """The shadow of attention `op`, or why it has none."""
        maps = [ir.AffineMapAttr(a).value for a in ir.ArrayAttr(op.attributes["indexing_maps"])]
        n_out = len(op.results)
        ins = list(op.operands)[: len(op.operands) - n_out]
        if len(ins) not in (4, 5):
            return f"expected q, k, v, scale and an optional mask, got {len(ins)} inputs"
        results = []
        for m in maps:
            if not all(isinstance(e, ir.AffineDimExpr) for e in m.results):
                return "an indexing map with a non-dim result"
            results.append([ir.AffineDimExpr(e).position for e in m.results])
        q, k, v, o = (set(results[i]) for i in (0, 1, 2, len(maps) - 1))
        value_dims = (v & o) - q - k
        m_dims, k2_dims, k1_dims = (q & o) - k - v, (k & v) - q - o, (q & k) - v - o
        if len(m_dims) != 1 or len(k2_dims) != 1:
            return f"{len(m_dims)} query and {len(k2_dims)} key axes (handled: one of each)"
        if not _identity_modifier(op):
            return "its region modifies the scores (not replayed)"
        mask = ins[4] if len(ins) == 5 else None
        if mask is not None and set(results[4]) & value_dims:
            return "its mask indexes the value-head dims"
        keep = [d for d in range(maps[0].n_dims) if d not in value_dims]
        new = {d: i for i, d in enumerate(keep)}
        sizes = _loop_sizes(results, ins + list(op.operands)[len(ins) :])
        lead = [d for d in results[0] if d not in k1_dims]  # batch dims, then the query axis, as q orders them
        p_dims = [d for d in lead if d not in m_dims] + sorted(m_dims) + sorted(k2_dims)

        def text(dims: list[int]) -> str:
            kept = ", ".join(f"d{i}" for i in range(len(keep)))
            return f"affine_map<({kept}) -> ({', '.join(f'd{new[d]}' for d in dims)})>"

        operands = [ins[0], ins[1], ins[3]] + ([mask] if mask is not None else [])
        return cls(
            operands,
            tuple(str(x.type) for x in operands),
            len(keep),
            text(results[0]),
            text(results[1]),
            text(results[4]) if mask is not None else None,
            text(p_dims),
            tuple(new[d] for d in sorted(k1_dims)),
            tuple(sizes[d] for d in p_dims),
        )

    def symbol(self) -> str:
        key = repr((self.types, self.q_map, self.k_map, self.mask_map, self.p_map, self.reduced))
        return f"{SHADOW_PREFIX}_{hashlib.sha256(key.encode()).hexdigest()[:12]}"

    def function(self, name: str) -> str:
        """softmax(Q·Kᵀ·scale + mask) over the last axis, f32, as a private inlinable function."""
        q_ty, k_ty, s_ty = self.types[:3]
        mask_ty = self.types[3] if self.mask_map else None
        p_ty = "tensor<" + "".join(f"{d}x" for d in self.probs_shape) + "f32>"
        rank = len(self.probs_shape)
        loops = ", ".join(f"d{i}" for i in range(rank))
        ident = f"affine_map<({loops}) -> ({loops})>"
        parallel = ", ".join(['"parallel"'] * rank)
        iters = ", ".join('"reduction"' if d in self.reduced else '"parallel"' for d in range(self.dims))
        args = [f"%q: {q_ty}", f"%k: {k_ty}", f"%scale: {s_ty}"] + ([f"%mask: {mask_ty}"] if mask_ty else [])
        a, b = _to_f32("%a", _elem(q_ty)), _to_f32("%b", _elem(k_ty))
        sc = _to_f32("%scale", s_ty)
        lines = [
            f"func.func private @{name}({', '.join(args)}) -> {p_ty} {{",
            *(f"  {x}" for x in sc.lines),
            "  %zero = arith.constant 0.000000e+00 : f32",
            f"  %e = tensor.empty() : {p_ty}",
            f"  %init = linalg.fill ins(%zero : f32) outs(%e : {p_ty}) -> {p_ty}",
            f"  %s = linalg.generic {{indexing_maps = [{self.q_map}, {self.k_map}, {self.p_map}], "
            f"iterator_types = [{iters}]}} ins(%q, %k : {q_ty}, {k_ty}) outs(%init : {p_ty}) {{",
            f"  ^bb0(%a: {_elem(q_ty)}, %b: {_elem(k_ty)}, %acc: f32):",
            *(f"    {x}" for x in a.lines + b.lines),
            f"    %ab = arith.mulf {a.value}, {b.value} : f32",
            "    %r = arith.addf %acc, %ab : f32",
            "    linalg.yield %r : f32",
            f"  }} -> {p_ty}",
        ]
        body = [f"%y0 = arith.mulf %x, {sc.value} : f32"]
        if mask_ty is None:
            ins, maps, block, out = f"%s : {p_ty}", f"{ident}, {ident}", "%x: f32, %o: f32", "%y0"
        else:
            m_elem = _elem(mask_ty)
            ins = f"%s, %mask : {p_ty}, {mask_ty}"
            maps = f"{ident}, {_over(self.mask_map, self.p_map, rank)}, {ident}"
            block, out = f"%x: f32, %mk: {m_elem}, %o: f32", "%y"
            if m_elem == "i1":  # keep where true, -inf elsewhere (the fused op's boolean mask), read as i8
                mask8, lines8 = _widened_mask(mask_ty)
                lines += lines8
                ins = f"%s, %mask8 : {p_ty}, {mask8}"
                block = "%x: f32, %mk: i8, %o: f32"
                body += [
                    "%ninf = arith.constant 0xFF800000 : f32",
                    "%c0_i8 = arith.constant 0 : i8",
                    "%keep = arith.cmpi ne, %mk, %c0_i8 : i8",
                    "%y = arith.select %keep, %y0, %ninf : f32",
                ]
            else:
                mk = _to_f32("%mk", m_elem)
                body += mk.lines + [f"%y = arith.addf %y0, {mk.value} : f32"]
        lines += [
            f"  %t = linalg.generic {{indexing_maps = [{maps}], iterator_types = [{parallel}]}} "
            f"ins({ins}) outs(%e : {p_ty}) {{",
            f"  ^bb0({block}):",
            *(f"    {x}" for x in body),
            f"    linalg.yield {out} : f32",
            f"  }} -> {p_ty}",
            f"  %e2 = tensor.empty() : {p_ty}",
            f"  %p = linalg.softmax dimension({rank - 1}) ins(%t : {p_ty}) outs(%e2 : {p_ty}) -> {p_ty}",
            f"  return %p : {p_ty}",
            "}",
        ]
        return "\n".join(lines)


@dataclass(frozen=True)
class _F32:
    """A value as f32: the lines that extend it (none for f32) and the name to use."""

    lines: list
    value: str


def _to_f32(name: str, elem: str) -> _F32:
    if elem == "f32":
        return _F32([], name)
    return _F32([f"{name}_f32 = arith.extf {name} : {elem} to f32"], f"{name}_f32")


def _widened_mask(mask_ty: str) -> tuple[str, list[str]]:
    """(the i8 type, the lines) of a boolean mask widened to i8 (1 kept, 0 hidden) behind a barrier:
    IREE 3.13 cannot data-tile an i1 operand whose dims need padding ('linalg.pack' op expected
    padding_value has 'i8' but got: 'i1': 5 queries over 7 keys, `tests/test_attention_refs.py`),
    an i8 one it can; without the barrier it moves the pack through the widening onto the i1 mask.
    The barrier is on the shadow's own copy: the model's attention reads its mask as before."""
    shape = mask_ty[len("tensor<") : mask_ty.rindex("x")]
    ty8 = f"tensor<{shape}xi8>"
    rank = shape.count("x") + 1
    loops = ", ".join(f"d{i}" for i in range(rank))
    ident = f"affine_map<({loops}) -> ({loops})>"
    parallel = ", ".join(['"parallel"'] * rank)
    return ty8, [
        f"  %mask8e = tensor.empty() : {ty8}",
        f"  %mask8w = linalg.generic {{indexing_maps = [{ident}, {ident}], iterator_types = "
        f"[{parallel}]}} ins(%mask : {mask_ty}) outs(%mask8e : {ty8}) {{",
        "  ^bb0(%b1: i1, %o8: i8):",
        "    %w = arith.extui %b1 : i1 to i8",
        "    linalg.yield %w : i8",
        f"  }} -> {ty8}",
        f"  %mask8 = util.optimization_barrier %mask8w : {ty8}",  # else IREE packs the i1 source after all
    ]


def _elem(ty: str) -> str:
    """The element type of a tensor type's text, or a scalar type as is."""
    return ty[ty.rindex("x") + 1 : -1] if ty.startswith("tensor<") else ty


def _over(mask_map: str, p_map: str, rank: int) -> str:
    """The mask's map over the probabilities' own loops (d_i = the i-th dim of P)."""
    p_dims = p_map.split("-> (")[1].rstrip(")>").split(", ")
    m_dims = mask_map.split("-> (")[1].rstrip(")>").split(", ") if "-> ()" not in mask_map else []
    loops = ", ".join(f"d{i}" for i in range(rank))
    return f"affine_map<({loops}) -> ({', '.join(f'd{p_dims.index(d)}' for d in m_dims)})>"


def _identity_modifier(op: ir.Operation) -> bool:
    """The op's region yields its score unchanged (or it has none)."""
    if not op.regions or not len(op.regions[0].blocks):
        return True
    block = op.regions[0].blocks[0]
    ops = list(block.operations)
    return len(ops) == 1 and len(ops[0].operands) == 1 and ops[0].operands[0] == block.arguments[0]


def _loop_sizes(results: list[list[int]], operands: list) -> dict[int, int]:
    """Each loop dim's size, read from the first operand dimension it indexes."""
    sizes: dict[int, int] = {}
    for dims, value in zip(results, operands):
        if not isinstance(value.type, ir.ShapedType):
            continue
        for d, n in zip(dims, value.type.shape):
            sizes.setdefault(d, n)
    return sizes
