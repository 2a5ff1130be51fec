"""The semantic dataflow graph of a linalg module: what `motifs` and `cones` mine.

Nodes are the ops with tensor results of every function body, labeled by
`labels.op_label`, plus one leaf per source of data: `in` (a function argument), `w` (a
weight: a constant expression rooted in a `util.global` or a non-splat tensor constant,
so weight transposes and broadcasts are part of the leaf) and `k` (any other constant
expression: splats, fills, iotas). Edges are *semantic* inputs only:

* a destination-passing op's `outs` init is dropped when it is `tensor.empty` or
  `linalg.fill` (an accumulator reset, not data); a real init (`sort`'s keys, a matmul
  accumulating into a bias) stays;
* tensors a body reads from outside (`tensor.extract` from an embedding table, an expert
  weight bank, a padding mask) are inputs too, after the operands;
* scalar operands (index sizes, an attention scale) are ignored;
* layout-only ops are transparent, their result is their input's node:
  `tensor.expand_shape/collapse_shape/reshape/cast/extract_slice`,
  `linalg.transpose/broadcast` and a one-input `generic<copy>` (torch's head splits,
  GPT-2's q/k/v split of one projection, RoPE's rotate-half and `repeat_kv` would
  otherwise fill every cone with reshapes and slices and hide the compute pattern).

Ops nested in other ops' regions are not nodes (a `linalg.generic` is one node). A node
used by `func.return` or any other non-node op "escapes": a fused chain cannot swallow it.
Building is one pass in IR order, linear in the number of ops and operands.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from iree.compiler import ir

from opscope.ir.const_expr import captures
from opscope.ir.labels import op_label
from opscope.ir.sites import location_name

ARG, WEIGHT, CONST = "in", "w", "k"
LEAF_LABELS = frozenset({ARG, WEIGHT, CONST})
FUNCTION_OPS = ("func.func", "util.func")
VIEW_OPS = frozenset(
    {
        "tensor.expand_shape",
        "tensor.collapse_shape",
        "tensor.reshape",
        "tensor.cast",
        "tensor.extract_slice",
        "linalg.transpose",
        "linalg.broadcast",
    }
)
DPS_PREFIXES = ("linalg.", "iree_linalg_ext.")
NOT_A_USE = frozenset({"tensor.dim"})  # shape queries read no data


@dataclass(frozen=True)
class OpGraph:
    """Nodes in IR order: label, semantic input node ids, site name, leaf flag; escaping nodes."""

    labels: tuple[str, ...]
    inputs: tuple[tuple[int, ...], ...]
    sites: tuple[str, ...]
    leaf: tuple[bool, ...]
    escapes: frozenset[int] = frozenset()
    # Built from IR only: each node's op (None for a leaf) and each tensor value's node.
    op_of: tuple = field(default=(), compare=False, repr=False)
    node_of: dict = field(default_factory=dict, compare=False, repr=False)

    def __len__(self) -> int:
        return len(self.labels)

    @property
    def ops(self) -> list[int]:
        """The non-leaf nodes (ops), in IR order."""
        return [i for i, is_leaf in enumerate(self.leaf) if not is_leaf]

    def consumers(self) -> list[list[int]]:
        """For every node, the distinct nodes that read it, in IR order."""
        out: list[list[int]] = [[] for _ in self.labels]
        for node, ins in enumerate(self.inputs):
            for src in dict.fromkeys(ins):
                out[src].append(node)
        return out


def from_edges(
    labels: list[str], inputs: list[list[int]], sites: list[str] | None = None, escapes: set[int] | None = None
) -> OpGraph:
    """A hand-made graph (the reference's `idx label in0 in1 ...` dump); `in`/`w`/`k` labels are leaves."""
    if len(inputs) != len(labels):
        raise ValueError(f"{len(labels)} labels but {len(inputs)} input lists")
    for node, ins in enumerate(inputs):
        bad = [i for i in ins if not 0 <= i < len(labels)]
        if bad:
            raise ValueError(f"node {node} reads unknown node(s) {bad}")
    names = sites or [f"{label}#{i}" for i, label in enumerate(labels)]
    return OpGraph(
        tuple(labels),
        tuple(tuple(i) for i in inputs),
        tuple(names),
        tuple(label in LEAF_LABELS for label in labels),
        frozenset(escapes or ()),
    )


def build_graph(module: ir.Module | ir.Operation) -> OpGraph:
    """The semantic dataflow graph of every function body in `module` (see the module docstring)."""
    return _Builder().build(module)


def _is_tensor(value: ir.Value) -> bool:
    return isinstance(value.type, ir.RankedTensorType | ir.UnrankedTensorType)


def _reads_data(op: ir.Operation) -> bool:
    """An `arith.constant` holding a tensor that is not a splat: model data, as in `const_expr.is_weight`."""
    if not op.results or not isinstance(op.results[0].type, ir.ShapedType):
        return False
    attr = op.attributes["value"]
    return not (isinstance(attr, ir.DenseElementsAttr) and attr.is_splat)


def _immutable_globals(root: ir.Operation) -> set[str]:
    """Symbol names of the `util.global`s never declared mutable, read once per module."""
    names: set[str] = set()
    for region in root.regions:
        for block in region.blocks:
            for op in block.operations:
                op = op.operation
                if op.name == "util.global" and "is_mutable" not in op.attributes:
                    names.add(ir.StringAttr(op.attributes["sym_name"]).value)
                elif op.name == "builtin.module":
                    names |= _immutable_globals(op)
    return names


class _Builder:
    """One forward pass over each function body: value -> node id (or empty/noise marker)."""

    EMPTY = -1

    def __init__(self):
        self.labels: list[str] = []
        self.op_of: list[ir.Operation | None] = []
        self.inputs: list[tuple[int, ...]] = []
        self.sites: list[str] = []
        self.leaf: list[bool] = []
        self.escapes: set[int] = set()
        self.node_of: dict[ir.Value, int] = {}  # tensor value -> node id, or EMPTY
        self.const: dict[ir.Value, str] = {}  # constant-expression value -> "w" | "k"
        self.fill: set[ir.Value] = set()  # values defined by linalg.fill (init noise)
        self.ordinals: dict[str, int] = {}
        self.used: dict[str, int] = {}
        self.immutable: set[str] = set()

    def build(self, module) -> OpGraph:
        root = module.operation
        self.immutable = _immutable_globals(root)
        for fn in _functions(root):
            for block in fn.regions[0].blocks:
                for arg in block.arguments:
                    if _is_tensor(arg):
                        self.node_of[arg] = self._add(ARG, (), self._arg_name(arg), leaf=True)
                for op in block.operations:
                    self._visit(op.operation)
        return OpGraph(
            tuple(self.labels),
            tuple(self.inputs),
            tuple(self.sites),
            tuple(self.leaf),
            frozenset(self.escapes),
            tuple(self.op_of),
            dict(self.node_of),
        )

    def _arg_name(self, arg: ir.BlockArgument) -> str:
        return location_name(arg.location) or f"%arg{arg.arg_number}"

    def _add(
        self, label: str, inputs: tuple[int, ...], site: str, leaf: bool = False, op: ir.Operation | None = None
    ) -> int:
        self.labels.append(label)
        self.op_of.append(op)
        self.inputs.append(inputs)
        self.sites.append(site)
        self.leaf.append(leaf)
        return len(self.labels) - 1

    def _site(self, op: ir.Operation, label: str) -> str:
        """The op's location name (`layer0.attn.q`), else `<label>#<ordinal>`; repeats get `#n`, as in sites.py."""
        name = location_name(op.location)
        if not name:
            name = f"{label}#{self.ordinals.get(label, 0)}"
            self.ordinals[label] = self.ordinals.get(label, 0) + 1
        if name in self.used:
            self.used[name] += 1
            return f"{name}#{self.used[name]}"
        self.used[name] = 0
        return name

    def _visit(self, op: ir.Operation) -> None:
        results = [r for r in op.results if _is_tensor(r)]
        if op.name == "tensor.empty":  # undefined contents: never data, and a constant shape source
            for r in results:
                self.node_of[r] = self.EMPTY
                self.const[r] = CONST
            return
        captured = captures(op)
        if self._visit_constant(op, captured):
            return
        if not results:
            self._escape(op)
            return
        ins = self._semantic_inputs(op, captured)
        if op.name in VIEW_OPS or (
            len(ins) == 1 and len(results) == 1 and op.name == "linalg.generic" and op_label(op) == "generic<copy>"
        ):
            if ins:
                self.node_of[results[0]] = ins[0]
                return
        if op.name == "linalg.fill":
            self.fill.update(results)
        label = op_label(op)
        node = self._add(label, tuple(ins), self._site(op, label), op=op)
        for r in results:
            self.node_of[r] = node

    def _visit_constant(self, op: ir.Operation, captured: list[ir.Value]) -> bool:
        """Record `op` as a constant expression (a `w`/`k` leaf) when it is one; True if so.

        The rule of `opscope.ir.const_expr.is_const_expr` (constants, immutable global loads,
        and linalg/tensor/arith ops over constants, a body's captured tensors included:
        Llama's padding mask reads `attention_mask` through a capture), evaluated forward
        during the graph walk so each value is decided once and fills are remembered.
        """
        kind = self._const_kind(op, list(op.operands) + captured)
        if kind is None:
            return False
        for r in op.results:
            self.const[r] = kind
        if op.name == "linalg.fill":
            self.fill.update(op.results)
        return True

    def _const_kind(self, op: ir.Operation, reads: list[ir.Value]) -> str | None:
        """`w` for a constant expression reading model data, `k` for another, None for data."""
        name = op.name
        if name == "arith.constant":
            return WEIGHT if _reads_data(op) else CONST
        if name == "util.global.load":
            sym = ir.FlatSymbolRefAttr(op.attributes["global"]).value
            return WEIGHT if sym in self.immutable else None
        if not name.startswith(("linalg.", "tensor.", "arith.")) or len(op.regions) > 1 or not reads:
            return None
        kinds = [self.const.get(v) for v in reads]
        if None in kinds:
            return None
        return WEIGHT if WEIGHT in kinds else CONST

    def _semantic_inputs(self, op: ir.Operation, captured: list[ir.Value]) -> list[int]:
        """Node ids of the tensors that carry data into `op`: operands (ins, captures, real
        inits, in that order; see the module docstring)."""
        operands = list(op.operands)
        n_init = len(op.results) if op.name.startswith(DPS_PREFIXES) else 0
        first_init = len(operands) - n_init
        ordered = operands[:first_init] + captured + operands[first_init:]
        out: list[int] = []
        for pos, v in enumerate(ordered):
            if not _is_tensor(v):
                continue
            if pos >= first_init + len(captured) and v in self.fill:
                continue
            node = self._node(v)
            if node != self.EMPTY:
                out.append(node)
        return out

    def _node(self, value: ir.Value) -> int:
        """The node of a tensor value, creating its leaf on first use of a constant."""
        node = self.node_of.get(value)
        if node is not None:
            return node
        kind = self.const.get(value)
        if kind is None:  # defined outside what we walked (a region's capture): an input
            kind = ARG
        owner = value.owner
        owner = owner.operation if hasattr(owner, "operation") else owner
        site = location_name(owner.location) if isinstance(owner, ir.Operation) else None
        node = self._add(kind, (), site or f"{kind}#{len(self.labels)}", leaf=True)
        self.node_of[value] = node
        return node

    def _escape(self, op: ir.Operation) -> None:
        """Mark the nodes a non-node op reads (a return, a store) as escaping."""
        if op.name in NOT_A_USE:
            return
        for v in op.operands:
            if _is_tensor(v) and v not in self.const:
                node = self._node(v)
                if node != self.EMPTY and not self.leaf[node]:
                    self.escapes.add(node)


def _functions(root: ir.Operation) -> list[ir.Operation]:
    """Function ops with a body directly under `root` (or `root` itself when it is one)."""
    if root.name in FUNCTION_OPS:
        return [root] if root.regions[0].blocks else []
    out = []
    for region in root.regions:
        for block in region.blocks:
            for op in block.operations:
                op = op.operation
                if op.name in FUNCTION_OPS and len(op.regions[0].blocks):
                    out.append(op)
                elif op.name == "builtin.module":
                    out.extend(_functions(op))
    return out
