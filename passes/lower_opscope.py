"""`lower-opscope`: compute every opscope.stat and return it as a function result.

Groups the `opscope.stat` ops of each function by (value, site, role), in order of first
appearance. Tensors of the same type and stat list share one call of a stacked stats
kernel (`dialect/lowering/`), each value once, inserted right after its last tensor is
defined; constant expressions get calls of their own; every call has a kernel of its own
(IREE 3.13's iree-util-ipo mis-merges the arguments of a kernel called from two places:
see `_calls`). A kernel concatenates its tensors into one stack, at most `batch` at a time
(0 = all; tensors above 131072 elements one at a time), so a call costs one set of
dispatches however many tensors it holds. Kernels
are private `{noinline}` functions (`outline=false` lets IREE inline them, behind one
`util.optimization_barrier` per tensor). Kernels of constant expressions (weights in
immutable globals or `arith.constant`s, and their transposes) are always inlined: by default
recomputed from a barrier on the weight they read (the barrier stops const-expr hoisting,
the transpose fuses into the statistics), without one under `hoist-constants`, so IREE's
const-expr hoisting computes them once. Each call's results are appended after the function's original
results (which keep their indices) and described by result attributes, so the IR alone
says what every result holds: `opscope.pack = [{site, role,
stat, offset, length, numel}, ...]` on a packed 1-D f32 result (`pack=true`, the default),
or `{opscope.site, opscope.role, opscope.stat, opscope.numel}` on one result per
statistic. No opscope op is left behind. `hist-counts=i8` counts histograms in i8 lanes
(exact, ~1.6x faster on llvm-cpu; IREE 3.13's SPIR-V miscounts i8, so i32 is the default and
`opscope.run.targets` picks per target). `row-lanes=16` keeps 16 lane partials per row in the
row reductions (~2x faster multi-result reductions on llvm-cpu; 0, straight, elsewhere).

Inference-dynamics statistics (attention, routing, residual: `dialect/dynamics.py`) get one
kernel and call per tapped tensor, or per (stream, block output) pair of a residual add,
placed after both are defined, and results described the same way (a statistic of one
tensor never mixes the two families).

A tensor the model later updates in place (the destination of a sort, a scatter, an
insert_slice, any op's `outs`) is read by an inlined kernel, never an outlined call: IREE
3.13 lets the in-place op overwrite the buffer before a `{noinline}` call has read it (a
Mixtral router's probabilities came back sorted: every call on vulkan-spirv, 1 % on
llvm-cpu; `tests/test_dynamics_numerics.py`).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import ClassVar, Literal

from iree.compiler import ir
from iree.compiler.dialects import func

from opscope.dialect.dynamics import DYNAMICS_KINDS, DynamicsKernel
from opscope.dialect.lowering.histogram import HIST_LANES
from opscope.dialect.lowering.kernel import StatsKernel
from opscope.dialect.lowering.signature import StatItem
from opscope.dialect.ops import StatOp, stat_ops, verify_stat
from opscope.errors import OpscopeError
from opscope.ir.const_expr import is_const_expr, is_constant, is_weight, owner

KERNEL_PREFIX = "opscope_stats"


@dataclass(frozen=True)
class LowerOpscope:
    """Expand opscope.stat ops into linalg and append them as function results."""

    name: ClassVar[str] = "lower-opscope"

    pack: bool = True
    outline: bool = True
    batch: int = 0
    hoist_constants: bool = False
    hist_counts: Literal["i32", "i8"] = "i32"
    row_lanes: int = 0

    def __post_init__(self) -> None:
        """Refuse a `hist_counts` the lowering has no layout for, naming the choices, and
        a negative `row_lanes`."""
        if self.hist_counts not in HIST_LANES:
            raise OpscopeError(
                f"{self.name}: option 'hist-counts' expects one of {', '.join(HIST_LANES)}, got '{self.hist_counts}'"
            )
        if self.row_lanes < 0:
            raise OpscopeError(
                f"{self.name}: option 'row-lanes' expects a lane count >= 0 "
                f"(0: reduce rows straight), got {self.row_lanes}"
            )

    def apply(self, module) -> None:
        body = module.operation.regions[0].blocks[0]
        symbols = {
            ir.StringAttr(op.attributes["sym_name"]).value for op in body.operations if "sym_name" in op.attributes
        }
        for fn in [op.operation for op in body.operations if op.operation.name == "func.func"]:
            groups = _collect(fn)
            if groups:
                self._lower_function(module, fn, groups, symbols)

    def _lower_function(self, module, fn, groups, symbols) -> None:
        sym = ir.StringAttr(fn.attributes["sym_name"]).value
        blocks = list(fn.regions[0].blocks)
        ret = list(blocks[-1].operations)[-1] if blocks else None
        if len(blocks) != 1 or ret is None or ret.name != "func.return":
            raise OpscopeError(
                f"{self.name}: @{sym} must have a single block ending in func.return (found {len(blocks)} blocks)"
            )
        if has_callers(module, sym):
            raise OpscopeError(
                f"{self.name}: @{sym} is called by other functions; appending results would "
                "break them: run 'inline' before inject-matmul-stats"
            )
        i64 = ir.IntegerType.get_signless(64)
        new_values, new_attrs = [], []
        dynamics = [g for g in groups if StatOp(g[1][0]).kind in DYNAMICS_KINDS]
        groups = [g for g in groups if StatOp(g[1][0]).kind not in DYNAMICS_KINDS]
        for key, slots in self._calls(groups, ret):
            value0 = slots[0].value
            ty = ir.RankedTensorType(value0.type)
            items = [_item(StatOp(o)) for o in slots[0].taps[0][2]]
            kernel = StatsKernel(
                tuple(ty.shape),
                str(ty.element_type),
                items,
                count=len(slots),
                per_dispatch=self.batch,
                hist_counts=self.hist_counts,
                row_lanes=self.row_lanes,
                channel_dims=_channel_dims(slots[0].taps[0][2]),
            )
            # Statistics of constant expressions (weights, their transposes) are never in an
            # outlined call: IREE hoists the value into a constant resource, which a
            # {noinline} kernel's stream conversion cannot take in IREE 3.13 ("failed to
            # legalize unresolved target materialization"). They are inlined behind a
            # barrier (computed every call); with hoist-constants without one, so IREE's
            # const-expr hoisting computes them at compile time (much slower compiles:
            # 10 s -> 28 s on the 8-layer demo with global weights, 84 s before stacking).
            constant = key.endswith("|constant")
            outline = self.outline and not constant and not any(_updated_in_place(s.value) for s in slots)
            # Every call gets a kernel of its own: see `_calls` for why none is shared.
            callee = _fresh_symbol(ty, f"{key}|{len(slots)}|{self.pack}|{outline}", symbols)
            _insert_function(module, kernel.function(callee, pack=self.pack, noinline=outline), callee)
            symbols.add(callee)
            values = [slot.value for slot in slots]
            with slots[0].taps[0][2][0].location:  # the first tap's site
                if self.pack:
                    result_types = [_stat_type(kernel.count * kernel.tensor_length)]
                else:
                    result_types = [_stat_type(kernel.length(i)) for _ in slots for i in items]
                ip = _after_last_definition(values, fn)
                if not outline and not (constant and self.hoist_constants):
                    # Inlined statistics could fuse into their producer's dispatch, which
                    # IREE 3.13 miscompiles for a softmax: one barrier per tensor keeps them
                    # out; for a constant the barrier goes on the weight it is computed from
                    # (the transpose is recomputed after it and fuses into the statistics),
                    # which stops const-expr hoisting without materializing the transpose. An
                    # outlined call is already opaque to fusion, and a barrier there costs a
                    # host sync (IREE awaits the resource before it).
                    operands, ip = (_weights_behind_barriers if constant else _behind_barriers)(values, ip)
                else:
                    operands = values
                call = func.CallOp(result_types, ir.FlatSymbolRefAttr.get(callee), operands, ip=ip)
            entries = []
            results = list(call.results)
            for t, slot in enumerate(slots):
                for site, role, ops in slot.taps:  # a value tapped twice reads one slot twice
                    for i, it in enumerate(items):
                        n = kernel.length(it)
                        if self.pack:
                            entries.append(
                                ir.DictAttr.get(
                                    {
                                        "site": ir.StringAttr.get(site),
                                        "role": ir.StringAttr.get(role),
                                        "stat": ir.StringAttr.get(it.kind),
                                        "offset": ir.IntegerAttr.get(i64, kernel.offset(t, i)),
                                        "length": ir.IntegerAttr.get(i64, n),
                                        "numel": ir.IntegerAttr.get(i64, kernel.numel),
                                    }
                                )
                            )
                        else:
                            new_values.append(results[t * len(items) + i])
                            new_attrs.append(
                                ir.DictAttr.get(
                                    {
                                        "opscope.site": ir.StringAttr.get(site),
                                        "opscope.role": ir.StringAttr.get(role),
                                        "opscope.stat": ir.StringAttr.get(it.kind),
                                        "opscope.numel": ir.IntegerAttr.get(i64, kernel.numel),
                                    }
                                )
                            )
                    for o in ops:
                        o.erase()
            if self.pack:
                new_values.append(call.results[0])
                new_attrs.append(ir.DictAttr.get({"opscope.pack": ir.ArrayAttr.get(entries)}))
        for (values, site, role), ops in dynamics:
            self._lower_dynamics(module, fn, symbols, values, site, role, ops, new_values, new_attrs)
        append_results(fn, ret, new_values, new_attrs)

    def _lower_dynamics(self, module, fn, symbols, values, site, role, ops, new_values, new_attrs) -> None:
        """One inference-dynamics kernel and call for the statistics of one tapped tensor (or
        residual pair), its results described like the sketches'."""
        i64 = ir.IntegerType.get_signless(64)
        views = [StatOp(o) for o in ops]
        ty = ir.RankedTensorType(values[0].type)
        options = views[0].options
        kernel = DynamicsKernel(
            tuple(ty.shape),
            str(ty.element_type),
            tuple(v.kind for v in views),
            int(options.get("experts", 0)),
            int(options.get("axis", -1)),
        )
        problem = kernel.check()
        if problem:
            raise OpscopeError(f"{self.name}: site '{site}' role {role} at {ops[0].location}: {problem}")
        outline = self.outline and not any(_updated_in_place(v) for v in values)
        callee = _fresh_symbol(ty, f"dynamics|{site}|{role}|{kernel.kinds}|{self.pack}|{outline}", symbols)
        _insert_function(module, kernel.function(callee, pack=self.pack, noinline=outline), callee)
        symbols.add(callee)
        lengths = [kernel.length(k) for k in kernel.kinds]
        with ops[0].location:
            types = [_stat_type(kernel.total)] if self.pack else [_stat_type(n) for n in lengths]
            call = func.CallOp(
                types, ir.FlatSymbolRefAttr.get(callee), list(values), ip=_after_last_definition(list(values), fn)
            )

        def describe(kind: str, extra: dict) -> dict:
            return {
                "site": ir.StringAttr.get(site),
                "role": ir.StringAttr.get(role),
                "stat": ir.StringAttr.get(kind),
                "numel": ir.IntegerAttr.get(i64, kernel.numel),
                **extra,
            }

        if self.pack:
            entries = [
                ir.DictAttr.get(
                    describe(k, {"offset": ir.IntegerAttr.get(i64, off), "length": ir.IntegerAttr.get(i64, n)})
                )
                for k, off, n in zip(kernel.kinds, kernel.offsets(), lengths)
            ]
            new_values.append(call.results[0])
            new_attrs.append(ir.DictAttr.get({"opscope.pack": ir.ArrayAttr.get(entries)}))
        else:
            for k, r in zip(kernel.kinds, call.results):
                new_values.append(r)
                new_attrs.append(ir.DictAttr.get({f"opscope.{key}": value for key, value in describe(k, {}).items()}))
        for o in ops:
            o.erase()

    def _calls(self, groups, ret) -> list[tuple[str, list[_Slot]]]:
        """One kernel call per (tensor type, statistics, constant or not), in order of first
        appearance, each value once (q, k and v reading one activation share a slot).

        No kernel is called from two places: IREE 3.13's iree-util-ipo merges a kernel's
        arguments that are equal at one call site (a resource, an offset, a size) for every
        call site when an earlier-visited one has them distinct, so stats of one tensor
        were read at another's offset or, when the types disagree, iree-compile crashed
        (MiniLM, GPT-2; docs/spine.md). Inside a kernel, the tensors are stacked (`batch`
        caps a stack)."""
        calls: dict[str, list[_Slot]] = {}
        for ((value, *_), site, role), ops in groups:
            ty = ir.RankedTensorType(value.type)
            items = [_item(StatOp(o)) for o in ops]
            dims = _channel_dims(ops)
            problem = StatsKernel(tuple(ty.shape), str(ty.element_type), items, channel_dims=dims).check()
            if problem:
                raise OpscopeError(f"{self.name}: site '{site}' role {role} at {ops[0].location}: {problem}")
            slots = calls.setdefault(f"{ty}|{items}|{dims}|{_call_kind(value, ret)}", [])
            slot = next((sl for sl in slots if sl.value == value), None)
            if slot is None:
                slots.append(_Slot(value, [(site, role, ops)]))
            else:
                slot.taps.append((site, role, ops))
        return list(calls.items())


