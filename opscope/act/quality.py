"""What a rewrite costs a model's quality, measured on its outputs, by what the model does.

Each task reduces one batch's outputs to a summary (kept for the original build, so its
logits are never held twice) and compares two summaries' concatenations:

* `causal-lm` (result 0 = logits [B, S, V]; inputs: token ids, then an attention mask): at
  every position whose token and next token are real, the top-1 next token of both builds
  (**top-1 agreement**), each build's negative log-likelihood of the true next token
  (**perplexity** = exp(mean NLL), in float64) and its next-token accuracy;
* `encoder` (result 0 = hidden states [B, S, D]; mask = input 1): the mask-weighted mean
  embedding per sentence, normalized (sentence-transformers' pooling); the **cosine**
  between both builds' embeddings, and how the nearest-neighbour structure moves: the share
  of sentences whose nearest other sentence is unchanged (**NN agreement**) and the mean
  Spearman ρ of each sentence's similarity ranking of the others;
* `classifier` (result 0 = logits [B, C]; labels given): **accuracy** of both builds and
  the share of equal predictions;
* `outputs` (any model): per original result the relative L2 error ‖b − a‖/‖a‖ and the
  cosine, and the argmax agreement over the last axis of result 0.

`headline(task)` names the one number sweeps sort by (higher is better).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from opscope.errors import OpscopeError

TASKS = ("causal-lm", "encoder", "classifier", "outputs")
COUNTS = ("tokens", "sentences", "examples")  # what a comparison counted, not a quality: left out of quality lines
HEADLINE = {
    "causal-lm": "top1_agreement",
    "encoder": "cosine_mean",
    "classifier": "agreement",
    "outputs": "argmax_agreement",
}


def headline(task: str) -> str:
    """The metric a sweep sorts by for `task` (higher is better)."""
    return HEADLINE[check_task(task)]


def check_task(task: str) -> str:
    """`task`, or a one-line error listing the tasks."""
    if task not in TASKS:
        raise OpscopeError(f"unknown task '{task}' (choose one of: {', '.join(TASKS)})")
    return task


@dataclass
class Summary:
    """One build's outputs reduced for comparison, batch after batch."""

    task: str
    parts: dict[str, list[np.ndarray]]

    def add(self, inputs: list[np.ndarray], outputs: list[np.ndarray], labels: np.ndarray | None = None) -> None:
        """Reduce one batch's outputs (and its inputs: token ids and mask) into the summary."""
        for key, value in _REDUCE[self.task](inputs, outputs, labels).items():
            self.parts.setdefault(key, []).append(value)

    def get(self, key: str) -> np.ndarray | list[np.ndarray]:
        parts = self.parts.get(key, [])
        return parts if key == "outputs" else (np.concatenate(parts) if parts else np.zeros(0))


def summary(task: str) -> Summary:
    """An empty summary for `task`."""
    return Summary(check_task(task), {})


def _causal_lm(inputs, outputs, labels) -> dict[str, np.ndarray]:
    logits = outputs[0]
    if logits.ndim != 3:
        raise OpscopeError(f"causal-lm: result 0 should be logits [batch, seq, vocab], got shape {logits.shape}")
    ids = inputs[0]
    if ids.shape != logits.shape[:2]:
        raise OpscopeError(f"causal-lm: input 0 should be token ids {logits.shape[:2]}, got shape {ids.shape}")
    mask = inputs[1] if len(inputs) > 1 and inputs[1].shape == ids.shape else np.ones_like(ids)
    valid = (mask[:, :-1] != 0) & (mask[:, 1:] != 0)  # a real token whose next token is real
    x = logits[:, :-1][valid].astype(np.float64)  # [T, V]
    target = ids[:, 1:][valid]
    top = x.max(axis=1)
    lse = top + np.log(np.exp(x - top[:, None]).sum(axis=1))
    nll = lse - x[np.arange(len(target)), target]
    return {"top1": x.argmax(axis=1), "nll": nll, "target": target}


def _encoder(inputs, outputs, labels) -> dict[str, np.ndarray]:
    hidden = outputs[0]
    if hidden.ndim != 3:
        raise OpscopeError(f"encoder: result 0 should be hidden states [batch, seq, dim], got shape {hidden.shape}")
    mask = inputs[1] if len(inputs) > 1 and inputs[1].shape == hidden.shape[:2] else np.ones(hidden.shape[:2])
    w = mask.astype(np.float64)[..., None]
    emb = (hidden.astype(np.float64) * w).sum(axis=1) / np.maximum(w.sum(axis=1), 1e-9)
    return {"embedding": emb / np.maximum(np.linalg.norm(emb, axis=1, keepdims=True), 1e-12)}


