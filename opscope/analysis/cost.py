"""Static cost model: exact FLOPs and a bytes floor per op, read from the IR alone.

Nothing executes the model. Every top-level op of every `func.func` gets an `OpCost`;
docs/analysis.md ("Cost model") has the rules with examples and measurements.

Loops: an `scf.for` with a static trip count (`opscope.ir.flops.trip_count`) costs trip
count × its body, each body op costed by the same rules (nested loops too); its domain is
its trip count. A loop without a static trip count (`scf.while`, non-constant bounds) is
unknown with the reason, never guessed and never 0; so is `scf.forall`/`scf.parallel`.
`executions(op)` says how many times the totals count any op, body ops included.

FLOPs are `opscope.ir.flops`'s (iteration domain × body arithmetic; softmax 5 per
element; attention by its formula; top-level arith/math ops per element).

Bytes, a floor (each operand read once, each result written once, perfect reuse inside an
op, none across ops), dtype-aware (`numel · bits / 8` rounded up, i1 a byte): each
distinct input whose block argument the body uses is read whole; each live result is
written; an output is also read when the body uses its block argument (an accumulator);
a tensor read with `tensor.extract` in the body is read at most once per domain point.
Scalars, leaves (function arguments, constants, `util.global.load`, `tensor.empty`) and
views (`expand_shape`, `collapse_shape`, `cast`, `extract_slice`...) move 0; copies
(`concat`, `pad`, `insert_slice`, `pack`...) read and write what they copy. Weight bytes
are reads of weights (`opscope.ir.const_expr.is_weight`). Ops computing constant expressions
over weights (a weight's transpose) are hoisted by IREE, so they cost 0 per call
(`hoist=False` gives their literal cost; `ModuleCost.hoisted` keeps it).

Unknown (None with a one-line reason, never guessed, always listed): a dynamic dim, an
unmodelled op with tensor results (`iree_linalg_ext.sort`, a custom op...), a `func.call`,
a loop without a static trip count, a loop whose body holds an unknown op.

Deliberate differences from the reference's ledger (§3.1) and cost model (§3.14): exact
FLOPs from bodies instead of a per-kind table (matmul over all leading dims, softmax 5 not
3 per element); accumulators are read; a dynamic dim is unknown, not 0 bytes; views and
slices move 0; hoisted constant expressions cost 0; bytes are always dtype-aware.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from math import prod

from iree.compiler import ir
from iree.compiler.dialects import linalg

from opscope.analysis.roofline import DEFAULT_RIDGE, roofline_class
from opscope.ir.const_expr import is_const_expr, is_weight, memoized
from opscope.ir.flops import (
    ATTENTION,
    FOR,
    SOFTMAX,
    SOFTMAX_FLOPS,
    WHILE,
    attention_dims,
    attention_op_flops,
    domain_size,
    indexing_maps,
    live_results,
    scalar_op_flops,
    structured_flops,
    trip_count,
)
from opscope.ir.labels import op_label
from opscope.ir.sites import location_name, loop_sizes

SOURCE_DIALECTS = ("stablehlo.", "torch.", "tosa.", "mhlo.")  # what importers lower to linalg

LEAVES = frozenset({"arith.constant", "util.global.load", "tensor.empty"})
VIEWS = frozenset(
    {
        "tensor.expand_shape",
        "tensor.collapse_shape",
        "tensor.cast",
        "tensor.bitcast",
        "tensor.reshape",
        "tensor.extract_slice",
        "util.optimization_barrier",
    }
)
UNMODELLED_LOOPS = frozenset({"scf.forall", "scf.parallel"})
TERMINATORS = frozenset({"scf.yield", "scf.condition"})
COPIES = frozenset(
    {
        "tensor.concat",
        "tensor.pad",
        "tensor.insert_slice",
        "tensor.splat",
        "tensor.from_elements",
        "linalg.pack",
        "linalg.unpack",
    }
)


@dataclass(frozen=True)
class OpCost:
    """The static cost of one op: FLOPs, a bytes floor, and why anything is unknown."""

    index: int  # position in the function body walk (top-level ops)
    name: str  # location name (`opscope.ir.sites.location_name`), else f"{label}#{ordinal}"
    label: str  # opscope.ir.labels.op_label(op)
    domain: int | None  # iteration-space points (0: none, a leaf or view; None: a dynamic dim)
    flops: int | None  # None = unknown (dynamic, or an op we cannot model)
    bytes_read: int | None
    bytes_written: int | None
    bytes_weights: int | None  # the part of bytes_read coming from weights
    unknown: str | None = None  # why something is unknown (one line), else None

    @property
    def bytes(self) -> int | None:
        """Bytes read + written, None when either is unknown."""
        if self.bytes_read is None or self.bytes_written is None:
            return None
        return self.bytes_read + self.bytes_written

    @property
    def intensity(self) -> float | None:
        """FLOPs per byte; None when bytes are 0 or unknown (distinct from 0), or FLOPs unknown."""
        b = self.bytes
        if not b or self.flops is None:
            return None
        return self.flops / b


# -- tensor sizes ------------------------------------------------------------------------
def element_bits(ty: ir.Type) -> int | None:
    """Storage bits of one element (i1 is a byte, index 64), None for an unknown type."""
    if isinstance(ty, ir.ComplexType):
        inner = element_bits(ty.element_type)
        return None if inner is None else 2 * inner
    if isinstance(ty, ir.IndexType):
        return 64
    width = getattr(ty, "width", None)
    if isinstance(ty, (ir.FloatType, ir.IntegerType)) and width:
        return 8 if width == 1 else width
    return None


def value_bytes(value: ir.Value) -> int | None:
    """Bytes of a tensor value (0 for a scalar), None when a dim is dynamic or the type unknown."""
    ty = value.type
    if not isinstance(ty, ir.ShapedType):
        return 0
    if not ty.has_static_shape:
        return None
    bits = element_bits(ty.element_type)
    return None if bits is None else -(-prod(ty.shape) * bits // 8)


def _is_tensor(value: ir.Value) -> bool:
    """A tensor-typed value (ranked or not)."""
    return isinstance(value.type, ir.RankedTensorType) or isinstance(value.type, ir.UnrankedTensorType)


def _dynamic_reason(values: list[ir.Value]) -> str | None:
    """A one-line reason naming the first tensor with a dynamic dim (or unknown dtype), else None."""
    for v in values:
        if _is_tensor(v) and value_bytes(v) is None:
            return f"dynamic shape {v.type}" if not v.type.has_static_shape else f"unknown element type {v.type}"
    return None


@dataclass
class _Traffic:
    """Bytes an op moves, accumulated operand by operand (None once something is unknown)."""

    read: int | None = 0
    written: int | None = 0
    weights: int | None = 0

    def add_read(self, value: ir.Value, max_elements: int | None = None) -> None:
        """Read `value`: its whole tensor, or at most `max_elements` of it."""
        n = value_bytes(value)
        if n is not None and max_elements is not None:
            n = min(n, -(-max_elements * element_bits(value.type.element_type) // 8))
        w = n if (n and not isinstance(value, ir.BlockArgument) and is_weight(value)) else 0
        self.read = None if (self.read is None or n is None) else self.read + n
        self.weights = None if (self.weights is None or n is None) else self.weights + w

    def read_unknown(self) -> None:
        """Something is read in an amount we cannot know statically."""
        self.read = self.weights = None

    def add_written(self, value: ir.Value) -> None:
        """Write `value` whole."""
        n = value_bytes(value)
        self.written = None if (self.written is None or n is None) else self.written + n


def _distinct(values) -> list[ir.Value]:
    """`values` without repeats (the same SSA value is read once)."""
    out: list[ir.Value] = []
    for v in values:
        if not any(v == u for u in out):
            out.append(v)
    return out


# -- one op --------------------------------------------------------------------------------
@dataclass
class _Raw:
    """An op's cost before it gets its index and name."""

    domain: int | None = None
    flops: int | None = 0
    traffic: _Traffic = field(default_factory=_Traffic)
    unknown: str | None = None


