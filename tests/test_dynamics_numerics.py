"""Inference-dynamics taps against PyTorch and numpy: attention, routing and residual statistics, end to end.

Each model is imported, tapped with `opscope.inject(module, taps=...)`, compiled, run once, and its
statistics (`manifest.values`) are compared with what PyTorch's own forward computes (its attention
probabilities, forward hooks on the residual blocks and on the router) or, for hand-written IR, with
numpy. The device reduces in f32, the references in float64: each comparison states its tolerance
and the error measured here. What cannot be tapped is skipped with a warning, never an error.
"""

from __future__ import annotations

import logging
from operator import itemgetter

import numpy as np
import pytest
from families import forward_hooked

import opscope
from opscope.models.zoo import missing_extra, missing_message

INPUTS = ("input_ids", "attention_mask")
ATTN_STATS = ("attn_qmax", "attn_krecv", "attn_entropy")
# Lavapipe's SPIR-V has no 64-bit integers (IREE 3.13 fails to legalize the i64 vectors of the token
# ids): on vulkan-spirv the token ids and mask are demoted to i32, as plain iree-compile needs too.
DEMOTE_I64 = "--iree-input-demote-i64-to-i32"

needs_torch = pytest.mark.skipif(missing_extra("torch"), reason=missing_message("this test", "torch"))
needs_smollm2 = pytest.mark.skipif(missing_extra("smollm2"), reason=missing_message("SmolLM2", "smollm2"))


def tap(model, kwargs: dict, taps: str):
    """`model` imported on `kwargs` and tapped for `taps`: (module, manifest)."""
    from opscope.importers.torch_fx import import_torch

    return opscope.inject(import_torch(model, (), example_kwargs=kwargs), taps=taps)


def runner(tapped, target: str = "llvm-cpu"):
    """A tapped module compiled for `target`: a function of the model's kwargs giving {(site, role, stat): values}."""
    module, manifest = tapped
    demote = target == "vulkan-spirv"
    loaded = opscope.load(opscope.compile(module, target, extra_flags=[DEMOTE_I64] if demote else []))

    def run(kwargs: dict) -> dict:
        args = [kwargs[k].numpy().astype(np.int32 if demote else np.int64) for k in INPUTS]
        return manifest.values(loaded.invoke(manifest.function, *args))

    return run


def attention_reference(probs) -> dict:
    """attn_qmax, attn_krecv, attn_entropy of probabilities [..., S_q, S_k] in float64, in the kernel's layout."""
    p = np.asarray(probs, np.float64)
    g = p.reshape(-1, *p.shape[-2:])
    plogp = np.where(g > 0, g * np.log(np.where(g > 0, g, 1.0)), 0.0)
    return {"attn_qmax": g.max(-1).ravel(), "attn_krecv": g.sum(-2).ravel(), "attn_entropy": -plogp.sum(-1).ravel()}


def residual_reference(h, d) -> dict:
    """Σh², Σd² and the mean over rows of cos(h, h + d) in float64, with h and d viewed as rows [R, D]."""
    h = np.asarray(h, np.float64).reshape(-1, h.shape[-1])
    d = np.asarray(d, np.float64).reshape(h.shape)
    s = h + d
    cos = (h * s).sum(1) / (np.linalg.norm(h, axis=1) * np.linalg.norm(s, axis=1) + 1e-12)
    return {"res_a_sumsq": (h * h).sum(), "res_b_sumsq": (d * d).sum(), "res_cos": cos.mean()}


def hooked_residuals(model, kwargs: dict, streams: dict, blocks: dict) -> dict:
    """{site: residual_reference(h, d)} of one forward, h from a pre-hook and d from a hook: site -> (module, pick)."""
    seen = {}

    def record(key, pick):
        return lambda *hook: seen.update({key: pick(hook[-1])})  # last: a pre-hook's args, a hook's output

    handles = [m.register_forward_pre_hook(record((site, "h"), pick)) for site, (m, pick) in streams.items()]
    handles += [m.register_forward_hook(record((site, "d"), pick)) for site, (m, pick) in blocks.items()]
    forward_hooked(model, kwargs, handles)
    return {site: residual_reference(seen[site, "h"], seen[site, "d"]) for site in streams}


