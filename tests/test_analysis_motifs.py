"""Motifs (single-consumer op chains) and dataflow cones (repeated input sub-DAGs), static only.

Hand-made graphs pin the counting rules; the demo models pin exact counts where their
structure fixes them (L layers; cones stop at the residual stream, so each block's cone
recurs once per layer, layer 0 included); tiny imported Llama and GPT-2 models show the
same blocks with the labels of a real import.
"""

from __future__ import annotations

import json
import time

import pytest
from linalg_cases import ADD_REGION, gather_region

import opscope
from opscope.analysis.cones import ConeReport, dataflow_cones, mine_cones
from opscope.analysis.motifs import MotifReport, linear_motifs, mine_motifs
from opscope.ir.loading import parse_module
from opscope.ir.opgraph import build_graph, from_edges
from opscope.models import demo

RELU = "generic<maximumf>"
ADD = "generic<addf>"
LAYERS = 6


def bias_mlp_module(layers: int, width: int = 16, tokens: int = 8) -> str:
    """The reference `opscope-motifs` graph: `layers` x relu(x·W + b), weights as globals."""
    return demo.bias_mlp_module(layers, width, tokens)


def _motif(report: MotifReport, *seq: str):
    return next(m for m in report.motifs if m.seq == seq)


def _first(report: ConeReport, kind: str):
    return next(c for c in report.cones if c.kind == kind)


# --- the counting rules, on hand-made graphs ---------------------------------------------


def test_chain_stops_at_fan_out_and_escape():
    # x -> mm -> add -> relu -> {mm2, mm3} ; mm2 -> relu2 (returned) -> add2 ; mm3 -> add2
    labels = ["in", "w", "mm", "add", "relu", "mm", "relu", "mm", "add"]
    inputs = [[], [], [0, 1], [2, 1], [3], [4, 1], [5], [4, 1], [6, 7]]
    g = from_edges(labels, inputs, escapes={6})
    r = mine_motifs(g, min_len=2, max_len=6, min_count=1)
    seqs = {m.key: m.count for m in r.motifs}
    assert seqs["mm → add → relu"] == 1  # relu has two consumers: the chain ends there
    assert "mm → add → relu → mm" not in seqs
    assert seqs["mm → relu"] == 1  # relu (node 6) escapes: its chain ends although add2 reads it
    assert "mm → relu → add" not in seqs
    assert seqs["mm → add"] == 2  # from node 2 (… → add → relu) and node 7 (mm3 → add2)


def test_motif_order_score_then_count_then_first_appearance():
    # one chain a b a b a b: "a → b" starts 3 times (score 6), "a → b → a" twice from node 1
    # and "b → a → b" twice from node 2 (both score 6, count 2): first appearance decides
    labels = ["in"] + ["a", "b"] * 3
    inputs = [[]] + [[i] for i in range(6)]
    r = mine_motifs(from_edges(labels, inputs))
    assert [(m.key, m.count, m.score) for m in r.motifs] == [
        ("a → b → a → b", 2, 8),
        ("a → b", 3, 6),
        ("a → b → a", 2, 6),
        ("b → a → b", 2, 6),
        ("b → a", 2, 4),
    ]
    assert r.to_dict() == mine_motifs(from_edges(labels, inputs)).to_dict()


def test_cones_intern_dedupe_across_depths_and_score():
    # two identical diamonds: add(mul(x, w), exp(x)). At depth 1 the add's cone is
    # add(mulf,exp) (3 ops); at depth 2 the same roots and op count, its leaves spelled out,
    # replace it in place; from depth 3 the tree no longer changes (kept once). mul(in,w)
    # and exp(in) are one-op cones: never kept.
    labels, inputs = [], []
    for _ in range(2):
        base = len(labels)
        labels += ["in", "w", "generic<mulf>", "generic<exp>", ADD]
        inputs += [[], [], [base, base + 1], [base], [base + 2, base + 3]]
    r = mine_cones(from_edges(labels, inputs), min_depth=1, max_depth=6)
    assert [(c.tree, c.depth, c.count, c.ops, c.score) for c in r.cones] == [
        (f"{ADD}(generic<mulf>(in,w),generic<exp>(in))", 2, 2, 3, 6)
    ]
    assert r.cones[0].kind == "reuse" and r.cones[0].sites == (f"{ADD}#4", f"{ADD}#9")


