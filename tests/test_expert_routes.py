"""Routers without a top-k op: expert loads read where the dataflow selects among expert weights.

* PyTorch: top-1 routers written as `W[argmax]` (a gather of expert matrices by index) and as a
  one-hot mask dispatching tokens to one batched matmul over all experts; the recorded
  `route_load` equals `bincount(argmax(gate(x)))` from PyTorch's own forward, exactly.
* The demo MoE (`opscope demo moe`: a threshold mask, k = 1 and 2): its loads equal numpy's
  top-k of the gate logits the module computed (exposed by `expose-all-ops`), exactly, and the
  miner reads k off the loads (the threshold names no k).
* A routed selection a top-k op already makes is that top-k's site only (no second site).
"""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

import opscope
from opscope.ir.dynamics import ROUTING, find_dynamics_sites
from opscope.ir.loading import new_context, parse_module
from opscope.mining.dynamics import mine_dynamics
from opscope.models.demo import moe_module
from opscope.models.zoo import missing_extra, missing_message
from opscope.passes.expose_all_ops import exposures
from opscope.pipeline.textual import run_pipeline

T, D, E = 12, 8, 4
needs_torch = pytest.mark.skipif(missing_extra("torch"), reason=missing_message("this test", "torch"))


def _routers():
    import torch
    from torch import nn

    class Router(nn.Module):
        def __init__(self):
            super().__init__()
            self.gate = nn.Linear(D, E, bias=False)
            self.w = nn.Parameter(torch.randn(E, D, D))

    class ArgmaxGather(Router):
        def forward(self, x):
            w = self.w[self.gate(x).argmax(-1)]  # [T, D, D]: each token's expert matrix
            return torch.bmm(x.unsqueeze(1), w).squeeze(1)

    class OneHotMask(Router):
        def forward(self, x):
            m = nn.functional.one_hot(self.gate(x).argmax(-1), E).to(x.dtype)  # [T, E]
            return torch.bmm(x.unsqueeze(0) * m.t().unsqueeze(-1), self.w).sum(0)  # every expert, masked

    class TopKGather(Router):
        def forward(self, x):
            w = self.w[torch.topk(self.gate(x), 1).indices[:, 0]]
            return torch.bmm(x.unsqueeze(1), w).squeeze(1)

    return {"gather": ArgmaxGather, "mask": OneHotMask, "topk": TopKGather}


def _routed(model, x):
    """(routing sites, {(site, role, stat): values}) of `model` tapped for routing and run on x."""
    module, manifest = opscope.inject(opscope.load_model(model, example_args=(x,)), taps="routing")
    loaded = opscope.load(opscope.compile(module, "llvm-cpu"))
    sites = [s for s in manifest.sites if s.kind == ROUTING]
    return sites, manifest.values(loaded.invoke(manifest.function, x.numpy()))


@needs_torch
@pytest.mark.parametrize("how", ["gather", "mask"])
def test_a_router_without_top_k_counts_the_experts_pytorch_chose(how):
    import torch

    torch.manual_seed(3)
    model, x = _routers()[how]().eval(), torch.randn(T, D)
    sites, values = _routed(model, x)
    assert [(s.m, s.k, s.n) for s in sites] == [(T, 1, E)]  # tokens, experts per token, experts
    with torch.no_grad():
        want = np.bincount(model.gate(x).argmax(-1).numpy(), minlength=E)
    assert want.min() < want.max()  # the router is not uniform: the counts say which expert
    np.testing.assert_array_equal(values[sites[0].name, "route", "route_load"], want)


@needs_torch
def test_a_gather_after_a_top_k_is_the_top_k_site_only():
    import torch

    module = opscope.load_model(_routers()["topk"]().eval(), example_args=(torch.randn(T, D),))
    found = find_dynamics_sites(module, (ROUTING,))
    assert [s.values[0].owner.name for s in found.sites] in (["tensor.extract_slice"], ["iree_linalg_ext.topk"])


@pytest.mark.parametrize("top_k", [1, 2])
def test_the_demo_moe_shows_its_expert_loads(top_k):
    seq, experts = 16, 4
    module = parse_module(moe_module(1, 16, seq, experts=experts, top_k=top_k), new_context())
    run_pipeline(module, "expose-all-ops{ops=^layer0.moe.gate#}")
    (gate_at,) = [e.result for e in exposures(module)[1]]
    module, manifest = opscope.inject(module, taps="routing")
    route = [s for s in manifest.sites if s.kind == ROUTING]
    assert [(s.name, s.m, s.k, s.n) for s in route] == [("layer0.moe.experts.route", seq, 0, experts)]
    fn = module.body.operations[0]
    rng = np.random.default_rng(5)
    args = [rng.standard_normal(tuple(t.shape)).astype(np.float32) for t in fn.type.inputs]
    outs = opscope.load(opscope.compile(module, "llvm-cpu")).invoke(manifest.function, *args)
    gate = outs[gate_at]  # the one exposed tensor: the gate logits [seq, E] the module computed
    assert gate.shape == (seq, experts)
    kth = np.sort(gate, axis=1)[:, -top_k]
    want = (gate >= kth[:, None]).sum(0)
    assert want.sum() == seq * top_k  # no ties: each token went to top_k experts
    np.testing.assert_array_equal(manifest.values(outs)["layer0.moe.experts.route", "route", "route_load"], want)

    tidy = pl.DataFrame(
        [
            {"backend": "llvm-cpu", "dist": "normal", "step": 0, "site": name, "role": role, "stat": stat}
            | {"idx": i, "value": float(v), "M": seq, "K": 0, "N": experts}
            for (name, role, stat), vals in manifest.values(outs).items()
            for i, v in enumerate(vals)
        ]
    )
    routing = mine_dynamics(tidy).routing
    assert routing["k"].to_list() == [top_k]  # read off the loads: Σ load / tokens
