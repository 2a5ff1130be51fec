"""Value signals per key and the rule cascade that turns them into kernel families (§4.2).

Ports the value half of `opscope-mine` onto polars expressions over the tidy table. Signals
are computed per observation (key + run_id + step) and averaged over the observations that
have them. A signal no observation has is null (printed "-", JSON null), not the
reference's 0. The cascade compares a null as false, which is what the reference's 0 did
for every rule (density < 0.5 aside: a key without `nnz` is never sparse). Keys are
reported when they have any of the six signals (ours adds `zchan`, the share of all-zero
channels), not only when they have `nnz` (quirk 7). docs/mining.md has the rules.
"""

from __future__ import annotations

import polars as pl

from opscope.mining.keys import KEY, OBSERVATION, appearance_order, order_by

# Rule cascade thresholds (§4.2), first match wins.
DENSITY_SPARSE = 0.5  # nnz/numel below this: sparse GEMM
ZERO_CHANNELS = 0.05  # share of channels all zero in a tensor at or above this: channel skip
OUTLIER_RATIO = 6.0  # channel peak/mean above this: per-channel int quant
HISTTOP_SPIKY = 0.25  # mass in the fullest histogram bin above this: quantize/LUT
ADJ_COHERENT = 0.5  # adjacent-row Δ energy / row energy below this: delta compute
POS_CV_STRUCTURED = 0.75  # row-energy coefficient of variation above this: positional
OUTLIER_SCORE_FULL = 30.0  # outlier ratio that scores 1
POS_CV_SCORE_FULL = 3.0  # pos_cv that scores 1
MIN_RANKED_NUMEL = 64  # a tensor of fewer elements carries no statistic worth ranking (a 1-element "spike")
# Guards of the signal formulas (the reference's).
CHAN_MEAN_MIN = 1e-9
CV_MEAN_MIN = 1e-12
POS_MEAN_MIN = 1e-9

SIGNALS: tuple[str, ...] = ("density", "zchan", "outlier", "histtop", "pos_cv", "adj")
SIGNAL_STATS: tuple[str, ...] = ("nnz", "chan_maxabs", "hist", "pos_sumsq", "adj_sumsq")

SPARSE_GEMM, CHANNEL_SKIP, CHANNEL_QUANT = "sparse-gemm", "channel-skip", "channel-quant"
QUANTIZE_LUT, DELTA_COMPUTE, POSITIONAL, DENSE = "quantize-lut", "delta-compute", "positional", "dense"
EXPLOITS: tuple[str, ...] = (SPARSE_GEMM, CHANNEL_SKIP, CHANNEL_QUANT, QUANTIZE_LUT, DELTA_COMPUTE, POSITIONAL, DENSE)


def value_signals(df: pl.DataFrame, order: dict[str, pl.DataFrame] | None = None) -> pl.DataFrame:
    """The five §4.2 signals and zchan per (backend, dist, site, role): the mean of each over its observations."""
    order = order if order is not None else appearance_order(df)
    v, s = pl.col("value").cast(pl.Float64), pl.col("stat")
    vector = [*OBSERVATION, "stat"]
    # A recorder writes each sketch vector as consecutive rows, so runs of equal keys
    # (an integer run id) group it 3x faster than hashing seven key columns. Runs are then
    # merged per vector (sums, maxima, and Chan's pairwise update of the squared
    # deviations), which keeps the result exact for tables whose rows are interleaved.
    runs = (
        df.lazy()
        .with_columns(_run=pl.struct(vector).rle_id())
        .filter(s.is_in(SIGNAL_STATS))
        .group_by("_run")
        .agg(
            *(pl.col(c).first() for c in vector),
            n=pl.len(),
            total=v.sum(),
            top=v.max(),
            m2=v.var(ddof=0) * pl.len(),
            first=v.first(),
            numel=pl.col("numel").first(),
            zeros=(v == 0).sum(),
        )
        .with_columns(run_mean=pl.col("total") / pl.col("n"))
    )
    n_all, total_all = pl.col("n").sum(), pl.col("total").sum()
    per_stat = runs.group_by(vector).agg(
        first=pl.col("first").sort_by("_run").first(),
        numel=pl.col("numel").sort_by("_run").first(),
        total=total_all,
        top=pl.col("top").max(),
        avg=total_all / n_all,
        zshare=pl.col("zeros").sum() / n_all,
        sd=((pl.col("m2").sum() + (pl.col("n") * (pl.col("run_mean") - total_all / n_all) ** 2).sum()) / n_all).sqrt(),
    )
    first, total, top, avg, sd = (pl.col(c) for c in ("first", "total", "top", "avg", "sd"))
    per_obs = (
        per_stat.group_by(OBSERVATION)
        .agg(
            numel=pl.col("numel").max(),
            density=(first / pl.col("numel").clip(lower_bound=1)).filter(s == "nnz").first(),
            zchan=pl.col("zshare").filter(s == "chan_maxabs").first(),
            outlier=pl.when(avg > CHAN_MEAN_MIN).then(top / avg).filter(s == "chan_maxabs").first(),
            histtop=pl.when(total > 0).then(top / total).filter(s == "hist").first(),
            pos_cv=pl.when(avg.abs() < CV_MEAN_MIN)
            .then(0.0)
            .otherwise(sd / avg.abs())
            .filter(s == "pos_sumsq")
            .first(),
            pos_mean=avg.filter(s == "pos_sumsq").first(),
            adj_mean=avg.filter(s == "adj_sumsq").first(),
        )
        .with_columns(
            adj=pl.when((pl.col("pos_mean") > POS_MEAN_MIN) & pl.col("adj_mean").is_not_null()).then(
                pl.col("adj_mean") / pl.col("pos_mean")
            )
        )
    )
    per_key = (
        per_obs.group_by(KEY)
        .agg(pl.len().alias("observations"), pl.col("numel").max(), *(pl.col(c).mean() for c in SIGNALS))
        .filter(pl.any_horizontal(pl.col(c).is_not_null() for c in SIGNALS))
        .with_columns(pl.col(c).cast(pl.String) for c in KEY)
        .collect()
    )
    per_key = order_by(per_key, order, KEY).sort([f"_{c}_order" for c in KEY])
    return per_key.select(*KEY, pl.col("observations").cast(pl.Int64), pl.col("numel").cast(pl.Int64), *SIGNALS)


