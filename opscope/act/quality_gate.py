"""A quality budget for a specialized model: gates on its end-to-end metrics against the original.

`--quality` is either one number Q, the share of the task's headline metric a build may lose
(`headline >= 1 - Q`: top-1 agreement for a causal LM, mean embedding cosine for an encoder,
`opscope.act.quality`), or gates written out, comma-separated: `metric>=value` or
`metric<=value`, a value ending in `x` relative to the original build's own metric
(`perplexity<=1.02x`: within 2 % of the original's perplexity). Issue 36's budgets:

    cosine_mean>=0.999,nn_agreement>=0.98          MiniLM (embedding cosine, nearest neighbours)
    top1_agreement>=0.97,perplexity<=1.02x         SmolLM2 (top-1 agreement, perplexity)
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from opscope.errors import OpscopeError

_GATE = re.compile(r"^\s*([a-z0-9_]+)\s*(>=|<=)\s*([0-9.eE+-]+)(x?)\s*$")
METRICS = {  # what `opscope.act.quality.compare` measures per task, and which the original has of its own
    "causal-lm": (("top1_agreement", "perplexity", "accuracy"), ("perplexity", "accuracy")),
    "encoder": (("cosine_mean", "cosine_min", "nn_agreement", "rank_rho"), ()),
    "classifier": (("agreement", "accuracy"), ("accuracy",)),
    "outputs": (("rel_l2_max", "cosine_min", "argmax_agreement"), ()),
}


@dataclass(frozen=True)
class Gate:
    """metric >= value or metric <= value; `relative`: value times the original build's own metric."""

    metric: str
    op: str
    value: float
    relative: bool = False

    def bound(self, own: dict[str, float]) -> float:
        """The gate's bound in the metric's units (a relative gate scales the original's value)."""
        return self.value * own[self.metric] if self.relative else self.value

    def holds(self, metrics: dict[str, float], own: dict[str, float]) -> bool:
        got, bound = metrics[self.metric], self.bound(own)
        return got >= bound if self.op == ">=" else got <= bound

    def __str__(self) -> str:
        return f"{self.metric}{self.op}{self.value:g}{'x' if self.relative else ''}"


def parse_quality(quality: str | float, task: str) -> tuple[Gate, ...]:
    """The gates `quality` states for `task`: a number Q is `headline >= 1 - Q`; else
    `metric>=v,metric<=v…` over the task's metrics, a relative `…x` only for a metric the original
    has of its own (perplexity, accuracy). One-line errors name what is wrong and the choices."""
    from opscope.act.quality import headline as headline_of

    headline = headline_of(task)
    metrics, own_metrics = METRICS[task]
    if isinstance(quality, (int, float)) or re.fullmatch(r"\s*[0-9.eE+-]+\s*", str(quality)):
        q = float(quality)
        if not 0 <= q < 1:
            raise OpscopeError(
                f"quality expects a share of {headline} to lose in [0, 1), or gates like {headline}>=0.99; got {quality}"
            )
        return (Gate(headline, ">=", 1.0 - q),)
    gates = []
    for part in str(quality).split(","):
        m = _GATE.match(part)
        if m is None:
            raise OpscopeError(
                f"quality gate '{part.strip()}' is not metric>=value or metric<=value "
                f"(e.g. {headline}>=0.99, perplexity<=1.02x)"
            )
        metric, op, value, rel = m.groups()
        if metric not in metrics:
            raise OpscopeError(
                f"quality gate '{part.strip()}': no metric {metric} for this task (choose from {', '.join(metrics)})"
            )
        if rel and metric not in own_metrics:
            raise OpscopeError(
                f"quality gate '{part.strip()}': {metric} has no value of the original's own to be relative to "
                f"(relative gates: {', '.join(own_metrics) or 'none for this task'})"
            )
        try:
            gates.append(Gate(metric, op, float(value), bool(rel)))
        except ValueError:
            raise OpscopeError(f"quality gate '{part.strip()}': {value} is not a number") from None
    return tuple(gates)


def failures(gates: tuple[Gate, ...], metrics: dict[str, float], own: dict[str, float]) -> list[str]:
    """Each gate `metrics` miss, in words: 'nn_agreement 0.953 < 0.98'."""
    out = []
    for g in gates:
        if not g.holds(metrics, own):
            want = "<" if g.op == ">=" else ">"
            out.append(f"{g.metric} {metrics[g.metric]:.4g} {want} {g.bound(own):.4g}")
    return out
