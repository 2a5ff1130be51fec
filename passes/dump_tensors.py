"""`dump-tensors`: return the whole tapped tensors of the matmul sites as extra function results.

Matches every float, static-shaped linalg site (`opscope.ir.sites`: matmuls, contractions,
convolutions) in a function's entry block whose name `sites` finds (and, from Python, `keep`
accepts), the way the fakequant rewrites select them (`opscope.ir.site_select.select_sites`),
and appends its `role` tensor (`lhs`: the input activation, `rhs`: the weight or a computed
rhs such as attention's kᵀ, `out`: the result) after the function's results, which keep their
indices, in program order, one result per site. Each appended result carries
`opscope.dump = {role, site}`, and the function's `opscope.dumped` lists them as
`{result, role, shape, site}` (`dumped_results` reads it back); a second run appends after
the first. Why: host probes (stable rank, quantization error, 2:4 error) need whole
activation tensors, not sketches. The tensors' total size above `max-bytes` (default 256 MiB
per call) is refused before anything is rewritten; a function other functions call is
refused; a module with no selected site is left alone with a warning.

    %0 = linalg.matmul ins(%x, %w : tensor<4x8xf32>, tensor<8x3xf32>) outs(...) -> tensor<4x3xf32> loc("fc0")
    return %0 : tensor<4x3xf32>
  becomes
    func.func @main(...) -> (tensor<4x3xf32>, tensor<4x8xf32> {opscope.dump = {role = "lhs", site = "fc0"}})
        attributes {opscope.dumped = [{result = 1 : i64, role = "lhs", shape = array<i64: 4, 8>, site = "fc0"}]}
    return %0, %x : tensor<4x3xf32>, tensor<4x8xf32>
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import ClassVar, Literal

from iree.compiler import ir

from opscope.errors import OpscopeError
from opscope.ir.site_select import check_choice, select_sites
from opscope.ir.sites import ROLES, Site
from opscope.passes.lower_opscope import append_results, appendable_return

log = logging.getLogger("opscope")

DUMP_ATTR = "opscope.dump"  # on each appended result: {role, site}
DUMPED_ATTR = "opscope.dumped"  # on the function: [{result, role, shape, site}, ...] in result order
ELEMENT_BYTES = {"f32": 4, "f16": 2, "bf16": 2}
MIB = 2**20


@dataclass(frozen=True)
class Dumped:
    """One dumped tensor, as the function's `opscope.dumped` says."""

    result: int  # the function result that holds it
    site: str
    role: str
    shape: tuple[int, ...]


@dataclass(frozen=True)
class DumpTensors:
    """Append the whole lhs, rhs or out tensor of each selected matmul site to its function's results."""

    name: ClassVar[str] = "dump-tensors"

    sites: str = ""
    role: Literal["lhs", "rhs", "out"] = "lhs"
    max_bytes: int = 256 * MIB
    keep: Callable[[Site], bool] | None = field(default=None, compare=False, metadata={"api_only": True})

    def __post_init__(self) -> None:
        """Refuse a role, a `sites` regex or a budget with no meaning, in one line."""
        check_choice(self.name, "role", self.role, ROLES)
        try:
            re.compile(self.sites)
        except re.error as e:
            raise OpscopeError(f"{self.name}: bad 'sites' regex '{self.sites}': {e}") from None
        if self.max_bytes < 0:
            raise OpscopeError(f"{self.name}: option 'max-bytes' expects a byte count >= 0, got {self.max_bytes}")

    def apply(self, module) -> None:
        chosen = select_sites(self.name, module, self.sites, self.keep)
        if not chosen:
            log.warning("%s: no matmul sites to dump in this module", self.name)
            return
        total = sum(site.numel(self.role) * ELEMENT_BYTES[site.element_type(self.role)] for site in chosen)
        if total > self.max_bytes:
            raise OpscopeError(
                f"{self.name}: the {len(chosen)} tapped tensors take {_mib(total)} MiB per call, over "
                f"max-bytes={_mib(self.max_bytes)} MiB: narrow `sites` (e.g. sites='layers\\.0\\.') or raise max-bytes"
            )
        by_func: dict = {}
        for site in chosen:
            by_func.setdefault(site.op.parent, []).append(site)
        planned = []
        for fn, fn_sites in by_func.items():  # every refusal before the first rewrite
            planned.append((fn, appendable_return(self.name, module, fn), fn_sites))
        for fn, ret, fn_sites in planned:
            self._append(fn, ret, fn_sites)

    def _append(self, fn, ret, fn_sites: list[Site]) -> None:
        i64 = ir.IntegerType.get_signless(64)
        first = len(ir.FunctionType(ir.TypeAttr(fn.attributes["function_type"]).value).results)
        values, res_attrs = [], []
        table = list(ir.ArrayAttr(fn.attributes[DUMPED_ATTR])) if DUMPED_ATTR in fn.attributes else []
        for i, site in enumerate(fn_sites):
            site_attr, role_attr = ir.StringAttr.get(site.name), ir.StringAttr.get(self.role)
            values.append(site.value(self.role))
            res_attrs.append(ir.DictAttr.get({DUMP_ATTR: ir.DictAttr.get({"site": site_attr, "role": role_attr})}))
            table.append(
                ir.DictAttr.get(
                    {
                        "result": ir.IntegerAttr.get(i64, first + i),
                        "site": site_attr,
                        "role": role_attr,
                        "shape": ir.DenseI64ArrayAttr.get(list(site.shape(self.role))),
                    }
                )
            )
        append_results(fn, ret, values, res_attrs)
        fn.attributes[DUMPED_ATTR] = ir.ArrayAttr.get(table)


def _mib(n: int) -> str:
    return f"{n / MIB:.3g}"


def dumps(module, function: str | None = None) -> tuple[str, list[Dumped]]:
    """(function name, its dumped tensors in result order) of `function`, default the first
    function with an `opscope.dumped` table; ("", []) when none has one."""
    for op in module.operation.regions[0].blocks[0].operations:
        fn = op.operation
        if fn.name != "func.func" or DUMPED_ATTR not in fn.attributes:
            continue
        sym = ir.StringAttr(fn.attributes["sym_name"]).value
        if function is not None and sym != function:
            continue
        found = []
        for attr in ir.ArrayAttr(fn.attributes[DUMPED_ATTR]):
            d = ir.DictAttr(attr)
            found.append(
                Dumped(
                    ir.IntegerAttr(d["result"]).value,
                    ir.StringAttr(d["site"]).value,
                    ir.StringAttr(d["role"]).value,
                    tuple(ir.DenseI64ArrayAttr(d["shape"])),
                )
            )
        return sym, sorted(found, key=lambda x: x.result)
    return "", []


def dumped_results(module, function: str | None = None) -> list[tuple[str, str, tuple[int, ...]]]:
    """(site, role, shape) of every dumped result of `function` (default: the first function
    that has some), in result order; `dumps` also gives each one's result index."""
    return [(d.site, d.role, d.shape) for d in dumps(module, function)[1]]
