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
