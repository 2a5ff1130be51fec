"""What IREE 3.13 is known to compute wrong on a target, checked before a model is tapped.

Measured here and pinned by strict xfails in `tests/test_stat_numerics.py`: on vulkan-spirv
(Mesa's lavapipe) a bare `arith.extf` f16 → f32 returns garbage, so an f16 model's matmuls and
statistics are garbage; and a bf16 max|x| over the 512 rows of a 512×1024 tensor (the
`chan_maxabs` statistic) is wrong, where small bf16 tensors match numpy. A profile with such
numbers would be recorded without a word, so the f16 case is refused on lavapipe (the device
it was measured on) and warned of on any other Vulkan device; the bf16 case is warned of.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from iree.compiler import ir

from opscope.errors import OpscopeError

log = logging.getLogger("opscope")


@dataclass(frozen=True)
class Limitation:
    """Tensors of `element_type` on `target` come back wrong: `what`, one clause."""

    target: str
    element_type: str
    what: str
    refuse_on: tuple[str, ...]  # device names (substrings) where the results are known wrong: refuse


LIMITATIONS = (
    Limitation(
        "vulkan-spirv",
        "f16",
        "a bare f16 -> f32 extension returns garbage, so f16 matmuls and their statistics do",
        refuse_on=("llvmpipe",),
    ),
    Limitation(
        "vulkan-spirv",
        "bf16",
        "chan_maxabs of a bf16 tensor of 512 rows came back wrong (512x1024; smaller ones matched numpy)",
        refuse_on=(),
    ),
)


def tensor_element_types(module: ir.Module) -> set[str]:
    """The element types of every ranked tensor an op of `module` produces or takes."""
    found: set[str] = set()

    def visit(op):
        types = [value.type for value in list(op.results) + list(op.operands)]
        if op.name == "func.func":
            fn_type = ir.FunctionType(ir.TypeAttr(op.attributes["function_type"]).value)
            types += list(fn_type.inputs) + list(fn_type.results)
        found.update(str(ty.element_type) for ty in types if isinstance(ty, ir.RankedTensorType))
        return ir.WalkResult.ADVANCE

    module.operation.walk(visit)
    return found


def device_name(driver: str) -> str:
    """The first device `driver` reports here ('' when it reports none)."""
    import iree.runtime as rt

    try:
        infos = rt.get_driver(driver).query_available_devices()
    except Exception:  # the runtime raises plain RuntimeError/ValueError; the caller checked it runs
        return ""
    return str(infos[0].get("name", "")) if infos else ""


def check_target_limits(module: ir.Module, target: str, driver: str, name: str = "<model>") -> None:
    """Refuse (one line) a model whose tensors `target` computes wrong on this device, or warn
    (one line) where they may be wrong; nothing for the other targets and types."""
    limits = [lim for lim in LIMITATIONS if lim.target == target]
    if not limits:
        return
    types = tensor_element_types(module)
    for lim in limits:
        if lim.element_type not in types:
            continue
        device = device_name(driver)
        line = (
            f"{name}: IREE 3.13 on {target} computes {lim.element_type} wrong ({lim.what}; measured on Mesa's "
            f"lavapipe, pinned by tests/test_stat_numerics.py)"
        )
        if any(known in device for known in lim.refuse_on):
            raise OpscopeError(f"{line}: refused on this device ({device}); use --target llvm-cpu")
        log.warning(
            "%s: its %s results on this device (%s) may be wrong; compare with --target llvm-cpu",
            line,
            lim.element_type,
            device or "unnamed",
        )
