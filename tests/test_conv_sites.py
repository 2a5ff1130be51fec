"""Convolutions are sites: the im2col GEMM's M/K/N and exact FLOPs, each operand's channel
dims, and per-channel sketches that read those channels (NCHW's dim 1), equal to numpy."""

from __future__ import annotations

import numpy as np
import pytest
from linalg_cases import conv

import opscope
from opscope.ir.flops import op_flops
from opscope.ir.loading import new_context, parse_module
from opscope.ir.sites import find_sites
from opscope.ir.stat_config import StatConfig, plan_stats
from opscope.run.host_stats import host_stats

# Four layouts: NCHW with zero padding, depthwise NCHW, grouped NGCHW (2 groups), NHWC.
CONVS = f"""
func.func @main(%x: tensor<2x3x6x6xf32>, %w: tensor<8x3x3x3xf32>, %dw: tensor<8x3x3xf32>,
                %gw: tensor<2x4x4x1x1xf32>, %hx: tensor<1x5x5x4xf32>, %hw: tensor<3x3x4x6xf32>)
    -> (tensor<2x8x6x6xf32>, tensor<2x8x4x4xf32>, tensor<2x2x4x4x4xf32>, tensor<1x3x3x6xf32>) {{
  %zero = arith.constant 0.0 : f32
  %padded = tensor.pad %x low[0, 0, 1, 1] high[0, 0, 1, 1] {{
  ^bb0(%i: index, %j: index, %k: index, %l: index):
    tensor.yield %zero : f32
  }} : tensor<2x3x6x6xf32> to tensor<2x3x8x8xf32>
  {conv("%c", "conv_2d_nchw_fchw", "%padded", "%w", ((2, 3, 8, 8), (8, 3, 3, 3), (2, 8, 6, 6)), "conv")}
  {conv("%d", "depthwise_conv_2d_nchw_chw", "%c", "%dw", ((2, 8, 6, 6), (8, 3, 3), (2, 8, 4, 4)), "dw")}
  %g_in = tensor.expand_shape %d [[0], [1, 2], [3], [4]] output_shape [2, 2, 4, 4, 4] : tensor<2x8x4x4xf32> into tensor<2x2x4x4x4xf32>
  {conv("%g", "conv_2d_ngchw_gfchw", "%g_in", "%gw", ((2, 2, 4, 4, 4), (2, 4, 4, 1, 1), (2, 2, 4, 4, 4)), "grouped")}
  {conv("%h", "conv_2d_nhwc_hwcf", "%hx", "%hw", ((1, 5, 5, 4), (3, 3, 4, 6), (1, 3, 3, 6)), "nhwc")}
  return %c, %d, %g, %h : tensor<2x8x6x6xf32>, tensor<2x8x4x4xf32>, tensor<2x2x4x4x4xf32>, tensor<1x3x3x6xf32>
}}
"""
# name -> (kind, batch, M, K, N, channel dims per role)
EXPECTED = {
    "conv": ("conv_2d_nchw_fchw", 1, 2 * 6 * 6, 3 * 3 * 3, 8, {"lhs": (1,), "rhs": (0,), "out": (1,)}),
    "dw": ("depthwise_conv_2d_nchw_chw", 8, 2 * 4 * 4, 3 * 3, 1, {"lhs": (1,), "rhs": (0,), "out": (1,)}),
    # the lhs is the layer's input before its split into groups ([2, 8, 4, 4]: its channels one dim)
    "grouped": ("conv_2d_ngchw_gfchw", 2, 2 * 4 * 4, 4, 4, {"lhs": (1,), "rhs": (0, 1), "out": (1, 2)}),
    "nhwc": ("conv_2d_nhwc_hwcf", 1, 3 * 3, 3 * 3 * 4, 6, {}),
}


