"""Across steps: stationary tensors, and temporal reuse of each site's input (§4.2, §3.10).

Ports the cross-step half of `opscope-mine` and `optimize` of the reference design; only
the pairwise fingerprint test uses numpy, batched over series. Decisions on the
reference's quirks (§8 items 8-9), also in docs/mining.md:

* Stationarity reads l1, sumsq and the elemsig fingerprint (16 sampled elements): all
  three must stay put (cv < STATIONARY_CV). The reference reads l1 only, so every softmax
  output looked stationary; sumsq alone is fooled too where it barely moves. Where no
  usable elemsig was recorded (none, or all 16 samples zero), the verdict says it rests on
  l1+sumsq only.
* Verdicts need enough steps: stationarity MIN_STEPS_STATIONARY, memoize/delta-compute
  MIN_STEPS_REUSE; below them a series says "too few steps (n < k)" and its verdict and
  action are null (never a guess from one comparison).
* Cross-step and temporal sections keep run_id apart: the l1 series and the lhs
  fingerprints are per (run_id, backend, dist, site[, role]) (quirk 8; the reference
  mixes runs and dists at one site). Only series with two or more steps are reported.
  The fingerprint distance stays the reference's (normalised by the later step), but a
  repeat must also match the moments [mean, sumsq, l1, nnz]: 16 sampled elements that
  are all zero (an underflowed softmax, border pixels) otherwise make different inputs
  look identical; and two all-zero samples in a row count as infinite drift, not zero
  (the reference's distance is 0/(0 + 1e-9) there, which reads as "delta-compute").
* Opportunities need a `site,flops` sidecar for their cost share; without one every
  cost share is 0, so the list is ordered by reuse (recur or 1 - drift) after savings.
  The aggregate Σ cost-share × reuse is per (run_id, backend, dist), so it stays ≤ 1.
"""

from __future__ import annotations

import numpy as np
import polars as pl

from opscope.mining.keys import KEY, SERIES, appearance_order, order_by
from opscope.mining.signals import CV_MEAN_MIN, DELTA_COMPUTE
from opscope.record.recorder import MODULE_ROW, is_site_row

# Cross-step and temporal thresholds (§4.2, §3.10).
STATIONARY_CV = 1e-4  # l1, sumsq and elemsig cv across steps all below this: stationary
MATCH_THRESH = 1e-3  # fingerprint distance below this: a repeat
MEMOIZE_RECUR = 0.2  # repeat fraction above this: memoize
DELTA_DRIFT = 0.3  # mean step-to-step distance below this: delta compute
FP_EPS = 1e-9

# The fewest steps a verdict is drawn from (docs/mining.md, "How many steps a verdict needs").
# Stationarity is all-or-nothing: 3 steps give two independent step-to-step comparisons, so a
# tensor that matched its neighbour once by chance must match again. Memoize and
# delta-compute are a rate and a mean over the n - 1 transitions: 4 steps give three, so
# recur can read 0, 33, 67 or 100 % instead of 0/50/100 % and drift is a mean of three.
MIN_STEPS_STATIONARY = 3
MIN_STEPS_REUSE = 4

FP_SCALARS: tuple[str, ...] = ("mean", "sumsq", "l1", "nnz")
MEMOIZE, NO_REUSE = "memoize", "none"
ELEMSIG = "elemsig"


def too_few(steps: int, needed: int) -> str:
    """What a series below a minimum number of steps says instead of a verdict or action."""
    return f"too few steps ({steps} < {needed})"


def _cv(mean: str, sd: str) -> pl.Expr:
    return pl.when(pl.col(mean).abs() < CV_MEAN_MIN).then(0.0).otherwise(pl.col(sd) / pl.col(mean).abs())


