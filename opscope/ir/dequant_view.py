"""The float tensors an integer contraction stands for: what a quantized site's taps read.

A site `quantize-weight` specialized (W8A16, W4A16 in groups, W8A8) or an importer wrote with
integer operands contracts codes, not the model's tensors: i8 codes of the weight, the
activation quantized per row, an i32 or unscaled f32 accumulator. To compare such a site with
the original, site by site, its taps read what the site stands for (the reference's
DequantMatMul taps lhs and out and skips the packed weight):

- lhs: the float activation before the ops of the site's own location that quantized or
  regrouped it (`tensor.expand_shape`, a float-to-integer `linalg.generic`, a static scale's
  compute barrier) and before a SmoothQuant division x·(1/s) (marked `opscope.smoothing`,
  shared by the sites that read x); the codes read through their scales are then W·diag(s);
- out: the float result after the ops of the site's own location that scale the accumulator
  back (per-channel scales, the groups' sum behind a compute barrier);
- rhs: integer codes read through their scales, sitofp(q)·s, in the original weight's shape
  (the groups merged back into K), only when asked: the tap computes the f32 weight, which
  IREE hoists into memory as a constant expression.

What has no float form (an integer input, an accumulator no op of the site rescales) is read
as f32 of its integers and named in the view's `notes`, so a report says it is not
comparable with a float model's tensor.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from iree.compiler import ir
from iree.compiler.dialects import arith, linalg, tensor

from opscope.ir.build import dim_map, generic
from opscope.ir.const_expr import is_const_expr, owner
from opscope.ir.flops import indexing_maps
from opscope.ir.sites import FLOAT_TYPES, ROLES, Site

_TO_INT = ("arith.fptosi", "arith.fptoui")
SMOOTHING = "opscope.smoothing"  # the unit attribute on quantize-weight's x·(1/s) (SmoothQuant)


@dataclass
class RoleView:
    """One role's tapped tensor: the value and the op after which the taps go."""

    value: ir.Value
    after: ir.Operation
    note: str = ""  # why this tensor is not the one a float model would have ("" when it is)


@dataclass
class DequantView:
    """The tensors the taps of one integer site read, by role (a role left out is not tapped)."""

    roles: dict[str, RoleView] = field(default_factory=dict)
    skipped: dict[str, str] = field(default_factory=dict)  # role -> why it is not tapped

    @property
    def notes(self) -> list[str]:
        return [f"{r}: {v.note}" for r, v in self.roles.items() if v.note] + [
            f"{r}: {why}" for r, why in self.skipped.items()
        ]


def is_float(value: ir.Value) -> bool:
    return str(ir.ShapedType(value.type).element_type) in FLOAT_TYPES


def _same_place(op: ir.Operation, site: Site) -> bool:
    """Written for the site: an op with the site's own location (what a rewrite of the site emits)."""
    return str(op.location) == str(site.op.location)


def _maps(op: ir.Operation) -> list[ir.AffineMap]:
    """A linalg op's indexing maps (none for another dialect's op: a `stablehlo.dot_general`)."""
    maps = linalg.get_indexing_maps(op) if op.name.startswith("linalg.") else None
    return indexing_maps(maps) if maps is not None else []


def _yields_integer_of_float(op: ir.Operation) -> bool:
    """A linalg.generic whose yielded value is a float converted to an integer (a quantizer)."""
    if op.name != "linalg.generic":
        return False
    block = op.regions[0].blocks[0]
    ops = list(block.operations)
    yielded = ops[-1].operands[0] if ops and ops[-1].operands else None
    return yielded is not None and not isinstance(yielded, ir.BlockArgument) and owner(yielded).name in _TO_INT


