"""`gate-residual-blocks`: one runtime gate per residual block, so one build serves a whole skip sweep.

Matches the residual adds `r = h + d` of `opscope.ir.dynamics` named in `blocks` (names or
0-based ordinals, comma-separated; empty or `*` = every block) and rewrites each into
`r = h + g[i] · d`, where `g` is a new last argument of the function, `tensor<Nxf32>`, one
gate per chosen block in IR order; its argument attribute `opscope.gates` lists the block
names. Gates of 1 compute the original model bit for bit (1 · d = d), gates of 0 what
`skip-residual-blocks` computes (h + 0 · d = h for every finite d), so a sensitivity sweep
(one block off at a time, then the greedy curve) compiles once instead of once per
configuration; the FLOPs a skip saves are read from the real skip's module. Original
results keep their indices.

    %r = linalg.generic {...} ins(%h, %d : ...) { arith.addf } -> tensor<8x16xf32> loc("layers.0")
    // after, with %gates: tensor<2xf32> {opscope.gates = ["layers.0.attn", "layers.0.ffn"]}:
    %g = tensor.extract %gates[%c0] : tensor<2xf32>
    %r = linalg.generic {...} ins(%h, %d, %g : tensor<8x16xf32>, tensor<8x16xf32>, f32) {
      %gd = arith.mulf %g, %d; %s = arith.addf %h, %gd } -> tensor<8x16xf32> loc("layers.0")
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from iree.compiler import ir
from iree.compiler.dialects import arith, linalg, tensor

from opscope.errors import OpscopeError
from opscope.ir.blocks import choose_blocks, stream_operand, verify_or_refuse

GATES_ATTR = "opscope.gates"


@dataclass(frozen=True)
class GateResidualBlocks:
    """Scale each named residual block's output by a runtime gate, a new last function argument."""

    name: ClassVar[str] = "gate-residual-blocks"

    blocks: str = ""

    def apply(self, module) -> None:
        chosen = choose_blocks(self.name, module, self.blocks, everything_if_empty=True)
        if not chosen:
            raise OpscopeError(f"{self.name}: this module has no residual adds to gate")
        functions = {s.op.parent for s in chosen}
        if len(functions) > 1:
            raise OpscopeError(
                f"{self.name}: the chosen blocks are in {len(functions)} functions; gate one "
                "function's blocks at a time (name them with blocks=...)"
            )
        fn = chosen[0].op.parent
        streams = [stream_operand(site) for site in chosen]
        with fn.location:
            gates = _add_gates_argument(fn, [s.name for s in chosen])
        for i, (site, index) in enumerate(zip(chosen, streams)):
            _gate(site.op, index, gates, i)
        verify_or_refuse(self.name, module, ", ".join(s.name for s in chosen))


def _add_gates_argument(fn: ir.Operation, names: list[str]) -> ir.Value:
    """Append `%gates: tensor<len(names)xf32> {opscope.gates = names}` to `fn`'s arguments."""
    ty = ir.RankedTensorType.get([len(names)], ir.F32Type.get())
    entry = fn.regions[0].blocks[0]
    n_args = len(entry.arguments)
    gates = entry.add_argument(ty, fn.location)
    fn_type = ir.FunctionType(ir.TypeAttr(fn.attributes["function_type"]).value)
    fn.attributes["function_type"] = ir.TypeAttr.get(
        ir.FunctionType.get(list(fn_type.inputs) + [ty], list(fn_type.results))
    )
    old = (
        list(ir.ArrayAttr(fn.attributes["arg_attrs"]))
        if "arg_attrs" in fn.attributes
        else [ir.DictAttr.get({})] * n_args
    )
    mine = ir.DictAttr.get({GATES_ATTR: ir.ArrayAttr.get([ir.StringAttr.get(n) for n in names])})
    fn.attributes["arg_attrs"] = ir.ArrayAttr.get(old + [mine])
    return gates


def _gate(add: ir.Operation, stream: int, gates: ir.Value, i: int) -> None:
    """Replace the add `h + d` by `h + gates[i] · d`, at the add's place and location."""
    h, d = add.operands[stream], add.operands[1 - stream]
    ty = ir.RankedTensorType(add.results[0].type)
    elem = ty.element_type
    with add.location, ir.InsertionPoint(add):
        index = arith.ConstantOp(ir.IndexType.get(), i).result
        g = tensor.ExtractOp(gates, [index]).result
        if elem != g.type:
            g = arith.TruncFOp(elem, g).result
        init = tensor.EmptyOp(list(ty.shape), elem).result
        rank = ty.rank
        same = ir.AffineMap.get_identity(rank)
        scalar = ir.AffineMap.get(rank, 0, [])
        parallel = ir.Attribute.parse("#linalg.iterator_type<parallel>")
        op = ir.Operation.create(
            "linalg.generic",
            results=[ty],
            operands=[h, d, g, init],
            attributes={
                "indexing_maps": ir.ArrayAttr.get([ir.AffineMapAttr.get(m) for m in (same, same, scalar, same)]),
                "iterator_types": ir.ArrayAttr.get([parallel] * rank),
                "operandSegmentSizes": ir.DenseI32ArrayAttr.get([3, 1]),
            },
            regions=1,
        )
        body = op.regions[0].blocks.append(elem, elem, elem, elem)
        with ir.InsertionPoint(body):
            hv, dv, gv, _ = body.arguments
            scaled = arith.MulFOp(gv, dv).result
            linalg.YieldOp([arith.AddFOp(hv, scaled).result])
    add.results[0].replace_all_uses_with(op.results[0])
    add.erase()
