"""Every broken input through every command that reads it (`tests/broken_inputs.py` writes the
corpus: model, tensor, input and parameter files empty, garbage, cut in half or another format's
bytes, absurd shapes, NaN/inf inputs; tidy tables cut mid-row; run folders half written; live
snapshots with a wrong field).

Each command stops with exit status 1 and one error line naming the broken file, never a
traceback; only where what is whole is enough may it go on (a CSV cut mid-row: its whole rows, said
in a note; a module whose parameter file is damaged: the commands that read its graph alone).
Nothing already recorded is changed: the input itself, and a file already at the command's output
path when the command fails.
"""

from __future__ import annotations

import hashlib
import logging
from pathlib import Path

import pytest

from tests.broken_inputs import MATMUL, make_corpus
from tests.inprocess import opscope as cli

EARLIER = "written earlier"


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    root = tmp_path_factory.mktemp("broken")
    model = root / "ok.mlir"
    model.write_text(MATMUL)
    return root, model, {c.name: c for c in make_corpus(root / "corpus")}


def _digest(path: Path) -> dict[str, str]:
    files = sorted(f for f in path.rglob("*") if f.is_file()) if path.is_dir() else [path]
    return {str(f): hashlib.sha256(f.read_bytes()).hexdigest() for f in files}


def test_the_corpus_holds_sixty_files_or_more(corpus):
    _, _, cases = corpus
    assert len(cases) >= 60


def _names(case) -> set[str]:
    """The names an error may call the broken file by: the case's file, or the file it names (a
    parameter file)."""
    names = {case.path.name, str(case.path)}
    if case.name.startswith("params/"):
        names.add(case.path.with_suffix(".irpa").name)
    return names


def _check(case, argv: list[str], out: Path) -> str | None:
    """Run one command on one broken input; None when it behaved, else what went wrong."""
    out.mkdir(parents=True, exist_ok=True)
    earlier = [out / "r.html", out / "m.mlir"]
    for f in earlier:
        f.write_text(EARLIER)
    before = _digest(case.path)
    proc = cli(*argv)
    said = " ".join(argv[:2])
    if "Traceback" in proc.stderr:
        return f"{said}: a traceback: {proc.stderr.strip().splitlines()[-1][:300]}"
    if _digest(case.path) != before:
        return f"{said}: changed its input"
    if proc.returncode == 0:
        return None if argv[0] in case.may_succeed else f"{said}: succeeded on it"
    if any(f.read_text() != EARLIER for f in earlier):
        return f"{said}: failed and overwrote what was there"
    errors = [line for line in proc.stderr.splitlines() if "error:" in line]
    if proc.returncode != 1 or len(errors) != 1:
        return f"{said}: exit {proc.returncode}, {len(errors)} error lines: {proc.stderr.strip()[-300:]}"
    if not any(n in errors[0] for n in _names(case)):
        return f"{said}: the error does not name the file: {errors[0][:300]}"
    return None


GROUPS = ("", "tensors/", "inputs/", "params/", "tidy/", "runs/", "snapshots/")


@pytest.mark.parametrize("group", GROUPS, ids=lambda g: g.rstrip("/") or "models")
def test_each_broken_input_is_one_line_and_loses_nothing(corpus, group, tmp_path):
    root, model, cases = corpus
    chosen = [c for c in cases.values() if (c.name.startswith(group) if group else "/" not in c.name)]
    assert chosen
    problems = []
    for i, case in enumerate(chosen):
        for j, command in enumerate(case.commands):
            out = tmp_path / f"{i}-{j}"
            argv = [a.format(f=case.path, out=out, m=model) for a in command]
            why = _check(case, argv, out)
            if why:
                problems.append(f"{case.name} ({case.problem}): {why}")
    assert not problems, "\n".join(problems)


def test_two_writers_on_one_run_folder(tmp_path, caplog):
    """A profile into a folder another live opscope process is writing is refused in one line and
    touches nothing; a lock left by a process that is gone is taken over, said, and released."""
    import subprocess
    import sys

    import opscope
    from opscope.errors import OpscopeError
    from opscope.record.writer_lock import LOCK_NAME

    model = tmp_path / "m.mlir"
    model.write_text(MATMUL)
    out = tmp_path / "run"
    out.mkdir()
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        (out / LOCK_NAME).write_text(str(other.pid))
        with pytest.raises(
            OpscopeError, match=rf"{out} is being written by another opscope process \(pid {other.pid}\)"
        ):
            opscope.profile(str(model), steps=1, out=out)
        assert sorted(p.name for p in out.iterdir()) == [LOCK_NAME]  # nothing written beside the other's lock
    finally:
        other.kill()
        other.wait()
    with caplog.at_level(logging.WARNING, logger="opscope"):  # a CLI test may have quietened the logger
        run = opscope.profile(str(model), steps=1, out=out)  # the lock's process is gone: taken over
    assert (run.out_dir / "sketches.csv").stat().st_size and not (out / LOCK_NAME).exists()
    assert f"left by a writer that is gone (pid {other.pid}): taken over" in caplog.text
