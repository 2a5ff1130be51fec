"""The tidy CSV every miner reads, written crash-safely, plus the site-cost sidecar and Parquet export.

One row per statistic element, 13 columns (§2.11 of the reference design)::

    run_id,step,backend,dist,M,K,N,numel,site,role,stat,idx,value

`value` is the float32 the backend computed, printed in the shortest text that parses
back to the same float32 (polars' writer: `0.1`, `0.33333334`, `1e-45`, `3.4028235e+38`,
`-0.0`, `NaN`, `inf`), so Python's `float()` or any CSV reader rounding to float32
recovers it bit for bit (a NaN's sign and payload are not kept). Fields are never
quoted: commas, quotes and line breaks in site names become `_` (the reference replaces
commas); backend, dist, role and stat names containing them are refused.

Crash safety and resuming. Each `record(...)` call writes one run's rows in a single
`write`, flushes and fsyncs, and only then appends `run_id,step,byte_offset_end` to the
journal `<path>.runs` (flushed and fsynced too). A crash therefore leaves at most one
unjournaled tail: a partial run, or a truncated line. Opening with `mode="a"` truncates
the CSV back to the last journaled offset and exposes `completed_runs` (run ids) and
`completed_steps` ((run_id, step) pairs), so a driver can skip them. Without a journal
(a file from another writer) only complete lines are kept, every run found in them
counts as complete (nothing can tell whether the last one is), and a journal is rebuilt
from them. `mode="w"` truncates the CSV, writes the header and removes a stale journal.
The two syncs cost ~10 ms a run on a VM disk; `durable=False` drops them (a process
crash is still recovered, a power loss may lose more). One process writes a file at a
time; shard sweeps over files instead.
"""

from __future__ import annotations

import functools
import io
import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import polars as pl

from opscope.errors import OpscopeError

if TYPE_CHECKING:
    from opscope.ir.manifest import Manifest

HEADER: tuple[str, ...] = (
    "run_id",
    "step",
    "backend",
    "dist",
    "M",
    "K",
    "N",
    "numel",
    "site",
    "role",
    "stat",
    "idx",
    "value",
)
HEADER_LINE = ",".join(HEADER) + "\n"
JOURNAL_SUFFIX = ".runs"
SITE_COSTS_HEADER = "site,flops"
INT_COLUMNS = ("run_id", "step", "M", "K", "N", "numel", "idx")

# Column types of the tidy table (the reference's parquet sink: u64 ints, utf8 strings, f32 value).
SCHEMA: dict[str, pl.DataType] = {c: (pl.UInt64 if c in INT_COLUMNS else pl.String) for c in HEADER}
SCHEMA["value"] = pl.Float32

_datasync = getattr(os, "fdatasync", os.fsync)  # data and size, not timestamps (Linux); macOS has only fsync
_UNQUOTABLE = str.maketrans({",": "_", '"': "_", "\n": "_", "\r": "_"})


def sanitize_site(site: str) -> str:
    """The site name as the CSV writes it: commas, quotes and line breaks become `_`."""
    return site.translate(_UNQUOTABLE)


def journal_path(path: str | Path) -> Path:
    """Where the run journal of CSV `path` lives: `<path>.runs`."""
    return Path(str(path) + JOURNAL_SUFFIX)