def _two_blocks() -> tuple[list[str], list[list[int]], list[str]]:
    """An embedding, then 2 blocks x + gelu_like(x·W + mask), the mask read by both blocks."""
    labels = ["in", "w", "gather", "in", "generic<select>", "w"]
    inputs = [[], [], [0, 1], [], [3], []]
    sites = ["ids", "table", "embed", "mask_in", "mask", "W"]
    for i, s in enumerate((2, 10)):  # the block's input: the embedding, then block 0's output
        b = len(labels)
        labels += ["matmul", ADD, "generic<tanh>", ADD, ADD]
        inputs += [[s, 5], [b, 4], [b + 1], [b + 1, b + 2], [s, b + 3]]
        sites += [f"l{i}.proj", f"l{i}.masked", f"l{i}.tanh", f"l{i}.act", f"l{i}.residual"]
    return labels, inputs, sites


def test_cones_stop_at_the_residual_stream():
    # A skip connection adds x and f(x) where a path from x to f(x) passes a contraction and
    # no earlier skip connection: l0.residual (x = the embedding) and l1.residual. Its output
    # and its skip input enter every cone as `in`, so both blocks share one tree. Not skip
    # connections: l1.masked (the mask reaches l1.proj only through block 0) and l*.act
    # (x + tanh(x), GELU-tanh's shape, has no contraction). Were any of them cut, or the
    # embedding not, the two blocks' trees would differ or lose the tanh.
    labels, inputs, sites = _two_blocks()
    r = mine_cones(from_edges(labels, inputs, sites))
    half = f"{ADD}(matmul(in,w),generic<select>(in))"
    assert [(c.tree, c.depth, c.count, c.ops) for c in r.cones] == [
        (f"{ADD}(in,{ADD}({half},generic<tanh>({half})))", 5, 2, 9)
    ]
    block = r.cones[0]
    assert block.sites == ("l0.residual", "l1.residual") and block.kind == "matmul-bias-act+residual"
    # the sub-cones of the block (l*.act, l*.masked, l*.tanh) are inside it: not listed


def test_cones_keep_only_maximal():
    # two blocks x + W2·relu(W1·x), and a third relu(W·y) outside any block
    labels, inputs = ["in", "w"], [[], []]
    for x in (0, None):
        if x is None:
            x = len(labels)
            labels.append("in")
            inputs.append([])
        b = len(labels)
        labels += ["matmul", RELU, "matmul", ADD]
        inputs += [[x, 1], [b], [b + 1, 1], [x, b + 2]]
    b = len(labels)
    labels += ["in", "matmul", RELU]
    inputs += [[], [b, 1], [b + 1]]
    graph = from_edges(labels, inputs)
    # W2·relu(W1·x) ×2 lies inside the larger block ×2: dropped. relu(W1·x) is seen 3 times,
    # more often than the block: kept. The depth-2 add(in,matmul(relu,w)) is dropped for the
    # depth-4 tree on the same roots.
    r = mine_cones(graph)
    assert [(c.tree, c.depth, c.count, c.ops, c.kind) for c in r.cones] == [
        (f"{ADD}(in,matmul({RELU}(matmul(in,w)),w))", 4, 2, 4, "matmul-bias-act+residual"),
        (f"{RELU}(matmul(in,w))", 2, 3, 2, "matmul-bias-act"),
    ]
    # At depth 2 the block's cone stops at relu, while W2·relu(W1·x) reaches W1: as many ops,
    # and deeper, but rooted inside the block (the block's root is downstream of it): dropped.
    r = mine_cones(graph, max_depth=2)
    assert [(c.tree, c.count, c.score) for c in r.cones] == [
        (f"{RELU}(matmul(in,w))", 3, 6),
        (f"{ADD}(in,matmul({RELU},w))", 2, 6),
    ]  # tie: count first


