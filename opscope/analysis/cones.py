"""Dataflow cones: repeated branching sub-DAGs ("input cones") and what kernel each suggests.

The depth-d signature of a node is its label if d = 0 or it has no inputs, else
`label(sig(in1, d-1),sig(in2, d-1),...)`: two nodes share it iff their depth-d input
cones are op-isomorphic (operand order matters). Signatures are interned as integer ids
(`(label, child ids)`), so all depths cost O(depth × edges) and the tree text is only
rendered for the patterns kept.

Cones are read per block; four rules differ from the reference (§3.2; reasons in
`docs/analysis.md`):

1. The residual stream ends a cone. A skip connection adds `x` and `f(x)`, where some
   path from `x` to `f(x)` passes a contraction and no earlier skip connection (`x` may
   be a function argument). Its output and its skip input `x` (layer 0's embedding, a
   post-norm model's LayerNorm) enter every consumer's cone as the leaf `in`
   (`STREAM_LABEL`), so a deep cone never mixes two blocks.
2. For each depth from `min_depth` to `max_depth`, ops with inputs are grouped by
   signature. A group is kept when it has ≥ `min_count` roots and ≥ `MIN_OPS` ops, and
   its tree was not already kept at a smaller depth (a cone that reached all its leaves
   stops changing). A one-op cone (`matmul(in,w)`) is a GEMM shape (`opscope shapes`).
3. A kept group with the roots and the op count of the one kept a depth shallower (only
   its leaves spelled out) replaces it in place.
4. Only maximal cones are kept (`_maximal`): a cone is dropped when all its roots lie
   inside the occurrences of another cone seen at least as often that is larger or
   rooted downstream of it (none of its roots is one of the other's).

Score = count × ops in the tree, each repeat of a shared input counted again, leaves
`in`/`w`/`k` free (the reference counts expanded nodes + 1: truncated ops were free).
Order: score, count, smaller depth, first root in IR order (deterministic; the
reference's ties follow hash order).

Each cone gets a fusion hint from a rule table (first match wins; `docs/analysis.md`):

* `moe`: a contraction + routing (`sort`, `topk`, a compare-select mask of two computed
  tensors), or a softmax over x·W contractions only (a router) → grouped matmul + gating;
* `attention`: `attention`; or a softmax (named, a max-reduce or an `exp`) + an
  activation × activation contraction (q·kᵀ, p·v; a weight gathered by index is no
  activation); or such a contraction scaled by a constant (torch's `q·kᵀ * scale`); or
  RoPE's rotate-half (`concat` of a negated tensor) → FusedAttentionBlock;
* `matmul-bias-act`: a contraction + an activation (relu = `generic<maximumf>` or a
  one-input compare-select, gelu = erf/tanh, silu/sigmoid = exp with negf) →
  FusedMatMulBiasAct, `+residual` when the root is a skip connection;
* `matmul`: a contraction → share/prepack; `matmul-siblings` when the roots are
  contractions and two read the same tensor (q/k/v) → one GEMM, concatenated weights;
* `softmax` (named, max-reduce + exp, or exp / sum(exp); no contraction) → one-pass
  online softmax;
* `norm` (`rsqrt`, or a sum reduction + a centering `generic<subf>`) → one-pass norm;
* `reuse`: anything else → decompose once + reuse.

`matmul-siblings`, `softmax` and `norm` are our additions (the reference would say
"share/prepack" or "decompose once + reuse").

The rules read only the root's own block: its cone down to, not past, the residual
stream. The bias add is optional (SwiGLU and bias-free FFNs have none).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from iree.compiler import ir

from opscope.ir.opgraph import ARG, LEAF_LABELS, WEIGHT, OpGraph, build_graph
from opscope.ir.residual import is_contraction, label_body, skip_connections

STREAM_LABEL = ARG  # a residual-stream value enters a cone as a block input, like an argument
MIN_OPS = 2  # one op reading inputs (matmul(in,w)) is a GEMM shape (`opscope shapes`), not a sub-DAG

MAX_SITES = 6
HINTS = {
    "moe": "MoE expert block: fuse grouped matmul + gating",
    "attention": "attention block: fuse (FusedAttentionBlock)",
    "matmul-bias-act": "linear(+bias)+act: fuse into one kernel (FusedMatMulBiasAct)",
    "matmul-bias-act+residual": "residual linear(+bias)+act: fuse (FusedMatMulBiasAct + residual)",
    "matmul": "recurring matmul cone: share/prepack",
    "matmul-siblings": "sibling matmuls read one input: fuse horizontally (one GEMM, concatenated weights)",
    "softmax": "softmax: fuse into one pass (online-softmax kernel)",
    "norm": "normalization: fuse into one pass (LayerNorm/RMSNorm kernel)",
    "reuse": "recurring sub-DAG: decompose once + reuse",
}


@dataclass(frozen=True)
class Cone:
    """One repeated input cone: its depth, how many roots share it, its tree and fusion hint."""

    depth: int
    count: int
    tree: str
    ops: int
    kind: str
    sites: tuple[str, ...] = ()
    first: int = field(default=0, compare=False)  # node id of its first root, for ordering
    roots: tuple[int, ...] = field(default=(), compare=False, repr=False)  # every root's node id

    @property
    def score(self) -> int:
        """count × ops in the tree: the work one specialized kernel would cover."""
        return self.count * self.ops

    @property
    def hint(self) -> str:
        return HINTS[self.kind]

    def to_dict(self) -> dict:
        return {
            "depth": self.depth,
            "count": self.count,
            "ops": self.ops,
            "score": self.score,
            "kind": self.kind,
            "hint": self.hint,
            "tree": self.tree,
            "sites": list(self.sites),
        }


@dataclass(frozen=True)
class ConeReport:
    """All repeated cones of one module, best first, with the options that produced them."""

    cones: tuple[Cone, ...]
    ops: int
    min_depth: int = 2
    max_depth: int = 6
    min_count: int = 2
    note: str | None = None

    def to_dict(self, top: int | None = None) -> dict:
        """JSON-safe: options, op count, note and the cones (all, or the `top` best), full trees."""
        shown = self.cones if top is None else self.cones[:top]
        return {
            "analysis": "cones",
            "ops": self.ops,
            "min_depth": self.min_depth,
            "max_depth": self.max_depth,
            "min_count": self.min_count,
            "note": self.note,
            "cones": [c.to_dict() for c in shown],
        }


def cones_text(report: ConeReport, top: int | None = 12, width: int = 160) -> str:
    """Per cone a `score ×count d=depth hint` line, the tree (cut at `width` characters) and sites."""
    shown = report.cones if top is None else report.cones[:top]
    head = (
        f"cones: {report.ops} ops; depth {report.min_depth}..{report.max_depth}, seen ≥{report.min_count} times: "
        f"{len(report.cones)}" + (f" (top {len(shown)})" if len(shown) < len(report.cones) else "")
    )
    lines = [head]
    if report.note:
        lines.append(f"  note: {report.note}")
    for c in shown:
        tree = c.tree if len(c.tree) <= width else c.tree[: width - 1] + "…"
        lines.append(f"  {c.score:>6} ×{c.count:<4} d={c.depth} ops={c.ops:<4} {c.hint}")
        lines.append(f"         {tree}")
        if c.sites:
            lines.append(f"         sites: {', '.join(c.sites)}")
    return "\n".join(lines)


def dataflow_cones(
    module: ir.Module | ir.Operation, min_depth: int = 2, max_depth: int = 6, min_count: int = 2
) -> ConeReport:
    """The repeated input cones of every function in `module`, with fusion hints."""
    return mine_cones(build_graph(module), min_depth, max_depth, min_count)


class _Trees:
    """Interned signature trees: id -> (label, child ids), with op counts and rendered text."""

    def __init__(self):
        self.ids: dict[tuple[str, tuple[int, ...]], int] = {}
        self.label: list[str] = []
        self.kids: list[tuple[int, ...]] = []
        self.ops: list[int] = []
        self._text: dict[int, str] = {}

    def intern(self, label: str, kids: tuple[int, ...]) -> int:
        key = (label, kids)
        tid = self.ids.get(key)
        if tid is None:
            tid = len(self.label)
            self.ids[key] = tid
            self.label.append(label)
            self.kids.append(kids)
            self.ops.append((label not in LEAF_LABELS) + sum(self.ops[k] for k in kids))
        return tid

    def text(self, tid: int) -> str:
        """`label(child,child,...)`, the reference's signature string."""
        out = self._text.get(tid)
        if out is None:
            kids = self.kids[tid]
            out = self.label[tid] + ("(" + ",".join(self.text(k) for k in kids) + ")" if kids else "")
            self._text[tid] = out
        return out