@dataclass
class _Slot:
    """A tensor a kernel call reads, and the (site, role, stat ops) taps it answers."""

    value: ir.Value
    taps: list


def _after_last_definition(values: list[ir.Value], fn) -> ir.InsertionPoint:
    """Right after the latest op (in block order) defining one of `values`."""
    last = None
    for v in values:
        if isinstance(v, ir.OpResult):
            op = owner(v)
            if last is None or last.is_before_in_block(op):
                last = op
    if last is None:
        return ir.InsertionPoint.at_block_begin(fn.regions[0].blocks[0])
    return ir.InsertionPoint.after(last)


_VIEWS = ("tensor.collapse_shape", "tensor.expand_shape", "tensor.cast")
_DESTINATIONS = {"tensor.insert_slice": 1, "tensor.insert": 1, "linalg.softmax": 1}  # op -> its destination operand


def _updated_in_place(value: ir.Value) -> bool:
    """Whether an op may write `value`'s buffer in place: `value` is a destination (`outs`,
    the last operand segment of a destination-style op such as linalg's and
    iree_linalg_ext's sort/scatter/topk, or an insert's dest)."""
    for use in value.uses:
        op = use.owner
        if _DESTINATIONS.get(op.name) == use.operand_number:
            return True
        if "operandSegmentSizes" in op.attributes and op.name.split(".")[0] in ("linalg", "iree_linalg_ext"):
            inits = list(ir.DenseI32ArrayAttr(op.attributes["operandSegmentSizes"]))[-1]
            if use.operand_number >= len(op.operands) - inits:
                return True
    return False


