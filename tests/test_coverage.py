"""What the taps see of a module: the tapped sites' FLOPs against every other kind of op,
written beside the sketches and read by the miner, so no share is of the tapped part alone."""

from __future__ import annotations

import json

import polars as pl
import pytest

from opscope.analysis.cost import analyze
from opscope.analysis.coverage import coverage
from opscope.ir.loading import new_context, parse_module
from opscope.ir.sites import find_sites
from opscope.mining.render import render
from opscope.mining.report import mine
from opscope.mining.temporal import opportunities
from opscope.models.demo import transformer_module
from opscope.record.recorder import MODULE_ROW, UNKNOWN_ROW, read_site_costs, write_site_costs

DEMO = transformer_module(1, 16, 8)


def demo_module():
    return parse_module(DEMO, new_context())


def test_coverage_splits_the_module_flops():
    module = demo_module()
    sites = find_sites(module)
    cost = analyze(module)
    every = coverage(module, [s.name for s in sites])
    assert every.module_flops == cost.total_flops
    assert every.tapped_flops == sum(s.flops for s in sites)
    assert every.tapped_flops + sum(every.untapped.values()) == every.module_flops
    assert set(every.untapped) == {"softmax", "generic<maximumf>", "generic<addf>"} and every.unknown_ops == 0
    assert list(every.untapped.values()) == sorted(every.untapped.values(), reverse=True)
    ffn = coverage(module, ["layer0.ffn.up", "layer0.ffn.down"])
    assert ffn.untapped["matmul"] == sum(s.flops for s in sites if "attn" in s.name)  # untapped matmuls count too
    assert ffn.tapped_share == pytest.approx(ffn.tapped_flops / cost.total_flops)


def test_module_rows_round_trip_through_the_sidecar(tmp_path):
    path = tmp_path / "site_costs.csv"
    write_site_costs(
        path, {"fc1": 100, "fc2": 50}, {MODULE_ROW: 400, UNKNOWN_ROW: 1, "(untapped) generic<subf,exp>": 250}
    )
    assert path.read_text().splitlines() == [
        "site,flops",
        "fc1,100",
        "fc2,50",
        "(module),400",
        "(unknown ops),1",
        "(untapped) generic<subf exp>,250",
    ]
    assert read_site_costs(path)[MODULE_ROW] == 400


def _frame(steps: int = 4) -> pl.DataFrame:
    """Two sites' lhs over `steps` steps: l1/sumsq/elemsig only, enough for opportunities."""
    rows = []
    for t in range(steps):
        for site in ("fc1", "fc2"):
            for stat, n in (("mean", 1), ("sumsq", 1), ("l1", 1), ("nnz", 1), ("elemsig", 4)):
                for i in range(n):
                    rows.append((0, t, "llvm-cpu", "d", 4, 4, 4, 16, site, "lhs", stat, i, float(t + i + 1)))
    return pl.DataFrame(
        rows,
        schema=["run_id", "step", "backend", "dist", "M", "K", "N", "numel", "site", "role", "stat", "idx", "value"],
        orient="row",
    )


def test_cost_shares_are_of_the_module():
    costs = {"fc1": 100, "fc2": 50}
    of_sites = opportunities(_frame(), costs)
    of_module = opportunities(_frame(), {**costs, MODULE_ROW: 600, "(untapped) softmax": 450})
    assert sorted(of_sites["cost_share"].to_list()) == pytest.approx([1 / 3, 2 / 3])
    assert sorted(of_module["cost_share"].to_list()) == pytest.approx([50 / 600, 100 / 600])
    assert set(of_module["site"].to_list()) == {"fc1", "fc2"}  # module rows are no sites


def test_reports_say_what_is_not_tapped():
    report = mine(_frame(), {"fc1": 100, "fc2": 50, MODULE_ROW: 600, UNKNOWN_ROW: 2, "(untapped) softmax": 450})
    assert report.coverage.rows() == [("tapped sites", 150, 0.25), ("softmax", 450, 0.75)]
    line = (
        "Tapped sites: 25.0% of the module's 600 FLOPs per call; not tapped: softmax 75.0%; 2 ops of unknown "
        "FLOPs not counted."
    )
    assert line in render(report, "text") and line in render(report, "findings")
    assert "| softmax | 450 | 75.0% |" in render(report, "markdown")
    assert json.loads(render(report, "json"))["coverage"][1] == {"what": "softmax", "flops": 450, "share": 0.75}
    assert mine(_frame(), {"fc1": 100}).coverage is None  # no module row: nothing claimed


def test_profile_writes_the_module_rows(tmp_path):
    """A profiled CNN: the sidecar holds the module's FLOPs (the cost model's total), the
    report's coverage adds up to the module, and leaving the convolution untapped would name
    it with its share."""
    torch = pytest.importorskip("torch")
    import opscope

    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Conv2d(3, 8, 3), torch.nn.ReLU(), torch.nn.Flatten(), torch.nn.Linear(8 * 6 * 6, 4)
    )
    module = opscope.load_model(model, example_args=[torch.zeros(1, 3, 8, 8)])
    assert [s.name for s in find_sites(module)] == ["0", "3"]
    run = opscope.profile(module, steps=4, out=tmp_path / "run", name="cnn")
    costs = read_site_costs(run.site_costs)
    assert costs[MODULE_ROW] == analyze(module).total_flops
    assert run.report.coverage["share"].sum() == pytest.approx(1.0)
    assert run.report.coverage["what"][0] == "tapped sites" and run.report.coverage["share"][0] > 0.95
    head_only = coverage(module, ["3"])
    assert next(iter(head_only.untapped)) == "conv_2d_nchw_fchw"
    assert head_only.untapped["conv_2d_nchw_fchw"] == 2 * (6 * 6) * (3 * 3 * 3) * 8
