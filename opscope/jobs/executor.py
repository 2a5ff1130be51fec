"""The executor every parallel job runs on, chosen by one option (`--dask`).

Without the option a command runs its jobs in this process, its serial path as before, and
opens no pool. `local` or `local:N` starts an embedded `dask.distributed.LocalCluster` of N
worker processes (one thread each: IREE's CPU runtime has threads of its own) for as long as
the `with` lasts; `tcp://HOST:PORT` (or `tls://`) talks to a running scheduler. Each is a
`concurrent.futures.Executor` (Dask's `client.get_executor()`), so a job is a plain function
and its arguments, picklable, importable by the workers. Dask is an optional extra: without
it the option is a one-line error naming the extra, before anything runs.
"""

from __future__ import annotations

import concurrent.futures as cf
import logging
import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from opscope.errors import OpscopeError

SPEC_HELP = "local, local:N (N worker processes here) or tcp://HOST:PORT (a running Dask scheduler)"
_ADDRESS = re.compile(r"^(tcp|tls)://[^\s/:]+:\d+/?$")


@dataclass(frozen=True)
class Pool:
    """An executor and what it runs on, in words."""

    executor: cf.Executor
    where: str  # "2 local worker processes", "tcp://host:8786 (4 workers)"
    dashboard: str | None = None  # Dask's dashboard address, when it serves one
    workers: int = 1  # the worker processes it had when opened (what a wave of jobs is sized by)

    def line(self, what: str, dashboard: bool = True) -> str:
        """The progress line that opens a command's jobs: `what` on where they run (and the dashboard)."""
        shown = f", dashboard {self.dashboard}" if dashboard and self.dashboard else ""
        return f"{what} on {self.where}{shown}"


def parse_spec(spec: str) -> tuple[str, int | str]:
    """("local", N) or ("address", ADDRESS) from `--dask`'s value; a one-line error otherwise."""
    text = spec.strip()
    if text == "local":
        return "local", 2
    if text.startswith("local:"):
        n = text[len("local:") :]
        if n.isdigit() and int(n) >= 1:
            return "local", int(n)
        raise OpscopeError(f"--dask {spec!r}: the worker count after local: must be a whole number >= 1 (local:2)")
    if _ADDRESS.match(text):
        return "address", text.rstrip("/")
    raise OpscopeError(f"--dask expects {SPEC_HELP}; got {spec!r}")


def require_dask() -> None:
    """A one-line error naming the extra when dask.distributed is not installed."""
    try:
        import distributed  # noqa: F401
    except ImportError:
        raise OpscopeError("--dask needs Dask: pip install 'opscope[dask]' (or run without --dask)") from None


def check_spec(spec: str) -> None:
    """`spec` parsed and the extra it needs present, or a one-line error (before any work starts)."""
    parse_spec(spec)
    require_dask()


@contextmanager
def open_pool(spec: str) -> Iterator[Pool]:
    """The executor `spec` names, open for the `with`; a local cluster is closed after it, a remote
    scheduler is only disconnected from."""
    kind, value = parse_spec(spec)
    require_dask()
    chatter = logging.getLogger("distributed")
    level = chatter.level
    chatter.setLevel(logging.ERROR)  # its INFO lines (workers registered, comms closed) are not the user's
    try:
        cluster, client, where, workers = _connect(kind, value)
        try:
            yield Pool(client.get_executor(), where, _dashboard(client), workers)
        finally:
            client.close()
            if cluster is not None:
                cluster.close()
    finally:
        chatter.setLevel(level)


def _connect(kind: str, value: int | str) -> tuple:
    """(the LocalCluster started or None, a client of it or of the scheduler at `value`, where in words,
    its worker count)."""
    from distributed import Client, LocalCluster

    if kind == "local":
        try:
            cluster = LocalCluster(
                n_workers=int(value),
                threads_per_worker=1,
                processes=True,
                dashboard_address=":0",
                silence_logs=logging.ERROR,
            )
        except RuntimeError as e:  # spawned workers import the caller's script: its calls need a main guard
            raise OpscopeError(
                f"--dask local:{value}: Dask's worker processes failed to start ({e}); a script that calls opscope "
                "with dask='local:N' must do so under `if __name__ == \"__main__\":` (each worker imports the script)"
            ) from None
        return cluster, Client(cluster), f"{value} local worker process{'es' if value != 1 else ''}", int(value)
    try:
        client = Client(str(value), timeout="10s")
    except OSError as e:
        raise OpscopeError(f"--dask {value}: no Dask scheduler answered there ({e})") from None
    workers = len(client.scheduler_info().get("workers", {}))
    return None, client, f"{value} ({workers} workers)", max(workers, 1)


def _dashboard(client) -> str | None:
    """Dask's dashboard address, if the scheduler serves one (it needs bokeh)."""
    try:
        import bokeh  # noqa: F401
    except ImportError:
        return None
    return client.dashboard_link
