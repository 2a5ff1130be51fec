"""`externalize-weights`: move a module's weights into an IREE parameter file; the IR names them.

Every tensor `arith.constant` holding model data (`dense_resource<…>`, or `dense<…>` that is not
a splat) of at least `min-bytes` bytes becomes an immutable `util.global` (one per distinct
value: a constant read in two places is stored once), and IREE's own
`iree-io-export-parameters` then writes every global initial value of at least `min-bytes`
to `path` (an `.irpa` archive) and leaves `#flow.parameter.named<"scope"::"key">` in its
place. The module records where its parameters live in a module attribute, so whatever
compiles or loads it later finds the file without being told:
`opscope.parameters = {scope = "/abs/path.irpa"}`. A module with no weight that large is left
as it was (no file, no attribute).

Why: the weights then never pass through the compiler, the vmfb or the loaded module again; the
runtime maps the file once per process and every build of the model (tapped, untapped,
rewritten) reads the same pages (`opscope.run.parameters`). Keys are the globals' names
(`weight_0`, `weight_1`, ... in program order; a global the module already had keeps its own).

`dtype=bf16` (or `f16`) stores every float32 weight so in the file, half the bytes on disk and in
memory, and reads it through a widening `linalg.generic` where it is loaded: the model computes as
before, in f32, on weights rounded to that type (bf16 to nearest even, as torch rounds them).

    %w = arith.constant dense_resource<torch_tensor_32_64> : tensor<32x64xf32>
  becomes
    util.global private @weight_0 = #flow.parameter.named<"model"::"weight_0"> : tensor<32x64xf32>
    %w = util.global.load @weight_0 : tensor<32x64xf32>
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from math import prod
from typing import ClassVar, Literal

from iree.compiler import ir, passmanager

from opscope.errors import OpscopeError
from opscope.ir import parameter_files as _files
from opscope.ir.build import widen
from opscope.ir.const_expr import is_attr
from opscope.ir.parameter_files import (
    MIN_BYTES,
    SCOPE,
    WEIGHT_DTYPES,
    parameter_files,
    parameter_ref,
    set_parameter_files,
)
from opscope.ir.progress import phase

GLOBAL_PREFIX = "weight_"
log = logging.getLogger("opscope")


@dataclass(frozen=True)
class ExternalizeWeights:
    """Write the module's weights to the parameter file `path` and refer to them by name."""

    name: ClassVar[str] = "externalize-weights"

    path: str = ""
    scope: str = SCOPE
    min_bytes: int = MIN_BYTES
    dtype: Literal["", "bf16", "f16"] = ""  # bf16 or f16: float32 weights stored so, read widened; "": as they are

    def __post_init__(self) -> None:
        """Refuse a scope with characters IREE's `scope=path` flags cannot carry, a negative size
        and an unknown dtype, each in one line (a missing path is refused when the pass runs)."""
        if not self.scope or any(c in self.scope for c in '=:"'):
            raise OpscopeError(f"{self.name}: option 'scope' must be a plain name, got '{self.scope}'")
        if self.min_bytes < 0:
            raise OpscopeError(f"{self.name}: option 'min-bytes' expects a byte count >= 0, got {self.min_bytes}")
        if self.dtype and self.dtype not in WEIGHT_DTYPES:
            raise OpscopeError(
                f"{self.name}: option 'dtype' must be one of {', '.join(WEIGHT_DTYPES)}, got '{self.dtype}'"
            )

    def apply(self, module) -> None:
        if not self.path:
            raise OpscopeError(f"{self.name}: option 'path' (the .irpa file to write) is required")
        files = parameter_files(module)
        if self.scope in files:
            raise OpscopeError(
                f"{self.name}: the module's weights are already in parameter scope '{self.scope}' "
                f"({files[self.scope]}): externalize a module once"
            )
        path = os.path.abspath(self.path)
        with module.context, ir.Location.unknown():
            _outline_constants(module, self.min_bytes)
            phase(f"write the weights to {os.path.basename(path)}")
            exported = f"iree-io-export-parameters{{path={self.scope}={path} minimum-size={self.min_bytes}}}"
            try:
                passmanager.PassManager.parse(f"builtin.module({exported})").run(module.operation)
            except Exception as e:  # noqa: BLE001  (MLIR reports a failed pass as a bare error)
                detail = " ".join(str(e).split())[:300]
                raise OpscopeError(f"{self.name}: could not write the parameter file {path}: {detail}") from None
            written = any(_names_parameter(op.operation, self.scope) for op in module.body.operations)
            if self.dtype and not (written and _narrow(module, path, self.scope, self.dtype)):
                log.warning(
                    "weights dtype %s: the module holds no float32 weight of %d bytes or more to store so "
                    "(weights it takes as arguments stay as they are given)",
                    self.dtype,
                    self.min_bytes,
                )
            if not written:
                return  # no weight of min-bytes or more: nothing written, nothing to name
            set_parameter_files(module, {**files, self.scope: path})


