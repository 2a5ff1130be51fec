"""Weights a model stores in f16 or bf16, kept narrow through the torch lowering.

torch-mlir's lowering folds a cast of a constant into a new constant: a bf16 parameter read as
f32 (`.float()`, autocast-era exports, an ONNX `Cast` of an initializer) became an f32 constant,
so the imported module stored (and IREE compiled) it at twice the bytes the model holds, and
`weight_bytes` counted that (found by the generated-model tests, on the `.pt2` and the ONNX routes).
Before the lowering, `hide` moves each f16/bf16 constant tensor (`torch.vtensor.literal`, an ONNX
`onnx.Constant`) into a private `util.global` read by a load, which no folder sees through; after it,
`restore` turns each load back into an `arith.constant` of the same attribute (its blob kept, no
copy), now widened where the model widens it: the values the model computes with are the same.
"""

from __future__ import annotations

from iree.compiler import ir
from iree.compiler.dialects import arith, util

NARROW = ("f16", "bf16", "i8", "si8", "ui8")
PREFIX = "__opscope_narrow_"
_CONSTANTS = ("torch.vtensor.literal", "torch.operator")  # the FX import's literal, ONNX's `onnx.Constant`


def hide(module: ir.Module) -> list[str]:
    """Move each narrow constant tensor of rank ≥ 1 into a private global read where it was; returns
    the globals' names."""
    found: list[tuple[ir.Operation, ir.Attribute]] = []

    def visit(op):
        if op.name in _CONSTANTS and len(op.results) == 1:
            attr = _narrow_value(op)
            if attr is not None:
                found.append((op, attr))
        return ir.WalkResult.ADVANCE

    module.operation.walk(visit)
    names, blobs, by_content = [], [], {}
    with module.context:
        table = ir.SymbolTable(module.operation)
        for n, (op, attr) in enumerate(found):
            name = f"{PREFIX}{n}"
            while name in table:
                name += "_"
            with op.location:
                attr, content = _signless(attr, name, module, blobs)  # torch's si8: a builtin i8 tensor once lowered
            if content is None:  # a float tensor: equal values are one uniqued attribute (a blob by its handle)
                content = attr
            ty = ir.RankedTensorType(attr.type)
            with op.location:
                if (
                    content is not None and content in by_content
                ):  # equal tensors: one constant, as canonicalize made them
                    name = by_content[content]
                else:
                    util.GlobalOp(
                        name, ty, sym_visibility="private", initial_value=attr, ip=ir.InsertionPoint(module.body)
                    )
                    names.append(name)
                    if content is not None:
                        by_content[content] = name
                ip = ir.InsertionPoint(op)
                load = util.GlobalLoadOp(ty, name, is_immutable=True, ip=ip).result
                wrapped = ir.Operation.create(
                    "torch_c.from_builtin_tensor", results=[op.results[0].type], operands=[load], ip=ip
                )
            op.results[0].replace_all_uses_with(wrapped.results[0])
            op.erase()
    return names


def restore(module: ir.Module, names: list[str]) -> int:
    """Turn each load of the globals `names` back into an `arith.constant` of the global's value and
    erase the globals; returns how many loads."""
    if not names:
        return 0
    wanted = set(names)
    globals_, loads = {}, []
    for op in module.body.operations:
        op = op.operation
        if op.name == "util.global" and ir.StringAttr(op.attributes["sym_name"]).value in wanted:
            globals_[ir.StringAttr(op.attributes["sym_name"]).value] = op

    def visit(op):
        if op.name == "util.global.load" and ir.FlatSymbolRefAttr(op.attributes["global"]).value in wanted:
            loads.append(op)
        return ir.WalkResult.ADVANCE

    module.operation.walk(visit)
    with module.context:
        for op in loads:
            g = globals_[ir.FlatSymbolRefAttr(op.attributes["global"]).value]
            with op.location:
                const = arith.ConstantOp(op.results[0].type, g.attributes["initial_value"], ip=ir.InsertionPoint(op))
            op.results[0].replace_all_uses_with(const.result)
            op.erase()
    for g in globals_.values():
        g.erase()
    return len(loads)


def _signless(attr: ir.Attribute, name: str, module: ir.Module, blobs: list) -> tuple[ir.Attribute, tuple | None]:
    """(`attr` with a signed or unsigned integer element type made signless, the same bytes in a blob
    of its own (`name`), as `torch_c.from_builtin_tensor` takes it; a key of its content, so equal
    tensors share one constant), or (`attr`, None) for a float type. A `dense_resource` blob's bytes
    are read from the module's printed resources (`ResourceBlobs`, printed once, before any is replaced)."""
    import hashlib

    import numpy as np

    from opscope.ir.weights import RESOURCE_REF, ResourceBlobs

    ty = ir.RankedTensorType(attr.type)
    element = str(ty.element_type)
    if element[:2] not in ("si", "ui"):
        return attr, None
    dtype = np.int8 if element == "si8" else np.uint8
    try:
        values = np.asarray(ir.DenseElementsAttr(attr)).astype(dtype)
    except ValueError:  # a dense_resource blob: its bytes from the printed module
        if not blobs:
            blobs.append(ResourceBlobs(module))
        key = RESOURCE_REF.search(str(attr)).group(1).strip('"')
        values = np.frombuffer(blobs[0].data(key, key), dtype).reshape(ty.shape)
    signless = ir.RankedTensorType.get(list(ty.shape), ir.IntegerType.get_signless(8))
    values = np.ascontiguousarray(values).view(np.int8)
    content = (tuple(ty.shape), hashlib.sha256(values.tobytes()).digest())
    return ir.DenseResourceElementsAttr.get_from_buffer(values, name, signless), content


def _narrow_value(op: ir.Operation) -> ir.Attribute | None:
    """The f16/bf16 tensor attribute of rank ≥ 1 a constant op holds (not a splat), else None."""
    key = "value" if op.name == "torch.vtensor.literal" else "torch.onnx.value"
    if key not in op.attributes:
        return None
    if op.name == "torch.operator" and ir.StringAttr(op.attributes["name"]).value != "onnx.Constant":
        return None
    attr = op.attributes[key]
    try:
        ty = ir.RankedTensorType(attr.type)
    except (ValueError, AttributeError, TypeError):  # no tensor type: a scalar, a string
        return None
    if str(ty.element_type) not in NARROW or not ty.rank:
        return None
    try:
        if ir.DenseElementsAttr(attr).is_splat:
            return None  # a fill, not a weight
    except ValueError:
        pass  # a dense_resource blob
    return attr
