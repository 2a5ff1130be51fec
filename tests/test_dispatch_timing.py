"""Per-dispatch times from IREE's own dispatch benchmarks (`opscope.run.dispatch_timing`).

Times are measurements, never asserted beyond being positive and finite; what is checked is
that every dispatch the static per-dispatch view knows is timed under the same name.
"""

from __future__ import annotations

import math

import pytest

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
# build pass pipeline"); GPT-2, Llama and MiniLM all have such a dispatch.
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


def test_a_dispatch_iree_cannot_rebuild_is_reported_untimed_not_fatal():
    import numpy as np

    from opscope.act.timing import time_model

    times = time_dispatches(HEAD_TRANSPOSE, "llvm-cpu", batch=10, repetitions=1)
    untimed = [t for t in times if t.us is None]
    assert len(untimed) == 1 and "failed to build pass pipeline" in untimed[0].untimed
    assert untimed[0].name == "main_dispatch_0" and untimed[0].repetitions == 0
    assert all(t.us > 0 and math.isfinite(t.us) for t in times if t.us is not None) and len(times) == 3

    rng = np.random.default_rng(0)
    args = [rng.standard_normal(s).astype(np.float32) for s in ((2, 16, 4, 32), (8, 32, 16))]
    report = time_model(HEAD_TRANSPOSE, args, repetitions=1, peak_gbps=10.0)
    assert [d.name for d in report.untimed] == ["main_dispatch_0"]
    assert report.dispatch_ms == sum((d.calls or 1) * d.us for d in report.dispatches if d.us is not None) / 1e3
    text = report.text()
    assert "not timed: 1 dispatch whose benchmark IREE could not rebuild" in text
    assert "  main_dispatch_0: " in text and "failed to build pass pipeline" in text
    assert report.to_dict()["dispatches"][[d.name for d in report.dispatches].index("main_dispatch_0")]["us"] is None