class Recorder:
    """A tidy-CSV sink: one `record` call per run, each written and journaled atomically enough to resume."""

    def __init__(self, path: str | Path, mode: str = "w", *, durable: bool = True):
        """Open `path` for writing (`mode="w"`) or appending and resuming (`mode="a"`).

        `durable=False` skips the fsyncs (the journal order is kept; a power loss may then
        lose more than the last run, a process crash still does not)."""
        if mode not in ("w", "a"):
            raise OpscopeError(f"{path}: recorder mode must be 'w' or 'a', got {mode!r}")
        self.path = Path(path)
        self.journal = journal_path(self.path)
        self.durable = durable
        self.completed_steps: set[tuple[int, int]] = set()
        self.rows_written = 0
        if mode == "w" or not self.path.exists() or self.path.stat().st_size == 0 or _header_prefix(self.path):
            self._start_fresh()
        else:
            self._resume()

    # -- opening -------------------------------------------------------------------------
    def _start_fresh(self) -> None:
        self.journal.unlink(missing_ok=True)
        self._f = open(self.path, "wb")
        self._f.write(HEADER_LINE.encode())
        self._sync(self._f)
        self._offset = len(HEADER_LINE)
        self._j = open(self.journal, "w")

    def _resume(self) -> None:
        _check_header(self.path)
        size = self.path.stat().st_size
        if self.journal.exists():
            entries, clean = _read_journal(self.journal)
            end = entries[-1][2] if entries else len(HEADER_LINE)
            if end > size:
                raise OpscopeError(
                    f"{self.journal}: runs end at byte {end} but {self.path} has only {size} bytes "
                    f"(the CSV was truncated or replaced; start a new file)"
                )
        else:
            end, entries = _recover_without_journal(self.path)
            clean = False
        self._f = open(self.path, "r+b")
        self._f.truncate(end)
        self._f.seek(end)
        self._sync(self._f)
        self._offset = end
        if not clean:  # drop a partial journal line, or write the journal a foreign file lacked
            tmp = self.journal.with_name(self.journal.name + ".tmp")
            tmp.write_text("".join(f"{r},{s},{o}\n" for r, s, o in entries))
            os.replace(tmp, self.journal)
        self._j = open(self.journal, "a")
        self.completed_steps = {(r, s) for r, s, _ in entries}

    # -- recording -----------------------------------------------------------------------
    @property
    def completed_runs(self) -> set[int]:
        """Run ids with at least one journaled `record` call (for sequences see `completed_steps`)."""
        return {r for r, _ in self.completed_steps}

    def record(self, run_id: int, step: int, *fields: Any) -> int:
        """Write one run's statistics, `run_rows(run_id, step, backend, dist, m, k, n, manifest, outputs)`:
        decoded from its outputs by `manifest`; returns rows written. M/K/N are the driver's (the
        reference's sweep passes its matmul's); `None` writes each site's own M/K/N from the manifest
        (a model's sites differ), batch dims aside."""
        return self.record_bytes(run_id, step, *run_rows(run_id, step, *fields))

    def record_values(self, run_id: int, step: int, *fields: Any, **options: Any) -> int:
        """Write one run: `format_rows(run_id, step, backend, dist, m, k, n, values, numel, site_dims)`,
        a row per element of each `(site, role, stat) -> values`, in mapping order."""
        return self.record_bytes(run_id, step, *format_rows(run_id, step, *fields, **options))

    def record_bytes(self, run_id: int, step: int, data: bytes, rows: int) -> int:
        """Write one run's rows as `format_rows` made them (elsewhere: a worker's shard), journaled."""
        self._f.write(data)
        self._sync(self._f)
        self._offset += len(data)
        self._j.write(f"{int(run_id)},{int(step)},{self._offset}\n")
        self._sync(self._j)
        self.completed_steps.add((int(run_id), int(step)))
        self.rows_written += rows
        return rows

    def _sync(self, f) -> None:
        f.flush()
        if self.durable:
            _datasync(f.fileno())

    # -- closing -------------------------------------------------------------------------
    def close(self) -> None:
        """Flush and close the CSV and its journal."""
        for f in (self._f, self._j):
            if not f.closed:
                f.close()

    def __enter__(self) -> Recorder:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def run_rows(
    run_id: int,
    step: int,
    backend: str,
    dist: str,
    m: int | None,
    k: int | None,
    n: int | None,
    manifest: Manifest,
    outputs: list[np.ndarray],
) -> tuple[bytes, int]:
    """One run's rows as `Recorder.record` writes them, decoded from its outputs by `manifest`
    (M/K/N None: each site's own), as CSV bytes and their count."""
    numel = {(e.site, e.role): e.numel for e in manifest.entries}
    dims = None
    if m is None or k is None or n is None:
        dims = {s.name: (s.m, s.k, s.n) for s in manifest.sites}
        m, k, n = 0, 0, 0
    return format_rows(run_id, step, backend, dist, m, k, n, manifest.values(outputs), numel, dims)


def format_rows(
    run_id: int,
    step: int,
    backend: str,
    dist: str,
    m: int,
    k: int,
    n: int,
    values: Mapping[tuple[str, str, str], np.ndarray],
    numel: Mapping[tuple[str, str], int],
    site_dims: Mapping[str, tuple[int, int, int]] | None = None,
) -> tuple[bytes, int]:
    """One run's tidy rows as CSV bytes (no header) and their count, built column-wise by polars."""
    ints = {"run_id": run_id, "step": step, "M": m, "K": k, "N": n}
    for name, v in ints.items():
        _check_uint(name, v)
    for name, v in (("backend", backend), ("dist", dist)):
        _check_name(name, v)
    head = f"{int(run_id)},{int(step)},{backend},{dist},"
    mkn = f"{int(m)},{int(k)},{int(n)}"
    site_role = {}  # (site, role) -> "M,K,N,numel,site,role" text, checked once per pair
    prefixes, arrays = [], []
    for key, vals in values.items():
        site, role, stat = key
        pair = site_role.get((site, role))
        if pair is None:
            if (site, role) not in numel:
                raise OpscopeError(f"record: no numel given for site {site!r} role {role!r}")
            _check_uint("numel", numel[(site, role)])
            _check_name("role", role)
            dims = mkn
            if site_dims is not None and site in site_dims:
                for name, v in zip("MKN", site_dims[site]):
                    _check_uint(name, v)
                dims = ",".join(str(int(v)) for v in site_dims[site])
            pair = site_role[(site, role)] = f"{dims},{int(numel[(site, role)])},{sanitize_site(site)},{role}"
        _check_name("stat", stat)
        prefixes.append(f"{head}{pair},{stat}")
        arrays.append(np.asarray(vals, dtype=np.float32).ravel())
    lengths = np.array([a.size for a in arrays], dtype=np.int64)
    total = int(lengths.sum())
    if total == 0:
        return b"", 0
    starts = np.cumsum(lengths) - lengths
    which = np.repeat(np.arange(len(arrays), dtype=np.uint32), lengths)
    frame = pl.DataFrame(
        {
            "prefix": pl.Series(prefixes, dtype=pl.Categorical).gather(which),
            "idx": np.arange(total, dtype=np.int64) - np.repeat(starts, lengths),
            "value": np.concatenate(arrays),
        }
    )
    buf = io.BytesIO()
    frame.write_csv(buf, include_header=False, quote_style="never")
    return buf.getvalue(), total


