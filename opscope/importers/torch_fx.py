"""PyTorch → canonical linalg: `torch.export`, IREE's FX importer, then the torch lowering.

Phases, in order: export (`torch.export.export`, non-strict; a `.pt2` file is loaded instead,
with transformers' output types registered first), decompose (torch's own decompositions of
`DEFAULT_DECOMPOSITIONS`, then of every op torch-mlir does not know, as long as that helps),
name-steps (the matmuls of unrolled LSTM/GRU/RNN layers get `recurrent.step_scopes` names),
check (an op torch-mlir still does not know is refused by name, module path and line),
import (`FxImporter.import_frozen_program`, weights inlined as constants, or written to a given
`parameters` file and named (`torch_parameters`); every op located by `NameLoc(<nn.Module path>)`
around the file:line callsite the importer emits), lower
(`torch_lowering.lower_torch`). The result is one plain `func.func @main` whose arguments
are the example tensors, flattened in `torch.export`'s order (`flat_inputs`), and whose
results are the forward's tensor leaves.
"""

from __future__ import annotations

import functools
import gc
import importlib.util
import inspect
import logging
import re
import warnings
from collections import defaultdict
from collections.abc import Iterable
from pathlib import Path

import numpy as np
from iree.compiler import ir

from opscope.errors import OpscopeError
from opscope.importers.recurrent import step_scopes
from opscope.importers.torch_lowering import lower_torch
from opscope.importers.torch_parameters import import_hooks, name_file, write_archive
from opscope.ir.loading import new_context
from opscope.ir.progress import phase

# Recurrent layers: torch-mlir has no lowering for them (the FX importer stops at their
# list-of-tensors arguments); torch's decompositions unroll them over the static time steps.
RECURRENT_OPS: tuple[str, ...] = ("aten.lstm.input", "aten.gru.input", "aten.rnn_tanh.input", "aten.rnn_relu.input")

# aten ops decomposed after export, with torch's own decompositions:
# `aten.__and__.Tensor` (transformers-5 attention masks) has no torch-mlir lowering; its
# decomposition is `bitwise_and`. Eval-mode BatchNorm exports as
# `_native_batch_norm_legit_no_training`, unknown to torch-mlir; its decomposition calls
# `_native_batch_norm_legit` (a mutating schema that export refuses), so both are listed.
DEFAULT_DECOMPOSITIONS: tuple[str, ...] = (
    "aten.__and__.Tensor",
    "aten._native_batch_norm_legit_no_training.default",
    "aten._native_batch_norm_legit.default",
    "aten._native_batch_norm_legit.no_stats",
) + RECURRENT_OPS

# How many times the decompose phase goes back for ops that a decomposition produced.
DECOMPOSE_ROUNDS = 4
# The node meta key the name-steps phase writes and `module_path` reads first.
SCOPE_META = "opscope_scope"
_MATMUL_OPS = ("aten.linear", "aten.mm", "aten.addmm", "aten.matmul", "aten.bmm", "aten.baddbmm")

_TRY = {
    "cache_utils": "export with use_cache=False (model.config.use_cache = False, or use_cache=False in "
    "example_kwargs) and pass an explicit attention_mask",
    "not a known type": "return tensors, or tuples, lists and dicts of them, from forward(); or register the "
    "output type with torch.utils._pytree.register_pytree_node",
    "data-dependent": "make the shape static or guard it with torch._check",
    "Dynamic control flow": "replace Python control flow on tensor values with torch.cond or torch.where",
    "Unsupported": "simplify forward() or pass example inputs exactly as the model is called",
}


def require_torch():
    """Import torch, or say which extra to install."""
    try:
        import torch
    except ImportError:
        raise OpscopeError("PyTorch is not installed: pip install 'opscope[torch]'") from None
    return torch


def module_path(node) -> str:
    """The dotted nn.Module path an FX node ran in ('encoder.layer.3.attention.self.query'), '' at the root;
    an unrolled recurrent matmul's step name (`rnn.l0.t3`) when the name-steps phase gave it one."""
    if node.meta.get(SCOPE_META):
        return node.meta[SCOPE_META]
    stack = node.meta.get("nn_module_stack") or {}
    if not stack:
        return ""
    path = list(stack.values())[-1][0]
    return normalize_path(path)


