"""--dask for `layers --measure` and `plan`'s site measurements, on the 2-worker `cluster` of conftest.

`layers digits --measure --objective measured`: every plan's build a job, the report the serial one
field for field but for `seconds` (wall time). `plan` on a 2-layer MLP with constant weights: one job
per site, every candidate of a site measured on one worker; what is proposed, checked and decided is
the serial plan's, decisions included: at `min_speedup=0` and a `max_error` between W8A16's error
and W8A8's they hinge on the error alone (which of two accepted rewrites a site keeps would follow
the timings, which differ run to run: they are not compared). A bad
`--dask`, or `--dask` where nothing is spread, is one line before any work.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest
from errors import one_line

import opscope
from opscope.cli import main
from opscope.errors import OpscopeError
from opscope.models.demo import bias_mlp_module


def test_a_measured_layers_plan_on_two_workers_is_the_serial_report(cluster):
    """digits under the measured objective: the plans at the budget and at uniform int8/int4's bytes
    for every error, uniform int8 and int4, each a build on a worker that ran the original once."""
    serial = opscope.plan_layers("digits", budget=0.15, objective="measured").to_dict()
    lines: list[str] = []
    spread = opscope.plan_layers(
        "digits", budget=0.15, objective="measured", dask=cluster.scheduler_address, progress=lines.append
    ).to_dict()
    assert set(spread.pop("seconds")) == set(serial.pop("seconds"))  # wall times: the only difference
    assert spread == serial and spread["picked"] and len(spread["measured"]) >= 3
    builds = len(spread["measured"])
    assert f"{builds} builds on {cluster.scheduler_address} (2 workers)" in lines
    assert lines[-1].startswith(f"{builds + 1}/{builds + 1} jobs done, 0 running or queued, 0 failed")


@pytest.fixture(scope="module")
def mlp_run(tmp_path_factory):
    """A 2-layer MLP whose weights are constants, profiled from its file for one step."""
    folder = tmp_path_factory.mktemp("mlp")
    path = folder / "mlp.mlir"
    path.write_text(bias_mlp_module(2, 64, 16))
    return opscope.profile(str(path), out=folder / "run", steps=1).out_dir


def _untimed(c) -> tuple:
    """A candidate but its timings: what it is, its checks, its decision."""
    rounds = c.measured.rounds if c.measured is not None else None
    return (c.site, c.kind, c.proposal.label, c.pipeline, c.estimated, c.parity, c.rel_error, rounds, c.decision)


OPTIONS = {"rounds": 1, "min_speedup": 0.0, "max_error": 0.007, "kinds": ["quantize-weight"]}


@pytest.fixture(scope="module")
def serial_plan(mlp_run):
    """The plan measured in this process: what every plan on the workers is compared with."""
    return opscope.kernel_plan(mlp_run, **OPTIONS)


def test_plan_site_measurements_on_two_workers_are_the_serial_plan(cluster, mlp_run, serial_plan):
    options, serial = OPTIONS, serial_plan
    lines: list[str] = []
    spread = opscope.kernel_plan(mlp_run, **options, dask=cluster.scheduler_address, progress=lines.append)
    untimed = [_untimed(c) for c in spread.candidates]
    assert untimed == [_untimed(c) for c in serial.candidates]
    assert [u[:3] for u in untimed] == [(s, "quantize-weight", q) for s in ("fc0", "fc1") for q in ("W8A16", "W8A8")]
    assert [c.decision.split(":")[0] for c in spread.candidates] == ["accept", "reject"] * 2  # W8A8: ~0.8 % off
    for site in ("fc0", "fc1"):
        workers = {c.worker for c in spread.candidates if c.site == site}
        assert len(workers) == 1 and workers != {""}  # every timing of a site from one worker
    assert {c.worker for c in serial.candidates} == {""} and "worker" not in spread.to_dict()["candidates"][0]
    n = len(spread.candidates)
    assert f"{n} candidates of 2 sites on {cluster.scheduler_address} (2 workers)" in lines
    assert lines[-1].startswith("2/2 jobs done, 0 running or queued, 0 failed; fc")


def test_a_bad_dask_is_one_line_before_any_work(mlp_run, capsys):
    with pytest.raises(OpscopeError) as e:
        opscope.kernel_plan(mlp_run, dask="cluster")
    assert one_line(e).startswith("--dask expects local, local:N")
    with pytest.raises(OpscopeError) as e:
        opscope.plan_layers("digits", measure=True, dask="local:0")
    assert one_line(e) == "--dask 'local:0': the worker count after local: must be a whole number >= 1 (local:2)"
    assert main(["layers", "digits", "--dask", "local:2"]) == 1
    err = capsys.readouterr().err.strip()
    assert err == "opscope: error: --dask spreads --measure's builds over workers: add --measure, or drop --dask"
    assert main(["plan", str(mlp_run), "--dask", "tcp://nowhere"]) == 1
    assert capsys.readouterr().err.strip().startswith("opscope: error: --dask expects local, local:N")


def test_a_resumed_plan_reads_the_sites_a_killed_client_measured(cluster, mlp_run, serial_plan):
    """A client killed (`os._exit`) as its first site job returns leaves that site's results in the run
    folder's `plan.shards`; a plan without --resume refuses them, one with it reads them, measures the
    rest, gives the serial plan (timings aside) and removes the folder."""
    script = textwrap.dedent(
        f"""
        import os
        import opscope
        def die(line):
            if line.startswith("1/2 jobs done"):
                os._exit(9)
        opscope.kernel_plan({str(mlp_run)!r}, **{OPTIONS!r}, dask={cluster.scheduler_address!r}, progress=die)
        """
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert done.returncode == 9, done.stderr[-2000:]
    shards = mlp_run / "plan.shards"
    left = len(list(shards.glob("plan-site-*.json")))
    assert left >= 1
    with pytest.raises(OpscopeError) as e:
        opscope.kernel_plan(mlp_run, **OPTIONS, dask=cluster.scheduler_address)
    assert one_line(e) == (
        f"the plan's shard folder {shards} holds {left} shard{'s' * (left > 1)} of an interrupted run: "
        "add --resume to use them, or remove the folder"
    )
    lines: list[str] = []
    resumed = opscope.kernel_plan(
        mlp_run, **OPTIONS, dask=cluster.scheduler_address, resume=True, progress=lines.append
    )
    assert [_untimed(c) for c in resumed.candidates] == [_untimed(c) for c in serial_plan.candidates]
    assert any(line.endswith(f"; {left} read from shards (resume)") for line in lines)
    assert len([line for line in lines if "jobs done" in line]) == 2 - left and not shards.exists()


def test_layers_shards_round_trip_and_their_options_are_one_line(tmp_path):
    """What a layers job returns (the original's report, a plan's metrics) reads back from its shard as
    it was; --resume and --shards-dir where they do not go are one line before any work."""
    from opscope.act.plan import layers_store
    from opscope.act.whatif import WhatIfReport

    store = layers_store(tmp_path / "shards")
    report = WhatIfReport("digits", "classifier", "llvm-cpu", "held-out", {"accuracy": 0.9703125}, 1234, 4096, 2048)
    metrics = {"accuracy": 0.1 + 0.2, "agreement": 1.0}
    store.write("whatif-original-1", report)
    store.write("layers-plan-2", metrics)
    back = layers_store(tmp_path / "shards", resume=True)
    assert back.read("whatif-original-1") == report and back.read("layers-plan-2") == metrics
    for options, message in (
        ({"resume": True}, "--resume (resume) reads the shards of a --dask run: give --dask and --shards-dir"),
        ({"shards_dir": tmp_path / "s"}, "--shards-dir (shards_dir) keeps the results of --dask jobs: give --dask too"),
        (
            {"resume": True, "dask": "local:2"},
            "--resume (resume) needs --shards-dir DIR (shards_dir), the folder the run wrote its shards to",
        ),
    ):
        with pytest.raises(OpscopeError) as e:
            opscope.plan_layers("digits", measure=True, **options)
        assert one_line(e) == message
