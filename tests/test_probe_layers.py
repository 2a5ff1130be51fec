"""Per-layer profiles and the two allocators: the reference's tests and the rules behind them."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from opscope.drive.synthetic import sample
from opscope.errors import OpscopeError
from opscope.probe import stats
from opscope.probe.allocate import DadoConfig, dado_allocate, greedy_allocate
from opscope.probe.layers import LayerProfile, Option, parse_layer_kind, profile_layer, quant_stat, reconstruct


def _layer(name: str, dist: str, rows: int, cols: int, seed: int) -> LayerProfile:
    return profile_layer(name, sample(dist, rows, cols, seed))


def test_profile_flags_the_right_decomp_per_dist():
    """The reference's test: a low-rank weight gets a low-rank option under 5 % error, cheaper than dense."""
    p = _layer("q", "lowrank", 64, 64, 1)
    low = [o for o in p.options if o.kind == "lowrank"]
    assert low and any(o.rel_err < 0.05 and o.bytes < p.dense_bytes for o in low)
    assert p.options[0].kind == "dense" and p.options[0].rel_err == 0.0


def test_options_come_in_the_reference_order_with_its_cost_models():
    rows, cols = 64, 256  # cols a multiple of 128: group-wise int4 offered
    p = _layer("fc", "gaussian", rows, cols, 2)
    kinds = [o.kind for o in p.options]
    order = ["dense", "int8", "int4", "int4g", "ternary", "sparse24", "lowrank", "monarch", "tucker", "tt"]
    assert kinds == sorted(kinds, key=order.index)
    assert kinds[:6] == order[:6]
    numel = rows * cols
    by = {o.kind: o for o in p.options}
    assert by["dense"].bytes == 4 * numel
    assert by["int8"].bytes == numel + 4 * rows  # + one f32 scale per output channel (the reference: numel)
    assert by["int4"].bytes == numel // 2 + 4 * rows
    assert by["int4g"].bytes == numel // 2 + 4 * rows * (cols // 128)
    assert by["ternary"].bytes == numel // 4 + 4 and by["ternary"].flops == numel // 2
    assert by["sparse24"].bytes == 2 * numel + numel // 4
    assert by["int8"].rel_err < by["int4"].rel_err < by["ternary"].rel_err


def test_monarch_only_for_square_perfect_squares():
    assert any(o.kind == "monarch" for o in _layer("a", "gaussian", 64, 64, 3).options)
    assert not any(o.kind == "monarch" for o in _layer("b", "gaussian", 48, 48, 3).options)
    assert not any(o.kind == "monarch" for o in _layer("c", "gaussian", 64, 16, 3).options)


def test_lowrank_error_is_the_exact_truncation_error():
    w = sample("gaussian", 40, 30, 4)
    p = profile_layer("w", w)
    sigma = np.linalg.svd(w.astype(np.float64), compute_uv=False)
    for o in (o for o in p.options if o.kind == "lowrank"):
        r = o.params[0]
        assert o.rel_err == pytest.approx(np.sqrt((sigma[r:] ** 2).sum() / (sigma**2).sum()), rel=1e-6)
        assert (sigma[:r] ** 2).sum() / (sigma**2).sum() >= 0.90 - 1e-9
        assert (40 + 30) * r < 40 * 30


@pytest.mark.parametrize("dist", ["gaussian", "lowrank", "quantized", "outlier"])
def test_reconstruct_reproduces_every_options_error(dist):
    """What a plan substitutes into the model has exactly the error the profile reports."""
    w = sample(dist, 64, 256, 5)
    for o in profile_layer("w", w).options:
        assert stats.rel_err(w, reconstruct(w, o)) == pytest.approx(o.rel_err, rel=1e-4, abs=1e-6), o.label


def test_best_within_takes_the_fewest_bytes_under_the_budget():
    p = LayerProfile(
        "x",
        4,
        4,
        64,
        [
            Option("dense", 0.0, 64, 16),
            Option("int8", 0.01, 20, 16),
            Option("int4", 0.05, 12, 16),
            Option("ternary", 0.3, 8, 8),
        ],
    )
    assert p.best_within(0.02) == 1
    assert p.best_within(0.06) == 2
    assert p.best_within(0.0) == 0
    assert p.best_within(1.0) == 3


def _reference_layers() -> list[LayerProfile]:
    """The reference's DADO test: LowRank 64×64, Quantized 48×32, Gaussian 32×48, LowRank 36×36."""
    return [
        _layer("l0", "lowrank", 64, 64, 10),
        _layer("l1", "quantized", 48, 32, 11),
        _layer("l2", "gaussian", 32, 48, 12),
        _layer("l3", "lowrank", 36, 36, 13),
    ]


