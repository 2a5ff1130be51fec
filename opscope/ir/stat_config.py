"""What to record per tapped tensor: `StatConfig` and the reference's sketch order.

Mirrors §2.1 and §2.3 of the reference design: the seven fields and their defaults, and the
13 sketches in their exact order with their conditions. `plan_stats` is the single place
that decides which sketches a tensor of a given shape gets.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, fields
from typing import Any

from opscope.dialect.lowering.layout import channel_view
from opscope.dialect.lowering.signature import ELEMSIG_MAX
from opscope.dialect.ops import STAT_KINDS
from opscope.errors import OpscopeError
from opscope.ir.sites import ROLES

# The per-tensor sketch order of the reference (§2.3); the dialect owns the list.
STAT_ORDER: tuple[str, ...] = STAT_KINDS


@dataclass(frozen=True)
class SketchOptions:
    """The histogram and the optional sketches of a tapped tensor (the reference's defaults); the
    taps' pass options and `StatConfig` share them."""

    hist_bins: int = 32
    hist_min: float = -6.0
    hist_max: float = 6.0
    hist_normalize: bool = True
    per_channel: bool = True
    per_position: bool = True
    adjacency: bool = True

    def sketch_options(self) -> dict[str, Any]:
        """These options by name, to build another holder of them."""
        return {f.name: getattr(self, f.name) for f in fields(SketchOptions)}


@dataclass(frozen=True)
class StatConfig(SketchOptions):
    """Which sketches to append per tapped tensor (the reference's defaults)."""

    roles: tuple[str, ...] = ROLES  # which operands of a matmul site are sketched (the reference: all three)
    row_stride: int = 1  # sketch rows 0, K, 2K, ... of each activation (tokens; `sample-rows`); 1: every row
    dequantize_codes: bool = False  # an integer site's weight codes sketched as sitofp(q)·scale (an f32 copy)

    def __post_init__(self) -> None:
        roles = tuple(self.roles)
        if not roles or len(set(roles)) != len(roles) or not set(roles) <= set(ROLES):
            raise OpscopeError(f"StatConfig: roles must be distinct names among {', '.join(ROLES)}, got {roles}")
        object.__setattr__(self, "roles", roles)
        if self.row_stride < 1:
            raise OpscopeError(f"StatConfig: row_stride must be >= 1 (1: every row), got {self.row_stride}")
        if self.hist_bins < 0:
            raise OpscopeError(f"StatConfig: hist_bins must be >= 0, got {self.hist_bins}")
        if not self.hist_normalize and self.hist_bins and not self.hist_min < self.hist_max:
            raise OpscopeError(f"StatConfig: hist_min ({self.hist_min}) must be below hist_max ({self.hist_max})")

    @classmethod
    def lean(cls) -> StatConfig:
        """The whole-model config the reference's DeepSeek recorder uses (no histogram)."""
        return cls(hist_bins=0, hist_normalize=False, per_position=False, adjacency=False)

    @classmethod
    def live(cls) -> StatConfig:
        """What live sampling folds (`opscope.drive.live`): the seven scalars and the elemsig fingerprint of
        each matmul's lhs only (weights are constant, outputs are the next site's lhs), one read of it."""
        return cls(
            hist_bins=0, hist_normalize=False, per_channel=False, per_position=False, adjacency=False, roles=("lhs",)
        )

    def replace(self, **changes) -> StatConfig:
        return dataclasses.replace(self, **changes)

    @property
    def hist_range(self) -> tuple[float, float]:
        """The histogram's [lo, hi]: [-1, 1] on the scale-normalized tensor, else the fixed range."""
        return (-1.0, 1.0) if self.hist_normalize else (self.hist_min, self.hist_max)


@dataclass(frozen=True)
class StatRequest:
    """One sketch of one tensor: its kind and its length in f32 elements."""

    kind: str
    length: int


def plan_stats(
    shape: tuple[int, ...], config: StatConfig, channel_dims: tuple[int, ...] | None = None
) -> list[StatRequest]:
    """The sketches a tensor of `shape` gets under `config`, in the reference's order; a
    tensor whose channels are `channel_dims` is planned as read channel-last (`channel_view`)."""
    _, shape = channel_view(tuple(shape), channel_dims)
    rank = len(shape)
    numel = 1
    for d in shape:
        numel *= d
    chans = shape[-1] if rank else 1
    plan = [StatRequest(k, 1) for k in ("min", "max", "mean", "l1", "sumsq", "nnz", "kurtosis")]
    if config.hist_bins > 0:
        plan.append(StatRequest("hist", config.hist_bins))
    if numel > 0:
        plan.append(StatRequest("elemsig", min(ELEMSIG_MAX, numel)))
    if rank >= 2 and config.per_channel:
        plan.append(StatRequest("chan_maxabs", chans))
        plan.append(StatRequest("chan_outlier", 1))
    if rank >= 2 and config.per_position:
        plan.append(StatRequest("pos_sumsq", numel // chans if chans else 0))
    if rank == 2 and config.adjacency and shape[0] >= 2:
        plan.append(StatRequest("adj_sumsq", shape[0] - 1))
    return plan
