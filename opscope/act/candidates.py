"""What a profile run's sketches, and the model's IR, say each site could be specialized into.

* `skip-zero-channels`: lhs K channels whose `chan_maxabs` was 0 in every recorded step
  (border pixels, padded keys, dead ReLU units), sliced out behind a run-time guard whose
  stability is the per-step share of zero channels (σ, population std; from 3 steps on,
  "stable" below 0.02, the reference's threshold, else "watch drift"; the reference flags
  a single step as stable, its quirk). Exact: bit-identical or rejected.
* `quantize-weight` (W8A16, W8A8): a site whose rhs is a constant weight (a stationary
  tensor the sketches see as a stationary rhs). Lossy: accepted within an output error.
* `factor-weight` (the rank keeping 99 % of the weight's energy): the same sites, when the
  rank reveal finds fewer FLOPs. Lossy.
* `sparse-weight` (ELLPACK by output channel, `opscope.passes.sparse_weight`): a site whose rhs
  held fewer than half nonzeros (`nnz`, the reference's density < 0.5 sparse-GEMM trigger) in
  every step, and is a constant weight, or a function argument that stayed the same in every
  step (a model that takes its weights as inputs, as the built-in one does): that one is
  measured with the recorded weight baked in as a constant, and `--apply` leaves it out (the
  model would no longer read its argument). Estimated as 1/density. Lossy only by rounding
  (the nonzero terms summed in K order).
* `memoize`: a site whose input repeated an earlier step's (the miner's temporal
  `memoize` verdict: recur above 20 %), behind `Memoized`'s exact guard (hash, then a
  bitwise compare) on the host: `opscope.act.memoize.memoize_site`. Exact; not an IR rewrite,
  so `--apply` leaves it out of the module and names the call instead.

Lossy candidates have no run-time guard (the weights are constants): their predicate is
"weights constant", with σ 0.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

SKIP, QUANT, FACTOR, MEMO = "skip-zero-channels", "quantize-weight", "factor-weight", "memoize"
SPARSE = "sparse-weight"
KINDS = (SKIP, QUANT, FACTOR, SPARSE, MEMO)
IR_KINDS = (SKIP, QUANT, FACTOR, SPARSE)  # rewrites of the module (a memoized site is a host-side wrapper)
SPARSE_DENSITY = 0.5  # the reference's sparse-GEMM trigger: a tensor with fewer than half nonzeros
STABLE_SIGMA = 0.02  # the reference's guard stability threshold (σ of the per-step samples)
LOSSY = {  # label -> (kind, options)
    "W8A16": (QUANT, "bits=8"),
    "W8A8": (QUANT, "bits=8 activations=true"),
    "low rank": (FACTOR, "energy=0.99"),
}
SMOOTH_ALPHAS = (0.5, 0.8)  # SmoothQuant's migration strengths tried per site (the paper's 0.5; 0.8 for large outliers)
STATIC_ALPHA = (
    0.8  # the strength a static activation scale is tried with (measured on MiniLM: best of 0, 0.5, 0.7, 0.85)
)


def calibrated(calibration: str, static: bool) -> dict[str, tuple[str, str]]:
    """The lossy candidates a calibration file adds (label -> (kind, options)): W8A8 smoothed at
    each of SMOOTH_ALPHAS (per-token scales) and, with `static`, smoothed with one static scale: a
    static scale is calibrated on the very tensors its site is measured on, so only an end-to-end
    check on held-out data (a quality budget) can say it holds; without one it is not proposed."""
    cal = f'calibration="{calibration}"'
    out = {f"W8A8 SQ {a:g}": (QUANT, f"bits=8 activations=true smooth={a:g} {cal}") for a in SMOOTH_ALPHAS}
    if static:
        out[f"W8A8 static SQ {STATIC_ALPHA:g}"] = (
            QUANT,
            f"bits=8 activations=true smooth={STATIC_ALPHA:g} static=true {cal}",
        )
    return out


@dataclass(frozen=True)
class Guard:
    """A candidate's run-time predicate and how steady it was over the recorded steps."""

    predicate: str
    samples: tuple[float, ...]  # per step: the share the predicate rests on
    sigma: float

    @property
    def stability(self) -> str:
        """ "stable" or "watch drift" by σ, from enough steps only (the miner's stationarity minimum)."""
        from opscope.mining.temporal import MIN_STEPS_STATIONARY, too_few

        if len(self.samples) < MIN_STEPS_STATIONARY:
            return too_few(len(self.samples), MIN_STEPS_STATIONARY)
        return "stable" if self.sigma < STABLE_SIGMA else "watch drift"