def externalize(module: ir.Module, path: str | os.PathLike, weights_dtype: str | None = None) -> ir.Module:
    """`module` (changed in place) with its weights written to the parameter file `path`, its
    folder made, float32 ones stored as `weights_dtype` (bf16, f16; None: as they are); left as it
    is when its weights already live in a parameter file."""
    if parameter_files(module):
        return module
    path = os.path.abspath(path)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    ExternalizeWeights(path=path, dtype=weights_dtype or "").apply(module)
    return module


def wants_file(module: ir.Module, parameters: bool | None) -> bool:
    """Whether `module`'s weights should go to a parameter file: asked (`parameters`), or, with
    None, when its stored weights come to `AUTO_BYTES` or more; never when they already live in one."""
    if parameters is False or parameter_files(module):
        return False
    return bool(parameters) or stored_weight_bytes(module) >= _files.AUTO_BYTES


def _names_parameter(op: ir.Operation, scope: str) -> bool:
    """A `util.global` whose initial value is a parameter of `scope`."""
    if op.name != "util.global" or "initial_value" not in op.attributes:
        return False
    ref = parameter_ref(op.attributes["initial_value"])
    return ref is not None and ref[0] == scope


def _narrow(module: ir.Module, path: str, scope: str, dtype: str) -> bool:
    """Store the float32 parameters of `scope` in `path` as `dtype` and read each one widened back
    to f32 where it is loaded (the globals and their loads retyped); False when there is none."""
    f32 = ir.F32Type.get()
    narrow = {"bf16": ir.BF16Type.get, "f16": ir.F16Type.get}[dtype]()
    wide: dict[str, ir.Operation] = {}  # global name -> its op, for each float32 parameter of `scope`
    for op in module.body.operations:
        op = op.operation
        if (
            _names_parameter(op, scope)
            and ir.RankedTensorType(ir.TypeAttr(op.attributes["type"]).value).element_type == f32
        ):
            wide[ir.StringAttr(op.attributes["sym_name"]).value] = op
    if not wide:
        return False
    phase(f"store the weights as {dtype}")
    _files.narrow_file(path, {parameter_ref(op.attributes["initial_value"])[1] for op in wide.values()}, dtype)
    for op in wide.values():
        narrowed = ir.RankedTensorType.get(ir.RankedTensorType(ir.TypeAttr(op.attributes["type"]).value).shape, narrow)
        named = str(op.attributes["initial_value"]).rsplit(" : ", 1)[0]  # #flow.parameter.named<"scope"::"key">
        op.attributes["type"] = ir.TypeAttr.get(narrowed)
        op.attributes["initial_value"] = ir.Attribute.parse(f"{named} : {narrowed}")
    loads: list[ir.Operation] = []

    def visit(op: ir.Operation) -> ir.WalkResult:
        if op.name == "util.global.load" and ir.FlatSymbolRefAttr(op.attributes["global"]).value in wide:
            loads.append(op)
        return ir.WalkResult.ADVANCE

    module.operation.walk(visit)
    for load in loads:
        shape = ir.RankedTensorType(load.results[0].type).shape
        attributes = {"global": load.attributes["global"]}
        if "is_immutable" in load.attributes:
            attributes["is_immutable"] = ir.UnitAttr.get()
        narrowed = ir.Operation.create(
            "util.global.load",
            results=[ir.RankedTensorType.get(shape, narrow)],
            attributes=attributes,
            loc=load.location,
            ip=ir.InsertionPoint(load),
        )
        with load.location:
            widened = widen(narrowed.results[0], f32, ir.InsertionPoint(load))
        load.results[0].replace_all_uses_with(widened)
        load.erase()
    return True


