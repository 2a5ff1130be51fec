"""`extract-site`: outline one matmul/convolution site into a function of its own, `@site_<name>`.

Matches the site `site` names (`opscope.ir.sites`: its exact name, else a 0-based ordinal in
IR order) and adds a public `func.func @site_<name>` (the name with every character outside
[A-Za-z0-9_] made `_`, `opscope.site = "<name>"`) right after the site's function, holding a
copy of the site op at its real static shapes and its location. Its arguments are the
site's runtime operands: the lhs first (a convolution's input before its zero `tensor.pad` or
its spread over zeros, which are copied in; not a W @ x's weight lhs, which is copied in like the
other constants: `opscope.ir.weight_source.lhs_weight`), then every other operand that is not a constant expression
(`opscope.ir.const_expr`): a computed rhs (k in q·kᵀ), a weight the model takes as an
argument, an init that is no fill of a constant. Constant operands are copied in with their
chain (an `arith.constant`, a `util.global.load` of an immutable global, which stays in the
module, the transposes and broadcasts over it, a `linalg.fill` of a `tensor.empty`), so
IREE const-evaluates them as it does in the model. The function returns the site's result;
the original function is left as it was. `only=true` then erases every other function and
every global nothing reads any more: the module is the site alone, which is how a site is
compiled and timed (or memoized, `opscope.act.memoize.memoize_site`) by itself.

    %0 = linalg.matmul ins(%x, %wt : tensor<3x8xf32>, tensor<8x4xf32>) outs(%z : ...) loc("fc1")   // in @main
    func.func @site_fc1(%arg0: tensor<3x8xf32>) -> tensor<3x4xf32> attributes {opscope.site = "fc1"} {
      %w = util.global.load @w : tensor<4x8xf32>
      %wt = linalg.transpose ins(%w : ...) ...   %z = linalg.fill ...
      %0 = linalg.matmul ins(%arg0, %wt : ...) outs(%z : ...) -> tensor<3x4xf32> loc("fc1")
      return %0 : tensor<3x4xf32>
    }
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from typing import ClassVar

from iree.compiler import ir
from iree.compiler.dialects import func

from opscope.errors import OpscopeError
from opscope.ir.blocks import verify_or_refuse
from opscope.ir.build import clone_ops
from opscope.ir.const_expr import defining_ops, is_const_expr, memoized, owner, region_reads
from opscope.ir.site_select import MOST_NAMES
from opscope.ir.sites import ROLES, Site, find_sites
from opscope.ir.weight_source import lhs_weight

log = logging.getLogger("opscope")

PREFIX = "site_"
SITE_ATTR = "opscope.site"  # on the outlined function: the name of the site it holds
FUNCTIONS = ("func.func", "util.func", "util.initializer")  # what only=true erases


def function_name(site_name: str) -> str:
    """`site_<name>` with every character outside [A-Za-z0-9_] made `_` (`layer0.attn.q` -> `site_layer0_attn_q`)."""
    return PREFIX + re.sub(r"[^A-Za-z0-9_]", "_", site_name)


@dataclass(frozen=True)
class ExtractSite:
    """Outline one matmul/convolution site into a public function of its own (only=true: keep only it)."""

    name: ClassVar[str] = "extract-site"

    site: str = ""
    only: bool = False

    def choose(self, module) -> Site:
        """The site `site` names: an exact site name, else a 0-based ordinal; else a one-line error listing names."""
        sites = find_sites(module.operation)
        wanted = self.site.strip()
        if not wanted:
            raise OpscopeError(
                f"{self.name}: name the site to outline with site=<name or ordinal> (valid: {_valid(sites)})"
            )
        chosen = next((s for s in sites if s.name == wanted), None)
        if chosen is None and wanted.isdigit() and int(wanted) < len(sites):
            chosen = sites[int(wanted)]
        if chosen is None:
            raise OpscopeError(f"{self.name}: no matmul site '{wanted}' in this module (valid: {_valid(sites)})")
        shapes = [str(chosen.value(role).type) for role in ROLES]
        if chosen.dynamic or not all(
            ir.ShapedType(v.type).has_static_shape for v in chosen.op.operands if isinstance(v.type, ir.ShapedType)
        ):
            raise OpscopeError(
                f"{self.name}: site '{chosen.name}' at {chosen.location} has a dynamic shape "
                f"({' x '.join(shapes[:2])} -> {shapes[2]}): only static-shaped sites are outlined"
            )
        return chosen

    def apply(self, module) -> None:
        site = self.choose(module)
        body = module.operation.regions[0].blocks[0]
        with memoized():
            arguments, copies = _slice(site)
        home = _top_level(site.op)
        taken = {
            ir.StringAttr(op.operation.attributes["sym_name"]).value
            for op in body.operations
            if "sym_name" in op.operation.attributes
        }
        symbol, n = function_name(site.name), 0
        while symbol in taken:
            n += 1
            symbol = f"{function_name(site.name)}_{n}"
        loc = site.op.location
        result = site.op.results[0]
        fn = func.FuncOp(
            symbol,
            ir.FunctionType.get([a.type for a in arguments], [result.type]),
            loc=loc,
            ip=ir.InsertionPoint.after(home),
        )
        fn.operation.attributes[SITE_ATTR] = ir.StringAttr.get(site.name)
        entry = fn.add_entry_block(arg_locs=[loc] * len(arguments))
        mapping = dict(zip(arguments, entry.arguments))
        ip = ir.InsertionPoint(entry)
        clone_ops([*copies, site.op], ip, mapping)
        func.ReturnOp([mapping[result]], loc=loc, ip=ip)
        if self.only:
            _keep_only(body, fn.operation)
        log.info(
            "%s: outlined site '%s' into @%s (%d arguments, %d ops copied with it)%s",
            self.name,
            site.name,
            symbol,
            len(arguments),
            len(copies),
            ", erased everything else" if self.only else "",
        )
        verify_or_refuse(self.name, module, f"site '{site.name}'")


def _valid(sites: list[Site]) -> str:
    if not sites:
        return "none: this module has no matmul or convolution site"
    names = [s.name for s in sites]
    listed = ", ".join(names[:MOST_NAMES])
    if len(names) > MOST_NAMES:
        listed += f" and {len(names) - MOST_NAMES} more (`opscope sites MODEL` lists them)"
    return f"{listed}, or their ordinals 0..{len(sites) - 1}"


def _slice(site: Site) -> tuple[list[ir.Value], list[ir.Operation]]:
    """(the outlined function's arguments, the ops copied before the site op, in order): the lhs
    is argument 0 unless it is the weight of a W @ x (`lhs_weight`: copied in, as the model's
    IREE const-evaluates it); a constant expression, or the zero pad of the lhs, is copied with
    what it reads; any other value the site op reads is the next argument."""
    lhs = site.value("lhs")
    first = [] if lhs_weight(site) else [lhs]

    def is_input(v: ir.Value) -> bool:
        return isinstance(v, ir.BlockArgument) or not (is_const_expr(v) or _pads(v, lhs))

    inputs, copies = defining_ops([*site.op.operands, *region_reads(site.op)], is_input, ready=first)
    return [*first, *inputs], copies


def _pads(value: ir.Value, lhs: ir.Value) -> bool:
    """`value` is `lhs` as a convolution reads it, which `opscope.ir.sites` reads through: its zero
    `tensor.pad`, its spread over zeros (`tensor.insert_slice`: a transposed convolution), or either
    split into groups (`tensor.expand_shape`), so the copy takes the input itself (found by the
    generated-model tests: a transposed convolution's function took both the input and the zeros)."""
    if not isinstance(value, ir.OpResult):
        return False
    op = owner(value)
    if op.name not in ("tensor.pad", "tensor.insert_slice", "tensor.expand_shape"):
        return False
    source = op.operands[0]
    return source == lhs or _pads(source, lhs)


def _top_level(op: ir.Operation) -> ir.Operation:
    """The op directly in the module that holds `op` (its function)."""
    while op.parent is not None and op.parent.name != "builtin.module":
        op = op.parent
    return op


def _keep_only(body: ir.Block, keep: ir.Operation) -> None:
    """Erase every function but `keep`, then every `util.global` no `util.global.load` of `keep` reads."""
    for op in list(body.operations):
        op = op.operation
        if op.name in FUNCTIONS and op != keep:
            op.erase()
    read: set[str] = set()
    keep.walk(
        lambda op: (
            (read.add(ir.FlatSymbolRefAttr(op.attributes["global"]).value) if op.name == "util.global.load" else None)
            or ir.WalkResult.ADVANCE
        )
    )
    for op in list(body.operations):
        op = op.operation
        if op.name == "util.global" and ir.StringAttr(op.attributes["sym_name"]).value not in read:
            op.erase()
