"""IREE's command-line tools are found inside the installed `iree` packages, never on PATH
(`opscope.run.tools`): `opscope timing` works from a venv whose `bin/` is not on PATH."""

from __future__ import annotations

import subprocess
import sys

import pytest
from errors import one_line

from opscope.errors import OpscopeError
from opscope.run import tools
from opscope.run.tools import COMPILER_TOOLS, RUNTIME_TOOLS, ToolFailed, find_tool, run_tool


@pytest.mark.parametrize("name", COMPILER_TOOLS + RUNTIME_TOOLS)
def test_every_tool_is_found_in_its_package_with_path_empty(monkeypatch, name):
    import iree._runtime_libs
    import iree.compiler

    monkeypatch.setenv("PATH", "")
    path = find_tool(name)
    package = (iree.compiler if name in COMPILER_TOOLS else iree._runtime_libs).__file__
    site = package.split("/iree/")[0]
    assert path.startswith(site + "/iree/") and path.endswith("/" + name), path


def test_run_tool_runs_the_packaged_tool_with_path_empty(monkeypatch):
    monkeypatch.setenv("PATH", "")
    assert "--module" in run_tool(["iree-run-module", "--help"], "asking for help")


def test_a_failing_tool_is_one_line_naming_what_failed(tmp_path, monkeypatch):
    bad = tmp_path / "bad.mlir"
    bad.write_text("this is not mlir\n")
    with pytest.raises(ToolFailed) as e:
        run_tool(["iree-compile", str(bad), "-o", str(tmp_path / "x.vmfb")], "compiling bad.mlir")
    one_line(e)
    assert str(e.value).startswith("compiling bad.mlir failed: ") and "error" in e.value.first


def test_an_unknown_tool_is_refused_in_one_line():
    with pytest.raises(OpscopeError, match="'iree-nope' is not an IREE tool opscope knows") as e:
        find_tool("iree-nope")
    one_line(e)


def test_a_missing_runtime_package_names_the_package_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "iree._runtime", None)  # `import iree._runtime` raises ImportError
    with pytest.raises(OpscopeError, match=r"iree-benchmark-module not found .*pip install 'iree-base-runtime") as e:
        find_tool("iree-benchmark-module")
    one_line(e)


def test_a_missing_compiler_package_names_the_package_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "iree.compiler.tools.binaries", None)
    with pytest.raises(OpscopeError, match=r"iree-compile not found .*pip install 'iree-base-compiler") as e:
        find_tool("iree-compile")
    one_line(e)


def test_a_runtime_package_without_the_executable_says_where_it_looked(monkeypatch, tmp_path):
    from iree._runtime import libs

    monkeypatch.setattr(libs, "library_path", str(tmp_path))
    with pytest.raises(OpscopeError, match=rf"no executable {tmp_path}/iree-run-module\).*iree-base-runtime") as e:
        tools.find_tool("iree-run-module")
    one_line(e)


def test_opscope_version_names_opscope_and_iree():
    import opscope

    out = subprocess.run([sys.executable, "-m", "opscope", "--version"], capture_output=True, text=True, check=True)
    assert out.stdout.startswith(f"opscope {opscope.__version__} (iree-base-compiler 3.13.")
    assert "iree-base-runtime 3.13." in out.stdout and out.stdout.count("\n") == 1
