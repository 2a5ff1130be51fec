"""The weights of a module's matmul and convolution sites, read as numpy and replaced by new values.

A weight is the stored tensor a site reads as its rhs (or as its lhs in a W @ x:
`opscope.ir.weight_source.lhs_weight`), found under the transposes and
broadcasts an importer put in between (`opscope.ir.weight_trace.copy_source`, as
`fakequant-weights` finds it): an `arith.constant` holding `dense<…>` (source `constant`)
or `dense_resource<…>` (source `resource`), an immutable `util.global` holding either
(source `global`) or naming a parameter in the module's parameter file (source `parameter`,
`externalize-weights`: read from the file), or a function argument (source `argument`: a model that takes its
weights as inputs; its values come from the caller's inputs). Its `k_dims` are the stored
tensor's dims the site reduces over, so `Weight.matrix()` is the [out, K] matrix probes
and decompositions take (for `x[M,K] @ W[K,N]` it is Wᵀ), whatever the stored layout. A MoE's
experts, gathered per token from a bank `[E, out, K]` (`opscope.ir.weight_source`), are that bank:
its matrix is [E·out, K], a replacement is fed to the gather.

    ws = read_weights(module, sites="^fc")            # [Weight(name='fc0', sites=('fc0',), shape=(64, 64), ...)]
    replace_weights(module, {"fc0": low_rank(ws[0].matrix())})

`replace_weights` feeds every site reading a weight a new `arith.constant` holding the
replacement (stored as a `dense_resource` blob, in the weight's element type: bf16 rounded
to nearest even), re-emitting the copies between weight and site on top, exactly as
`fakequant-weights` feeds its round trip; the original stays for its other readers (a tied
embedding's gather). Element types f32, f16, bf16 and f64 are read, as float32 (bf16 and
f16 exactly). `dense_resource` blobs are not readable through the Python bindings: they
are read from the module's printed resource section, printed once per call. A pass that
rewrites around a weight itself (`factor-weight`) reads stored tensors with `read_stored`
and stores new ones with `resource_attr`, the same reader and blob writer.
"""

from __future__ import annotations

import binascii
import io
import logging
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from math import prod

import numpy as np
from iree.compiler import ir
from iree.compiler.dialects import arith

from opscope.errors import OpscopeError
from opscope.ir.const_expr import is_attr, memoized, owner
from opscope.ir.parameter_files import parameter_bytes, parameter_files, parameter_ref
from opscope.ir.site_select import MOST_NAMES, select_sites
from opscope.ir.sites import Site, operand_dims
from opscope.ir.weight_source import Gather, gathered_weight, lhs_weight, rhs_source
from opscope.ir.weight_trace import copy_source, replay

log = logging.getLogger("opscope")

ELEMENT_TYPES = ("f32", "f16", "bf16", "f64")
_NUMPY = {"f32": "<f4", "f16": "<f2", "f64": "<f8", "bf16": "<u2"}  # how each is stored, little-endian
_NAME_TOKEN = r'"(?:[^"\\]|\\.)*"|[^\s:>"]+'  # a resource name as MLIR prints it: bare or quoted
RESOURCE_REF = re.compile(rf"dense_resource<({_NAME_TOKEN})>")
_BLOB_KEY = re.compile(rb"[\s,]*(" + _NAME_TOKEN.encode() + rb')\s*:\s*"0x')  # its hex runs to the next quote
_NUMBER = re.compile(r"0x[0-9A-Fa-f]+|[-+]?(?:inf|nan|\d+(?:\.\d*)?(?:[eE][-+]?\d+)?)")


