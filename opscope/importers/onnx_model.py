"""ONNX → canonical linalg: IREE's ONNX importer in-process, then the torch lowering.

Phases, in order: load (file with its external data, bytes or a ModelProto), upgrade
(`onnx.version_converter` to `MIN_OPSET` when the default-domain opset is older: torch-mlir's
ONNX patterns target current op signatures), infer (checker + shape inference, as
`iree-import-onnx` does), unroll (`onnx_rnn.unroll_recurrent`: LSTM/GRU/RNN nodes become
their per-step subgraph, so every step's matmul is a site; shapes are inferred again),
import (`onnx_importer.NodeImporter`, which locates every op by `NameLoc(node.name)`), name
(wrap that in `NameLoc(<module path>)` from the node's `pkg.torch.onnx.name_scopes` metadata
(torch's dynamo exporter) or a legacy `/encoder/layer.0/.../MatMul` node name), lower
(`torch_lowering.lower_torch`). The function is renamed `@main`.
"""

from __future__ import annotations

import ast
from pathlib import Path

from iree.compiler import ir

from opscope.errors import OpscopeError
from opscope.importers.onnx_rnn import SCOPE_KEY, unroll_recurrent
from opscope.importers.torch_fx import normalize_path
from opscope.importers.torch_lowering import lower_torch
from opscope.ir.loading import new_context
from opscope.ir.progress import phase

MIN_OPSET = 17  # the opset `iree-import-onnx --opset-version` is documented with


def require_onnx():
    """Import onnx, or say which extra to install."""
    try:
        import onnx
    except ImportError:
        raise OpscopeError("onnx is not installed: pip install 'opscope[onnx]'") from None
    return onnx


def load_model(path_or_model, name: str | None = None):
    """Phase load: a ModelProto from a path (external data from its folder), bytes or a proto."""
    onnx = require_onnx()
    if isinstance(path_or_model, onnx.ModelProto):
        return path_or_model
    if isinstance(path_or_model, (bytes, bytearray)):
        label = name or "<onnx bytes>"
        try:
            return onnx.load_from_string(bytes(path_or_model))
        except Exception as e:
            raise OpscopeError(f"{label}: not a valid ONNX model: {_first_line(e)}") from None
    path = Path(path_or_model)
    if not path.is_file():
        raise OpscopeError(f"no such ONNX file: {path}")
    try:
        return onnx.load(str(path), load_external_data=True)
    except Exception as e:  # DecodeError, missing external data, ...
        raise OpscopeError(f"{path.name}: not a valid ONNX model: {_first_line(e)}") from None


def default_opset(model) -> int:
    """The model's default-domain ('' or 'ai.onnx') opset version (0 when absent)."""
    for entry in model.opset_import:
        if entry.domain in ("", "ai.onnx"):
            return int(entry.version)
    return 0


def upgrade_opset(model, label: str, target: int = MIN_OPSET):
    """Phase upgrade: convert to `target` when the model's opset is older; else return it unchanged."""
    require_onnx()
    if default_opset(model) >= target:
        return model
    from onnx import version_converter

    try:
        return version_converter.convert_version(model, target)
    except Exception as e:
        raise OpscopeError(
            f"{label}: upgrading from opset {default_opset(model)} to {target} failed: {_first_line(e)}; "
            "try: re-export the model at a newer opset"
        ) from None


def infer_shapes(model, label: str):
    """Phase infer: the checker and shape inference (in memory; >2 GB models skip inference)."""
    onnx = require_onnx()
    try:
        onnx.checker.check_model(model)
    except ValueError:
        return model  # over the protobuf limit: the importer copes without inferred shapes
    except Exception as e:
        raise OpscopeError(f"{label}: invalid ONNX model: {_first_line(e)}") from None
    try:
        return onnx.shape_inference.infer_shapes(model, data_prop=True)
    except Exception as e:
        raise OpscopeError(f"{label}: ONNX shape inference failed: {_first_line(e)}") from None


def scope_of(node, initializers: frozenset[str] | set[str] = frozenset()) -> str:
    """A node's module path: the unroll phase's `opscope.scope`, else the module scopes of its
    `pkg.torch.onnx.name_scopes` metadata, else its legacy node name's folders.

    torch's dynamo exporter writes name_scopes as the node's `nn_module_stack` paths followed by
    the FX node's own name (`['', 'encoder', ..., 'encoder.layer.0.attention.self.query',
    'linear_3']`, torch/onnx/_internal/exporter/_core.py `_get_node_namespace`): the module path
    is the entry before that last one ('' for an op the root module ran). Its optimizer folds an
    eval BatchNorm into the Conv/Gemm before it and the fused node keeps the BatchNorm's metadata
    (`...layer.0.normalization`); its weight keeps the convolution's parameter name, so such a
    node (`pkg.onnxscript.rewriter.rule_name` naming `FuseBatchNormInto...`) takes the path of
    its weight, `...layer.0.convolution.weight` → `...layer.0.convolution`, when that weight is
    one of `initializers`. Legacy names: see `legacy_scope`.
    """
    props = {p.key: p.value for p in getattr(node, "metadata_props", ())}
    if props.get(SCOPE_KEY):
        return props[SCOPE_KEY]
    if "FuseBatchNormInto" in props.get("pkg.onnxscript.rewriter.rule_name", "") and len(node.input) > 1:
        weight = node.input[1]
        if weight in initializers and weight.endswith(".weight"):
            return normalize_path(weight.removesuffix(".weight"))
    if "pkg.torch.onnx.name_scopes" in props:
        try:
            scopes = ast.literal_eval(props["pkg.torch.onnx.name_scopes"])
        except (ValueError, SyntaxError):
            scopes = [props["pkg.torch.onnx.name_scopes"]]
        if not isinstance(scopes, (list, tuple)):
            scopes = [str(scopes)]
        modules = [str(s) for s in scopes[:-1] if s]  # the last entry names the FX node, not a module
        return normalize_path(modules[-1]) if modules else ""
    if node.name.startswith("/") and node.name.count("/") >= 2:
        return legacy_scope(node.name)
    return ""


