"""The inference-dynamics miner: attention, routing and residual blocks from the tidy table.

Rows of roles `attn` / `gate` (a softmax, or a fused attention's shadow: M = S_q, K =
heads, N = S_k, numel = G·S_q·S_k, G = batch·heads), `route` (a top-k: M = tokens, K =
k, N = experts) and `residual` (M = rows, N = width) become five tables, each per
(backend, dist, site), averaged over the observations (run × step):

* `attention` and `heads`: peak probability and normalized entropy per head (peaked vs
  diffuse; under a causal mask, of the queries that see at least half the keys), the
  share of mass on the top 10 % of keys (what an H2O-style KV cache keeps),
  and sinks: key positions that receive at least `SINK_RATIO` times their fair share.
  A causal mask (detected: query 0 puts all its mass on one key and no key j receives
  more than the S − j queries after it could give, in every head) makes early
  keys visible to more queries, so their fair share is what uniform attention over the
  visible keys gives them (Σ_{i≥j} 1/(i+1)), not S_q/S_k; a sink must also hold
  `SINK_RATIO`/S_k of all the mass, so the diagonal of a late query is not one.
* `routing`: per expert load share vs 1/E: cold (< `COLD_FAIR` of the fair share: the
  reference's 2 % at E = 8), hot (≥ `HOT_FAIR` ×), imbalance max/mean;
* `gates`: the router softmax's top-1 probability and top-2/top-1 ratio;
* `residual`: Σh² of the stream, Σd² of the block's output, their ratio ‖d‖/‖h‖, the
  reference's gap √(min/max) and ShortGPT's block influence BI = 1 − mean cos(h, h + d),
  ranked least influential first. Skip candidates have BI < `SKIP_BI`, what a per-token
  update of a tenth of the stream's norm orthogonal to it gives (BI ≈ r²/2 at r = 0.1).
  The reference's rule (gap < 0.10) is not ours: its sums run over every token, and in a
  trained LLM a few tokens' massive activations dominate them (SmolLM2's stream grows
  ~600× in one block), which makes every later block look skippable; BI is per token.
  Blocks with ‖d‖/‖h‖ ≥ `MASSIVE_REL` write such a massive activation (`massive`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import polars as pl

SINK_RATIO = 4.0  # a sink receives >= this x its fair share (and >= this / S_k of all mass)
TOP_KEYS = 0.10  # heavy hitters: the share of mass on this fraction of the keys
HEAVY_SHARE = 0.5  # ... at or above which an H2O-style KV cache that keeps them is worth trying
PEAKED_QMAX = 0.5  # a head whose mean peak probability is at least this is peaked
DIFFUSE_ENTROPY = 0.85  # a head whose mean normalized entropy is at least this is diffuse
CAUSAL_QMAX = 0.999  # query 0's peak in every head at or above this: a causal mask
COLD_FAIR = 0.16  # cold expert: load share below this x 1/E (the reference's 2 % at E = 8)
HOT_FAIR = 2.0  # hot expert: load share at or above this x 1/E
TOP1_RATIO = 0.1  # gate top-2/top-1 below this: the second expert hardly contributes
SKIP_BI = 0.005  # block influence below this: near-identity, a skip candidate
MASSIVE_REL = 10.0  # block ‖d‖/‖h‖ at or above this: it writes a massive activation into the stream

SITE = ("backend", "dist", "site")
OBS = SITE + ("run_id", "step")
ROLES = ("attn", "gate", "route", "residual")


@dataclass(frozen=True)
class DynamicsReport:
    """What the dynamics taps show: polars frames (empty when a table had no taps)."""

    attention: pl.DataFrame
    heads: pl.DataFrame
    routing: pl.DataFrame
    gates: pl.DataFrame
    residual: pl.DataFrame

    @property
    def empty(self) -> bool:
        return not any(f.height for f in (self.attention, self.routing, self.gates, self.residual))


# The columns every dynamics table starts with, and the attention columns of a head and of a site.
_KEY = {"backend": pl.String, "dist": pl.String, "site": pl.String}
_ATTENTION = {
    "S_q": pl.Int64,
    "S_k": pl.Int64,
    "causal": pl.Boolean,
    "qmax": pl.Float64,
    "entropy": pl.Float64,
    "top10": pl.Float64,
    "sinks": pl.List(pl.Int64),
}


def has_dynamics(df: pl.DataFrame) -> bool:
    """Whether the table holds rows of any dynamics role."""
    return df.height > 0 and df.select(pl.col("role").is_in(ROLES).any()).item()


def mine_dynamics(df: pl.DataFrame) -> DynamicsReport:
    """The dynamics tables of a tidy frame (sites in order of appearance)."""
    heads = _heads(df.filter(pl.col("role") == "attn"))
    return DynamicsReport(
        attention=_attention(heads),
        heads=heads,
        routing=_routing(df.filter(pl.col("role") == "route")),
        gates=_gates(df.filter(pl.col("role") == "gate")),
        residual=_residual(df.filter(pl.col("role") == "residual")),
    )


# -- attention ---------------------------------------------------------------------------------
def _positions(df: pl.DataFrame, stat: str, length: str) -> pl.DataFrame:
    """`stat`'s rows with their position (along `length`: M for per-query, N for per-key
    statistics), group g and head."""
    n = pl.col(length).cast(pl.Int64)
    return (
        df.filter(pl.col("stat") == stat)
        .with_columns(pos=pl.col("idx") % n, g=pl.col("idx") // n, value=pl.col("value").cast(pl.Float64))
        .with_columns(head=pl.col("g") % pl.col("K").cast(pl.Int64).clip(1))
    )


def _heads(df: pl.DataFrame) -> pl.DataFrame:
    """Per (site, head): S_q, S_k, causal, mean peak, mean normalized entropy, top-10 % key
    share, and the head's sink positions."""
    schema = {
        **_KEY,
        "head": pl.Int64,
        **_ATTENTION,
        "sink_ratio": pl.Float64,
        "kind": pl.String,
    }
    if not df.height:
        return pl.DataFrame(schema=schema)
    order = df.select(pl.col("site").unique(maintain_order=True)).with_row_index("_order")
    dims = df.group_by(SITE, maintain_order=True).agg(
        S_q=pl.col("M").first(), heads=pl.col("K").first(), S_k=pl.col("N").first()
    )
    qmax = _positions(df, "attn_qmax", "M")
    krecv = _positions(df, "attn_krecv", "N")
    # causal: query 0 sees key 0 alone (peak 1) and key j is seen by the S − j queries i >= j
    # (it receives at most S − j), in every head and observation
    first = (
        qmax.filter(pl.col("pos") == 0)
        .group_by(SITE)
        .agg(
            first=(pl.col("value").min() >= CAUSAL_QMAX)
            & (pl.col("N").first() > 1)
            & (pl.col("M").first() == pl.col("N").first())
        )
    )
    bounded = krecv.group_by(SITE).agg(
        bounded=(pl.col("value") <= pl.col("M").cast(pl.Int64) - pl.col("pos") + 1e-3).all()
    )
    causal = first.join(bounded, on=SITE, how="left").select(
        *SITE, causal=pl.col("first") & pl.col("bounded").fill_null(True)
    )
    dims = dims.join(causal, on=SITE, how="left").with_columns(pl.col("causal").fill_null(False))
    # per query: visible keys (pos + 1 under a causal mask), the entropy normalized by ln(visible)
    visible = pl.when(pl.col("causal")).then(pl.col("pos") + 1).otherwise(pl.col("N").cast(pl.Int64))
    per_query = pl.concat([qmax, _positions(df, "attn_entropy", "M")]).join(dims.select(*SITE, "causal"), on=SITE)
    # under a causal mask, early queries see few keys and peak trivially (query 1 at >= 0.5):
    # the head's peak and entropy are those of the queries that see at least half the keys
    per_query = per_query.with_columns(visible=visible).filter(
        (pl.col("visible") > 1) & (~pl.col("causal") | (pl.col("visible") * 2 >= pl.col("N")))
    )
    peak = per_query.filter(pl.col("stat") == "attn_qmax").group_by(*SITE, "head").agg(qmax=pl.col("value").mean())
    ent = (
        per_query.filter(pl.col("stat") == "attn_entropy")
        .with_columns(norm=pl.col("value") / pl.col("visible").cast(pl.Float64).log())
        .group_by(*SITE, "head")
        .agg(entropy=pl.col("norm").mean())
    )
    n_top = (pl.col("N").cast(pl.Float64) * TOP_KEYS).ceil().cast(pl.Int64).clip(1)
    top = (
        krecv.with_columns(rank=pl.col("value").rank("ordinal", descending=True).over(*OBS, "g"))
        .group_by(*OBS, "g", "head")
        .agg(share=pl.col("value").filter(pl.col("rank") <= n_top.first()).sum() / pl.col("value").sum())
        .group_by(*SITE, "head")
        .agg(top10=pl.col("share").mean())
    )
    keys = _key_mass(krecv, dims)
    sinks = keys.group_by(*SITE, "head").agg(
        sinks=pl.col("pos").filter(pl.col("sink")).sort(), sink_ratio=pl.col("ratio").max()
    )
    out = (
        dims.join(pl.DataFrame({"head": range(int(dims["heads"].max()))}, schema={"head": pl.Int64}), how="cross")
        .filter(pl.col("head") < pl.col("heads").clip(1))
        .join(peak, on=[*SITE, "head"], how="left")
        .join(ent, on=[*SITE, "head"], how="left")
        .join(top, on=[*SITE, "head"], how="left")
        .join(sinks, on=[*SITE, "head"], how="left")
        .join(order, on="site")
        .sort("_order", "head")
    )
    kind = (
        pl.when(pl.col("qmax") >= PEAKED_QMAX)
        .then(pl.lit("peaked"))
        .when(pl.col("entropy") >= DIFFUSE_ENTROPY)
        .then(pl.lit("diffuse"))
        .otherwise(pl.lit("mixed"))
    )
    return out.with_columns(kind=kind).select(*(pl.col(c).cast(t) for c, t in schema.items()))