def test_dado_matches_greedy_on_additive_objective():
    """The reference's test: both within budget (+1 byte), DADO's Σ error ≤ greedy's + 1e-6."""
    layers = _reference_layers()
    dense = sum(p.dense_bytes for p in layers)
    g = greedy_allocate(layers, 0.4)
    d = dado_allocate(layers, 0.4)
    assert g.total_bytes <= dense * 0.4 + 1 and d.total_bytes <= dense * 0.4 + 1
    assert d.total_err <= g.total_err + 1e-6
    assert d.dense_bytes == g.dense_bytes == dense
    assert d.compression == pytest.approx(dense / d.total_bytes)


def _brute_force(layers: list[LayerProfile], budget: float) -> float:
    best = np.inf
    for choice in itertools.product(*(range(len(p.options)) for p in layers)):
        opts = [p.options[c] for p, c in zip(layers, choice)]
        if sum(o.bytes for o in opts) <= budget:
            best = min(best, sum(o.rel_err for o in opts))
    return best


def _random_layers(seed: int, n: int = 4) -> tuple[list[LayerProfile], float]:
    """`n` layers of 3-5 options (dense first: 400 bytes, no error) and a budget share in [0.3, 0.7]."""
    rng = np.random.default_rng(seed)
    layers = []
    for i in range(n):
        k = int(rng.integers(3, 6))
        size = np.sort(rng.integers(10, 400, k))[::-1]
        size[0] = 400
        err = np.concatenate([[0.0], np.sort(rng.random(k - 1))])
        layers.append(
            LayerProfile(f"l{i}", 10, 10, 400, [Option("dense", float(e), int(b), 100) for e, b in zip(err, size)])
        )
    return layers, float(rng.uniform(0.3, 0.7))


@pytest.mark.parametrize("seed", range(6))
def test_dado_is_never_worse_than_greedy_and_never_better_than_optimal(seed):
    layers, frac = _random_layers(seed)
    g = greedy_allocate(layers, frac)
    d = dado_allocate(layers, frac, DadoConfig(iters=30, pop=100))
    optimal = _brute_force(layers, 1600 * frac)
    assert d.total_err <= g.total_err + 1e-12
    if g.feasible:
        assert d.feasible
    assert d.total_err >= optimal - 1e-12


GREEDY_SUBOPTIMAL = (0, 2, 5)  # the seeds where greedy's answer is worse than the brute-force optimum


@pytest.mark.parametrize("seed", range(6))
def test_dado_reaches_the_brute_force_optimum(seed):
    """On these small problems (at most 5^4 choices) DADO's search finds the optimum brute force does
    (to 1e-12, float sums in another order); where greedy misses it (`GREEDY_SUBOPTIMAL`, by more than
    0.06) the search did the work, not its warm start."""
    layers, frac = _random_layers(seed)
    g = greedy_allocate(layers, frac)
    d = dado_allocate(layers, frac, DadoConfig(iters=30, pop=100))
    optimal = _brute_force(layers, 1600 * frac)
    assert np.isfinite(optimal) and d.feasible
    assert d.total_err == pytest.approx(optimal, abs=1e-12)
    assert (g.total_err > optimal + 0.05) == (seed in GREEDY_SUBOPTIMAL), (g.total_err, optimal)


def _brute_force_vectorized(layers: list[LayerProfile], budget: float) -> float:
    """The least Σ rel_err within `budget` over every choice (numpy over the whole product at once)."""
    grids = np.meshgrid(*(np.arange(len(p.options)) for p in layers), indexing="ij")
    err, size = np.zeros(grids[0].shape), np.zeros(grids[0].shape)
    for p, g in zip(layers, grids):
        err += np.array([o.rel_err for o in p.options])[g]
        size += np.array([o.bytes for o in p.options])[g]
    return float(err[size <= budget].min())


def test_dado_finds_the_optimum_of_most_eight_layer_problems():
    """Eight layers (up to 5^8 = 390,625 choices, 3,000 samples searched): DADO reaches the brute-force
    optimum on 10 of these 12 problems and greedy on none. Held to at least 9: a search that refits
    its distribution on the worst samples (a blind search, in effect) reaches 3, so this tells a
    cross-entropy search from sampling around greedy's answer."""
    reached = greedy_reached = 0
    for seed in range(12):
        layers, frac = _random_layers(seed, 8)
        optimal = _brute_force_vectorized(layers, 3200 * frac)
        d = dado_allocate(layers, frac, DadoConfig(iters=30, pop=100))
        assert d.feasible and d.total_err >= optimal - 1e-12
        reached += d.total_err <= optimal + 1e-12
        greedy_reached += greedy_allocate(layers, frac).total_err <= optimal + 1e-12
    assert reached >= 9 and greedy_reached <= 1, (reached, greedy_reached)


