"""Building opscope's sdist and wheel as a user's pip would, from a clean copy of the checkout."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def clone_files(folder: str = ".") -> list[Path]:
    """The files of `folder` a clone has (tracked, or new and not ignored), as in the working tree."""
    listed = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard", folder],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    )
    return [Path(p) for p in listed.stdout.split() if (REPO / p).is_file()]


def build_dist(workdir: Path) -> Path:
    """`python -m build` of a clean copy of the checkout (a stale `*.egg-info` of an editable install
    would list files that discovery missed): the sdist, and the wheel built from it, in workdir/dist.
    No isolation: the build backend is the installed setuptools, so nothing is downloaded."""
    clone, out = workdir / "clone", workdir / "dist"
    for path in clone_files():
        (clone / path).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO / path, clone / path)
    proc = subprocess.run(
        [sys.executable, "-m", "build", "--no-isolation", "--outdir", str(out), str(clone)],
        capture_output=True,
        text=True,
    )
    if proc.returncode != 0:
        raise AssertionError("python -m build failed:\n" + proc.stdout[-3000:] + proc.stderr[-3000:])
    return out
