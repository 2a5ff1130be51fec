"""The pass registry and textual pipelines.

Every opscope pass prints back to its pipeline text and parses back to an equal pass (rule 3
of STYLE.md); no opscope argument shadows a registered MLIR/IREE pass (rule 7); every
registry entry has `lit_tests/passes/<argument>.mlir` and every such file a registry entry
(rule 9); opscope and MLIR passes interleave in one run.
"""

from __future__ import annotations

import dataclasses
import importlib
import typing
from pathlib import Path

import pytest
from iree.compiler import ir, passmanager

from opscope.errors import OpscopeError
from opscope.ir.loading import new_context, parse_module
from opscope.ir.manifest import Manifest
from opscope.models.demo import matmul_module
from opscope.passes import PASSES, get_pass_class
from opscope.pipeline.textual import Pipeline, parse_pipeline, pass_to_text, run_pipeline
from opscope.run.compile import check_compilable

REPO = Path(__file__).resolve().parent.parent
ARGUMENTS = list(PASSES)


def text_options(cls) -> list[dataclasses.Field]:
    """The options a pipeline text can set (API-only fields like `keep` excluded)."""
    return [f for f in dataclasses.fields(cls) if f.init and not f.metadata.get("api_only")]


def non_default(cls, f: dataclasses.Field):
    """A value for option `f` that differs from its default and survives printing."""
    hints = typing.get_type_hints(cls)
    ty, default = hints[f.name], f.default
    if ty is bool:
        return not default
    if ty is int:
        return default + 3
    if ty is float:
        return default + 0.25
    if ty is str:
        return "layer[0-9]+ fc,q"  # a space and a comma: printing must quote it
    if typing.get_origin(ty) is typing.Literal:
        return next(c for c in typing.get_args(ty) if c != default)
    raise AssertionError(f"{cls.__name__}.{f.name}: no non-default value for type {ty}")


def test_registry_is_alphabetical_and_lazy():
    assert ARGUMENTS == sorted(ARGUMENTS)
    assert ARGUMENTS, "no passes registered"


@pytest.mark.parametrize("argument", ARGUMENTS)
def test_pass_class_matches_its_argument_and_file(argument):
    cls = get_pass_class(argument)
    assert cls.name == argument
    assert dataclasses.is_dataclass(cls) and cls.__dataclass_params__.frozen
    module = importlib.import_module(cls.__module__)
    assert Path(module.__file__).stem == argument.replace("-", "_")
    assert module.__doc__ and module.__doc__.startswith(f"`{argument}`")
    assert (cls.__doc__ or "").strip(), f"{cls.__name__} needs a docstring (its first line is the description)"


@pytest.mark.parametrize("argument", ARGUMENTS)
def test_default_pass_prints_as_its_bare_argument(argument):
    p = get_pass_class(argument)()
    assert pass_to_text(p) == argument
    assert parse_pipeline(argument).elements == (p,)


@pytest.mark.parametrize("argument", ARGUMENTS)
def test_every_option_round_trips_alone(argument):
    cls = get_pass_class(argument)
    for f in text_options(cls):
        p = cls(**{f.name: non_default(cls, f)})
        text = pass_to_text(p)
        assert text.startswith(argument + "{" + f.name.replace("_", "-") + "=")
        (back,) = parse_pipeline(text).elements
        assert back == p and pass_to_text(back) == text


@pytest.mark.parametrize("argument", ARGUMENTS)
def test_all_options_round_trip_together(argument):
    cls = get_pass_class(argument)
    p = cls(**{f.name: non_default(cls, f) for f in text_options(cls)})
    text = pass_to_text(p)
    (back,) = parse_pipeline(text).elements
    assert back == p
    assert str(parse_pipeline(text)) == text == str(Pipeline((p,)))
    assert parse_pipeline(f"builtin.module({text})").elements == (p,)


@pytest.mark.parametrize(
    "regex", ["a b", "x,y", "fc{2}", "(q|k)", "layer[0-9]+", "x]", r"\[", "it's", 'say "hi"', "a=b", r"back\slash"]
)
def test_string_options_round_trip_whatever_they_hold(regex):
    p = get_pass_class("inject-matmul-stats")(sites=regex)
    text = pass_to_text(p)
    assert parse_pipeline(text).elements == (p,), text
    assert parse_pipeline(f"cse,{text},cse").elements == ("cse", p, "cse"), text


def test_option_spellings_and_separators():
    cls = get_pass_class("inject-matmul-stats")
    want = cls(hist_bins=0, per_channel=False)
    for text in (
        "inject-matmul-stats{hist-bins=0 per-channel=false}",
        "inject-matmul-stats{hist-bins=0,per-channel=false}",
        "inject-matmul-stats{hist_bins=0 per_channel=0}",
        "inject-matmul-stats{ hist-bins=0  per-channel=false }",
    ):
        assert parse_pipeline(text).elements == (want,), text
    assert parse_pipeline("lower-opscope{pack}").elements == (get_pass_class("lower-opscope")(pack=True),)


