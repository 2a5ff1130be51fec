"""A `StreamSketch` saved as one JSON file and read back: what workers hand to whoever merges them.

The file is JSON (readable, no pickle: a snapshot from elsewhere runs no code), sketches inside
as base64 of their own formats (our HyperLogLog's bytes, DataSketches' serialized KLL and
frequent items). Writes are atomic (a temporary file renamed over the old one), so a worker
killed mid-write leaves its previous snapshot whole. Anything unreadable is one `OpscopeError`.
"""

from __future__ import annotations

import base64
import json
import os
from pathlib import Path
from typing import Any

import datasketches
import numpy as np

from opscope.errors import OpscopeError
from opscope.online.hll import Hll
from opscope.online.reservoir import Reservoir
from opscope.online.site import FIELDS, Drift, SiteSketch
from opscope.online.stream import Period, StreamSketch

FORMAT, VERSION = "opscope-live", 2
READS = (1, 2)  # version 1: no "config" (the sketches StatConfig.live() records)
PERIOD_ARRAYS = ("total", "low", "high", "last")


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _bytes(text: str) -> bytes:
    return base64.b64decode(text.encode("ascii"), validate=True)


def _site_dict(s: SiteSketch) -> dict[str, Any]:
    return {
        "samples": s.samples,
        "distinct": _b64(s.distinct.to_bytes()),
        "values": _b64(s.values.serialize()),
        "drift": {"epoch_len": s.drift.epoch_len, "epochs": s.drift.epochs},
        "loads": {k: v.tolist() for k, v in s.loads.items()},
        "load_samples": s.load_samples,
    }


def to_dict(sketch: StreamSketch) -> dict[str, Any]:
    """The sketch as JSON-able data."""
    return {
        "format": FORMAT,
        "version": VERSION,
        "every": sketch.every,
        "calls": sketch.calls,
        "samples": sketch.samples,
        "fingerprinted": sketch.fingerprinted,
        "inputs": _b64(sketch.inputs.to_bytes()),
        "sampled_inputs": _b64(sketch.sampled_inputs.to_bytes()),
        "hot": _b64(sketch.hot.serialize()),
        "labels": sketch.labels,
        "requests": sketch.requests.to_dict(),
        "sites": {name: _site_dict(s) for name, s in sketch.sites.items()},
        "period": {
            "keys": [list(k) for k in sketch.period.keys],
            "lengths": list(sketch.period.lengths),
            "count": sketch.period.count,
            **{f: getattr(sketch.period, f).tolist() for f in PERIOD_ARRAYS},
        },
        "snapshots": sketch.snapshots,
        "config": sketch.config,
    }


def _site(d: dict[str, Any]) -> SiteSketch:
    drift = Drift(int(d["drift"]["epoch_len"]), [[float(x) for x in e] for e in d["drift"]["epochs"]])
    if any(len(e) != 1 + 2 * len(FIELDS) for e in drift.epochs):
        raise ValueError("a drift epoch is not [samples, then the sum and sum of squares of density, rms, crest]")
    return SiteSketch(
        int(d["samples"]),
        Hll.from_bytes(_bytes(d["distinct"])),
        datasketches.kll_floats_sketch.deserialize(_bytes(d["values"])),
        drift,
        {k: np.asarray(v, np.float64) for k, v in d["loads"].items()},
        int(d["load_samples"]),
    )


def _period(d: dict[str, Any]) -> Period:
    keys = tuple((str(a), str(b), str(c)) for a, b, c in d["keys"])
    lengths = tuple(int(n) for n in d["lengths"])
    arrays = [np.asarray(d[f], np.float64) for f in PERIOD_ARRAYS]
    if len(keys) != len(lengths) or any(a.shape != (sum(lengths),) for a in arrays):
        raise ValueError("the period's statistics do not match their layout")
    return Period(keys, lengths, int(d["count"]), *arrays)


def from_dict(d: Any) -> StreamSketch:
    """A sketch from `to_dict`'s data; raises ValueError, KeyError or TypeError on anything else."""
    if not isinstance(d, dict) or d.get("format") != FORMAT:
        raise ValueError(f'no \'"format": "{FORMAT}"\' field')
    if d.get("version") not in READS:
        raise ValueError(f"version {d.get('version')!r}, this opscope reads versions {', '.join(map(str, READS))}")
    config = d.get("config")
    if config is not None and not isinstance(config, dict):
        raise ValueError("its config is not an object of StatConfig fields")
    sketch = StreamSketch(
        int(d["every"]),
        int(d["calls"]),
        int(d["samples"]),
        int(d["fingerprinted"]),
        Hll.from_bytes(_bytes(d["inputs"])),
        Hll.from_bytes(_bytes(d["sampled_inputs"])),
        datasketches.frequent_strings_sketch.deserialize(_bytes(d["hot"])),
        {str(k): str(v) for k, v in d["labels"].items()},
        Reservoir.from_dict(d["requests"]),
        {str(name): _site(s) for name, s in d["sites"].items()},
        _period(d["period"]),
        int(d["snapshots"]),
        config,
    )
    if min(sketch.calls, sketch.samples, sketch.fingerprinted) < 0 or sketch.samples > sketch.calls:
        raise ValueError(f"counts out of range (calls {sketch.calls}, samples {sketch.samples})")
    return sketch


def save(sketch: StreamSketch, path: str | Path) -> Path:
    """Write `sketch` to `path` atomically (a crash mid-write keeps the previous file)."""
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(to_dict(sketch)))
    os.replace(tmp, path)
    return path


def load(path: str | Path) -> StreamSketch:
    """Read a saved sketch; a missing or corrupt file is a one-line error naming it."""
    path = Path(path)
    if not path.is_file():
        raise OpscopeError(f"no live snapshot at {path}")
    try:
        return from_dict(json.loads(path.read_text()))
    except OpscopeError as e:
        raise OpscopeError(f"{path} is not a readable live snapshot ({e}); delete it or rerun what wrote it") from None
    except (ValueError, KeyError, TypeError, IndexError, RuntimeError, UnicodeDecodeError) as e:
        why = f"missing field {e}" if isinstance(e, KeyError) else str(e) or type(e).__name__
        raise OpscopeError(
            f"{path} is not a readable live snapshot ({why}); delete it or rerun what wrote it"
        ) from None