def _key_mass(krecv: pl.DataFrame, dims: pl.DataFrame) -> pl.DataFrame:
    """Per (site, head, key position): the mean mass it receives, its fair share under the
    mask (S_q/S_k, or Σ_{i≥j} 1/(i+1) when causal), the ratio, and whether it is a sink."""
    mass = (
        krecv.group_by(*SITE, "head", "pos")
        .agg(
            mass=pl.col("value").mean(), S_q=pl.col("M").first().cast(pl.Int64), S_k=pl.col("N").first().cast(pl.Int64)
        )
        .join(dims.select(*SITE, "causal"), on=SITE)
    )
    mass = mass.join(_harmonic_tail(mass["S_q"].unique().to_list()), on=["pos", "S_q"], how="left")
    s_q, s_k = pl.col("S_q").cast(pl.Float64), pl.col("S_k").cast(pl.Float64)
    fair = pl.when(pl.col("causal")).then(pl.col("tail")).otherwise(s_q / s_k)
    share = pl.col("mass") / s_q  # of all mass (each query's row sums to 1)
    return mass.with_columns(ratio=pl.col("mass") / fair).with_columns(
        sink=(pl.col("ratio") >= SINK_RATIO) & (share >= SINK_RATIO / s_k)
    )


def _harmonic_tail(lengths: list[int]) -> pl.DataFrame:
    """Σ_{i=j}^{S−1} 1/(i+1) for every S in `lengths` and j < S: the mass key j gets under
    uniform causal attention over S queries."""
    rows_s, rows_j, tails = [], [], []
    for s in sorted(set(lengths)):
        acc = 0.0
        for j in range(s - 1, -1, -1):
            acc += 1.0 / (j + 1)
            rows_s.append(s)
            rows_j.append(j)
            tails.append(acc)
    return pl.DataFrame(
        {"S_q": rows_s, "pos": rows_j, "tail": tails}, schema={"S_q": pl.Int64, "pos": pl.Int64, "tail": pl.Float64}
    )