@dataclass(frozen=True)
class Weight:
    """One weight tensor of a module, as stored, and the sites that read it."""

    name: str  # the first site that reads it (site.name): unique per weight
    sites: tuple[str, ...]  # every site that reads this tensor (a tied embedding and lm_head: several)
    shape: tuple[int, ...]  # as stored
    element_type: str  # "f32", "f16", "bf16", "f64"
    k_dims: tuple[int, ...]  # the stored tensor's dims the sites reduce over (their K)
    source: str  # "constant" | "global" | "resource" | "argument"
    values: np.ndarray = field(repr=False, compare=False)  # float32, as stored (shape `shape`)

    @property
    def element_bytes(self) -> int:
        """Bytes a stored element takes (2 for f16 and bf16)."""
        return np.dtype(_NUMPY[self.element_type]).itemsize

    def _order(self) -> list[int]:
        return [d for d in range(len(self.shape)) if d not in self.k_dims] + list(self.k_dims)

    @property
    def matrix_shape(self) -> tuple[int, int]:
        """(out, K): the other dims' sizes multiplied, then the K dims' sizes multiplied."""
        return (
            prod(n for d, n in enumerate(self.shape) if d not in self.k_dims),
            prod(self.shape[d] for d in self.k_dims),
        )

    def matrix(self) -> np.ndarray:
        """The weight as a float32 [out, K] matrix: the other dims first (flattened, in
        order), the K dims last (flattened, in order). For `x[M,K] @ W[K,N]` it is Wᵀ."""
        return np.ascontiguousarray(self.values.transpose(self._order())).reshape(self.matrix_shape)

    def from_matrix(self, m: np.ndarray) -> np.ndarray:
        """The inverse of `matrix()`: an [out, K] matrix back in the stored layout, as a new float32 array."""
        m = np.asarray(m)
        if m.shape != self.matrix_shape:
            raise OpscopeError(
                f"weight '{self.name}': a replacement must be its [out, K] matrix of shape "
                f"{_shape(self.matrix_shape)} (stored {_shape(self.shape)}, K dims "
                f"{list(self.k_dims)}), got {_shape(m.shape)}"
            )
        order = self._order()
        m = m.astype(np.float32, copy=False).reshape([self.shape[d] for d in order])
        return np.array(m.transpose(np.argsort(order)), order="C")  # a copy: never the caller's memory


def read_weights(module: ir.Module, sites: str = "", inputs: Sequence[np.ndarray] | None = None) -> list[Weight]:
    """The weights read by every float, static-shaped site whose name the regex `sites`
    finds, in site order, each tensor once with every site reading it (one tensor read with
    other K dims is another weight). A weight passed as a function argument is read from
    `inputs` (the function's arguments, in order) and skipped without them; a computed rhs
    (attention's q·kᵀ) is skipped, and so is every other site, each with a log line."""
    with module.context:
        found = _find(module, sites, arguments=inputs is not None, who="read_weights")
        files = parameter_files(module)
        blobs = ResourceBlobs(module) if any(f.is_resource for f in found) else None
        return [
            Weight(f.name, f.sites, f.shape, f.element_type, f.k_dims, f.source, _read(f, blobs, inputs, files))
            for f in found
        ]


def replace_weights(module: ir.Module, new: Mapping[str, np.ndarray]) -> None:
    """Feed every site reading weight `name` the [out, K] matrix `new[name]` instead (see
    the module docstring); every name and shape is checked before the module changes."""
    with module.context:
        found = {f.name: f for f in _find(module, "", arguments=True, who="replace_weights")}
        unknown = [name for name in new if name not in found]
        if unknown:
            names = list(found)
            valid = ", ".join(names[:MOST_NAMES]) or "none: no site of it reads a weight"
            if len(names) > MOST_NAMES:
                valid += f" and {len(names) - MOST_NAMES} more (read_weights lists them)"
            raise OpscopeError(f"replace_weights: no weight named '{unknown[0]}' in this module (valid: {valid})")
        stored = {name: found[name].weight().from_matrix(m) for name, m in new.items()}
        for name, values in stored.items():
            _replace(found[name], values)
        module.operation.verify()


