"""The opscope pass registry: pipeline argument -> lazy factory, in alphabetical order.

Each pass lives in the file named by its argument (`inject-matmul-stats` ↔
`inject_matmul_stats.py`) and is a frozen dataclass whose fields are its options.
"""

from __future__ import annotations

from collections.abc import Callable


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


def _sample_rows():
    from opscope.passes.sample_rows import SampleRows

    return SampleRows


def _split_weight_stats():
    from opscope.passes.split_weight_stats import SplitWeightStats

    return SplitWeightStats


def _unfuse():
    from opscope.passes.unfuse import Unfuse

    return Unfuse


def _dump_tensors():
    from opscope.passes.dump_tensors import DumpTensors

    return DumpTensors


def _expose_all_ops():
    from opscope.passes.expose_all_ops import ExposeAllOps

    return ExposeAllOps


def _externalize_weights():
    from opscope.passes.externalize_weights import ExternalizeWeights

    return ExternalizeWeights


def _fakequant_activations():
    from opscope.passes.fakequant_activations import FakequantActivations

    return FakequantActivations


def _fakequant_weights():
    from opscope.passes.fakequant_weights import FakequantWeights

    return FakequantWeights


def _gate_residual_blocks():
    from opscope.passes.gate_residual_blocks import GateResidualBlocks

    return GateResidualBlocks


def _skip_residual_blocks():
    from opscope.passes.skip_residual_blocks import SkipResidualBlocks

    return SkipResidualBlocks


def _extract_site():
    from opscope.passes.extract_site import ExtractSite

    return ExtractSite


def _factor_weight():
    from opscope.passes.factor_weight import FactorWeight

    return FactorWeight


def _quantize_weight():
    from opscope.passes.quantize_weight import QuantizeWeight

    return QuantizeWeight


def _sparse_weight():
    from opscope.passes.sparse_weight import SparseWeight

    return SparseWeight


def _skip_zero_channels():
    from opscope.passes.skip_zero_channels import SkipZeroChannels

    return SkipZeroChannels


PASSES: dict[str, Callable[[], type]] = {
    "dump-tensors": _dump_tensors,
    "expose-all-ops": _expose_all_ops,
    "externalize-weights": _externalize_weights,
    "extract-site": _extract_site,
    "factor-weight": _factor_weight,
    "fakequant-activations": _fakequant_activations,
    "fakequant-weights": _fakequant_weights,
    "gate-residual-blocks": _gate_residual_blocks,
    "inject-attention-stats": _inject_attention_stats,
    "inject-infer-stats": _inject_infer_stats,
    "inject-matmul-stats": _inject_matmul_stats,
    "inject-residual-stats": _inject_residual_stats,
    "lower-opscope": _lower_opscope,
    "quantize-weight": _quantize_weight,
    "sample-rows": _sample_rows,
    "skip-residual-blocks": _skip_residual_blocks,
    "skip-zero-channels": _skip_zero_channels,
    "sparse-weight": _sparse_weight,
    "split-weight-stats": _split_weight_stats,
    "unfuse": _unfuse,
}


def get_pass_class(argument: str) -> type:
    """The pass class registered under `argument` (KeyError if none)."""
    return PASSES[argument]()