def _attention(heads: pl.DataFrame) -> pl.DataFrame:
    """Per attention site: its heads summarized, the sink positions most heads share, and the exploit."""
    schema = {
        **_KEY,
        "heads": pl.Int64,
        **_ATTENTION,
        "peaked": pl.Int64,
        "diffuse": pl.Int64,
        "exploit": pl.String,
    }
    if not heads.height:
        return pl.DataFrame(schema=schema)
    sinks = (
        heads.explode("sinks")
        .drop_nulls("sinks")
        .group_by(*SITE, "sinks")
        .agg(n=pl.len())
        .join(heads.group_by(SITE).agg(h=pl.len()), on=SITE)
        .filter(pl.col("n") * 2 >= pl.col("h"))  # a sink of at least half the heads
        .group_by(SITE)
        .agg(site_sinks=pl.col("sinks").sort())
    )
    out = (
        heads.group_by(SITE, maintain_order=True)
        .agg(
            heads=pl.len(),
            S_q=pl.col("S_q").first(),
            S_k=pl.col("S_k").first(),
            causal=pl.col("causal").first(),
            qmax=pl.col("qmax").mean(),
            entropy=pl.col("entropy").mean(),
            top10=pl.col("top10").mean(),
            peaked=(pl.col("kind") == "peaked").sum(),
            diffuse=(pl.col("kind") == "diffuse").sum(),
        )
        .join(sinks, on=SITE, how="left", maintain_order="left")
        .with_columns(sinks=pl.col("site_sinks").fill_null(pl.lit([], dtype=pl.List(pl.Int64))))
    )
    rows = [_attention_exploit(r) for r in out.iter_rows(named=True)]
    return out.with_columns(exploit=pl.Series(rows, dtype=pl.String)).select(
        *(pl.col(c).cast(t) for c, t in schema.items())
    )


