"""Where an op came from, the same for an IR op and the FX node it was imported from.

IREE's FX importer locates every op at `NameLoc(<nn.Module path>)` (opscope's importer,
`opscope.importers.torch_fx`) around the call stack of the node's `stack_trace`, innermost
frame first. The key is that path and those (file, line) frames: an op and its node share it,
and the ops of one key are told apart by their order, which lowering keeps.
"""

from __future__ import annotations

import re

from iree.compiler import ir

from opscope.ir.sites import location_name

_FRAME_IR = re.compile(r'"([^"]+)":(\d+):\d+')
_FRAME_FX = re.compile(r'File "([^"]+)", line ([0-9]+),')

Key = tuple[str, tuple[tuple[str, int], ...]]


def ir_key(loc: ir.Location) -> Key:
    """(module path, frames innermost first) of an IR op's location."""
    return location_name(loc) or "", tuple((f, int(n)) for f, n in _FRAME_IR.findall(str(loc)))


def fx_key(node) -> Key:
    """(module path, frames innermost first) of an FX node, as the importer locates its ops."""
    from opscope.importers.torch_fx import module_path

    frames = _FRAME_FX.findall(node.meta.get("stack_trace") or "")
    return module_path(node), tuple((f, int(n)) for f, n in reversed(frames))