def _check_uint(name: str, v) -> None:
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 0:
        raise OpscopeError(f"record: {name} must be a non-negative integer, got {v!r}")


def _check_name(name: str, v) -> None:
    if not isinstance(v, str) or not _plain(v):
        raise OpscopeError(f"record: {name} {v!r} must be a string without commas, quotes or line breaks")


@functools.cache  # a run checks the same few role/stat names thousands of times
def _plain(v: str) -> bool:
    """Whether `v` can go in a CSV field unquoted."""
    return v == v.translate(_UNQUOTABLE)


# -- opening an existing CSV ------------------------------------------------------------
def _first_bytes(path: Path, n: int) -> bytes:
    with open(path, "rb") as f:
        return f.read(n)


def _header_prefix(path: Path) -> bool:
    """Whether the file holds only a strict prefix of the header line (a crash while creating it)."""
    head = _first_bytes(path, len(HEADER_LINE) + 1)
    return len(head) < len(HEADER_LINE) and HEADER_LINE.encode().startswith(head)


def _check_header(path: Path) -> None:
    head = _first_bytes(path, 4096).split(b"\n", 1)[0].decode("utf-8", "replace").rstrip("\r")
    if head + "\n" != HEADER_LINE:
        raise OpscopeError(
            f"{path}: header {head[:200]!r} is not the opscope tidy header "
            f"{HEADER_LINE.strip()!r}; refusing to append (use a new file)"
        )


def _read_journal(journal: Path) -> tuple[list[tuple[int, int, int]], bool]:
    """The journal's (run_id, step, offset_end) entries, and whether it had no partial last line."""
    text = journal.read_text()
    lines = text.split("\n")
    clean = lines[-1] == ""
    lines = lines[:-1]  # the last element is "" or a line cut short by a crash
    entries = []
    last = len(HEADER_LINE)
    for no, line in enumerate(lines, 1):
        parts = line.split(",")
        try:
            r, s, o = (int(p) for p in parts)
        except ValueError:
            raise OpscopeError(f"{journal}:{no}: expected 'run_id,step,byte_offset_end', got {line[:200]!r}") from None
        if o < last:
            raise OpscopeError(f"{journal}:{no}: byte offset {o} goes backwards (previous {last})")
        last = o
        entries.append((r, s, o))
    return entries, clean


def _recover_without_journal(path: Path) -> tuple[int, list[tuple[int, int, int]]]:
    """For a CSV without a journal: the end of its last complete line and a journal rebuilt from its lines."""
    buf = np.fromfile(path, dtype=np.uint8)
    newlines = np.flatnonzero(buf == ord("\n"))
    end = int(newlines[-1]) + 1  # the header line is complete (checked), so there is one
    if len(newlines) == 1:
        return end, []
    commas = np.flatnonzero(buf[:end] == ord(","))
    per_line = np.diff(np.searchsorted(commas, newlines))  # commas in each data line
    bad = np.flatnonzero(per_line != len(HEADER) - 1)
    if bad.size:
        raise OpscopeError(f"{path}:{int(bad[0]) + 2}: expected {len(HEADER)} fields; cannot resume this file")
    try:
        ids = pl.read_csv(io.BytesIO(buf[:end].tobytes()), schema=SCHEMA, quote_char=None, columns=["run_id", "step"])
    except pl.exceptions.PolarsError as e:
        raise OpscopeError(f"{path}: cannot read run_id/step to resume: {str(e).splitlines()[0]}") from None
    run, step = ids["run_id"].to_numpy(), ids["step"].to_numpy()
    if ids["run_id"].null_count() or ids["step"].null_count():
        line = int(np.flatnonzero(ids["run_id"].is_null() | ids["step"].is_null())[0]) + 2
        raise OpscopeError(f"{path}:{line}: empty run_id or step; cannot resume this file")
    line_end = newlines[1:] + 1
    last_of_group = np.flatnonzero(np.r_[(run[1:] != run[:-1]) | (step[1:] != step[:-1]), True])
    return end, [(int(run[i]), int(step[i]), int(line_end[i])) for i in last_of_group]