def test_greedy_takes_the_cheapest_error_per_byte_first():
    a = LayerProfile("a", 10, 10, 400, [Option("dense", 0.0, 400, 100), Option("int8", 0.01, 100, 100)])
    b = LayerProfile("b", 10, 10, 400, [Option("dense", 0.0, 400, 100), Option("int8", 0.10, 100, 100)])
    g = greedy_allocate([a, b], 0.7)  # one swap reaches 500 ≤ 560: a's, 30× cheaper per byte
    assert g.choice == (1, 0) and g.total_bytes == 500 and g.feasible
    assert greedy_allocate([a, b], 0.1).choice == (1, 1)  # nothing left to save: stops over budget
    assert not greedy_allocate([a, b], 0.1).feasible


def test_dado_is_deterministic_for_a_seed():
    layers = _reference_layers()
    assert dado_allocate(layers, 0.3) == dado_allocate(layers, 0.3)


def test_bad_budgets_and_no_layers_are_one_line_errors():
    with pytest.raises(OpscopeError, match="no layers"):
        greedy_allocate([], 0.4)
    with pytest.raises(OpscopeError, match=r"\(0, 1\]"):
        dado_allocate(_reference_layers(), 1.5)


def test_quant_stat_parses_layer_and_kind():
    assert parse_layer_kind("model.layers.3.self_attn.q_proj.weight") == (3, "q_proj")
    assert parse_layer_kind("encoder.layer.11.attention.self.query") == (11, "query")
    assert parse_layer_kind("lm_head") == (None, "lm_head")
    s = quant_stat("layers.2.mlp.up", sample("gaussian", 32, 64, 7))
    assert s.layer == 2 and s.kind == "up" and s.numel == 32 * 64
    assert s.int8_pc < s.int4_pc < s.int3_pc
    assert s.best_bits in (6, 8, None)


def test_power_two_spreads_the_error():
    """Σ rel_err² prefers two medium errors to one large one even at a slightly larger Σ rel_err."""
    layers = [
        LayerProfile(
            n,
            10,
            10,
            400,
            [Option("dense", 0.0, 400, 100), Option("int8", 0.1, 250, 100), Option("int4", 0.19, 100, 100)],
        )
        for n in "ab"
    ]
    linear = dado_allocate(layers, 500 / 800)
    squared = dado_allocate(layers, 500 / 800, error="squares")
    assert linear.total_bytes <= 500 and squared.total_bytes <= 500
    assert sorted(linear.choice) == [0, 2] and linear.total_err == pytest.approx(0.19)
    assert squared.choice == (1, 1) and squared.total_err == pytest.approx(0.2)
    assert greedy_allocate(layers, 500 / 800, "squares").choice == (1, 1)


def test_energy_counts_a_layer_by_its_size():
    """Σ ‖ΔW‖²: the large layer keeps the accurate option, where Σ rel_err would spend it on two small ones."""
    big = LayerProfile(
        "big", 100, 100, 40000, [Option("dense", 0.0, 40000, 10000), Option("int4", 0.15, 5000, 10000)], energy=10000.0
    )
    small = [
        LayerProfile(n, 10, 10, 400, [Option("dense", 0.0, 400, 100), Option("int4", 0.1, 50, 100)], energy=100.0)
        for n in "ab"
    ]
    layers = [big, *small]
    frac = 40100 / 40800  # room for the big layer dense and the small ones quantized, or the reverse
    assert dado_allocate(layers, frac).choice == (1, 0, 0)  # Σ rel_err 0.15 < 0.2
    assert dado_allocate(layers, frac, error="energy").choice == (0, 1, 1)  # 2 · 0.01 · 100 < 0.0225 · 10000
    with pytest.raises(OpscopeError, match="error must be one of sum, squares, energy"):
        greedy_allocate(layers, 0.5, "max")


def test_a_bf16_weight_counts_its_dense_bytes_and_factors_at_two_bytes():
    w = sample("lowrank", 64, 256, 9)
    f32, bf16 = profile_layer("w", w), profile_layer("w", w, value_bytes=2)
    assert bf16.dense_bytes == f32.dense_bytes // 2 == 2 * 64 * 256
    by32, by16 = ({o.kind: o for o in p.options} for p in (f32, bf16))
    assert by16["int8"].bytes == by32["int8"].bytes  # codes and f32 scales: the same whatever the source width
    assert by16["lowrank"].bytes * 2 == by32["lowrank"].bytes
    assert by16["sparse24"].bytes == 64 * 256 + 64 * 256 // 4
