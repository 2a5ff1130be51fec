"""`fakequant-weights`: simulate symmetric int-`bits` weights (W8A16, W4A16) on every matmul's weight.

Matches every float, static-shaped linalg site (`opscope.ir.sites`) in a function's entry
block whose name `sites` finds (and, from Python, `keep` accepts) and whose rhs is a weight
(`opscope.ir.const_expr.is_weight`), or whose lhs is where the rhs is computed (W @ x:
`opscope.ir.weight_source.lhs_weight`); two computed operands such as q·kᵀ are skipped, logged at
info level: every eager attention has some. It feeds the weight its round trip
(`opscope.ir.fakequant`): `scope=per-channel` one scale per output channel (amax over the K
dims the indexing maps name; a convolution's filter: input channels × window),
`scope=per-tensor` one scale; `group=g` splits K into groups of g consecutive elements, each
with its own scales (per (output channel, group), or per group), refused when K % g != 0.
Rounding half away from zero; an all-zero channel stays zero. The round trip is applied to
the weight itself, under any transpose or batch broadcast the importer put between it and
the matmul (re-emitted on top), so IREE's const-eval folds it into a constant of the
weight's size: the forward pass is unchanged. A MoE's experts, gathered per token from a
weight bank (`opscope.ir.weight_source`), have the bank quantized (per expert and output channel)
where the gather reads it. `arguments=true` also quantizes a weight the
model takes as a function argument (the digits MLP): nothing folds that round trip.

    %amax = linalg.generic {...["parallel", "reduction"]} ins(%w : tensor<4x8xf32>) outs(...) -> tensor<4xf32>
    %wq = linalg.generic {...["parallel", "parallel"]} ins(%w, %amax : ...) outs(...) -> tensor<4x8xf32>
    %wt = linalg.transpose ins(%wq : tensor<4x8xf32>) outs(...) permutation = [1, 0]
    %0 = linalg.matmul ins(%x, %wt : tensor<3x8xf32>, tensor<8x4xf32>) outs(...) -> tensor<3x4xf32> loc("fc1")
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from math import prod
from typing import ClassVar, Literal

from iree.compiler import ir

from opscope.errors import OpscopeError
from opscope.ir.const_expr import memoized
from opscope.ir.fakequant import RoundTrips, check_bits
from opscope.ir.site_select import check_choice, select_sites
from opscope.ir.sites import Site, operand_dims
from opscope.ir.weight_source import Gather, gathered_weight, lhs_weight, rhs_source
from opscope.ir.weight_trace import copy_source, replay

log = logging.getLogger("opscope")

SCOPES = ("per-channel", "per-tensor")


COMPUTED = "its rhs is computed, not a constant expression (a weight)"


@dataclass(frozen=True)
class FakequantWeights:
    """Replace each matmul site's weight (a constant rhs) by its symmetric fake-quant round trip."""

    name: ClassVar[str] = "fakequant-weights"

    bits: int = 8
    group: int = 0
    scope: Literal["per-channel", "per-tensor"] = "per-channel"
    sites: str = ""
    arguments: bool = False
    keep: Callable[[Site], bool] | None = field(default=None, compare=False, metadata={"api_only": True})

    def __post_init__(self) -> None:
        """Refuse a bit width outside 2..16, an unknown scope and a negative group."""
        check_bits(self.name, self.bits)
        check_choice(self.name, "scope", self.scope, SCOPES)
        if self.group < 0:
            raise OpscopeError(f"{self.name}: option 'group' expects a group size >= 0 (0: all of K), got {self.group}")

    def plan(self, site: Site) -> tuple[ir.Value, tuple[int, ...], tuple | None, list, Gather | None, int] | str:
        """(the weight tensor to quantize, the dims amax reduces over, None) or, with groups,
        (…, the other dims sharing a scale, (K dims, group)), the copy ops from that tensor to
        the site's operand (`copy_source`), the gather reading it (a MoE's experts, else None) and
        the operand it feeds (1: the rhs; 0: the lhs of a W @ x, `lhs_weight`); or why the site
        is skipped. Raises when K is not a multiple of `group`."""
        index, source = (0, "constant") if lhs_weight(site) else (1, rhs_source(site))  # W @ x: the lhs
        rhs = site.op.operands[index]
        if source == "argument" and not self.arguments:
            return "its rhs is a function argument (arguments=true quantizes weights a model takes as inputs)"
        if source == "computed":
            return COMPUTED
        gather = gathered_weight(site) if source == "gathered" else None
        if gather is not None:  # a MoE's experts: the bank, per expert and output channel
            weight, k_dims, chain = copy_source(gather.bank, gather.k_dims)
        else:
            role = ("lhs", "rhs")[index]
            if not ir.RankedTensorType(rhs.type).rank:
                return f"rank-0 {role}"
            k_dims = operand_dims(site, role)
            if k_dims is None:
                return f"its {role} is indexed by a compound expression of its K loops"
            weight, k_dims, chain = copy_source(rhs, k_dims)
        shape = tuple(ir.RankedTensorType(weight.type).shape)
        if not self.group:
            reduced = tuple(range(len(shape))) if self.scope == "per-tensor" else k_dims
            return weight, reduced, None, chain, gather, index
        k = prod(shape[d] for d in k_dims)
        if not k_dims or k % self.group:
            raise OpscopeError(
                f"{self.name}: site '{site.name}' at {site.location}: K = {k} is not a multiple of group={self.group}"
            )
        if k_dims != tuple(range(k_dims[0], k_dims[-1] + 1)):
            return f"its weight's K dims {list(k_dims)} are not adjacent, so K has no consecutive groups"
        shared = tuple(d for d in range(len(shape)) if d not in k_dims) if self.scope == "per-tensor" else ()
        return weight, shared, (k_dims, self.group), chain, gather, index

    def apply(self, module) -> None:
        with memoized():
            plans = []
            for site in select_sites(self.name, module, self.sites, self.keep):
                plan = self.plan(site)  # every refusal before the first rewrite
                if plan == COMPUTED:  # every eager attention has some: not worth a warning each
                    log.info("%s: skipping site '%s': %s", self.name, site.name, plan)
                elif isinstance(plan, str):
                    log.warning("%s: skipping site '%s' at %s: %s", self.name, site.name, site.location, plan)
                else:
                    plans.append((site, plan))
        trips = RoundTrips(self.bits)
        for site, (weight, reduced, group, chain, gather, index) in plans:
            ip = ir.InsertionPoint(gather.gather if gather is not None else site.op)
            q, _ = trips.get(weight, reduced, site.op.location, ip, group)
            if gather is not None:
                gather.feed(replay(chain, q, ip))
            else:
                site.op.operands[index] = replay(chain, q, ip)
            for op in reversed(chain):  # the original copies, where nothing else reads them
                if any(len(list(r.uses)) for r in op.results):
                    break
                op.erase()
        if not plans:
            log.warning("%s: no matmul site with a weight rhs to quantize in this module", self.name)
