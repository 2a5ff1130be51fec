"""The inference-dynamics miner on hand-built tidy tables: sinks, heads, routing, residual ranking."""

from __future__ import annotations

import json
import math

import numpy as np
import polars as pl
import pytest

import opscope
from opscope.cli import main
from opscope.mining.dynamics import mine_dynamics
from opscope.record.tidy import COLUMNS, SCHEMA


def _rows(
    site: str, role: str, mkn: tuple[int, int, int], numel: int, stats: dict[str, np.ndarray], step: int = 0
) -> list[dict]:
    """Tidy rows of one site's statistics at one step."""
    m, k, n = mkn
    return [
        {
            "run_id": 0,
            "step": step,
            "backend": "llvm-cpu",
            "dist": "text",
            "M": m,
            "K": k,
            "N": n,
            "numel": numel,
            "site": site,
            "role": role,
            "stat": stat,
            "idx": i,
            "value": float(v),
        }
        for stat, vals in stats.items()
        for i, v in enumerate(np.ravel(vals))
    ]


def _frame(rows: list[dict]) -> pl.DataFrame:
    return pl.DataFrame(rows).select(COLUMNS).cast(SCHEMA)


def _attn_rows(site: str, probs: np.ndarray, heads: int, step: int = 0) -> list[dict]:
    """The rows the attention taps record for probabilities [G, S_q, S_k] (G = batch·heads)."""
    g, sq, sk = probs.shape
    ent = -(np.where(probs > 0, probs * np.log(np.where(probs > 0, probs, 1)), 0)).sum(-1)
    return _rows(
        site,
        "attn",
        (sq, heads, sk),
        probs.size,
        {"attn_qmax": probs.max(-1), "attn_krecv": probs.sum(-2), "attn_entropy": ent},
        step,
    )


def _softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def test_bidirectional_heads_sinks_and_concentration():
    """Per head: mean peak, normalized entropy and top-10 % share equal numpy's; a key
    with a large logit in one of two heads is that head's (and the site's) sink."""
    rng = np.random.default_rng(0)
    batch, heads, s = 2, 2, 20
    logits = rng.normal(0, 0.5, (batch, heads, s, s))
    logits[:, 0, :, 3] += 5.0  # key 3 soaks up head 0's mass
    probs = _softmax(logits).reshape(batch * heads, s, s)
    d = mine_dynamics(_frame(_attn_rows("l0.softmax", probs, heads)))
    by_head = probs.reshape(batch, heads, s, s)
    for h, row in enumerate(d.heads.iter_rows(named=True)):
        p = by_head[:, h]
        ent = -(p * np.log(p)).sum(-1) / math.log(s)
        mass = np.sort(p.sum(-2), axis=-1)[:, ::-1]
        assert row["head"] == h and row["causal"] is False
        assert row["qmax"] == pytest.approx(p.max(-1).mean(), abs=1e-6)
        assert row["entropy"] == pytest.approx(ent.mean(), abs=1e-6)
        assert row["top10"] == pytest.approx((mass[:, :2].sum(-1) / mass.sum(-1)).mean(), abs=1e-6)
    assert d.heads["sinks"].to_list() == [[3], []]
    assert d.heads["kind"].to_list()[0] == "peaked"
    site = d.attention.row(0, named=True)
    assert site["sinks"] == [3] and site["heads"] == 2 and (site["S_q"], site["S_k"]) == (s, s)
    assert "key 3 is a sink" in site["exploit"] and "global token" in site["exploit"]


def _causal(s: int, sink: float = 0.0, diagonal: float = 0.0) -> np.ndarray:
    """Causal probabilities [1, s, s]: uniform over the visible keys, with `sink` of each
    row's mass moved to key 0 or `diagonal` to the query's own key."""
    p = np.tril(np.ones((s, s))) / np.arange(1, s + 1)[:, None]
    p *= 1 - sink - diagonal
    p[:, 0] += sink
    p[np.arange(s), np.arange(s)] += diagonal
    return p[None]