def normalize_path(path: str) -> str:
    """Strict-mode spellings (`L['self'].layer[3]`, `getattr(..., 'x')`) to plain dotted paths."""
    path = re.sub(r"^L\['self'\]\.?|^L__self___?", "", path)
    path = re.sub(r"getattr\((.*?), '([^']+)'\)", r"\1.\2", path)
    path = re.sub(r"\._modules\['([^']+)'\]", r".\1", path)
    path = re.sub(r"\[(\d+)\]", r".\1", path)
    path = re.sub(r"\[['\"]([^'\"]+)['\"]\]", r".\1", path)
    return path.strip(".")


def _named_context_cache():
    """IREE's `ContextCache`, with each node's location wrapped in `NameLoc(<module path>)`."""
    from iree.compiler.extras import fx_importer

    class NamedLocations(fx_importer.ContextCache):
        """Keeps the importer's file:line callsite and names it by the nn.Module that ran the node."""

        __slots__ = ()

        def get_node_location(self, node):
            loc = super().get_node_location(node)
            path = module_path(node)
            if not path:
                return loc
            return ir.Location.name(path, childLoc=loc or ir.Location.unknown(self._c), context=self._c)

    return NamedLocations


def _decomposition_table(names: Iterable[str], label: str = "") -> dict:
    """torch's decomposition of each named op (`namespace.op.overload`)."""
    torch = require_torch()
    table = {}
    for name in names:
        ns, _, rest = name.partition(".")
        packet, _, overload = rest.rpartition(".")
        try:
            op = getattr(getattr(getattr(torch.ops, ns), packet), overload)
        except AttributeError:
            raise OpscopeError(
                f"{label + ': ' if label else ''}unknown decomposition '{name}': expected namespace.op.overload"
            ) from None
        fn = _torch_decomposition(op)
        if fn is not None:
            table[op] = fn
    if "aten.__and__.Tensor" in names and torch.ops.aten.__and__.Tensor not in table:
        table[torch.ops.aten.__and__.Tensor] = torch.ops.aten.bitwise_and.Tensor
    return table


def _torch_decomposition(op):
    """torch's decomposition of `op`: its entry in torch's table, else its CompositeImplicit kernel; or None."""
    torch = require_torch()
    from torch._decomp import decomposition_table

    if op in decomposition_table:
        return decomposition_table[op]
    if op.has_kernel_for_dispatch_key(torch._C.DispatchKey.CompositeImplicitAutograd):
        try:
            return _cia_table()[op]
        except KeyError:
            return None
    return None


@functools.lru_cache(maxsize=1)
def _cia_table():
    """`torch.export.default_decompositions()`, built once: it maps a CompositeImplicit op to its kernel."""
    return require_torch().export.default_decompositions()


def op_name(target) -> str:
    """'aten.linalg_inv', 'aten.lstm.input': an OpOverload as the FX importer's `torch.<name>` op spells it."""
    schema = target._schema
    name = schema.name.replace("::", ".")
    return f"{name}.{schema.overload_name}" if schema.overload_name else name


def _call_name(node) -> str | None:
    """`op_name` of a node calling an op with a schema, else None."""
    return op_name(node.target) if node.op == "call_function" and hasattr(node.target, "_schema") else None


def _unknown_ops(prog, context: ir.Context) -> list:
    """The aten ops of `prog` torch-mlir has no op for (the FX importer would emit `torch.operator`), in
    order; ops the importer rewrites itself (`aten.sym_size.int`, `aten._unsafe_index_put`, ...) are known."""
    torch = require_torch()
    from iree.compiler.extras import fx_importer

    rewritten = {*fx_importer.NODE_CANONICALIZE, *fx_importer.SYMBOLIC_OP_TO_TORCH_OP}
    found = []
    for node in prog.graph.nodes:
        t = node.target
        if (
            node.op == "call_function"
            and isinstance(t, torch._ops.OpOverload)
            and t not in found
            and t not in rewritten
            and not context.is_registered_operation(f"torch.{op_name(t)}")
        ):
            found.append(t)
    return found


def _source(node):
    """The node of the program before decomposition that `node` came from (its name), or None."""
    for src in node.meta.get("from_node") or ():
        return getattr(src, "name", None)
    return None