def read_stored(
    module: ir.Module, values: Sequence[ir.Value], names: Sequence[str]
) -> list[tuple[tuple, np.ndarray] | str]:
    """Each tensor of `values` (where `copy_source` ends) as (a key naming its storage: every
    load of one global shares it, its float32 values in its stored shape) when it is a stored
    weight, else why not; `names` name them in errors. For a pass that reads weights itself
    (`factor-weight`); blobs are printed once, and only when one is read."""
    globals_ = _globals(module)
    located: list[tuple[tuple, str, ir.Attribute] | str] = []
    for value in values:
        element = str(ir.RankedTensorType(value.type).element_type)
        if element not in ELEMENT_TYPES:
            located.append(f"its weight is {element}, not one of {', '.join(ELEMENT_TYPES)}")
        elif isinstance(value, ir.BlockArgument):
            located.append("its weight is a function argument, not stored")
        else:
            located.append(_storage(value, globals_))
    blobs = ResourceBlobs(module) if any(not isinstance(x, str) and _resource(x[2]) for x in located) else None
    files = parameter_files(module)
    out: list[tuple[tuple, np.ndarray] | str] = []
    for value, name, found in zip(values, names, located):
        if isinstance(found, str):
            out.append(found)
            continue
        ty = ir.RankedTensorType(value.type)
        out.append((found[0], _values(found[2], tuple(ty.shape), str(ty.element_type), name, blobs, files)))
    return out


# ------------------------------------------------------------------------------------- discovery


@dataclass
class _Found:
    """A weight as the IR holds it: where it is stored and which sites read it through which copies."""

    name: str
    value: ir.Value  # the stored tensor (copy_source's end)
    source: str
    attr: ir.Attribute | None  # its dense or dense_resource attribute (None for an argument)
    k_dims: tuple[int, ...]
    readers: list[tuple[Site, list[ir.Operation], ir.Value, Gather | None, int]] = field(default_factory=list)
    # each: the site, the copies from the stored tensor, the stored tensor, the gather (a MoE's experts)

    @property
    def sites(self) -> tuple[str, ...]:
        return tuple(site.name for site, *_ in self.readers)

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(ir.RankedTensorType(self.value.type).shape)

    @property
    def element_type(self) -> str:
        return str(ir.RankedTensorType(self.value.type).element_type)

    @property
    def is_resource(self) -> bool:
        return self.attr is not None and _resource(self.attr) is not None

    def weight(self) -> Weight:
        """A `Weight` without values: enough for `matrix_shape` and `from_matrix`."""
        return Weight(self.name, self.sites, self.shape, self.element_type, self.k_dims, self.source, np.empty(0))


def _find(module: ir.Module, pattern: str, arguments: bool, who: str) -> list[_Found]:
    """The weights of the sites `pattern` selects, in site order, keyed by the stored tensor
    (a global by its symbol: every load of it is one tensor) and the K dims it is read with."""
    globals_ = _globals(module)
    found: dict[tuple, _Found] = {}
    with memoized():
        for site in select_sites(who, module, pattern, None):
            why, item = _locate(site, globals_, arguments)
            if why is not None:
                (log.info if why.startswith("its rhs is computed") else log.warning)(
                    "%s: skipping site '%s' at %s: %s", who, site.name, site.location, why
                )
                continue
            key, value, source, attr, k_dims, chain, gather, index = item
            entry = found.setdefault((key, k_dims), _Found(site.name, value, source, attr, k_dims))
            entry.readers.append((site, chain, value, gather, index))
    return list(found.values())


def _locate(site: Site, globals_: dict[str, ir.Operation], arguments: bool):
    """(None, (key, stored value, source, attribute, K dims, copies, gather, the site operand reading
    it)) or (why skipped, None). The weight is the rhs, or the lhs of a W @ x (`lhs_weight`)."""
    index, kind = (0, "constant") if lhs_weight(site) else (1, rhs_source(site))
    if kind == "computed":
        return "its rhs is computed, not a weight", None
    if kind == "argument" and not arguments:
        return "its rhs is a function argument (pass the inputs to read it)", None
    gather = gathered_weight(site) if kind == "gathered" else None
    if gather is not None:  # a MoE's experts: the bank they are gathered from, [experts x out, K]
        value, k_dims, chain = copy_source(gather.bank, gather.k_dims)
    else:
        rhs, role = site.op.operands[index], ("lhs", "rhs")[index]
        if not ir.RankedTensorType(rhs.type).rank:
            return f"rank-0 {role}", None
        k_dims = operand_dims(site, role)
        if k_dims is None:
            return f"its {role} is indexed by a compound expression of its K loops", None
        value, k_dims, chain = copy_source(rhs, k_dims)
    element = str(ir.RankedTensorType(value.type).element_type)
    if element not in ELEMENT_TYPES:
        return f"its weight is {element}, not one of {', '.join(ELEMENT_TYPES)}", None
    if isinstance(value, ir.BlockArgument):
        func = site.op.parent
        arg = ir.BlockArgument(value).arg_number
        return None, (
            ("argument", ir.StringAttr(func.attributes["sym_name"]).value, arg),
            value,
            "argument",
            None,
            k_dims,
            chain,
            gather,
            index,
        )
    stored = _storage(value, globals_)
    if isinstance(stored, str):
        return stored, None
    key, source, attr = stored
    return None, (key, value, source, attr, k_dims, chain, gather, index)


