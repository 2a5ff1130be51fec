"""--dask: opscope's jobs on a real `dask.distributed.LocalCluster` of 2 worker processes.

A sweep's runs as jobs give the serial file byte for byte, a per-layer what-if sweep the serial
report; a worker killed mid-run (its process
terminated from the test) loses and duplicates nothing; a client killed mid-run leaves its finished
shards, which `resume` appends without running them again. 2 shapes × 7 distributions × 2 seeds
(28 runs of an 8x8x8 and a 4x16x8 matmul), the smallest sweep with jobs still queued on both
workers when one dies.
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
from opscope.errors import OpscopeError
from opscope.jobs.executor import parse_spec
from opscope.jobs.shards import Shards, job_id

SHAPES = ((8, 8, 8), (4, 16, 8))
SEEDS = (1, 2)
RUNS = len(SHAPES) * 7 * len(SEEDS)


@pytest.fixture(scope="module")
def serial(tmp_path_factory) -> bytes:
    """The serial sweep's CSV, the reference every Dask run is compared with."""
    out = tmp_path_factory.mktemp("serial") / "s.csv"
    opscope.sweep(out, shapes=SHAPES, seeds=SEEDS)
    return out.read_bytes()


def _journal_runs(out: Path) -> list[int]:
    return [int(line.split(",")[0]) for line in Path(str(out) + ".runs").read_text().splitlines()]


@pytest.mark.parametrize(
    "spec,message",
    [
        ("local:0", "--dask 'local:0': the worker count after local: must be a whole number >= 1 (local:2)"),
        (
            "cluster",
            "--dask expects local, local:N (N worker processes here) or tcp://HOST:PORT (a running Dask "
            "scheduler); got 'cluster'",
        ),
    ],
)
def test_a_bad_dask_option_is_one_line_before_anything_is_written(spec, message, tmp_path):
    with pytest.raises(OpscopeError) as e:
        opscope.sweep(tmp_path / "s.csv", shapes=SHAPES[:1], seeds=SEEDS[:1], dask=spec)
    assert one_line(e) == message and not (tmp_path / "s.csv").exists()
    assert parse_spec("local:3") == ("local", 3) and parse_spec("tcp://10.0.0.2:8786") == (
        "address",
        "tcp://10.0.0.2:8786",
    )


def test_without_dask_the_option_names_the_extra(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "distributed", None)  # `import distributed` raises ImportError
    with pytest.raises(OpscopeError) as e:
        opscope.sweep(tmp_path / "s.csv", shapes=SHAPES[:1], seeds=SEEDS[:1], dask="local:2")
    assert one_line(e) == "--dask needs Dask: pip install 'opscope[dask]' (or run without --dask)"


def test_a_sweep_on_two_workers_is_the_serial_file(cluster, serial, tmp_path):
    out = tmp_path / "d.csv"
    lines: list[str] = []
    res = opscope.sweep(out, shapes=SHAPES, seeds=SEEDS, dask=cluster.scheduler_address, progress=lines.append)
    assert out.read_bytes() == serial and res.recorded == list(range(RUNS)) and res.from_shards == []
    assert res.workers == f"{cluster.scheduler_address} (2 workers)" and len(lines) == RUNS + 1
    assert lines[-1].startswith(f"{RUNS}/{RUNS} jobs done, 0 running or queued, 0 failed; run ")
    assert set(res.parity.values()) == {0.0}  # each shape's first run checked against the untapped build
    assert not Path(str(out) + ".shards").exists()  # merged, the shards go


def test_a_worker_killed_mid_run_loses_and_duplicates_nothing(cluster, serial, tmp_path):
    from distributed import Client

    with Client(cluster) as client:
        pids = sorted(client.run(os.getpid).values())
    killed: list[int] = []

    def kill_one(line: str) -> None:
        if not killed:  # the first job is back: every other one is running or queued on the two workers
            os.kill(pids[0], signal.SIGKILL)
            killed.append(pids[0])

    out = tmp_path / "k.csv"
    res = opscope.sweep(out, shapes=SHAPES, seeds=SEEDS, dask=cluster.scheduler_address, progress=kill_one)
    assert killed and out.read_bytes() == serial
    assert _journal_runs(out) == list(range(RUNS)) and res.recorded == list(range(RUNS))
    cluster.wait_for_workers(2)  # the nanny starts another worker for the next test


def test_resume_after_a_killed_client_appends_its_shards_without_running_them(cluster, serial, tmp_path):
    out = tmp_path / "r.csv"
    script = textwrap.dedent(
        f"""
        import os
        from pathlib import Path
        import opscope
        out = Path({str(out)!r})
        def die(line):  # the client killed once a finished shard waits for an earlier run (appended in order)
            folder = Path(str(out) + ".shards")
            shards = len(list(folder.glob("*.csv"))) if folder.is_dir() else 0
            if shards > len(Path(str(out) + ".runs").read_text().splitlines()):
                os._exit(9)
        opscope.sweep(out, shapes={SHAPES!r}, seeds={SEEDS!r}, dask={cluster.scheduler_address!r}, progress=die)
        """
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert done.returncode == 9, done.stderr[-2000:]
    recorded = _journal_runs(out)
    assert len(recorded) < RUNS and len(Shards(Path(str(out) + ".shards"), ".csv").done()) > len(recorded)
    res = opscope.sweep(out, shapes=SHAPES, seeds=SEEDS, resume=True, dask=cluster.scheduler_address)
    assert out.read_bytes() == serial and _journal_runs(out) == list(range(RUNS))
    assert res.skipped == recorded and res.from_shards  # finished shards appended, not run again
    assert sorted(res.skipped + res.recorded) == list(range(RUNS))
    assert not Path(str(out) + ".shards").exists()


def test_a_per_layer_whatif_sweep_on_two_workers_is_the_serial_report(cluster, llama_tiny_set):
    """llama-tiny's W8A8 one layer at a time: the original, the whole model and its 2 layers as jobs
    (each worker builds the original once for its variants), the report the serial one, field for field."""
    from opscope.act.whatif import sweep_layers
    from opscope.act.whatif_jobs import sweep_layer_jobs

    evalset = llama_tiny_set
    serial = sweep_layers(evalset, "w8a8")
    lines: list[str] = []
    spread = sweep_layer_jobs(evalset, "w8a8", dask=cluster.scheduler_address, progress=lines.append)
    assert spread.to_dict() == serial.to_dict() and len(spread.layers) == 2
    assert lines[0] == f"3 builds on {cluster.scheduler_address} (2 workers)" and lines[-1].startswith("4/4 jobs done")


def test_dask_is_refused_where_it_does_not_apply_yet():
    with pytest.raises(OpscopeError) as e:
        opscope.whatif("no-such-model.onnx", fakequant=["w8a8"], dask="local:2")
    assert one_line(e).startswith("--dask spreads --sweep's and --sweep-layers' evaluations over workers")


def test_a_job_id_is_its_parameters():
    a = job_id("sweep", {"shape": (8, 8, 8), "dist": "gaussian", "seed": 1})
    assert a == job_id("sweep", {"seed": 1, "dist": "gaussian", "shape": [8, 8, 8]})
    assert a != job_id("sweep", {"shape": (8, 8, 8), "dist": "gaussian", "seed": 2}) and a.startswith("sweep-")
