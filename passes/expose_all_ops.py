"""`expose-all-ops`: make every intermediate tensor of a function one of its results.

Matches the ops of the entry block of every `func.func` with a body, in program order,
that compute a value: at least one operand and a ranked-tensor result, not
`tensor.empty`, and not a constant expression (`arith.constant`, `util.global.load`, a
weight's transpose, a `linalg.fill` of a scalar: `opscope.ir.const_expr`) unless
`constants=true`. Each of their results that something reads is appended after the
function's original results (which keep their indices and attributes) and described by a
result attribute `opscope.expose = {name, op, index[, site]}`: `name` is
`<site>#<k>`, the op's module path (`NameLoc`, `opscope.ir.sites.location_name`) and
its ordinal among the matched ops of that path (`<op label>#<k>` without a location;
`:<i>` appended for result i > 0 of a multi-result op), `op` its label
(`opscope.ir.labels`), `index` its position among the matched ops, `site` the module path
when it has one. Why: two builds of one model (a rewrite, injected taps, another target)
exposed alike can be compared op by op by name (`opscope.act.parity`, `opscope parity`).
Exposing first and injecting afterwards keeps the names: the taps' results come after.
`ops=<regex>` exposes only ops whose name or label it matches (names are computed before
filtering, so they do not shift). A function that other functions call is refused; one
exposed already is left alone.

    %1 = linalg.generic {...} ins(%0 : tensor<4x8xf32>) ... { math.exp } -> tensor<4x8xf32> loc("fc1")
    return %r : tensor<4x3xf32>
  becomes
    func.func @main(...) -> (tensor<4x3xf32>, tensor<4x8xf32> {opscope.expose = {index = 1 : i64,
        name = "fc1#1", op = "generic<exp>", site = "fc1"}})
    return %r, %1 : tensor<4x3xf32>, tensor<4x8xf32>
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import ClassVar

from iree.compiler import ir

from opscope.errors import OpscopeError
from opscope.ir.const_expr import is_const_expr, memoized
from opscope.ir.labels import op_label
from opscope.ir.sites import location_name
from opscope.passes.lower_opscope import append_results, appendable_return

EXPOSE_ATTR = "opscope.expose"
NEVER = frozenset({"tensor.empty", "bufferization.alloc_tensor", "arith.constant", "util.global.load"})


@dataclass(frozen=True)
class Exposure:
    """What one exposed result holds, as its `opscope.expose` attribute says."""

    result: int  # the function result it is
    index: int  # the op's position among the matched ops, in program order
    name: str  # `<site>#<k>` (`<op label>#<k>` without a location)
    op: str  # the op's label
    site: str | None  # the op's module path, None without a location


@dataclass(frozen=True)
class ExposeAllOps:
    """Append every intermediate tensor of each function to its results, named by site."""

    name: ClassVar[str] = "expose-all-ops"

    ops: str = ""
    constants: bool = False

    def __post_init__(self) -> None:
        """Refuse an `ops` regex that does not compile, in one line."""
        try:
            re.compile(self.ops)
        except re.error as e:
            raise OpscopeError(f"{self.name}: bad 'ops' regex '{self.ops}': {e}") from None

    def apply(self, module) -> None:
        body = module.operation.regions[0].blocks[0]
        for fn in [op.operation for op in body.operations if op.operation.name == "func.func"]:
            if not len(fn.regions[0].blocks) or _exposed_already(fn):
                continue  # a declaration, or exposed by an earlier run
            values, attrs = self._exposed(fn)
            if not values:
                continue
            append_results(fn, appendable_return(self.name, module, fn), values, attrs)

    def _exposed(self, fn) -> tuple[list[ir.Value], list[ir.Attribute]]:
        """The values to append and their attributes, in program order."""
        pattern = re.compile(self.ops) if self.ops else None
        i64 = ir.IntegerType.get_signless(64)
        values, attrs = [], []
        ordinals: dict[str, int] = {}
        index = 0
        with memoized():
            for op in fn.regions[0].blocks[0].operations:
                op = op.operation
                if not self._matches(op):
                    continue
                site = location_name(op.location)
                label = op_label(op)
                path = site or label
                k = ordinals.get(path, 0)
                ordinals[path] = k + 1
                name = f"{path}#{k}"
                n, index = index, index + 1
                if pattern is not None and not (pattern.search(name) or pattern.search(label)):
                    continue
                for i, result in enumerate(op.results):
                    if not isinstance(result.type, ir.RankedTensorType) or not any(True for _ in result.uses):
                        continue
                    fields = {
                        "name": ir.StringAttr.get(name + (f":{i}" if i else "")),
                        "op": ir.StringAttr.get(label),
                        "index": ir.IntegerAttr.get(i64, n),
                    }
                    if site:
                        fields["site"] = ir.StringAttr.get(site)
                    values.append(result)
                    attrs.append(ir.DictAttr.get({EXPOSE_ATTR: ir.DictAttr.get(fields)}))
        return values, attrs

    def _matches(self, op: ir.Operation) -> bool:
        """An op that computes a tensor from operands (and, unless `constants`, not from constants only)."""
        if op.name in NEVER or not len(op.operands) or op.name == "func.return":
            return False
        tensors = [r for r in op.results if isinstance(r.type, ir.RankedTensorType)]
        if not tensors:
            return False
        return self.constants or not all(is_const_expr(r) for r in tensors)


def _exposed_already(fn) -> bool:
    return "res_attrs" in fn.attributes and any(
        EXPOSE_ATTR in ir.DictAttr(a) for a in ir.ArrayAttr(fn.attributes["res_attrs"])
    )


def exposures(module, function: str | None = None) -> tuple[str, list[Exposure]]:
    """(function name, its exposed results in result order) of `function`, default the first
    function with exposed results; ("", []) when none has any."""
    for op in module.operation.regions[0].blocks[0].operations:
        fn = op.operation
        if fn.name != "func.func" or "res_attrs" not in fn.attributes:
            continue
        sym = ir.StringAttr(fn.attributes["sym_name"]).value
        if function is not None and sym != function:
            continue
        found = []
        for idx, attr in enumerate(ir.ArrayAttr(fn.attributes["res_attrs"])):
            d = ir.DictAttr(attr)
            if EXPOSE_ATTR not in d:
                continue
            e = ir.DictAttr(d[EXPOSE_ATTR])
            site = e["site"].value if "site" in e else None
            found.append(Exposure(idx, e["index"].value, e["name"].value, e["op"].value, site))
        if found:
            return sym, found
    return "", []