@dataclass(frozen=True)
class Proposal:
    """One site's candidate rewrite before it is measured."""

    site: str
    kind: str
    label: str
    options: str  # the pass's options other than `sites`, as pipeline text: 'channels="0,8"'
    why: str
    guard: Guard
    repeat_rate: float = 0.0  # memoize: the share of recorded steps that repeated an earlier input
    density: float = 1.0  # sparse-weight: the weight's largest share of nonzeros over the recorded steps
    baked: bool = False  # sparse-weight on an argument: measured with the recorded weight as a constant

    @property
    def exact(self) -> bool:
        """The rewrite promises the original's bits (a guarded skip, a memoized call), not an approximation."""
        return self.kind in (SKIP, MEMO)

    @property
    def pipeline(self) -> str:
        """The rewrite of this site in the whole model."""
        return self.pipeline_for(f"^{re.escape(self.site)}$")

    def pipeline_for(self, sites: str, extra: str = "") -> str:
        """The rewrite with `sites` as its site regex (the outlined site is the only one: "")."""
        opts = " ".join(o for o in (f'sites="{sites}"' if sites else "", self.options, extra) if o)
        return f"{self.kind}{{{opts}}}"


def zero_channels(tidy, site: str) -> tuple[tuple[int, ...], int, tuple[float, ...]]:
    """(lhs channels with chan_maxabs 0 in every step, channel count, per-step share of zero channels)."""
    import polars as pl

    rows = tidy.filter((pl.col("site") == site) & (pl.col("role") == "lhs") & (pl.col("stat") == "chan_maxabs"))
    if rows.is_empty():
        return (), 0, ()
    steps = sorted(rows["step"].unique().to_list())
    width = int(rows["idx"].max()) + 1
    zero = np.ones(width, dtype=bool)
    shares = []
    for step in steps:
        part = rows.filter(pl.col("step") == step)
        z = np.zeros(width, dtype=bool)
        z[part["idx"].to_numpy()] = part["value"].to_numpy() == 0
        zero &= z
        shares.append(float(z.mean()))
    return tuple(int(i) for i in np.flatnonzero(zero)), width, tuple(shares)


def propose(
    tidy,
    sites: dict,
    kinds=KINDS,
    calibration: dict[str, np.ndarray] | None = None,
    path: str = "",
    static: bool = False,
) -> list[Proposal]:
    """The candidates of every recorded site (`sites`: name -> opscope.ir.sites.Site), in site order;
    with the run's `calibration` (written to `path`), smoothed W8A8 too (and, with `static`, statically
    scaled: `calibrated`), for each site whose lhs it calibrates along K (the last lhs dim)."""
    repeats = _repeats(tidy) if MEMO in kinds else {}
    out = []
    for name, site in sites.items():
        if SKIP in kinds:
            out += _skip(tidy, name, site)
        smooth = calibration is not None and _calibrates(site, calibration.get(name))
        out += [p for p in _lossy(name, site, calibrated(path, static) if smooth else {}) if p.kind in kinds]
        if SPARSE in kinds:
            out += _sparse(tidy, name, site)
        if name in repeats:
            out.append(_memo(name, *repeats[name]))
    return out


def _repeats(tidy) -> dict[str, tuple[float, int]]:
    """Site -> (the share of steps that repeated an earlier input, steps), where the miner says memoize."""
    from opscope.mining.temporal import MEMOIZE, opportunities

    opps = opportunities(tidy)
    return {
        str(site): (float(recur), int(steps))
        for site, recur, steps, action in opps.select("site", "recur", "steps", "action").iter_rows()
        if action == MEMOIZE
    }


def _memo(name: str, recur: float, steps: int) -> Proposal:
    repeats = round(recur * (steps - 1))
    guard = Guard("hash(inputs) hit, inputs bitwise equal", (), 0.0)
    why = f"{repeats} of {steps - 1} steps repeated an earlier input"
    return Proposal(name, MEMO, "memoize", "", why, guard, recur)


