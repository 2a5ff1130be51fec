"""A torch model's weights straight to an IREE parameter file, never through the MLIR module.

`ParameterHooks` is an `FxImporterHooks`: for every parameter, buffer or lifted constant of
`min_bytes` or more the FX importer meets, it emits an immutable
`util.global private @p_<name> = #flow.parameter.named<"model"::"<fqn>">` and a load of it
instead of a `dense_resource` copy of the bytes (the recipe in IREE's `fx_importer` hook
docs and iree-turbine's `externalize_module_parameters`). `write_archive` then writes the
tensors it collected to one `.irpa` (IREE's own writer, from zero-copy numpy views of the
torch storage), and `name_file` records the file on the module as `externalize-weights`
does (`opscope.parameters = {model = "/abs/path"}`), so the rest of opscope cannot tell the
two routes apart. Keys are the tensors' torch names (`model.layers.0.mlp.up_proj.weight`);
a tensor shared under two names (tied embeddings) is stored once. With `weights_dtype` a
float32 weight is stored rounded to bf16 (or f16) and read through a widening `linalg.generic`
back to f32: half the bytes in the file and in memory, the model computing as it was exported.

The same hooks give every bf16 or f16 tensor that stays in the module a `dense<...>` literal
instead of the importer's `dense_resource`: IREE 3.13's llvm-cpu cannot convert a 16-bit
float `dense_resource` constant that lands inside a dispatch ("'arith.constant' op failed to
verify that all of {value, result} have same type"), which every tapped bf16 model hit (a
bias fused into its elementwise dispatch), with or without a parameter file.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from iree.compiler import ir

from opscope.errors import OpscopeError
from opscope.ir.build import widen
from opscope.ir.parameter_files import MIN_BYTES, SCOPE, check_weights_dtype, set_parameter_files


def import_hooks(prog, externalize: bool, min_bytes: int = MIN_BYTES, weights_dtype: str | None = None):
    """The hooks for importing `prog` (an ExportedProgram, frozen): with `externalize`, its weights
    as parameters, a float32 one stored as `weights_dtype` (bf16, f16) and widened back to f32
    where it is read; 16-bit float literals as `dense` attributes either way."""
    import torch
    from iree.compiler.extras.fx_importer import FxImporterHooks

    narrow = {None: None, "bf16": torch.bfloat16, "f16": torch.float16}[check_weights_dtype(weights_dtype)]

    class ParameterHooks(FxImporterHooks):
        """Weights of `min_bytes` or more become parameter globals; `tensors` maps key -> tensor."""

        def __init__(self) -> None:
            # `import_frozen_program` passes no input info: a literal is known by its identity
            self.names = {id(t): n for n, t in reversed(list(prog.state_dict.items()))} if externalize else {}
            self.tensors: dict = {}
            self.symbols: dict[str, str] = {}

        def resolve_literal(self, gni, literal, info):
            import torch

            if not isinstance(literal, torch.Tensor):
                return None
            key = self.names.get(id(literal))
            if key is None or literal.numel() * literal.element_size() < min_bytes:
                return _dense_literal(gni, literal) if literal.dtype in (torch.bfloat16, torch.float16) else None
            stored = literal.to(narrow) if narrow is not None and literal.dtype == torch.float32 else literal
            tensor_type = ir.RankedTensorType.get(list(literal.shape), gni._cc.dtype_to_type(stored.dtype))
            if key not in self.symbols:
                self.symbols[key] = self._declare(gni, key, tensor_type)
                self.tensors[key] = stored
            load = ir.Operation.create(
                "util.global.load",
                results=[tensor_type],
                attributes={"global": ir.FlatSymbolRefAttr.get(self.symbols[key]), "is_immutable": ir.UnitAttr.get()},
            ).result
            if stored is not literal:
                load = widen(load, ir.F32Type.get())
            return ir.Operation.create(
                "torch_c.from_builtin_tensor", results=[gni._cc.tensor_to_vtensor_type(literal)], operands=[load]
            ).result

        def _declare(self, gni, key: str, tensor_type: ir.Type) -> str:
            """A fresh `util.global` naming parameter `key`, at the top of the module."""
            base = "p_" + re.sub(r"\W", "_", key)
            name, n = base, 1
            while name in self.symbols.values():
                name, n = f"{base}_{n}", n + 1
            body = gni.fx_importer.module.body
            ip = ir.InsertionPoint.at_block_begin(body)
            ir.Operation.create(
                "util.global",
                attributes={
                    "sym_name": ir.StringAttr.get(name),
                    "sym_visibility": ir.StringAttr.get("private"),
                    "type": ir.TypeAttr.get(tensor_type),
                    "initial_value": ir.Attribute.parse(
                        f'#flow.parameter.named<"{SCOPE}"::{_quoted(key)}> : {tensor_type}'
                    ),
                },
                ip=ip,
            )
            return name

    return ParameterHooks()


def _dense_literal(gni, tensor):
    """A `torch.vtensor.literal` of a 16-bit float tensor as a `dense` attribute (its bits)."""
    import torch

    bits = tensor.detach().contiguous().view(torch.uint16).numpy()
    attr = ir.DenseElementsAttr.get(bits, type=gni._cc.dtype_to_type(tensor.dtype), shape=list(tensor.shape))
    return ir.Operation.create(
        "torch.vtensor.literal", results=[gni._cc.tensor_to_vtensor_type(tensor)], attributes={"value": attr}
    ).result


def _quoted(text: str) -> str:
    """`text` as an MLIR string literal."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def write_archive(tensors: dict, path: str | Path, label: str) -> Path:
    """Write `tensors` (key -> torch tensor) to the `.irpa` file `path` (atomically: a partly written
    file is never left under its name); a failure is one line naming the file."""
    import iree.runtime as rt
    from iree.runtime.io import parameter_index_add_numpy_ndarray

    path = Path(path).resolve()
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    index = rt.ParameterIndex()
    try:
        for key, tensor in tensors.items():
            parameter_index_add_numpy_ndarray(index, key, _numpy_view(tensor))
        index.create_archive_file(str(tmp))
        tmp.replace(path)
    except (OSError, ValueError, RuntimeError) as e:
        tmp.unlink(missing_ok=True)
        detail = " ".join(str(e).split())[:200]
        raise OpscopeError(f"{label}: could not write the parameter file {path}: {detail}") from None
    return path


def _numpy_view(tensor):
    """The tensor's bytes as a numpy array without a copy where its layout allows (bf16 and other
    types numpy lacks are viewed as unsigned integers of the same width: the archive keeps bytes)."""
    import torch

    t = tensor.detach()
    if not t.is_contiguous():
        t = t.contiguous()
    if t.dtype in (torch.bfloat16, torch.float8_e4m3fn, torch.float8_e5m2):
        t = t.view({1: torch.uint8, 2: torch.uint16, 4: torch.uint32, 8: torch.uint64}[t.element_size()])
    return t.numpy()


def name_file(module: ir.Module, path: Path) -> None:
    """Record on `module` that its parameters of scope `SCOPE` live in `path`."""
    set_parameter_files(module, {SCOPE: str(path)})