def _unknown(why: str) -> _Raw:
    """A cost with every number unknown, and why."""
    return _Raw(None, None, _Traffic(None, None, None), why)


def _structured(op: ir.Operation, maps_attr: ir.Attribute) -> _Raw:
    """A linalg structured op: domain × body FLOPs, inputs read, results written, accumulators read."""
    results, operands = list(op.results), list(op.operands)
    if not results:
        return _unknown(f"{op.name} on buffers is not modelled")
    n_maps = len(indexing_maps(maps_attr))
    if n_maps != len(operands):
        return _unknown(f"{op.name}: {n_maps} indexing maps for {len(operands)} operands")
    n_ins = len(operands) - len(results)
    domain, flops, body_why = structured_flops(op, maps_attr)
    region = op.regions[0] if op.regions and len(op.regions[0].blocks) else None
    args = list(region.blocks[0].arguments) if region is not None else []
    raw = _Raw(domain, flops)
    for v in _distinct(operands[:n_ins]):
        if _arg_used(args, operands, v):
            raw.traffic.add_read(v)
    for i, (r, live) in enumerate(zip(results, live_results(op))):
        if not live:
            continue  # an unread result (torch's argmax beside a max) is dropped by any compiler
        if len(args) == len(operands) and list(args[n_ins + i].uses):
            raw.traffic.add_read(operands[n_ins + i])
        raw.traffic.add_written(r)
    captured_why = _captured_reads(region.blocks[0], domain, raw.traffic) if region is not None else None
    dynamic = _dynamic_reason(operands + results)
    if domain is None:
        raw.unknown = dynamic or "a loop size is not read off any operand"
    elif raw.traffic.read is None or raw.traffic.written is None:
        raw.unknown = dynamic or captured_why
    raw.unknown = raw.unknown or body_why
    return raw