def test_cones_sharing_roots_with_a_smaller_cone_stay():
    # x + W·relu(W·x) twice and x + W·relu(exp(x)) twice: at depth 2 all four roots share
    # add(in,matmul(relu,w)) (×4); deeper the two blocks differ (×2 each). The ×4 prefix is
    # seen more often but smaller, and its roots are the blocks' own: it drops neither
    # (a post-norm model's attention and FFN residual adds look like this).
    labels, inputs = ["w"], [[]]
    for inner in ("matmul", "generic<exp>") * 2:
        x = len(labels)
        labels += ["in", inner, RELU, "matmul", ADD]
        inputs += [[], [x, 0] if inner == "matmul" else [x], [x + 1], [x + 2, 0], [x, x + 3]]
    r = mine_cones(from_edges(labels, inputs))
    assert [(c.tree, c.depth, c.count, c.score) for c in r.cones] == [
        (f"{ADD}(in,matmul({RELU},w))", 2, 4, 12),
        (f"{ADD}(in,matmul({RELU}(matmul(in,w)),w))", 4, 2, 8),
        (f"{ADD}(in,matmul({RELU}(generic<exp>(in)),w))", 4, 2, 8),
    ]


HINT_CASES = {  # one block of torch's shapes, as (label, inputs); the graph holds it twice
    # q·kᵀ * scale + mask, no softmax in the cone: attention (the scale of an act × act contraction)
    "attention": [
        ("in", []),
        ("w", []),
        ("batch_matmul", [0, 1]),
        ("batch_matmul", [0, 1]),
        ("batch_matmul", [2, 3]),
        ("generic<mulf>", [4]),
        ("in", []),
        (ADD, [5, 6]),
    ],
    # RoPE: q·cos + cat(-x2, x1)·sin (slices are transparent): attention, as the reference's `Rope`
    "rope": [
        ("in", []),
        ("w", []),
        ("batch_matmul", [0, 1]),
        ("generic<negf>", [2]),
        ("concat", [3, 2]),
        ("generic<mulf>", [4, 1]),
        ("generic<mulf>", [2, 1]),
        (ADD, [6, 5]),
    ],
    # exp(x - m) / sum(exp(x - m)) with the max past the cone: a softmax, not a centering norm
    "softmax": [
        ("in", []),
        ("in", []),
        ("generic<subf>", [0, 1]),
        ("generic<exp>", [2]),
        ("reduce<addf>", [3]),
        ("generic<divf>", [3, 4]),
    ],
    # w * (x * rsqrt(ms)), the sum reduction past the cone: a norm
    "norm": [
        ("in", []),
        ("in", []),
        ("generic<rsqrt>", [1]),
        ("generic<mulf>", [0, 2]),
        ("w", []),
        ("generic<mulf>", [4, 3]),
    ],
    # x · gather(experts, idx) * scale: a gathered weight is no activation, so no q·kᵀ
    "expert": [("in", []), ("in", []), ("w", []), ("gather", [1, 2]), ("batch_matmul", [0, 3]), ("generic<mulf>", [4])],
}


@pytest.mark.parametrize(
    ("case", "kind"),
    [("attention", "attention"), ("rope", "attention"), ("softmax", "softmax"), ("norm", "norm"), ("expert", "matmul")],
)
def test_hints_read_torch_shapes(case, kind):
    block = HINT_CASES[case]
    labels = [label for label, _ in block] * 2
    inputs = [ins for _, ins in block] + [[i + len(block) for i in ins] for _, ins in block]
    r = mine_cones(from_edges(labels, inputs))
    assert [(c.kind, c.count, c.sites[0]) for c in r.cones] == [(kind, 2, f"{block[-1][0]}#{len(block) - 1}")]


def test_one_op_cones_are_gemm_shapes_not_cones():
    # matmul(in,w) three times is a GEMM shape (`opscope shapes`), not a sub-DAG
    labels, inputs = ["w"], [[]]
    for _ in range(3):
        labels += ["in", "matmul"]
        inputs += [[], [len(labels) - 2, 0]]
    r = mine_cones(from_edges(labels, inputs), min_depth=1)
    assert r.cones == () and r.note == "no input cone of depth 1..6 repeats 2 times"