def _elemsig_spread(df: pl.DataFrame) -> pl.LazyFrame:
    """Per (run_id, backend, dist, site, role): the elemsig fingerprint's change across steps.

    `sig_steps` = the fewest steps any of its sampled positions was recorded at;
    `elemsig_cv` = sqrt(mean over positions of the variance over steps) / mean |value|,
    null when every sample is zero (it then says nothing about change)."""
    v = pl.col("value").cast(pl.Float64)
    return (
        df.lazy()
        .filter(pl.col("stat") == ELEMSIG)
        .group_by(["run_id", *KEY, "idx"])
        .agg(var=v.var(ddof=0), absmean=v.abs().mean(), n=pl.col("step").n_unique())
        .group_by(["run_id", *KEY])
        .agg(
            sig_steps=pl.col("n").min().cast(pl.Int64),
            spread=pl.col("var").mean().sqrt(),
            scale=pl.col("absmean").mean(),
        )
        .with_columns(pl.col(c).cast(pl.String) for c in KEY)
        .with_columns(
            elemsig_cv=pl.when(pl.col("scale") < CV_MEAN_MIN).then(None).otherwise(pl.col("spread") / pl.col("scale"))
        )
        .select("run_id", *KEY, "sig_steps", "elemsig_cv")
    )


def cross_step(df: pl.DataFrame, order: dict[str, pl.DataFrame] | None = None) -> pl.DataFrame:
    """Per (run_id, backend, dist, site, role) with ≥ 2 steps: the cv of its l1, sumsq and
    elemsig series, what the verdict rests on, and the verdict.

    Stationary needs MIN_STEPS_STATIONARY steps and every cv below STATIONARY_CV (l1 alone
    calls every softmax output stationary: its rows always sum to 1). `basis` names the
    sketches read (`l1+sumsq+elemsig`, or fewer where one was not recorded or its samples
    are all zero); with too few steps `stationary` is null and the verdict says so."""
    order = order if order is not None else appearance_order(df)
    v, stat = pl.col("value").cast(pl.Float64), pl.col("stat")
    series = (
        df.lazy()
        .filter(stat.is_in(["l1", "sumsq"]))
        .group_by(["run_id", *KEY])
        .agg(
            steps=pl.col("step").filter(stat == "l1").n_unique().cast(pl.Int64),
            l1_mean=v.filter(stat == "l1").mean(),
            l1_sd=v.filter(stat == "l1").std(ddof=0),
            sq_mean=v.filter(stat == "sumsq").mean(),
            sq_sd=v.filter(stat == "sumsq").std(ddof=0),
        )
        .filter(pl.col("steps") > 1)
        .with_columns(pl.col(c).cast(pl.String) for c in KEY)
        .join(_elemsig_spread(df), on=["run_id", *KEY], how="left")
        .with_columns(
            l1_cv=_cv("l1_mean", "l1_sd"),
            sumsq_cv=_cv("sq_mean", "sq_sd"),
            elemsig_cv=pl.when(pl.col("sig_steps") >= pl.col("steps")).then(pl.col("elemsig_cv")),
        )
        .with_columns(
            stationary=pl.when(pl.col("steps") < MIN_STEPS_STATIONARY)
            .then(None)
            .otherwise(
                (pl.col("l1_cv") < STATIONARY_CV)
                & (pl.col("sumsq_cv").is_null() | (pl.col("sumsq_cv") < STATIONARY_CV))
                & (pl.col("elemsig_cv").is_null() | (pl.col("elemsig_cv") < STATIONARY_CV))
            )
        )
        .collect()
    )
    series = order_by(series, order, KEY).sort(["run_id", *(f"_{c}_order" for c in KEY)])
    rows = series.select("steps", "stationary", "l1_cv", "sumsq_cv", "elemsig_cv", "sig_steps").iter_rows()
    basis, verdict = [], []
    for n, st, cv, sq, sig, sig_steps in rows:
        b = "l1" + ("" if sq is None else "+sumsq") + ("" if sig is None else "+elemsig")
        basis.append(b)
        if st is None:
            verdict.append(too_few(n, MIN_STEPS_STATIONARY))
        elif st:
            why = "" if sig is not None else f" ({b} only: {_no_elemsig(n, sig_steps)})"
            verdict.append(f"stationary across steps{why} → precompute / prepack")
        else:
            verdict.append(f"drifting (l1 cv {cv:.2g}, sumsq cv {_g(sq)}, elemsig cv {_g(sig)}) → temporal coherence")
    return series.select(
        "run_id",
        *KEY,
        "steps",
        "l1_mean",
        "l1_cv",
        "sumsq_cv",
        "elemsig_cv",
        pl.Series("basis", basis, dtype=pl.String),
        "stationary",
        pl.Series("verdict", verdict, dtype=pl.String),
    )