def llama_residuals(model, kwargs: dict) -> dict:
    """Residual references of a Llama's `model.layers.<i>.attn` / `.ffn`: h is a norm's input, d self_attn's / mlp's."""
    streams, blocks = {}, {}
    for i, layer in enumerate(model.model.layers):
        attn, ffn = f"model.layers.{i}.attn", f"model.layers.{i}.ffn"
        streams[attn], blocks[attn] = (layer.input_layernorm, itemgetter(0)), (layer.self_attn, itemgetter(0))
        streams[ffn], blocks[ffn] = (layer.post_attention_layernorm, itemgetter(0)), (layer.mlp, lambda o: o)
    return hooked_residuals(model, kwargs, streams, blocks)


def assert_residuals_equal(values: dict, reference: dict) -> None:
    """The tapped residual sites are `reference`'s; Σh², Σd² within relative 1e-4, 1 − res_cos within 1e-5."""
    assert {site for site, role, _ in values if role == "residual"} == set(reference)
    for site, want in reference.items():
        got = {stat: values[site, "residual", stat][0] for stat in want}
        np.testing.assert_allclose(got["res_a_sumsq"], want["res_a_sumsq"], rtol=1e-4, err_msg=site)
        np.testing.assert_allclose(got["res_b_sumsq"], want["res_b_sumsq"], rtol=1e-4, err_msg=site)
        np.testing.assert_allclose(1 - got["res_cos"], 1 - want["res_cos"], rtol=0, atol=1e-5, err_msg=site)


@pytest.fixture(scope="module")
def minilm():
    """The trained MiniLM-L6 (eager) on the 2 sample sentences of 16 tokens: (model, kwargs, llvm-cpu statistics)."""
    from opscope.models import huggingface

    model, kwargs = huggingface.minilm(seq=16)
    return model, kwargs, runner(tap(model, kwargs, "attention,residual"))(kwargs)


@pytest.fixture(scope="module")
def mixtral():
    """Tiny Mixtral (2 layers, 4 experts, top-2), all families tapped: (model, kwargs, tapped, llvm-cpu stats)."""
    from opscope.models import huggingface

    model, kwargs = huggingface.tiny_mixtral()
    tapped = tap(model, kwargs, "attention,routing,residual")
    return model, kwargs, tapped, runner(tapped)(kwargs)


@needs_torch
def test_minilm_attention_stats_equal_pytorch_probabilities(minilm):
    """MiniLM's per-query peak and entropy and per-key mass, per layer and head, equal PyTorch's probabilities."""
    import torch

    model, kwargs, values = minilm
    with torch.no_grad():
        attentions = model(**kwargs, output_attentions=True).attentions
    assert len(attentions) == 6 and attentions[0].shape == (2, 12, 16, 16)
    for i, probs in enumerate(attentions):
        site = f"encoder.layer.{i}.attention.self.softmax"
        for stat, want in attention_reference(probs).items():
            # f32 softmax reduced in another order: measured max |Δ| 3.5e-6 (qmax), 8.5e-6 (krecv, sums up to 11),
            # 7.7e-6 (entropy)
            np.testing.assert_allclose(values[site, "attn", stat], want, rtol=0, atol=3e-5, err_msg=f"{site} {stat}")


@needs_torch
def test_minilm_residual_stats_equal_pytorch_hooks(minilm):
    """Σh², Σd² and block influence of MiniLM's 12 residual adds equal hooks on BertSelfOutput / BertOutput."""
    model, kwargs, values = minilm
    streams, blocks = {}, {}
    for i, layer in enumerate(model.encoder.layer):
        for site, output in (
            (f"encoder.layer.{i}.attention.output.attn", layer.attention.output),
            (f"encoder.layer.{i}.output.ffn", layer.output),
        ):
            streams[site] = (output, itemgetter(1))  # forward(hidden_states, input_tensor): the stream is input_tensor
            blocks[site] = (output.dropout, lambda o: o)
    # measured: relative |Δ| 1.7e-6 on the sums, |Δ| 1e-7 on 1 − res_cos
    assert_residuals_equal(values, hooked_residuals(model, kwargs, streams, blocks))