def test_causal_mask_is_detected_and_fair_shares_follow_it():
    """Uniform causal attention has no sink (early keys are visible to more queries), is
    fully diffuse; half of each row on key 0 makes key 0 a sink (5.9× its fair share H_48
    ≈ 4.47 at 48 tokens); a heavy diagonal does not."""
    s = 48
    frame = _frame(
        _attn_rows("uniform", _causal(s), 1)
        + _attn_rows("sink", _causal(s, sink=0.5), 1)
        + _attn_rows("diag", _causal(s, diagonal=0.9), 1)
    )
    d = mine_dynamics(frame)
    rows = {r["site"]: r for r in d.heads.iter_rows(named=True)}
    assert all(r["causal"] for r in rows.values())
    assert rows["uniform"]["sinks"] == [] and rows["uniform"]["sink_ratio"] == pytest.approx(1.0)
    assert rows["uniform"]["entropy"] == pytest.approx(1.0) and rows["uniform"]["kind"] == "diffuse"
    assert rows["sink"]["sinks"] == [0]
    assert rows["diag"]["sinks"] == [] and rows["diag"]["kind"] == "peaked"
    assert "StreamingLLM" in d.attention.filter(pl.col("site") == "sink")["exploit"].item()


def test_routing_loads_hot_cold_imbalance():
    """Loads are summed over steps; cold < 0.16/E, hot >= 2/E, imbalance max/mean."""
    rows = _rows("l0.topk", "route", (14, 2, 4), 28, {"route_load": [5, 0, 2, 7]}, step=0) + _rows(
        "l0.topk", "route", (14, 2, 4), 28, {"route_load": [5, 1, 1, 7]}, step=1
    )
    r = mine_dynamics(_frame(rows)).routing.row(0, named=True)
    load = np.array([10, 1, 3, 14]) / 28
    assert r["load"] == pytest.approx(load.tolist())
    assert (r["experts"], r["k"], r["tokens"]) == (4, 2, 14)
    assert r["cold"] == [1] and r["hot"] == [3]
    assert r["imbalance"] == pytest.approx(load.max() / 0.25)
    assert "1 cold expert (1)" in r["exploit"]


def test_gates_top1_and_ratio():
    """The router softmax's mean top-1 and top-2/top-1 ratio over tokens."""
    top1, top2 = np.array([0.9, 0.6, 0.95]), np.array([0.05, 0.3, 0.02])
    rows = _rows(
        "l0.gate",
        "gate",
        (3, 1, 8),
        24,
        {"attn_qmax": top1, "attn_krecv": np.zeros(8), "attn_entropy": np.full(3, math.log(8)), "gate_top2": top2},
    )
    g = mine_dynamics(_frame(rows)).gates.row(0, named=True)
    assert g["top1"] == pytest.approx(top1.mean()) and g["top2_ratio"] == pytest.approx((top2 / top1).mean())
    assert g["entropy"] == pytest.approx(1.0) and g["experts"] == 8


def test_residual_ranking_gap_and_skip():
    """‖d‖/‖h‖, the reference's gap, BI = 1 − cos (means over steps), ranked least
    influential first; skip below BI 0.005, massive at ‖d‖/‖h‖ >= 10."""
    blocks = {"l0.attn": (100.0, 0.25, 0.999), "l0.ffn": (100.0, 40000.0, 0.6), "l1.attn": (50.0, 2.0, 0.98)}
    rows = []
    for step in (0, 1):
        for site, (a, b, cos) in blocks.items():
            rows += _rows(
                site, "residual", (8, 0, 16), 128, {"res_a_sumsq": [a], "res_b_sumsq": [b], "res_cos": [cos]}, step
            )
    res = {r["site"]: r for r in mine_dynamics(_frame(rows)).residual.iter_rows(named=True)}
    assert res["l0.attn"]["rel"] == pytest.approx(0.05) and res["l0.attn"]["gap"] == pytest.approx(0.05)
    assert res["l0.ffn"]["rel"] == pytest.approx(20.0) and res["l0.ffn"]["gap"] == pytest.approx(0.05)
    assert res["l1.attn"]["bi"] == pytest.approx(0.02, abs=1e-6)
    assert [res[s]["rank"] for s in blocks] == [1, 3, 2]
    assert [res[s]["skip"] for s in blocks] == [True, False, False]
    assert [res[s]["massive"] for s in blocks] == [False, True, False]


