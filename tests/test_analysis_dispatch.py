"""The per-dispatch view: the cost model attributed to the dispatches IREE forms."""

from __future__ import annotations

import json

import pytest
from errors import one_line

import opscope
from opscope.analysis.cost import analyze
from opscope.analysis.dispatch import analyze_dispatches
from opscope.errors import OpscopeError
from opscope.ir.loading import parse_module
from opscope.models.demo import transformer_module

D, SEQ, FFN = 64, 16, 256  # transformer_module's d_model, tokens, and its 4·d FFN width
F32 = 4


@pytest.fixture(scope="module")
def two_layers():
    return transformer_module(2, D, SEQ)


@pytest.fixture(scope="module", params=["llvm-cpu", "vulkan-spirv"])
def report(request, two_layers):
    return analyze_dispatches(two_layers, request.param)


def _by_source(report, source):
    (d,) = [d for d in report.dispatches if source in d.sources]
    return d


def test_dispatch_totals_equal_the_op_cost_model(report, two_layers):
    """Fusion moves FLOPs between dispatches, never adds or drops any."""
    assert report.total("flops") == analyze(parse_module(two_layers)).total_flops == 3_291_648
    assert sum(d.calls for d in report.dispatches) >= 2 * 9  # every layer's dispatches run


def test_ffn_up_projection_fuses_its_activation(report):
    d = _by_source(report, "layer0.ffn.act")
    assert "layer0.ffn.up" in d.sources and d.calls == 2  # one executable serves both layers
    assert d.flops == 2 * SEQ * D * FFN + SEQ * FFN  # the matmul, then one maximumf per element
    assert d.bytes_external == (SEQ * D + D * FFN + SEQ * FFN) * F32  # x and W in, relu(x·W) out
    assert d.bytes_internal >= SEQ * FFN * F32  # the matmul result is never written out and read back
    assert d.intensity == pytest.approx(d.flops / d.bytes_external)
    assert d.intensity_unfused < d.intensity


def test_residual_adds_fuse_into_the_projections_before_them(report):
    for add in ("layer0.attn.residual", "layer0.ffn.residual"):
        d = _by_source(report, add)
        assert any(lbl in ("matmul", "contract<mulf,addf>") for lbl in d.ops) and "generic<addf>" in d.ops


def test_renderers(report):
    text = opscope.render(report, top=3, ridge=10)
    assert text.splitlines()[0].startswith(f"{len(report.dispatches)} dispatches (")
    assert "layer0.ffn.up" in text and "memory-bound" in text
    doc = json.loads(json.dumps(report.to_dict(ridge=10)))
    assert doc["flops"] == report.total("flops") and len(doc["per_dispatch"]) == len(report.dispatches)
    assert {
        "name",
        "calls",
        "ops",
        "sources",
        "flops",
        "bytes_external",
        "bytes_internal",
        "intensity",
        "class",
    } <= set(doc["per_dispatch"][0])


def test_unknown_op_is_refused_in_one_line():
    text = """func.func @main(%a: tensor<4xf32>) -> tensor<4xf32> {
  %0 = "mystery.op"(%a) : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}"""
    with pytest.raises(OpscopeError, match="mystery.op") as e:
        analyze_dispatches(parse_module(text))
    one_line(e)


def test_unknown_target_is_one_line(two_layers):
    with pytest.raises(OpscopeError, match="unknown target"):
        analyze_dispatches(two_layers, "tpu")
