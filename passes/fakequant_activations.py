"""`fakequant-activations`: simulate symmetric int-`bits` activations (W8A8) on every matmul's lhs.

Matches every float, static-shaped linalg site (`opscope.ir.sites`) in a function's entry
block whose name `sites` finds (and, from Python, `keep` accepts), and replaces its lhs
with the reference's round trip (§2.7, `opscope.ir.fakequant`): `scope=per-token` takes one
scale per row, amax over the lhs dims the op's indexing maps index by its K loops (not
assumed last: a transposed or batched lhs is read right); `scope=per-channel` one scale
per feature channel, amax over every other dim. Rounding is half away from zero (the
reference's); an all-zero row stays exactly zero where the reference makes NaN. Sites
reading the same lhs share one round trip; results keep their indices and types.
A convolution's input is quantized per input channel (`per-channel`); `per-token` has no
im2col row in the input tensor, so convolutions are skipped with a warning, as are rank-0/1
lhs, integer, dynamic and non-linalg sites. Like the reference (whose fused graphs' MatMuls are
the linear projections), only sites whose rhs is a weight (a constant, or a function argument
in a model that takes its weights as inputs) are quantized: an eager attention's q·kᵀ and p·v
(rhs computed) stay in float unless `computed-rhs=true`. A MoE's experts, whose lhs is a per-token
copy of a stored weight bank (`opscope.ir.weight_source`), and a W @ x whose lhs is the weight
(`lhs_weight`), have their other operand quantized (x's tokens: the rhs dims K does not index).

    %amax = linalg.generic {...["parallel", "reduction"]} ins(%x : tensor<3x8xf32>) outs(...) -> tensor<3xf32>
    %xq = linalg.generic {...["parallel", "parallel"]} ins(%x, %amax : ...) outs(...) -> tensor<3x8xf32>
    %0 = linalg.matmul ins(%xq, %w : tensor<3x8xf32>, tensor<8x4xf32>) outs(...) -> tensor<3x4xf32> loc("fc1")
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import ClassVar, Literal

from iree.compiler import ir

from opscope.ir.fakequant import RoundTrips, check_bits
from opscope.ir.site_select import check_choice, select_sites
from opscope.ir.sites import Site, is_convolution, operand_dims
from opscope.ir.weight_source import gathered_weight, lhs_weight, rhs_source

log = logging.getLogger("opscope")

ROLES = ("lhs", "rhs")

SCOPES = ("per-token", "per-channel")


@dataclass(frozen=True)
class FakequantActivations:
    """Replace each matmul site's lhs by its symmetric fake-quant round trip (per token or per channel)."""

    name: ClassVar[str] = "fakequant-activations"

    scope: Literal["per-token", "per-channel"] = "per-token"
    bits: int = 8
    sites: str = ""
    computed_rhs: bool = False
    keep: Callable[[Site], bool] | None = field(default=None, compare=False, metadata={"api_only": True})

    def __post_init__(self) -> None:
        """Refuse a scope or a bit width the round trip has no meaning for."""
        check_choice(self.name, "scope", self.scope, SCOPES)
        check_bits(self.name, self.bits)

    def reduced_dims(self, site: Site, role: str = "lhs") -> tuple[int, ...] | str:
        """The dims of the activation (`role`: lhs, or rhs where the lhs is the weight: a MoE's
        experts gathered as lhs, a W @ x) amax reduces over at `site`, or why the site is skipped."""
        rank = ir.RankedTensorType(site.op.operands[ROLES.index(role)].type).rank
        if rank < 2:
            return f"rank-{rank} {role} has no token and channel axes to scale apart"
        conv = is_convolution(site)
        if conv and self.scope == "per-token":
            return "a convolution's input has no per-token rows (use scope=per-channel: one scale per input channel)"
        if conv:  # per input channel (and depthwise/group channel): amax over batch and pixels
            channels = operand_dims(site, "lhs", "channel")
            return tuple(d for d in range(rank) if d not in channels)
        k_dims = operand_dims(site, role)
        if k_dims is None:
            return f"its {role} is indexed by a compound expression of its K loops"
        if self.scope == "per-token":
            return k_dims
        return tuple(d for d in range(rank) if d not in k_dims)

    def apply(self, module) -> None:
        trips = RoundTrips(self.bits)
        done, products = 0, []
        for site in select_sites(self.name, module, self.sites, self.keep):
            source = rhs_source(site)
            weight_first = lhs_weight(site)  # W @ x: x is the rhs
            if not self.computed_rhs and source == "computed" and not weight_first:
                products.append(site.name)  # expected in every eager attention: one line for all below
                continue
            gather = gathered_weight(site) if source == "gathered" else None
            index = 0 if gather is None else gather.activation  # a MoE's experts: the operand not gathered
            index = 1 if weight_first else index
            reduced = self.reduced_dims(site, ROLES[index])
            if isinstance(reduced, str):
                log.warning("%s: skipping site '%s' at %s: %s", self.name, site.name, site.location, reduced)
                continue
            x = site.op.operands[index]
            q, _ = trips.get(x, reduced, site.op.location, ir.InsertionPoint(site.op))
            site.op.operands[index] = q
            done += 1
        if products:
            log.warning(
                "%s: %d product%s of two computed tensors stay%s float (%s; an eager attention's q·kᵀ and "
                "p·v): computed-rhs=true quantizes them too",
                self.name,
                len(products),
                "s" if len(products) > 1 else "",
                "" if len(products) > 1 else "s",
                _listed(products),
            )
        if not done:
            log.warning("%s: no matmul sites to quantize in this module", self.name)


def _listed(names: list[str], most: int = 3) -> str:
    """`a, b, c and 5 more`."""
    return ", ".join(names[:most]) + (f" and {len(names) - most} more" if len(names) > most else "")
