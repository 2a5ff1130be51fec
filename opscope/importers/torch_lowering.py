"""Torch dialect → linalg on tensors, in-process, ending in a plain `func.func`.

The phases are the body of IREE's `torch-to-iree` pipeline (compiler/plugins/input/Torch,
`createTorchToIREEPipeline`) without `torch-iree-func-conversion`, which would wrap the
function in IREE's runtime ABI (`util.func` + `hal.tensor` casts); in its place come
torch-mlir's backend type conversions, as in `torch-backend-to-linalg-on-tensors-backend-pipeline`,
and before decomposition `torch-recompose-complex-ops` (as torch-mlir's simplification
pipeline does) folds `aten.split` + `prim.ListUnpack` into slices (GPT-2, Mixtral).
ONNX-imported modules (`torch.onnx_meta.opset_version` on a function) first run
`torch-onnx-to-torch-backend-pipeline`, exactly as IREE's plugin does. Every pass named
here is registered in IREE 3.13's bundled context (checked by `PassManager.parse`).
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from iree.compiler import ir

from opscope.errors import OpscopeError
from opscope.importers import narrow_weights
from opscope.importers.phase import first_op, run_phase, save_input
from opscope.ir.loading import new_context
from opscope.ir.progress import phase
from opscope.ir.sites import location_name

# IREE's TorchInput::BackendLegalOps: ops kept whole by decompose-complex-ops because
# their decompositions lose structure (a reshape kind, a fused attention).
BACKEND_LEGAL_OPS = (
    "aten.flatten.using_ints",
    "aten.unflatten.int",
    "aten.adaptive_avg_pool1d",
    "aten.adaptive_avg_pool2d",
    "aten.adaptive_max_pool1d",
    "aten.fft_rfft",
    "aten.convolution_backward",
    "aten.scaled_dot_product_attention",
)
_LEGAL = ",".join(BACKEND_LEGAL_OPS)

ONNX_PHASE = ("onnx-to-torch", f"builtin.module(torch-onnx-to-torch-backend-pipeline{{backend-legal-ops={_LEGAL}}})")

# (phase name, pipeline text), run in this order.
TORCH_PHASES: tuple[tuple[str, str], ...] = (
    (
        "torch-simplify",
        "builtin.module(func.func(torch-iree-bind-symbolic-shapes,torch-iree-set-strict-symbolic-shapes,"
        "canonicalize,torch-recompose-complex-ops,torch-reduce-op-variants,torch-convert-custom-quant-op,"
        f"torch-decompose-complex-ops{{legal-ops={_LEGAL}}},torch-fuse-quantized-ops,canonicalize,"
        "torch-scalarize-shapes))",
    ),
    (
        "torch-to-linalg",
        "builtin.module(func.func(convert-torch-to-tmtensor,torch-iree-tm-tensor-to-linalg-ext,"
        "convert-torch-to-tensor,torch-iree-torch-unstructured-to-linalg-ext,convert-torch-to-linalg,cse,"
        "convert-torch-to-scf,convert-torch-to-arith),convert-torch-conversion-to-mlprogram,"
        "func.func(memref-expand,canonicalize,resolve-shaped-type-result-dims,cse),inline,symbol-dce)",
    ),
    (
        "backend-types",
        "builtin.module(torch-func-backend-type-conversion,func.func(torch-finalizing-backend-type-conversion),"
        "canonicalize,cse)",
    ),
)

_TORCH_DIALECTS = ("torch.", "torch_c.", "tm_tensor.")
# Type casts and constants that the backend-type phase removes once every real op is converted.
_GLUE = ("torch_c.", "torch.constant.", "torch.prim.ListConstruct")
_FILE_LOC = re.compile(r'"([^"]+)":(\d+):(\d+)')
_NAME_LOC = re.compile(r'"([^"]+)"(?!:\d)')


def is_onnx_module(module: ir.Module) -> bool:
    """Whether a function carries the ONNX importer's opset attribute (torch.operator "onnx.*" form)."""
    return any(
        "torch.onnx_meta.opset_version" in op.operation.attributes
        for op in module.body.operations
        if op.operation.name == "func.func"
    )


def has_torch_ops(module: ir.Module) -> bool:
    """Whether any op of the torch, torch_c or tm_tensor dialects is left."""
    return _first_torch_op(module) is not None


def describe_location(loc: ir.Location) -> str:
    """'encoder.layer.0.attention.self (modeling_bert.py:412)' or 'enc.proj (node /enc/proj/MatMul)'.

    Reads the printed form too: locations handed over by diagnostics are not downcast to NameLoc.
    """
    text = str(loc)
    names = _NAME_LOC.findall(text)
    name = location_name(loc) or (names[0] if names else None)
    files = _FILE_LOC.findall(text)
    user = [f for f in files if "/torch/" not in f[0]] or files  # the model's frame, not torch's
    if user:
        where = f"{os.path.basename(user[0][0])}:{user[0][1]}"
    else:
        inner = [n for n in names if n != name]
        where = f"node {inner[0]}" if inner else ""
    if name and where:
        return f"{name} ({where})"
    return name or where or text


