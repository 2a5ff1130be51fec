"""The suite guards itself: under CI=true a skip is a failure naming what was missing, and
both launch styles (`pytest tests`, `python -m pytest tests`) collect the same tests.

Each case runs pytest in a child process on one small test file, with an extra hidden (a
package of that name on PYTHONPATH whose import fails, as an uninstalled one's would) or
Mesa's Vulkan device hidden (VK_ICD_FILENAMES pointing nowhere).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def pytest_start(
    *args: str,
    ci: bool,
    hide: str | None = None,
    tmp_path: Path | None = None,
    env: dict | None = None,
    launcher: list[str] | None = None,
) -> subprocess.Popen:
    """Start pytest `args` from the repository root in a child, with CI=true or without it, and the
    package `hide` made unimportable. Children that do not depend on each other are started
    together and then `finish`ed: each is one Python process collecting or running tests on one
    core, so two of them take the time of one on this suite's 2-core machines."""
    env = {**os.environ, **(env or {})}
    env.pop("CI", None)
    if ci:
        env["CI"] = "true"
    if hide:
        shadow = tmp_path / "hidden" / hide
        shadow.mkdir(parents=True)
        (shadow / "__init__.py").write_text(f"raise ModuleNotFoundError('{hide} is hidden by a test')\n")
        env["PYTHONPATH"] = os.pathsep.join([str(tmp_path / "hidden"), env.get("PYTHONPATH", "")])
    return subprocess.Popen(
        [*(launcher or [sys.executable, "-m", "pytest"]), "-q", "-p", "no:cacheprovider", *args],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )


def finish(child: subprocess.Popen) -> subprocess.CompletedProcess:
    """The started child's exit status and output, once it ends (killed after 600 s)."""
    try:
        out, err = child.communicate(timeout=600)
    except subprocess.TimeoutExpired:
        child.kill()
        raise
    return subprocess.CompletedProcess(child.args, child.returncode, out, err)


def pytest_run(*args: str, **options) -> subprocess.CompletedProcess:
    """`pytest_start`, then `finish`: one child run to its end."""
    return finish(pytest_start(*args, **options))


def test_a_missing_extra_is_a_skip_outside_ci(tmp_path):
    proc = pytest_run("tests/test_import_jax.py", ci=False, hide="jax", tmp_path=tmp_path)
    assert proc.returncode == 5, proc.stdout[-2000:]  # pytest's "no tests ran": the whole file skipped
    assert "1 skipped" in proc.stdout


def test_a_missing_extra_fails_under_ci_naming_it(tmp_path):
    """A module-level `importorskip` skips at collection: under CI=true that is an error naming jax."""
    proc = pytest_run("tests/test_import_jax.py", ci=True, hide="jax", tmp_path=tmp_path)
    assert proc.returncode != 0
    assert re.search(
        r"CI=true: skipped, but CI installs everything the suite needs: could not import 'jax'", proc.stdout
    ), proc.stdout[-2000:]


def test_a_missing_vulkan_device_fails_under_ci_naming_it(tmp_path):
    """The `vulkan` fixture skips when no device answers; under CI=true the test fails saying so."""
    hidden = {"VK_ICD_FILENAMES": str(tmp_path / "none.json"), "VK_DRIVER_FILES": str(tmp_path / "none.json")}
    test = "tests/test_live.py::test_reference_demo_on_vulkan"
    outside, inside = (pytest_start(test, ci=ci, env=hidden) for ci in (False, True))
    outside, proc = finish(outside), finish(inside)
    assert outside.returncode == 0 and "1 skipped" in outside.stdout, outside.stdout[-2000:]
    assert proc.returncode != 0
    assert "CI=true: skipped, but CI installs everything the suite needs: vulkan-spirv cannot run here" in proc.stdout


def test_a_test_that_needs_no_missing_extra_still_runs_under_ci(tmp_path):
    """ONNX tests need no torch unless they export a PyTorch model: with torch hidden the rest pass."""
    proc = pytest_run(  # by node id: under CI=true a -k deselection is itself a failure
        "tests/test_import_onnx.py::test_legacy_node_name_to_module_path",
        "tests/test_import_onnx.py::test_corrupt_file_is_one_line",
        "tests/test_import_onnx.py::test_missing_file",
        ci=True,
        hide="torch",
        tmp_path=tmp_path,
    )
    assert proc.returncode == 0, proc.stdout[-2000:]
    assert re.search(r"\b7 passed\b", proc.stdout) and "skipped" not in proc.stdout