def mine_cones(graph: OpGraph, min_depth: int = 2, max_depth: int = 6, min_count: int = 2) -> ConeReport:
    """Cones of a built (or hand-made) graph; see the module docstring for the rules."""
    _check_options(min_depth, max_depth, min_count)
    if not graph.ops:
        return ConeReport((), 0, min_depth, max_depth, min_count, note="no ops with tensor results: nothing to mine")
    roots = [n for n in graph.ops if graph.inputs[n]]
    trees = _Trees()
    base = [trees.intern(label, ()) for label in graph.labels]
    sig = list(base)
    kept_ids: set[int] = set()
    found: list[Cone] = []
    same: dict[tuple[tuple[int, ...], int], int] = {}  # (roots, ops) -> index in found
    hints = _Hints(graph)
    stream = trees.intern(STREAM_LABEL, ())
    cut = hints.stream  # the residual stream ends a cone
    for depth in range(1, max_depth + 1):
        sig = [
            trees.intern(graph.labels[n], tuple(stream if cut[i] else sig[i] for i in ins)) if ins else base[n]
            for n, ins in enumerate(graph.inputs)
        ]
        if depth < min_depth:
            continue
        groups: dict[int, list[int]] = {}
        for n in roots:
            groups.setdefault(sig[n], []).append(n)
        for tid, members in groups.items():
            if len(members) < min_count or tid in kept_ids or trees.ops[tid] < MIN_OPS:
                continue
            kept_ids.add(tid)
            cone = Cone(
                depth,
                len(members),
                trees.text(tid),
                trees.ops[tid],
                hints.kind(members, depth),
                tuple(graph.sites[n] for n in members[:MAX_SITES]),
                members[0],
                tuple(members),
            )
            key = (tuple(members), trees.ops[tid])
            if key in same:  # the cone seen one depth shallower, only its leaves now spelled out
                found[same[key]] = cone
            else:
                same[key] = len(found)
                found.append(cone)
    found = _maximal(found, graph, cut)
    found.sort(key=lambda c: (-c.score, -c.count, c.depth, c.first))
    note = None if found else f"no input cone of depth {min_depth}..{max_depth} repeats {min_count} times"
    return ConeReport(tuple(found), len(graph.ops), min_depth, max_depth, min_count, note)