def test_options_and_hand_made_graph_are_checked():
    with pytest.raises(ValueError, match="motifs: need 1 ≤ min_len ≤ max_len"):
        mine_motifs(from_edges(["in"], [[]]), min_len=3, max_len=2)
    with pytest.raises(ValueError, match="cones: need 1 ≤ min_depth ≤ max_depth"):
        mine_cones(from_edges(["in"], [[]]), min_depth=0)
    with pytest.raises(ValueError, match="node 1 reads unknown node"):
        from_edges(["in", "mm"], [[], [5]])


# --- the graph: semantic inputs, leaves, transparent views --------------------------------

GRAPH_CASE = f"""
func.func @main(%x: tensor<4x2xf32>, %idx: tensor<4xi64>) -> tensor<4x2xf32> {{
  %cw = arith.constant dense<[[1.0, 2.0], [3.0, 4.0]]> : tensor<2x2xf32>
  %e2 = tensor.empty() : tensor<2x2xf32>
  %wt = linalg.transpose ins(%cw : tensor<2x2xf32>) outs(%e2 : tensor<2x2xf32>) permutation = [1, 0]
  %c0 = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<4x2xf32>
  %z = linalg.fill ins(%c0 : f32) outs(%e : tensor<4x2xf32>) -> tensor<4x2xf32>
  %mm = linalg.matmul ins(%x, %wt : tensor<4x2xf32>, tensor<2x2xf32>) outs(%z : tensor<4x2xf32>) -> tensor<4x2xf32>
  %ex = tensor.expand_shape %mm [[0], [1, 2]] output_shape [4, 2, 1] : tensor<4x2xf32> into tensor<4x2x1xf32>
  %co = tensor.collapse_shape %ex [[0], [1, 2]] : tensor<4x2x1xf32> into tensor<4x2xf32>
  %g = linalg.generic {{indexing_maps = [affine_map<(d0, d1) -> (d0)>, affine_map<(d0, d1) -> (d0, d1)>],
                       iterator_types = ["parallel", "parallel"]}}
      ins(%idx : tensor<4xi64>) outs(%e : tensor<4x2xf32>){gather_region("%cw", (2, 2))} -> tensor<4x2xf32>
  %s = linalg.generic {{indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>,
                                        affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]}}
      ins(%co, %g : tensor<4x2xf32>, tensor<4x2xf32>) outs(%e : tensor<4x2xf32>){ADD_REGION} -> tensor<4x2xf32>
  return %s : tensor<4x2xf32>
}}
"""


def test_graph_keeps_semantic_inputs_only():
    g = build_graph(parse_module(GRAPH_CASE))
    described = [(g.labels[n], [g.labels[i] for i in g.inputs[n]]) for n in g.ops]
    # matmul: no `fill` init, its weight transpose is one `w` leaf; the reshapes vanish;
    # the gather reads the weight through its body; the add is the returned (escaping) op
    assert described == [("matmul", ["in", "w"]), ("gather", ["in", "w"]), (ADD, ["matmul", "gather"])]
    assert g.escapes == {g.ops[-1]}


EMPTY_CASES = [
    "module {}",
    "func.func private @ext(tensor<4xf32>) -> tensor<4xf32>",
    "func.func @id(%a: tensor<4xf32>) -> tensor<4xf32> {\n  return %a : tensor<4xf32>\n}",
]