def _skip(tidy, name: str, site) -> list[Proposal]:
    from opscope.ir.sites import is_convolution, operand_dims
    from opscope.passes.skip_zero_channels import format_channels

    skip, width, shares = zero_channels(tidy, name)
    if not skip or is_convolution(site):
        return []
    rank = len(site.shape("lhs"))
    if operand_dims(site, "lhs") != (rank - 1,) or site.shape("lhs")[-1] != width:
        return []  # chan_maxabs is per last-axis channel: it names K channels only when K is last
    channels = format_channels(skip)
    guard = Guard(f"{name}.lhs[..., {{{channels}}}] == 0", shares, float(np.std(shares)))
    why = f"{len(skip)} of {site.k} K channels all zero in every step"
    return [Proposal(name, SKIP, f"skip {len(skip)}/{site.k}", f'channels="{channels}"', why, guard)]


def densities(tidy, site: str, role: str) -> tuple[float, ...]:
    """Per recorded step, the share of `site`'s `role` tensor that is nonzero (`nnz` / numel)."""
    import polars as pl

    rows = tidy.filter((pl.col("site") == site) & (pl.col("role") == role) & (pl.col("stat") == "nnz")).sort("step")
    return tuple(float(v) / max(float(n), 1.0) for v, n in zip(rows["value"], rows["numel"]))


def sparse_sites(tidy, sites: dict, role: str = "lhs") -> list[tuple[str, float]]:
    """(site, its largest density) of every recorded site whose `role` tensor was below the sparse
    trigger in every step: for activations, the sparsity no IREE form skips (the plan says so)."""
    out = []
    for name in sites:
        d = densities(tidy, name, role)
        if d and max(d) < SPARSE_DENSITY:
            out.append((name, max(d)))
    return out


def _sparse(tidy, name: str, site) -> list[Proposal]:
    """The weight stored sparse, where its rhs was below the trigger in every step and is a
    constant weight, or an argument that never changed (baked for the measurement)."""
    from opscope.ir.const_expr import is_weight
    from opscope.ir.sites import is_convolution
    from opscope.ir.weight_source import rhs_source

    d = densities(tidy, name, "rhs")
    if is_convolution(site) or not site.is_float or not d or max(d) >= SPARSE_DENSITY:
        return []
    constant = is_weight(site.value("rhs"))
    if not constant and (rhs_source(site) != "argument" or not _unchanged(tidy, name)):
        return []
    label = f"sparse {max(d):.0%}"
    why = f"rhs {max(d):.0%} nonzero in every step" + ("" if constant else "; an argument that never changed: baked")
    if constant:
        guard = Guard("weights constant", (), 0.0)
    else:
        guard = Guard(f"{name}.rhs == its recorded value", d, float(np.std(d)))
    return [Proposal(name, SPARSE, label, "", why, guard, density=max(d), baked=not constant)]


def _unchanged(tidy, site: str) -> bool:
    """`site`'s rhs had the same l1, sumsq and extremes in every recorded step (an input that is a weight)."""
    import polars as pl

    rows = tidy.filter(
        (pl.col("site") == site) & (pl.col("role") == "rhs") & pl.col("stat").is_in(["l1", "sumsq", "min", "max"])
    )
    return not rows.is_empty() and bool(
        (rows.group_by("stat", "idx").agg(pl.col("value").n_unique())["value"] == 1).all()
    )


def _calibrates(site, maxima: np.ndarray | None) -> bool:
    """The calibration holds `site`'s lhs channels along its only K dim, the last: what
    `quantize-weight` smooths by (`opscope.ir.smoothing.uncalibrated`)."""
    from opscope.ir.sites import is_convolution
    from opscope.ir.smoothing import uncalibrated

    if maxima is None or is_convolution(site) or uncalibrated(site):
        return False
    return site.shape("lhs")[-1] == len(maxima)


def _lossy(name: str, site, extra: dict[str, tuple[str, str]]) -> list[Proposal]:
    from opscope.ir.const_expr import is_weight
    from opscope.ir.sites import is_convolution
    from opscope.ir.weight_source import lhs_weight

    if is_convolution(site) or not site.is_float or not (is_weight(site.value("rhs")) or lhs_weight(site)):
        return []
    guard = Guard("weights constant", (), 0.0)
    return [
        Proposal(name, kind, label, options, "a constant weight", guard)
        for label, (kind, options) in {**LOSSY, **extra}.items()
    ]
