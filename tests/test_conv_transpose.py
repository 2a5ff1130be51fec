"""A transposed convolution is a site of its own: tapped on its real input (not the zeros its
lowering spreads it with), FLOPs as PyTorch's `FlopCounterMode` counts them, and the products with
those zeros a coverage row of their own (`opscope.ir.sites`, `opscope.analysis.coverage`).

torch-mlir lowers `ConvTranspose2d(stride=2)` as a strided `tensor.insert_slice` of the input into a
zero image and a stride-1 convolution over it: before, the site read that image (76 % zeros) and
counted 3.2x PyTorch's FLOPs.
"""

from __future__ import annotations

import numpy as np
import pytest

import opscope
from opscope.models.zoo import missing_extra, missing_message

pytestmark = pytest.mark.skipif(missing_extra("torch"), reason=missing_message("this test", "torch"))


@pytest.fixture(scope="module")
def unet_up():
    """A U-Net decoder step (ConvTranspose2d stride 2, GroupNorm, Conv2d) on 1x4x5x5:
    (torch model, input, imported module, FlopCounterMode's total)."""
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    from opscope.importers.torch_fx import import_torch

    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.ConvTranspose2d(4, 8, 3, stride=2, padding=1, output_padding=1),
        torch.nn.GroupNorm(2, 8),
        torch.nn.Conv2d(8, 4, 3, padding=1),
    ).eval()
    x = torch.randn(1, 4, 5, 5)
    with torch.no_grad(), FlopCounterMode(display=False) as counter:
        model(x)
    return model, x, import_torch(model, (x,)), counter.get_total_flops()


def test_transposed_conv_is_its_own_kind_with_torch_flops(unet_up):
    from opscope.ir.sites import find_sites

    _, x, module, torch_flops = unet_up
    sites = find_sites(module)
    assert [s.kind for s in sites] == ["conv_transpose_2d_nchw_fchw", "conv_2d_nchw_fchw"]
    up = sites[0]
    assert up.shape("lhs") == tuple(x.shape)  # the input, not the 1x4x12x12 zero-spread image
    assert up.flops == 2 * 1 * 5 * 5 * 4 * 8 * 3 * 3  # 2 * N * H_in * W_in * C_in * C_out * k * k
    assert sum(s.flops for s in sites) == torch_flops


def test_coverage_counts_the_inserted_zeros_apart(unet_up):
    from opscope.analysis.cost import analyze
    from opscope.analysis.coverage import INSERTED_ZEROS, coverage
    from opscope.ir.sites import find_sites

    _, _, module, _ = unet_up
    sites = find_sites(module)
    cov = coverage(module, [s.name for s in sites])
    assert cov.tapped_flops == sum(s.flops for s in sites)
    # the stride-1 convolution over the 12x12 image: 10x10 outputs, each 4 x 3 x 3 products, per 8 channels
    assert cov.untapped[INSERTED_ZEROS] == 2 * 10 * 10 * 4 * 3 * 3 * 8 - sites[0].flops
    assert cov.tapped_flops + sum(cov.untapped.values()) == cov.module_flops == analyze(module).total_flops


def test_taps_read_the_real_input(unet_up):
    """The transposed convolution's lhs statistics are its input's (numpy), the zeros not among them."""
    _, x, module, _ = unet_up
    tapped, manifest = opscope.inject(module)
    loaded = opscope.load(opscope.compile(tapped, "llvm-cpu"))
    values = manifest.values(loaded.invoke(manifest.function, x.numpy()))
    site = manifest.sites[0].name
    want = x.numpy()
    np.testing.assert_equal(values[site, "lhs", "nnz"][0], np.count_nonzero(want))  # counts: exact
    np.testing.assert_allclose(values[site, "lhs", "sumsq"][0], np.sum(want.astype(np.float64) ** 2), rtol=1e-5)