def _attention_exploit(r: dict) -> str:
    """The kernel idea an attention site's numbers suggest, in words."""
    ideas = []
    if r["site_sinks"]:
        keys = _positions_text(r["site_sinks"])
        ideas.append(
            f"key {keys} is a sink: keep it in a windowed KV cache (StreamingLLM)"
            if r["causal"]
            else f"key {keys} is a sink: keep it as a global token of sparse attention"
        )
    if r["top10"] is not None and r["top10"] >= HEAVY_SHARE:
        ideas.append(
            f"top 10 % of keys hold {r['top10']:.0%} of the mass: "
            + ("H2O-style KV eviction" if r["causal"] else "top-k / block-sparse attention")
        )
    if r["peaked"] and r["peaked"] * 2 >= r["heads"]:
        ideas.append(f"{r['peaked']} of {r['heads']} heads peaked: top-k sparse attention")
    elif r["diffuse"] and r["diffuse"] * 2 >= r["heads"]:
        ideas.append(f"{r['diffuse']} of {r['heads']} heads diffuse: pooled / low-rank attention")
    return "; ".join(ideas) or "dense"


def _positions_text(positions: list[int], most: int = 4) -> str:
    text = ", ".join(str(p) for p in positions[:most])
    return text + (f" (+{len(positions) - most} more)" if len(positions) > most else "")


# -- routing -----------------------------------------------------------------------------------
def _routing(df: pl.DataFrame) -> pl.DataFrame:
    """Per top-k site: tokens, k, experts, load shares, hot and cold experts, imbalance."""
    schema = {
        **_KEY,
        "experts": pl.Int64,
        "k": pl.Int64,
        "tokens": pl.Int64,
        "load": pl.List(pl.Float64),
        "hot": pl.List(pl.Int64),
        "cold": pl.List(pl.Int64),
        "imbalance": pl.Float64,
        "exploit": pl.String,
    }
    df = df.filter(pl.col("stat") == "route_load")
    if not df.height:
        return pl.DataFrame(schema=schema)
    per = (
        df.group_by(*SITE, "idx", maintain_order=True)
        .agg(
            count=pl.col("value").cast(pl.Float64).sum(),
            E=pl.col("N").first(),
            k=pl.col("K").first(),
            tokens=pl.col("M").first(),
            calls=pl.len(),
        )
        .sort("idx")
        .group_by(SITE, maintain_order=True)
        .agg(
            counts=pl.col("count"),
            E=pl.col("E").first(),
            k=pl.col("k").first(),
            tokens=pl.col("tokens").first(),
            calls=pl.col("calls").first(),
        )
    )
    rows = []
    for r in per.iter_rows(named=True):
        counts, experts = r["counts"], len(r["counts"])
        total = sum(counts) or 1.0
        k = r["k"]
        if not k and r["tokens"]:  # a threshold mask names no k: the experts a token got, on average
            k = round(sum(counts) / (r["tokens"] * r["calls"]))
        load = [c / total for c in counts]
        fair = 1.0 / experts
        hot = [e for e, s in enumerate(load) if s >= HOT_FAIR * fair]
        cold = [e for e, s in enumerate(load) if s < COLD_FAIR * fair]
        mean = sum(load) / experts
        imbalance = max(load) / mean if mean else math.nan
        ideas = []
        if cold:
            ideas.append(f"{len(cold)} cold expert{'s' * (len(cold) != 1)} ({_positions_text(cold)}): drop or merge")
        if hot:
            ideas.append(f"{len(hot)} hot ({_positions_text(hot)}): prefetch, give them capacity")
        rows.append(
            {
                "backend": r["backend"],
                "dist": r["dist"],
                "site": r["site"],
                "experts": experts,
                "k": k,
                "tokens": r["tokens"],
                "load": load,
                "hot": hot,
                "cold": cold,
                "imbalance": imbalance,
                "exploit": "; ".join(ideas) or "balanced",
            }
        )
    return pl.DataFrame(rows, schema=schema)


