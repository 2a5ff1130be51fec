"""Model Explorer's graph and node data (`opscope graph`, `opscope view`; `opscope.analysis.graph`,
`opscope.explorer`).

The MiniLM zoo model's graph has one node per op of its function (counted by walking the module),
every edge starts at a node of the graph, every site sits on its op's node and a layer's ops fold
into the layer's namespace. A one-step profile of the built-in model (matmuls, attention and residual
taps: every kind of overlay) gives node data whose keys are all nodes of the graph and whose numbers
are `opscope.mine`'s. Where Model Explorer is installed (the `[viewer]` extra; `.ci/run` installs its
Python package without its C++ adapter), its own dataclasses read both files back, and its server,
started by `opscope view` on 127.0.0.1, answers its health check and serves the graph and every
node-data file the page is told to load.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

import opscope
from opscope.analysis.graph import model_graph, namespace, tensor_shape
from opscope.explorer.node_data import LOG_STOPS, Overlay, node_data
from tests.inprocess import opscope as cli
from tests.pictures import keep

GRAPH_FIELDS = {
    "id",
    "label",
    "namespace",
    "subgraphIds",
    "attrs",
    "incomingEdges",
    "outputsMetadata",
    "inputsMetadata",
}


def _main(module):
    from opscope.ir.arguments import function_op

    return function_op(module)


@pytest.fixture(scope="module")
def minilm():
    """The MiniLM zoo model's module and its graph."""
    module = opscope.load_model("minilm")
    return module, model_graph(module, "minilm")


def test_minilm_graph_has_one_node_per_op_and_edges_from_nodes(minilm):
    from iree.compiler import ir

    module, graph = minilm
    fn = _main(module)
    walked = []

    def visit(op):
        if op.parent is not None and op.parent == fn:
            walked.append(op.name)
        return ir.WalkResult.ADVANCE

    fn.walk(visit)
    args = len(fn.regions[0].blocks[0].arguments)
    main = graph.graphs[0]
    assert main["id"] == "main" and len(graph.graphs) == 1
    ops = [n for n in main["nodes"] if n["label"] != "input"]
    assert len(walked) > 600 and len(ops) == len(walked) and len(main["nodes"]) == len(walked) + args
    assert [n["attrs"][0] for n in ops] == [{"key": "op", "value": name} for name in walked]  # one to one, in order
    ids = [n["id"] for n in main["nodes"]]
    assert len(set(ids)) == len(ids) and all(set(n) == GRAPH_FIELDS for n in main["nodes"])
    nodes = {n["id"]: n for n in main["nodes"]}
    edges = [(e, n) for n in main["nodes"] for e in n["incomingEdges"]]
    assert len(edges) == graph.edges > len(ops)
    for e, _ in edges:
        source = nodes[e["sourceNodeId"]]  # every edge starts at a node of the graph, at one of its outputs
        assert int(e["sourceNodeOutputId"]) < len(source["outputsMetadata"])
    shapes = {m["attrs"][0]["value"] for n in main["nodes"] for m in n["outputsMetadata"]}
    assert {"i64[8,48]", "f32[8,48,384]", "f32[8,12,48,48]"} <= shapes  # token ids, the stream, attention scores


def test_minilm_sites_sit_on_their_ops_and_layers_fold(minilm):
    from opscope.ir.dynamics import find_dynamics_sites
    from opscope.ir.sites import find_sites, location_name

    module, graph = minilm
    matmuls = find_sites(module.operation)
    dynamics = find_dynamics_sites(module, taken={s.name for s in matmuls}).sites
    # 6 layers × (q, k, v, q·kᵀ, p·v, o, up, down) and the pooler
    assert len(matmuls) == 6 * 8 + 1 and set(graph.sites) == {s.name for s in matmuls + dynamics}
    nodes = {n["id"]: n for n in graph.graphs[0]["nodes"]}
    for site in matmuls:
        node = nodes[graph.sites[site.name][1]]
        assert {"key": "site", "value": site.name} in node["attrs"] and node["label"] in ("matmul", "batch_matmul")
        assert node["namespace"] == namespace(location_name(site.op.location))  # the site's name, less any `#n`
    layer3 = [
        n for n in nodes.values() if {"key": "module", "value": "encoder.layer.3.attention.self.query"} in n["attrs"]
    ]
    assert layer3 and all(n["namespace"] == "encoder/layer.3/attention/self/query" for n in layer3)
    assert namespace("model.layers.3.self_attn.q_proj") == "model/layers.3/self_attn/q_proj"