def _globals(module: ir.Module) -> dict[str, ir.Operation]:
    """The module's `util.global`s by symbol."""
    return {
        ir.StringAttr(op.attributes["sym_name"]).value: op
        for op in (o.operation for o in module.body.operations)
        if op.name == "util.global"
    }


def _storage(value: ir.Value, globals_: dict[str, ir.Operation]) -> tuple[tuple, str, ir.Attribute] | str:
    """(key, source, dense or dense_resource attribute) of a stored tensor (an `arith.constant`
    or a `util.global.load`: the key names the storage, one per global), or why it is not one."""
    op = owner(value)
    if op.name == "arith.constant":
        key, source, attr = ("value", value), "constant", op.attributes["value"]
    elif op.name == "util.global.load":
        sym = ir.FlatSymbolRefAttr(op.attributes["global"]).value
        g = globals_.get(sym)
        if g is None or "initial_value" not in g.attributes:
            return f"its global @{sym} has no initial value in this module (set by an initializer)"
        key, source, attr = ("global", sym), "global", g.attributes["initial_value"]
    else:
        return f"its weight is computed by '{op.name}' from constants (a cast or dequantization), not stored"
    if _resource(attr) is not None:
        source = "resource" if source == "constant" else source
    elif parameter_ref(attr) is not None:
        source = "parameter"
    elif not is_attr(attr, ir.DenseElementsAttr):
        return f"its weight's {source} holds neither dense<...> nor dense_resource<...> elements"
    return key, source, attr


# --------------------------------------------------------------------------------------- reading


def _read(
    f: _Found, blobs: ResourceBlobs | None, inputs: Sequence[np.ndarray] | None, files: Mapping[str, str]
) -> np.ndarray:
    """A weight's values as float32 in its stored shape."""
    if f.source == "argument":
        return _argument(f, inputs)
    return _values(f.attr, f.shape, f.element_type, f.name, blobs, files)


def _values(
    attr: ir.Attribute,
    shape: tuple[int, ...],
    element_type: str,
    name: str,
    blobs: ResourceBlobs | None,
    files: Mapping[str, str] | None = None,
) -> np.ndarray:
    """The float32 values of a stored tensor's dense, dense_resource or parameter attribute (read
    from the module's parameter file, `files`: scope -> path), in `shape`."""
    resource = _resource(attr)
    ref = parameter_ref(attr) if resource is None else None
    if ref is not None:
        scope, key = ref
        if scope not in (files or {}):
            raise OpscopeError(
                f"weight '{name}': it is parameter '{key}' of scope '{scope}', and the module names no file "
                f"for that scope (opscope.parameters): load the module that externalize-weights wrote"
            )
        what, raw = f"its parameter '{key}' in {files[scope]}", parameter_bytes(files[scope], key)
    elif resource is not None:
        what, raw = f"its dense_resource blob {resource}", blobs.data(resource, name)
    if resource is not None or ref is not None:
        numel = prod(shape)
        item = np.dtype(_NUMPY[element_type]).itemsize
        if len(raw) != numel * item:
            raise OpscopeError(
                f"weight '{name}': {what} holds {len(raw)} bytes, but "
                f"{_shape(shape)} {element_type} needs {numel * item}: the module is damaged, "
                "re-export it"
            )
        return _decode(np.frombuffer(raw, dtype=_NUMPY[element_type]), element_type).reshape(shape)
    if element_type == "bf16":  # the bindings give no buffer for bf16: read its printed form
        return _bf16_from_text(str(attr), shape, name)
    return np.array(ir.DenseElementsAttr(attr), dtype=np.float32).reshape(shape)


