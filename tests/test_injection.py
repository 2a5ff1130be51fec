"""What `inject_matmul_stats` promises: original results untouched, a manifest that follows
the reference's sketch order, config flags and site filters that do exactly what they say,
and pass options (pack, outline) that change the IR's shape but not one value.
"""

from __future__ import annotations

import logging

import numpy as np
import pytest
from distributions import DISTS
from linalg_cases import BATCH_MATMUL, CASES, CONST_WEIGHTS, DOT_GENERAL, GENERIC_3D, MATVEC, TRANSPOSED

import opscope
from opscope.errors import OpscopeError
from opscope.ir.arguments import function_args
from opscope.ir.loading import new_context, parse_module
from opscope.ir.manifest import Manifest
from opscope.ir.sites import find_sites, location_name
from opscope.ir.stat_config import STAT_ORDER, StatConfig, plan_stats
from opscope.models.demo import matmul_module, random_inputs, transformer_module
from opscope.pipeline.taps import inject_matmul_stats

MATMUL = CASES["matmul_16x24x8"][0]
TRANSFORMER = transformer_module(2, 32, 16)


def injected(source: str, **kw):
    """(module, manifest) of `source` after inject_matmul_stats(**kw)."""
    return inject_matmul_stats(parse_module(source, new_context()), **kw)


def stats_of(manifest: Manifest, site: str, role: str) -> list[str]:
    return [e.stat for e in manifest.entries if e.site == site and e.role == role]


# -- original results ------------------------------------------------------------------


@pytest.mark.parametrize("dist", ("gaussian", "sparse90", "outlier"))
def test_matmul_result_bit_identical_with_and_without_stats(modules, dists, runnable_target, dist):
    plain = modules.build(MATMUL, runnable_target, inject=False)
    tapped = modules.build(MATMUL, runnable_target)
    lhs, rhs = dists(dist, (16, 24), 0), dists(dist, (24, 8), 1)
    want = plain(lhs, rhs)
    got = tapped(lhs, rhs)
    assert len(want) == 1 and len(got) == tapped.manifest.num_results == 4
    assert got[0].dtype == want[0].dtype and np.array_equal(got[0], want[0])


def test_transformer_result_bit_identical_with_and_without_stats(modules, runnable_target):
    """The demo stack (2 layers, d_model 32, 16 tokens, 16 sites): same bits with 624 stats."""
    plain = modules.build(TRANSFORMER, runnable_target, inject=False)
    tapped = modules.build(TRANSFORMER, runnable_target)
    assert len(tapped.manifest.sites) == 16 and len(tapped.manifest.entries) == 16 * 39
    inputs = random_inputs([s for s, _ in function_args(parse_module(TRANSFORMER, new_context()))], seed=3)
    want = plain(*inputs)
    got = tapped(*inputs)
    assert len(want) == 1 and tapped.manifest.num_original_results == 1
    assert np.isfinite(want[0]).all()
    assert np.array_equal(got[0], want[0])


def test_constant_and_intermediate_operands(modules, dists, runnable_target):
    """8x8 sites fed by an argument, constants and intermediates (stats kernels shared by shape): right values, same bits."""
    from opscope.run.host_stats import host_stats

    plain = modules.build(CONST_WEIGHTS, runnable_target, inject=False)
    tapped = modules.build(CONST_WEIGHTS, runnable_target)
    assert len(tapped.manifest.entries) == 3 * 39
    a = dists("outlier", (8, 8), 0)
    (out,), values = tapped.stats(a)
    assert np.array_equal(out, plain(a)[0])
    w = np.full((8, 8), 0.5, np.float32)
    w2 = np.tile(np.arange(1, 9, dtype=np.float32), (8, 1))
    r = a @ w  # intermediates are not returned: rebuild them on the host (hence rtol 1e-4)
    r2 = r @ w2
    for site, role, x in (
        ("c1", "lhs", a),
        ("c1", "rhs", w),
        ("c2", "rhs", w2),
        ("c1", "out", r),
        ("c3", "rhs", r),
        ("c3", "lhs", r2),
        ("c3", "out", out),
    ):
        want = host_stats(x)
        for stat in ("min", "max", "nnz", "l1", "sumsq", "chan_maxabs", "pos_sumsq"):
            np.testing.assert_allclose(
                values[(site, role, stat)], want[stat], rtol=1e-4, err_msg=f"{site}.{role}.{stat}"
            )