def _no_elemsig(steps: int, sig_steps: int | None) -> str:
    """Why a series has no usable elemsig fingerprint."""
    if sig_steps is None:
        return "no elemsig recorded"
    if sig_steps < steps:
        return f"elemsig recorded at {sig_steps} of {steps} steps"
    return "elemsig samples all zero"


def _g(x: float | None) -> str:
    """A cv in a verdict: two significant digits, '-' when absent."""
    return "-" if x is None else format(x, ".2g")


def fingerprints(df: pl.DataFrame) -> pl.DataFrame:
    """Per (run_id, backend, dist, site, step): the lhs fingerprint (elemsig, else moments ++ hist)."""
    s, idx = pl.col("stat"), pl.col("idx")
    fkey = [*SERIES, "step"]
    slot = pl.when(s == "elemsig").then(idx)  # elemsig by idx; else mean, sumsq, l1, nnz, then hist by idx
    for i, name in enumerate(FP_SCALARS):
        slot = slot.when(s == name).then(pl.lit(i, dtype=pl.Int64))
    slot = slot.otherwise(idx + len(FP_SCALARS))
    return (
        df.lazy()
        .filter((pl.col("role") == "lhs") & s.is_in((*FP_SCALARS, "hist", "elemsig")))
        .with_columns(_sig=(s == "elemsig").any().over(fkey))
        .filter(pl.when(pl.col("_sig")).then(s == "elemsig").otherwise(s != "elemsig"))
        .group_by(fkey)
        .agg(vec=pl.col("value").cast(pl.Float64).sort_by(slot))
        .with_columns(pl.col(c).cast(pl.String) for c in ("backend", "dist", "site"))
        .sort(fkey)
        .collect()
    )


