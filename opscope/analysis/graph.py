"""A linalg module as Model Explorer's graph JSON: every op a node, SSA uses its edges.

Model Explorer (Google's graph viewer, `ai-edge-model-explorer`) reads a graph collection as
JSON (its `graph_builder` dataclasses: `GraphCollection` → `Graph` → `GraphNode` with
`IncomingEdge`s and `MetadataItem`s); its own MLIR adapter reads TF, TFLite and StableHLO,
not linalg, so opscope writes the JSON itself, as plain dicts of the same fields:

* one graph per function with a body, the model's function first; in it one node per
  function argument (`arg<i>`, label `input`) and one per op of the function's body
  (`op<i>`, in IR order, labeled as every analysis labels ops: `matmul`,
  `generic<addf>`, ...), nested ops belonging to the op whose regions hold them;
* namespaces from the op's module path (a location name such as torch's
  `encoder.layer.0.attention.self.query` becomes `encoder/layer.0/attention/self/query`: a
  numbered child stays with its parent's name, so Model Explorer folds each layer into one
  box); an op whose location names no module takes the namespace of the first op that
  reads it (a `tensor.empty`, a fill), else of what it reads;
* an edge per operand, and per tensor a region reads from outside (a gather's table),
  from the node and result that define it, so every edge's source is a node of the graph;
* each result's type as output metadata (`tensor_shape`: `f32[1,128,384]`), which Model
  Explorer shows in the side panel and on edges;
* attributes: the op's name, its module path, its exact FLOPs (`opscope.ir.flops`) and,
  for a site opscope taps (a matmul or convolution, a softmax or attention, a top-k
  routing, a residual add), the site's name as the taps and the tidy table call it.

`ModelGraph.sites` maps each site's name to its node, which is how a run's statistics
find their node (`opscope.explorer.node_data`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from iree.compiler import ir

from opscope.ir.arguments import symbol_name
from opscope.ir.const_expr import region_reads
from opscope.ir.dynamics import find_dynamics_sites
from opscope.ir.flops import op_flops
from opscope.ir.labels import op_label
from opscope.ir.sites import find_sites, location_name

INPUT_LABEL = "input"


@dataclass
class ModelGraph:
    """A module's graph collection (Model Explorer's JSON, as dicts) and where each site sits."""

    collection: dict
    sites: dict[str, tuple[str, str]] = field(default_factory=dict)  # site name -> (graph id, node id)

    @property
    def graphs(self) -> list[dict]:
        return self.collection["graphs"]

    @property
    def nodes(self) -> int:
        return sum(len(g["nodes"]) for g in self.graphs)

    @property
    def edges(self) -> int:
        return sum(len(n["incomingEdges"]) for g in self.graphs for n in g["nodes"])


def model_graph(module: ir.Module, label: str) -> ModelGraph:
    """`module` as a Model Explorer graph collection called `label` (see the module docstring)."""
    functions = _functions(module)
    names = {symbol_name(fn): fn for fn in functions}
    site_ops = _site_ops(module)
    graphs, where = [], {}
    for fn in functions:
        graph, node_of = _graph(fn, names, site_ops)
        graphs.append(graph)
        for op, node in node_of.items():
            for site in site_ops.get(op, ()):
                where[site] = (graph["id"], node)
    return ModelGraph({"label": label, "graphs": graphs}, where)


def namespace(path: str) -> str:
    """A module path as a namespace: `model.layers.3.self_attn.q_proj` -> `model/layers.3/self_attn/q_proj`."""
    parts: list[str] = []
    for part in path.split("."):
        if parts and part.isdigit():
            parts[-1] += "." + part
        elif part:
            parts.append(part)
    return "/".join(parts)


def tensor_shape(t: ir.Type) -> str:
    """`f32[1,128,384]` for a shaped type (`?` for a dynamic dim), the type itself otherwise."""
    if not isinstance(t, ir.ShapedType):
        return str(t)
    if not t.has_rank:
        return f"{t.element_type}[*]"
    dims = ",".join("?" if t.is_dynamic_dim(i) else str(t.get_dim_size(i)) for i in range(t.rank))
    return f"{t.element_type}[{dims}]"


def _functions(module: ir.Module) -> list[ir.Operation]:
    """The `func.func`s with a body, the first public one (the model's) first."""
    fns = [op.operation for op in module.body.operations if op.operation.name == "func.func"]
    fns = [f for f in fns if len(f.regions[0].blocks)]
    public = [f for f in fns if "sym_visibility" not in f.attributes]
    return public[:1] + [f for f in fns if f not in public[:1]]


def _site_ops(module: ir.Module) -> dict[ir.Operation, list[str]]:
    """Each site's op -> its names, named as the taps name them (matmul sites first, the
    dynamics sites apart from their names)."""
    out: dict[ir.Operation, list[str]] = {}
    matmuls = find_sites(module.operation)
    for s in matmuls:
        out.setdefault(s.op, []).append(s.name)
    for s in find_dynamics_sites(module, taken={s.name for s in matmuls}).sites:
        out.setdefault(s.op, []).append(s.name)
    return out


def _graph(
    fn: ir.Operation, functions: dict[str, ir.Operation], site_ops: dict[ir.Operation, list[str]]
) -> tuple[dict, dict[ir.Operation, str]]:
    """One function's graph, and the node id of every op in it (nested ops: their top-level op's)."""
    block = fn.regions[0].blocks[0]
    ops = [op.operation for op in block.operations]
    source: dict[ir.Value, tuple[str, str]] = {}  # value -> (node id, output id)
    nodes = []
    for i, arg in enumerate(block.arguments):
        node = f"arg{i}"
        source[arg] = (node, "0")
        name = location_name(arg.location)
        nodes.append(
            _node(node, INPUT_LABEL, "", [("argument", str(i))] + ([("name", name)] if name else []), [], [arg.type])
        )
    ids = {op: f"op{i}" for i, op in enumerate(ops)}
    for op in ops:
        for j, r in enumerate(op.results):
            source[r] = (ids[op], str(j))
    spaces = _namespaces(ops)
    for op in ops:
        reads = list(op.operands) + [v for v in region_reads(op) if v not in op.operands]
        edges = [
            {"sourceNodeId": source[v][0], "sourceNodeOutputId": source[v][1], "targetNodeInputId": str(k)}
            for k, v in enumerate(reads)
            if v in source
        ]
        node = _node(ids[op], op_label(op), spaces[op], _attrs(op, site_ops), edges, [r.type for r in op.results])
        callee = _callee(op)
        if callee in functions:
            node["subgraphIds"] = [callee]
        nodes.append(node)
    node_of = dict(ids)
    for op in ops:
        _nested(op, ids[op], node_of)
    return {"id": symbol_name(fn), "nodes": nodes}, node_of


def _node(
    node_id: str, label: str, space: str, attrs: list[tuple[str, str]], edges: list[dict], types: list[ir.Type]
) -> dict:
    """A `GraphNode` as a dict."""
    return {
        "id": node_id,
        "label": label,
        "namespace": space,
        "subgraphIds": [],
        "attrs": [{"key": k, "value": v} for k, v in attrs],
        "incomingEdges": edges,
        "outputsMetadata": [
            {"id": str(j), "attrs": [{"key": "tensor_shape", "value": tensor_shape(t)}]} for j, t in enumerate(types)
        ],
        "inputsMetadata": [],
    }


def _attrs(op: ir.Operation, site_ops: dict[ir.Operation, list[str]]) -> list[tuple[str, str]]:
    """What the side panel lists for an op: its name, module path, FLOPs and site names."""
    attrs = [("op", op.name)]
    path = location_name(op.location)
    if path:
        attrs.append(("module", path))
    flops = op_flops(op) if op.name.startswith(("linalg.", "iree_linalg_ext.")) else None
    if flops:
        attrs.append(("flops", str(flops)))
    sites = site_ops.get(op, [])
    if sites:
        attrs.append(("site", ", ".join(sites)))
    return attrs


def _namespaces(ops: list[ir.Operation]) -> dict[ir.Operation, str]:
    """Each op's namespace: its module path, else the namespace its readers share (a constant
    every layer reads sits above the layers), else what it reads'."""
    readers: dict[ir.Operation, list[ir.Operation]] = {op: [] for op in ops}
    for op in ops:
        for v in op.operands:
            if isinstance(v, ir.OpResult) and (owner := v.owner.operation) in readers:
                readers[owner].append(op)
    out = {op: namespace(location_name(op.location) or "") for op in ops}
    for op in reversed(ops):  # a chain of unnamed ops (empty -> fill -> matmul) takes its end's
        if not out[op]:
            out[op] = _shared([out[r] for r in readers[op] if out[r]])
    for op in ops:
        if not out[op]:
            for v in op.operands:
                if isinstance(v, ir.OpResult) and out.get(v.owner.operation):
                    out[op] = out[v.owner.operation]
                    break
    return out


def _shared(spaces: list[str]) -> str:
    """The longest namespace every one of `spaces` lies in (`a/b/c`, `a/b/d` -> `a/b`)."""
    if not spaces:
        return ""
    common = spaces[0].split("/")
    for space in spaces[1:]:
        parts = space.split("/")
        n = 0
        while n < min(len(common), len(parts)) and common[n] == parts[n]:
            n += 1
        common = common[:n]
    return "/".join(common)


def _nested(op: ir.Operation, node: str, node_of: dict[ir.Operation, str]) -> None:
    """Every op nested in `op`'s regions belongs to `op`'s node."""
    for region in op.regions:
        for block in region.blocks:
            for inner in block.operations:
                node_of[inner.operation] = node
                _nested(inner.operation, node, node_of)


def _callee(op: ir.Operation) -> str | None:
    """The function a `func.call` calls."""
    if op.name != "func.call":
        return None
    return ir.FlatSymbolRefAttr(op.attributes["callee"]).value
