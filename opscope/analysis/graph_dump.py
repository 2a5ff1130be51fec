"""The reference's edge-list dump of a dataflow graph (what its `opscope-graph` reads): a writer
for any model's graph and a reader, so graphs from another tool are mined like ours.

Format (§3.2 of the reference): an optional first line `# title`, then one line per node,
`idx label in0 in1 …`, whitespace separated; `idx` is informational, the file's order is the node
order and `in…` are the node's inputs by that order; `in`, `w` and `k` label the leaves (a model
input, a weight, another constant). Labels are `opscope.ir.labels`' (`matmul`,
`generic<maximumf>`, `softmax`, ...); the reference's names (`MatMul`, `Relu`) read as labels too,
with weaker fusion hints. Blank lines and later `#` lines are skipped. A node must read only
nodes before it (a dump of a dataflow graph is in topological order).
"""

from __future__ import annotations

import re
from pathlib import Path

from opscope.errors import OpscopeError
from opscope.ir.opgraph import OpGraph, from_edges

SUFFIX = ".txt"


def dump_text(graph: OpGraph, title: str = "") -> str:
    """`graph` as the dump: the title line (when given), then `idx label in0 in1 …` per node."""
    lines = [f"# {title}"] if title else []
    for node, (label, ins) in enumerate(zip(graph.labels, graph.inputs)):
        lines.append(" ".join([str(node), re.sub(r"\s+", "", label), *map(str, ins)]))
    return "\n".join(lines) + "\n"


def read_dump(text: str, source: str = "<dump>") -> tuple[str, OpGraph]:
    """(title, graph) of a dump; a malformed line is a one-line error naming the file and the line."""
    title = ""
    labels: list[str] = []
    inputs: list[list[int]] = []
    for number, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line:
            continue
        if line.startswith("#"):
            if not labels and not title:
                title = line.lstrip("#").strip()
            continue
        fields = line.split()
        if len(fields) < 2:
            raise OpscopeError(f"{source}:{number}: expected `idx label in0 in1 …`, got {line!r}")
        try:
            ins = [int(f) for f in fields[2:]]
        except ValueError:
            raise OpscopeError(
                f"{source}:{number}: node inputs are node numbers (file order), got {' '.join(fields[2:])!r}"
            ) from None
        later = [i for i in ins if not 0 <= i < len(labels)]
        if later:
            raise OpscopeError(
                f"{source}:{number}: node {len(labels)} ({fields[1]}) reads node {later[0]}, not one before it "
                "(a dump lists a graph's nodes in topological order)"
            )
        labels.append(fields[1])
        inputs.append(ins)
    if not labels:
        raise OpscopeError(f"{source}: no nodes (a dump is one `idx label in0 in1 …` line per node)")
    return title, from_edges(labels, inputs)


def is_dump(source: object) -> bool:
    """A path (or name) of a dump file: it ends in `.txt`."""
    return isinstance(source, (str, Path)) and str(source).endswith(SUFFIX)


def load_dump(path: str | Path) -> tuple[str, OpGraph]:
    """(title, graph) of the dump file `path` (one-line errors for a missing or malformed file)."""
    p = Path(path)
    try:
        text = p.read_text()
    except FileNotFoundError:
        raise OpscopeError(f"{path}: no such dump file") from None
    except (OSError, UnicodeDecodeError) as e:
        raise OpscopeError(f"{path}: cannot read the dump: {e}") from None
    return read_dump(text, str(path))