def _distances(vectors: np.ndarray, lengths: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Pairwise dist[b, i, j] = ‖s_i − s_j‖ / (‖s_i‖ + 1e-9) (∞ when lengths differ), and the norms."""
    norms2 = np.einsum("bnd,bnd->bn", vectors, vectors)
    norms = np.sqrt(norms2)
    gram = np.einsum("bid,bjd->bij", vectors, vectors)
    d2 = np.clip(norms2[:, :, None] + norms2[:, None, :] - 2.0 * gram, 0.0, None)
    dist = np.sqrt(d2) / (norms[:, :, None] + FP_EPS)
    dist[lengths[:, :, None] != lengths[:, None, :]] = np.inf
    return dist, norms


def recurrence(
    vectors: np.ndarray, lengths: np.ndarray, guard: np.ndarray | None = None, guard_lengths: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """recur and drift of a batch of step series `vectors[B, n, d]` (zero-padded to d; `lengths[B, n]`).

    recur = fraction of steps i ≥ 1 whose fingerprint is within MATCH_THRESH of an earlier one
    (and, with `guard`, whose guard vector is too); drift = mean over i ≥ 1 of dist(s_i, s_{i-1});
    dist(a, b) = ‖a − b‖ / (‖a‖ + 1e-9), ∞ when the lengths differ (the reference's, normalised
    by the later step).
    """
    n = vectors.shape[1]
    dist, norms = _distances(vectors, lengths)
    blind = norms == 0.0  # all samples zero (e.g. always-zero border pixels): says nothing
    earlier = np.tril(np.ones((n, n), dtype=bool), -1)
    match = ((dist < MATCH_THRESH) | (blind[:, :, None] & blind[:, None, :])) & earlier
    if guard is not None:
        match &= _distances(guard, guard_lengths)[0] < MATCH_THRESH
    hits = match.any(axis=2)[:, 1:]
    recur = hits.sum(axis=1) / (n - 1)
    diff = vectors[:, 1:] - vectors[:, :-1]
    step = np.sqrt(np.einsum("bnd,bnd->bn", diff, diff)) / (norms[:, 1:] + FP_EPS)
    step[lengths[:, 1:] != lengths[:, :-1]] = np.inf
    step[blind[:, 1:] & blind[:, :-1]] = np.inf  # no evidence of slow drift
    return recur, step.mean(axis=1)


def moment_guards(df: pl.DataFrame, fps: pl.DataFrame) -> pl.DataFrame:
    """Per row of `fps`: [mean, sumsq, l1, nnz] of the same lhs (empty where missing).

    An elemsig fingerprint samples 16 fixed positions; when those are all zero (an
    underflowed softmax, a pruned tensor) different inputs look identical. A repeat must
    match these moments too (the reference trusts the samples alone)."""
    fkey = [*SERIES, "step"]
    slot = pl.lit(0, dtype=pl.Int64)
    for i, name in enumerate(FP_SCALARS):
        slot = pl.when(pl.col("stat") == name).then(pl.lit(i, dtype=pl.Int64)).otherwise(slot)
    mom = (
        df.lazy()
        .filter((pl.col("role") == "lhs") & pl.col("stat").is_in(FP_SCALARS))
        .group_by(fkey)
        .agg(guard=pl.col("value").cast(pl.Float64).sort_by(slot))
        .with_columns(pl.col(c).cast(pl.String) for c in ("backend", "dist", "site"))
        .collect()
    )
    return (
        fps.select(fkey)
        .join(mom, on=fkey, how="left", maintain_order="left")
        .with_columns(pl.col("guard").fill_null(pl.lit([], dtype=pl.List(pl.Float64))))
    )


def _padded(lists: pl.Series) -> tuple[np.ndarray, np.ndarray]:
    """A list column as a zero-padded [rows, d] array and the row lengths."""
    lengths = lists.list.len().to_numpy().astype(np.int64)
    dmax = int(lengths.max()) if len(lengths) else 0
    flat = np.zeros((len(lengths), max(dmax, 1)))
    if len(lengths) and dmax:
        values = lists.explode().drop_nulls().to_numpy().astype(np.float64)
        rows = np.repeat(np.arange(len(lengths)), lengths)
        offsets = np.concatenate([[0], np.cumsum(lengths)[:-1]])
        flat[rows, np.arange(len(values)) - np.repeat(offsets, lengths)] = values
    return flat, lengths


def opportunities(
    df: pl.DataFrame, site_costs: dict[str, int] | None = None, order: dict[str, pl.DataFrame] | None = None
) -> pl.DataFrame:
    """§3.10 per (run_id, backend, dist, site) with ≥ 2 steps: recur, drift, action and cost-weighted savings.

    Below MIN_STEPS_REUSE steps recur and drift are still measured, but `action`, `reuse`
    and `savings` are null and the recommendation says "too few steps (n < k)"."""
    order = order if order is not None else appearance_order(df)
    fps = fingerprints(df)
    flat, lengths = _padded(fps["vec"])
    gflat, glengths = _padded(moment_guards(df, fps)["guard"])
    series_id = fps.select(pl.struct(SERIES).rle_id())[:, 0].to_numpy()
    counts = np.bincount(series_id) if len(series_id) else np.zeros(0, dtype=np.int64)
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(np.int64)

    recur = np.full(len(counts), np.nan)
    drift = np.full(len(counts), np.nan)
    for n in np.unique(counts[counts >= 2]):
        ids = np.flatnonzero(counts == n)
        chunk = max(1, 4_000_000 // int(n * n + n * flat.shape[1]))
        for lo in range(0, len(ids), chunk):
            part = ids[lo : lo + chunk]
            take = starts[part, None] + np.arange(n)
            recur[part], drift[part] = recurrence(flat[take], lengths[take], gflat[take], glengths[take])

    keys = fps.select(SERIES).unique(maintain_order=True) if len(counts) else fps.select(SERIES).head(0)
    res = keys.with_columns(
        steps=pl.Series(counts, dtype=pl.Int64), recur=pl.Series(recur), drift=pl.Series(drift)
    ).filter(pl.col("steps") >= 2)
    all_costs = site_costs or {}
    costs = {s: f for s, f in all_costs.items() if is_site_row(s)}
    # Shares of the whole module when the sidecar says its FLOPs, else of the sites listed.
    total = max(all_costs.get(MODULE_ROW) or sum(costs.values()), 1)
    cost_frame = pl.DataFrame(
        {"site": list(costs), "flops": list(costs.values())}, schema={"site": pl.String, "flops": pl.Int64}
    )
    rec, dr, few = pl.col("recur"), pl.col("drift"), pl.col("steps") < MIN_STEPS_REUSE
    res = (
        res.join(cost_frame, on="site", how="left")
        .with_columns(flops=pl.col("flops").fill_null(0))
        .with_columns(
            gflops=pl.col("flops") / 1e9,
            cost_share=pl.col("flops") / total,
            action=pl.when(few)
            .then(pl.lit(None, dtype=pl.String))
            .when(rec > MEMOIZE_RECUR)
            .then(pl.lit(MEMOIZE))
            .when(dr < DELTA_DRIFT)
            .then(pl.lit(DELTA_COMPUTE))
            .otherwise(pl.lit(NO_REUSE)),
            reuse=pl.when(few)
            .then(pl.lit(None, dtype=pl.Float64))
            .when(rec > MEMOIZE_RECUR)
            .then(rec)
            .when(dr < DELTA_DRIFT)
            .then((1.0 - dr).clip(0.0, 1.0))
            .otherwise(0.0),
        )
        .with_columns(savings=pl.col("cost_share") * pl.col("reuse"))
    )
    res = order_by(res, order, ("backend", "dist", "site")).sort(
        ["savings", "reuse", "run_id", "_backend_order", "_dist_order", "_site_order"],
        descending=[True, True, False, False, False, False],
        nulls_last=True,
    )
    text = [recommendation(a, r, d, n) for a, r, d, n in res.select("action", "recur", "drift", "steps").iter_rows()]
    return res.select(
        *SERIES,
        "steps",
        "flops",
        "gflops",
        "cost_share",
        "recur",
        "drift",
        "action",
        "reuse",
        "savings",
        pl.Series("recommendation", text, dtype=pl.String),
    )


def recommendation(action: str | None, recur: float, drift: float, steps: int = MIN_STEPS_REUSE) -> str:
    """The human label of a temporal action (the reference's wording); no action: too few steps."""
    if action is None:
        return too_few(steps, MIN_STEPS_REUSE)
    if action == MEMOIZE:
        return f"memoize — cache the {recur * 100:.0f}% repeated calls"
    if action == DELTA_COMPUTE:
        return f"delta-compute — linear op, tiny drift {drift:.2f}"
    return "(input varies — no temporal reuse)"


def aggregate(opps: pl.DataFrame, order: dict[str, pl.DataFrame]) -> pl.DataFrame:
    """Σ cost-share × reuse per (run_id, backend, dist): the recoverable fraction of that run's compute.

    `sites` counts the run's listed sites; the sum is over those with an action (enough
    steps), null when none has one."""
    sav = pl.col("savings")
    agg = opps.group_by(["run_id", "backend", "dist"]).agg(
        sites=pl.len().cast(pl.Int64), savings=pl.when(sav.is_not_null().any()).then(sav.sum())
    )
    agg = order_by(agg, order, ("backend", "dist")).sort(["run_id", "_backend_order", "_dist_order"])
    return agg.select("run_id", "backend", "dist", "sites", "savings")