def test_tensor_shapes_name_dtype_and_dims():
    from iree.compiler import ir

    with ir.Context():
        assert tensor_shape(ir.Type.parse("tensor<1x?x4xbf16>")) == "bf16[1,?,4]"
        assert tensor_shape(ir.Type.parse("tensor<f32>")) == "f32[]"
        assert tensor_shape(ir.Type.parse("index")) == "index"


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """A one-step profile of the built-in model, and `opscope graph` of it."""
    root = tmp_path_factory.mktemp("graph")
    run = opscope.profile(steps=1, out=root / "run")
    said: list[str] = []
    export = opscope.graph(run, root / "graph", progress=said.append)
    return run, export, said


def test_run_node_data_keys_are_nodes_and_values_are_mines(exported):
    import polars as pl

    run, export, said = exported
    graph = json.loads(export.graph.read_text())
    nodes = {(g["id"], n["id"]) for g in graph["graphs"] for n in g["nodes"]}
    assert export.nodes == len(nodes) and export.sites == 22 and not export.notes
    files = sorted(p.name for p in export.node_data.values())
    assert "attention-entropy.json" in files and "block-influence.json" in files and "kurtosis.lhs.json" in files
    assert "headroom.out.json" in files
    assert len(files) == 17 and files == sorted(p.name for p in (export.out_dir / "node_data").iterdir())
    report = opscope.mine(run.out_dir)
    tidy = opscope.read_sketches(run)
    site_of = {n["id"]: a["value"] for n in graph["graphs"][0]["nodes"] for a in n["attrs"] if a["key"] == "site"}
    for path in export.node_data.values():
        data = json.loads(path.read_text())
        for graph_id, d in data.items():
            assert {(graph_id, k) for k in d["results"]} <= nodes  # every key is a node of the graph
            stat, _, role = path.stem.partition(".")
            for node, result in d["results"].items():
                site = site_of[node]
                if stat == "kurtosis":
                    want = tidy.filter(site=site, role=role, stat="kurtosis")["value"].mean()
                elif stat == "headroom":  # log2(max|x| / rms) of the one step recorded
                    one = {r["stat"]: r for r in tidy.filter(site=site, role=role).iter_rows(named=True)}
                    peak = max(abs(one["max"]["value"]), abs(one["min"]["value"]))
                    want = math.log2(peak / math.sqrt(one["sumsq"]["value"] / one["sumsq"]["numel"]))
                elif stat == "attention-entropy":
                    want = report.dynamics.attention.filter(site=site)["entropy"].item()
                elif stat == "block-influence":
                    want = report.dynamics.residual.filter(site=site)["bi"].item()
                else:
                    column = {"density": "density", "zero-channels": "zchan", "outliers": "outlier"}[stat]
                    want = report.signals.filter(pl.col("site") == site, pl.col("role") == role)[column].item()
                assert result["value"] == pytest.approx(want, rel=1e-12), (path.name, site)
    assert said[0].startswith("mining ") and said[-1].startswith("graph: ")  # the run read before the model
    text = opscope.render(export)
    assert "block-influence.json" in text and "opscope view" in text


