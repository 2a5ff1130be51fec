"""The opscope pass registry: pipeline argument -> lazy factory, in alphabetical order.

Each pass lives in the file named by its argument (`inject-matmul-stats` ↔
`inject_matmul_stats.py`) and is a frozen dataclass whose fields are its options.
"""

from __future__ import annotations

from typing import Callable


def _inject_matmul_stats():
    from opscope.passes.inject_matmul_stats import InjectMatmulStats

    return InjectMatmulStats


def _inject_attention_stats():
    from opscope.passes.inject_attention_stats import InjectAttentionStats

    return InjectAttentionStats


def _inject_infer_stats():
    from opscope.passes.inject_infer_stats import InjectInferStats

    return InjectInferStats


def _inject_residual_stats():
    from opscope.passes.inject_residual_stats import InjectResidualStats

    return InjectResidualStats


def _lower_opscope():
    from opscope.passes.lower_opscope import LowerOpscope

    return LowerOpscope


PASSES: dict[str, Callable[[], type]] = {
    "inject-attention-stats": _inject_attention_stats,
    "inject-infer-stats": _inject_infer_stats,
    "inject-matmul-stats": _inject_matmul_stats,
    "inject-residual-stats": _inject_residual_stats,
    "lower-opscope": _lower_opscope,
}


def get_pass_class(argument: str) -> type:
    """The pass class registered under `argument` (KeyError if none)."""
    return PASSES[argument]()
