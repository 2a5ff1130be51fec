"""The model zoo and its real inputs: names, extras, the digits and MiniLM entries, the text corpus."""

from __future__ import annotations

import re
import subprocess
import sys

import numpy as np
import pytest

from opscope.errors import OpscopeError
from opscope.models import corpus, zoo
from opscope.models.corpus import sentences
from opscope.models.zoo import EXTRA_MODULES, MINILM_BATCH, MINILM_TOKENS, ZOO, get_entry


def test_zoo_names_and_extras():
    assert list(ZOO) == ["digits", "minilm", "gpt2-tiny", "llama-tiny", "mixtral-tiny"]
    for name, entry in ZOO.items():
        assert entry.name == name and entry.description
        assert entry.extra is None or entry.extra in EXTRA_MODULES
    assert [e.extra for e in ZOO.values()] == ["digits", "torch", "torch", "torch", "torch"]


def test_unknown_name_lists_the_valid_ones():
    with pytest.raises(OpscopeError) as e:
        get_entry("resnet")
    assert str(e.value) == "no zoo model 'resnet' (choose one of: digits, minilm, gpt2-tiny, llama-tiny, mixtral-tiny)"


def test_missing_extra_is_one_line(monkeypatch):
    monkeypatch.setitem(EXTRA_MODULES, "torch", ("opscope_no_such_module",))
    with pytest.raises(OpscopeError) as e:
        get_entry("minilm").build(1)
    assert str(e.value) == "minilm needs the torch extra: pip install 'opscope[torch]'"


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
    assert [s.name for s in sites] == [s.name for s in find_sites(parse_module(source))]
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
    assert {(s.name, "rhs") for s in sites if "proj" in s.name or "c_attn" in s.name} <= stationary  # weights
    assert result.rows > 0 and (tmp_path / "report.md").exists()
