"""Per-layer decomposition profiles: every way to store one weight, with its measured error and cost.

`profile_layer(name, w)` lists the options for a weight `w` [rows = output channels, cols = K]
in the reference's order (§3.6: index 0 is always dense), each with the relative L2 error of
its reconstruction, the bytes it stores and the multiply-adds it costs per input row. The
allocators (`opscope.probe.allocate`) pick one option per layer under a byte budget;
`reconstruct(w, option)` gives the dense weight an option computes with, which is what a
plan's end-to-end measurement substitutes into the model.

Where we differ from the reference, on purpose:
* quantized options count their f32 scales (int8 per channel stores numel + 4·rows bytes,
  not numel): at int4 the scales are a visible share of small layers; dense weights and
  factors are counted at the width the model stores them (`value_bytes`: 2 for a bf16
  checkpoint, where the reference always counts 4);
* `int4/g128` (group-wise int4, one scale per 128 inputs of a row, what int4 deployments
  ship) is offered after `int4/chan` when K is a multiple of 128;
* a low-rank option's rank comes from the energy fraction of the *whole* spectrum (the
  reference takes it over its top 48 triplets, which offers "99.9 %" ranks that keep far
  less of a full-rank weight) and its error is the exact truncation error sqrt(Σ_{i>r} σ²/Σσ²);
* rows are output channels, so "per channel" is per output channel, as in `fakequant-weights`.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import numpy as np

from opscope.probe import decompose, stats

ENERGY = (0.90, 0.99, 0.999)  # low-rank options keep these shares of ‖W‖_F²
GROUP = 128  # group-wise int4: one scale per this many inputs
TUCKER_RANK_CAP = 32
TT_BOND_CAP = 16
TIGHT, OK = 0.02, 0.08  # the report's flags
QUANT_BUDGET = 0.03  # best bits in the quant sweep
OUTLIER_RATIO = 5.0  # the quant sweep's outlier columns
LABELS = {
    "dense": "dense",
    "int8": "int8/chan",
    "int4": "int4/chan",
    "ternary": "ternary{-1,0,1}",
    "sparse24": "sparse2:4",
    "monarch": "monarch",
}


@dataclass(frozen=True)
class Option:
    """One way to store a layer's weight: what it is, its weight error and its cost.

    `params` holds what `reconstruct` needs (a rank, Tucker dims and ranks, TT modes and cap)."""

    kind: str  # dense, int8, int4, int4g, ternary, sparse24, lowrank, monarch, tucker, tt
    rel_err: float
    bytes: int
    flops: int  # multiply-adds per input row
    params: tuple = ()

    @property
    def label(self) -> str:
        """The reference's label (`lowrank(r=R)`, `int8/chan`...), plus ours for group-wise int4."""
        p, kind = self.params, self.kind
        if kind == "int4g":
            return f"int4/g{p[0]}"
        if kind == "lowrank":
            return f"lowrank(r={p[0]})"
        if kind == "tucker":
            return f"tucker({'×'.join(map(str, p[0]))}→{','.join(map(str, p[1]))})"
        if kind == "tt":
            return f"tt({len(p[0])}modes,χ≤{p[1]})"
        return LABELS[kind]


@dataclass
class LayerProfile:
    """A layer's weight shape and every option for it, dense first."""

    name: str
    rows: int
    cols: int
    dense_bytes: int
    options: list[Option] = field(default_factory=list)
    energy: float = 0.0  # ‖W‖²_F: the `energy` objective weighs each layer's rel_err² by it

    def dense(self) -> Option:
        return self.options[0]

    def best_within(self, budget: float) -> int:
        """The index of the fewest-bytes option whose error is within `budget` (dense if none)."""
        fine = [i for i, o in enumerate(self.options) if o.rel_err <= budget]
        return min(fine, key=lambda i: (self.options[i].bytes, i)) if fine else 0


