"""Weights an ONNX model stores in f16 or bf16 and casts to f32 before use, kept narrow through the import.

torch-mlir's ONNX lowering folds a `Cast` of an initializer into a new f32 constant, so the
imported module stored (and IREE compiled) such a weight at twice the bytes the file holds, and
`weight_bytes` counted that (found by the generated-model tests: an ONNX export of a model whose
f16 and bf16 parameters are cast to f32 where used, as autocast-era exports and weight-compressed
models do; the `.pt2` route kept them narrow). `narrow_casts(model)` lists such initializers;
`renarrow(module, narrow)` puts each back after the lowering: the folded f32 constant, found by
its shape and exact values (in any order of its dims: a transpose after the cast is folded too),
becomes the narrow constant in its layout (a `dense_resource` blob) and an `arith.extf`
(`opscope.ir.build.widen`), so the module computes with the same f32 values.
"""

from __future__ import annotations

import hashlib
import itertools

import numpy as np
from iree.compiler import ir
from iree.compiler.dialects import arith

from opscope.ir.build import widen
from opscope.ir.weights import resource_attr

_NARROW = {10: "f16", 16: "bf16"}  # onnx.TensorProto.FLOAT16, BFLOAT16
_FLOAT = 1  # onnx.TensorProto.FLOAT


def narrow_casts(model) -> list[tuple[str, str, np.ndarray]]:
    """(initializer name, "f16" | "bf16", its values as float32) for each f16/bf16 initializer the
    graph casts to f32."""
    from onnx import numpy_helper

    cast = {
        node.input[0]
        for node in model.graph.node
        if node.op_type == "Cast" and any(a.name == "to" and a.i == _FLOAT for a in node.attribute)
    }
    return [
        (t.name, _NARROW[t.data_type], np.asarray(numpy_helper.to_array(t)).astype(np.float32))
        for t in model.graph.initializer
        if t.name in cast and t.data_type in _NARROW
    ]


def renarrow(module: ir.Module, narrow: list[tuple[str, str, np.ndarray]]) -> int:
    """Replace each f32 `arith.constant` holding exactly the values of one of `narrow` (widened)
    by that narrow constant widened where it is used; returns how many."""
    if not narrow:
        return 0
    wanted = {key: (name, kind) for name, kind, v in narrow for key in _keys(v)}
    shapes = {shape for shape, _ in wanted}
    found: list[tuple[ir.Operation, str, str, np.ndarray]] = []

    def visit(op):
        if op.name == "arith.constant" and isinstance(op.results[0].type, ir.RankedTensorType):
            ty = ir.RankedTensorType(op.results[0].type)
            if str(ty.element_type) == "f32" and tuple(ty.shape) in shapes:
                values = _values(op.attributes["value"], tuple(ty.shape))
                hit = None if values is None else wanted.get(_key(values))
                if hit is not None:
                    found.append((op, *hit, values))
        return ir.WalkResult.ADVANCE

    module.operation.walk(visit)
    with module.context:
        for op, name, kind, values in found:
            with op.location:
                element = ir.BF16Type.get() if kind == "bf16" else ir.F16Type.get()
                ty = ir.RankedTensorType.get(list(values.shape), element)
                ip = ir.InsertionPoint(op)
                stored = arith.ConstantOp(ty, resource_attr(values, ty, name), ip=ip).result
                wide = widen(stored, ir.F32Type.get(), ip)
            op.results[0].replace_all_uses_with(wide)
            op.erase()
    return len(found)


def _key(values: np.ndarray) -> tuple[tuple[int, ...], bytes]:
    """(shape, digest of the float32 values): what a folded constant is matched by."""
    return values.shape, hashlib.sha256(np.ascontiguousarray(values, np.float32).tobytes()).digest()


def _keys(values: np.ndarray) -> list[tuple[tuple[int, ...], bytes]]:
    """`_key` of `values` in every order of its dims: the lowering folds a transpose of the cast
    weight into the constant too (a Linear's W read as Wᵀ)."""
    if values.ndim > 4:
        return [_key(values)]
    return [_key(np.transpose(values, perm)) for perm in itertools.permutations(range(values.ndim))]


def _values(attr: ir.Attribute, shape: tuple[int, ...]) -> np.ndarray | None:
    """A dense f32 attribute's values (a splat expanded), or None for another kind (a resource)."""
    if not isinstance(attr, ir.DenseElementsAttr) or not isinstance(attr, ir.DenseFPElementsAttr):
        try:
            attr = ir.DenseFPElementsAttr(attr)
        except (ValueError, TypeError):
            return None
    if attr.is_splat:
        return np.full(shape, attr.get_splat_value().value, np.float32)
    return np.asarray(attr, np.float32).reshape(shape)