LABEL_CASE = """
func.func @main(%x: tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4xf32>) {
  %s64 = arith.constant 0.5 : f64
  %ninf = arith.constant 0xFF800000 : f32
  %z = arith.constant 0 : i64
  %e = tensor.empty() : tensor<4x8xf32>
  %scaled = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>],
                            iterator_types = ["parallel", "parallel"]}
      ins(%x : tensor<4x8xf32>) outs(%e : tensor<4x8xf32>) {
    ^bb0(%a: f32, %o: f32):
      %s = arith.truncf %s64 : f64 to f32
      %m = arith.mulf %a, %s : f32
      linalg.yield %m : f32
  } -> tensor<4x8xf32>
  %e1 = tensor.empty() : tensor<4xf32>
  %f1 = linalg.fill ins(%ninf : f32) outs(%e1 : tensor<4xf32>) -> tensor<4xf32>
  %e2 = tensor.empty() : tensor<4xi64>
  %f2 = linalg.fill ins(%z : i64) outs(%e2 : tensor<4xi64>) -> tensor<4xi64>
  %amax:2 = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0)>,
                                             affine_map<(d0, d1) -> (d0)>], iterator_types = ["parallel", "reduction"]}
      ins(%scaled : tensor<4x8xf32>) outs(%f1, %f2 : tensor<4xf32>, tensor<4xi64>) {
    ^bb0(%a: f32, %m: f32, %i: i64):
      %j = linalg.index 1 : index
      %ji = arith.index_cast %j : index to i64
      %mx = arith.maximumf %a, %m : f32
      %gt = arith.cmpf ogt, %a, %m : f32
      %ix = arith.select %gt, %ji, %i : i64
      linalg.yield %mx, %ix : f32, i64
  } -> (tensor<4xf32>, tensor<4xi64>)
  return %scaled, %amax#0 : tensor<4x8xf32>, tensor<4xf32>
}
"""


def test_labels_of_real_imports_say_what_is_computed():
    # torch's `x * scale` truncates a captured f64 scale in the body; its `amax` also yields
    # an argmax nobody reads: neither is per-element work that names the op
    g = build_graph(parse_module(LABEL_CASE))
    assert [g.labels[n] for n in g.ops] == ["generic<mulf>", "reduce<maximumf>"]


@pytest.mark.parametrize("text", EMPTY_CASES)
def test_nothing_to_mine_is_a_note_not_a_crash(text):
    module = parse_module(text)
    for report in (linear_motifs(module), dataflow_cones(module)):
        assert report.ops == 0 and report.note == "no ops with tensor results: nothing to mine"
        assert "note: no ops with tensor results" in opscope.render(report)
        assert json.loads(json.dumps(report.to_dict()))["note"] == report.note
    assert linear_motifs(module).motifs == () and dataflow_cones(module).cones == ()


def test_a_single_layer_has_ops_but_no_repeats():
    module = parse_module(demo.mlp_module(1, 8, 4))
    assert linear_motifs(module).note == "no chain of 2..6 ops repeats 2 times"
    assert dataflow_cones(module).note == "no input cone of depth 2..6 repeats 2 times"


# --- demo models -------------------------------------------------------------------------


def test_bias_mlp_top_motif_is_the_block_twice():
    # 6 x [matmul, add, relu] is one single-consumer chain of 18 ops. The block starts at
    # every layer (×L); by count × length the doubled block (×L-1, length 6) wins, then the
    # two length-5 windows starting at a matmul or an add (×L-1): the reference's 30, 25, 25.
    r = linear_motifs(parse_module(bias_mlp_module(LAYERS)))
    block = ("matmul", ADD, RELU)
    assert [(m.seq, m.count, m.score) for m in r.motifs[:3]] == [
        (block * 2, LAYERS - 1, 30),
        (block + block[:2], LAYERS - 1, 25),
        (block[1:] + block, LAYERS - 1, 25),
    ]
    assert _motif(r, *block).count == LAYERS
    assert r.motifs[0].examples == ("fc0", "fc1", "fc2", "fc3")


def test_mlp_module_top_motif_and_why_its_count_is_layers_minus_two():
    # mlp_module has no bias and no relu after its last matmul: one chain of 2L-1 ops,
    # matmul → relu ×(L-1). A window of n ops starting at a matmul fits floor((2L-1-n)/2)+1
    # times: n=5 gives L-2 (score 5(L-2) = 20), beating n=6 (L-3, 18) and n=3 (L-1, 15) for L < 8.
    r = linear_motifs(parse_module(demo.mlp_module(LAYERS, 16, 8)))
    top = r.motifs[0]
    assert (top.seq, top.count, top.score) == (("matmul", RELU) * 2 + ("matmul",), LAYERS - 2, 20)
    assert _motif(r, "matmul", RELU).count == LAYERS - 1
    # No residual stream: a depth-2j cone at fc_i needs i >= j, so it recurs L-j times with
    # 2j+1 ops; odd depths and the relu-rooted cones lie inside them. Nested chains remain.
    cones = dataflow_cones(parse_module(demo.mlp_module(LAYERS, 16, 8)))
    assert [(c.depth, c.count, c.ops, c.kind) for c in cones.cones] == [
        (6, LAYERS - 3, 7, "matmul-bias-act"),
        (4, LAYERS - 2, 5, "matmul-bias-act"),
        (2, LAYERS - 1, 3, "matmul-bias-act"),
    ]


