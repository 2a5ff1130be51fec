"""The model zoo and its real inputs: names, extras, the digits and MiniLM entries, the text corpus."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from opscope import corpus, zoo
from opscope.corpus import sentences
from opscope.errors import OpscopeError
from opscope.zoo import EXTRA_MODULES, MINILM_BATCH, MINILM_TOKENS, ZOO, get_entry


def test_zoo_names_and_extras():
    assert list(ZOO) == ["digits", "minilm"]
    for name, entry in ZOO.items():
        assert entry.name == name and entry.description
        assert entry.extra is None or entry.extra in EXTRA_MODULES
    assert (ZOO["digits"].extra, ZOO["minilm"].extra) == ("digits", "torch")


def test_unknown_name_lists_the_valid_ones():
    with pytest.raises(OpscopeError) as e:
        get_entry("resnet")
    assert str(e.value) == "no zoo model 'resnet' (choose one of: digits, minilm)"


def test_missing_extra_is_one_line(monkeypatch):
    monkeypatch.setitem(EXTRA_MODULES, "torch", ("opscope_no_such_module",))
    with pytest.raises(OpscopeError) as e:
        get_entry("minilm").build(1)
    assert str(e.value) == "minilm needs the torch extra: pip install 'opscope[torch]'"


def test_steps_must_be_positive():
    with pytest.raises(OpscopeError, match="steps must be >= 1"):
        get_entry("digits").build(0)


def test_listing_the_zoo_imports_no_framework():
    code = "import sys, opscope.zoo; print(sorted(m for m in ('torch', 'sklearn', 'transformers') if m in sys.modules))"
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
