# lit configuration of opscope's FileCheck tests (IR in, IR out).
#
#   cd /work/main && lit lit_tests -v
#
# Tools resolve to the console scripts installed next to the Python running lit (the
# `pip install -e '.[dev]'` environment), else to PATH; IREE's tools to the installed `iree`
# packages (`opscope.run.tools`). `FileCheck` and `filecheck` both
# mean the `filecheck` pip package; `%PYTHON` is this interpreter; `%irdl` is the opscope
# dialect's IRDL file, for `iree-opt --irdl-file=%irdl`.

import os
import re
import shutil
import sys
from pathlib import Path

import lit.formats

config.name = "opscope"
config.test_format = lit.formats.ShTest(execute_external=False)
config.suffixes = [".mlir", ".py"]
config.excludes = ["lit.cfg.py", "lit.local.cfg", "Output", "Inputs", "harness.py"]
config.test_source_root = os.path.dirname(os.path.abspath(__file__))

REPO = Path(config.test_source_root).parent
BIN = Path(sys.executable).parent


def _tool(name: str) -> str | None:
    if name.startswith("iree-"):  # from the installed iree packages, as opscope itself finds them
        from opscope.errors import OpscopeError
        from opscope.run.tools import find_tool

        try:
            return find_tool(name)
        except OpscopeError:
            return None
    local = BIN / name
    if local.is_file() and os.access(local, os.X_OK):
        return str(local)
    return shutil.which(name)


# Tool names become absolute paths, but only where they stand as a command word (not
# inside `--check-prefix=...`, a path or a longer name).
def _word(name: str) -> str:
    return r"(?<![\w./=-])" + re.escape(name) + r"(?![\w./-])"


filecheck = _tool("filecheck")
if filecheck is None:
    lit_config.fatal("filecheck not found: pip install -e '.[dev]'")
config.substitutions.append(("%PYTHON", f'"{sys.executable}"'))
config.substitutions.append(("%irdl", str(REPO / "dialect" / "opscope.irdl.mlir")))
config.substitutions.append((_word("FileCheck"), filecheck))
config.substitutions.append((_word("filecheck"), filecheck))
for name in ("opscope-opt", "opscope-compile", "iree-opt", "iree-run-module"):
    path = _tool(name)
    if path is None:
        lit_config.note(f"{name} not found; tests that REQUIRE it are unsupported")
        continue
    config.available_features.add(name)
    config.substitutions.append((_word(name), path))

config.environment["PATH"] = os.pathsep.join([str(BIN), config.environment.get("PATH", "")])
config.environment["PYTHONPATH"] = config.test_source_root  # the Python scripts' shared harness.py
for var in ("HOME", "OPSCOPE_CACHE_DIR", "XDG_CACHE_HOME", "PYENV_ROOT", "PYENV_VERSION"):
    if var in os.environ:
        config.environment[var] = os.environ[var]

# A per-test time limit, where this lit can enforce one (it needs psutil to kill trees).
try:
    import psutil  # noqa: F401

    config.maxIndividualTestTime = 120  # lit >= 17; lit_config.maxIndividualTestTime is read-only there
except ImportError:
    pass