@needs_smollm2
def test_smollm2_residual_stats_equal_pytorch_hooks():
    """SmolLM2's first 2 layers (~15 s to load): Σh², Σd² and block influence equal hooks on each decoder layer."""
    from opscope.models import huggingface

    model, kwargs = huggingface.smollm2(layers=2, seq=16)
    values = runner(tap(model, kwargs, "residual"))(kwargs)
    # measured: relative |Δ| 1e-6 on the sums (Σh² reaches 2.6e5 in layer 1), |Δ| 9e-8 on 1 − res_cos
    assert_residuals_equal(values, llama_residuals(model, kwargs))


@needs_torch
def test_mixtral_routing_equals_pytorch_router(mixtral):
    """Expert counts equal torch.bincount of the router's top-k; gate top-1, top-2 and entropy equal its softmax's."""
    import torch

    model, kwargs, _, values = mixtral
    logits, layers = {}, model.model.layers
    handles = [
        layer.mlp.gate.register_forward_hook(lambda m, a, out, i=i: logits.update({i: out[0]}))
        for i, layer in enumerate(layers)
    ]
    forward_hooked(model, kwargs, handles)
    k, experts = model.config.num_experts_per_tok, model.config.num_local_experts
    assert len(logits) == len(layers) == 2
    for i, lg in logits.items():
        site = f"model.layers.{i}.mlp.gate"
        load = torch.bincount(torch.topk(lg, k, dim=-1).indices.ravel(), minlength=experts).numpy()
        assert load.sum() == lg.shape[0] * k
        np.testing.assert_array_equal(values[site + ".topk", "route", "route_load"], load)  # counts: exact
        probs = torch.softmax(lg.double(), dim=-1)
        top = torch.topk(probs, 2, dim=-1).values.numpy()
        # f32 softmax of 4 logits against float64: measured max |Δ| 3e-8 (top-1, top-2), 9e-8 (entropy)
        np.testing.assert_allclose(values[site + ".softmax", "gate", "attn_qmax"], top[:, 0], rtol=0, atol=1e-5)
        np.testing.assert_allclose(values[site + ".softmax", "gate", "gate_top2"], top[:, 1], rtol=0, atol=1e-5)
        np.testing.assert_allclose(
            values[site + ".softmax", "gate", "attn_entropy"],
            attention_reference(probs)["attn_entropy"],
            rtol=0,
            atol=1e-5,
        )


@needs_torch
def test_mixtral_gate_key_mass_equals_pytorch(mixtral, runnable_target):
    """The mass each expert receives from the router softmax (gate attn_krecv) equals PyTorch's, in 5 calls: the
    softmax is sorted in place by the top-k after it is tapped (an outlined kernel read the sorted rows in IREE
    3.13, every call on vulkan-spirv, 1 % on llvm-cpu; lower-opscope inlines kernels of such tensors)."""
    import torch

    model, kwargs, tapped, _ = mixtral
    with torch.no_grad():
        router_logits = model(**kwargs, output_router_logits=True).router_logits
    run = runner(tapped, runnable_target)
    for _ in range(5):
        values = run(kwargs)
        for i, lg in enumerate(router_logits):
            want = attention_reference(torch.softmax(lg.double(), dim=-1))["attn_krecv"]
            got = values[f"model.layers.{i}.mlp.gate.softmax", "gate", "attn_krecv"]
            np.testing.assert_allclose(got, want, rtol=0, atol=1e-5)  # sums of 8 probabilities: 2e-7 when right


@needs_torch
def test_vulkan_dynamics_equal_llvm_cpu(mixtral, vulkan):
    """Tiny Mixtral's attention, gate, routing and residual statistics on vulkan-spirv equal llvm-cpu's."""
    _, kwargs, tapped, want = mixtral
    got = runner(tapped, vulkan)(kwargs)
    assert got.keys() == want.keys()
    assert {role for _, role, _ in want} == {"attn", "gate", "route", "residual"}
    for key in want:
        # f32 on both, reduced in other orders: measured max |Δ| 2.4e-7, counts equal
        np.testing.assert_allclose(got[key], want[key], rtol=0, atol=1e-5, err_msg=str(key))


