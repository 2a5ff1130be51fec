"""`opscope graph`: a model's graph, and a run's statistics on it, written for Model Explorer.

`export_graph(source, out)` writes `out/graph.json` (the model's linalg module as Model
Explorer's graph JSON, `opscope.analysis.graph`) and, when `source` is a profile run folder
(its `run.json` names the model it ran), one `out/node_data/<statistic>.<role>.json` per
statistic the run recorded (`opscope.explorer.node_data`, the numbers of the run's report page), keyed by the node ids of the
tapped ops; node-data files an earlier export left there are removed. Model Explorer opens
the graph file with its JSON loader and each node-data file as an overlay (`opscope view`
starts it with all of them loaded). Returns a `GraphExport`.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from opscope.errors import OpscopeError
from opscope.text.numbers import exact, nbytes, num
from opscope.text.table import table

GRAPH_NAME = "graph.json"
NODE_DATA_DIR = "node_data"


@dataclass
class GraphExport:
    """What `opscope graph` wrote: the graph file, the node-data files and what they hold."""

    model: str
    out_dir: Path
    graph: Path
    graphs: list[str]  # graph ids, the model's function first
    nodes: int
    edges: int
    sites: int  # the module's sites, marked on their nodes
    run: Path | None = None
    node_data: dict[str, Path] = field(default_factory=dict)  # title -> file
    placed: dict[str, int] = field(default_factory=dict)  # title -> nodes it colours
    ranges: dict[str, tuple[float, float, bool]] = field(default_factory=dict)  # title -> (min, max, log scale)
    notes: list[str] = field(default_factory=list)

    def __repr__(self) -> str:
        files = f"; {len(self.node_data)} node-data files" if self.node_data else ""
        return (
            f"GraphExport({self.model!r}: {self.nodes} nodes, {self.edges} edges, {self.sites} sites"
            f"{files} in {str(self.out_dir)!r})"
        )

    def to_dict(self) -> dict:
        return {
            "schema": "opscope-graph/1",
            "model": self.model,
            "out_dir": str(self.out_dir),
            "graph": str(self.graph),
            "graphs": self.graphs,
            "nodes": self.nodes,
            "edges": self.edges,
            "sites": self.sites,
            "run": None if self.run is None else str(self.run),
            "node_data": [
                {
                    "title": title,
                    "file": str(path),
                    "nodes": self.placed[title],
                    "min": self.ranges[title][0],
                    "max": self.ranges[title][1],
                    "log": self.ranges[title][2],
                }
                for title, path in self.node_data.items()
            ],
            "notes": self.notes,
        }


def export_graph(
    source,
    out: str | Path,
    *,
    model=None,
    progress: Callable[[str], None] | None = None,
) -> GraphExport:
    """The graph of `source` (a model as `opscope.load_model` takes it, or a profile run folder,
    whose statistics become node data) written to the folder `out`; `model` replaces the model
    a run's run.json names."""
    from opscope.analysis.graph import model_graph

    folder = _run_folder(source)
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise OpscopeError(f"{out} is a file: give a folder for the graph and its node data")
    model = _model_of(folder, source, model)
    view = None if folder is None else _view(folder, progress)  # an unreadable run refused before the model loads
    module, name = _module(model, progress)
    graph = model_graph(module, name)
    if progress is not None:
        progress(f"graph: {graph.nodes} nodes, {graph.edges} edges, {len(graph.sites)} sites")
    out.mkdir(parents=True, exist_ok=True)
    for stale in (out / NODE_DATA_DIR).glob("*.json"):  # an earlier export's overlays: not of this graph
        stale.unlink()
    export = GraphExport(
        name,
        out,
        _write(out / GRAPH_NAME, graph.collection),
        [g["id"] for g in graph.graphs],
        graph.nodes,
        graph.edges,
        len(graph.sites),
        folder,
    )
    if view is not None:
        _write_node_data(export, view, graph.sites)
    return export