def lhs_source(site: Site) -> tuple[ir.Value, tuple[list[int], ...] | None]:
    """The site's lhs before its own quantizer and regrouping, and the regrouping's reassociation
    (each original dim's dims in the contraction's lhs) when one was undone."""
    value = site.value("lhs")
    groups = None
    for _ in range(6):  # a quantizer and an expand_shape, or a smoothing, a barrier and a quantizer
        if isinstance(value, ir.BlockArgument):
            break
        op = owner(value)
        if SMOOTHING in op.attributes:  # x·(1/s), shared by the sites that read x: x is what they stand for
            value = op.operands[0]
            continue
        if not _same_place(op, site):
            break
        if op.name.startswith("iree_tensor_ext.compute_barrier"):  # a static W8A8 scale's barrier
            value = op.operands[0]
        elif op.name == "tensor.expand_shape":
            groups = tuple([ir.IntegerAttr(d).value for d in g] for g in ir.ArrayAttr(op.attributes["reassociation"]))
            value = op.operands[0]
        elif _yields_integer_of_float(op):
            maps = _maps(op)
            shape = ir.ShapedType(value.type).shape
            same = [
                v
                for v, m in zip(op.operands, maps)
                if is_float(v) and m == maps[-1] and ir.ShapedType(v.type).shape == shape
            ]
            if len(same) != 1:
                break
            value = same[0]
        else:
            break
    return value, groups


def out_chain(site: Site) -> list[ir.Operation]:
    """The ops of the site's own location that take its result on to the model's tensor: each
    the only user of the one before (generics, compute barriers)."""
    chain: list[ir.Operation] = []
    value = site.op.results[0]
    while True:
        users = [u for u in value.uses]
        if len(users) != 1:
            break
        user = users[0].owner
        user = user.operation if hasattr(user, "operation") else user
        if not _same_place(user, site) or len(user.results) != 1:
            break
        if user.name != "linalg.generic" and not user.name.startswith("iree_tensor_ext.compute_barrier"):
            break
        chain.append(user)
        value = user.results[0]
    while chain and not is_float(chain[-1].results[0]):
        chain.pop()
    return chain


def as_f32(value: ir.Value, ip: ir.InsertionPoint) -> ir.Value:
    """f32 of an integer tensor (signed), elementwise."""
    ty = ir.RankedTensorType(value.type)
    f32 = ir.F32Type.get()
    rank = ty.rank
    empty = tensor.EmptyOp(list(ty.shape), f32, ip=ip).result
    with ip:
        return generic(
            ir.RankedTensorType.get(list(ty.shape), f32),
            [value],
            empty,
            [dim_map(rank, range(rank))] * 2,
            ["parallel"] * rank,
            lambda q, _: arith.sitofp(f32, q),
        )


def _scales(site: Site, chain: list[ir.Operation]) -> list[tuple[ir.Value, list[int]]]:
    """The constant float inputs of the first op scaling the accumulator, each with the site's
    loops its dims follow (per output channel: the N loop; per group: the group loop too)."""
    if not chain or chain[0].name != "linalg.generic":
        return []
    first = chain[0]
    maps = _maps(first)
    acc_map = maps[[i for i, v in enumerate(first.operands) if v == site.op.results[0]][0]]
    site_out = _maps(site.op)[-1]
    loop_of = {}  # the scaling op's loop -> the site's loop it runs over
    for p, expr in enumerate(acc_map.results):
        if isinstance(expr, ir.AffineDimExpr) and isinstance(site_out.results[p], ir.AffineDimExpr):
            loop_of[ir.AffineDimExpr(expr).position] = ir.AffineDimExpr(site_out.results[p]).position
    found = []
    for v, m in zip(list(first.operands)[: len(maps) - 1], maps):
        if v == site.op.results[0] or not is_float(v) or not is_const_expr(v):
            continue
        dims = [ir.AffineDimExpr(e).position if isinstance(e, ir.AffineDimExpr) else None for e in m.results]
        if None in dims or any(d not in loop_of for d in dims):
            continue
        found.append((v, [loop_of[d] for d in dims]))
    return found