def _run_decompositions(prog, table: dict, label: str):
    """`prog.run_decompositions(table)`, with oneDNN off (torch's LSTM decomposition would otherwise keep a
    fused `mkldnn_rnn_layer` per layer instead of unrolling it); a failure is one line."""
    torch = require_torch()
    from torch.fx.experimental import proxy_tensor

    mkldnn = torch.backends.mkldnn.enabled
    torch.backends.mkldnn.enabled = False
    # torch 2.13 leaves the traced graph (and through it every weight) in this module-level map
    # after the decomposition: 1 GB of a 222 M model's weights stayed alive after its import
    # (restored as it was: entries added, and entries whose id a new fake tensor reused, both go)
    proxies = getattr(proxy_tensor, "_FAKE_TENSOR_ID_TO_PROXY_MAP_FOR_EXPORT", None)
    before = dict(proxies) if isinstance(proxies, dict) else {}
    try:
        return prog.run_decompositions(dict(table))
    except Exception as e:  # torch raises many types; all become one line
        ops = ", ".join(sorted(str(op) for op in table))
        raise OpscopeError(
            f"{label}: decomposing ({ops}) failed: {_short(e)}; try: add the op that message "
            "names to `decompositions` too, or keep DEFAULT_DECOMPOSITIONS (they cover BatchNorm, "
            "LSTM and GRU)"
        ) from None
    finally:
        torch.backends.mkldnn.enabled = mkldnn
        if isinstance(proxies, dict):
            proxies.clear()
            proxies.update(before)


def decompose_program(prog, decompositions: Iterable[str] = DEFAULT_DECOMPOSITIONS, label: str = "model"):
    """Phases decompose + name-steps: `decompositions`, then torch's decomposition of each op torch-mlir
    does not know, for as long as that leaves it knowing them all (an op whose decomposition still ends in
    an unknown op stays whole, so the check phase names the op the model called); recurrent layers come
    out unrolled and their matmuls named by step."""
    with warnings.catch_warnings():  # torch 2.13's own pytree deprecation (LeafSpec), not the user's
        warnings.filterwarnings("ignore", category=FutureWarning, message=".*LeafSpec")
        result = _decompose(prog, _decomposition_table(tuple(decompositions), label), label)
    name_recurrent_steps(prog, result)
    return result


def _decompose(prog, table: dict, label: str):
    """Phase decompose: `table`, then the unknown ops' decompositions that leave no unknown op behind."""
    context = new_context()
    result = _run_decompositions(prog, table, label) if table else prog
    added: dict = {}
    for _ in range(DECOMPOSE_ROUNDS):
        extra = {
            op: fn
            for op in _unknown_ops(result, context)
            if op not in table and op not in added and (fn := _torch_decomposition(op)) is not None
        }
        if not extra:
            break
        try:
            result = _run_decompositions(prog, {**table, **added, **extra}, label)
        except OpscopeError:
            break
        added.update(extra)
    if added and _unknown_ops(result, context):
        base = {n.name: n.target for n in prog.graph.nodes}
        unknown = set(_unknown_ops(result, context))
        culprits = {base.get(_source(n)) for n in result.graph.nodes if n.target in unknown}
        keep = {op: fn for op, fn in added.items() if op not in culprits}
        result = _run_decompositions(prog, {**table, **keep}, label) if (table or keep) else prog
    return result


def name_recurrent_steps(before, after) -> None:
    """Phase name-steps: the matmuls each recurrent op (`RECURRENT_OPS` in `before`) unrolled into (in
    `after`) get `recurrent.step_scopes` names in their meta; left unnamed when the count differs."""
    expected: dict[str, list[str]] = {}
    for node in before.graph.nodes:
        if _call_name(node) not in RECURRENT_OPS:
            continue
        x, _, _, _, layers, _, _, bidirectional, batch_first = node.args[:9]
        try:
            steps = int(x.meta["val"].shape[1 if batch_first else 0])
        except (KeyError, TypeError, AttributeError):  # no example value or a symbolic length
            continue
        expected[node.name] = step_scopes(module_path(node), int(layers), 2 if bidirectional else 1, steps)
    if not expected:
        return
    found: dict[str, list] = defaultdict(list)
    for node in after.graph.nodes:
        if _call_name(node) in _MATMUL_OPS:
            src = _source(node)
            if src in expected:
                found[src].append(node)
    for src, nodes in found.items():
        if len(nodes) == len(expected[src]):
            for node, scope in zip(nodes, expected[src]):
                node.meta[SCOPE_META] = scope


def check_program(prog, label: str) -> None:
    """Phase check: refuse the first op torch-mlir has no op for (and no decomposition helped), naming the
    op, the module that ran it and the model's line, and what to do instead."""
    unknown = set(_unknown_ops(prog, new_context()))
    for node in prog.graph.nodes:
        if node.target in unknown:
            raise OpscopeError(
                f"{label}: unsupported op '{op_name(node.target)}' at {node_place(node)}: torch-mlir has no "
                "lowering for it and torch has no decomposition into ops it lowers; try: compute it outside "
                "the model and pass the result as an input, or rewrite that line with other torch ops"
            )