@needs_torch
def test_fused_attention_stats_equal_eager_softmax():
    """Tiny Llama's fused (SDPA) attention stats equal eager's, and eager's equal PyTorch's, with 3 padded tokens."""
    import torch

    from opscope.models import huggingface

    eager, kwargs = huggingface.tiny_llama(batch=2)
    sdpa, _ = huggingface.tiny_llama(batch=2, attn_implementation="sdpa")
    assert all(torch.equal(a, b) for a, b in zip(eager.state_dict().values(), sdpa.state_dict().values()))
    kwargs["attention_mask"][1, -3:] = 0
    layers = {}
    for kind, model in (("softmax", eager), ("attention", sdpa)):
        tapped = tap(model, kwargs, "attention")
        values = runner(tapped)(kwargs)
        sites = tapped[1].sites  # in layer order
        assert [s.kind for s in sites] == [kind, kind]
        layers[kind] = [{stat: values[s.name, "attn", stat] for stat in ATTN_STATS} for s in sites]
    with torch.no_grad():
        attentions = eager(**kwargs, output_attentions=True).attentions
    for probs, fused, unfused in zip(attentions, layers["attention"], layers["softmax"]):
        for stat, want in attention_reference(probs).items():
            # f32 against float64: measured max |Δ| 3e-7; shadow against eager: measured max |Δ| 1.2e-7
            np.testing.assert_allclose(unfused[stat], want, rtol=0, atol=1e-5, err_msg=stat)
            np.testing.assert_allclose(fused[stat], unfused[stat], rtol=0, atol=1e-5, err_msg=stat)


B, H, SQ, SK, D = 2, 2, 8, 6, 4  # batch, heads, queries, keys, head dim of the hand-written attention
NP_FLOATS = {"f16": np.float16, "f32": np.float32}


def attention_module(elem: str, mask: str | None) -> str:
    """An `elem` attention of q [B,H,SQ,D], k, v [B,H,SK,D], scale 0.5, and maybe a [B,SQ,SK] `mask` all heads share."""

    def t(*shape: int, e: str = elem) -> str:
        return "tensor<" + "x".join(map(str, shape)) + f"x{e}>"

    results = ["(b, h, m, k1)", "(b, h, k2, k1)", "(b, h, k2, n)", "()"] + (["(b, m, k2)"] if mask else [])
    maps = ", ".join(f"affine_map<(b, h, m, n, k1, k2) -> {r}>" for r in results + ["(b, h, m, n)"])
    qkv = [t(B, H, SQ, D), t(B, H, SK, D), t(B, H, SK, D)]
    operands = ["%q", "%k", "%v", "%scale"] + (["%mask"] if mask else [])
    types = qkv + [elem] + ([t(B, SQ, SK, e=mask)] if mask else [])
    params = ", ".join(f"{v}: {ty}" for v, ty in zip(operands, types) if v != "%scale")
    out, ins = t(B, H, SQ, D), f"{', '.join(operands)} : {', '.join(types)}"
    return f"""func.func @main({params}) -> {out} {{
  %scale = arith.constant 0.5 : {elem}
  %e = tensor.empty() : {out}
  %o = iree_linalg_ext.attention <indexing_maps = [{maps}]> ins({ins}) outs(%e : {out}) {{
  ^bb0(%score: f32):
    iree_linalg_ext.yield %score : f32
  }} -> {out} loc("enc")
  return %o : {out}
}}"""