def _maximal(found: list[Cone], graph: OpGraph, cut: list[bool]) -> list[Cone]:
    """Drop every cone whose roots all lie inside the occurrences of another cone found, seen
    at least as often, that is larger or rooted downstream of it (none of its roots is one
    of the other's): the attention block's softmax, context and o-projection cones inside
    the block's own cone, however deep each reaches. A cone sharing roots with a smaller one
    stays (a post-norm model's two residual adds per layer agree at depth 2, then differ).
    What is left are the patterns themselves, not their sub-trees. Quadratic in the cones
    found, which are few.

    No two cones drop each other: with shared roots each would need more ops than the other,
    and with disjoint roots the last root in IR order of either cone lies below none."""
    spans = [_span(graph, c, cut) for c in found]
    keep = []
    for a, cone in enumerate(found):
        roots = spans[a][0]
        inside = any(
            b != a
            and other.count >= cone.count
            and roots <= spans[b][1]
            and (other.ops > cone.ops or not roots & spans[b][0])
            for b, other in enumerate(found)
        )
        if not inside:
            keep.append(cone)
    return keep


def _span(graph: OpGraph, cone: Cone, cut: list[bool]) -> tuple[frozenset[int], frozenset[int]]:
    """(the cone's roots, every op node within `depth` of a root, not past the residual stream)."""
    roots = frozenset(cone.roots)
    nodes, frontier = set(roots), set(roots)
    for _ in range(cone.depth):
        frontier = {i for n in frontier for i in graph.inputs[n] if not graph.leaf[i] and not cut[i]} - nodes
        nodes |= frontier
    return roots, frozenset(nodes)


def _evidence(label: str, computed: int) -> set[str]:
    """What one node proves for the hint rules; `computed` counts its non-leaf inputs."""
    head, body = label_body(label)
    found: set[str] = set()
    if is_contraction(label) and head not in ("attention", "online_attention"):
        found.add("contraction")
        if computed >= 2:  # activation x activation (q·kᵀ, p·v), not x·W
            found.add("qk")
    if head in ("attention", "online_attention"):
        found |= {"attention", "contraction"}
    if head == "softmax":
        found |= {"softmax", "rmax", "exp"}
    if head == "reduce" and "maximumf" in body:
        found |= {"softmax", "rmax"}  # a decomposed softmax: its max reduction ...
    if head == "generic" and "exp" in body and "negf" not in body:
        found |= {"softmax", "exp"}  # ... or its exp (not sigmoid's)
    if head in ("topk", "sort"):
        found.add("routing")
    if "rsqrt" in body or head == "rsqrt":
        found.add("rsqrt")
    if head == "generic" and body == {"subf"}:
        found.add("center")  # x - mean
    if head == "reduce" and "addf" in body:
        found.add("reduce-sum")
    if head in ("relu", "gelu", "silu", "logistic", "sigmoid", "tanh", "erf"):
        found.add("act")
    if head == "generic":
        if body & {"erf", "tanh"} or {"exp", "negf"} <= body or body == {"maximumf"}:
            found.add("act")
        if {"cmpf", "select"} <= body:  # threshold mask of two tensors (top-k routing), or relu
            found.add("routing" if computed >= 2 else "act")
    return found


