"""Site discovery: which ops of a module are matmuls or convolutions, and what they are called.

A `Site` is data: kind, roles (lhs, rhs, out), batch/M/K/N read from the op's indexing
maps (or `stablehlo.dot_general`'s dimension numbers), FLOPs = 2·batch·M·K·N counting all
leading dims (the reference's dim-0-only M is a quirk we do not repeat), and a stable name
taken from the op's location (`NameLoc` → `FusedLoc` → `CallSiteLoc`), else, for an op no
module path names (a model's top-level op), `<kind>@<file.py>:<line>` of the innermost Python
frame its location keeps, else `<kind>#<ordinal>` with an ordinal per kind.

A convolution (any linalg op `linalg.isa_convolution_op` accepts whose body multiplies:
named `conv_*`, depthwise, grouped, or a generic; not a pooling) is a site as its im2col GEMM: M = batch × output image,
K = input channels × filter window, N = output channels, and `batch` the depthwise/group
dims (each group its own GEMM), so FLOPs = 2·batch·M·K·N as for a matmul. Its roles are
the input (lhs; the source of a zero `tensor.pad`, so padding is not counted as data, also
when a grouped convolution splits the padded input into groups),
the filter (rhs) and the result (out). A transposed convolution, lowered as its input spread
over a zero image by a `tensor.insert_slice` (strided when it strides, unit-stride when it only
pads: torch-mlir's form; a plain convolution pads with `tensor.pad`) and a stride-1 convolution, is kind
`conv_transpose_*`: its lhs is the input before the zeros, and M = batch × input image, so its
FLOPs are PyTorch's (the lowering also multiplies the inserted zeros; `opscope.analysis.cost`
counts what it runs). `Site.channels` says which dims are each operand's
channels where they are not the last dim (NCHW: dim 1), so per-channel statistics read
the right axis.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from math import prod

from iree.compiler import ir
from iree.compiler.dialects import linalg

FLOAT_TYPES = ("f32", "f16", "bf16")
ROLES = ("lhs", "rhs", "out")


@dataclass(frozen=True)
class Site:
    """One matmul-like op: its name, kind, operands by role and its contraction sizes."""

    name: str
    kind: str
    op: ir.Operation = field(compare=False, repr=False)
    values: dict = field(compare=False, repr=False)  # role -> ir.Value
    batch: int
    m: int
    k: int
    n: int
    dynamic: bool = False
    channels: dict = field(default_factory=dict, compare=False)  # role -> channel dims, where not the last dim

    @property
    def flops(self) -> int:
        """2·batch·M·K·N (0 when a size is dynamic)."""
        return 0 if self.dynamic else 2 * self.batch * self.m * self.k * self.n

    @property
    def location(self) -> str:
        return str(self.op.location)

    def value(self, role: str) -> ir.Value:
        return self.values[role]

    def shape(self, role: str) -> tuple[int, ...]:
        ty = self.values[role].type
        return tuple(ty.shape) if isinstance(ty, ir.ShapedType) else ()

    def element_type(self, role: str) -> str:
        ty = self.values[role].type
        return str(ty.element_type) if isinstance(ty, ir.ShapedType) else str(ty)

    def numel(self, role: str) -> int:
        return prod(self.shape(role))

    @property
    def lhs_numel(self) -> int:
        return self.numel("lhs")

    @property
    def out_numel(self) -> int:
        return self.numel("out")

    @property
    def is_float(self) -> bool:
        return all(self.element_type(r) in FLOAT_TYPES for r in ROLES)


def python_line(loc: ir.Location) -> str | None:
    """`file.py:LINE` of the innermost Python frame a location holds (an importer's call stack:
    torch's and jax's keep the user's lines), or None."""
    found = re.search(r'"([^"]+\.py)":(\d+):\d+', str(loc))
    return f"{found.group(1).rsplit('/', 1)[-1]}:{found.group(2)}" if found else None


def fallback_name(kind: str, loc: ir.Location) -> str | None:
    """The name of an op no module path names (a model's top-level op): `kind@file.py:LINE`, where
    its Python line is known."""
    line = python_line(loc)
    return f"{kind}@{line}" if line else None


def location_name(loc: ir.Location) -> str | None:
    """The human name a location carries: NameLoc, else inside FusedLoc/CallSiteLoc."""
    if isinstance(loc, ir.NameLoc):
        return loc.name_str
    if isinstance(loc, ir.FusedLoc):
        for sub in loc.locations:
            name = location_name(sub)
            if name:
                return name
        return None
    if isinstance(loc, ir.CallSiteLoc):
        return location_name(loc.callee) or location_name(loc.caller)
    return None


def loop_sizes(maps: list[ir.AffineMap], operands: list[ir.Value]) -> list[int | None]:
    """Size of every loop dimension, read off the operands that index it (None = dynamic)."""
    n_dims = maps[0].n_dims
    sizes: list[int | None] = [None] * n_dims
    for amap, val in zip(maps, operands):
        ty = val.type
        if not isinstance(ty, ir.ShapedType):
            continue
        for pos, expr in enumerate(amap.results):
            if isinstance(expr, ir.AffineDimExpr) and not ty.is_dynamic_dim(pos):
                sizes[expr.position] = ty.shape[pos]
    return sizes


def _linalg_site(op: ir.Operation) -> tuple[str, dict, int, int, int, int, bool] | None:
    if not op.name.startswith("linalg.") or not linalg.isa_contraction_op(op):
        return None
    view = op.opview
    ins = list(view.inputs)
    outs = list(view.outputs)
    if len(ins) != 2 or len(outs) != 1 or len(op.results) != 1:
        return None
    maps_attr = linalg.get_indexing_maps(op)  # named ops like linalg.matvec have no `indexing_maps` view
    if maps_attr is None:
        return None
    maps = [ir.AffineMapAttr(a).value for a in maps_attr]
    dims = linalg.infer_contraction_dimensions(op)
    sizes = loop_sizes(maps, ins + outs)

    def size(ds) -> int | None:
        vals = [sizes[d] for d in ds]
        return None if any(v is None for v in vals) else prod(vals)

    b, m, n, k = size(list(dims.batch)), size(list(dims.m)), size(list(dims.n)), size(list(dims.k))
    dynamic = None in (b, m, n, k)
    kind = op.name.removeprefix("linalg.")
    values = {"lhs": ins[0], "rhs": ins[1], "out": op.results[0]}
    return kind, values, b or 0, m or 0, k or 0, n or 0, dynamic


_DOT_FIELD = re.compile(r"(lhs|rhs)_(batching|contracting)_dimensions\s*=\s*\[([0-9,\s]*)\]")


def _dot_general_site(op: ir.Operation):
    if op.name not in ("stablehlo.dot_general", "stablehlo.dot") or len(op.operands) != 2:
        return None
    lhs, rhs = op.operands[0], op.operands[1]
    lt, rt = lhs.type, rhs.type
    if not (isinstance(lt, ir.RankedTensorType) and isinstance(rt, ir.RankedTensorType)):
        return None
    fields = {("lhs", "batching"): [], ("rhs", "batching"): [], ("lhs", "contracting"): [], ("rhs", "contracting"): []}
    if op.name == "stablehlo.dot":
        fields[("lhs", "contracting")] = [lt.rank - 1]
        fields[("rhs", "contracting")] = [0]
    else:
        text = str(op.attributes["dot_dimension_numbers"])
        for side, what, nums in _DOT_FIELD.findall(text):
            fields[(side, what)] = [int(x) for x in nums.replace(" ", "").split(",") if x]
    lb, lc = fields[("lhs", "batching")], fields[("lhs", "contracting")]
    rb, rc = fields[("rhs", "batching")], fields[("rhs", "contracting")]
    lshape, rshape = list(lt.shape), list(rt.shape)
    dynamic = not (lt.has_static_shape and rt.has_static_shape)
    b = prod(lshape[d] for d in lb)
    k = prod(lshape[d] for d in lc)
    m = prod(s for d, s in enumerate(lshape) if d not in lb and d not in lc)
    n = prod(s for d, s in enumerate(rshape) if d not in rb and d not in rc)
    values = {"lhs": lhs, "rhs": rhs, "out": op.results[0]}
    kind = op.name.removeprefix("stablehlo.")
    return kind, values, b, m, k, n, dynamic


def _conv_site(op: ir.Operation):
    """A linalg convolution as its im2col GEMM, with each operand's channel dims."""
    if (
        not op.name.startswith("linalg.")
        or op.name.startswith("linalg.pooling")
        or not _multiplies(op)
        or not linalg.isa_convolution_op(op)
    ):
        return None  # pooling implements the convolution interface too: it multiplies nothing
    view = op.opview
    ins, outs = list(view.inputs), list(view.outputs)
    if len(ins) != 2 or len(outs) != 1 or len(op.results) != 1:  # quantized convs carry zero points
        return None
    maps_attr = linalg.get_indexing_maps(op)
    if maps_attr is None:
        return None
    maps = [ir.AffineMapAttr(a).value for a in maps_attr]
    dims = linalg.infer_convolution_dimensions(op)
    sizes = loop_sizes(maps, ins + outs)

    def size(*groups) -> int | None:
        vals = [sizes[d] for g in groups for d in g]
        return None if any(v is None for v in vals) else prod(vals)

    depth, ichan, ochan = list(dims.depth), list(dims.input_channel), list(dims.output_channel)
    b, m = size(depth), size(dims.batch, dims.output_image)
    k, n = size(ichan, dims.filter_loop), size(ochan)
    kind = op.name.removeprefix("linalg.")
    lhs, grouped = _unpadded(ins[0]), None
    if lhs is ins[0] and isinstance(lhs, ir.OpResult) and lhs.owner.name == "tensor.expand_shape" and depth:
        # a grouped convolution: the input (padded or spread, or not) split into groups; the site reads the
        # input itself whether padded or not (found by the generated-model tests: an unpadded one's lhs
        # was the split view, so dump-tensors and extract-site gave the layer's input another shape)
        grouped = [[ir.IntegerAttr(d).value for d in g] for g in ir.ArrayAttr(lhs.owner.attributes["reassociation"])]
        lhs = _unpadded(lhs.owner.operands[0])
    spread = _zero_inserted(lhs)
    if spread is not None:  # a transposed convolution: its input, one GEMM row per input pixel (torch's count)
        lhs, kind = spread, kind.replace("conv_", "conv_transpose_", 1)
        x, channels_in = ir.RankedTensorType(spread.type), size(depth, ichan)
        m = None if not x.has_static_shape or not channels_in else prod(x.shape) // channels_in
    values = {"lhs": lhs, "rhs": ins[1], "out": op.results[0]}
    channels = {}
    for role, amap, loops in (
        ("lhs", maps[0], depth + ichan),
        ("rhs", maps[1], depth + ochan),
        ("out", maps[2], depth + ochan),
    ):
        found, rank = _result_positions(amap, loops), len(amap.results)
        if role == "lhs" and grouped is not None:  # positions in the input before it was split into groups
            found, rank = tuple(sorted({i for i, g in enumerate(grouped) for p in found if p in g})), len(grouped)
        if found and found != (rank - 1,):
            channels[role] = found
    return kind, values, b or 0, m or 0, k or 0, n or 0, None in (b, m, k, n), channels


def _multiplies(op: ir.Operation) -> bool:
    """The op's body multiplies (a convolution's multiply-accumulate; a pooling's max or sum does not)."""
    if not op.regions or not len(op.regions[0].blocks):
        return False
    return any(
        inner.operation.name in ("arith.mulf", "arith.muli", "complex.mul")
        for inner in op.regions[0].blocks[0].operations
    )


def _result_positions(amap: ir.AffineMap, loops: list[int]) -> tuple[int, ...]:
    """The result positions of `amap` that are exactly one of the loop dims `loops`."""
    return tuple(i for i, e in enumerate(amap.results) if isinstance(e, ir.AffineDimExpr) and e.position in loops)


def _unpadded(value: ir.Value) -> ir.Value:
    """The source of a `tensor.pad` with a zero constant, else `value`."""
    if not isinstance(value, ir.OpResult) or value.owner.name != "tensor.pad":
        return value
    pad = value.owner
    yielded = list(pad.regions[0].blocks[0].operations)[-1].operands[0]
    return pad.operands[0] if is_zeros(yielded) else value


def _zero_inserted(value: ir.Value) -> ir.Value | None:
    """The source of a `tensor.insert_slice` of a whole tensor into a larger zero image, else None:
    how torch-mlir lowers every transposed convolution that pads or strides (its input spread
    over zeros, strided or not, then a stride-1 convolution; a plain convolution pads with
    `tensor.pad` instead)."""
    if not isinstance(value, ir.OpResult) or value.owner.name != "tensor.insert_slice":
        return None
    insert = value.owner
    strides = list(ir.DenseI64ArrayAttr(insert.attributes["static_strides"]))
    source, dest = insert.operands[0], insert.operands[1]
    src, dst = source.type, dest.type
    if not isinstance(src, ir.RankedTensorType) or src.rank != len(strides) or src.rank != dst.rank:
        return None
    if list(ir.DenseI64ArrayAttr(insert.attributes["static_sizes"])) != list(src.shape):
        return None  # a part of the source: not a spread of the whole input
    if all(st == 1 for st in strides) and list(src.shape) == list(dst.shape):
        return None
    return source if is_zeros(dest) else None


def is_zeros(value: ir.Value) -> bool:
    """`value` is a 0.0 constant (scalar or splat) or a `linalg.fill` of one."""
    if not isinstance(value, ir.OpResult):
        return False
    op = value.owner
    if op.name == "linalg.fill":
        value = op.operands[0]
        if not isinstance(value, ir.OpResult):
            return False
        op = value.owner
    if op.name != "arith.constant":
        return False
    attr = op.attributes["value"]
    if isinstance(attr, ir.FloatAttr):
        return attr.value == 0.0
    return isinstance(attr, ir.DenseFPElementsAttr) and attr.is_splat and attr.get_splat_value().value == 0.0


def classify(op: ir.Operation):
    """(kind, values, batch, m, k, n, dynamic, channels) when `op` is a site, else None."""
    found = _linalg_site(op) or _dot_general_site(op)
    return found + ({},) if found else _conv_site(op)


class SiteList(list):
    """A model's sites (`Site`s, in IR order) as a report: `opscope.render` writes it as a table;
    `source` names the model (empty for a module given as such)."""

    def __init__(self, sites: Iterable[Site] = (), source: str = ""):
        super().__init__(sites)
        self.source = source

    def to_dict(self) -> dict:
        """JSON-safe: the source and each site's name, kind, sizes and FLOPs (None when dynamic)."""
        return {
            "source": self.source,
            "sites": [
                {"name": s.name, "kind": s.kind, "batch": s.batch, "m": s.m, "k": s.k, "n": s.n}
                | {"flops": None if s.dynamic else s.flops}
                for s in self
            ],
        }


def find_sites(root: ir.Operation | ir.Module) -> list[Site]:
    """Every matmul-like site under `root`, in IR order, with unique stable names."""
    candidates: list[ir.Operation] = []

    def visit(op):  # only gathers: exceptions inside walk callbacks lose their message
        if op.name.startswith(("linalg.", "stablehlo.dot")):
            candidates.append(op)
        return ir.WalkResult.ADVANCE

    root.operation.walk(visit)
    found = [(op, info) for op in candidates if (info := classify(op)) is not None]
    sites: list[Site] = []
    ordinals: dict[str, int] = {}
    used: dict[str, int] = {}
    for op, (kind, values, b, m, k, n, dynamic, channels) in found:
        name = location_name(op.location) or fallback_name(kind, op.location)
        if not name:
            name = f"{kind}#{ordinals.get(kind, 0)}"
        ordinals[kind] = ordinals.get(kind, 0) + 1
        if name in used:
            used[name] += 1
            name = f"{name}#{used[name]}"
        else:
            used[name] = 0
        sites.append(Site(name, kind, op, values, b, m, k, n, dynamic, channels))
    return sites


_OPERAND = {"lhs": 0, "rhs": 1}


def is_convolution(site: Site) -> bool:
    """The site is a linalg convolution (not a contraction)."""
    return not linalg.isa_contraction_op(site.op)


def operand_dims(site: Site, role: str, which: str = "k") -> tuple[int, ...] | None:
    """The dims of the site op's `role` operand (lhs or rhs, as the op reads it: a
    convolution's padded input) indexed by its contraction loops (`which="k"`: K; for a
    convolution input channels × filter window), or by its channel loops (`which="channel"`,
    convolutions: input channels of lhs, output channels of rhs, and depthwise/group dims),
    read from the indexing maps; None when such a dim is indexed by a compound expression."""
    op = site.op
    maps = [ir.AffineMapAttr(a).value for a in linalg.get_indexing_maps(op)]
    amap = maps[_OPERAND[role]]
    if linalg.isa_contraction_op(op):
        loops = set(linalg.infer_contraction_dimensions(op).k)
    else:
        dims = linalg.infer_convolution_dimensions(op)
        if which == "k":
            loops = set(dims.input_channel) | set(dims.filter_loop)
        else:
            loops = set(dims.depth) | set(dims.input_channel if role == "lhs" else dims.output_channel)
    found = []
    for pos, expr in enumerate(amap.results):
        if isinstance(expr, ir.AffineDimExpr):
            if expr.position in loops:
                found.append(pos)
        elif which == "k" and any(_uses(expr, d, amap.n_dims) for d in loops):
            return None
    return tuple(found)


def _uses(expr: ir.AffineExpr, dim: int, n_dims: int) -> bool:
    """`expr` reads loop dim `dim` (it changes when that dim is replaced by a symbol)."""
    ctx = expr.context  # callers need not hold a context (`opscope.act.weights.weight_bytes` from the API)
    repl = [
        ir.AffineDimExpr.get(i, context=ctx) if i != dim else ir.AffineConstantExpr.get(0, context=ctx)
        for i in range(n_dims)
    ]
    return str(expr.compose(ir.AffineMap.get(n_dims, 0, repl, context=ctx))) != str(expr)