def _gates(df: pl.DataFrame) -> pl.DataFrame:
    """Per router softmax: the mean top-1 probability, top-2/top-1 ratio and normalized entropy."""
    schema = {
        **_KEY,
        "experts": pl.Int64,
        "top1": pl.Float64,
        "top2_ratio": pl.Float64,
        "entropy": pl.Float64,
        "exploit": pl.String,
    }
    if not df.height:
        return pl.DataFrame(schema=schema)
    wide = df.filter(pl.col("stat").is_in(["attn_qmax", "gate_top2", "attn_entropy"])).pivot(
        on="stat", index=[*OBS, "idx", "N"], values="value", aggregate_function="first"
    )
    for col in ("attn_qmax", "gate_top2", "attn_entropy"):
        if col not in wide.columns:
            wide = wide.with_columns(pl.lit(None, dtype=pl.Float64).alias(col))
    out = wide.group_by(SITE, maintain_order=True).agg(
        experts=pl.col("N").first(),
        top1=pl.col("attn_qmax").mean(),
        top2_ratio=(pl.col("gate_top2") / pl.col("attn_qmax")).mean(),
        entropy=(pl.col("attn_entropy") / pl.col("N").cast(pl.Float64).log()).mean(),
    )
    ideas = (
        pl.when(pl.col("top2_ratio") < TOP1_RATIO)
        .then(pl.lit("the second expert gets < 10 % of the first's weight: top-1 routing"))
        .otherwise(pl.lit("-"))
    )
    return out.with_columns(exploit=ideas).select(*(pl.col(c).cast(t) for c, t in schema.items()))


# -- residual blocks ---------------------------------------------------------------------------
def _residual(df: pl.DataFrame) -> pl.DataFrame:
    """Per residual add: Σh², Σd², ‖d‖/‖h‖, gap, BI, its rank (least influential first), skip
    and massive."""
    schema = {
        **_KEY,
        "stream": pl.Float64,
        "block": pl.Float64,
        "rel": pl.Float64,
        "gap": pl.Float64,
        "bi": pl.Float64,
        "rank": pl.Int64,
        "skip": pl.Boolean,
        "massive": pl.Boolean,
    }
    df = df.filter(pl.col("stat").is_in(["res_a_sumsq", "res_b_sumsq", "res_cos"]))
    if not df.height:
        return pl.DataFrame(schema=schema)
    wide = (
        df.pivot(on="stat", index=list(OBS), values="value", aggregate_function="first")
        .group_by(SITE, maintain_order=True)
        .agg(stream=pl.col("res_a_sumsq").mean(), block=pl.col("res_b_sumsq").mean(), cos=pl.col("res_cos").mean())
    )
    lo, hi = pl.min_horizontal("stream", "block"), pl.max_horizontal("stream", "block")
    out = wide.with_columns(
        rel=(pl.col("block") / pl.col("stream")).sqrt(),
        gap=pl.when(hi > 0).then((lo / hi).sqrt()).otherwise(0.0),
        bi=1.0 - pl.col("cos"),
    )
    out = out.with_columns(
        rank=pl.col("bi").rank("ordinal").over("backend", "dist").cast(pl.Int64),
        skip=pl.col("bi") < SKIP_BI,
        massive=pl.col("rel") >= MASSIVE_REL,
    )
    return out.select(*(pl.col(c).cast(t) for c, t in schema.items()))
