"""Residual adds: which adds join a block's output to the residual stream.

A skip connection adds `x` and `f(x)`, where some path from `x` to `f(x)` passes a
contraction and no earlier skip connection (`x` may be a function argument, as layer 0's
embedding is). The contraction tells a block from an elementwise `x + g(x)` (GELU-tanh's
`x + 0.044715·x³`); stopping at earlier skip connections tells it from a tensor every
layer reads (the attention mask reaches layer 1's scores through layer 0, so without the
stop layer 1's mask add would look like one). Read on the semantic graph
(`opscope.ir.opgraph`), so views and weight transposes are transparent. The residual taps
(`opscope.ir.dynamics`) and the cone miner (`opscope.analysis.cones`) share this rule.
"""

from __future__ import annotations

from opscope.ir.opgraph import ARG, OpGraph

CONTRACTIONS = (
    "matmul",
    "batch_matmul",
    "matvec",
    "vecmat",
    "batch_matvec",
    "batch_vecmat",
    "dot",
    "dot_general",
    "mmt4d",
    "batch_mmt4d",
    "batch_reduce_matmul",
    "conv",
    "contract",
)


def label_body(label: str) -> tuple[str, set[str]]:
    """`reduce<maximumf,exp>` -> ("reduce", {"maximumf", "exp"}); `matmul` -> ("matmul", set())."""
    head, _, rest = label.partition("<")
    return head, set(rest.rstrip(">").split(",")) if rest else set()


def is_contraction(label: str) -> bool:
    """A matmul-like or convolution op (a block's work), fused attention included."""
    head, _ = label_body(label)
    return (
        head in CONTRACTIONS
        or head.startswith(("conv", "batch_matmul", "matmul", "depthwise_conv"))
        or head in ("attention", "online_attention")
    )


def skip_connections(graph: OpGraph) -> dict[int, int]:
    """Every residual add of `graph`, in IR order: add node -> its skip input node."""
    found: dict[int, int] = {}
    for node in graph.ops:  # IR order: the skip connections a search stops at are known
        skip = _skip_input(graph, node, found)
        if skip is not None:
            found[node] = skip
    return found


def _skip_input(g: OpGraph, node: int, residual: dict[int, int]) -> int | None:
    """The skip input `x` when `node` adds `x` and `f(x)` (see the module docstring), else None.
    Nodes are in IR (topological) order and the search stops at the stream: it visits one block."""
    head, body = label_body(g.labels[node])
    data = [i for i in dict.fromkeys(g.inputs[node]) if not g.leaf[i] or g.labels[i] == ARG]  # not weights
    if not ((head == "generic" and body == {"addf"}) or head == "add") or len(data) != 2:
        return None
    early, late = sorted(data)
    region, stack = {late}, [late]
    while stack:
        for i in g.inputs[stack.pop()]:
            if i > early and i not in region and i not in residual:
                region.add(i)
                stack.append(i)
    reach: dict[int, bool] = {}  # reads `early`, through the region
    through: dict[int, bool] = {}  # ... on a path that passes a contraction
    for n in sorted(region):
        ins = [i for i in g.inputs[n] if i == early or i in region]
        reach[n] = any(i == early or reach[i] for i in ins)
        through[n] = reach[n] and (is_contraction(g.labels[n]) or any(through[i] for i in ins if i != early))
    return early if through[late] else None