@pytest.fixture(scope="module")
def transformer():
    return parse_module(demo.transformer_module(LAYERS, 16, 8, weights="globals"))


def test_transformer_motif_is_the_attention_chain(transformer):
    top = linear_motifs(transformer).motifs[0]
    # q → scores and k → scores each start it: 2 per layer
    assert top.seq == ("matmul", "matmul", "softmax", "matmul", "matmul", ADD) and top.count == 2 * LAYERS
    assert top.examples == ("layer0.attn.q", "layer0.attn.k", "layer1.attn.q", "layer1.attn.k")


def test_transformer_cones_attention_and_ffn_blocks(transformer):
    # Each block ends at a residual add whose skip input is the stream (`in`; layer 0's is
    # the argument x), so both blocks recur once per layer. Attention: residual(0) -> o(1)
    # -> context(2) -> softmax, v(3) -> scores(4) -> q, k(5) -> x, weights(6): 8 ops at d=6.
    # FFN: residual -> down -> relu -> up -> leaves: 4 ops, all spelled out at d=4. Their
    # sub-cones (scores, softmax, up+relu, ...) lie inside them; q/k/v alone are one-op cones.
    r = dataflow_cones(transformer)
    attn, ffn = r.cones
    assert (attn.kind, attn.count, attn.depth, attn.ops, attn.score) == ("attention", LAYERS, 6, 8, 48)
    assert attn.tree == "generic<addf>(in,matmul(matmul(softmax(matmul(matmul(in,w),matmul(in,w))),matmul(in,w)),w))"
    assert attn.sites == tuple(f"layer{i}.attn.residual" for i in range(LAYERS))
    assert (ffn.kind, ffn.count, ffn.depth, ffn.ops, ffn.score) == ("matmul-bias-act+residual", LAYERS, 4, 4, 24)
    assert ffn.tree == f"{ADD}(in,matmul({RELU}(matmul(in,w)),w))"
    assert ffn.sites == tuple(f"layer{i}.ffn.residual" for i in range(LAYERS))
    assert "FusedAttentionBlock" in attn.hint and "FusedMatMulBiasAct + residual" in ffn.hint


def test_moe_cones_routing_block():
    # Per layer: the attention block, then the MoE block ending at `moe.residual`. The MoE
    # block is deeper than 6 (residual -> combine -> weights -> exp -> mask -> top-2 ->
    # top-1 -> gate), so its depth-6 cone stops at the top-1 max: 27 ops. The combine's own
    # cone reaches one level further (30 ops) but is rooted inside the block: dropped, as are
    # the router's max and softmax. Weights are arguments here: `in`.
    layers = 4
    r = dataflow_cones(parse_module(demo.moe_module(layers, 16, 8)))
    assert [(c.kind, c.count, c.depth, c.ops) for c in r.cones] == [("moe", layers, 6, 27), ("attention", layers, 6, 8)]
    moe, attn = r.cones
    assert moe.sites == tuple(f"layer{i}.moe.residual" for i in range(layers))
    assert moe.tree.startswith(f"{ADD}(in,contract<mulf,addf>(batch_matmul(generic<mulf>(in,generic<cmpf,select>(")
    assert "fuse grouped matmul + gating" in moe.hint  # experts under the top-k mask, weighted by the router
    assert attn.sites == tuple(f"layer{i}.attn.residual" for i in range(layers))


