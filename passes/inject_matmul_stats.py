"""`inject-matmul-stats`: record sketches of every matmul's and convolution's lhs, rhs and out.

Matches every site `opscope.ir.sites` finds (linalg.matmul in any indexing-map form,
linalg.batch_matmul, linalg.contract, contraction `linalg.generic`s, `stablehlo.dot_general`,
and every linalg convolution: input, filter, result) in the entry block of a `func.func`,
and inserts after it one `opscope.stat` per sketch of §2.3 of the reference (roles lhs,
rhs, out, or those of its `roles` option; 13 stats of a 2-D tensor in the reference's order). An operand whose channels
are not its last dim (NCHW) carries `channel_dims` in every stat's options, so per-channel
statistics read its channels. It only says *what* is recorded: the IR computes the
same values, results are untouched; `lower-opscope` then makes the statistics results.
Sites are filtered by `sites` (a name regex) and, from Python, by a `keep(site)` predicate
(the reference's filtered form: compile cost grows with the number of taps).

    %0 = linalg.matmul ins(%a, %b : ...) outs(%z : ...) -> tensor<4x3xf32> loc("fc1")
    "opscope.stat"(%a) {kind = "min", options = {}, role = "lhs", site = "fc1"} : (tensor<4x8xf32>) -> ()
    ...
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import ClassVar

from iree.compiler import ir

from opscope.dialect.ops import stat
from opscope.errors import OpscopeError
from opscope.ir.dequant_view import dequant_view
from opscope.ir.flops import op_flops
from opscope.ir.manifest import SiteInfo, add_site_rows
from opscope.ir.sites import ROLES, Site, find_sites
from opscope.ir.stat_config import SketchOptions, StatConfig, plan_stats

log = logging.getLogger("opscope")


@dataclass(frozen=True)
class InjectMatmulStats(SketchOptions):
    """Insert opscope.stat ops for the lhs, rhs and out of every matmul site."""

    name: ClassVar[str] = "inject-matmul-stats"

    roles: str = "lhs,rhs,out"  # the operands sketched, comma-separated
    dequantize_codes: bool = False  # an integer site's weight codes sketched through their scales
    sites: str = ""
    keep: Callable[[Site], bool] | None = field(default=None, compare=False, metadata={"api_only": True})

    @property
    def config(self) -> StatConfig:
        roles = tuple(r.strip() for r in self.roles.split(",") if r.strip())
        return StatConfig(**self.sketch_options(), roles=roles, dequantize_codes=self.dequantize_codes)

    @classmethod
    def from_config(cls, config: StatConfig, **kw) -> InjectMatmulStats:
        return cls(
            **config.sketch_options(), roles=",".join(config.roles), dequantize_codes=config.dequantize_codes, **kw
        )

    def selected(self, module) -> list[Site]:
        """The sites this pass taps, after the name regex, the keep predicate and dtype checks."""
        try:
            pattern = re.compile(self.sites) if self.sites else None
        except re.error as e:
            raise OpscopeError(f"{self.name}: bad 'sites' regex '{self.sites}': {e}") from None
        chosen = []
        for site in find_sites(module.operation):
            if pattern and not pattern.search(site.name):
                continue
            if self.keep is not None and not self.keep(site):
                continue
            if site.dynamic or any(not site.value(r).type.has_static_shape for r in ROLES):
                raise OpscopeError(
                    f"{self.name}: site '{site.name}' at {site.location} has a dynamic shape "
                    f"({site.value('lhs').type} x {site.value('rhs').type}); stat kernels are "
                    "static-shaped: specialize the shapes first or exclude it with sites=<regex>"
                )
            parent = site.op.parent
            if parent is None or parent.name != "func.func":
                log.warning(
                    "%s: skipping site '%s' at %s: not in a function's entry block",
                    self.name,
                    site.name,
                    site.location,
                )
                continue
            chosen.append(site)
        return chosen

    def apply(self, module) -> None:
        config = self.config
        lo, hi = config.hist_range
        sites = self.selected(module)
        if not sites:
            log.warning("%s: no matmul sites to tap in this module", self.name)
            return
        _annotate_sites(sites)
        for site in sites:
            with site.op.location:
                ip, previous = None, None
                for role, (value, after) in self._tapped(site, config).items():
                    if previous is None or after != previous:  # roles read after one op follow each other
                        ip, previous = ir.InsertionPoint.after(after), after
                    channels = site.channels.get(role)
                    for req in plan_stats(tuple(ir.ShapedType(value.type).shape), config, channels):
                        options = {}
                        if req.kind == "hist":
                            options = {"bins": config.hist_bins, "lo": lo, "hi": hi, "normalize": config.hist_normalize}
                        if channels:
                            options["channel_dims"] = list(channels)
                        op = stat(value, req.kind, site.name, role, options, loc=site.op.location, ip=ip)
                        ip = ir.InsertionPoint.after(op)

    def _tapped(self, site: Site, config: StatConfig) -> dict[str, tuple[ir.Value, ir.Operation]]:
        """role -> (the tensor its taps read, the op they follow): the site's operands, or for an
        integer site the float tensors it stands for (`opscope.ir.dequant_view`), each stand-in
        that is not the float model's tensor named in a warning."""
        if site.is_float:
            return {role: (site.value(role), site.op) for role in config.roles}
        view = dequant_view(site, config.roles, config.dequantize_codes)
        types = ", ".join(site.element_type(r) for r in ROLES)
        for note in view.notes:
            log.warning("%s: integer site '%s' (%s) at %s: %s", self.name, site.name, types, site.location, note)
        return {role: (v.value, v.after) for role, v in view.roles.items()}


def _annotate_sites(sites: list[Site]) -> None:
    """Record each function's site table (`opscope.sites`) for the manifest."""
    by_func: dict = {}
    for s in sites:
        by_func.setdefault(s.op.parent, []).append(SiteInfo(s.name, s.kind, s.batch, s.m, s.k, s.n, _flops(s)))
    for func_op, rows in by_func.items():
        add_site_rows(func_op, rows)


def _flops(site: Site) -> int:
    """The site's FLOPs as `opscope.ir.flops` counts its op (what the site-cost sidecar and
    the static analyses report); the 2·batch·M·K·N formula where the op is not read (a
    `stablehlo.dot_general` before lowering)."""
    flops = op_flops(site.op)
    return site.flops if flops is None else flops