def _arg_used(args: list[ir.BlockArgument], operands: list[ir.Value], value: ir.Value) -> bool:
    """The body uses the block argument of some operand that is `value` (True when args do not map 1:1)."""
    if len(args) != len(operands):
        return True
    return any(u == value and list(a.uses) for a, u in zip(args, operands))


def _captured_reads(block: ir.Block, domain: int | None, traffic: _Traffic) -> str | None:
    """Read the tensors the body takes from above with `tensor.extract` (one element per domain
    point, at most the whole tensor); the reason when that amount is unknown."""
    seen: list[ir.Value] = []
    why = None
    for inner in block.operations:
        inner = inner.operation
        if inner.name != "tensor.extract":
            continue
        src = inner.operands[0]
        if (isinstance(src, ir.BlockArgument) and src.owner == block) or any(src == s for s in seen):
            continue
        seen.append(src)
        if domain is None:
            traffic.read_unknown()
        else:
            traffic.add_read(src, domain)
        if value_bytes(src) is None:
            why = why or f"dynamic shape {src.type} read in the body"
    return why


def _attention(op: ir.Operation) -> _Raw:
    """The attention formula; reads q, k, v and the mask, writes the output."""
    operands, results = list(op.operands), list(op.results)
    n_ins = len(operands) - len(results)
    raw = _Raw(domain_size(loop_sizes(indexing_maps(op.attributes["indexing_maps"]), operands)))
    dims = attention_dims(op)
    if dims is None:
        return _unknown(_dynamic_reason(operands + results) or "an attention size is not read off any operand")
    raw.flops, raw.unknown = attention_op_flops(op, dims)
    for v in _distinct(operands[:n_ins]):
        raw.traffic.add_read(v)
    for r in results:
        raw.traffic.add_written(r)
    return raw


def _softmax(op: ir.Operation) -> _Raw:
    """5 FLOPs per input element; the input read, the result written."""
    src, result = op.operands[0], op.results[0]
    if value_bytes(src) is None or value_bytes(result) is None:
        return _unknown(_dynamic_reason([src, result]) or "softmax sizes unknown")
    numel = prod(src.type.shape)
    raw = _Raw(numel, SOFTMAX_FLOPS * numel)
    raw.traffic.add_read(src)
    raw.traffic.add_written(result)
    return raw


def _elementwise(op: ir.Operation) -> _Raw:
    """A top-level arith/math op: its per-element FLOPs times the result's elements."""
    per = scalar_op_flops(op, False)
    if per is None:
        return _unknown(f"{op.name} is not modelled")
    result = op.results[0]
    ty = result.type
    if isinstance(ty, ir.ShapedType) and not ty.has_static_shape:
        return _unknown(_dynamic_reason([result]) or "dynamic shape")
    numel = prod(ty.shape) if isinstance(ty, ir.ShapedType) else 1
    raw = _Raw(numel, per * numel)
    for v in _distinct(list(op.operands)):
        raw.traffic.add_read(v)
    for r in op.results:
        raw.traffic.add_written(r)
    return raw


