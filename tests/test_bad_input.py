"""Bad input ends in one line that says what and where, never in a traceback or a crash.

Each case is asserted through the Python API; `test_cli.py` checks the same messages reach
the command line as one line.
"""

from __future__ import annotations

import logging

import numpy as np
import pytest
from errors import one_line

from opscope.errors import OpscopeError
from opscope.ir.loading import load_module, new_context, parse_module
from opscope.ir.manifest import Manifest
from opscope.ir.stat_config import StatConfig
from opscope.models.demo import matmul_module
from opscope.pipeline.taps import inject_matmul_stats
from opscope.pipeline.textual import parse_pipeline, run_pipeline
from opscope.run.compile import check_compilable, compile_module

MALFORMED = """func.func @main(%a: tensor<4xf32>) -> tensor<4xf32> {
  %0 = arith.addf %a, %a : tensor<4xf32>
  return %0 : tensor<5xf32>
}
"""

NO_MATMUL = """func.func @main(%a: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %0 = arith.addf %a, %a : tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}
"""

DYNAMIC = """func.func @main(%a: tensor<?x8xf32>, %b: tensor<8x3xf32>, %z: tensor<?x3xf32>) -> tensor<?x3xf32> {
  %0 = linalg.matmul ins(%a, %b : tensor<?x8xf32>, tensor<8x3xf32>) outs(%z : tensor<?x3xf32>) -> tensor<?x3xf32> loc("dyn.fc")
  return %0 : tensor<?x3xf32>
}
"""

INT_AND_FLOAT = """func.func @main(%a: tensor<4x8xi32>, %b: tensor<8x3xi32>, %z: tensor<4x3xi32>,
                %x: tensor<4x8xf32>, %w: tensor<8x3xf32>, %y: tensor<4x3xf32>) -> (tensor<4x3xi32>, tensor<4x3xf32>) {
  %0 = linalg.matmul ins(%a, %b : tensor<4x8xi32>, tensor<8x3xi32>) outs(%z : tensor<4x3xi32>) -> tensor<4x3xi32> loc("int.fc")
  %1 = linalg.matmul ins(%x, %w : tensor<4x8xf32>, tensor<8x3xf32>) outs(%y : tensor<4x3xf32>) -> tensor<4x3xf32> loc("float.fc")
  return %0, %1 : tensor<4x3xi32>, tensor<4x3xf32>
}
"""

CALLED = """func.func @helper(%a: tensor<4x8xf32>, %b: tensor<8x3xf32>, %z: tensor<4x3xf32>) -> tensor<4x3xf32> {
  %0 = linalg.matmul ins(%a, %b : tensor<4x8xf32>, tensor<8x3xf32>) outs(%z : tensor<4x3xf32>) -> tensor<4x3xf32> loc("h.fc")
  return %0 : tensor<4x3xf32>
}
func.func @main(%a: tensor<4x8xf32>, %b: tensor<8x3xf32>, %z: tensor<4x3xf32>) -> tensor<4x3xf32> {
  %0 = func.call @helper(%a, %b, %z) : (tensor<4x8xf32>, tensor<8x3xf32>, tensor<4x3xf32>) -> tensor<4x3xf32>
  return %0 : tensor<4x3xf32>
}
"""


# -- loading ---------------------------------------------------------------------------


def test_malformed_file_names_file_line_col(tmp_path):
    path = tmp_path / "bad.mlir"
    path.write_text(MALFORMED)
    with pytest.raises(OpscopeError) as info:
        load_module(path)
    assert one_line(info).startswith(f"malformed MLIR at {path}:3:10: ")
    assert "tensor<5xf32>" in str(info.value)


def test_malformed_text_names_input_line_col():
    with pytest.raises(OpscopeError) as info:
        parse_module("module {\n  func.func @main( {\n}\n", new_context(), name="model.mlir")
    assert one_line(info).startswith("malformed MLIR at model.mlir:2:")


def test_missing_file(tmp_path):
    with pytest.raises(OpscopeError) as info:
        load_module(tmp_path / "nope.mlir")
    assert one_line(info) == f"no such file: {tmp_path / 'nope.mlir'}"


def test_directory_is_not_a_file(tmp_path):
    with pytest.raises(OpscopeError, match="is a directory, not an MLIR file"):
        load_module(tmp_path)


def test_binary_garbage_is_neither_text_nor_bytecode():
    with pytest.raises(OpscopeError, match=r"model\.bin is neither MLIR text nor MLIR bytecode"):
        parse_module(b"\xff\xfe\x00\x81garbage", new_context(), name="model.bin")


def test_bytecode_round_trip_keeps_sites(tmp_path):
    from opscope.ir.loading import module_bytecode
    from opscope.ir.sites import find_sites

    path = tmp_path / "m.mlirbc"
    path.write_bytes(module_bytecode(parse_module(matmul_module(4, 8, 3, name="fc"), new_context())))
    assert [s.name for s in find_sites(load_module(path))] == ["fc"]