def _call_kind(value: ir.Value, ret) -> str:
    """Which call a tapped value joins: a constant expression (immutable globals,
    `arith.constant`s and what is computed from them only) gets calls of their own, always
    inlined (see `apply`); everything else shares one. A function argument (or a reshape of
    one, which IREE keeps in the argument's buffer) or a result is never a constant here:
    it lives in an external resource. (External and transient tensors had separate kernels
    while kernels had several callers: IREE 3.13's stream conversion rejects a `{noinline}`
    kernel called with both kinds; a kernel has one caller now.)"""
    root = value
    while not isinstance(root, ir.BlockArgument) and owner(root).name in _VIEWS:
        root = owner(root).operands[0]
    if isinstance(root, ir.BlockArgument) or any(value == r for r in ret.operands):
        return "varying"
    return "constant" if is_const_expr(value) else "varying"


def _behind_barriers(values: list[ir.Value], ip: ir.InsertionPoint):
    """`values` each passed through a `util.optimization_barrier` of its own (IREE 3.13
    rejects a variadic one whose later operand is a non-splat constant), and the insertion
    point after the last barrier."""
    operands, last = [], None
    for v in values:
        last = ir.Operation.create(
            "util.optimization_barrier",
            results=[v.type],
            operands=[v],
            ip=ip if last is None else ir.InsertionPoint.after(last),
        )
        operands.append(last.results[0])
    return operands, ir.InsertionPoint.after(last)