def test_original_results_keep_their_indices_and_types():
    source = matmul_module(4, 8, 3)
    before = parse_module(source, new_context())
    module, manifest = injected(source)

    def main(m):
        return [op for op in m.body.operations if op.operation.name == "func.func" and op.sym_name.value == "main"][0]

    old = [str(t) for t in main(before).type.results]
    new = [str(t) for t in main(module).type.results]
    assert new[: len(old)] == old
    assert manifest.num_original_results == len(old) == 1
    assert {e.result for e in manifest.entries} == set(range(1, manifest.num_results))


# -- manifest shape --------------------------------------------------------------------


def test_manifest_has_39_entries_per_2d_site_in_reference_order():
    _, manifest = injected(MATMUL)
    assert len(manifest.entries) == 39
    assert [e.role for e in manifest.entries] == ["lhs"] * 13 + ["rhs"] * 13 + ["out"] * 13
    for role in ("lhs", "rhs", "out"):
        assert stats_of(manifest, "matmul", role) == list(STAT_ORDER)
    numel = {"lhs": 16 * 24, "rhs": 24 * 8, "out": 16 * 8}
    assert all(e.numel == numel[e.role] for e in manifest.entries)


def test_manifest_lengths_follow_the_plan_and_pack_contiguously():
    _, manifest = injected(MATMUL)
    shapes = {"lhs": (16, 24), "rhs": (24, 8), "out": (16, 8)}
    by_result: dict[int, list] = {}
    for e in manifest.entries:
        by_result.setdefault(e.result, []).append(e)
    assert len(by_result) == 3  # one packed result per (site, role)
    for entries in by_result.values():
        plan = plan_stats(shapes[entries[0].role], StatConfig())
        assert [(e.stat, e.length) for e in entries] == [(r.kind, r.length) for r in plan]
        offsets = [e.offset for e in entries]
        assert offsets == list(np.cumsum([0] + [e.length for e in entries[:-1]]))
    lengths = {e.stat: e.length for e in manifest.entries if e.role == "lhs"}
    assert lengths == {
        "min": 1,
        "max": 1,
        "mean": 1,
        "l1": 1,
        "sumsq": 1,
        "nnz": 1,
        "kurtosis": 1,
        "hist": 32,
        "elemsig": 16,
        "chan_maxabs": 24,
        "chan_outlier": 1,
        "pos_sumsq": 16,
        "adj_sumsq": 15,
    }


def test_rank1_tensors_get_9_stats():
    _, manifest = injected(MATVEC)
    assert stats_of(manifest, "mv", "lhs") == list(STAT_ORDER)
    assert stats_of(manifest, "mv", "rhs") == list(STAT_ORDER[:9])
    assert stats_of(manifest, "mv", "out") == list(STAT_ORDER[:9])
    assert len(manifest.entries) == 13 + 9 + 9


def test_rank3_tensors_have_no_adjacency():
    _, manifest = injected(BATCH_MATMUL)
    for role in ("lhs", "rhs", "out"):
        assert stats_of(manifest, "bmm", role) == [s for s in STAT_ORDER if s != "adj_sumsq"]
    pos = [e for e in manifest.entries if e.stat == "pos_sumsq" and e.role == "lhs"][0]
    assert pos.length == 2 * 8


def test_single_row_tensor_has_no_adjacency():
    _, manifest = injected(matmul_module(1, 8, 4))
    assert "adj_sumsq" not in stats_of(manifest, "matmul", "lhs")
    assert "adj_sumsq" in stats_of(manifest, "matmul", "rhs")