@pytest.mark.parametrize(
    "elem,mask",
    [("f16", None), ("f32", "f32"), ("f16", "f16"), ("f32", "i1")],
    ids=["f16", "f32-additive-mask", "f16-additive-mask", "f32-boolean-mask"],
)
def test_fused_attention_shadow_equals_numpy(elem, mask):
    """A hand-written attention's shadow gives numpy's softmax(Q·Kᵀ·scale + mask) stats (a causal mask, + noise)."""
    rng = np.random.default_rng(0)
    q = rng.standard_normal((B, H, SQ, D)).astype(NP_FLOATS[elem])
    k, v = (rng.standard_normal((B, H, SK, D)).astype(NP_FLOATS[elem]) for _ in range(2))
    scores = np.einsum("bhqd,bhkd->bhqk", q.astype(np.float64), k.astype(np.float64)) * 0.5
    causal = np.broadcast_to(np.arange(SK) <= np.arange(SQ)[:, None], (B, SQ, SK))
    args = [q, k, v]
    if mask == "i1":
        args.append(causal.copy())
        scores = np.where(causal[:, None], scores, -np.inf)
    elif mask:
        additive = (rng.standard_normal((B, SQ, SK)) + np.where(causal, 0.0, -np.inf)).astype(NP_FLOATS[mask])
        args.append(additive)
        scores = scores + additive.astype(np.float64)[:, None]
    probs = np.exp(scores - scores.max(-1, keepdims=True))
    probs /= probs.sum(-1, keepdims=True)
    module, manifest = opscope.inject(attention_module(elem, mask), taps="attention")
    assert [(s.name, s.kind, s.batch, s.m, s.k, s.n) for s in manifest.sites] == [
        ("enc.attention", "attention", B * H, SQ, H, SK)
    ]
    values = manifest.values(opscope.load(opscope.compile(module)).invoke(manifest.function, *args))
    for stat, want in attention_reference(probs).items():
        # the shadow extends f16 to f32 and the reference reads the same rounded inputs: measured max |Δ| 3.5e-7
        np.testing.assert_allclose(values["enc.attention", "attn", stat], want, rtol=0, atol=1e-5, err_msg=stat)


ODD_AXIS_SOFTMAX = """func.func @main(%s: tensor<2x8x8xf32>) -> tensor<2x8x8xf32> {
  %z = tensor.empty() : tensor<2x8x8xf32>
  %p = linalg.softmax dimension(1) ins(%s : tensor<2x8x8xf32>) outs(%z : tensor<2x8x8xf32>) -> tensor<2x8x8xf32> loc("odd.softmax")
  return %p : tensor<2x8x8xf32>
}"""
UNSLICED_SORT = """func.func @main(%v: tensor<8x4xf32>, %i: tensor<8x4xi64>) -> tensor<8x4xi64> {
  %r:2 = iree_linalg_ext.sort dimension(1) outs(%v, %i : tensor<8x4xf32>, tensor<8x4xi64>) {
  ^bb0(%a: f32, %b: f32, %c: i64, %e: i64):
    %o = arith.cmpf ogt, %a, %b : f32
    iree_linalg_ext.yield %o : i1
  } -> tensor<8x4xf32>, tensor<8x4xi64> loc("plain.sort")
  return %r#1 : tensor<8x4xi64>
}"""
DYNAMIC_TOPK = """func.func @main(%d: tensor<?x4xf32>) -> tensor<?x2xi32> {
  %c0 = arith.constant 0 : index
  %n = tensor.dim %d, %c0 : tensor<?x4xf32>
  %v0 = tensor.empty(%n) : tensor<?x2xf32>
  %i0 = tensor.empty(%n) : tensor<?x2xi32>
  %t:2 = iree_linalg_ext.topk dimension(1) ins(%d : tensor<?x4xf32>) outs(%v0, %i0 : tensor<?x2xf32>, tensor<?x2xi32>) {
  ^bb0(%a: f32, %b: f32):
    %c = arith.cmpf ogt, %a, %b : f32
    iree_linalg_ext.yield %c : i1
  } -> tensor<?x2xf32>, tensor<?x2xi32> loc("dyn.topk")
  return %t#1 : tensor<?x2xi32>
}"""
DYNAMIC_SOFTMAX = """func.func @main(%s: tensor<?x8xf32>) -> tensor<?x8xf32> {
  %c0 = arith.constant 0 : index
  %n = tensor.dim %s, %c0 : tensor<?x8xf32>
  %z = tensor.empty(%n) : tensor<?x8xf32>
  %p = linalg.softmax dimension(1) ins(%s : tensor<?x8xf32>) outs(%z : tensor<?x8xf32>) -> tensor<?x8xf32> loc("dyn.softmax")
  return %p : tensor<?x8xf32>
}"""
SCORE_MODIFIER = """func.func @main(%q: tensor<4x8x16xf32>, %k: tensor<4x8x16xf32>, %v: tensor<4x8x16xf32>) -> tensor<4x8x16xf32> {
  %scale = arith.constant 0.25 : f32
  %e = tensor.empty() : tensor<4x8x16xf32>
  %o = iree_linalg_ext.attention <indexing_maps = [affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d3)>,
      affine_map<(d0, d1, d2, d3, d4) -> (d0, d4, d3)>, affine_map<(d0, d1, d2, d3, d4) -> (d0, d4, d2)>,
      affine_map<(d0, d1, d2, d3, d4) -> ()>, affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2)>]>
      ins(%q, %k, %v, %scale : tensor<4x8x16xf32>, tensor<4x8x16xf32>, tensor<4x8x16xf32>, f32) outs(%e : tensor<4x8x16xf32>) {
  ^bb0(%score: f32):
    %t = math.tanh %score : f32
    iree_linalg_ext.yield %t : f32
  } -> tensor<4x8x16xf32> loc("capped")
  return %o : tensor<4x8x16xf32>
}"""
DYNAMIC_RESIDUAL = """func.func @main(%x: tensor<?x16xf32>, %w: tensor<16x16xf32>) -> tensor<?x16xf32> {
  %c0 = arith.constant 0 : index
  %n = tensor.dim %x, %c0 : tensor<?x16xf32>
  %z = tensor.empty(%n) : tensor<?x16xf32>
  %zero = arith.constant 0.0 : f32
  %zf = linalg.fill ins(%zero : f32) outs(%z : tensor<?x16xf32>) -> tensor<?x16xf32>
  %y = linalg.matmul ins(%x, %w : tensor<?x16xf32>, tensor<16x16xf32>) outs(%zf : tensor<?x16xf32>) -> tensor<?x16xf32> loc("blk.fc")
  %r = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>],
      iterator_types = ["parallel", "parallel"]} ins(%x, %y : tensor<?x16xf32>, tensor<?x16xf32>) outs(%z : tensor<?x16xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %s = arith.addf %a, %b : f32
    linalg.yield %s : f32
  } -> tensor<?x16xf32> loc("blk")
  return %r : tensor<?x16xf32>
}"""


