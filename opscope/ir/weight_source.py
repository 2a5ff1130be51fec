"""Where a site's weight comes from (`rhs_source`): a constant, a function argument, a MoE's expert
bank gathered per token, or nowhere (a product of two computed tensors).

transformers' `batched_mm` experts (Mixtral, Qwen-MoE, OLMoE, DeepSeek) index their weight
bank `[E, out, in]` by each token's chosen expert; torch-mlir lowers the `index` as a
`linalg.generic` whose body reads the bank with `tensor.extract` at a computed expert index
and the loop indices of the other dims, and the batched matmul reads that per-token copy
(often as its lhs, the activation as its rhs):

    %g = linalg.generic ins(%idx : tensor<32xi64>) outs(...) {
      %e = arith.index_cast (select(%i < 0, %i + 4, %i))
      %w = tensor.extract %bank[%e, linalg.index 1, linalg.index 2] : tensor<4x128x32xf32>
      linalg.yield %w }                                        -> tensor<32x128x32xf32>
    %y = linalg.batch_matmul ins(%g, %x : tensor<32x128x32xf32>, tensor<32x32x1xf32>) ...

The weight is the bank, stored once: counted once, fake-quantized per expert and output
channel on the bank (IREE folds that round trip into a constant of the bank's size), read
and replaced whole (`opscope.ir.weights`: its [E·out, K] matrix). A replacement is fed to
the `tensor.extract` (`Gather.feed`), built before the gather.
"""

from __future__ import annotations

from dataclasses import dataclass

from iree.compiler import ir

from opscope.ir.const_expr import is_weight, owner
from opscope.ir.sites import Site, is_convolution, operand_dims
from opscope.ir.weight_trace import copy_source

_ROLES = ("lhs", "rhs")


@dataclass(frozen=True)
class Gather:
    """A site operand that is a per-token copy of a stored weight bank."""

    operand: int  # which operand of the site reads the gathered copy (0: lhs, 1: rhs)
    extract: ir.Operation  # the `tensor.extract` reading the bank, inside the gather
    k_dims: tuple[int, ...]  # the bank's dims (as the extract reads it) the site reduces over

    @property
    def bank(self) -> ir.Value:
        """The bank as the gather reads it (`copy_source` finds the stored tensor under it)."""
        return self.extract.operands[0]

    @property
    def gather(self) -> ir.Operation:
        """The `linalg.generic` whose body reads the bank."""
        return self.extract.parent

    @property
    def activation(self) -> int:
        """The site operand that is the activation: the other one."""
        return 1 - self.operand

    def feed(self, value: ir.Value) -> None:
        """Make the gather read `value` (built before `gather`) instead of the bank."""
        self.extract.operands[0] = value


def rhs_source(site: Site) -> str:
    """What `site`'s rhs is: `constant` (a weight: a constant expression), `argument` (a function
    argument, through copies: a model that takes its weights as inputs), `gathered` (a MoE's
    experts: one operand is a per-token copy of a stored weight bank, `gathered_weight`), or
    `computed` (a product of two computed tensors: an eager attention's q·kᵀ or p·v)."""
    rhs = site.op.operands[1]
    if is_weight(rhs):
        return "constant"
    if gathered_weight(site) is not None:
        return "gathered"
    source, _, _ = copy_source(rhs, ())
    return "argument" if isinstance(source, ir.BlockArgument) else "computed"


def lhs_weight(site: Site) -> bool:
    """`site` multiplies a constant lhs by a rhs that is none (computed, or the function's input:
    W @ x, JAX's `jnp.dot(W, x)`, an einsum
    exported weight first): its weight is the lhs, its activation the rhs (found by the generated-model
    tests: the weight rewrites left such weights alone). Never a convolution (its filter is the rhs)."""
    return (
        site.op.name.startswith("linalg.")
        and not is_convolution(site)
        and rhs_source(site) in ("computed", "argument")
        and is_weight(site.op.operands[0])
    )


def gathered_weight(site: Site) -> Gather | None:
    """The weight bank `site` reads through a per-token gather (rhs first, then lhs), or None."""
    if not site.op.name.startswith("linalg."):
        return None
    for index in (1, 0):
        value = site.op.operands[index]
        if not isinstance(value.type, ir.RankedTensorType) or is_weight(value):
            continue
        dims = operand_dims(site, _ROLES[index])
        if not dims:
            continue
        source, dims, _ = copy_source(value, dims)
        found = _gather(source, dims)
        if found is not None:
            return Gather(index, *found)
    return None


def _gather(value: ir.Value, dims: tuple[int, ...]) -> tuple[ir.Operation, tuple[int, ...]] | None:
    """(the extract, the bank dims that `value`'s dims `dims` read) when `value` is a generic's
    copy of a stored bank at a computed index, else None."""
    if not isinstance(value, ir.OpResult):
        return None
    op = owner(value)
    extract = bank_read(op)
    if extract is None:
        return None
    loops = {}  # loop -> the bank dim its plain index reads
    for j, index in enumerate(list(extract.operands)[1:]):
        loop = _loop_index(index)
        if loop is not None:
            loops[loop] = j
    if len(loops) == len(extract.operands) - 1:
        return None  # every index a loop: a copy, not a gather
    out_map = ir.AffineMapAttr(list(ir.ArrayAttr(op.attributes["indexing_maps"]))[-1]).value
    if not all(isinstance(e, ir.AffineDimExpr) for e in out_map.results):
        return None
    out_loops = [ir.AffineDimExpr(e).position for e in out_map.results]
    if any(out_loops[d] not in loops for d in dims):
        return None
    return extract, tuple(sorted(loops[out_loops[d]] for d in dims))


def bank_read(op: ir.Operation) -> ir.Operation | None:
    """The `tensor.extract` by which the single-result `linalg.generic` `op` yields an element of a
    stored weight (a MoE's expert bank read at a computed index), else None."""
    if op.name != "linalg.generic" or len(op.results) != 1:
        return None
    block = op.regions[0].blocks[0]
    yielded = list(block.operations)[-1].operands[0]
    extract = _defining(yielded)
    if extract is not None and extract.name == "arith.extf":  # a bf16 bank read as f32
        extract = _defining(extract.operands[0])
    if extract is None or extract.name != "tensor.extract":
        return None
    bank = extract.operands[0]
    return None if _inside(bank, op) or not is_weight(bank) else extract


def _defining(value: ir.Value) -> ir.Operation | None:
    return owner(value) if isinstance(value, ir.OpResult) else None


def _loop_index(value: ir.Value) -> int | None:
    """The loop `value` is (`linalg.index d`, through an `index_cast`), else None."""
    op = _defining(value)
    if op is not None and op.name == "arith.index_cast":
        op = _defining(op.operands[0])
    if op is None or op.name != "linalg.index":
        return None
    return ir.IntegerAttr(op.attributes["dim"]).value


def _inside(value: ir.Value, op: ir.Operation) -> bool:
    """`value` is defined in `op`'s body (a block argument or an op nested in it)."""
    if isinstance(value, ir.BlockArgument):
        parent = value.owner.owner
    else:
        parent = owner(value).parent
    while parent is not None:
        parent = parent.operation if hasattr(parent, "operation") else parent
        if parent == op:
            return True
        parent = parent.parent
    return False