def test_log_scale_where_values_span_a_decade():
    overlay = Overlay("k", "kurtosis, lhs", {"a": 3.0, "b": 30.0, "c": 300.0})
    assert overlay.log and not Overlay("d", "density", {"a": 0.2, "b": 1.0}).log
    assert not Overlay("z", "zero", {"a": 0.0, "b": 0.5}).log  # a zero: no log scale
    data = node_data(overlay, {"a": ("main", "op1"), "b": ("main", "op2"), "c": ("main", "op3")})["main"]
    stops = [g["stop"] for g in data["gradient"]]
    assert len(stops) == LOG_STOPS and stops[0] == 0 and stops[-1] == 1 and stops == sorted(stops)
    assert stops[LOG_STOPS // 2] == pytest.approx((30 - 3) / (300 - 3), abs=1e-6)  # the middle decade
    colours = [data["results"][n]["bgColor"] for n in ("op1", "op2", "op3")]
    assert colours == [data["gradient"][i]["bgColor"] for i in (0, LOG_STOPS // 2, LOG_STOPS - 1)]
    assert data["results"]["op2"]["value"] == 30.0 and math.isclose(stops[1], (3 * 10**0.25 - 3) / 297, abs_tol=1e-6)


def test_graph_of_a_model_from_the_command_line(tmp_path):
    """`opscope graph MODEL -o DIR --json`: the graph alone (no run, no node data), as JSON; an
    earlier export's node data, of another graph, is gone."""
    (tmp_path / "g" / "node_data").mkdir(parents=True)
    (tmp_path / "g" / "node_data" / "density.lhs.json").write_text("{}")
    proc = cli("graph", "digits", "-o", str(tmp_path / "g"), "--json")
    assert proc.returncode == 0, proc.stderr
    written = json.loads(proc.stdout)
    assert (written["nodes"], written["edges"], written["sites"], written["graphs"]) == (20, 19, 2, ["main"])
    assert written["run"] is None and written["node_data"] == [] and not any((tmp_path / "g" / "node_data").iterdir())
    assert json.loads((tmp_path / "g" / "graph.json").read_text())["label"] == written["model"]
    assert "opscope graph: graph: 20 nodes, 19 edges, 2 sites" in proc.stderr


def test_graph_refuses_bad_folders_in_one_line(tmp_path, exported):
    run, _, _ = exported
    (tmp_path / "empty").mkdir()
    with pytest.raises(opscope.OpscopeError, match="holds no sketches.csv: give a profile run folder or a model"):
        opscope.graph(tmp_path / "empty", tmp_path / "g")
    (tmp_path / "file").write_text("")
    with pytest.raises(opscope.OpscopeError, match="is a file: give a folder for the graph"):
        opscope.graph(run, tmp_path / "file")
    bare = tmp_path / "bare"
    bare.mkdir()
    (bare / "sketches.csv").write_text((run.out_dir / "sketches.csv").read_text())
    proc = cli("graph", str(bare), "-o", str(tmp_path / "g"))
    assert proc.returncode == 1 and proc.stderr.strip().splitlines() == [
        f"opscope: error: {bare} does not say which model it profiled (no run.json source): "
        "give the model, e.g. `opscope graph RUN --model model.onnx`"
    ]


def test_view_without_model_explorer_names_the_extra(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "model_explorer", None)  # import fails as if not installed
    proc = cli("view", str(tmp_path), "--no-browser")
    assert proc.returncode == 1
    assert proc.stderr == (
        "opscope: error: opscope view needs Model Explorer (the viewer extra, model_explorer is missing): "
        "pip install 'opscope[viewer]'\n"
    )


def test_model_explorer_dataclasses_read_both_files_back(exported):
    """Model Explorer's own builder classes (`graph_builder`, `node_data_builder`) hold every field
    we write, with the types they declare (dacite, strict: no unknown key), and write it back the same."""
    pytest.importorskip("model_explorer", reason="Model Explorer, the viewer extra (pip install 'opscope[viewer]')")
    from dataclasses import asdict

    import dacite
    from model_explorer import graph_builder, node_data_builder
    from model_explorer.utils import remove_none

    _, export, _ = exported
    strict = dacite.Config(strict=True)
    graph = json.loads(export.graph.read_text())
    collection = dacite.from_dict(graph_builder.GraphCollection, graph, config=strict)
    back = remove_none(asdict(collection))
    assert back.pop("graphSorting") == "node_count_desc" and back == graph
    for path in export.node_data.values():
        data = json.loads(path.read_text())
        model = node_data_builder.ModelNodeData(
            {g: dacite.from_dict(node_data_builder.GraphNodeData, d, config=strict) for g, d in data.items()}
        )
        written = json.loads(model.to_json_string())
        assert all(written[g][k] == v for g, d in data.items() for k, v in d.items()), path.name


def _shown_in_chromium(address: str, export) -> None:
    """Model Explorer's own page, in headless Chromium, loads our graph and lists every overlay; the
    only request leaving the machine is the page's own web font (which fails offline, harmlessly)."""
    chromium = shutil.which("chromium")
    if chromium is None:
        pytest.skip("no chromium here (.ci/run installs Debian's)")
    sync_playwright = pytest.importorskip("playwright.sync_api").sync_playwright
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        requests: list[str] = []
        page.on("request", lambda r: requests.append(r.url))
        page.goto(address)
        page.wait_for_function("document.body.innerText.includes('NODE DATA PROVIDERS')", timeout=60_000)
        page.wait_for_function(
            f"document.body.innerText.split('\\n').filter(l => l.trim()).length > {len(export.node_data)}"
        )
        text = page.evaluate("document.body.innerText")
        keep(page, "model-explorer")
        browser.close()
    assert "main" in text and "op node count" in text
    assert all(title in text for title in export.node_data), [t for t in export.node_data if t not in text]
    outside = {urllib.parse.urlparse(u).hostname for u in requests} - {"127.0.0.1"}
    assert outside <= {"fonts.gstatic.com"}, outside


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _get(url: str) -> str:
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # 127.0.0.1, never a proxy
    with opener.open(url, timeout=5) as r:
        return r.read().decode()


def test_view_serves_the_graph_and_node_data_on_localhost(exported):
    """`opscope view DIR --no-browser` starts Model Explorer on 127.0.0.1: its health check answers,
    its address loads our graph and every node-data file, its file endpoint (what the page's
    JSON loader reads them through) serves them as written, and its page in headless Chromium
    shows the graph with every overlay listed."""
    pytest.importorskip("model_explorer", reason="Model Explorer, the viewer extra (pip install 'opscope[viewer]')")
    _, export, _ = exported
    port = _free_port()
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    argv = [sys.executable, "-m", "opscope", "view", str(export.out_dir), "--no-browser", "--port", str(port)]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline, health = time.monotonic() + 60, None
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                health = _get(f"{base}/check_health")
                break
            except OSError:
                time.sleep(0.25)
        assert health == "model_explorer_ok", proc.poll()
        address = next(line for line in proc.stdout if line.startswith(base))
        data = json.loads(urllib.parse.unquote(urllib.parse.urlparse(address.strip()).query.removeprefix("data=")))
        graph = str(export.graph.resolve())
        assert data["models"] == [{"url": graph}]
        assert sorted(data["nodeData"]) == sorted(str(p.resolve()) for p in export.node_data.values())
        adapters = {e["id"] for e in json.loads(_get(f"{base}/api/v1/get_extensions"))}
        assert "builtin_json" in adapters  # the loader the page opens a .json graph with
        for path in [graph, *data["nodeData"]]:
            served = json.loads(_get(f"{base}/api/v1/read_text_file?path={urllib.parse.quote(path)}"))
            assert served == {"content": Path(path).read_text()}
        assert "<app-root" in _get(f"{base}/")
        _shown_in_chromium(address.strip(), export)
    finally:
        proc.terminate()
        proc.wait(timeout=30)