def graph_text(export: GraphExport) -> str:
    """What `opscope graph` prints: the graph's size, each overlay's file, range and scale, how to open them."""
    lines = [
        f"graph: {export.model}: {exact(export.nodes)} nodes, {exact(export.edges)} edges in "
        f"{len(export.graphs)} graph{'s' * (len(export.graphs) > 1)} ({', '.join(export.graphs)}); "
        f"{export.sites} sites marked",
        f"wrote {export.graph} ({nbytes(export.graph.stat().st_size)})",
    ]
    if export.node_data:
        lines += ["", f"node data of {export.run}, one file per statistic in {export.out_dir / NODE_DATA_DIR}:"]
        rows = [
            [
                path.name,
                title,
                str(export.placed[title]),
                f"{num(export.ranges[title][0], '.4g')} .. {num(export.ranges[title][1], '.4g')}",
                "log" if export.ranges[title][2] else "linear",
            ]
            for title, path in export.node_data.items()
        ]
        lines += ["  " + line for line in table(["file", "statistic", "nodes", "range", "scale"], rows, right=(2,))]
    elif export.run is not None:
        lines.append(f"{export.run} holds no statistic to show on the graph")
    lines += [f"note: {n}" for n in export.notes]
    lines += [
        "",
        f"open in Model Explorer: opscope view {export.out_dir} (pip install 'opscope[viewer]'), "
        f"or its Add button with {GRAPH_NAME}"
        + (f", then each node-data file under {NODE_DATA_DIR}/" if export.node_data else ""),
    ]
    return "\n".join(lines) + "\n"


def _run_folder(source) -> Path | None:
    """The profile run folder `source` names (a `ProfileResult` or a folder holding sketches.csv), else None."""
    from opscope.drive.profile import CSV_NAME

    folder = getattr(source, "out_dir", source)
    if isinstance(folder, (str, Path)) and Path(folder).is_dir():
        if not (Path(folder) / CSV_NAME).exists():
            raise OpscopeError(f"{folder} holds no {CSV_NAME}: give a profile run folder or a model")
        return Path(folder)
    return None


def _model_of(folder: Path | None, source, model):
    """The model to draw: `model`, else the run's model (its run.json; None: the built-in model), else `source`."""
    from opscope.act.run_folder import read_run

    if model is not None or folder is None:
        return source if model is None else model
    _, record = read_run(folder)
    if "source" not in record:
        raise OpscopeError(
            f"{folder} does not say which model it profiled (no run.json source): "
            "give the model, e.g. `opscope graph RUN --model model.onnx`"
        )
    return record["source"]


def _module(model, progress: Callable[[str], None] | None):
    """The module of `model` (None: the built-in model) and its name."""
    from opscope.drive.profile import default_source
    from opscope.ir.loading import new_context, parse_module
    from opscope.models.source import open_model

    opened = default_source(1) if model is None else open_model(model, 1, progress=progress)
    module = opened.module
    if not hasattr(module, "operation"):
        module = parse_module(module, new_context(), opened.name)
    return module, opened.name


def _view(folder: Path, progress: Callable[[str], None] | None):
    """The run mined and gathered as its report page sees it (`RunView`: the overlays' one source)."""
    from opscope.mining.run_view import run_view

    if progress is not None:
        progress(f"mining {folder}")
    return run_view(folder)


def _write_node_data(export: GraphExport, view, nodes: dict[str, tuple[str, str]]) -> None:
    """One node-data file per statistic and role of the run's grid."""
    from opscope.explorer.node_data import node_data, overlays

    found, export.notes = overlays(view)
    sites = set().union(*(o.values for o in found)) if found else set()
    missing = sorted(sites - set(nodes))
    if missing:
        export.notes.append(
            f"{len(missing)} of the run's {len(sites)} sites have no op in the graph (left out): "
            + ", ".join(missing[:5])
            + (", ..." if len(missing) > 5 else "")
        )
    (export.out_dir / NODE_DATA_DIR).mkdir(exist_ok=True)
    for overlay in found:
        data = node_data(overlay, nodes)
        if not data:
            continue
        export.node_data[overlay.title] = _write(export.out_dir / NODE_DATA_DIR / f"{overlay.key}.json", data)
        export.placed[overlay.title] = sum(len(g["results"]) for g in data.values())
        values = overlay.values.values()
        export.ranges[overlay.title] = (min(values), max(values), overlay.log)


def _write(path: Path, data: dict) -> Path:
    """`data` as compact JSON at `path`."""
    path.write_text(json.dumps(data, separators=(",", ":"), allow_nan=False) + "\n")
    return path