def node_place(node) -> str:
    """'encoder.layer.0.attention (modeling_bert.py:412)': the node's module path and the model's line."""
    path = module_path(node)
    frames = re.findall(r'File "([^"]+)", line (\d+)', node.meta.get("stack_trace") or "")
    user = [f for f in frames if "/torch/" not in f[0]] or frames
    where = f"{user[-1][0].rsplit('/', 1)[-1]}:{user[-1][1]}" if user else ""
    if path and where:
        return f"{path} ({where})"
    return path or where or node.name


def _ordered_kwargs(model, kwargs: dict) -> dict:
    """kwargs in the order of forward()'s signature, the order torch.export flattens them in."""
    try:
        names = list(inspect.signature(model.forward).parameters)
    except (TypeError, ValueError):
        return dict(kwargs)
    rank = {n: i for i, n in enumerate(names)}
    return dict(sorted(kwargs.items(), key=lambda kv: rank.get(kv[0], len(rank))))


def flat_inputs(model, example_args: tuple, example_kwargs: dict | None = None) -> list[np.ndarray]:
    """The example tensors as numpy, in the imported function's argument order."""
    torch = require_torch()
    leaves = torch.utils._pytree.tree_leaves((tuple(example_args), _ordered_kwargs(model, example_kwargs or {})))
    return [t.detach().cpu().numpy() for t in leaves if isinstance(t, torch.Tensor)]


def eager_outputs(model, example_args: tuple, example_kwargs: dict | None = None) -> list[np.ndarray]:
    """PyTorch eager results, flattened like the imported function's results."""
    torch = require_torch()
    with torch.no_grad():
        out = model(*example_args, **(example_kwargs or {}))
    return [t.detach().cpu().numpy() for t in torch.utils._pytree.tree_leaves(out) if isinstance(t, torch.Tensor)]


def export_program(
    model,
    example_args: tuple = (),
    example_kwargs: dict | None = None,
    name: str | None = None,
    decompositions: Iterable[str] = DEFAULT_DECOMPOSITIONS,
):
    """Phases export + decompose + name-steps: a `torch.export.ExportedProgram`, or a one-line error
    saying what to try."""
    label = name or type(model).__name__
    return decompose_program(_export(model, example_args, example_kwargs, label), decompositions, label)


def _export(model, example_args: tuple, example_kwargs: dict | None, label: str):
    """Phase export: `torch.export.export`, non-strict, or a one-line error saying what to try."""
    torch = require_torch()
    with warnings.catch_warnings():  # torch 2.13's own pytree deprecation (LeafSpec), not the user's
        warnings.filterwarnings("ignore", category=FutureWarning, message=".*LeafSpec")
        # nn.LSTM/GRU/RNN re-assign their `_flat_weights` list in forward: torch's export notices, harmlessly
        warnings.filterwarnings("ignore", category=UserWarning, message=r"(?s).*_flat_weights.*register_buffer")
        try:
            return torch.export.export(
                model, tuple(example_args), _ordered_kwargs(model, example_kwargs or {}), strict=False
            )
        except Exception as e:  # torch raises many types; all become one line
            raise OpscopeError(f"{label}: torch.export failed: {_short(e)}; try: {_hint(e)}") from None


def import_program(prog, context: ir.Context | None = None, name: str | None = None) -> ir.Module:
    """Phases check + import: an ExportedProgram → a torch-dialect module with NameLoc'd ops (not yet lowered)."""
    label = name or type(prog).__name__
    check_program(prog, label)
    try:
        return _fx_import(prog, context, label)
    except _ImportFailure as failure:
        raise OpscopeError(failure.message(label)) from None


class _ImportFailure(Exception):
    """The FX importer raised `error` while importing `node` (None when no node was found)."""

    def __init__(self, error: BaseException, node):
        super().__init__(str(error))
        self.error, self.node = error, node

    @property
    def decomposable(self) -> bool:
        return (
            self.node is not None
            and hasattr(self.node.target, "_schema")
            and _torch_decomposition(self.node.target) is not None
        )

    def message(self, label: str) -> str:
        """One line: the op, its module and line, the importer's words and what to do."""
        if self.node is None or not hasattr(self.node.target, "_schema"):
            return (
                f"{label}: the FX importer failed: {_short(self.error)}; try: simplify forward() where the "
                "model's line points, or file an issue with torch-mlir"
            )
        fix = (
            f"decompositions=(*DEFAULT_DECOMPOSITIONS, '{self.node.target}')"
            if self.decomposable
            else "compute it outside the model and pass the result as an input, or rewrite that line with other ops"
        )
        return (
            f"{label}: the FX importer failed on '{op_name(self.node.target)}' at {node_place(self.node)}: "
            f"{_short(self.error)}; try: {fix}"
        )