def test_transformer_manifest_is_16_sites_of_39():
    _, manifest = injected(TRANSFORMER)
    names = [s.name for s in manifest.sites]
    assert names[:8] == [
        f"layer0.{n}"
        for n in ("attn.q", "attn.k", "attn.v", "attn.scores", "attn.context", "attn.o", "ffn.up", "ffn.down")
    ]
    assert len(names) == 16 and len(set(names)) == 16
    assert len(manifest.entries) == 16 * 39
    for name in names:
        assert len([e for e in manifest.entries if e.site == name]) == 39


# -- StatConfig flags ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("change", "removed"),
    [
        ({"hist_bins": 0}, {"hist"}),
        ({"per_channel": False}, {"chan_maxabs", "chan_outlier"}),
        ({"per_position": False}, {"pos_sumsq"}),
        ({"adjacency": False}, {"adj_sumsq"}),
        ({"hist_normalize": False}, set()),
        (
            {"hist_bins": 0, "per_channel": False, "per_position": False, "adjacency": False},
            {"hist", "chan_maxabs", "chan_outlier", "pos_sumsq", "adj_sumsq"},
        ),
    ],
)
def test_each_config_flag_removes_exactly_its_stats(change, removed):
    _, manifest = injected(MATMUL, config=StatConfig().replace(**change))
    for role in ("lhs", "rhs", "out"):
        assert stats_of(manifest, "matmul", role) == [s for s in STAT_ORDER if s not in removed]


def test_hist_bins_sets_the_hist_length():
    _, manifest = injected(MATMUL, config=StatConfig(hist_bins=7))
    assert {e.length for e in manifest.entries if e.stat == "hist"} == {7}


def test_lean_config_is_the_reference_whole_model_config():
    lean = StatConfig.lean()
    assert (lean.hist_bins, lean.hist_normalize, lean.per_channel, lean.per_position, lean.adjacency) == (
        0,
        False,
        True,
        False,
        False,
    )
    _, manifest = injected(MATMUL, config=lean)
    assert stats_of(manifest, "matmul", "lhs") == [
        "min",
        "max",
        "mean",
        "l1",
        "sumsq",
        "nnz",
        "kurtosis",
        "elemsig",
        "chan_maxabs",
        "chan_outlier",
    ]


def test_live_config_taps_the_lhs_only():
    live = StatConfig.live()
    _, manifest = injected(MATMUL, config=live)
    assert {e.role for e in manifest.entries} == {"lhs"}
    assert stats_of(manifest, "matmul", "lhs") == ["min", "max", "mean", "l1", "sumsq", "nnz", "kurtosis", "elemsig"]
    _, manifest = injected(MATMUL, config=StatConfig(roles=("out", "rhs")))
    assert {e.role for e in manifest.entries} == {"out", "rhs"}


def test_bad_config_is_a_one_line_error():
    with pytest.raises(OpscopeError, match="hist_bins must be >= 0"):
        StatConfig(hist_bins=-1)
    for roles in ((), ("lhs", "lhs"), ("weights",)):
        with pytest.raises(OpscopeError, match="roles must be distinct names among lhs, rhs, out"):
            StatConfig(roles=roles)
    with pytest.raises(OpscopeError, match="hist_min .* must be below hist_max"):
        StatConfig(hist_normalize=False, hist_min=1.0, hist_max=1.0)


@pytest.mark.parametrize("dist", DISTS)
def test_normalized_histogram_is_scale_invariant_on_device(modules, dists, runnable_target, dist):
    """x and 7·x give identical hist counts, as computed by the device (out scales by 49)."""
    built = modules.build(MATMUL, runnable_target)
    lhs, rhs = dists(dist, (16, 24), 0), dists(dist, (24, 8), 1)
    _, base = built.stats(lhs, rhs)
    _, scaled = built.stats(np.float32(7) * lhs, np.float32(7) * rhs)
    for role in ("lhs", "rhs", "out"):
        key = ("matmul", role, "hist")
        assert base[key].sum() == {"lhs": 16 * 24, "rhs": 24 * 8, "out": 16 * 8}[role]
        assert np.array_equal(base[key], scaled[key]), role