def legacy_scope(name: str) -> str:
    """The module path in a legacy (TorchScript) exporter's node name: its folders, joined by dots.

    Each folder is a called module's name from its last non-numeric atom on (torch/onnx/_internal/
    torchscript_exporter/utils.py `_unqualified_variable_name`): `layer.0` for `...layer.0`. A
    called container (`nn.Sequential` `layer`) is a folder of its own before its children's, so
    `/layer/layer.0/conv/Conv` is the path `layer.0.conv`: a folder that extends the one before it
    by numeric atoms replaces it.
    """
    parts: list[str] = []
    for folder in (p for p in name.split("/")[1:-1] if p):
        rest = folder[len(parts[-1]) + 1 :] if parts and folder.startswith(parts[-1] + ".") else ""
        if rest and all(atom.isdigit() for atom in rest.split(".")):
            parts[-1] = folder
        else:
            parts.append(folder)
    return ".".join(parts)


def _name_scopes(module: ir.Module, model) -> None:
    """Phase name: wrap each `NameLoc(node.name)` in `NameLoc(<module path>)` where one is known."""
    weights = {t.name for t in model.graph.initializer}
    scopes = {n.name: s for n in model.graph.node if n.name and (s := scope_of(n, weights))}
    if not scopes:
        return
    ctx = module.context

    def visit(op):
        loc = op.location
        if isinstance(loc, ir.NameLoc) and loc.name_str in scopes:
            op.location = ir.Location.name(scopes[loc.name_str], childLoc=loc, context=ctx)
        return ir.WalkResult.ADVANCE

    module.operation.walk(visit)


def _rename_main(module: ir.Module) -> None:
    funcs = [op.operation for op in module.body.operations if op.operation.name == "func.func"]
    public = [f for f in funcs if "sym_visibility" not in f.attributes] or funcs
    if public:
        public[0].attributes["sym_name"] = ir.StringAttr.get("main", module.context)


def import_onnx_torch(path_or_model, name: str | None = None, context: ir.Context | None = None):
    """Phases load → import: the torch-dialect module (`torch.operator "onnx.*"`), not yet lowered."""
    require_onnx()
    from iree.compiler.extras import onnx_importer

    from opscope.importers.equal_tensors import share_equal_initializers

    label = _label(path_or_model, name)
    phase("load the ONNX model")
    model = load_model(path_or_model, label)
    model = upgrade_opset(model, label)
    model = infer_shapes(model, label)
    if unroll_recurrent(model, scope_of, label):
        model = infer_shapes(model, label)
    if model is not path_or_model:  # our own copy: equal weights read from one initializer (one constant)
        share_equal_initializers(model.graph)
    ctx = context or new_context()
    phase("import to MLIR")
    info = onnx_importer.ModelInfo(model)
    module = info.create_module(context=ctx)
    try:
        importer = onnx_importer.NodeImporter.define_function(info.main_graph, module.operation)
        importer.import_all()
    except Exception as e:  # OnnxImportError, unsupported types
        raise OpscopeError(f"{label}: the ONNX importer failed: {_first_line(e)}") from None
    _name_scopes(module, model)
    _rename_main(module)
    return module


def import_onnx(path_or_model, name: str | None = None, context: ir.Context | None = None) -> ir.Module:
    """An ONNX model (path, bytes or ModelProto) → the canonical linalg module (`func.func @main`)."""
    module = import_onnx_torch(path_or_model, name, context)
    try:
        return lower_torch(module)
    except OpscopeError as e:
        raise OpscopeError(f"{_label(path_or_model, name)}: {e}") from None


def _label(path_or_model, name: str | None) -> str:
    """How errors name the model: `name`, else the file's name."""
    return name or (Path(path_or_model).name if isinstance(path_or_model, (str, Path)) else "<onnx model>")


def _first_line(e: BaseException, limit: int = 200) -> str:
    lines = [ln.strip() for ln in str(e).splitlines() if ln.strip()]
    text = lines[0] if lines else type(e).__name__
    return text if len(text) <= limit else text[: limit - 1] + "…"