def dequantized_rhs(site: Site, chain: list[ir.Operation], groups, ip: ir.InsertionPoint) -> tuple[ir.Value, str]:
    """sitofp(codes)·scales in the codes' layout, the groups merged back into K, and a note when no
    scale was found (the codes as f32 integers)."""
    codes = site.value("rhs")
    maps = _maps(site.op)
    if not maps or not all(isinstance(e, ir.AffineDimExpr) for e in maps[1].results):
        return as_f32(codes, ip), "codes not read one loop per dim: f32 of the integers"
    rhs_loops = [ir.AffineDimExpr(e).position for e in maps[1].results]
    ty = ir.RankedTensorType(codes.type)
    rank = ty.rank
    f32 = ir.F32Type.get()
    scales = [(v, [rhs_loops.index(loop) for loop in loops]) for v, loops in _scales(site, chain)]
    scales = [(v, dims) for v, dims in scales if len(dims) == len(set(dims))]
    if not scales:
        return as_f32(codes, ip), "codes without scales (no constant scale scales its accumulator): f32 of the integers"
    empty = tensor.EmptyOp(list(ty.shape), f32, ip=ip).result

    def body(q, *rest):
        x = arith.sitofp(f32, q)
        for s in rest[:-1]:
            x = arith.mulf(x, s)
        return x

    with ip:
        value = generic(
            ir.RankedTensorType.get(list(ty.shape), f32),
            [codes, *(v for v, _ in scales)],
            empty,
            [dim_map(rank, range(rank)), *(dim_map(rank, dims) for _, dims in scales), dim_map(rank, range(rank))],
            ["parallel"] * rank,
            body,
        )
    merged = _merged_groups(site, groups, rhs_loops)
    if merged is not None:
        shape = [1] * len(merged)
        for i, g in enumerate(merged):
            for d in g:
                shape[i] *= ty.shape[d]
        value = tensor.CollapseShapeOp(
            ir.RankedTensorType.get(shape, f32),
            value,
            ir.ArrayAttr.get(
                [ir.ArrayAttr.get([ir.IntegerAttr.get(ir.IntegerType.get_signless(64), d) for d in g]) for g in merged]
            ),
            ip=ip,
        ).result
    return value, ""


def _merged_groups(site: Site, groups, rhs_loops: list[int]) -> list[list[int]] | None:
    """The rhs reassociation that undoes the lhs's regrouping (K split into groups) where the split
    dims are adjacent and in order in the codes too; None when nothing was split."""
    if not groups or all(len(g) == 1 for g in groups):
        return None
    lhs_map = _maps(site.op)[0]
    if not all(isinstance(e, ir.AffineDimExpr) for e in lhs_map.results):
        return None
    lhs_loops = [ir.AffineDimExpr(e).position for e in lhs_map.results]
    merged: list[list[int]] = [[d] for d in range(len(rhs_loops))]
    for g in groups:
        if len(g) < 2:
            continue
        loops = [lhs_loops[d] for d in g]
        if not all(loop in rhs_loops for loop in loops):
            continue
        at = [rhs_loops.index(loop) for loop in loops]
        if at != list(range(at[0], at[0] + len(at))):
            return None
        merged = [m for m in merged if m[0] not in at[1:]]
        merged[[m[0] for m in merged].index(at[0])] = at
    return merged


def dequant_view(site: Site, roles: tuple[str, ...], dequantize_codes: bool) -> DequantView:
    """What each of `roles` of the integer `site` is tapped as (see the module docstring); the ops
    a view adds follow the site in the order lhs, rhs, out."""
    view = DequantView()
    chain = out_chain(site)
    lhs, groups = lhs_source(site)
    cursor = site.op  # the last op a view added (each goes after the one before)
    for role in ROLES:
        if role not in roles:
            continue
        if role == "lhs":
            value, note = lhs, ""
            if not is_float(value):
                value, note = as_f32(value, ir.InsertionPoint.after(cursor)), "f32 of its integers (no float source)"
                cursor = owner(value)
            view.roles[role] = RoleView(value, cursor, note)
        elif role == "rhs":
            value = site.value("rhs")
            if is_float(value):
                view.roles[role] = RoleView(value, cursor)
            elif not is_const_expr(value):  # an integer activation (q·kᵀ of codes), not stored codes
                value = as_f32(value, ir.InsertionPoint.after(cursor))
                cursor = owner(value)
                view.roles[role] = RoleView(value, cursor, "f32 of its integers (no float source)")
            elif not dequantize_codes:
                view.skipped[role] = (
                    "integer codes, not tapped (the dequantize-codes option reads them through their scales)"
                )
            else:
                value, note = dequantized_rhs(site, chain, groups, ir.InsertionPoint.after(cursor))
                cursor = owner(value)
                view.roles[role] = RoleView(value, cursor, note)
        else:
            end = chain[-1] if chain else cursor
            value, note = end.results[0] if chain else site.op.results[0], ""
            if not is_float(value):
                value = as_f32(value, ir.InsertionPoint.after(end))
                note = "f32 of the integer accumulator (no op of the site scales it back)"
                end = owner(value)
            elif not chain:
                note = "the unscaled accumulator (no op of the site scales it back)"
            view.roles[role] = RoleView(value, end, note)
    return view