def test_conv_sites_are_im2col_gemms():
    module = parse_module(CONVS, new_context())  # kept alive: the sites' ops live in it
    sites = {s.name: s for s in find_sites(module)}
    assert list(sites) == list(EXPECTED)
    for name, (kind, b, m, k, n, channels) in EXPECTED.items():
        s = sites[name]
        assert (s.kind, s.batch, s.m, s.k, s.n, s.channels) == (kind, b, m, k, n, channels), name
        assert s.flops == 2 * b * m * k * n == op_flops(s.op), name  # the domain × (mul + add) of its body
    assert sites["conv"].shape("lhs") == (2, 3, 6, 6)  # the input before its zero padding
    assert sites["grouped"].shape("lhs") == (2, 8, 4, 4)  # the input before its split into groups


def test_channel_view_plans_channels_and_positions():
    """chan_maxabs has one entry per channel, pos_sumsq one per pixel; no adjacency above rank 2."""
    plan = {r.kind: r.length for r in plan_stats((2, 3, 6, 6), StatConfig(), (1,))}
    assert plan["chan_maxabs"] == 3 and plan["pos_sumsq"] == 2 * 6 * 6 and "adj_sumsq" not in plan
    grouped = {r.kind: r.length for r in plan_stats((2, 2, 4, 4, 4), StatConfig(), (1, 2))}
    assert grouped["chan_maxabs"] == 8 and grouped["pos_sumsq"] == 2 * 4 * 4


def test_host_reference_reads_channels_last():
    x = np.arange(2 * 3 * 2 * 2, dtype=np.float32).reshape(2, 3, 2, 2)
    stats = host_stats(x, channel_dims=(1,))
    assert np.array_equal(stats["chan_maxabs"], np.abs(x).max(axis=(0, 2, 3)))
    assert np.array_equal(stats["pos_sumsq"], np.square(np.moveaxis(x, 1, -1)).sum(axis=-1).reshape(-1))


def test_conv_sketches_match_numpy(modules, runnable_target):
    """Every sketch of every conv operand equals host_stats on the same tensor read by its
    channel dims (the results are the device's own conv outputs); an input channel of
    zeros shows as a zero channel (`zchan`), the conv analogue of a dead input feature."""
    built = modules.build(CONVS, runnable_target)
    rng = np.random.default_rng(3)
    x = rng.standard_normal((2, 3, 6, 6)).astype(np.float32)
    x[:, 2] = 0.0  # a dead input channel
    w = rng.standard_normal((8, 3, 3, 3)).astype(np.float32)
    dw = rng.standard_normal((8, 3, 3)).astype(np.float32)
    gw = rng.standard_normal((2, 4, 4, 1, 1)).astype(np.float32)
    hx = rng.standard_normal((1, 5, 5, 4)).astype(np.float32)
    hw = rng.standard_normal((3, 3, 4, 6)).astype(np.float32)
    outs, values = built.stats(x, w, dw, gw, hx, hw)
    c, d, g, h = outs
    tensors = {
        "conv": {"lhs": x, "rhs": w, "out": c},
        "dw": {"lhs": c, "rhs": dw, "out": d},
        "grouped": {"lhs": d, "rhs": gw, "out": g},  # the layer's input, before its split into groups
        "nhwc": {"lhs": hx, "rhs": hw, "out": h},
    }
    for site, roles in tensors.items():
        channels = EXPECTED[site][5]
        for role, tensor in roles.items():
            want = host_stats(tensor, channel_dims=channels.get(role))
            for stat, ref in want.items():
                got = values[(site, role, stat)]
                if stat in ("nnz", "hist"):
                    assert np.array_equal(got, ref), (site, role, stat)
                else:
                    np.testing.assert_allclose(got, ref, rtol=2e-5, atol=1e-5, err_msg=f"{site} {role} {stat}")
    assert values[("conv", "lhs", "chan_maxabs")][2] == 0.0


