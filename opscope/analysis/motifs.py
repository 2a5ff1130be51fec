"""Linear motifs: op-label n-grams that recur along single-consumer chains (fusion candidates).

From every op with inputs, a chain extends to the op's consumer while the current op has
exactly one consumer and does not escape (a returned or stored value ends it: it must be
materialized), up to `max_len` ops. Every prefix of `min_len..len` ops is counted under
"labels joined by →"; motifs seen at least `min_count` times are kept, scored count ×
length, and sorted by score, then count, then first appearance in IR order (so ties are
deterministic, unlike the reference's hash order). Labels are `labels.op_label`'s
(`matmul → generic<addf> → generic<maximumf>`), not the reference's coarse kinds: a
"Binary → Activation" motif cannot tell a bias add from a residual add, ours can.

Overlapping windows count separately, so a block repeated L times along one chain shows
up as the block itself (×L) and as its doubled form (×L−1, twice the length): by score
the doubled form usually comes first, exactly as the reference's own 6-layer example.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from iree.compiler import ir

from opscope.ir.opgraph import OpGraph, build_graph

ARROW = " → "
MAX_EXAMPLES = 4


@dataclass(frozen=True)
class Motif:
    """One recurring chain of op labels: how often it starts, and where (≤ 4 example sites)."""

    seq: tuple[str, ...]
    count: int
    examples: tuple[str, ...] = ()
    first: int = field(default=0, compare=False)  # node id of its first start, for ordering

    @property
    def score(self) -> int:
        """count × length: how much op-to-op traffic one fused kernel would remove."""
        return self.count * len(self.seq)

    @property
    def key(self) -> str:
        return ARROW.join(self.seq)

    def to_dict(self) -> dict:
        return {"seq": list(self.seq), "count": self.count, "score": self.score, "examples": list(self.examples)}


@dataclass(frozen=True)
class MotifReport:
    """All motifs of one module, best first, with the options that produced them."""

    motifs: tuple[Motif, ...]
    ops: int
    min_len: int = 2
    max_len: int = 6
    min_count: int = 2
    note: str | None = None

    def to_dict(self, top: int | None = None) -> dict:
        """JSON-safe: options, op count, note and the motifs (all, or the `top` best)."""
        shown = self.motifs if top is None else self.motifs[:top]
        return {
            "analysis": "motifs",
            "ops": self.ops,
            "min_len": self.min_len,
            "max_len": self.max_len,
            "min_count": self.min_count,
            "note": self.note,
            "motifs": [m.to_dict() for m in shown],
        }


def motifs_text(report: MotifReport, top: int | None = 12) -> str:
    """`score ×count  a → b → c   e.g. site, site` lines, best first, under a one-line header."""
    shown = report.motifs if top is None else report.motifs[:top]
    head = (
        f"motifs: {report.ops} ops; chains of {report.min_len}..{report.max_len} ops seen ≥{report.min_count} times: "
        f"{len(report.motifs)}" + (f" (top {len(shown)})" if len(shown) < len(report.motifs) else "")
    )
    lines = [head]
    if report.note:
        lines.append(f"  note: {report.note}")
    for m in shown:
        lines.append(f"  {m.score:>6} ×{m.count:<5} {m.key}")
        if m.examples:
            lines.append(f"  {'':>6}  {'':<5} e.g. {', '.join(m.examples)}")
    return "\n".join(lines)


def linear_motifs(
    module: ir.Module | ir.Operation, min_len: int = 2, max_len: int = 6, min_count: int = 2
) -> MotifReport:
    """The recurring single-consumer op chains of every function in `module`."""
    return mine_motifs(build_graph(module), min_len, max_len, min_count)


def mine_motifs(graph: OpGraph, min_len: int = 2, max_len: int = 6, min_count: int = 2) -> MotifReport:
    """Motifs of a built (or hand-made) graph; see the module docstring for the rules."""
    _check_options(min_len, max_len, min_count)
    ops = graph.ops
    if not ops:
        return MotifReport((), 0, min_len, max_len, min_count, note="no ops with tensor results: nothing to mine")
    consumers = graph.consumers()
    counts: dict[tuple[str, ...], int] = {}
    first: dict[tuple[str, ...], int] = {}
    examples: dict[tuple[str, ...], list[str]] = {}
    for start in ops:
        if not graph.inputs[start]:
            continue
        chain = _chain(graph, consumers, start, max_len)
        for length in range(min_len, len(chain) + 1):
            seq = tuple(graph.labels[n] for n in chain[:length])
            counts[seq] = counts.get(seq, 0) + 1
            first.setdefault(seq, start)
            seen = examples.setdefault(seq, [])
            if len(seen) < MAX_EXAMPLES:
                seen.append(graph.sites[start])
    kept = [Motif(seq, c, tuple(examples[seq]), first[seq]) for seq, c in counts.items() if c >= min_count]
    kept.sort(key=lambda m: (-m.score, -m.count, m.first, m.key))
    note = None if kept else f"no chain of {min_len}..{max_len} ops repeats {min_count} times"
    return MotifReport(tuple(kept), len(ops), min_len, max_len, min_count, note)


def _chain(graph: OpGraph, consumers: list[list[int]], start: int, max_len: int) -> list[int]:
    """`start` and its sole consumers, one after the other, up to `max_len` ops."""
    chain = [start]
    node = start
    while len(chain) < max_len and len(consumers[node]) == 1 and node not in graph.escapes:
        node = consumers[node][0]
        chain.append(node)
    return chain


def _check_options(min_len: int, max_len: int, min_count: int) -> None:
    if min_len < 1 or max_len < min_len or min_count < 1:
        raise ValueError(
            f"motifs: need 1 ≤ min_len ≤ max_len and min_count ≥ 1, "
            f"got min_len={min_len}, max_len={max_len}, min_count={min_count}"
        )
