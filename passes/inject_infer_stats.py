"""`inject-infer-stats`: record how peaked attention is, which keys take its mass, and how
tokens are routed to experts (Tier 1 of the reference, §2.8).

Sites are `opscope.ir.dynamics`'s softmax and routing sites:

* a softmax over attention scores (role `attn`): `attn_qmax` (per query its peak
  probability), `attn_krecv` (per key the mass it receives), `attn_entropy` (per query);
* a softmax over a router's logits (role `gate`): the same three, and `gate_top2` (per
  token the second gate weight, so top-1/top-2 = qmax / top2);
* a top-k over expert scores (role `route`): `route_load`, the E-bin histogram of the
  chosen expert indices (`options = {experts = E}`).

A softmax over another axis than the last, a top-k whose expert count is unknown and a
dynamic shape are skipped with a warning naming the op and why. Like every inject pass it
only says *what* is recorded; `lower-opscope` computes it (`dialect/dynamics.py`).

    %p = linalg.softmax dimension(2) ins(%s : tensor<4x8x8xf32>) outs(%e : ...) -> tensor<4x8x8xf32> loc("layer.0.attn")
    "opscope.stat"(%p) {kind = "attn_qmax", options = {}, role = "attn", site = "layer.0.attn.softmax"} : (tensor<4x8x8xf32>) -> ()
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import ClassVar

from opscope.ir.dynamics import (
    GATE,
    ROUTING,
    SOFTMAX,
    DynamicsSite,
    attention_stats,
    insert_stats,
    select_sites,
    tap_each,
)

log = logging.getLogger("opscope")


@dataclass(frozen=True)
class InjectInferStats:
    """Insert attention-probability and routing statistics at every softmax and top-k."""

    name: ClassVar[str] = "inject-infer-stats"

    softmax: bool = True
    routing: bool = True
    entropy: bool = True
    sites: str = ""
    keep: Callable[[DynamicsSite], bool] | None = field(default=None, compare=False, metadata={"api_only": True})

    def kinds(self) -> tuple[str, ...]:
        return tuple(k for k, on in ((SOFTMAX, self.softmax), (ROUTING, self.routing)) if on)

    def selected(self, module) -> list[DynamicsSite]:
        """The sites this pass taps (after the name regex and the keep predicate); skipped ops
        are logged."""
        return select_sites(self.name, module, self.kinds(), self.sites, self.keep)

    def apply(self, module) -> None:
        tap_each(self.name, self.selected(module), "softmax or top-k sites", self.tap)

    def tap(self, site: DynamicsSite) -> bool:
        options = {"experts": site.n} if site.kind == ROUTING else {}
        if site.kind == ROUTING and site.axis >= 0:
            options["axis"] = site.axis  # a mask: its experts' dim
        insert_stats(site, site.values[0], self.stats_of(site), site.after_values(), options)
        return True

    def stats_of(self, site: DynamicsSite) -> tuple[str, ...]:
        if site.kind == ROUTING:
            return ("route_load",)
        return attention_stats(self.entropy) + (("gate_top2",) if site.role == GATE else ())
