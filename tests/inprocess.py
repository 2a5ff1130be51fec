"""The `opscope` command run inside the test process, answered as a `subprocess.CompletedProcess`.

A subprocess pays Python's start and the imports of torch, transformers and IREE's runtime again
(~6 s of the ~14 s a tiny family's profile took outside its compiles); in-process, the command runs
the same code from `opscope.cli.main` with the session's imports already done. What a subprocess
would print as a traceback (an exception other than `OpscopeError`, which `main` turns into one
line) is written to the captured stderr, so a check for "Traceback" still sees it. The process
boundary itself (entry points, exit codes) is tested in tests/test_cli.py and
tests/test_installed_wheel.py.
"""

from __future__ import annotations

import contextlib
import io
import subprocess
import traceback


def opscope(*argv: str) -> subprocess.CompletedProcess:
    """`opscope ARGV` in this process: exit status, stdout and stderr as a subprocess would give them."""
    from opscope.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(list(argv))
        except SystemExit as e:  # argparse's usage errors and --help
            code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
        except Exception:  # noqa: BLE001  (what a subprocess would die of, as it would print it)
            traceback.print_exc(file=err)
            code = 1
    return subprocess.CompletedProcess(["opscope", *argv], code or 0, out.getvalue(), err.getvalue())
