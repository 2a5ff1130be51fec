"""The target table: name -> iree-compile flags -> runtime driver.

This is the only place target flags are spelled. A target either runs here (its runtime
driver can create a device on this machine) or only compiles; `require_runnable` says so
in one line.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from opscope.errors import OpscopeError


@dataclass(frozen=True)
class Target:
    """One compilation target: how to compile for it and which driver runs it."""

    name: str
    flags: tuple[str, ...]
    driver: str
    note: str
    # Nominal roofline ridge, FLOP/byte: f32 peak over memory bandwidth of the device the
    # target usually means (datasheet figures, see `ridge_source`); the default of the static
    # analyses' roofline class, overridden by --ridge for the machine at hand.
    ridge: float = 10.0
    ridge_source: str = "the reference design's ridge"
    # The histogram's lane counts (`lower-opscope{hist-counts=...}`): i8 counts ~1.6x faster
    # on llvm-cpu; IREE 3.13's SPIR-V miscounts i8 tensors (lavapipe: every element in bin
    # 0), and the GPU backends are not verified here, so everything else counts in i32.
    hist_counts: str = "i32"
    # Lane partials per row in the row reductions (`lower-opscope{row-lanes=...}`): 16 on
    # llvm-cpu (one AVX-512 vector of f32; multi-result row reductions ~2x faster), 0
    # (straight) where the backend reduces rows itself.
    row_lanes: int = 0

    @property
    def layout(self) -> dict:
        """lower-opscope's kernel layout for this target, as keyword arguments of
        `inject_matmul_stats` (`hist_counts`, `row_lanes`)."""
        return {"hist_counts": self.hist_counts, "row_lanes": self.row_lanes}


# Global optimization at O1 under an O3 build (see `_CPU_TUNED`); without it, IREE's own O3.
GLOBAL_OPT_O1 = "--iree-global-optimization-opt-level=O1"

_CPU_TUNED = (
    "--iree-opt-level=O3",
    "--iree-opt-data-tiling",
    "--iree-llvmcpu-enable-ukernels=all",
    # O3's aggressive fusion of a data-tiled matmul whose result has two consumers (any
    # tapped matmul followed by an activation) overflows the 32 KiB CPU stack in 3.13.
    "--iree-dispatch-creation-enable-aggressive-fusion=false",
    # Global optimization at O3 folds the importers' weight transposes and head reshapes into
    # multi-dimensional `matmul_like` contractions that data tiling does not take: MiniLM
    # ran 1.5-1.9x PyTorch eager with it, 0.61-0.67x at O1 (bench/bench_flags.py,
    # docs/spine.md *The model itself*); dispatch creation and codegen stay at O3.
    GLOBAL_OPT_O1,
)

TARGETS: dict[str, Target] = {
    t.name: t
    for t in (
        Target(
            "llvm-cpu",
            (
                "--iree-hal-target-device=local",
                "--iree-hal-local-target-device-backends=llvm-cpu",
                "--iree-llvmcpu-target-cpu=host",
                *_CPU_TUNED,
            ),
            "local-task",
            "host CPU via LLVM, tuned flags",
            10.0,
            "a server CPU: ~3 TFLOP/s f32 over ~300 GB/s (the reference design's ridge)",
            hist_counts="i8",
            row_lanes=16,
        ),
        Target(
            "vulkan-spirv",
            ("--iree-hal-target-device=vulkan",),
            "vulkan",
            "SPIR-V for any Vulkan device (Mesa lavapipe runs it on the CPU)",
            10.0,
            "lavapipe runs on the CPU: the CPU's ridge (set --ridge for a discrete GPU)",
        ),
        Target(
            "metal-spirv",
            ("--iree-hal-target-device=metal",),
            "metal",
            "Metal Shading Language via SPIR-V; runs on Apple devices only",
            34.0,
            "Apple M2 Max GPU: 13.6 TFLOP/s f32 over 400 GB/s",
        ),
        Target(
            "cuda",
            ("--iree-hal-target-device=cuda", "--iree-cuda-target=sm_80"),
            "cuda",
            "PTX for sm_80 (Ampere and newer); runs where an NVIDIA GPU exists",
            12.5,
            "A100 SXM: 19.5 TFLOP/s f32 (no tensor cores) over 1.555 TB/s",
        ),
        Target(
            "rocm",
            ("--iree-hal-target-device=hip", "--iree-rocm-target=gfx942"),
            "hip",
            "AMDGPU code for gfx942 (MI300); runs where an AMD GPU exists",
            15.4,
            "MI300X: 81.7 TFLOP/s f32 vector over 5.3 TB/s",
        ),
    )
}


def get_target(name: str) -> Target:
    """Look up a target by name (case-insensitive, `_` and `-` alike)."""
    key = name.strip().lower().replace("_", "-")
    if key not in TARGETS:
        raise OpscopeError(f"unknown target '{name}' (choose one of: {', '.join(TARGETS)})")
    return TARGETS[key]


@functools.cache
def driver_available(driver: str) -> str | None:
    """None when `driver` can create a device here, else why not (one line)."""
    import iree.runtime as rt

    if driver not in rt.query_available_drivers():
        return f"the IREE runtime has no '{driver}' driver"
    try:
        infos = rt.get_driver(driver).query_available_devices()
    except Exception as e:  # the runtime raises plain RuntimeError/ValueError here
        return f"the '{driver}' driver cannot start: {str(e).splitlines()[0]}"
    if not infos:
        return f"the '{driver}' driver finds no device on this machine"
    return None


def require_runnable(target: Target) -> None:
    """Raise a one-line OpscopeError when `target` cannot run on this machine."""
    why = driver_available(target.driver)
    if why:
        raise OpscopeError(f"target '{target.name}' cannot run here: {why} (it still compiles)")


def runnable_targets() -> list[str]:
    """Names of the targets that can run on this machine."""
    return [t.name for t in TARGETS.values() if driver_available(t.driver) is None]


class TargetTable(list):
    """Every compile target with why it cannot run here: `(Target, None | reason)` pairs, a report
    `opscope.render` writes as one line a target."""

    def to_dict(self) -> dict:
        """JSON-safe: each target's name, driver, note, ridge and whether it runs here (and why not)."""
        return {
            "targets": [
                {"name": t.name, "driver": t.driver, "note": t.note, "ridge": t.ridge}
                | {"ridge_source": t.ridge_source, "runs": why is None, "why_not": why}
                for t, why in self
            ]
        }
