"""The keys every miner groups by, and the order ties keep.

A key is (backend, dist, site, role): runs recorded on llvm-cpu and vulkan-spirv in one
table stay apart (the reference's quirk 7 mixed them). An observation is a key at one
(run_id, step); a series is one (run_id, backend, dist, site) across steps. Ties sort
by first appearance in the table (the recorder's site and role order).
"""

from __future__ import annotations

from collections.abc import Iterable

import polars as pl

KEY: tuple[str, ...] = ("backend", "dist", "site", "role")
OBSERVATION: tuple[str, ...] = KEY + ("run_id", "step")
SERIES: tuple[str, ...] = ("run_id", "backend", "dist", "site")


def appearance_order(df: pl.DataFrame) -> dict[str, pl.DataFrame]:
    """Per key column, its values numbered in order of first appearance (the tie order of every list)."""
    return {
        c: df.select(pl.col(c).unique(maintain_order=True).cast(pl.String)).with_row_index(f"_{c}_order")
        for c in ("backend", "dist", "site", "role")
    }


def order_by(frame: pl.DataFrame, order: dict[str, pl.DataFrame], cols: Iterable[str]) -> pl.DataFrame:
    """`frame` with an `_{c}_order` column per key column `c` (key columns already strings)."""
    for c in cols:
        frame = frame.join(order[c], on=c, how="left")
    return frame