@pytest.mark.parametrize("dist", ("gaussian", "outlier", "quantized"))
def test_fixed_range_histogram_drops_outside_and_keeps_hi(modules, dists, runnable_target, dist):
    """hist_normalize=false over [-2, 2] with 8 bins: numpy's rule, computed by the device."""
    from opscope.run.host_stats import host_stats

    config = StatConfig(hist_bins=8, hist_min=-2.0, hist_max=2.0, hist_normalize=False)
    built = modules.build(MATMUL, runnable_target, config=config)
    lhs, rhs = dists(dist, (16, 24), 0), dists(dist, (24, 8), 1)
    (out,), values = built.stats(lhs, rhs)
    for role, x in (("lhs", lhs), ("rhs", rhs), ("out", out)):
        want = host_stats(x, config)["hist"]
        assert np.array_equal(values[("matmul", role, "hist")], want), role
        inside = np.count_nonzero((x >= -2.0) & (x <= 2.0))
        assert want.sum() == inside
    if dist == "quantized":  # 2.0 lies on the upper edge and must land in the last bin
        assert np.any(lhs == 2.0)


# -- site filters ----------------------------------------------------------------------


def test_keep_predicate_selects_sites():
    seen = []

    def keep(site):
        seen.append((site.name, site.lhs_numel, site.out_numel))
        return site.name.endswith(".attn.q")

    _, manifest = injected(TRANSFORMER, keep=keep)
    assert len(seen) == 16
    assert [s.name for s in manifest.sites] == ["layer0.attn.q", "layer1.attn.q"]
    assert {e.site for e in manifest.entries} == {"layer0.attn.q", "layer1.attn.q"}
    assert len(manifest.entries) == 2 * 39


def test_keep_predicate_by_numel_like_the_reference():
    """The reference's filtered form keys on element counts: ffn.down is the only [16, 128] lhs."""
    _, manifest = injected(TRANSFORMER, keep=lambda s: s.lhs_numel == 16 * 128)
    assert [s.name for s in manifest.sites] == ["layer0.ffn.down", "layer1.ffn.down"]


def test_sites_regex_selects_sites():
    _, manifest = injected(TRANSFORMER, sites=r"layer1\.ffn")
    assert [s.name for s in manifest.sites] == ["layer1.ffn.up", "layer1.ffn.down"]
    assert len(manifest.entries) == 2 * 39


def test_sites_regex_and_keep_combine():
    _, manifest = injected(TRANSFORMER, sites=r"^layer0\.", keep=lambda s: s.out_numel == 16 * 16)
    assert [s.name for s in manifest.sites] == ["layer0.attn.scores"]


def test_filter_that_keeps_nothing_warns_and_leaves_the_module(caplog):
    before = str(parse_module(TRANSFORMER, new_context()))
    with caplog.at_level(logging.WARNING, logger="opscope"):
        module, manifest = injected(TRANSFORMER, sites="no-such-site")
    assert manifest.entries == [] and manifest.sites == []
    assert str(module) == before
    assert "no matmul sites to tap" in caplog.text


def test_bad_sites_regex_is_an_error():
    with pytest.raises(OpscopeError, match=r"bad 'sites' regex '\(unclosed'"):
        injected(TRANSFORMER, sites="(unclosed")


# -- pack, outline, batch: IR shape differs, values do not -----------------------------


def test_unpacked_results_are_one_per_stat():
    _, manifest = injected(MATMUL, pack=False)
    assert manifest.num_results == 1 + 39
    assert [e.result for e in manifest.entries] == list(range(1, 40))
    assert all(e.offset == 0 for e in manifest.entries)


