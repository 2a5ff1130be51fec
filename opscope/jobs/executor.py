"""The executor every parallel job runs on, chosen by one option (`--dask`).

`None` runs each job in this process as it is submitted (today's behaviour, the default);
`local` or `local:N` starts an embedded `dask.distributed.LocalCluster` of N worker processes
(one thread each: IREE's CPU runtime has threads of its own) for as long as the `with` lasts;
`tcp://HOST:PORT` (or `tls://`) talks to a running scheduler. Each is a
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


class InlineExecutor(cf.Executor):
    """Runs each job at `submit`, in this process: the serial path behind the same interface."""

    def submit(self, fn, /, *args, **kwargs) -> cf.Future:
        future: cf.Future = cf.Future()
        future.set_running_or_notify_cancel()
        try:
            future.set_result(fn(*args, **kwargs))
        except BaseException as e:  # noqa: BLE001 (handed to whoever reads the future, as a pool would)
            future.set_exception(e)
        return future


@dataclass(frozen=True)
class Pool:
    """An executor and what it runs on, in words."""

    executor: cf.Executor
    where: str  # "this process", "2 local worker processes", "tcp://host:8786 (4 workers)"
    workers: int
    dashboard: str | None = None  # Dask's dashboard address, when it serves one

    @property
    def inline(self) -> bool:
        return isinstance(self.executor, InlineExecutor)


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
def open_pool(spec: str | None) -> Iterator[Pool]:
    """The executor `spec` names (None: this process), open for the `with`; a local cluster is
    closed after it, a remote scheduler is only disconnected from."""
    if spec is None:
        yield Pool(InlineExecutor(), "this process", 1)
        return
    kind, value = parse_spec(spec)
    require_dask()
    from distributed import Client, LocalCluster

    chatter = logging.getLogger("distributed")
    level = chatter.level
    chatter.setLevel(logging.ERROR)  # its INFO lines (workers registered, comms closed) are not the user's
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
            chatter.setLevel(level)
            raise OpscopeError(
                f"--dask local:{value}: Dask's worker processes failed to start ({e}); a script that calls opscope "
                "with dask='local:N' must do so under `if __name__ == \"__main__\":` (each worker imports the script)"
            ) from None
        client = Client(cluster)
        where = f"{value} local worker process{'es' if value != 1 else ''}"
    else:
        cluster = None
        try:
            client = Client(str(value), timeout="10s")
        except OSError as e:
            chatter.setLevel(level)
            raise OpscopeError(f"--dask {value}: no Dask scheduler answered there ({e})") from None
        where = f"{value} ({len(client.scheduler_info().get('workers', {}))} workers)"
    try:
        workers = len(client.scheduler_info().get("workers", {})) or 1
        yield Pool(client.get_executor(), where, workers, _dashboard(client))
    finally:
        client.close()
        if cluster is not None:
            cluster.close()
        chatter.setLevel(level)


def _dashboard(client) -> str | None:
    """Dask's dashboard address, if the scheduler serves one (it needs bokeh)."""
    try:
        import bokeh  # noqa: F401
    except ImportError:
        return None
    return client.dashboard_link