def lower_torch(module: ir.Module) -> ir.Module:
    """Lower a torch-dialect module (FX or ONNX import) to linalg on tensors, in place; returns it."""
    onnx = is_onnx_module(module)
    phases = ((ONNX_PHASE,) if onnx else ()) + TORCH_PHASES
    _refuse_unknown(module, allow_onnx=onnx)
    hidden = narrow_weights.hide(module)  # a cast of an f16/bf16 weight must not fold into an f32 copy
    for name, pipeline in phases:
        _run_phase(module, name, pipeline, onnx)
        if name == "onnx-to-torch":
            _refuse_unknown(module, allow_onnx=False)
        if name == "torch-to-linalg":
            _refuse_leftover(_first_torch_op(module, skip=_GLUE))
    _refuse_leftover(_first_torch_op(module))
    narrow_weights.restore(module, hidden)
    return module


def _refuse_leftover(left: ir.Operation | None) -> None:
    """Name the first torch op that no conversion took, and where the model ran it."""
    if left is not None:
        raise OpscopeError(
            f"unsupported op '{_op_label(left)}' at {describe_location(left.location)} is left after "
            "lowering torch to linalg: decompose it before export or file an issue with torch-mlir"
        )


def _refuse_unknown(module: ir.Module, allow_onnx: bool) -> None:
    """Check first: an op kept as `torch.operator` (an aten op the FX importer did not know, or an
    ONNX op that onnx-to-torch left) has no torch-mlir lowering."""
    found: list[ir.Operation] = []

    def visit(op):
        if op.name == "torch.operator" and not (allow_onnx and _op_label(op).startswith("onnx.")):
            found.append(op)
            return ir.WalkResult.INTERRUPT
        return ir.WalkResult.ADVANCE

    module.operation.walk(visit)
    if found:
        op = found[0]
        label = _op_label(op).removeprefix("torch.")
        hint = (
            "torch-mlir's onnx-to-torch has no pattern for it (at this opset); replace the node"
            if label.startswith("onnx.")
            else "torch-mlir has no lowering for it; decompose it before export (`decompositions=`) or avoid it"
        )
        raise OpscopeError(f"unsupported op '{label}' at {describe_location(op.location)}: {hint}")


def _op_label(op: ir.Operation) -> str:
    """The op's name, or for `torch.operator "onnx.Foo"` the ONNX op it stands for."""
    if op.name == "torch.operator" and "name" in op.attributes:
        return ir.StringAttr(op.attributes["name"]).value
    return op.name


def _first_torch_op(module: ir.Module, skip: tuple[str, ...] = ()) -> ir.Operation | None:
    return first_op(module, _TORCH_DIALECTS, skip)


def _run_phase(module: ir.Module, name: str, pipeline: str, onnx: bool = False) -> None:
    """Run one phase; a failure says whose it is (IREE's lowering, before any tap), names the first
    diagnostic and its location in one line, and keeps every diagnostic and a reproducer in a log.

    When a conversion gives up on a `torch.operator` (an ONNX op onnx-to-torch has no pattern for, e.g.
    `onnx.Softsign` on IREE 3.13), the op it stands for is read from the phase's input and named instead.
    An ONNX model's failure names the route that lowers the same model otherwise: torch.export's `.pt2`.
    """
    phase(f"lower: {name}")
    run = run_phase(module, pipeline)
    if not run.failed:
        return
    msg = run.message.split(": %")[0].split(': "')[0][:160]
    where = describe_location(run.location) if run.location else ""
    where = "an unknown location" if where in ("", 'loc("")', "loc(unknown)") else where
    log = _failure_log(run, pipeline)
    kept = f" (all diagnostics and a reproducer: {log})" if log else ""
    operator = _operator_at(run.input, run.location) if "'torch.operator'" in msg else None
    if operator and operator.startswith("onnx."):
        raise OpscopeError(
            f"unsupported op '{operator}' at {where}: torch-mlir's onnx-to-torch has no pattern for it (at this "
            f"opset); try: replace the node with equivalent ONNX ops, or export the PyTorch model to a .pt2{kept}"
        ) from None
    whose = "IREE's ONNX lowering" if onnx else "IREE's torch lowering"
    route = (
        "; the PyTorch model exported with torch.export to a .pt2 is lowered by the FX route instead" if onnx else ""
    )
    raise OpscopeError(
        f"{whose} (torch-mlir, in iree-base-compiler) failed on this model before any tap, in phase '{name}' "
        f"at {where}: {msg}{route}{kept}"
    ) from None


def _failure_log(run, pipeline: str) -> str | None:
    """A file with every diagnostic of a failed phase and the command that reproduces it (the phase's
    input saved beside it); its path, or None when nothing could be written."""
    path = save_input(run.input, "opscope-torch-", pipeline)
    if path is None:
        return None
    try:
        Path(f"{path}.log").write_text(
            f'{run.full}\n\nreproduce: iree-opt --pass-pipeline="$(cat {path}.pipeline)" {path}\n'
        )
    except OSError:
        return None
    return f"{path}.log"


def _operator_at(data: bytes, location: ir.Location | None) -> str | None:
    """The op name a `torch.operator` at `location` stands for, read from a phase's saved input."""
    if location is None:
        return None
    want = str(location)
    found: list[str] = []
    module = ir.Module.parse(data, new_context())

    def visit(op):
        if op.name == "torch.operator" and str(op.location) == want:
            found.append(_op_label(op))
            return ir.WalkResult.INTERRUPT
        return ir.WalkResult.ADVANCE

    module.operation.walk(visit)
    return found[0] if found else None
