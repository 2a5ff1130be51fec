"""The bytes a model's matmul weights take at rest, as a rewrite would store them.

A skip drops the weights of the blocks it removes; `fakequant-weights` simulates storing a
weight in `bits` bits with one f32 scale per output channel (or group, or tensor): a real
int8/int4 kernel reads that many bytes, which is what quantization saves (its FLOPs are
the same, and the simulation's round trips add some). Counted per distinct weight tensor
(a tied embedding once; a MoE's expert bank once, however many tokens gather from it), at its
element type's width when not quantized, as stored: a weight widened or dequantized from
constants before its matmul (bf16 → f32, int8 codes × scales) counts the constants it reads. A
weight on the left of its matmul (W @ x) counts too, and its right operand is then the activation
(found by the generated-model tests: `torch.einsum` may put the weight there).
"""

from __future__ import annotations

from math import prod

from iree.compiler import ir

from opscope.ir.const_expr import captures, is_const_expr, is_weight, owner
from opscope.pipeline.textual import parse_pipeline, run_pipeline

ELEMENT_BYTES = {"f64": 8, "f32": 4, "f16": 2, "bf16": 2, "i64": 8, "i32": 4, "i16": 2, "i8": 1}


def weight_bytes(module, pipeline: str = "") -> int:
    """Storage bytes of the distinct weights `module`'s matmul sites read after `pipeline`, with the
    weights its `fakequant-weights` passes select counted at their bits (+ an f32 per scale).
    Rewrites `module` in place (all but the fake-quant passes, whose plans are read instead)."""
    from opscope.ir.site_select import select_sites
    from opscope.ir.sites import is_convolution, operand_dims
    from opscope.ir.weight_source import gathered_weight, rhs_source
    from opscope.ir.weight_trace import copy_source
    from opscope.passes.fakequant_weights import FakequantWeights

    elements = parse_pipeline(pipeline).elements if pipeline else ()
    rest = [e for e in elements if not isinstance(e, FakequantWeights)]
    if rest:
        from opscope.pipeline.textual import Pipeline

        run_pipeline(module, Pipeline(tuple(rest)))
    stored: dict[ir.Value, int] = {}  # values hash by identity
    for site in select_sites("weights", module, "", None):
        lhs = site.op.operands[0]
        if not is_convolution(site) and is_weight(lhs):  # W @ x: the weight on the left (an einsum's order)
            weight, _, _ = copy_source(lhs, operand_dims(site, "lhs") or ())
            _at_rest(weight, stored)
            if not is_weight(site.op.operands[1]):
                continue  # the rhs is the activation, an argument included
        source = rhs_source(site)
        if source == "computed":
            continue
        if source == "gathered":  # a MoE's experts: the bank, once
            g = gathered_weight(site)
            weight, _, _ = copy_source(g.bank, g.k_dims)
        else:
            weight, _, _ = copy_source(site.op.operands[1], operand_dims(site, "rhs") or ())
        _at_rest(weight, stored)
    for fq in (e for e in elements if isinstance(e, FakequantWeights)):
        for site in select_sites(fq.name, module, fq.sites, fq.keep):
            plan = fq.plan(site)
            if isinstance(plan, str):
                continue
            weight, reduced, group, *_ = plan
            shape = list(ir.RankedTensorType(weight.type).shape)
            numel = prod(shape)
            if group is None:
                scales = numel // max(1, prod(shape[d] for d in reduced))
            else:
                scales = numel // group[1] // max(1, prod(shape[d] for d in reduced))
            stored[weight] = (numel * fq.bits + 7) // 8 + 4 * scales
    return sum(stored.values())


def _at_rest(weight: ir.Value, stored: dict[ir.Value, int]) -> None:
    """Record the tensors `weight` is stored as: itself, or, for a weight computed from constants (a
    bf16 weight widened, int8 codes times scales), the constants it reads (each once), so a weight
    stored narrow counts its stored bytes (found by the generated-model tests: a bf16 weight counted
    at f32, an int8 one at 4x)."""
    if isinstance(weight, ir.BlockArgument) or not is_const_expr(weight):
        stored[weight] = _bytes(weight)
        return
    op = owner(weight)
    if op.name in ("arith.constant", "util.global.load"):
        stored[weight] = _bytes(weight)
        return
    read = list(op.opview.inputs) if hasattr(op.opview, "inputs") else list(op.operands)
    for value in [*read, *captures(op)]:  # the inputs, not an init's empty tensor
        if isinstance(value.type, ir.RankedTensorType) and is_const_expr(value):
            _at_rest(value, stored)


def _bytes(value: ir.Value) -> int:
    ty = ir.RankedTensorType(value.type)
    return prod(ty.shape) * ELEMENT_BYTES.get(str(ty.element_type), 4)
