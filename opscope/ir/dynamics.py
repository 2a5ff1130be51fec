"""Inference-dynamics sites: attention probabilities, fused attention, top-k routing and
residual adds, found in a module's IR as data, like the matmul sites of `opscope.ir.sites`.

* *softmax* (role `attn`): a `linalg.softmax` over the last axis, or the chain importers
  emit for one: `e / sum(e)` with `e = exp(...)` and the sum reducing `e`'s last axis. The
  tapped tensor is the probabilities `[..., S_q, S_k]`.
* *attention* (role `attn`): an `iree_linalg_ext.attention` (SDPA imports); the taps rebuild
  its probabilities beside it (`inject-attention-stats`).
* *routing* (role `route`): an `iree_linalg_ext.topk`, or the sort-based top-k the Mixtral
  import produces (an `iree_linalg_ext.sort` of gate logits with their indices, then a
  slice of the first k); the tapped tensor is the chosen expert indices, E = the sorted size.
  A router without a top-k op is found where it selects among expert weights
  (`opscope.ir.expert_routes`: a gather of expert matrices by index, or a mask dispatching
  tokens to a batched contraction over experts; the mask is tapped with its experts' dim).
* *residual* (role `residual`): an add of the residual stream and a block's output
  (`opscope.ir.residual`, the rule the cone miner uses); tapped: (stream, block output).
  With `every_add` it is every add of two same-typed data tensors (the reference's rule,
  bias adds included). Named `<module path>.attn` or `.ffn` by what the block computes.

Names: the op's module path when it already says what the op is, else the path plus
`.softmax`, `.topk`, `.attention`, `.attn` or `.ffn` (so a router's softmax is
`mlp.gate.softmax`, never the gate projection's own name); `<suffix>#<n>` without a
location; repeats get `#1`, `#2`.

Shapes go in `batch`, `m`, `k`, `n` (the tidy table's M/K/N): attention `batch` = G (the
dims before the last two), `m` = S_q, `k` = heads (dim -3, else G), `n` = S_k; routing `m`
= tokens, `k` = top-k, `n` = E; residual `m` = rows, `n` = the last dim. What cannot be
tapped (a softmax over another axis, a top-k whose expert count is unknown, a dynamic
shape) is skipped with a note naming the op and why.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from math import prod

from iree.compiler import ir

from opscope.dialect.ops import stat
from opscope.errors import OpscopeError
from opscope.ir.expert_routes import expert_route
from opscope.ir.labels import op_label
from opscope.ir.manifest import SiteInfo, add_site_rows, site_names
from opscope.ir.opgraph import OpGraph, build_graph
from opscope.ir.residual import is_contraction, label_body, skip_connections
from opscope.ir.sites import find_sites, location_name, python_line

log = logging.getLogger("opscope")

SOFTMAX, ATTENTION, ROUTING, RESIDUAL = "softmax", "attention", "routing", "residual"
ROLE_OF = {SOFTMAX: "attn", ATTENTION: "attn", ROUTING: "route", RESIDUAL: "residual"}
GATE = "gate"  # the role of a softmax over a router's logits (not a product of two computed tensors)
FLOAT_TYPES = ("f32", "f16", "bf16")


@dataclass(frozen=True)
class DynamicsSite:
    """One inference-dynamics site: its name, kind, op, the values its taps read, and shape."""

    name: str
    kind: str  # softmax | attention | routing | residual
    op: ir.Operation = field(compare=False, repr=False)
    values: tuple = field(compare=False, repr=False)  # probabilities | attention operands | indices | (h, delta)
    batch: int = 1
    m: int = 0
    k: int = 0
    n: int = 0
    block: str = ""  # residual: attn | ffn | add; softmax: attention | gate
    axis: int = -1  # routing: a mask's experts dim (-1: `values` holds expert indices)

    @property
    def role(self) -> str:
        return GATE if self.block == GATE else ROLE_OF[self.kind]

    @property
    def location(self) -> str:
        return str(self.op.location)

    def after_values(self) -> ir.InsertionPoint:
        """Where taps of `values` go: after the op, or after the latest op defining one of
        them when that comes later (a top-k's sliced indices)."""
        last = self.op
        for v in self.values:
            if isinstance(v, ir.OpResult) and v.owner.parent == last.parent and last.is_before_in_block(v.owner):
                last = v.owner
        return ir.InsertionPoint.after(last)


@dataclass
class Found:
    """The sites of a module and the notes about what was skipped."""

    sites: list[DynamicsSite] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def find_dynamics_sites(
    module,
    kinds: tuple[str, ...] = (SOFTMAX, ATTENTION, ROUTING, RESIDUAL),
    every_add: bool = False,
    taken: set[str] | None = None,
) -> Found:
    """Every inference-dynamics site of `module`'s functions, in IR order, with unique names
    (also unique against `taken`, the matmul sites' names)."""
    graph = build_graph(module)
    found = Found()
    raw: list[tuple[str, ir.Operation, tuple, tuple[int, int, int, int], str, str]] = []
    skips = skip_connections(graph) if RESIDUAL in kinds and not every_add else {}
    for node, op in enumerate(graph.op_of):
        if op is None or (op.parent is None or op.parent.name != "func.func"):
            continue
        if SOFTMAX in kinds:
            _softmax(op, graph, node, raw, found.notes)
        if ATTENTION in kinds and op.name == "iree_linalg_ext.attention":
            _attention(op, raw, found.notes)
        if ROUTING in kinds:
            _routing(op, raw, found.notes)
        if RESIDUAL in kinds:
            _residual(op, graph, node, skips, every_add, raw, found.notes)
    used = {name: 0 for name in (taken or ())}
    ordinals: dict[str, int] = {}
    for kind, op, values, (b, m, k, n), suffix, block, *axis in raw:
        path = location_name(op.location) or python_line(op.location)
        if path:  # the module path, or path.suffix when the path does not say what the op is,
            # path.suffix.kind when a matmul site has that name (GPT-2's `h.0.attn` is its q·kᵀ)
            names = ([path] if suffix in path.split(".") else []) + [f"{path}.{suffix}"]
            name = next((c for c in names if c not in used), names[-1])
            if name in (taken or ()) and f"{name}.{kind}" not in used:
                name = f"{name}.{kind}"
        else:
            name = f"{suffix}#{ordinals.get(suffix, 0)}"
            ordinals[suffix] = ordinals.get(suffix, 0) + 1
        base = name
        while name in used:  # `#n` on a clash, never a name already taken (`attn#1` may be a matmul's)
            used[base] += 1
            name = f"{base}#{used[base]}"
        used[name] = 0
        found.sites.append(DynamicsSite(name, kind, op, values, b, m, k, n, block, axis[0] if axis else -1))
    return found


def select_sites(
    pass_name: str,
    module,
    kinds: tuple[str, ...],
    pattern: str,
    keep: Callable[[DynamicsSite], bool] | None,
    every_add: bool = False,
) -> list[DynamicsSite]:
    """The dynamics sites of `kinds` an inject pass taps: named apart from the matmul sites,
    filtered by the name regex `pattern` and `keep`; every skipped op is logged with why."""
    try:
        regex = re.compile(pattern) if pattern else None
    except re.error as e:
        raise OpscopeError(f"{pass_name}: bad 'sites' regex '{pattern}': {e}") from None
    taken = site_names(module) | {s.name for s in find_sites(module.operation)}
    found = find_dynamics_sites(module, kinds, every_add=every_add, taken=taken)
    for note in found.notes:
        log.warning("%s: %s", pass_name, note)
    return [s for s in found.sites if (regex is None or regex.search(s.name)) and (keep is None or keep(s))]


def attention_stats(entropy: bool = True) -> tuple[str, ...]:
    """The statistics of attention probabilities (with `attn_entropy` unless told not to)."""
    return ("attn_qmax", "attn_krecv") + (("attn_entropy",) if entropy else ())


def insert_stats(
    site: DynamicsSite, operands, kinds: tuple[str, ...], ip: ir.InsertionPoint, options: dict | None = None
) -> None:
    """One `opscope.stat` of `operands` (a value, or a tuple of them) per statistic in `kinds`,
    in that order from `ip`, named, roled and located as `site`."""
    for kind in kinds:
        op = stat(operands, kind, site.name, site.role, dict(options or {}), loc=site.op.location, ip=ip)
        ip = ir.InsertionPoint.after(op)


def tap_each(pass_name: str, chosen: list[DynamicsSite], what: str, tap: Callable[[DynamicsSite], bool]) -> None:
    """Tap every chosen site with `tap` (which says whether it did) and add those it tapped to the
    site tables; with none chosen, log that the module has no `what` to tap."""
    if not chosen:
        log.info("%s: no %s to tap in this module", pass_name, what)
        return
    annotate_sites([site for site in chosen if tap(site)])


def annotate_sites(sites: list[DynamicsSite]) -> None:
    """Add the sites to their functions' site tables (they compute no FLOPs of their own: 0)."""
    by_func: dict = {}
    for s in sites:
        by_func.setdefault(s.op.parent, []).append(SiteInfo(s.name, s.kind, s.batch, s.m, s.k, s.n, 0))
    for func_op, rows in by_func.items():
        add_site_rows(func_op, rows)


def _static_float(value: ir.Value) -> bool:
    ty = value.type
    return isinstance(ty, ir.RankedTensorType) and ty.has_static_shape and str(ty.element_type) in FLOAT_TYPES


def _where(op: ir.Operation) -> str:
    return location_name(op.location) or str(op.location)


def _attn_shape(shape: list[int]) -> tuple[int, int, int, int]:
    """(G, S_q, heads, S_k) of probabilities `[..., S_q, S_k]`."""
    g = prod(shape[:-2]) if len(shape) > 2 else 1
    heads = shape[-3] if len(shape) >= 3 else 1
    return g, shape[-2], heads, shape[-1]


def _softmax(op, graph: OpGraph, node: int, raw: list, notes: list[str]) -> None:
    """A softmax over the last axis: named, or decomposed as e / sum(e), e = exp(...)."""
    if op.name == "linalg.softmax":
        probs = op.results[0]
        rank = probs.type.rank
        dim = ir.IntegerAttr(op.attributes["dimension"]).value
        if dim != rank - 1:
            notes.append(f"softmax at {_where(op)} skipped: it normalizes axis {dim}, not the last ({rank - 1})")
            return
    elif op.name == "linalg.generic" and op_label(op) == "generic<divf>":
        axis = _softmax_div_axis(graph, node)
        if axis is None:
            return
        probs = op.results[0]
        rank = probs.type.rank if isinstance(probs.type, ir.ShapedType) else 0
        if axis != rank - 1:
            notes.append(f"softmax at {_where(op)} skipped: it normalizes axis {axis}, not the last ({rank - 1})")
            return
    else:
        return
    if not _static_float(probs) or probs.type.rank < 2:
        notes.append(
            f"softmax at {_where(op)} skipped: its probabilities {probs.type} are not a static float "
            "tensor of rank >= 2"
        )
        return
    if _scores_of_attention(graph, node):
        raw.append((SOFTMAX, op, (probs,), _attn_shape(list(probs.type.shape)), "softmax", "attention"))
    else:  # over a router's logits (x·W_gate): role `gate`
        raw.append((SOFTMAX, op, (probs,), _attn_shape(list(probs.type.shape)), "softmax", GATE))


def _scores_of_attention(graph: OpGraph, node: int) -> bool:
    """Whether the scores the softmax at `node` normalizes are a product of two computed
    tensors (q·kᵀ), not a router's x·W_gate: the first contractions up its inputs decide
    (through elementwise ops such as a scale, a mask add or the max subtraction)."""
    seen, frontier = set(), [node]
    for _ in range(8):
        nxt = []
        for n in frontier:
            for i in graph.inputs[n]:
                if i in seen or graph.leaf[i]:
                    continue
                seen.add(i)
                if is_contraction(graph.labels[i]):
                    if _products_of_computed(graph, i):
                        return True
                    continue  # a product with a weight: a router's logits, stop here
                nxt.append(i)
        frontier = nxt
    return False


def _softmax_div_axis(graph: OpGraph, node: int) -> int | None:
    """The axis of a softmax written as `e / sum(e)` at `node` (`e` an exp, not a sigmoid's;
    the sum reducing one axis of `e`), or None when `node` is not one."""
    ins = list(dict.fromkeys(graph.inputs[node]))
    if len(ins) != 2:
        return None
    e, s = ins
    head, body = label_body(graph.labels[e])
    if head != "generic" or "exp" not in body or "negf" in body:
        return None
    s_head, s_body = label_body(graph.labels[s])
    if s_head != "reduce" or "addf" not in s_body or list(graph.inputs[s])[:1] != [e]:
        return None
    iterators = [str(a) for a in ir.ArrayAttr(graph.op_of[s].attributes["iterator_types"])]
    reduced = [i for i, it in enumerate(iterators) if "reduction" in it]
    return reduced[0] if len(reduced) == 1 else None


def _attention(op, raw: list, notes: list[str]) -> None:
    """A fused attention with static shapes; its probabilities are rebuilt by the taps."""
    from opscope.ir.flops import attention_dims

    dims = attention_dims(op)
    if dims is None or not all(_static_float(v) for v in list(op.operands)[:3]):
        notes.append(f"attention at {_where(op)} skipped: dynamic or non-float q/k/v")
        return
    b, m, _, k2, _ = dims
    q = op.operands[0]
    if isinstance(q, ir.OpResult) and q.owner.name == "tensor.collapse_shape":
        q = q.owner.operands[0]  # [B, H, S, D] collapsed to [B·H, S, D]: the heads are in the source
    q_shape = list(q.type.shape)
    heads = q_shape[-3] if len(q_shape) >= 4 else b
    raw.append((ATTENTION, op, tuple(op.operands), (b, m, heads, k2), "attention", ""))


def _routing(op, raw: list, notes: list[str]) -> None:
    """A top-k over gate logits: `iree_linalg_ext.topk`, or a sort with indices sliced to its first k."""
    if op.name == "iree_linalg_ext.topk":
        dim = ir.IntegerAttr(op.attributes["dimension"]).value
        values, indices = op.operands[0], op.results[1]
        experts, k = values.type.shape[dim], indices.type.shape[dim]
        _route(op, indices, experts, k, raw, notes)
    elif op.name == "iree_linalg_ext.sort" and len(op.results) == 2:
        dim = ir.IntegerAttr(op.attributes["dimension"]).value
        indices = op.results[1]
        if not isinstance(indices.type.element_type, ir.IntegerType):
            return
        experts = indices.type.shape[dim]
        slices = [u.owner for u in indices.uses if u.owner.name == "tensor.extract_slice"]
        topk = [s for s in slices if _leading_slice(s, dim)]
        if not topk:
            notes.append(f"sort at {_where(op)} skipped: no slice of its first k indices (not a top-k)")
            return
        chosen = topk[0].results[0]
        _route(op, chosen, experts, chosen.type.shape[dim], raw, notes)
    else:
        route = expert_route(op)  # a router without a top-k op: where it selects among experts
        if route is not None:
            tokens, k = route.tokens, route.k
            raw.append((ROUTING, op, (route.value,), (1, tokens, k, route.experts), "route", "", route.axis))


def _leading_slice(op: ir.Operation, dim: int) -> bool:
    """A `tensor.extract_slice` at offset 0 of dim `dim` (the first k of a sort), whole elsewhere."""
    offsets = ir.DenseI64ArrayAttr(op.attributes["static_offsets"])
    sizes = ir.DenseI64ArrayAttr(op.attributes["static_sizes"])
    src = op.operands[0].type.shape
    return (
        all(o == 0 for o in offsets)
        and sizes[dim] < src[dim]
        and all(sizes[d] == src[d] for d in range(len(src)) if d != dim)
    )


def _route(op, indices: ir.Value, experts: int, k: int, raw: list, notes: list[str]) -> None:
    ty = indices.type
    if experts <= 0 or k <= 0 or ir.ShapedType.is_dynamic_size(experts):
        notes.append(f"top-k at {_where(op)} skipped: no static expert count (the chosen axis is dynamic)")
        return
    if not ty.has_static_shape:
        notes.append(
            f"top-k at {_where(op)} skipped: its indices {ty} have a dynamic shape (stat kernels are "
            "static-shaped: specialize the shapes first)"
        )
        return
    tokens = prod(ty.shape) // k
    raw.append((ROUTING, op, (indices,), (1, tokens, k, experts), "topk", ""))


def _residual(
    op, graph: OpGraph, node: int, skips: dict[int, int], every_add: bool, raw: list, notes: list[str]
) -> None:
    """A residual add (or, with `every_add`, any add of two same-typed data tensors)."""
    head, body = label_body(graph.labels[node])
    if not ((head == "generic" and body == {"addf"}) or op.name == "arith.addf"):
        return
    operands = [v for v in list(op.operands)[:2] if isinstance(v.type, ir.ShapedType)]
    if len(operands) != 2:
        return
    if every_add:  # the reference's rule: any add of two tensors of the result's type (a bias add broadcasts)
        if not all(v.type == op.results[0].type for v in operands):
            return
        h, delta, block = operands[0], operands[1], "add"
    else:
        if node not in skips:
            return
        nodes = [graph.node_of.get(v) for v in operands]
        if nodes[0] == skips[node]:
            h, delta = operands
        elif nodes[1] == skips[node]:
            delta, h = operands
        else:
            return
        block = _block_kind(graph, node, skips[node])
    if h.type != delta.type or h.type != op.results[0].type or not _static_float(h):
        notes.append(
            f"residual add at {_where(op)} skipped: operands {h.type} and {delta.type} are not two "
            "static float tensors of the result's type"
        )
        return
    shape = list(h.type.shape)
    raw.append(
        (
            RESIDUAL,
            op,
            (h, delta),
            (1, prod(shape[:-1]) if len(shape) > 1 else 1, 0, shape[-1] if shape else 1),
            block,
            block,
        )
    )


def _block_kind(graph: OpGraph, node: int, skip: int) -> str:
    """`attn` when the block between the stream and `node` attends (a fused attention, or a
    softmax and a product of two computed tensors, q·kᵀ), `ffn` otherwise (a top-k router
    makes an MoE block an `ffn`)."""
    region, stack = set(), [i for i in graph.inputs[node] if i != skip]
    while stack:
        n = stack.pop()
        if n <= skip or n in region or graph.leaf[n]:
            continue
        region.add(n)
        stack.extend(graph.inputs[n])
    heads = {label_body(graph.labels[n])[0] for n in region}
    if heads & {"topk", "sort"} or any(_threshold_mask(graph, n) for n in region):
        return "ffn"
    if heads & {"attention", "online_attention"}:
        return "attn"
    softmax = any(_softmaxish(graph.labels[n]) for n in region)
    qk = any(_products_of_computed(graph, n) for n in region)
    return "attn" if softmax and qk else "ffn"


def _threshold_mask(graph: OpGraph, n: int) -> bool:
    """A top-k written as a threshold mask of two computed tensors (`x >= kth ? w : 0`)."""
    head, body = label_body(graph.labels[n])
    return (
        head == "generic"
        and {"cmpf", "select"} <= body
        and sum(not graph.leaf[i] for i in dict.fromkeys(graph.inputs[n])) >= 2
    )


def _softmaxish(label: str) -> bool:
    head, body = label_body(label)
    return (
        head == "softmax"
        or (head == "reduce" and "maximumf" in body)
        or (head == "generic" and "exp" in body and "negf" not in body)
    )


def _products_of_computed(graph: OpGraph, n: int) -> bool:
    """Whether the contraction at `n` multiplies two computed tensors (q·kᵀ), not a tensor and a
    weight (a router's x·W_gate). Counted by operand, not by producer: q and k sliced from one
    fused QKV projection (GPT-2, GPT-NeoX, Phi-3, Falcon, timm ViTs) come from the same node."""
    head, _ = label_body(graph.labels[n])
    if not (head.startswith(("matmul", "batch_matmul", "contract")) or head == "dot_general"):
        return False
    return sum(not graph.leaf[i] for i in graph.inputs[n][:2]) >= 2
