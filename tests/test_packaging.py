"""The wheel a user installs holds the whole tree: every module, every file read at run time,
the three commands, the version; and it builds from the sdist (`python -m build`, as pip
would). Packages are discovered (setup.py), so a new room cannot be left out silently."""

from __future__ import annotations

import tarfile
import zipfile
from pathlib import Path

import pytest
from wheels import build_dist, clone_files

import opscope

# source folder -> the package it is installed as (the design card's layout)
INSTALLED_AS = {"opscope": "opscope", "dialect": "opscope/dialect", "passes": "opscope/passes"}


@pytest.fixture(scope="module")
def dist(tmp_path_factory) -> Path:
    pytest.importorskip("build", reason="the dev extra's `build` (pip install -e '.[dev]')")
    return build_dist(tmp_path_factory.mktemp("build"))


def _wheel(dist: Path) -> zipfile.ZipFile:
    (wheel,) = dist.glob("opscope-*.whl")
    return zipfile.ZipFile(wheel)


def test_every_file_of_the_tree_is_in_the_wheel_where_it_is_imported_from(dist):
    names = set(_wheel(dist).namelist())
    missing = []
    for folder, package in INSTALLED_AS.items():
        for path in clone_files(folder):
            if f"{package}/{path.relative_to(folder).as_posix()}" not in names:
                missing.append(str(path))
    assert missing == [], f"in the tree but not in the wheel: {missing}"
    assert "opscope/dialect/opscope.irdl.mlir" in names  # read at run time (dialect/ops.py)


def test_the_wheel_holds_nothing_but_the_package(dist):
    tops = {n.split("/")[0] for n in _wheel(dist).namelist()}
    assert tops == {"opscope", f"opscope-{opscope.__version__}.dist-info"}


def test_the_wheel_declares_the_commands_and_the_version(dist):
    wheel = _wheel(dist)
    info = f"opscope-{opscope.__version__}.dist-info"
    entry = wheel.read(f"{info}/entry_points.txt").decode()
    for line in (
        "opscope = opscope.cli:main",
        "opscope-opt = opscope.pipeline.opt:main",
        "opscope-compile = opscope.run.compile_driver:main",
    ):
        assert line in entry
    meta = wheel.read(f"{info}/METADATA").decode()
    assert f"\nVersion: {opscope.__version__}\n" in meta
    assert "Requires-Dist: iree-base-compiler==3.13.*" in meta and "Requires-Dist: iree-base-runtime==3.13.*" in meta


def test_the_sdist_holds_what_a_wheel_is_built_from(dist):
    (sdist,) = dist.glob("opscope-*.tar.gz")
    names = {n.split("/", 1)[1] for n in tarfile.open(sdist).getnames() if "/" in n}
    assert {"setup.py", "pyproject.toml", "README.md", "dialect/opscope.irdl.mlir", "passes/__init__.py"} <= names
    assert "opscope/cli/__init__.py" in names
