"""The mutation check's list (.ci/mutants.py) cannot rot silently: every original snippet occurs
exactly once in its file, every test it names exists, and the mutation changes the text."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _mutants_module():
    """.ci/mutants.py imported by path (it is a script, not a package module); runs nothing."""
    if "ci_mutants" not in sys.modules:
        spec = importlib.util.spec_from_file_location("ci_mutants", ROOT / ".ci" / "mutants.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules["ci_mutants"] = module  # dataclasses look their module up there
        spec.loader.exec_module(module)
    return sys.modules["ci_mutants"]


def test_every_mutant_applies_to_exactly_one_place():
    mutants = _mutants_module()
    assert len(mutants.MUTANTS) >= 17
    names = [m.name for m in mutants.MUTANTS]
    assert len(set(names)) == len(names)
    assert mutants.rotted(mutants.MUTANTS) == []
    for m in mutants.MUTANTS:
        assert m.original != m.mutated, m.name
        text = (ROOT / m.file).read_text(encoding="utf-8")
        assert text.count(m.original) == 1, m.name  # the same check, stated here
        for test in m.tests:
            path, _, name = test.partition("::")
            assert (ROOT / path).is_file(), (m.name, test)
            assert not name or f"def {name}(" in (ROOT / path).read_text(encoding="utf-8"), (m.name, test)


def test_the_issue_29_mutants_are_listed():
    names = {m.name for m in _mutants_module().MUTANTS}
    assert {
        "hll-bias-constant",
        "dado-no-search",
        "memoize-fifo",
        "skip-zero-guard-constant-false",
        "skip-zero-guard-constant-true",
        "reservoir-merge-equal-weights",
        "median-is-min",
        "quantize-ties-to-even",
    } <= names