# -- injecting -------------------------------------------------------------------------


def test_no_matmul_is_a_note_not_a_crash(caplog):
    module = parse_module(NO_MATMUL, new_context())
    before = str(module)
    with caplog.at_level(logging.WARNING, logger="opscope"):
        module, manifest = inject_matmul_stats(module)
    assert manifest.entries == [] and manifest.sites == []
    assert manifest.num_results == manifest.num_original_results == 1
    assert str(module) == before
    records = [r for r in caplog.records if r.name == "opscope"]
    assert [r.levelno for r in records] == [logging.WARNING]
    assert "no matmul sites to tap" in records[0].getMessage()


def test_dynamic_shape_names_the_site():
    with pytest.raises(OpscopeError) as info:
        inject_matmul_stats(parse_module(DYNAMIC, new_context()))
    message = one_line(info)
    assert message.startswith("inject-matmul-stats: site 'dyn.fc' at loc(\"dyn.fc\") has a dynamic shape")
    assert "tensor<?x8xf32>" in message and "sites=<regex>" in message


def test_dynamic_site_can_be_excluded_by_regex(caplog):
    with caplog.at_level(logging.WARNING, logger="opscope"):
        _, manifest = inject_matmul_stats(parse_module(DYNAMIC, new_context()), sites="^static")
    assert manifest.entries == []


def test_an_integer_matmul_is_read_as_f32_and_said_so(caplog):
    """No float tensor stands behind an integer matmul of integer inputs: each role is sketched as
    f32 of its integers, and a warning per role says it is not a float model's tensor."""
    with caplog.at_level(logging.WARNING, logger="opscope"):
        _, manifest = inject_matmul_stats(parse_module(INT_AND_FLOAT, new_context()))
    assert [s.name for s in manifest.sites] == ["int.fc", "float.fc"]
    assert [sum(e.site == s for e in manifest.entries) for s in ("int.fc", "float.fc")] == [39, 39]
    assert manifest.num_original_results == 2
    warnings = [r.getMessage() for r in caplog.records if r.name == "opscope"]
    assert [w.split(": ", 2)[-1] for w in warnings] == [
        "lhs: f32 of its integers (no float source)",
        "rhs: f32 of its integers (no float source)",
        "out: f32 of the integer accumulator (no op of the site scales it back)",
    ]
    assert all("integer site 'int.fc' (i32, i32, i32)" in w for w in warnings)


def test_called_function_is_refused_with_advice():
    with pytest.raises(OpscopeError) as info:
        inject_matmul_stats(parse_module(CALLED, new_context()))
    assert one_line(info).startswith("lower-opscope: @helper is called by other functions")
    assert "run 'inline' before inject-matmul-stats" in str(info.value)


def test_bad_sites_regex_is_one_line():
    with pytest.raises(OpscopeError) as info:
        inject_matmul_stats(parse_module(matmul_module(4, 8, 3), new_context()), sites="[")
    assert one_line(info).startswith("inject-matmul-stats: bad 'sites' regex '['")


# -- pipelines -------------------------------------------------------------------------


def valid_options(argument: str) -> str:
    """The option list a pass's error must show: its text options, kebab-case, sorted."""
    import dataclasses

    from opscope.passes import get_pass_class

    fields = dataclasses.fields(get_pass_class(argument))
    return ", ".join(sorted(f.name.replace("_", "-") for f in fields if f.init and not f.metadata.get("api_only")))


def test_unknown_pass_option_lists_valid_options():
    assert valid_options("inject-matmul-stats") == (
        "adjacency, dequantize-codes, hist-bins, hist-max, hist-min, hist-normalize, per-channel, per-position, roles, sites"
    )
    with pytest.raises(OpscopeError) as info:
        parse_pipeline("inject-matmul-stats{bogus=1}")
    assert one_line(info) == (
        f"inject-matmul-stats: unknown option 'bogus' (valid options: {valid_options('inject-matmul-stats')})"
    )
    with pytest.raises(OpscopeError) as info:
        parse_pipeline("canonicalize,lower-opscope{packed=true}")
    assert one_line(info) == f"lower-opscope: unknown option 'packed' (valid options: {valid_options('lower-opscope')})"
    assert {"pack", "outline"} <= set(valid_options("lower-opscope").split(", "))


def test_bad_option_value_names_the_type():
    with pytest.raises(OpscopeError, match=r"inject-matmul-stats: option 'hist-bins' expects int, got 'many'"):
        parse_pipeline("inject-matmul-stats{hist-bins=many}")
    with pytest.raises(OpscopeError, match=r"lower-opscope: option 'pack' expects bool, got 'yes'"):
        parse_pipeline("lower-opscope{pack=yes}")
    with pytest.raises(OpscopeError, match=r"lower-opscope: option 'hist-counts' expects one of i32, i8, got 'i16'"):
        parse_pipeline("lower-opscope{hist-counts=i16}")
    with pytest.raises(
        OpscopeError,
        match=r"lower-opscope: option 'row-lanes' expects a lane count >= 0 "
        r"\(0: reduce rows straight\), got -1$",
    ):
        parse_pipeline("lower-opscope{row-lanes=-1}")
    with pytest.raises(OpscopeError, match=r"lower-opscope: option 'row-lanes' expects int, got 'wide'"):
        parse_pipeline("lower-opscope{row-lanes=wide}")