def _fx_import(
    prog, context: ir.Context | None, label: str, parameters: Path | None = None, weights_dtype: str | None = None
) -> ir.Module:
    """Phase import: IREE's FX importer with the NameLoc'd context cache; `_ImportFailure` when it raises.
    With `parameters`, the weights go to that `.irpa` file instead of into the module (`torch_parameters`),
    float32 ones as `weights_dtype` when given."""
    require_torch()
    from iree.compiler.extras import fx_importer

    from opscope.importers.equal_tensors import share_equal_tensors

    ctx = context or new_context()
    for key, value in prog.constants.items():  # lifted tensor constants are looked up in state_dict
        if key not in prog.state_dict and hasattr(value, "dtype"):
            prog.state_dict[key] = value
    shared = share_equal_tensors(prog.state_dict)  # equal weights, one constant (the program's own put back)
    try:
        hooks = import_hooks(prog, externalize=parameters is not None, weights_dtype=weights_dtype)
        phase("import to MLIR")
        importer = fx_importer.FxImporter(context=ctx, hooks=hooks)
        importer._cc = _named_context_cache()(ctx, py_attr_tracker=importer._py_attr_tracker)
        try:
            importer.import_frozen_program(prog, func_name="main")
        except Exception as e:
            raise _ImportFailure(e, _failing_node(e)) from None
    finally:
        prog.state_dict.update(shared)
    if hooks.tensors:
        phase(f"write the weights to {Path(parameters).name}")
        name_file(importer.module, write_archive(hooks.tensors, parameters, label))
    return importer.module


def _import_decomposed(
    prog,
    decompositions: Iterable[str],
    context: ir.Context | None,
    label: str,
    parameters: Path | None = None,
    weights_dtype: str | None = None,
) -> ir.Module:
    """Phases decompose → name-steps → check → import; when the FX importer fails on an op torch can
    decompose, that op is decomposed too and the import runs again (up to `DECOMPOSE_ROUNDS` ops), so a
    refusal is left only where no decomposition helps."""
    extra: list[str] = []
    while True:
        phase("decompose")
        decomposed = decompose_program(prog, (*decompositions, *extra), label)
        check_program(decomposed, label)
        try:
            return _fx_import(decomposed, context, label, parameters, weights_dtype)
        except _ImportFailure as failure:
            target = str(failure.node.target) if failure.node is not None else ""
            if not failure.decomposable or target in extra or len(extra) >= DECOMPOSE_ROUNDS:
                raise OpscopeError(failure.message(label)) from None
            extra.append(target)


def _failing_node(e: BaseException):
    """The FX node the importer was importing when it raised (its `node` local, innermost frame first)."""
    torch = require_torch()
    frames = []
    tb = e.__traceback__
    while tb is not None:
        frames.append(tb.tb_frame)
        tb = tb.tb_next
    for frame in reversed(frames):
        node = frame.f_locals.get("node")
        if isinstance(node, torch.fx.Node):
            return node
    return None


def import_torch(
    model,
    example_args: tuple = (),
    name: str | None = None,
    decompositions: Iterable[str] = DEFAULT_DECOMPOSITIONS,
    example_kwargs: dict | None = None,
    context: ir.Context | None = None,
    parameters: str | Path | None = None,
    weights_dtype: str | None = None,
) -> ir.Module:
    """An nn.Module and example inputs → the canonical linalg module (`func.func @main`); with
    `parameters`, its weights are written to that `.irpa` file and the module refers to them
    (float32 ones stored as `weights_dtype`, bf16 or f16, when given)."""
    label = name or type(model).__name__
    prog = _export(model, example_args, example_kwargs, label)
    module = _import_decomposed(prog, decompositions, context, label, _path(parameters, weights_dtype), weights_dtype)
    del prog
    _free_traced_graphs(parameters)
    try:
        return lower_torch(module)
    except OpscopeError as e:
        raise OpscopeError(f"{label}: {e}") from None