def test_reports_render_and_serialize(transformer):
    m, c = linear_motifs(transformer), dataflow_cones(transformer)
    text = opscope.render(c, top=1, width=60)
    assert c.ops == 12 * LAYERS  # 8 matmuls, softmax, relu and 2 residual adds per layer
    assert text.splitlines()[0] == f"cones: {c.ops} ops; depth 2..6, seen ≥2 times: 2 (top 1)"
    assert text.splitlines()[1].split()[:5] == ["48", "×6", "d=6", "ops=8", "attention"]
    assert "…" in text and "sites: layer0.attn.residual, layer1.attn.residual" in text
    assert opscope.render(m, top=1).splitlines()[1].split() == [
        "72",
        "×12",
        "matmul",
        "→",
        "matmul",
        "→",
        "softmax",
        "→",
        "matmul",
        "→",
        "matmul",
        "→",
        ADD,
    ]
    assert len(json.loads(json.dumps(m.to_dict(top=3)))["motifs"]) == 3
    data = json.loads(json.dumps(c.to_dict(top=3)))  # asks for 3, there are 2
    assert [d["kind"] for d in data["cones"]] == ["attention", "matmul-bias-act+residual"]
    assert data["cones"][0]["score"] == 48 and data["cones"][0]["tree"] == c.cones[0].tree
    assert dataflow_cones(transformer).to_dict() == c.to_dict()  # deterministic


def test_analysis_is_linear_in_layers():
    """4x the layers costs about 4x the time (the best of 3 runs each), not 16x: a ratio between
    two sizes on the same machine, so a slow or busy machine does not fail it, a quadratic pass does."""

    def best_of_3(layers: int) -> tuple[float, object, object]:
        module = parse_module(demo.transformer_module(layers, 64, 16, weights="globals"))
        times = []
        for _ in range(3):
            start = time.perf_counter()
            cones, motifs = dataflow_cones(module), linear_motifs(module)
            times.append(time.perf_counter() - start)
        return min(times), cones, motifs

    small, _, _ = best_of_3(6)
    large, cones, motifs = best_of_3(24)
    assert large / small < 8.0, f"6 -> 24 layers: {small:.3f} -> {large:.3f} s ({large / small:.1f}x; linear is 4x)"
    assert [(k.kind, k.count) for k in cones.cones] == [("attention", 24), ("matmul-bias-act+residual", 24)]
    assert motifs.motifs[0].count == 2 * 24


# --- a real import -----------------------------------------------------------------------


def _import(builder: str):
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from opscope.importers.torch_fx import import_torch
    from opscope.models import huggingface

    model, kwargs = getattr(huggingface, builder)(attn_implementation="eager")
    return import_torch(model, (), example_kwargs=kwargs)


@pytest.fixture(scope="module")
def llama():
    return _import("tiny_llama")


@pytest.fixture(scope="module")
def gpt2():
    return _import("tiny_gpt2")


