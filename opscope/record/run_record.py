"""A run folder's `run.json`: what was profiled (the model, its inputs, the histogram range), read
and written in one place so a damaged record is one line and a record is never half written."""

from __future__ import annotations

import json
import os
from pathlib import Path

from opscope.errors import OpscopeError

RUN_NAME = "run.json"


def read_run_record(folder: str | Path) -> dict:
    """The record of the run in `folder` ({} when it has none); a one-line error naming the file when
    it cannot be read as a JSON object."""
    path = Path(folder) / RUN_NAME
    if not path.exists():
        return {}
    try:
        record = json.loads(path.read_bytes())
    except (OSError, UnicodeDecodeError, ValueError) as e:
        why = " ".join(str(e).split())[:120]
        raise OpscopeError(
            f"{path}: not a readable run record ({why}); profile the model again to rewrite it"
        ) from None
    if not isinstance(record, dict):
        raise OpscopeError(f"{path}: not a run record (a JSON {type(record).__name__}, not an object)")
    return record


def save_run_record(folder: str | Path, record: dict) -> Path:
    """`record` written as `folder`'s run.json, whole or not at all (a temporary file renamed)."""
    path = Path(folder) / RUN_NAME
    tmp = path.with_name(f".{RUN_NAME}.tmp{os.getpid()}")
    tmp.write_text(json.dumps(record, indent=1) + "\n")
    tmp.replace(path)
    return path