def _copy(op: ir.Operation) -> _Raw:
    """Data movement: 0 FLOPs; reads the tensors it copies (an insert_slice its source), writes what it copies."""
    if op.name == "tensor.insert_slice":
        srcs, written = [op.operands[0]], [op.operands[0]]  # the destination is updated in place
    else:
        srcs = [v for v in _distinct(list(op.operands)) if _is_tensor(v)]
        if op.name in ("linalg.pack", "linalg.unpack"):
            srcs = srcs[:1]  # the other tensor is the destination
        written = list(op.results)
    raw = _Raw(None, 0)
    for v in srcs:
        raw.traffic.add_read(v)
    for v in written:
        raw.traffic.add_written(v)
    ty = written[0].type
    if ty.has_static_shape:
        raw.domain = prod(ty.shape)
    if raw.traffic.read is None or raw.traffic.written is None:
        raw.unknown = _dynamic_reason(list(op.operands) + list(op.results))
    return raw


def _times(x: int | None, n: int) -> int | None:
    return None if x is None else x * n


def _plus(total: int | None, x: int | None) -> int | None:
    return None if total is None or x is None else total + x


def body_costs(loop, *, hoist: bool = True) -> list[OpCost]:
    """The costs of one iteration of an `scf.for`'s body ops, in order (terminator left out);
    names as `analyze` gives them (location, else `label#position`)."""
    loop = loop.operation if hasattr(loop, "operation") else loop
    out = []
    for i, inner in enumerate(loop.regions[0].blocks[0].operations):
        inner = inner.operation
        if inner.name not in TERMINATORS:
            out.append(op_cost(inner, i, location_name(inner.location) or f"{op_label(inner)}#{i}", hoist=hoist))
    return out


def _loop(op: ir.Operation, hoist: bool) -> _Raw:
    """An `scf.for`: trip count × the sum of its body ops' costs; unknown without a static trip count."""
    trips, why = trip_count(op)
    if trips is None:
        return _unknown(why)
    raw = _Raw(trips, 0)
    t = raw.traffic
    for c in body_costs(op, hoist=hoist):
        raw.flops = _plus(raw.flops, c.flops)
        t.read, t.written, t.weights = (
            _plus(t.read, c.bytes_read),
            _plus(t.written, c.bytes_written),
            _plus(t.weights, c.bytes_weights),
        )
        if c.unknown is not None and raw.unknown is None:
            raw.unknown = f"body op {c.name}: {c.unknown}"
    raw.flops = _times(raw.flops, trips)
    t.read, t.written, t.weights = _times(t.read, trips), _times(t.written, trips), _times(t.weights, trips)
    return raw


def _raw_cost(op: ir.Operation, hoist: bool = True) -> _Raw:
    """The literal cost of one op by its kind (see the module docstring)."""
    name = op.name
    if name in LEAVES or name in VIEWS:
        return _Raw(0, 0)
    if name == FOR:
        return _loop(op, hoist)
    if name == WHILE:
        return _unknown(trip_count(op)[1])
    if name in UNMODELLED_LOOPS:
        return _unknown(f"{name} is not modelled")
    if name == SOFTMAX:
        return _softmax(op)
    if name == ATTENTION:
        return _attention(op)
    if name.startswith("linalg.") and name not in COPIES:
        maps = linalg.get_indexing_maps(op)
        if maps is not None:
            return _structured(op, maps)
    if name in COPIES:
        return _copy(op)
    if name.startswith(("arith.", "math.")) and op.results:
        return _elementwise(op)
    if name == "func.call":
        callee = ir.FlatSymbolRefAttr(op.attributes["callee"]).value
        return _unknown(f"a call: @{callee}'s ops are costed in @{callee}, once, not per call")
    if not any(_is_tensor(r) for r in op.results):
        return _Raw(0, 0)
    if name.startswith(SOURCE_DIALECTS):
        return _unknown(f"{name} is not modelled (the cost model reads linalg: import the module first)")
    return _unknown(f"{name} is not modelled")


def is_hoisted(op: ir.Operation) -> bool:
    """A constant expression over weights (a weight's transpose...): IREE computes it once, not per call."""
    if op.name in LEAVES or op.name in VIEWS:
        return False
    tensors = [r for r in op.results if _is_tensor(r)]
    return bool(tensors) and all(is_const_expr(r) for r in tensors) and any(is_weight(r) for r in tensors)


def op_cost(op, index: int = 0, name: str | None = None, *, hoist: bool = True) -> OpCost:
    """The cost of any single op, standalone; `name` defaults to its location name, else `label#index`.

    With `hoist` (the default) a hoisted constant expression (`is_hoisted`) costs 0."""
    op = op.operation if hasattr(op, "operation") else op
    label = op_label(op)
    name = name or location_name(op.location) or f"{label}#{index}"
    if hoist and is_hoisted(op):
        return OpCost(index, name, label, 0, 0, 0, 0, 0)
    raw = _raw_cost(op, hoist)
    t = raw.traffic
    return OpCost(index, name, label, raw.domain, raw.flops, t.read, t.written, t.weights, raw.unknown)