@pytest.mark.filterwarnings("ignore::FutureWarning")
def test_tiny_llama_attention_block_recurs_once_per_layer(llama):
    # 2 layers. The stream starts at the embedding (layer 0's skip input), so layer 0's
    # blocks match layer 1's. The attention block ends at its residual add; its depth-6 cone
    # reaches o_proj(p·v), the decomposed softmax (max, x - max, exp, sum, divide) and v_proj
    # over its RMSNorm, stopping at the mask add; q·kᵀ and RoPE are deeper.
    r = dataflow_cones(llama)
    assert [(c.kind, c.count, c.depth, c.ops) for c in r.cones] == [
        ("matmul-siblings", 11, 6, 7),
        ("attention", 4, 6, 17),
        ("attention", 2, 6, 15),
        ("matmul-bias-act+residual", 2, 6, 14),
    ]
    norm_proj, rope, attn, ffn = r.cones
    assert attn.sites == ("model.layers.0", "model.layers.1") and "FusedAttentionBlock" in attn.hint
    assert attn.tree == (
        "generic<addf>(in,batch_matmul(batch_matmul(generic<divf>(generic<exp>(generic<subf>(generic<addf>,"
        "reduce<maximumf>)),reduce<addf>(generic<exp>(generic<subf>))),batch_matmul(generic<mulf>(w,"
        "generic<mulf>(in,generic<rsqrt>)),w)),w))"
    )
    # RoPE, q·cos + rotate_half(q)·sin, for q and k of each layer: attention evidence
    assert rope.sites == (
        "model.layers.0.self_attn#4",
        "model.layers.0.self_attn#9",
        "model.layers.1.self_attn#4",
        "model.layers.1.self_attn#9",
    )
    assert "concat(generic<negf>(batch_matmul(" in rope.tree
    # SwiGLU: down(silu(gate) * up) + the stream, at the layer's second residual add; torch's
    # silu is gate * sigmoid(gate), so gate appears twice: 4 batch_matmuls (down, gate ×2, up)
    assert ffn.sites == ("model.layers.0#1", "model.layers.1#1")
    assert "generic<negf,exp,addf,divf>" in ffn.tree and ffn.tree.count("batch_matmul") == 4
    # RMSNorm -> projection: q, k, v, gate, up per layer and lm_head; every norm feeds one,
    # so the norm's own cone (×5) lies inside this one and is not listed
    assert norm_proj.tree == (
        "batch_matmul(generic<mulf>(w,generic<mulf>(in,generic<rsqrt>(generic<addf>(generic<divf>(reduce<addf>))))),w)"
    )
    layer0 = "model.layers.0."
    assert norm_proj.sites == tuple(
        layer0 + s for s in ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "mlp.gate_proj", "mlp.up_proj")
    ) + ("model.layers.1.self_attn.q_proj",)  # the first 6 of 11


@pytest.mark.filterwarnings("ignore::FutureWarning")
def test_tiny_gpt2_blocks_and_norms(gpt2):
    # 2 layers; the stream starts at wte + wpe. GPT-2's q/k/v are slices of one c_attn
    # projection (transparent), its GELU-tanh's inner x + 0.044715·x³ is no skip connection.
    r = dataflow_cones(gpt2)
    assert [(c.kind, c.count, c.depth, c.ops) for c in r.cones] == [
        ("norm", 5, 6, 10),
        ("matmul", 4, 6, 9),
        ("attention", 2, 6, 12),
        ("matmul-bias-act+residual", 2, 6, 10),
    ]
    norm, ln_proj, attn, ffn = r.cones
    assert norm.sites == (
        "transformer.h.0.ln_1#10",
        "transformer.h.0.ln_2#10",
        "transformer.h.1.ln_1#10",
        "transformer.h.1.ln_2#10",
        "transformer.ln_f#10",
    )  # ln_f feeds the tied lm_head
    assert {s.rsplit(".", 1)[-1] for s in ln_proj.sites} == {"c_attn#1", "c_fc#1"}  # LayerNorm -> linear + bias
    assert attn.sites == ("transformer.h.0", "transformer.h.1") and attn.tree.endswith(",in)")
    for label in ("batch_matmul", "generic<exp>", "reduce<addf>", "generic<divf>"):
        assert label in attn.tree
    assert ffn.sites == ("transformer.h.0#1", "transformer.h.1#1") and "generic<tanh>" in ffn.tree
    # two levels deeper the FFN cone reaches GELU's inner add (c_fc + 0.044715·c_fc³): spelled
    # out, not cut as a skip connection (it would read `in`)
    deep = _first(dataflow_cones(gpt2, max_depth=8), "matmul-bias-act+residual")
    assert deep.count == 2 and "generic<tanh>(generic<mulf>(generic<addf>(generic<addf>,generic<mulf>)))" in deep.tree


@pytest.mark.filterwarnings("ignore::FutureWarning")
def test_tiny_llama_rmsnorm_chain_recurs_per_norm(llama):
    r = linear_motifs(llama)
    norm = _motif(r, "generic<fpowi>", "reduce<addf>", "generic<divf>", ADD, "generic<rsqrt>", "generic<mulf>")
    assert norm.count == 2 * 2 + 1  # input and post-attention norm per layer, and the final norm
    assert norm.examples[0] == "model.layers.0.input_layernorm"