@pytest.mark.parametrize(
    "source,note",
    [
        (
            ODD_AXIS_SOFTMAX,
            "inject-infer-stats: softmax at odd.softmax skipped: it normalizes axis 1, not the last (2)",
        ),
        (
            UNSLICED_SORT,
            "inject-infer-stats: sort at plain.sort skipped: no slice of its first k indices (not a top-k)",
        ),
        (
            DYNAMIC_TOPK,
            (
                "inject-infer-stats: top-k at dyn.topk skipped: its indices tensor<?x2xi32> have a dynamic shape "
                "(stat kernels are static-shaped: specialize the shapes first)"
            ),
        ),
        (
            DYNAMIC_SOFTMAX,
            (
                "inject-infer-stats: softmax at dyn.softmax skipped: its probabilities tensor<?x8xf32> are "
                "not a static float tensor of rank >= 2"
            ),
        ),
        (
            SCORE_MODIFIER,
            (
                "inject-attention-stats: attention 'capped.attention' at loc(\"capped\") skipped: its region "
                "modifies the scores (not replayed)"
            ),
        ),
        (
            DYNAMIC_RESIDUAL,
            (
                "inject-residual-stats: residual add at blk skipped: operands tensor<?x16xf32> and "
                "tensor<?x16xf32> are not two static float tensors of the result's type"
            ),
        ),
    ],
    ids=[
        "softmax-over-axis-1",
        "sort-not-sliced",
        "dynamic-topk",
        "dynamic-softmax",
        "score-modifier",
        "dynamic-residual",
    ],
)
def test_untappable_site_is_skipped_with_a_note(caplog, source, note):
    """Dynamics taps of IR they cannot tap: no error, no site, and one warning naming the op and why."""
    with caplog.at_level(logging.WARNING, logger="opscope"):
        _, manifest = opscope.inject(source, taps="attention,routing,residual")
    assert manifest.sites == [] and manifest.num_results == manifest.num_original_results
    assert [r.getMessage() for r in caplog.records if r.name == "opscope" and r.levelno == logging.WARNING] == [note]