class _Hints:
    """The residual stream of the graph, and fusion hints read off the block around a cone's
    first root (all roots share its labels)."""

    def __init__(self, graph: OpGraph):
        self.graph = graph
        n = len(graph.labels)
        self.residual = [False] * n  # skip-connection adds (`opscope.ir.residual`)
        self.stream = [False] * n  # their outputs and skip inputs: the values between blocks
        for node, skip in skip_connections(graph).items():
            self.residual[node] = self.stream[node] = self.stream[skip] = True

    def kind(self, roots: list[int], depth: int) -> str:
        """The rule-table kind of the depth-`depth` cone at `roots[0]`; first match wins."""
        root = roots[0]
        ev = self._block_evidence(root, depth)
        if {"routing", "contraction"} <= ev or ({"softmax", "contraction"} <= ev and "qk" not in ev):
            return "moe"  # top-k routing, or a softmax over x·W_gate only (a router)
        if ev & {"attention", "scores", "rope"} or {"softmax", "qk"} <= ev:
            return "attention"
        if {"contraction", "act"} <= ev:
            return "matmul-bias-act+residual" if self.residual[root] else "matmul-bias-act"
        if "contraction" in ev:
            sibling = "contraction" in _evidence(self.graph.labels[root], 0) and self._siblings(roots)
            return "matmul-siblings" if sibling else "matmul"
        if {"rmax", "exp"} <= ev or {"exp", "reduce-sum"} <= ev:  # x - max, or exp / sum(exp)
            return "softmax"
        return "norm" if "rsqrt" in ev or {"reduce-sum", "center"} <= ev else "reuse"

    def _block_evidence(self, root: int, depth: int) -> set[str]:
        """Evidence from the ops a kernel computing `root` would absorb: the cone down to, not
        past, the residual stream."""
        g = self.graph
        found: set[str] = set()
        level, seen = [root], {root}
        for d in range(depth + 1):
            nxt = []
            for n in level:
                if n != root and self.stream[n]:
                    continue
                found |= _evidence(g.labels[n], sum(self._activation(i) for i in g.inputs[n]))
                if self._scaled_scores(n):
                    found.add("scores")
                if self._rotate_half(n):
                    found.add("rope")
                if d < depth:
                    nxt.extend(i for i in g.inputs[n] if i not in seen)
                    seen.update(g.inputs[n])
            level = nxt
        return found

    def _activation(self, node: int) -> bool:
        """A computed tensor that is not a lookup into a weight (an expert bank gathered by
        the router's indices is a weight operand, not an activation)."""
        g = self.graph
        if g.leaf[node]:
            return False
        return not (g.labels[node] == "gather" and any(g.labels[i] == WEIGHT for i in g.inputs[node]))

    def _scaled_scores(self, node: int) -> bool:
        """`node` scales an activation × activation contraction by a constant: torch's
        `q·kᵀ * scale` (or `/ sqrt(d)`), the scores of eager attention."""
        g = self.graph
        if g.labels[node] not in ("generic<mulf>", "generic<divf>"):
            return False
        data = [i for i in g.inputs[node] if not g.leaf[i]]
        if len(data) != 1:
            return False
        src = data[0]
        return "qk" in _evidence(g.labels[src], sum(self._activation(i) for i in g.inputs[src]))

    def _rotate_half(self, node: int) -> bool:
        """`node` is RoPE's rotate-half: a `concat` of a negated tensor and another
        (`cat(-x2, x1)`, the slices being transparent)."""
        g = self.graph
        return g.labels[node] == "concat" and any(g.labels[i] == "generic<negf>" for i in g.inputs[node])

    def _siblings(self, roots: list[int]) -> bool:
        """Two roots read the same computed tensor (q, k and v of one layer)."""
        seen: set[int] = set()
        for n in roots:
            ins = {i for i in self.graph.inputs[n] if not self.graph.leaf[i]}
            if ins & seen:
                return True
            seen |= ins
        return False


def _check_options(min_depth: int, max_depth: int, min_count: int) -> None:
    if min_depth < 1 or max_depth < min_depth or min_count < 1:
        raise ValueError(
            f"cones: need 1 ≤ min_depth ≤ max_depth and min_count ≥ 1, "
            f"got min_depth={min_depth}, max_depth={max_depth}, min_count={min_count}"
        )