def _mixed_frame() -> pl.DataFrame:
    rng = np.random.default_rng(1)
    probs = _softmax(rng.normal(0, 1, (2, 8, 8)))
    rows = (
        _attn_rows("l0.softmax", probs, 2)
        + _rows(
            "l0.attn", "residual", (8, 0, 4), 32, {"res_a_sumsq": [4.0], "res_b_sumsq": [0.01], "res_cos": [0.9999]}
        )
        + _rows("l0.topk", "route", (8, 1, 4), 8, {"route_load": [8, 0, 0, 0]})
    )
    return _frame(rows)


def test_report_sections_in_every_format():
    """`mine` carries the dynamics tables; text, Markdown, JSON and the findings show them."""
    report = opscope.mine(_mixed_frame())
    assert report.dynamics is not None and report.dynamics.residual.height == 1
    assert "Residual blocks, least influential first:" in opscope.render(report)
    assert "## Inference dynamics" in opscope.render(report, "markdown") and "### Attention per head" in opscope.render(
        report, "markdown"
    )
    doc = json.loads(opscope.render(report, "json"))
    assert doc["schema"] == "opscope-mine/4" and doc["dynamics"]["routing"][0]["cold"] == [1, 2, 3]
    from opscope.mining.render import render

    findings = render(report, "findings")
    assert "Routing (1 top-k sites, 4 experts in all): 3 cold, 1 hot" in findings
    assert "1 skip candidate" in findings


def test_no_dynamics_rows_leave_the_report_as_before():
    """A table of matmul sketches only has no dynamics section (JSON null)."""
    rows = _rows("mm", "lhs", (4, 4, 4), 16, {"nnz": [16.0], "sumsq": [3.0]})
    report = opscope.mine(_frame(rows))
    assert report.dynamics is None and json.loads(opscope.render(report, "json"))["dynamics"] is None
    assert "Inference dynamics" not in opscope.render(report)


def test_infer_reads_a_recorded_table(tmp_path, capsys):
    """`opscope infer CSV` prints the summary and the tables; a table without dynamics is one error line."""
    csv = tmp_path / "dyn.csv"
    _mixed_frame().write_csv(csv)
    assert main(["infer", str(csv), "--heads"]) == 0
    out = capsys.readouterr().out
    assert "Attention (1 sites, 2 heads, bidirectional)" in out and "Attention per head:" in out
    assert "least influential l0.attn" in out
    assert main(["infer", str(csv), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["residual"][0]["skip"] is True
    plain = tmp_path / "mm.csv"
    _frame(_rows("mm", "lhs", (4, 4, 4), 16, {"nnz": [16.0]})).write_csv(plain)
    assert main(["infer", str(plain)]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no attention, routing or residual sketches" in err[0]


def test_a_peaked_query_0_alone_is_not_a_causal_mask():
    """Query 0 on key 0 alone, but the last key receiving more than the last query could
    give it: no causal mask (the fair shares stay S_q/S_k)."""
    s = 8
    probs = np.full((1, s, s), 0.0)
    probs[0, :, s - 1] = 1.0  # every query on the last key ...
    probs[0, 0] = np.eye(s)[0]  # ... but query 0 on key 0
    head = mine_dynamics(_frame(_attn_rows("peaked", probs, 1))).heads.row(0, named=True)
    assert head["causal"] is False and head["sinks"] == [s - 1]
    assert head["sink_ratio"] == pytest.approx((s - 1) / (s / s))
