"""Which sites a rewrite pass touches: `select_sites`, the filter every rewrite shares (a
`sites` regex, a Python `keep`, and the sites no rewrite can take, each logged with why), and
the one-line refusal of an enumerated option.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Sequence

from iree.compiler import ir

from opscope.errors import OpscopeError
from opscope.ir.sites import ROLES, Site, find_sites

log = logging.getLogger("opscope")

MOST_NAMES = 12  # site names a "names no site" error lists


def check_choice(pass_name: str, option: str, value: str, choices: Sequence[str]) -> None:
    """Refuse a value of an enumerated option, naming the pass and the choices."""
    if value not in choices:
        raise OpscopeError(f"{pass_name}: option '{option}' expects one of {', '.join(choices)}, got '{value}'")


def select_sites(pass_name: str, module, pattern: str, keep: Callable[[Site], bool] | None) -> list[Site]:
    """The float, static-shaped sites in a function's entry block whose name `pattern` finds
    and `keep` accepts; every other matching site is logged with why it is skipped."""
    try:
        regex = re.compile(pattern) if pattern else None
    except re.error as e:
        raise OpscopeError(f"{pass_name}: bad 'sites' regex '{pattern}': {e}") from None
    chosen = []
    every = find_sites(module.operation)
    if regex and every and not any(regex.search(s.name) for s in every):
        names = [s.name for s in every]
        listed = ", ".join(names[:MOST_NAMES]) + (
            f" and {len(names) - MOST_NAMES} more (`opscope sites MODEL` lists them)" if len(names) > MOST_NAMES else ""
        )
        raise OpscopeError(f"{pass_name}: sites='{pattern}' names no matmul site of this module (valid: {listed})")
    for site in every:
        if (regex and not regex.search(site.name)) or (keep is not None and not keep(site)):
            continue
        why = None
        if not site.op.name.startswith("linalg."):
            why = f"{site.op.name} (only linalg sites are rewritten: import to linalg first)"
        elif not site.is_float:
            why = f"integer matmul ({', '.join(site.element_type(r) for r in ROLES)}), already quantized"
        elif site.dynamic or any(not site.value(r).type.has_static_shape for r in ROLES):
            why = f"dynamic shape ({site.value('lhs').type} x {site.value('rhs').type})"
        elif not _in_entry_block(site.op):
            why = "not in a function's entry block"
        if why:
            log.warning("%s: skipping site '%s' at %s: %s", pass_name, site.name, site.location, why)
            continue
        chosen.append(site)
    return chosen


def _in_entry_block(op: ir.Operation) -> bool:
    parent = op.parent
    return parent is not None and parent.name == "func.func" and op.block == parent.regions[0].blocks[0]