def import_exported_file(
    path,
    name: str | None = None,
    decompositions: Iterable[str] = DEFAULT_DECOMPOSITIONS,
    parameters: str | Path | None = None,
    weights_dtype: str | None = None,
) -> ir.Module:
    """A `.pt2` file (`torch.export.save` of an ExportedProgram) → the canonical linalg module; with
    `parameters`, its weights are written to that `.irpa` file and the module refers to them
    (float32 ones stored as `weights_dtype`, bf16 or f16, when given)."""
    label = name or str(path)
    where = _path(parameters, weights_dtype)
    phase("load the exported program")
    module = _import_decomposed(load_exported_file(path, label), decompositions, None, label, where, weights_dtype)
    _free_traced_graphs(parameters)
    try:
        return lower_torch(module)
    except OpscopeError as e:
        raise OpscopeError(f"{label}: {e}") from None


def _free_traced_graphs(parameters) -> None:
    """The traced graphs hold the weights in reference cycles: with a parameter file (the route for
    models too large to hold twice), collect them before lowering; inline, the module holds a copy
    anyway and a collection (~0.2 s with torch loaded) would only slow every small import."""
    if parameters is not None:
        gc.collect()


def _path(parameters: str | Path | None, weights_dtype: str | None = None) -> Path | None:
    """The parameter file as a Path; a weights dtype without one is refused (it is how the file stores them)."""
    if parameters is None and weights_dtype is not None:
        raise OpscopeError(f"weights_dtype={weights_dtype} stores the weights in a parameter file: give parameters too")
    return None if parameters is None else Path(parameters)


_UNREGISTERED = re.compile(r"Deserializing (\S+) in pytree is not registered")


def _mentions_transformers(path) -> bool:
    """Whether the `.pt2` archive's programs name a transformers type (a ModelOutput in their pytree
    specs), so that importing transformers (~1.3 s) is paid only where it is needed; True when the
    archive cannot be read as a zip (torch.export.load then says what is wrong)."""
    import zipfile

    try:
        with zipfile.ZipFile(path) as archive:
            programs = [n for n in archive.namelist() if "/models/" in n and n.endswith(".json")]
            return not programs or any(b"transformers." in archive.read(n) for n in programs)
    except (OSError, zipfile.BadZipFile):
        return True


def load_exported_file(path, label: str):
    """Phase load: `torch.export.load`, with transformers' ModelOutput types registered as pytrees first
    (importing `transformers.modeling_outputs` registers them) when transformers is installed; a type that
    is still unknown is named, with the module to import."""
    torch = require_torch()
    if _mentions_transformers(path) and importlib.util.find_spec("transformers") is not None:
        import transformers.modeling_outputs  # noqa: F401  (registers every ModelOutput as a pytree node)
    quiet = logging.getLogger("torch.export")  # it logs the whole traceback of a failed load: kept, not shown
    causes: list[BaseException] = []

    class Keep(logging.Handler):
        def emit(self, record):
            if record.exc_info and record.exc_info[1] is not None:
                causes.append(record.exc_info[1])

    saved = quiet.handlers[:], quiet.level, quiet.propagate
    quiet.handlers, quiet.propagate = [Keep()], False
    quiet.setLevel(logging.WARNING)
    try:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", category=FutureWarning, message=".*LeafSpec")
            return torch.export.load(str(path))
    except Exception as e:
        for cause in causes + [e]:
            m = _UNREGISTERED.search(str(cause))
            if m:
                kind = m.group(1)
                module = kind.rpartition(".")[0] or kind
                raise OpscopeError(
                    f"{label}: its inputs or outputs hold a {kind}, a pytree type not registered in this process; "
                    f"try: import {module} (from the package {module.partition('.')[0]}) before loading it"
                ) from None
        generic = "error when deserializing" in str(e)  # torch's own words when the real cause was only logged
        cause = causes[0] if causes and generic else e
        raise OpscopeError(f"{label}: not a readable torch.export program ({_short(cause)})") from None
    finally:
        quiet.handlers, _, quiet.propagate = saved
        quiet.setLevel(saved[1])


def _short(e: BaseException, limit: int = 240) -> str:
    """The first meaningful line of an exception message, trimmed."""
    lines = [ln.strip() for ln in str(e).splitlines() if ln.strip()]
    text = lines[0] if lines else type(e).__name__
    text = f"{type(e).__name__}: {text}"
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _hint(e: BaseException) -> str:
    text = str(e)
    for key, hint in _TRY.items():
        if key.lower() in text.lower():
            return hint
    return "call the model once eagerly with the same inputs, then simplify forward() where the message points"