def collected(child: subprocess.Popen) -> int:
    """How many tests a started `--collect-only` child collected."""
    proc = finish(child)
    assert proc.returncode == 0, proc.stdout[-2000:]
    return int(re.search(r"(\d+)(?:/\d+)? tests? collected", proc.stdout).group(1))


@pytest.mark.skipif(
    shutil.which("pytest", path=str(Path(sys.executable).parent)) is None,
    reason="no pytest console script next to this Python",
)
def test_both_launch_styles_collect_the_same_tests():
    launchers = ([str(Path(sys.executable).parent / "pytest")], [sys.executable, "-m", "pytest"])
    bare, module = (
        collected(c) for c in [pytest_start("--collect-only", "tests", ci=False, launcher=la) for la in launchers]
    )
    assert bare == module and bare > 1000


def test_a_deselection_fails_under_ci_naming_the_tests():
    """`-k` or `--deselect` hides tests from CI as surely as a skip: under CI=true the run stops at
    collection naming them; outside CI it is an ordinary deselection."""
    hows = (["-k", "version"], ["--deselect", "tests/test_tools.py::test_opscope_version_names_opscope_and_iree"])
    children = [pytest_start("tests/test_tools.py", "-k", "version", ci=False)]
    children += [pytest_start("tests/test_tools.py", *how, ci=True) for how in hows]
    outside, *inside = (finish(c) for c in children)
    assert outside.returncode == 0 and re.search(r"1 passed, \d+ deselected", outside.stdout), outside.stdout[-2000:]
    for proc in inside:
        assert proc.returncode == 4, proc.stdout[-2000:] + proc.stderr[-2000:]  # a usage error: nothing ran
        assert re.search(
            r"CI=true: \d+ tests? deselected that no scheduled run covers \(tests/test_tools.py::", proc.stderr
        )


def test_the_scheduled_deselections_pass_under_ci_and_are_said():
    """The default run deselects the families_full tests (pyproject.toml's addopts): allowed, and the
    summary says how many and which command runs them; a run of `-m families_full` may leave the rest."""
    default = pytest_start("--collect-only", "tests/test_families.py", ci=True)
    full = pytest_start("--collect-only", "-m", "families_full", "tests/test_families.py", ci=True)
    proc, full = finish(default), finish(full)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    found = re.search(r"deselected by design: (\d+) families_full \(run by \.ci/families-full", proc.stdout)
    assert found and int(found.group(1)) >= 100, proc.stdout[-2000:]
    assert full.returncode == 0 and re.search(r"\d+/\d+ tests collected \(\d+ deselected\)", full.stdout)


def test_the_guards_hold_on_the_readmes_two_workers():
    """The README's command runs on pytest-xdist workers (`-n 2`), which collect in their own
    processes: under CI=true a `-k` still stops the run before anything runs, in one line naming
    the flag (not an xdist INTERNALERROR); the scheduled deselections are still said, from the
    workers' counts; and the generated models' seed the header printed is in the environment the
    workers inherit (so each draws it, not one of its own)."""
    children = [
        pytest_start("-n", "2", "tests/test_tools.py", "-k", "version", ci=True),
        pytest_start("-n", "2", "tests/test_installed_wheel.py", ci=True),
    ]
    refused, scheduled = (finish(c) for c in children)
    assert refused.returncode == 4, refused.stdout[-2000:] + refused.stderr[-2000:]
    assert "CI=true: -k deselects tests that no scheduled run covers" in refused.stderr
    assert "INTERNALERROR" not in refused.stdout + refused.stderr
    assert scheduled.returncode == 5, scheduled.stdout[-2000:]  # pytest's "no tests ran"
    assert "deselected by design: 4 installed_wheel (run by .ci/run, after the suite)" in scheduled.stdout
    import conftest

    assert os.environ["OPSCOPE_FUZZ_SEED"] == str(conftest.FUZZ_SEED)  # what an xdist worker inherits