def test_a_torch_cnn_taps_every_conv_and_linear(tmp_path):
    """A PyTorch CNN (plain, depthwise and grouped convs, a linear head): every conv and the
    linear are sites named by module path, and the profile is bit-identical."""
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)

    class CNN(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = torch.nn.Conv2d(3, 8, 3, padding=1)
            self.dw = torch.nn.Conv2d(8, 8, 3, padding=1, groups=8)
            self.grp = torch.nn.Conv2d(8, 8, 1, groups=2)
            self.fc = torch.nn.Linear(8, 10)

        def forward(self, x):
            x = torch.relu(self.conv1(x))
            x = self.grp(self.dw(x))
            return self.fc(x.mean((2, 3)))

    module = opscope.load_model(CNN(), example_args=[torch.zeros(2, 3, 16, 16)])
    assert [(s.name, s.kind) for s in find_sites(module)] == [
        ("conv1", "conv_2d_nchw_fchw"),
        ("dw", "depthwise_conv_2d_nchw_chw"),
        ("grp", "conv_2d_ngchw_gfchw"),
        ("fc", "matmul"),
    ]
    run = opscope.profile(module, steps=2, out=tmp_path / "run")
    assert run.parity == 0.0 and [s.name for s in run.manifest.sites] == ["conv1", "dw", "grp", "fc"]
    dead = run.report.signals.filter(run.report.signals["site"] == "dw")
    assert dead.height == 3  # lhs, rhs, out of the depthwise conv are mined


def test_pooling_is_not_a_site():
    """Max and sum pooling implement linalg's convolution interface but multiply nothing."""
    text = """
func.func @main(%x: tensor<1x4x4x2xf32>, %w: tensor<2x2xf32>, %o: tensor<1x2x2x2xf32>) -> tensor<1x2x2x2xf32> {
  %0 = linalg.pooling_nhwc_max {dilations = dense<1> : tensor<2xi64>, strides = dense<2> : tensor<2xi64>}
       ins(%x, %w : tensor<1x4x4x2xf32>, tensor<2x2xf32>) outs(%o : tensor<1x2x2x2xf32>) -> tensor<1x2x2x2xf32>
  %1 = linalg.pooling_nhwc_sum {dilations = dense<1> : tensor<2xi64>, strides = dense<2> : tensor<2xi64>}
       ins(%x, %w : tensor<1x4x4x2xf32>, tensor<2x2xf32>) outs(%0 : tensor<1x2x2x2xf32>) -> tensor<1x2x2x2xf32>
  return %1 : tensor<1x2x2x2xf32>
}
"""
    module = parse_module(text, new_context())
    assert find_sites(module) == []


PADDED_GROUPED = f"""
func.func @main(%x: tensor<1x8x8x8xf32>, %w: tensor<2x4x4x3x3xf32>) -> tensor<1x2x4x8x8xf32> {{
  %zero = arith.constant 0.0 : f32
  %padded = tensor.pad %x low[0, 0, 1, 1] high[0, 0, 1, 1] {{
  ^bb0(%i: index, %j: index, %k: index, %l: index):
    tensor.yield %zero : f32
  }} : tensor<1x8x8x8xf32> to tensor<1x8x10x10xf32>
  %g = tensor.expand_shape %padded [[0], [1, 2], [3], [4]] output_shape [1, 2, 4, 10, 10] : tensor<1x8x10x10xf32> into tensor<1x2x4x10x10xf32>
  {conv("%c", "conv_2d_ngchw_gfchw", "%g", "%w", ((1, 2, 4, 10, 10), (2, 4, 4, 3, 3), (1, 2, 4, 8, 8)), "grouped")}
  return %c : tensor<1x2x4x8x8xf32>
}}
"""


def test_a_padded_grouped_conv_reads_its_input_before_the_padding():
    """torch-mlir pads a grouped convolution's input, then splits it into groups: the site's lhs is the
    input (its zeros are not data), its channels dim 1 of that NCHW tensor."""
    module = parse_module(PADDED_GROUPED, new_context())
    (site,) = find_sites(module)
    assert site.shape("lhs") == (1, 8, 8, 8) and site.channels["lhs"] == (1,)
    assert site.channels["out"] == (1, 2) and site.flops == op_flops(site.op)