def _outline_constants(module: ir.Module, min_bytes: int) -> None:
    """Replace each stored tensor constant of `min_bytes` or more by a load of a new immutable
    global holding it (the same value: the same global)."""
    body = module.body
    taken = {
        ir.StringAttr(op.operation.attributes["sym_name"]).value
        for op in body.operations
        if "sym_name" in op.operation.attributes
    }
    made: dict[str | ir.Attribute, str] = {}  # `_identity` of a constant -> its global's name
    first = body.operations[0] if len(body.operations) else None
    for const in _stored_constants(module, min_bytes):
        attr = const.attributes["value"]
        ty = const.results[0].type
        key = _identity(attr)
        if key not in made:
            name = _fresh(taken, len(made))
            ip = ir.InsertionPoint(first) if first is not None else ir.InsertionPoint(body)
            ir.Operation.create(
                "util.global",
                attributes={
                    "sym_name": ir.StringAttr.get(name),
                    "sym_visibility": ir.StringAttr.get("private"),
                    "type": ir.TypeAttr.get(ty),
                    "initial_value": attr,
                },
                loc=const.location,
                ip=ip,
            )
            made[key] = name
        load = ir.Operation.create(
            "util.global.load",
            results=[ty],
            attributes={"global": ir.FlatSymbolRefAttr.get(made[key]), "is_immutable": ir.UnitAttr.get()},
            loc=const.location,
            ip=ir.InsertionPoint(const),
        )
        const.results[0].replace_all_uses_with(load.results[0])
        const.erase()


def stored_weight_bytes(module: ir.Module, min_bytes: int = MIN_BYTES) -> int:
    """Bytes of the tensor constants this pass would move out of `module` (each stored once)."""
    seen: dict[str | ir.Attribute, int] = {}
    for const in _stored_constants(module, min_bytes):
        seen[_identity(const.attributes["value"])] = _nbytes(const.results[0].type)
    return sum(seen.values())


def _stored_constants(module: ir.Module, min_bytes: int) -> list[ir.Operation]:
    """The tensor `arith.constant`s of every function that hold model data of `min_bytes` or more."""
    found: list[ir.Operation] = []

    def visit(op: ir.Operation) -> ir.WalkResult:
        if op.name == "arith.constant" and isinstance(op.results[0].type, ir.RankedTensorType):
            attr = op.attributes["value"]
            if _holds_data(attr) and _nbytes(op.results[0].type) >= min_bytes:
                found.append(op)
        return ir.WalkResult.ADVANCE

    module.operation.walk(visit)
    return found


def _holds_data(attr: ir.Attribute) -> bool:
    """A `dense_resource` blob, or `dense` elements that are not one value repeated."""
    if is_attr(attr, ir.DenseResourceElementsAttr):
        return True
    try:
        return not ir.DenseElementsAttr(attr).is_splat
    except ValueError:
        return False


def _nbytes(ty: ir.RankedTensorType) -> int:
    """Bytes of a static tensor type (sub-byte types rounded up), 0 for a dynamic one."""
    if not ty.has_static_shape:
        return 0
    width = ty.element_type.width if hasattr(ty.element_type, "width") else 32
    return (prod(ty.shape) * width + 7) // 8


def _identity(attr: ir.Attribute) -> str | ir.Attribute:
    """A key equal for equal constants: a resource as printed (its blob's name and type), or the
    `dense` attribute itself (MLIR uniques those: equal elements and type, one attribute)."""
    return str(attr) if is_attr(attr, ir.DenseResourceElementsAttr) else attr


def _fresh(taken: set[str], index: int) -> str:
    """`weight_<n>` not yet a symbol of the module, from `index` on."""
    while f"{GLOBAL_PREFIX}{index}" in taken:
        index += 1
    name = f"{GLOBAL_PREFIX}{index}"
    taken.add(name)
    return name
