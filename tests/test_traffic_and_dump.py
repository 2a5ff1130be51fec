"""The reference's `traffic_split` (weight / io / fusible bytes) and its `opscope-graph` edge-list dump.

* traffic: the reference's own case, x[4,384]·w[384,8] + b[8], exactly (its test's numbers);
  a weight read by two ops streams twice; a splat constant moves nothing; a dynamic tensor is
  counted apart; `opscope shapes` prints and serializes it.
* dump: any model's graph written (`opscope flow --dump`) and read back is the same graph (labels
  and inputs), mined to the same cones; a dump in the reference's own vocabulary (`MatMul`,
  `Relu`) is mined; a malformed dump is one line naming the file and the line.
"""

from __future__ import annotations

import json

import pytest

import opscope
from opscope.analysis.cones import mine_cones
from opscope.analysis.graph_dump import dump_text, read_dump
from opscope.analysis.traffic import traffic_split
from opscope.cli import main
from opscope.errors import OpscopeError
from opscope.ir.loading import new_context, parse_module
from opscope.ir.opgraph import build_graph
from opscope.models.demo import analysis_module

W = "[" + ", ".join("[" + ", ".join(f"{(i * 8 + j) % 7 - 3}.0" for j in range(8)) + "]" for i in range(384)) + "]"
LINEAR = f"""
func.func @main(%x: tensor<4x384xf32>) -> tensor<4x8xf32> {{
  %w = arith.constant dense<{W}> : tensor<384x8xf32>
  %b = arith.constant dense<[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0]> : tensor<8xf32>
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<4x8xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<4x8xf32>) -> tensor<4x8xf32>
  %m = linalg.matmul ins(%x, %w : tensor<4x384xf32>, tensor<384x8xf32>) outs(%z : tensor<4x8xf32>) -> tensor<4x8xf32>
  %y = linalg.generic {{indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (j)>, affine_map<(i, j) -> (i, j)>],
                       iterator_types = ["parallel", "parallel"]}}
      ins(%m, %b : tensor<4x8xf32>, tensor<8xf32>) outs(%e : tensor<4x8xf32>) {{
    ^bb0(%v: f32, %c: f32, %o: f32):
      %r = arith.addf %v, %c : f32
      linalg.yield %r : f32
  }} -> tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}}
"""


def _split(text: str):
    module = parse_module(text, new_context())  # alive while the graph's values are read
    return traffic_split(build_graph(module))


def test_traffic_split_separates_weight_io_fusible():
    """The reference's test: weight = 384·8·4 + 8·4, io = 4·384·4 + 4·8·4, fusible = 4·8·4·2."""
    t = _split(LINEAR)
    assert (t.weight, t.io, t.fusible, t.unknown) == (384 * 8 * 4 + 8 * 4, 4 * 384 * 4 + 4 * 8 * 4, 4 * 8 * 4 * 2, 0)
    assert t.irreducible == t.weight + t.io and t.total == t.irreducible + t.fusible
    assert t.fusible_frac < 0.05


def test_a_shared_weight_streams_per_reader_and_a_splat_moves_nothing():
    twice = LINEAR.replace(
        "  return %y : tensor<4x8xf32>",
        "  %m2 = linalg.matmul ins(%x, %w : tensor<4x384xf32>, tensor<384x8xf32>) outs(%z : tensor<4x8xf32>) "
        "-> tensor<4x8xf32>\n  return %y, %m2 : tensor<4x8xf32>, tensor<4x8xf32>",
    ).replace("-> tensor<4x8xf32> {\n  %w", "-> (tensor<4x8xf32>, tensor<4x8xf32>) {\n  %w")
    t = _split(twice)
    assert t.weight == 2 * 384 * 8 * 4 + 8 * 4  # w read by both matmuls; the zero fill is no weight
    assert t.io == 4 * 384 * 4 + 2 * 4 * 8 * 4  # x, and both outputs


def test_shapes_reports_the_traffic(tmp_path):
    path = tmp_path / "linear.mlir"
    path.write_text(LINEAR)
    report = opscope.shapes(str(path))
    assert report.traffic == _split(LINEAR)
    text = opscope.render(report)
    assert "traffic: weights 12,320 B, inputs+outputs 6,272 B, intermediates 256 B (1.4% fusible at most)" in text
    assert json.loads(opscope.render(report, "json"))["traffic"]["fusible"] == 256


def test_a_dump_reads_back_as_the_same_graph_and_cones(tmp_path, capsys):
    module = parse_module(analysis_module("moe", 2, 16, 8), new_context())
    graph = build_graph(module)
    title, again = read_dump(dump_text(graph, "moe"), "moe.txt")
    assert title == "moe" and again.labels == graph.labels and again.inputs == graph.inputs
    mined = [(c.tree, c.count, c.score, c.kind) for c in mine_cones(graph).cones]
    assert mined and [(c.tree, c.count, c.score, c.kind) for c in mine_cones(again).cones] == mined

    path = tmp_path / "moe.txt"
    assert main(["flow", "moe", "--layers", "2", "--seq", "8", "--d-model", "16", "--dump", str(path)]) == 0
    first = capsys.readouterr().out
    assert path.read_text() == dump_text(graph, "moe")
    assert main(["flow", str(path)]) == 0
    out = capsys.readouterr().out
    assert f"note: dump {path}: moe, {len(graph)} nodes" in out and "MoE expert block" in out
    assert first.splitlines()[1].split() == out.splitlines()[2].split()  # the same best cone


def test_a_dump_in_the_references_vocabulary_is_mined(tmp_path):
    rows = ["# two linear+relu blocks", "0 in", "1 w", "2 w"]
    for i in range(2):  # x = Relu(Add(MatMul(x, w), b)), twice
        x = 0 if i == 0 else 3 + 3 * (i - 1) + 2
        rows += [f"{3 + 3 * i} MatMul {x} 1", f"{4 + 3 * i} Add {3 + 3 * i} 2", f"{5 + 3 * i} Relu {4 + 3 * i}"]
    path = tmp_path / "ref.txt"
    path.write_text("\n".join(rows) + "\n")
    report = opscope.flow(str(path), min_count=2)
    assert report.ops == 6 and report.note.startswith(f"dump {path}: two linear+relu blocks, 9 nodes")
    assert any(c.count == 2 and "MatMul" in c.tree and "Relu" in c.tree for c in report.cones)


@pytest.mark.parametrize(
    "text,words",
    [
        ("0 in\n1 matmul 0 2\n2 w\n", "bad.txt:2: node 1 (matmul) reads node 2, not one before it"),
        ("0 in\n1 matmul 0 x\n", "bad.txt:2: node inputs are node numbers (file order), got '0 x'"),
        ("# only a title\n", "bad.txt: no nodes"),
        ("0\n", "bad.txt:1: expected `idx label in0 in1 …`, got '0'"),
    ],
)
def test_a_malformed_dump_is_one_line(tmp_path, capsys, text, words):
    path = tmp_path / "bad.txt"
    path.write_text(text)
    with pytest.raises(OpscopeError, match=None) as info:
        read_dump(text, "bad.txt")
    assert str(info.value).startswith(words)
    assert main(["flow", str(path)]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert (
        len(err) == 1 and err[0].startswith(f"opscope: error: {path}:") or err[0].startswith(f"opscope: error: {path} ")
    )
