"""Where a model's bytes go: weights, the model's inputs and outputs, or intermediates a fused
kernel could keep on chip (the reference's `traffic_split`, §3.14).

Over the dataflow graph (`opscope.ir.opgraph`), each node's bytes are its tensor's
(dtype-aware, `opscope.analysis.cost.value_bytes`):

* a weight (`w` leaf): weight += bytes × max(consumers, 1) (each reader streams it);
* a model input (`in` leaf): io += bytes;
* a node the function returns (or another non-graph op reads): io += bytes;
* any other op: fusible += bytes × (1 + consumers) (written once, read by each consumer): what
  perfect fusion would never move;
* a `k` leaf (a splat, a fill, an iota) moves nothing: it is generated, not read (the
  reference counts constants as weights).

`irreducible` = weight + io is the floor no fusion removes; `fusible_frac` = fusible / total is
the share fusion could save at most. A node of dynamic shape is counted in `unknown`, not guessed.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from opscope.analysis.cost import value_bytes
from opscope.ir.opgraph import ARG, CONST, WEIGHT, OpGraph


@dataclass(frozen=True)
class TrafficSplit:
    """Bytes moved by weights, by the model's inputs and outputs, and by fusible intermediates."""

    weight: int
    io: int
    fusible: int
    unknown: int = 0  # nodes whose size is dynamic (left out of the sums)

    @property
    def total(self) -> int:
        return self.weight + self.io + self.fusible

    @property
    def irreducible(self) -> int:
        """What no fusion removes: the weights read and the model's inputs and outputs."""
        return self.weight + self.io

    @property
    def fusible_frac(self) -> float:
        """The share of the bytes fusion could keep on chip, at most."""
        return self.fusible / self.total if self.total else 0.0

    def to_dict(self) -> dict:
        return asdict(self) | {"total": self.total, "irreducible": self.irreducible, "fusible_frac": self.fusible_frac}


def traffic_split(graph: OpGraph) -> TrafficSplit:
    """The split of a graph built from IR (`build_graph`: its nodes' tensors give their sizes)."""
    size: dict[int, int | None] = {}
    for value, node in graph.node_of.items():
        if node >= 0 and node not in size:
            size[node] = value_bytes(value)
    consumers = graph.consumers()
    weight = io = fusible = unknown = 0
    for node, label in enumerate(graph.labels):
        if label == CONST:
            continue
        n = size.get(node)
        if n is None:
            unknown += 1
            continue
        if label == WEIGHT:
            weight += n * max(len(consumers[node]), 1)
        elif label == ARG or node in graph.escapes:
            io += n
        else:
            fusible += n * (1 + len(consumers[node]))
    return TrafficSplit(weight, io, fusible, unknown)
