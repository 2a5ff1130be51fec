"""`whatif --sweep --dask` and `--resume`: the skip sweep's evaluations as jobs on a real 2-worker
`LocalCluster` (the session fixture `cluster`), the report the serial one field for field.

llama-tiny (4 residual blocks, 60 predicted tokens) with `floor` 0.6: the greedy curve's 4 points run
in one wave and are cut after the third (the first below the floor), as the serial loop stops; its
answer at `keep` 0.85 is built as a real skip (no extra variant: each is a compile of its own, 3 s
of this file's budget). A client killed after its first job leaves that job's shard, which a resumed
run reads instead of running; bad combinations of `--dask`, `--shards-dir` and `--resume` are one line before any compile.
"""

from __future__ import annotations

import pickle
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from errors import one_line

import opscope
from opscope.act.whatif import sweep_skips
from opscope.act.whatif_jobs import sweep_skip_jobs
from opscope.errors import OpscopeError
from opscope.jobs.shards import Shards
from opscope.models.zoo import missing_extra, missing_message

needs_torch = pytest.mark.skipif(missing_extra("torch"), reason=missing_message("llama-tiny", "torch"))
SWEEP = {"keep": 0.85, "floor": 0.6}
JOBS = 1 + 1 + 4 + 4 + 1  # the original, every gate on, 4 singles; 4 curve points; the built answer


@pytest.fixture(scope="module")
def serial(llama_tiny_set) -> dict:
    """The serial sweep's report, the reference of every Dask run here."""
    report = sweep_skips(llama_tiny_set, **SWEEP)
    assert len(report.sweep) == 4 and len(report.curve) == 3  # cut below the floor before the last block
    assert len(report.outcomes) == 1 and report.outcomes[0].what.endswith("(built)")
    return report.to_dict()


def _jobs_done(lines: list[str]) -> int:
    return sum(" jobs done, " in line for line in lines)


@needs_torch
def test_the_skip_sweep_on_two_workers_is_the_serial_report(cluster, llama_tiny_set, serial):
    lines: list[str] = []
    spread = sweep_skip_jobs(llama_tiny_set, dask=cluster.scheduler_address, progress=lines.append, **SWEEP)
    assert spread.to_dict() == serial
    where = f"{cluster.scheduler_address} (2 workers)"
    assert lines[0] == f"5 evaluations of the gated build on {where}" and _jobs_done(lines) == JOBS
    assert f"4 evaluations of the greedy curve (k = 1 to 4) on {where}" in lines


@needs_torch
def test_a_resumed_sweep_reads_a_killed_clients_shards_and_is_the_serial_report(
    cluster, llama_tiny_set, serial, tmp_path
):
    shards, sent = tmp_path / "shards", tmp_path / "set.pickle"
    sent.write_bytes(pickle.dumps(llama_tiny_set))  # the client's evaluation set, not built again there
    script = textwrap.dedent(
        f"""
        import os, pickle
        from opscope.act.whatif_jobs import sweep_skip_jobs, whatif_store
        def die(line):  # the client killed as its first job's result is back (and its shard written)
            if " jobs done, " in line:
                os._exit(9)
        sweep_skip_jobs(pickle.loads(open({str(sent)!r}, "rb").read()), **{SWEEP!r},
                        dask={cluster.scheduler_address!r}, store=whatif_store({str(shards)!r}), progress=die)
        """
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert done.returncode == 9, done.stderr[-2000:]
    assert len(Shards(shards, ".json").done()) == 1
    request = {"sweep": True, "tokens": 60, **SWEEP, "dask": cluster.scheduler_address}
    with pytest.raises(OpscopeError) as e:  # the same request again, without --resume
        opscope.whatif("llama-tiny", **request, shards_dir=shards)
    assert one_line(e) == (
        f"--shards-dir {shards} holds 1 shard of an interrupted run: add --resume to use them, or remove the folder"
    )
    lines: list[str] = []
    resumed = opscope.whatif("llama-tiny", **request, shards_dir=shards, resume=True, progress=lines.append)
    assert resumed.to_dict() == serial
    jobs = [line for line in lines if " on " in line and "(2 workers)" in line]
    assert jobs[0].endswith("; 1 read from shards (resume)") and _jobs_done(lines) == JOBS - 1  # read, not run
    assert not shards.exists()  # the report complete, its shards go


@pytest.mark.parametrize(
    "request_,message",
    [
        (
            {"sweep": True, "dask": "local:2", "resume": True},
            "--resume (resume) needs --shards-dir DIR (shards_dir), the folder the run wrote its shards to",
        ),
        (
            {"sweep_layers": "w8a8", "shards_dir": "s", "resume": True},
            "--resume (resume) reads the shards of a --dask run: give --dask and --shards-dir",
        ),
        (
            {"fakequant": ["w8a8"], "dask": "local:2", "shards_dir": "s", "resume": True},
            "--resume (resume) continues an interrupted --sweep or --sweep-layers run: drop --resume",
        ),
        (
            {"sweep": True, "shards_dir": "s"},
            "--shards-dir (shards_dir) keeps the results of --dask jobs: give --dask too",
        ),
    ],
)
def test_bad_combinations_are_one_line_before_any_compile(request_, message):
    with pytest.raises(OpscopeError) as e:
        opscope.whatif("no-such-model.onnx", **request_)
    assert one_line(e) == message


def test_a_shard_folder_holds_shards_only(tmp_path, capsys):
    from opscope.cli import main

    (tmp_path / "notes.txt").write_text("mine")
    rc = main(["whatif", "no-such-model.onnx", "--sweep", "--dask", "local:2", "--shards-dir", str(tmp_path)])
    err = capsys.readouterr().err
    assert rc == 1 and err == (
        f"opscope: error: --shards-dir {tmp_path} holds other files (notes.txt): name a folder of its own "
        "(it is removed at the end)\n"
    )
    assert (tmp_path / "notes.txt").exists() and not Path("s").exists()
