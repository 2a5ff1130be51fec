"""Per-dispatch times from IREE's own dispatch benchmarks (`opscope.run.dispatch_timing`).

Times are measurements, never asserted beyond being positive and finite; what is checked is
that every dispatch the static per-dispatch view knows is timed under the same name.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from linalg_cases import ADD_REGION

import opscope
from opscope.analysis.dispatch import analyze_dispatches
from opscope.errors import OpscopeError
from opscope.models.demo import mlp_module
from opscope.run.dispatch_timing import _dispatch_name, time_dispatches
from opscope.run.targets import runnable_targets


def test_every_static_dispatch_is_timed_under_its_name():
    module = mlp_module(2, 32, 16)
    said = []
    times = time_dispatches(module, "llvm-cpu", batch=20, repetitions=1, progress=said.append)
    names = [t.name for t in times]
    static = [d.name for d in analyze_dispatches(module).dispatches]
    assert static and set(static) <= set(names)
    assert all(t.us > 0 and math.isfinite(t.us) and t.repetitions == 1 for t in times)
    assert len(said) == len(times) and said[0].startswith(f"dispatch 1/{len(times)}: ")


def test_dispatch_names_are_the_flow_executables():
    assert _dispatch_name("module_main_dispatch_3_embedded_elf_x86_64_benchmark") == "main_dispatch_3"
    assert _dispatch_name("module__encoding_0_embedded_elf_x86_64_benchmark") == "_encoding_0"
    assert _dispatch_name("module_forward_dispatch_12_vulkan_spirv_fb_benchmark") == "forward_dispatch_12"


@pytest.mark.skipif("cuda" in runnable_targets(), reason="cuda runs here")
def test_a_target_that_cannot_run_here_is_refused_in_one_line():
    with pytest.raises(OpscopeError, match="cannot run here"):
        time_dispatches(mlp_module(1, 8, 4), "cuda")


def test_encoding_dispatches_are_counted_per_call_from_the_stream_ir():
    """Three 64x64 weights passed as arguments: IREE re-lays each out on every call with one
    shared `_encoding_N` executable (3 calls), and the activations once (1 call)."""
    timed = time_dispatches(mlp_module(3, 64, 32), repetitions=1)
    encodings = sorted(t.calls for t in timed if t.name.startswith("_encoding_"))
    assert encodings == [1, 3]
    assert all(t.calls is None for t in timed if not t.name.startswith("_encoding_"))  # the static view has those


# Attention's head transpose feeding a batch_matmul: with data tiling IREE 3.13 fuses the transpose
# into the operand's pack, and cannot rebuild that dispatch's benchmark from its own dump ("failed to
# build pass pipeline"); GPT-2, Llama and MiniLM all have such a dispatch, convolutions too.
HEAD_TRANSPOSE = """func.func @main(%a: tensor<2x16x4x32xf32>, %b: tensor<8x32x16xf32>) -> tensor<8x16x16xf32> {
  %e = tensor.empty() : tensor<2x4x16x32xf32>
  %t = linalg.transpose ins(%a : tensor<2x16x4x32xf32>) outs(%e : tensor<2x4x16x32xf32>) permutation = [0, 2, 1, 3]
  %c = tensor.collapse_shape %t [[0, 1], [2], [3]] : tensor<2x4x16x32xf32> into tensor<8x16x32xf32>
  %z = arith.constant 0.0 : f32
  %o = tensor.empty() : tensor<8x16x16xf32>
  %f = linalg.fill ins(%z : f32) outs(%o : tensor<8x16x16xf32>) -> tensor<8x16x16xf32>
  %r = linalg.batch_matmul ins(%c, %b : tensor<8x16x32xf32>, tensor<8x32x16xf32>)
         outs(%f : tensor<8x16x16xf32>) -> tensor<8x16x16xf32>
  return %r : tensor<8x16x16xf32>
}"""


def test_a_dispatch_whose_configuration_does_not_rebuild_is_timed_configured_anew():
    import numpy as np

    from opscope.act.timing import time_model

    rng = np.random.default_rng(0)
    args = [rng.standard_normal(s).astype(np.float32) for s in ((2, 16, 4, 32), (8, 32, 16))]
    report = time_model(HEAD_TRANSPOSE, args, repetitions=1, peak_gbps=10.0)
    assert len(report.dispatches) == 3 and report.untimed == []
    assert all(d.us > 0 and math.isfinite(d.us) for d in report.dispatches)
    rebuilt = [d for d in report.dispatches if d.rebuilt]
    assert [d.name for d in rebuilt] == ["main_dispatch_0"]
    assert (
        "failed to build pass pipeline" in rebuilt[0].rebuilt and "configures the dispatch anew" in rebuilt[0].rebuilt
    )
    assert report.dispatch_ms == sum((d.calls or 1) * d.us for d in report.dispatches) / 1e3
    text = opscope.render(report)
    assert "rebuilt: 1 dispatch whose benchmark IREE's own dump did not compile as written" in text
    assert "  main_dispatch_0: " in text and "not timed" not in text
    row = report.to_dict()["dispatches"][[d.name for d in report.dispatches].index("main_dispatch_0")]
    assert row["us"] > 0 and "failed to build pass pipeline" in row["rebuilt"]


BIAS = np.arange(16, dtype=np.float32) * 0.25 - 1
# A constant the dispatch inlines, held as a dense_resource blob: IREE 3.13's dump refers to the blob
# without holding it ("resource does not exist"), as with a convolution's bias in a torch export.
RESOURCE_BIAS = f"""func.func @main(%x: tensor<4x16xf32>) -> tensor<4x16xf32> {{
  %b = arith.constant dense_resource<bias> : tensor<16xf32>
  %e = tensor.empty() : tensor<4x16xf32>
  %r = linalg.generic {{indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (j)>,
                        affine_map<(i, j) -> (i, j)>], iterator_types = ["parallel", "parallel"]}}
      ins(%x, %b : tensor<4x16xf32>, tensor<16xf32>) outs(%e : tensor<4x16xf32>){ADD_REGION} -> tensor<4x16xf32>
  return %r : tensor<4x16xf32>
}}
{{-#
  dialect_resources: {{ builtin: {{ bias: "0x04000000{BIAS.tobytes().hex().upper()}" }} }}
#-}}"""


def test_a_constant_blob_the_dump_leaves_out_is_copied_in_from_the_module():
    (timed,) = time_dispatches(RESOURCE_BIAS, batch=10, repetitions=1)
    assert timed.us > 0 and math.isfinite(timed.us)
    assert timed.rebuilt == "1 constant blob copied in from the module" and timed.untimed is None


def test_a_dispatch_that_does_not_rebuild_is_reported_untimed_with_why(monkeypatch):
    """When no rebuild compiles, the dispatch is listed untimed with IREE's error; the rest is timed."""
    from opscope.run import dispatch_timing
    from opscope.run.tools import ToolFailed

    def refuse(path, text, vmfb, blobs):
        raise ToolFailed(f"compiling {path.name}", f"{path.name}:3:4: error: cannot lower this")

    monkeypatch.setattr(dispatch_timing, "_rebuild", refuse)
    (timed,) = time_dispatches(RESOURCE_BIAS, batch=10, repetitions=1)
    assert timed.us is None and timed.repetitions == 0
    assert timed.untimed.endswith("_benchmark.mlir:3:4: error: cannot lower this")


def test_untimed_dispatches_are_listed_with_their_reason_and_left_out_of_the_sum():
    from opscope.act.timing import TimedDispatch, TimingReport

    report = TimingReport(
        "m",
        "llvm-cpu",
        10.0,
        [
            TimedDispatch("main_dispatch_0", 1, None, 10, 10, None, untimed="x.mlir:1:1: error: no"),
            TimedDispatch("main_dispatch_1", 2, 3.0, 10, 10, None),
        ],
        call_ms=1.0,
    )
    assert report.dispatch_ms == 0.006 and [d.name for d in report.untimed] == ["main_dispatch_0"]
    text = opscope.render(report)
    assert "not timed: 1 dispatch whose benchmark IREE could not rebuild from its own dump" in text
    assert "  main_dispatch_0: x.mlir:1:1: error: no" in text
    assert report.to_dict()["dispatches"][0]["untimed"] == "x.mlir:1:1: error: no"


def test_strip_configuration_removes_every_chosen_configuration_and_nothing_else():
    from opscope.run.dispatch_timing import strip_configuration

    text = (
        "func.func @f() attributes {translation_info = #iree_codegen.translation_info<pipeline = "
        "#iree_cpu.pipeline<DoubleTilingExpert>>} {\n"
        "  %4 = linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>]} ins(%2 : t) outs(%3 : t) attrs =  "
        "{lowering_config = #iree_cpu.lowering_config<distribution = [2, 16], vector_common_parallel = [1, 16]>} {\n"
        "  %p = linalg.pack %4 into %5 {lowering_config = #iree_gpu.lowering_config<{mma_kind = "
        "#iree_gpu.mma_layout<MFMA_F32_16x16x4_F32>, workgroup = [1, 2]}>, keep = 1 : i64} : t -> t\n"
        "  %q = linalg.pack %4 into %5 {lowering_config = #iree_cpu.lowering_config<vector_common_parallel = [1]>} : t -> t\n"
    )
    got = strip_configuration(text)
    assert "translation_info" not in got and "lowering_config" not in got
    assert got == (
        "func.func @f() {\n"
        "  %4 = linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>]} ins(%2 : t) outs(%3 : t) {\n"
        "  %p = linalg.pack %4 into %5 {keep = 1 : i64} : t -> t\n"
        "  %q = linalg.pack %4 into %5 : t -> t\n"
    )