# -- site costs sidecar -----------------------------------------------------------------
# Rows of the sidecar that are not sites (a name in parentheses: no site is called that):
MODULE_ROW = "(module)"  # the whole module's FLOPs per call: cost shares are of the module, not the sites
UNKNOWN_ROW = "(unknown ops)"  # how many ops the cost model cannot count (in no FLOP total)
UNTAPPED_PREFIX = "(untapped) "  # + an op label: FLOPs of that kind of op no tapped site covers


def is_site_row(name: str) -> bool:
    """A sidecar row that names a site (not the module total or an untapped op kind)."""
    return not name.startswith("(")


def write_site_costs(
    path: str | Path, sites: Manifest | Mapping[str, int], module: Mapping[str, int] | None = None
) -> None:
    """Write the `site,flops` sidecar: a manifest's sites in its order, or a mapping sorted by name,
    then the `module` rows (`MODULE_ROW`, `UNKNOWN_ROW`, `UNTAPPED_PREFIX` + label) as given.

    Site names are sanitized like the CSV's; the first flops seen for a name wins."""
    if isinstance(sites, Mapping):
        pairs = sorted(sites.items())
    else:
        pairs = [(s.name, s.flops) for s in sites.sites]
    pairs += [(name.replace(",", " "), f) for name, f in (module or {}).items()]
    flops: dict[str, int] = {}
    for name, f in pairs:
        if isinstance(f, bool) or not isinstance(f, (int, np.integer)) or f < 0:
            raise OpscopeError(f"{path}: flops of site {name!r} must be a non-negative integer, got {f!r}")
        flops.setdefault(sanitize_site(name), int(f))
    Path(path).write_text(SITE_COSTS_HEADER + "\n" + "".join(f"{s},{f}\n" for s, f in flops.items()))


def read_site_costs(path: str | Path) -> dict[str, int]:
    """Read a `site,flops` sidecar into {site: flops}, in file order (a repeated site: the first wins)."""
    p = Path(path)
    if not p.is_file():
        raise OpscopeError(f"no such site-costs file: {p}")
    lines = p.read_text().splitlines()
    if not lines or lines[0].strip() != SITE_COSTS_HEADER:
        got = lines[0][:200] if lines else "(empty file)"
        raise OpscopeError(f"{p}:1: header {got!r} is not {SITE_COSTS_HEADER!r}")
    out: dict[str, int] = {}
    for no, line in enumerate(lines[1:], 2):
        if not line.strip():
            continue
        site, sep, f = line.rpartition(",")
        try:
            flops = int(f)
        except ValueError:
            flops = -1
        if not sep or flops < 0:
            raise OpscopeError(f"{p}:{no}: expected 'site,flops' with non-negative integer flops, got {line[:200]!r}")
        out.setdefault(site, flops)  # a repeated site: the first wins, as in the writer
    return out


# -- Parquet export ---------------------------------------------------------------------
def write_parquet(csv_path: str | Path, parquet_path: str | Path) -> None:
    """Convert a tidy CSV to Parquet (same 13 columns; u64 ints, utf8 strings, f32 value; zstd), streaming.

    The file appears whole or not at all (written aside, then renamed)."""
    csv_path = Path(csv_path)
    if not csv_path.is_file():
        raise OpscopeError(f"no such recording: {csv_path}")
    _check_header(csv_path)
    tmp = Path(str(parquet_path) + ".tmp")
    try:
        pl.scan_csv(csv_path, schema=SCHEMA, quote_char=None).sink_parquet(tmp, compression="zstd")
    except pl.exceptions.PolarsError as e:
        tmp.unlink(missing_ok=True)
        raise OpscopeError(f"{csv_path}: cannot convert to Parquet: {str(e).splitlines()[0]}") from None
    os.replace(tmp, parquet_path)


def fresh_output(path: str | Path, force: bool) -> Path:
    """`path`, emptied when `force` (the recorder drops a stale journal when it starts the file),
    else refused in one line when it holds recorded data: nothing already recorded is lost."""
    path = Path(path)
    if path.exists() and path.stat().st_size:
        if not force:
            raise OpscopeError(f"{path} exists: pass --force to overwrite it (or --out elsewhere)")
        path.unlink()
    return path
