"""How much of a module's work the taps see: the FLOPs of its tapped sites against every
other kind of op, from the cost model, so no share is ever taken of the tapped part alone.

A ResNet whose convolutions are not tapped, or a transformer whose attention is a fused
op, would otherwise read as "the tapped matmuls are the model". `coverage` splits the
module's FLOPs (per call, `analysis.cost.analyze`) into the tapped sites' and the rest's,
by op label (`conv_2d_nchw_fchw`, `softmax`, `generic<addf>`, ...); ops whose FLOPs the
cost model cannot know are counted apart, never guessed. A tapped transposed convolution counts
PyTorch's FLOPs (`opscope.ir.sites`); the products its lowering takes with the zeros it spreads
its input with are a row of their own.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from iree.compiler import ir

from opscope.analysis.cost import analyze
from opscope.ir.sites import find_sites

INSERTED_ZEROS = "zeros a transposed convolution inserts"


@dataclass(frozen=True)
class Coverage:
    """The module's FLOPs per call, what the tapped sites hold of them, and the rest by op kind."""

    module_flops: int  # every op whose FLOPs are known
    tapped_flops: int
    untapped: dict[str, int] = field(default_factory=dict)  # op label -> FLOPs, largest first
    unknown_ops: int = 0  # ops whose FLOPs the cost model cannot know (in neither total)

    @property
    def tapped_share(self) -> float:
        return self.tapped_flops / self.module_flops if self.module_flops else 0.0


def coverage(module: ir.Module, tapped: Iterable[str]) -> Coverage:
    """The coverage of `module` (untapped) when the sites named `tapped` are tapped."""
    names = set(tapped)
    cost = analyze(module)
    functions = {ir.StringAttr(op.attributes["sym_name"]).value: op for op in _functions(module)}
    sites = [s for s in find_sites(module) if s.name in names]
    tapped_flops, untapped, unknown = 0, {}, 0
    for fn_cost in cost.functions:
        fn = functions[fn_cost.name]
        body = list(fn.regions[0].blocks[0].operations) if len(fn.regions[0].blocks) else []
        for op, c in zip(body, fn_cost.ops):
            site = next((s for s in sites if op.operation == s.op), None)
            if c.flops is None:
                unknown += 1
            elif site is not None:
                counted = min(site.flops, c.flops) if site.kind.startswith("conv_transpose") else c.flops
                tapped_flops += counted
                if c.flops > counted:  # a transposed convolution also multiplies the zeros it inserts
                    untapped[INSERTED_ZEROS] = untapped.get(INSERTED_ZEROS, 0) + c.flops - counted
            elif c.flops:
                untapped[c.label] = untapped.get(c.label, 0) + c.flops
    ranked = dict(sorted(untapped.items(), key=lambda kv: (-kv[1], kv[0])))
    return Coverage(cost.total_flops, tapped_flops, ranked, unknown)


def _functions(module: ir.Module) -> list[ir.Operation]:
    return [op.operation for op in module.body.operations if op.operation.name == "func.func"]
