"""`skip-residual-blocks`: bypass the named residual blocks, so the model runs without them.

Matches the residual adds `r = h + d` of `opscope.ir.dynamics` (the stream `h` skips a
block whose output is `d`), named as `inject-residual-stats` names them
(`model.layers.17.ffn`), and for each one named in `blocks` (names or 0-based ordinals,
comma-separated) replaces every use of `r` by `h` and erases the add; the block's branch is
then dead and erased with it (tensor-only ops nothing reads: its matmuls, norms, weight
transposes), so the rewritten module's static cost (`opscope bytes`) is what the skip
saves. The reference's `skip_residual_blocks` (§2.8) re-points users the same way and
leaves the dead branch to the compiler. Original results keep their indices; the IR is
verified afterwards and a rewrite that would leave it invalid is refused naming the block.

    %r = linalg.generic {...} ins(%h, %d : ...) { arith.addf } -> tensor<8x16xf32> loc("layers.0")
    %y = linalg.matmul ins(%r, %w : ...)          // before
    %y = linalg.matmul ins(%h, %w : ...)          // after: %r, %d and d's branch are gone
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import ClassVar

from opscope.ir.blocks import choose_blocks, erase_dead, stream_operand, verify_or_refuse

log = logging.getLogger("opscope")


@dataclass(frozen=True)
class SkipResidualBlocks:
    """Bypass the named residual blocks (their adds' users read the stream) and erase their branches."""

    name: ClassVar[str] = "skip-residual-blocks"

    blocks: str = ""

    def apply(self, module) -> None:
        chosen = choose_blocks(self.name, module, self.blocks, everything_if_empty=False)
        streams = [stream_operand(site) for site in chosen]  # before any rewrite: a skip re-points the next add
        entries = set()
        for site, index in zip(chosen, streams):
            add = site.op
            add.results[0].replace_all_uses_with(add.operands[index])
            entries.add(add.parent)
            add.erase()
        erased = sum(erase_dead(fn.regions[0].blocks[0]) for fn in entries)
        log.info(
            "%s: skipped %d blocks (%s), erased %d ops of their branches",
            self.name,
            len(chosen),
            ", ".join(s.name for s in chosen),
            erased,
        )
        verify_or_refuse(self.name, module, ", ".join(s.name for s in chosen))
