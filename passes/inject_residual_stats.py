"""`inject-residual-stats`: record how much each residual block changes the residual stream.

At every residual add `h + d` (`opscope.ir.dynamics`: the stream `h` skips a block whose
output is `d`, the rule the cone miner uses; named `<module path>.attn` / `.ffn`) it
records, role `residual`, of the pair (h, d): `res_a_sumsq` = Σh² and `res_b_sumsq` = Σd²
(the reference's, §2.9: its gap √(min/max) flags near-identity blocks) and `res_cos`, the
mean over tokens of cos(h, h + d), so block influence BI = 1 − res_cos (ShortGPT) ranks the
blocks from one run.

Option `every-add` taps every add of two same-typed data tensors instead (the reference's
"every 2-input add" rule): bias adds and adds inside a block included, so expect more and
noisier sites. Adds whose operands differ in type from the result (a broadcast) or have a
dynamic shape are skipped with a warning.

    %r = linalg.generic {...} ins(%h, %d : ...) { arith.addf } -> tensor<2x8x32xf32> loc("layers.0")
    "opscope.stat"(%h, %d) {kind = "res_cos", options = {}, role = "residual", site = "layers.0.attn"} : (tensor<2x8x32xf32>, tensor<2x8x32xf32>) -> ()
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import ClassVar

from opscope.dialect.dynamics import RESIDUAL_KINDS
from opscope.ir.dynamics import RESIDUAL, DynamicsSite, insert_stats, select_sites, tap_each

log = logging.getLogger("opscope")


@dataclass(frozen=True)
class InjectResidualStats:
    """Insert Σh², Σd² and mean cos(h, h + d) at every residual add."""

    name: ClassVar[str] = "inject-residual-stats"

    every_add: bool = False
    sites: str = ""
    keep: Callable[[DynamicsSite], bool] | None = field(default=None, compare=False, metadata={"api_only": True})

    def selected(self, module) -> list[DynamicsSite]:
        """The residual adds this pass taps (after the name regex and the keep predicate)."""
        return select_sites(self.name, module, (RESIDUAL,), self.sites, self.keep, every_add=self.every_add)

    def apply(self, module) -> None:
        tap_each(self.name, self.selected(module), "residual adds", self.tap)

    def tap(self, site: DynamicsSite) -> bool:
        insert_stats(site, tuple(site.values), RESIDUAL_KINDS, site.after_values())
        return True