def _weights_behind_barriers(values: list[ir.Value], ip: ir.InsertionPoint):
    """Like `_behind_barriers` for constant expressions: each value recomputed after a barrier on
    the weight it reads (`_from_barriered_weight`), and the insertion point after the last op."""
    operands = []
    for v in values:
        v, ip = _from_barriered_weight(v, ip)
        operands.append(v)
    return operands, ip


def _from_barriered_weight(value: ir.Value, ip: ir.InsertionPoint, depth: int = 0):
    """`value` recomputed at `ip` from the weight it reads passed through a barrier, cloning the
    ops between them (a transpose, a broadcast, a view); the value itself behind a barrier
    where it is the weight, reads two weights or the chain is deeper than 4 ops. Behind a
    barrier itself, a weight's transpose was materialized for every weight at once before the
    statistics read it (the weights function of a 222 M Llama held 0.7 GB of them)."""
    op = None if isinstance(value, ir.BlockArgument) else owner(value)
    data = [] if op is None else [i for i, v in enumerate(op.operands) if is_weight(v)]
    if op is None or is_constant(value) or len(data) != 1 or depth >= 4:
        (barriered,), ip = _behind_barriers([value], ip)
        return barriered, ip
    source, ip = _from_barriered_weight(op.operands[data[0]], ip, depth + 1)
    clone = op.clone(ip=ip)
    clone.operands[data[0]] = source
    return clone.results[ir.OpResult(value).result_number], ir.InsertionPoint.after(clone)