@pytest.mark.parametrize(
    "variant",
    [
        {"pack": False},
        {"outline": False},
        # one tensor per kernel call, in llvm-cpu's row layout (a textual pipeline has no target)
        {"pipeline": "inject-matmul-stats,lower-opscope{batch=1 row-lanes=16}"},
    ],
    ids=["pack=false", "outline=false", "batch=1"],
)
@pytest.mark.parametrize("dist", ("gaussian", "sparse90", "coherent"))
def test_pack_and_outline_do_not_change_values(modules, dists, variant, dist):
    """IR-level options, so llvm-cpu alone checks them (bit-exact: the same reductions run)."""
    ref = modules.build(MATMUL, "llvm-cpu")  # pack=True, outline=True, batch=0
    other = modules.build(MATMUL, "llvm-cpu", **variant)
    lhs, rhs = dists(dist, (16, 24), 0), dists(dist, (24, 8), 1)
    out_ref, values_ref = ref.stats(lhs, rhs)
    out_other, values_other = other.stats(lhs, rhs)
    assert np.array_equal(out_ref[0], out_other[0])
    assert values_ref.keys() == values_other.keys()
    for key in values_ref:
        assert np.array_equal(values_ref[key], values_other[key]), key


@pytest.mark.parametrize(
    "kw, counts",
    [
        ({}, "i32"),
        ({"target": "llvm-cpu"}, "i8"),
        ({"target": "vulkan-spirv"}, "i32"),
        ({"target": "cuda"}, "i32"),
        ({"target": "llvm-cpu", "hist_counts": "i32"}, "i32"),
        ({"hist_counts": "i8"}, "i8"),
    ],
    ids=["no-target", "llvm-cpu", "vulkan-spirv", "cuda", "llvm-cpu-forced-i32", "forced-i8"],
)
def test_histogram_counts_follow_the_target(kw, counts):
    """i8 lane counts only where the target counts them right (llvm-cpu), or when asked
    (`opscope.inject` applies the target's layout, `Target.layout`)."""
    module, _ = opscope.inject(CASES["matmul_64x128x32"][0], **kw)
    text = str(module)
    assert ("xi8>" in text) == (counts == "i8")
    assert "tensor<1x1x32x16xi32>" in text or counts == "i8"  # [tensors, slabs, bins, lanes]


@pytest.mark.parametrize(
    "kw, lanes",
    [
        ({}, False),
        ({"target": "llvm-cpu"}, True),
        ({"target": "vulkan-spirv"}, False),
        ({"target": "llvm-cpu", "row_lanes": 0}, False),
        ({"row_lanes": 16}, True),
    ],
    ids=["no-target", "llvm-cpu", "vulkan-spirv", "llvm-cpu-forced-straight", "forced-lanes"],
)
def test_row_lanes_follow_the_target(kw, lanes):
    """Lane partials per row (16 on llvm-cpu) only where the target asks, or when asked:
    the 64x128 lhs (a stack of one) is read as [1, 64, 8, 16], its row partials are [1, 64, 16]."""
    module, _ = opscope.inject(CASES["matmul_64x128x32"][0], **kw)
    text = str(module)
    assert ("tensor<1x64x8x16xf32>" in text) == lanes
    assert ("tensor<1x64x16xf32>" in text) == lanes


# -- site names and costs --------------------------------------------------------------

NAMED = """
func.func @main(%a: tensor<4x8xf32>, %b: tensor<8x3xf32>, %z: tensor<4x3xf32>)
    -> (tensor<4x3xf32>, tensor<4x3xf32>, tensor<4x3xf32>, tensor<4x3xf32>, tensor<4x3xf32>, tensor<4x3xf32>) {
  %0 = linalg.matmul ins(%a, %b : tensor<4x8xf32>, tensor<8x3xf32>) outs(%z : tensor<4x3xf32>) -> tensor<4x3xf32>
  %1 = linalg.matmul ins(%a, %b : tensor<4x8xf32>, tensor<8x3xf32>) outs(%z : tensor<4x3xf32>) -> tensor<4x3xf32> loc("fc1")
  %2 = linalg.matmul ins(%a, %b : tensor<4x8xf32>, tensor<8x3xf32>) outs(%z : tensor<4x3xf32>) -> tensor<4x3xf32> loc("fc1")
  %3 = linalg.matmul ins(%a, %b : tensor<4x8xf32>, tensor<8x3xf32>) outs(%z : tensor<4x3xf32>) -> tensor<4x3xf32> loc(fused["x.py":3:4, "enc.q"])
  %4 = linalg.matmul ins(%a, %b : tensor<4x8xf32>, tensor<8x3xf32>) outs(%z : tensor<4x3xf32>) -> tensor<4x3xf32> loc(callsite("enc.k"("x.py":1:1) at "y.py":2:2))
  %5 = linalg.matmul ins(%a, %b : tensor<4x8xf32>, tensor<8x3xf32>) outs(%z : tensor<4x3xf32>) -> tensor<4x3xf32> loc("x.py":5:5)
  return %0, %1, %2, %3, %4, %5 : tensor<4x3xf32>, tensor<4x3xf32>, tensor<4x3xf32>, tensor<4x3xf32>, tensor<4x3xf32>, tensor<4x3xf32>
}
"""