def profile_layer(
    name: str, w: np.ndarray, seconds: dict[str, float] | None = None, value_bytes: int = 4
) -> LayerProfile:
    """Every storage option for `w` [rows, cols], measured, in the reference's order; the seconds
    each kind of option took are added to `seconds` when given (where profiling time goes).
    `value_bytes` is the stored width of a value (4: f32, 2: bf16/f16): dense weights and the
    factors of low rank, Monarch, Tucker, TT and 2:4 are counted at it, scales at 4."""
    rows, cols = w.shape
    numel = rows * cols
    vb = value_bytes
    w = np.asarray(w, dtype=np.float32)
    out = LayerProfile(name, rows, cols, vb * numel, energy=float(np.square(w, dtype=np.float64).sum()))
    clock = _Clock(seconds)
    add = out.options.append
    add(Option("dense", 0.0, vb * numel, numel))
    with clock("int"):
        add(Option("int8", stats.per_channel_quant_error(w, 8), numel + 4 * rows, numel))
        add(Option("int4", stats.per_channel_quant_error(w, 4), (numel + 1) // 2 + 4 * rows, numel))
        if cols % GROUP == 0 and cols > GROUP:
            add(
                Option(
                    "int4g",
                    stats.group_quant_error(w, 4, GROUP),
                    (numel + 1) // 2 + 4 * rows * (cols // GROUP),
                    numel,
                    (GROUP,),
                )
            )
    with clock("ternary"):
        add(Option("ternary", stats.ternary_error(w), numel // 4 + 4, numel // 2))
    with clock("sparse24"):
        add(Option("sparse24", stats.nm_sparsity_error(w, 2, 4), vb * numel // 2 + numel // 4, numel // 2))
    with clock("lowrank"):
        for r, err in _lowrank(w):
            add(Option("lowrank", err, (rows + cols) * r * vb, (rows + cols) * r, (r,)))
    m = decompose.monarch_blocks(rows) if rows == cols else None
    if m:
        with clock("monarch"):
            w1, w2 = decompose.monarch_project(w, m)
            add(
                Option(
                    "monarch",
                    stats.rel_err(w, decompose.monarch_reconstruct(w1, w2, m)),
                    decompose.monarch_params(m) * vb,
                    decompose.monarch_params(m),
                )
            )
    tucker = _tucker_shape(rows, cols)
    params = decompose.tucker_params(*tucker) if tucker else numel
    if params < numel:
        dims, ranks = tucker
        with clock("tucker"):
            add(Option("tucker", _tucker_err(w, dims, ranks), params * vb, params, (dims, ranks)))
    modes = _tt_modes(rows, cols)
    if modes:
        with clock("tt"):
            cores = decompose.tt_svd(w.reshape(modes), modes, TT_BOND_CAP)
            params = decompose.tt_params(cores)
            if params < numel:
                err = stats.rel_err(w, decompose.tt_reconstruct(cores).reshape(rows, cols))
                add(Option("tt", err, params * vb, params, (modes, TT_BOND_CAP)))
    return out


class _Clock:
    """`with clock(kind):` adds the block's seconds to `seconds[kind]` (nothing when `seconds` is None)."""

    def __init__(self, seconds: dict[str, float] | None):
        self.seconds = seconds

    @contextmanager
    def __call__(self, kind: str) -> Iterator[None]:
        start = time.perf_counter()
        try:
            yield
        finally:
            if self.seconds is not None:
                self.seconds[kind] = self.seconds.get(kind, 0.0) + time.perf_counter() - start


def _lowrank(w: np.ndarray) -> list[tuple[int, float]]:
    """(rank, exact truncation error) for each energy fraction, distinct ranks cheaper than dense."""
    rows, cols = w.shape
    sigma2 = stats.spectrum(w).astype(np.float64) ** 2
    total = sigma2.sum()
    if total <= 0:
        return []
    tail = np.concatenate([np.cumsum(sigma2[::-1])[::-1], [0.0]])  # tail[r] = Σ_{i>=r} σ²
    seen, found = set(), []
    for f in ENERGY:
        r = stats.effective_rank(np.sqrt(sigma2), f)
        if r in seen or (rows + cols) * r >= rows * cols:
            continue
        seen.add(r)
        found.append((r, float(np.sqrt(max(tail[r], 0.0) / total))))
    return found


def _tucker_shape(rows: int, cols: int) -> tuple[tuple[int, int, int], tuple[int, int, int]] | None:
    """The reference's Tucker view of W: [rows, c1, c2] (cols = c1·c2, both > 1) and its ranks."""
    c1, c2 = decompose.balanced_factor(cols)
    if c1 < 2 or c2 < 2:
        return None
    ranks = (int(np.clip(rows // 2, 1, min(TUCKER_RANK_CAP, rows))), max(c1 // 2, 1), max(c2 // 2, 1))
    return (rows, c1, c2), ranks


def _tucker_err(w: np.ndarray, dims, ranks) -> float:
    core, factors = decompose.hosvd(w.reshape(dims), ranks)
    return stats.rel_err(w, decompose.tucker_reconstruct(core, factors).reshape(w.shape))


def _tt_modes(rows: int, cols: int) -> tuple[int, int, int, int] | None:
    """The reference's TT modes [rf1, rf2, cf1, cf2] (balanced factors), when all are > 1."""
    modes = (*decompose.balanced_factor(rows), *decompose.balanced_factor(cols))
    return modes if min(modes) > 1 else None


def reconstruct(w: np.ndarray, option: Option) -> np.ndarray:
    """The dense [rows, cols] weight `option` computes with (float32): what a plan substitutes."""
    w = np.asarray(w, dtype=np.float32)
    kind, p = option.kind, option.params
    if kind == "dense":
        return w
    if kind in ("int8", "int4"):
        return stats.quantize(w, 8 if kind == "int8" else 4, "row")
    if kind == "int4g":
        return stats.quantize(w, 4, "row", p[0])
    if kind == "ternary":
        return stats.ternary(w)
    if kind == "sparse24":
        return stats.nm_prune(w, 2, 4)
    if kind == "lowrank":
        a, b = decompose.lowrank(w, p[0])
        return (a @ b).astype(np.float32)
    if kind == "monarch":
        m = decompose.monarch_blocks(w.shape[0])
        return decompose.monarch_reconstruct(*decompose.monarch_project(w, m), m).astype(np.float32)
    if kind == "tucker":
        core, factors = decompose.hosvd(w.reshape(p[0]), p[1])
        return decompose.tucker_reconstruct(core, factors).reshape(w.shape).astype(np.float32)
    if kind == "tt":
        return (
            decompose.tt_reconstruct(decompose.tt_svd(w.reshape(p[0]), p[0], p[1])).reshape(w.shape).astype(np.float32)
        )
    raise ValueError(f"unknown option kind {kind!r}")


# -- the quant sweep (the reference's `--quant`) ---------------------------------------------------------------------

_LAYER = re.compile(r"(?:^|\.)(?:layers?|h|blocks?|block)\.(\d+)(?:\.|$)")


@dataclass(frozen=True)
class QuantStat:
    """One weight's quantization headroom: per-tensor int8, per-channel int8/int4/int3, outliers, best bits."""

    name: str
    layer: int | None  # the block index in the name (`layers.3.` -> 3), None outside the repeated blocks
    kind: str  # the last name segment: q_proj, fc1, ...
    numel: int
    int8_pt: float
    int8_pc: float
    int4_pc: float
    int3_pc: float
    outlier: float  # max / median of the per-column max |w|
    outliers: int  # columns above OUTLIER_RATIO × median
    best_bits: int | None


def parse_layer_kind(name: str) -> tuple[int | None, str]:
    """(block index, projection kind) from a site or parameter name (a trailing `.weight` is dropped)."""
    if name.endswith(".weight"):
        name = name[: -len(".weight")]
    m = _LAYER.search(name)
    return (int(m.group(1)) if m else None), name.rsplit(".", 1)[-1]


def quant_stat(name: str, w: np.ndarray, budget: float = QUANT_BUDGET) -> QuantStat:
    """The quant sweep's numbers for one weight [rows, cols]."""
    layer, kind = parse_layer_kind(name)
    count, ratio = stats.outlier_channels(w, OUTLIER_RATIO)
    return QuantStat(
        name,
        layer,
        kind,
        int(w.size),
        stats.quant_error(w, 8),
        stats.per_channel_quant_error(w, 8),
        stats.per_channel_quant_error(w, 4),
        stats.per_channel_quant_error(w, 3),
        ratio,
        count,
        stats.best_bitwidth(w, budget),
    )