def classify(signals: pl.DataFrame) -> pl.DataFrame:
    """Add the first-match exploit, its score and a readable suggestion (§4.2's rule cascade)."""
    d, z, o, h, p, a = (pl.col(c) for c in SIGNALS)
    rules = [
        (d < DENSITY_SPARSE, SPARSE_GEMM, 1.0 - d),
        (z >= ZERO_CHANNELS, CHANNEL_SKIP, z),
        (o > OUTLIER_RATIO, CHANNEL_QUANT, (o / OUTLIER_SCORE_FULL).clip(upper_bound=1.0)),
        (h > HISTTOP_SPIKY, QUANTIZE_LUT, h),
        (a < ADJ_COHERENT, DELTA_COMPUTE, 1.0 - a),
        (p > POS_CV_STRUCTURED, POSITIONAL, (p / POS_CV_SCORE_FULL).clip(upper_bound=1.0)),
    ]
    exploit, score = pl.when(rules[0][0]).then(pl.lit(rules[0][1])), pl.when(rules[0][0]).then(rules[0][2])
    for cond, name, sc in rules[1:]:
        exploit, score = exploit.when(cond).then(pl.lit(name)), score.when(cond).then(sc)
    out = signals.with_columns(exploit=exploit.otherwise(pl.lit(DENSE)), score=score.otherwise(0.0).cast(pl.Float64))
    texts = [suggestion(r["exploit"], r) for r in out.select("exploit", *SIGNALS).iter_rows(named=True)]
    return out.with_columns(suggestion=pl.Series(texts, dtype=pl.String))


def suggestion(exploit: str, sig: dict[str, float | None]) -> str:
    """The human label of an exploit, with the number that triggered it (the reference's wording)."""
    if exploit == SPARSE_GEMM:
        return f"sparse-GEMM (skip {(1 - sig['density']) * 100:.0f}% zeros)"
    if exploit == CHANNEL_SKIP:
        return f"channel-skip ({sig['zchan'] * 100:.0f}% of channels all zero: structured sparsity" + (
            f", density {sig['density']:.2f})" if sig["density"] is not None else ")"
        )
    if exploit == CHANNEL_QUANT:
        return f"per-channel int quant (outlier {sig['outlier']:.1f}×)"
    if exploit == QUANTIZE_LUT:
        return f"quantize/LUT (spiky, {sig['histtop'] * 100:.0f}% in one bin)"
    if exploit == DELTA_COMPUTE:
        return f"delta-compute (adjacent rows cohere, Δ/E={sig['adj']:.2f})"
    if exploit == POSITIONAL:
        return f"sequence/positional structure (cv {sig['pos_cv']:.2f})"
    return "dense — no cheap sketch exploit"


SCORE_DIGITS = 9  # decimals a score is compared at (scores are in [0, 1]; float sums' order: `rank`)


def rank(signals: pl.DataFrame) -> pl.DataFrame:
    """Keys with a positive score on tensors of `MIN_RANKED_NUMEL` elements or more, best first;
    ties keep the signals' (appearance) order. Scores tie at `SCORE_DIGITS` decimals: polars' parallel
    aggregations sum in no fixed order, so equal scores differ in their last bits from run to run."""
    ranked = (
        signals.with_row_index("_pos")
        .filter((pl.col("score") > 0) & _large_enough())
        .sort([pl.col("score").round(SCORE_DIGITS), "_pos"], descending=[True, False])
    )
    return ranked.select(
        pl.int_range(1, pl.len() + 1, dtype=pl.Int64).alias("rank"), *KEY, "exploit", "score", "suggestion"
    )


def unranked_small(signals: pl.DataFrame) -> int:
    """Keys whose signal fired on a tensor too small to rank (fewer than `MIN_RANKED_NUMEL` elements)."""
    if not signals.height or "numel" not in signals.columns:
        return 0
    return signals.filter((pl.col("score") > 0) & ~_large_enough()).height


def _large_enough() -> pl.Expr:
    return pl.col("numel").is_null() | (pl.col("numel") >= MIN_RANKED_NUMEL)