def test_site_names_from_locations_with_fallback():
    names = [s.name for s in find_sites(parse_module(NAMED, new_context()))]
    # NameLoc, NameLoc repeated (made unique), NameLoc inside FusedLoc and CallSiteLoc; no name but
    # a Python line -> <kind>@<file>:<line>; neither -> <kind>#<ordinal among sites of that kind>.
    assert names == ["matmul#0", "fc1", "fc1#1", "enc.q", "enc.k", "matmul@x.py:5"]


def test_site_names_reach_the_manifest():
    _, manifest = injected(NAMED)
    assert [s.name for s in manifest.sites] == ["matmul#0", "fc1", "fc1#1", "enc.q", "enc.k", "matmul@x.py:5"]
    assert [e.site for e in manifest.entries][::39] == ["matmul#0", "fc1", "fc1#1", "enc.q", "enc.k", "matmul@x.py:5"]


def test_location_name_reads_name_fused_callsite():
    from iree.compiler import ir

    with new_context():
        file_loc = ir.Location.file("x.py", 1, 2)
        assert location_name(ir.Location.name("enc.q", childLoc=file_loc)) == "enc.q"
        assert location_name(ir.Location.fused([file_loc, ir.Location.name("enc.v")])) == "enc.v"
        assert location_name(ir.Location.callsite(ir.Location.name("enc.o"), [file_loc])) == "enc.o"
        assert location_name(file_loc) is None
        assert location_name(ir.Location.unknown()) is None


@pytest.mark.parametrize(
    ("source", "kind", "bmkn"),
    [
        (MATMUL, "matmul", (1, 16, 24, 8)),
        (TRANSPOSED, "matmul", (1, 16, 24, 8)),
        (BATCH_MATMUL, "batch_matmul", (2, 8, 12, 10)),
        (GENERIC_3D, "generic", (1, 2 * 6, 12, 10)),
        (MATVEC, "matvec", (1, 16, 24, 1)),
        (DOT_GENERAL, "dot_general", (2, 8, 12, 10)),
    ],
    ids=["matmul", "transposed_matmul", "batch_matmul", "generic_contraction", "matvec", "stablehlo_dot_general"],
)
def test_flops_are_2_batch_m_k_n(source, kind, bmkn):
    (site,) = find_sites(parse_module(source, new_context()))
    b, m, k, n = bmkn
    assert site.kind == kind
    assert (site.batch, site.m, site.k, site.n) == bmkn
    assert site.flops == 2 * b * m * k * n
    _, manifest = injected(source)
    assert manifest.site_flops() == {site.name: 2 * b * m * k * n}


def test_transformer_flops():
    sites = {s.name: s for s in find_sites(parse_module(TRANSFORMER, new_context()))}
    assert sites["layer0.attn.q"].flops == 2 * 16 * 32 * 32
    assert sites["layer0.attn.scores"].flops == 2 * 16 * 32 * 16
    assert sites["layer0.attn.context"].flops == 2 * 16 * 16 * 32
    assert sites["layer1.ffn.up"].flops == 2 * 16 * 32 * 128
    assert sites["layer1.ffn.down"].flops == 2 * 16 * 128 * 32