def _argument(f: _Found, inputs: Sequence[np.ndarray]) -> np.ndarray:
    arg = ir.BlockArgument(f.value).arg_number
    if arg >= len(inputs):
        raise OpscopeError(
            f"read_weights: weight '{f.name}' is argument #{arg} of its function, but "
            f"{len(inputs)} inputs were given: pass every argument, in order"
        )
    x = np.asarray(inputs[arg])
    if tuple(x.shape) != f.shape:
        raise OpscopeError(
            f"read_weights: weight '{f.name}' is argument #{arg} of shape {_shape(f.shape)}, but "
            f"input #{arg} has shape {_shape(x.shape)}: pass the function's arguments in order"
        )
    if x.dtype.name == "bfloat16":
        return _decode(np.asarray(x, order="C").view(np.uint16), "bf16")
    return np.array(x, dtype=np.float32)


def _decode(x: np.ndarray, element_type: str) -> np.ndarray:
    """Stored elements (bf16 as its uint16 bits) as float32."""
    if element_type == "bf16":
        return (x.astype(np.uint32) << 16).view(np.float32)
    return x.astype(np.float32)


def _bf16_from_text(text: str, shape: tuple[int, ...], name: str) -> np.ndarray:
    """A bf16 `dense<…>` attribute's values from its printed form: `"0x…"` raw little-endian
    bits (more than 100 elements) or a list of numbers (decimal, or hex bits for NaN/inf)."""
    body = text[text.index("<") + 1 : text.rindex(" : ")].rstrip(">")
    numel = prod(shape)
    if body.startswith('"0x'):
        bits = np.frombuffer(binascii.unhexlify(body[3 : body.index('"', 1)]), dtype="<u2")
    else:
        tokens = _NUMBER.findall(body)
        hexes = np.array([t.startswith("0x") for t in tokens], dtype=bool)
        bits = _bf16_bits(np.array([0.0 if h else float(t) for h, t in zip(hexes, tokens)], dtype=np.float32))
        bits[hexes] = [int(t, 16) for h, t in zip(hexes, tokens) if h]
    if bits.size == 1 and numel != 1:  # a splat
        bits = np.full(numel, bits[0], np.uint16)
    if bits.size != numel:
        raise OpscopeError(f"weight '{name}': read {bits.size} bf16 values from its constant, expected {numel}")
    return _decode(bits, "bf16").reshape(shape)


def _resource(attr: ir.Attribute | None) -> str | None:
    """The resource name (as printed) of a `dense_resource<…>` attribute, else None."""
    if attr is None:
        return None
    try:
        ir.DenseResourceElementsAttr(attr)
    except ValueError:
        return None
    match = RESOURCE_REF.match(str(attr))
    return match.group(1) if match else None


class ResourceBlobs:
    """The module's `dense_resource` blobs, printed once (dense elements elided: those are
    read through the bindings) and decoded from hex only when asked for."""

    def __init__(self, module: ir.Module):
        buf = io.BytesIO()
        module.operation.print(file=buf, binary=True, large_elements_limit=1, large_resource_limit=1 << 62)
        self.text = buf.getvalue()
        self.spans: dict[str, tuple[int, int]] = {}
        start = self.text.rfind(b"{-#")
        section = re.compile(rb"dialect_resources\s*:\s*\{").search(self.text, max(start, 0)) if start >= 0 else None
        builtin = re.compile(rb"\bbuiltin\s*:\s*\{").search(self.text, section.end()) if section else None
        pos = builtin.end() if builtin else len(self.text)
        while builtin and (match := _BLOB_KEY.match(self.text, pos)):
            end = self.text.find(b'"', match.end())
            if end < 0:
                break
            self.spans[match.group(1).decode()] = (match.end(), end)
            pos = end + 1

    def data(self, resource: str, weight: str) -> bytes:
        """The blob's data (after its 4-byte alignment)."""
        if resource not in self.spans:
            raise OpscopeError(
                f"weight '{weight}': its dense_resource blob {resource} is not in the module "
                "(elided when it was printed?): load the module from a file that holds its weights"
            )
        begin, end = self.spans[resource]
        return binascii.unhexlify(self.text[begin + 8 : end])

    def hex(self, resource: str) -> str | None:
        """The blob as the resource section prints it (`0x` + alignment + data, in hex), or None."""
        if resource not in self.spans:
            return None
        begin, end = self.spans[resource]
        return (b"0x" + self.text[begin:end]).decode()