def executions(op, memo: dict | None = None) -> tuple[int | None, str | None]:
    """How many times `analyze`'s totals count `op` per call of its function: 1 at the top
    level, times the trip count of every `scf.for` around it; (None, why) when the totals
    do not contain its FLOPs: they are unknown, it is a hoisted constant expression (0 per
    call), or it sits in a loop without a static trip count or with an unknown body, in
    another op with a region, or outside a top-level `func.func`. `memo` (a dict) keeps
    the loops' costs between calls."""
    op = op.operation if hasattr(op, "operation") else op
    memo = {} if memo is None else memo
    if is_hoisted(op):
        return None, "a hoisted constant expression (computed once at load, 0 per call)"
    runs, top, parent = 1, op, op.parent
    while parent is not None and parent.name != "func.func":
        if parent.name not in (FOR, WHILE):
            return None, f"inside {parent.name}, which the cost model does not enter"
        trips, why = trip_count(parent)
        if trips is None:
            return None, f"inside loop {location_name(parent.location) or parent.name}: {why}"
        runs *= trips
        top, parent = parent, parent.parent
    if parent is None or (
        parent.parent is not None and (parent.parent.name != "builtin.module" or parent.parent.parent is not None)
    ):
        return None, "outside the top-level func.funcs that analyze costs"
    if top not in memo:
        memo[top] = op_cost(top)
    if memo[top].flops is None:
        where = "its" if top == op else "its loop's"
        return None, f"{where} FLOPs are unknown ({memo[top].unknown})"
    return runs, None


def _hoisted_in_loops(op: ir.Operation) -> list[ir.Operation]:
    """Hoisted constant expressions inside the bodies of the `scf.for`s `op` is or holds."""
    found = []
    if op.name == FOR:
        for inner in op.regions[0].blocks[0].operations:
            inner = inner.operation
            found += [inner] if is_hoisted(inner) else _hoisted_in_loops(inner)
    return found


# -- a module ------------------------------------------------------------------------------
@dataclass(frozen=True)
class LabelCost:
    """Totals of one op kind (label)."""

    label: str
    count: int
    flops: int
    bytes: int
    bytes_weights: int
    unknown: int

    @property
    def intensity(self) -> float | None:
        """FLOPs per byte of the kind, None when it moves nothing."""
        return self.flops / self.bytes if self.bytes else None


@dataclass(frozen=True)
class RooflineSplit:
    """FLOPs and bytes of memory-bound (trivial included) vs compute-bound ops at `ridge`."""

    ridge: float
    memory_flops: int
    compute_flops: int
    memory_bytes: int
    compute_bytes: int
    unknown_ops: int

    @property
    def memory_byte_share(self) -> float:
        """Share of the classified bytes moved by memory-bound ops."""
        total = self.memory_bytes + self.compute_bytes
        return self.memory_bytes / total if total else 0.0

    @property
    def compute_flop_share(self) -> float:
        """Share of the classified FLOPs done by compute-bound ops."""
        total = self.memory_flops + self.compute_flops
        return self.compute_flops / total if total else 0.0


@dataclass(frozen=True)
class FunctionCost:
    """The costs of one function's top-level ops, in body order."""

    name: str
    ops: list[OpCost]


