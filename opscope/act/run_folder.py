"""A profile run folder, checked: the folder, its sketches and its run.json, or a one-line error."""

from __future__ import annotations

from pathlib import Path

from opscope.errors import OpscopeError


def read_run(run: str | Path) -> tuple[Path, dict]:
    """The run folder and its `run.json` (what was profiled); one-line errors for what is missing."""
    from opscope.drive.profile import CSV_NAME
    from opscope.record.run_record import read_run_record

    folder = Path(run)
    if not folder.is_dir():
        raise OpscopeError(f"no such run folder: {folder} (give the folder `opscope profile --out` wrote)")
    if not (folder / CSV_NAME).exists():
        raise OpscopeError(f"{folder} holds no {CSV_NAME}: not a profile run folder")
    return folder, read_run_record(folder)