def _channel_dims(ops) -> tuple[int, ...] | None:
    """The channel dims the stat ops of one tapped tensor read it with (None: the last dim)."""
    found = {tuple(StatOp(o).options.get("channel_dims", ())) for o in ops}
    if len(found) > 1:
        raise OpscopeError(
            f"lower-opscope: the statistics of one tensor disagree on channel_dims "
            f"({sorted(found)}) at {ops[0].location}"
        )
    return found.pop() or None


def _item(view: StatOp) -> StatItem:
    if view.kind != "hist":
        return StatItem(view.kind)
    o = view.options
    return StatItem("hist", int(o["bins"]), float(o["lo"]), float(o["hi"]), bool(o["normalize"]))


def _stat_type(length: int) -> ir.Type:
    return ir.RankedTensorType.get([length], ir.F32Type.get())


def _collect(fn) -> list:
    """(value, site, role) -> its stat ops, in order of first appearance (checked after the
    walk: `stat_ops`)."""
    groups: dict = {}
    for op in stat_ops(fn):
        problem = verify_stat(op)
        if problem:
            raise OpscopeError(f"{problem} at {op.location}")
        v = StatOp(op)
        key = (v.values, v.site, v.role)
        group = groups.setdefault(key, [])
        if group and (StatOp(group[0]).kind in DYNAMICS_KINDS) != (v.kind in DYNAMICS_KINDS):
            raise OpscopeError(
                f"lower-opscope: site '{v.site}' role {v.role} mixes sketch and inference-dynamics "
                f"statistics of one tensor at {op.location}"
            )
        if any(StatOp(o).kind == v.kind for o in group):
            raise OpscopeError(
                f"lower-opscope: duplicate '{v.kind}' for site '{v.site}' role {v.role} at {op.location}"
            )
        group.append(op)
    return list(groups.items())


def has_callers(module, sym: str) -> bool:
    """Whether a `func.call` anywhere in `module` calls @`sym` (appending results would break it)."""
    found = []

    def visit(op):
        if op.name == "func.call" and ir.FlatSymbolRefAttr(op.attributes["callee"]).value == sym:
            found.append(op)
            return ir.WalkResult.INTERRUPT
        return ir.WalkResult.ADVANCE

    module.operation.walk(visit)
    return bool(found)


def appendable_return(pass_name: str, module, fn):
    """`fn`'s `func.return`, after checking results can be appended: one block, and no caller."""
    sym = ir.StringAttr(fn.attributes["sym_name"]).value
    blocks = list(fn.regions[0].blocks)
    ret = list(blocks[-1].operations)[-1]
    if len(blocks) != 1 or ret.name != "func.return":
        raise OpscopeError(
            f"{pass_name}: @{sym} must have a single block ending in func.return (found {len(blocks)} blocks)"
        )
    if has_callers(module, sym):
        raise OpscopeError(
            f"{pass_name}: @{sym} is called by other functions; appending results would "
            f"break them: run 'inline' before {pass_name}"
        )
    return ret


def _fresh_symbol(ty: ir.RankedTensorType, key: str, symbols: set[str]) -> str:
    shape = "x".join(str(d) for d in ty.shape) or "scalar"
    digest = hashlib.sha256(key.encode()).hexdigest()[:8]
    base = f"{KERNEL_PREFIX}_{shape}x{ty.element_type}_{digest}"
    name, i = base, 1
    while name in symbols:
        name, i = f"{base}_{i}", i + 1
    return name


def _insert_function(module, text: str, name: str) -> None:
    """Parse a kernel (locations read `"opscope-kernel:<name>":line:col`) into `module`."""
    fn = ir.Operation.parse(text, source_name=f"opscope-kernel:{name}", context=module.context)
    module.operation.regions[0].blocks[0].append(fn.operation)


def append_results(fn, ret, new_values, new_attrs) -> None:
    """Return `new_values` after `fn`'s results (which keep their indices), each with its result attributes."""
    fty = ir.FunctionType(ir.TypeAttr(fn.attributes["function_type"]).value)
    old_results = list(fty.results)
    operands = list(ret.operands) + new_values
    with ret.location:
        func.ReturnOp(operands, ip=ir.InsertionPoint(ret))
    ret.erase()
    fn.attributes["function_type"] = ir.TypeAttr.get(
        ir.FunctionType.get(list(fty.inputs), old_results + [v.type for v in new_values])
    )
    if "res_attrs" in fn.attributes:
        attrs = list(ir.ArrayAttr(fn.attributes["res_attrs"]))
    else:
        attrs = [ir.DictAttr.get({}) for _ in old_results]
    fn.attributes["res_attrs"] = ir.ArrayAttr.get(attrs + new_attrs)