def test_unknown_pass_is_one_line():
    module = parse_module(NO_MATMUL, new_context())
    with pytest.raises(OpscopeError) as info:
        run_pipeline(module, "inject-matmul-stats,no-such-pass")
    assert one_line(info).startswith("unknown pass or bad pipeline element 'no-such-pass'")


def test_unbalanced_pipeline():
    with pytest.raises(OpscopeError, match="unbalanced brackets or quotes"):
        parse_pipeline("inject-matmul-stats{hist-bins=0")


# -- compiling -------------------------------------------------------------------------


def test_left_over_stat_ops_are_refused_naming_lower_opscope():
    module = parse_module(matmul_module(4, 8, 3, name="fc"), new_context())
    run_pipeline(module, "inject-matmul-stats")
    with pytest.raises(OpscopeError) as info:
        check_compilable(module)
    assert one_line(info) == ("left-over 'opscope.stat' at loc(\"fc\"): run the lower-opscope pass before compiling")
    with pytest.raises(OpscopeError, match="run the lower-opscope pass"):
        compile_module(module, "llvm-cpu")


def test_unknown_dialect_op_is_refused_before_iree():
    text = """func.func @main(%a: tensor<4xf32>) -> tensor<4xf32> {
  %0 = "foo.bar"(%a) : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}
"""
    with pytest.raises(OpscopeError) as info:
        check_compilable(parse_module(text, new_context(), name="m.mlir"))
    assert one_line(info).startswith("unknown op 'foo.bar' at ")
    assert "iree-compile cannot lower it" in str(info.value)


def test_rejected_compiler_flag_is_one_line():
    with pytest.raises(OpscopeError) as info:
        compile_module(matmul_module(2, 2, 2), "llvm-cpu", extra_flags=["--no-such-flag"], use_cache=False)
    assert one_line(info) == "iree-compile rejected the flags: Error parsing flags: option not found: no-such-flag"


def test_iree_parse_failure_is_one_line():
    with pytest.raises(OpscopeError) as info:
        compile_module("this is not mlir", "llvm-cpu", use_cache=False)
    assert one_line(info).startswith("iree-compile failed for target 'llvm-cpu': ")


# -- manifests -------------------------------------------------------------------------


def test_manifest_load_errors(tmp_path):
    with pytest.raises(OpscopeError, match="no such manifest"):
        Manifest.load(tmp_path / "missing.json")
    bad = tmp_path / "bad.json"
    bad.write_text('{"function": "main"}')
    with pytest.raises(OpscopeError, match=r"bad\.json is not an opscope manifest"):
        Manifest.load(bad)


def test_manifest_json_round_trip(tmp_path):
    _, manifest = inject_matmul_stats(parse_module(matmul_module(4, 8, 3), new_context()), StatConfig(hist_bins=4))
    manifest.flags = ["--x"]
    manifest.save(tmp_path / "m.json")
    assert Manifest.load(tmp_path / "m.json") == manifest


def test_wrong_number_of_outputs():
    _, manifest = inject_matmul_stats(parse_module(matmul_module(4, 8, 3), new_context()))
    with pytest.raises(OpscopeError, match=r"expected 4 outputs for @main, got 1"):
        manifest.values([np.zeros((4, 3), np.float32)])


def test_unknown_function_in_manifest():
    module = parse_module(matmul_module(4, 8, 3), new_context())
    with pytest.raises(OpscopeError, match="no function @nope in the module"):
        Manifest.from_module(module, "nope")


@pytest.mark.parametrize("call", ["profile", "whatif"])
def test_what_a_model_runs_on_is_checked_in_one_place_before_it_is_read(call, tmp_path):
    """A tokenizer without text, or files and text together, are refused by the API itself (so by
    every command that feeds a model) in one line, before the model is opened."""
    import opscope

    run = getattr(opscope, call)
    missing = tmp_path / "no-such-model.onnx"  # never opened: the request is refused first
    out = {"out": tmp_path / "run"} if call == "profile" else {"skip": ["x"]}
    with pytest.raises(OpscopeError, match=r"^--tokenizer \(tokenizer\) goes with --text \(text\)") as e:
        run(missing, tokenizer="tok", **out)
    one_line(e)
    with pytest.raises(OpscopeError, match=r"^give inputs or text, not both") as e:
        run(missing, inputs=[tmp_path / "x.npz"], text=["a"], **out)
    one_line(e)