def _classifier(inputs, outputs, labels) -> dict[str, np.ndarray]:
    if labels is None:
        raise OpscopeError("classifier: the evaluation set has no labels")
    return {"pred": outputs[0].reshape(len(labels), -1).argmax(axis=1), "label": np.asarray(labels)}


def _outputs(inputs, outputs, labels) -> dict[str, np.ndarray]:
    return {"outputs": [np.asarray(o) for o in outputs]}


_REDUCE = {"causal-lm": _causal_lm, "encoder": _encoder, "classifier": _classifier, "outputs": _outputs}


def compare(reference: Summary, other: Summary) -> dict[str, float]:
    """The metrics of `other` against `reference` (the original build), by their task."""
    return _COMPARE[reference.task](reference, other)


def own(reference: Summary) -> dict[str, float]:
    """The original build's own metrics (its perplexity, its accuracy)."""
    return {
        k: v
        for k, v in compare(reference, reference).items()
        if not k.startswith(("top1", "cosine", "nn_", "rank_", "agreement", "rel_l2", "argmax"))
    }


def _compare_lm(a: Summary, b: Summary) -> dict[str, float]:
    top_a, top_b, target = a.get("top1"), b.get("top1"), a.get("target")
    if len(top_a) != len(top_b):
        raise OpscopeError(f"causal-lm: {len(top_a)} vs {len(top_b)} predicted tokens: not the same inputs")
    return {
        "tokens": float(len(top_a)),
        "top1_agreement": float(np.mean(top_a == top_b)),
        "perplexity": float(np.exp(np.mean(b.get("nll")))),
        "accuracy": float(np.mean(top_b == target)),
    }


def _compare_encoder(a: Summary, b: Summary) -> dict[str, float]:
    ea, eb = a.get("embedding"), b.get("embedding")
    cos = np.sum(ea * eb, axis=1)
    sa, sb = ea @ ea.T, eb @ eb.T
    n = len(ea)
    out = {"sentences": float(n), "cosine_mean": float(cos.mean()), "cosine_min": float(cos.min())}
    if n >= 3:
        off = ~np.eye(n, dtype=bool)
        ra, rb = sa[off].reshape(n, n - 1), sb[off].reshape(n, n - 1)
        out["nn_agreement"] = float(np.mean(ra.argmax(axis=1) == rb.argmax(axis=1)))
        out["rank_rho"] = float(np.mean([_spearman(x, y) for x, y in zip(ra, rb)]))
    return out


def _spearman(x: np.ndarray, y: np.ndarray) -> float:
    """Spearman's ρ of two rows (no ties in similarities of real embeddings)."""
    rx, ry = np.argsort(np.argsort(x)), np.argsort(np.argsort(y))
    rx, ry = rx - rx.mean(), ry - ry.mean()
    denom = np.sqrt((rx * rx).sum() * (ry * ry).sum())
    return float((rx * ry).sum() / denom) if denom else 1.0


def _compare_classifier(a: Summary, b: Summary) -> dict[str, float]:
    pa, pb, label = a.get("pred"), b.get("pred"), a.get("label")
    return {"examples": float(len(pa)), "agreement": float(np.mean(pa == pb)), "accuracy": float(np.mean(pb == label))}


def _compare_outputs(a: Summary, b: Summary) -> dict[str, float]:
    rel, cos, agree = [], [], []
    for batch_a, batch_b in zip(a.get("outputs"), b.get("outputs")):
        for i, (x, y) in enumerate(zip(batch_a, batch_b)):
            x64, y64 = x.astype(np.float64).ravel(), y.astype(np.float64).ravel()
            norm = np.linalg.norm(x64)
            rel.append(np.linalg.norm(y64 - x64) / norm if norm else float(np.linalg.norm(y64) > 0))
            denom = norm * np.linalg.norm(y64)
            cos.append(float(x64 @ y64 / denom) if denom else float(norm == np.linalg.norm(y64)))
            if i == 0 and x.ndim >= 1 and x.shape[-1] > 1:
                agree.append(np.mean(x.argmax(axis=-1) == y.argmax(axis=-1)))
    out = {"rel_l2_max": float(max(rel, default=0.0)), "cosine_min": float(min(cos, default=1.0))}
    if agree:
        out["argmax_agreement"] = float(np.mean(agree))
    return out


_COMPARE = {
    "causal-lm": _compare_lm,
    "encoder": _compare_encoder,
    "classifier": _compare_classifier,
    "outputs": _compare_outputs,
}
