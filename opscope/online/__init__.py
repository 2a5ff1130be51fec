"""Bounded, mergeable one-pass sketches for live sampling: the reference's hashes, HyperLogLog,
reservoir and quantiles; per-site and whole-stream sketches, their JSON snapshots and report."""

from __future__ import annotations

from opscope.online.hashing import fingerprint, fnv1a_f32, fnv1a_f32_rows, splitmix64
from opscope.online.hll import Hll
from opscope.online.quantiles import FixedQuantiles
from opscope.online.report import LiveReport, live_report
from opscope.online.reservoir import Reservoir
from opscope.online.snapshot import load, save
from opscope.online.stream import StreamSketch

__all__ = [
    "FixedQuantiles",
    "Hll",
    "LiveReport",
    "Reservoir",
    "StreamSketch",
    "live_report",
    "load",
    "save",
    "fingerprint",
    "fnv1a_f32",
    "fnv1a_f32_rows",
    "splitmix64",
]