# -------------------------------------------------------------------------------------- replacing


def _replace(f: _Found, values: np.ndarray) -> None:
    """Feed each reader of `f` a new constant holding `values` (one constant per function,
    before its first reader), re-emitting the copies; erase what is left unused."""
    ty = ir.RankedTensorType(f.value.type)
    attr = resource_attr(values, ty, f.name)
    constants: dict[ir.Operation, ir.Value] = {}
    for site, chain, _, gather, index in f.readers:
        func = site.op.parent
        before = ir.InsertionPoint(gather.gather if gather is not None else site.op)
        if func not in constants:
            constants[func] = arith.ConstantOp(ty, attr, loc=site.op.location, ip=before).result
        fed = replay(chain, constants[func], before)
        if gather is not None:
            gather.feed(fed)
        else:
            site.op.operands[index] = fed
        for op in reversed(chain):  # the original copies, where nothing else reads them
            if any(len(list(r.uses)) for r in op.results):
                break
            op.erase()
    for old in {stored: None for _, _, stored, *_ in f.readers}:  # each load of a global, in order
        if isinstance(old, ir.OpResult) and not len(list(old.uses)):
            owner(old).erase()  # the old constant or global load, now unread (the global itself stays)


def resource_attr(values: np.ndarray, ty: ir.RankedTensorType, name: str) -> ir.Attribute:
    """A `dense_resource` attribute of type `ty` holding float32 `values` (of `ty`'s shape) in
    `ty`'s element type (bf16 rounded to nearest even), its blob named after `name`. The
    blob keeps the array it is given: `values` must be the caller's own (a fresh array)."""
    return ir.DenseResourceElementsAttr.get_from_buffer(_encode(values, str(ty.element_type)), _resource_name(name), ty)


def elements_attr(values: np.ndarray, ty: ir.RankedTensorType) -> ir.Attribute:
    """A `dense` attribute of type `ty` holding float32 `values` in `ty`'s element type (bf16
    rounded to nearest even): for a constant read inside a dispatch, where IREE 3.13's llvm-cpu
    codegen fails on a bf16 `dense_resource` ("'arith.constant' op failed to verify that all of
    {value, result} have same type"; found by the generated-model tests through `sparse-weight`)."""
    return ir.DenseElementsAttr.get(_encode(values, str(ty.element_type)), type=ty)


def _encode(values: np.ndarray, element_type: str) -> np.ndarray:
    """float32 values as the little-endian elements of `element_type` (bf16: round to nearest
    even). The blob keeps the array it is given: `values` must be ours (`from_matrix`'s copy)."""
    if element_type == "bf16":
        return _bf16_bits(values)
    return np.asarray(values, dtype=_NUMPY[element_type], order="C")


def _bf16_bits(x) -> np.ndarray:
    """float32 → bf16 bits, rounded to nearest even; NaN stays a (quiet) NaN of its sign."""
    x = np.asarray(x, dtype=np.float32, order="C")
    u = x.view(np.uint32)
    bits = ((u + np.uint32(0x7FFF) + ((u >> 16) & np.uint32(1))) >> 16).astype(np.uint16)
    nan = np.isnan(x)
    if nan.any():
        bits[nan] = ((u[nan] >> 16) | 0x40).astype(np.uint16)
    return bits


def _resource_name(weight: str) -> str:
    return "opscope." + re.sub(r"[^A-Za-z0-9_.]", "_", weight)  # MLIR renames it on a collision


def _shape(shape: Sequence[int]) -> str:
    return "×".join(str(d) for d in shape) if len(shape) else "()"