@dataclass(frozen=True)
class ModuleCost:
    """Every function's op costs, with totals and rankings (the ledger that renders it: `opscope.analysis.ledger`)."""

    functions: list[FunctionCost]
    hoisted: list[OpCost] = field(default_factory=list)  # literal costs of ops hoisted out (0 in `ops`)

    @property
    def ops(self) -> list[OpCost]:
        """All op costs, function by function."""
        return [c for f in self.functions for c in f.ops]

    @property
    def total_flops(self) -> int:
        """FLOPs of the ops whose FLOPs are known."""
        return sum(c.flops or 0 for c in self.ops)

    @property
    def total_bytes_read(self) -> int:
        """Bytes read by the ops whose reads are known."""
        return sum(c.bytes_read or 0 for c in self.ops)

    @property
    def total_bytes_written(self) -> int:
        """Bytes written by the ops whose writes are known."""
        return sum(c.bytes_written or 0 for c in self.ops)

    @property
    def total_bytes(self) -> int:
        """Bytes moved (read + written) by the ops whose bytes are known."""
        return self.total_bytes_read + self.total_bytes_written

    @property
    def total_weight_bytes(self) -> int:
        """Weight bytes read (a part of the bytes read)."""
        return sum(c.bytes_weights or 0 for c in self.ops)

    @property
    def weight_share(self) -> float:
        """Weight bytes over all bytes moved (0 when nothing moves)."""
        return self.total_weight_bytes / self.total_bytes if self.total_bytes else 0.0

    @property
    def intensity(self) -> float:
        """Total FLOPs per byte moved (0 when nothing moves, as the reference)."""
        return self.total_flops / self.total_bytes if self.total_bytes else 0.0

    @property
    def unknown(self) -> list[tuple[str, str, str]]:
        """(label, name, why) of every op with an unknown part."""
        return [(c.label, c.name, c.unknown) for c in self.ops if c.unknown is not None]

    @property
    def complete(self) -> bool:
        """No op has an unknown part (else the totals are lower bounds)."""
        return not self.unknown

    def by_label(self) -> list[LabelCost]:
        """Per-kind totals, by bytes then FLOPs, descending."""
        acc: dict[str, list[int]] = {}
        for c in self.ops:
            a = acc.setdefault(c.label, [0, 0, 0, 0, 0])
            a[0] += 1
            a[1] += c.flops or 0
            a[2] += c.bytes or 0
            a[3] += c.bytes_weights or 0
            a[4] += c.unknown is not None
        rows = [LabelCost(label, *a) for label, a in acc.items()]
        return sorted(rows, key=lambda r: (-r.bytes, -r.flops, r.label))

    def top(self, n: int = 12, by: str = "flops") -> list[OpCost]:
        """The `n` ops with the most FLOPs (`by="flops"`) or bytes (`by="bytes"`), zero and unknown left out."""
        if by not in ("flops", "bytes"):
            raise ValueError(f"top(by={by!r}): choose 'flops' or 'bytes'")
        keyed = [(getattr(c, by), c) for c in self.ops]
        keyed = [(v, c) for v, c in keyed if v]
        keyed.sort(key=lambda vc: -vc[0])
        return [c for _, c in keyed[:n]]

    def roofline_split(self, ridge: float = DEFAULT_RIDGE) -> RooflineSplit:
        """FLOPs and bytes of memory-bound (trivial ops included) vs compute-bound ops; unknown ops counted apart."""
        mf = cf = mb = cb = unknown = 0
        for c in self.ops:
            cls = roofline_class(c, ridge)
            if cls == "unknown":
                unknown += 1
            elif cls == "compute-bound":
                cf += c.flops or 0
                cb += c.bytes or 0
            else:
                mf += c.flops or 0
                mb += c.bytes or 0
        return RooflineSplit(ridge, mf, cf, mb, cb, unknown)


def _functions(module) -> list[ir.Operation]:
    """The `func.func`s of a module (or the op itself when it is one)."""
    top = module.operation if hasattr(module, "operation") else module
    if top.name == "func.func":
        return [top]
    out = []
    for region in top.regions:
        for block in region.blocks:
            out += [op.operation for op in block.operations if op.operation.name == "func.func"]
    return out


def analyze(module, *, hoist: bool = True) -> ModuleCost:
    """The cost of every `func.func`'s top-level ops; names like `find_sites` (location, else label#ordinal)."""
    with memoized():  # constant-expression answers shared by every op: linear in the module's size
        return _analyze(module, hoist)


def _analyze(module, hoist: bool) -> ModuleCost:
    functions: list[FunctionCost] = []
    hoisted: list[OpCost] = []
    ordinals: dict[str, int] = {}
    for fn in _functions(module):
        costs = []
        body = fn.regions[0].blocks[0] if len(fn.regions[0].blocks) else None
        for index, op in enumerate(body.operations if body is not None else []):
            op = op.operation
            label = op_label(op)
            ordinal = ordinals.get(label, 0)
            ordinals[label] = ordinal + 1
            name = location_name(op.location) or f"{label}#{ordinal}"
            if hoist and is_hoisted(op):
                hoisted.append(op_cost(op, index, name, hoist=False))
            elif hoist and op.name == FOR and trip_count(op)[0] is not None:
                hoisted += [op_cost(inner, index, hoist=False) for inner in _hoisted_in_loops(op)]
            costs.append(op_cost(op, index, name, hoist=hoist))
        functions.append(FunctionCost(ir.StringAttr(fn.attributes["sym_name"]).value, costs))
    return ModuleCost(functions, hoisted)