def test_mixed_pipeline_prints_back_verbatim():
    text = 'canonicalize,inject-matmul-stats{hist-bins=0 sites="fc 1"},func.func(cse),lower-opscope{pack=false},cse'
    pipeline = parse_pipeline(text)
    assert [type(e).__name__ for e in pipeline.elements] == ["str", "InjectMatmulStats", "str", "LowerOpscope", "str"]
    assert pipeline.elements[1].sites == "fc 1"
    assert str(pipeline) == text
    assert str(parse_pipeline(str(pipeline))) == text


def test_mixed_pipeline_runs_opscope_and_mlir_passes_together():
    module = parse_module(matmul_module(4, 8, 3, name="fc"), new_context())
    run_pipeline(module, "canonicalize,inject-matmul-stats{hist-bins=0},cse,lower-opscope{pack=false},canonicalize")
    manifest = Manifest.from_module(module)
    assert len(manifest.entries) == 36 and manifest.num_results == 37
    check_compilable(module)  # no opscope op is left, only result attributes


def test_pass_errors_surface_as_the_pass_own_error():
    dynamic = """func.func @main(%a: tensor<?x8xf32>, %b: tensor<8x3xf32>, %z: tensor<?x3xf32>) -> tensor<?x3xf32> {
  %0 = linalg.matmul ins(%a, %b : tensor<?x8xf32>, tensor<8x3xf32>) outs(%z : tensor<?x3xf32>) -> tensor<?x3xf32> loc("d")
  return %0 : tensor<?x3xf32>
}
"""
    with pytest.raises(OpscopeError, match=r"^inject-matmul-stats: site 'd'"):
        run_pipeline(parse_module(dynamic, new_context()), "canonicalize,inject-matmul-stats,lower-opscope")


# -- no collision with MLIR/IREE passes ------------------------------------------------


def test_plain_pass_manager_knows_mlir_and_iree_passes():
    """The control for the collision test: the check would see a registered name."""
    with ir.Context():
        for name in ("canonicalize", "cse", "inline", "iree-util-drop-compiler-hints"):
            passmanager.PassManager.parse(f"builtin.module({name})")


@pytest.mark.parametrize("argument", ARGUMENTS)
def test_no_opscope_argument_is_a_registered_mlir_or_iree_pass(argument):
    """`parse_pipeline` routes our names first, so ask IREE's own pass manager directly."""
    with ir.Context():
        with pytest.raises(ValueError, match=f"'{argument}' does not refer to a registered pass"):
            passmanager.PassManager.parse(f"builtin.module({argument})")
        pm = passmanager.PassManager("builtin.module")
        with pytest.raises(ValueError, match="does not refer to a registered pass"):
            pm.add(argument)


# -- lit tests -------------------------------------------------------------------------


def test_every_pass_has_a_lit_test_and_every_lit_test_a_pass():
    lit_dir = REPO / "lit_tests" / "passes"
    files = {p.stem for p in lit_dir.glob("*.mlir")}
    missing = sorted(set(ARGUMENTS) - files)
    orphans = sorted(files - set(ARGUMENTS))
    assert not missing, f"passes without lit_tests/passes/<argument>.mlir: {missing}"
    assert not orphans, f"lit_tests/passes files naming no registered pass: {orphans}"


@pytest.mark.parametrize("argument", ARGUMENTS)
def test_lit_test_first_line_runs_its_pass(argument):
    path = REPO / "lit_tests" / "passes" / f"{argument}.mlir"
    if not path.exists():
        pytest.fail(f"missing {path.relative_to(REPO)}")
    first = path.read_text().splitlines()[0]
    # a pass with a required option (externalize-weights' path) shows first that it says so
    assert first.startswith((f"// RUN: opscope-opt %s -p {argument}", f"// RUN: not opscope-opt %s -p {argument} ")), (
        first
    )
    assert "filecheck %s" in first.lower()


def test_option_lit_tests_name_registered_passes():
    """lit_tests/passes/options/<argument>-<option>.mlir: one option of a pass, tested apart."""
    for path in (REPO / "lit_tests" / "passes" / "options").glob("*.mlir"):
        assert any(path.stem.startswith(a + "-") for a in ARGUMENTS), (
            f"{path.relative_to(REPO)} names no registered pass"
        )


def test_invalid_lit_tests_name_registered_passes():
    invalid = REPO / "lit_tests" / "passes" / "invalid"
    for path in invalid.glob("*.mlir"):
        assert path.stem in PASSES, f"{path.relative_to(REPO)} names no registered pass"
