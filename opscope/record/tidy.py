"""Reading tidy sketch tables (CSV or Parquet) into one typed polars frame, with one-line errors.

The tidy table is the contract between recording and mining: 13 columns
`run_id,step,backend,dist,M,K,N,numel,site,role,stat,idx,value`, one row per sketch
element (§2.11 of the reference design). `read_tidy` takes a file, a directory or a glob
(or a list of them), so a sharded sweep is mined as one table.

Typed schema (`SCHEMA`): the seven integer columns are Int64; the five string columns are
Categorical (they hold a handful of distinct names, so 4 bytes a row instead of a string
view, and grouping on them is 1.5-3x faster; they compare with plain `str`); `value` is
Float32: the device computed f32 and the recorder wrote its shortest round-trip text, so
Float32 gives back the very value (Float64 would hold the decimal, not the f32) at half the
memory; the miners cast to Float64 inside their expressions to sum and divide.

Bad input is an `OpscopeError` whose one-line message names the file and the line:
an empty file, a wrong header (which columns differ), a middle line with the wrong field
count, a non-integer, an empty field or a non-numeric value (polars reads the file; when
it refuses, polars reads it again as text to find the first offending line). A truncated last line (fewer
than 13 fields, or no final newline and a partial number) is skipped with a note, logged
on the "opscope" logger and appended to `notes`; the rest is read. Blank lines are skipped,
as the reference's miners do.

Fields are never quoted (neither recorder quotes; `opscope.record.recorder` owns the column list and
reads the `site,flops` sidecars, named `<csv>.sites` or `site_costs.csv`). Directories and
globs take only *.csv and *.parquet files and leave sidecars and recorder journals out.
"""

from __future__ import annotations

import csv
import glob
import itertools
import logging
import re
from collections.abc import Iterable
from pathlib import Path

import polars as pl

from opscope.errors import OpscopeError
from opscope.record import recorder

COLUMNS: tuple[str, ...] = recorder.HEADER
HEADER = ",".join(COLUMNS)
INT_COLUMNS: tuple[str, ...] = recorder.INT_COLUMNS
STR_COLUMNS: tuple[str, ...] = ("backend", "dist", "site", "role", "stat")
SCHEMA: dict[str, pl.DataType] = {
    c: pl.Int64 if c in INT_COLUMNS else pl.Categorical if c in STR_COLUMNS else pl.Float32 for c in COLUMNS
}
SITE_COSTS_NAME = "site_costs.csv"
MANIFEST_NAME = "manifest.json"  # a run folder's manifest: which result holds which sketch, the row sampling
NOTES_NAME = "notes.json"  # what the recorder noticed (degenerate inputs), said by every report mined from the run
SITES_SUFFIX = ".sites"
PARQUET_SUFFIXES = (".parquet", ".pq")
DATA_SUFFIXES = (".csv",) + PARQUET_SUFFIXES

_INT_RE = re.compile(r"[+-]?\d+")
_FLOAT_RE = re.compile(
    r"[+-]?(?:(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?|[iI][nN][fF](?:[iI][nN][iI][tT][yY])?|[nN][aA][nN])"
)
_TAIL_BYTES = 1 << 16
_COUNT_CHUNK = 1 << 24

log = logging.getLogger("opscope")


def empty_tidy() -> pl.DataFrame:
    """A tidy frame with no rows and the typed schema (what an empty recording reads as)."""
    return pl.DataFrame(schema=SCHEMA)


def tidy_files(spec: str | Path | Iterable[str | Path], notes: list[str] | None = None) -> list[Path]:
    """The data files a spec names: a file, a directory's *.csv/*.parquet, a glob, or a list of those.

    A CSV whose Parquet export (same name, `.parquet`) is also named is dropped with a note,
    so a directory holding both is not mined twice.
    """
    files: list[Path] = []
    for item in [spec] if isinstance(spec, (str, Path)) else spec:
        for f in _resolve_one(item):
            if f not in files:
                files.append(f)
    if not files:
        raise OpscopeError("no tidy files given (empty list)")
    names = set(files)
    kept = []
    for f in files:
        twin = f.with_suffix(".parquet")
        if f.suffix.lower() == ".csv" and twin in names:
            _note(notes, f"{f}: skipped, {twin.name} beside it holds its Parquet export")
        else:
            kept.append(f)
    return kept


def read_tidy(spec: str | Path | Iterable[str | Path], notes: list[str] | None = None) -> pl.DataFrame:
    """Every tidy file `spec` names, validated and concatenated into one typed frame.

    Notes about skipped truncated lines are logged on the "opscope" logger and, when
    `notes` is given, appended to it.
    """
    frames = [read_tidy_file(f, notes) for f in tidy_files(spec, notes)]
    if len(frames) == 1:
        return frames[0]
    return pl.concat(frames, how="vertical", rechunk=False)


def read_tidy_file(path: str | Path, notes: list[str] | None = None) -> pl.DataFrame:
    """One tidy CSV or Parquet file as a typed frame (see the module docstring for the checks)."""
    path = Path(path)
    if not path.is_file():
        raise OpscopeError(f"{path}: no such file")
    if path.suffix.lower() in PARQUET_SUFFIXES:
        return _read_parquet(path)
    return _read_csv(path, notes)


def site_cost_files(files: Iterable[Path]) -> list[Path]:
    """The sidecars that go with these data files: `<file>.sites` (for x.parquet also x.csv.sites),
    else `site_costs.csv` beside it."""
    found: list[Path] = []
    for f in files:
        csv_name = f.with_suffix(".csv").name
        for cand in (
            f.with_name(f.name + SITES_SUFFIX),
            f.with_name(csv_name + SITES_SUFFIX),
            f.with_name(SITE_COSTS_NAME),
        ):
            if cand.is_file():
                if cand not in found:
                    found.append(cand)
                break
    return found


def is_site_costs(path: Path) -> bool:
    """Whether `path` is a sidecar (site costs by name or `site,flops` header, or a recorder journal)."""
    if path.name == SITE_COSTS_NAME or path.name.endswith((SITES_SUFFIX, recorder.JOURNAL_SUFFIX)):
        return True
    if path.suffix.lower() != ".csv":
        return False
    try:
        with open(path, "rb") as f:
            first = f.readline(256)
    except OSError:
        return False
    return first.decode("utf-8-sig", "replace").strip() == recorder.SITE_COSTS_HEADER


def _resolve_one(spec: str | Path) -> list[Path]:
    path = Path(spec)
    if path.is_dir():
        files = sorted(
            p for p in path.iterdir() if p.is_file() and p.suffix.lower() in DATA_SUFFIXES and not is_site_costs(p)
        )
        if not files:
            raise OpscopeError(f"{path}: no *.csv or *.parquet tidy files in this directory")
        return files
    if path.exists():
        if is_site_costs(path):
            raise OpscopeError(f"{path}: a site-cost sidecar (site,flops), not a tidy table")
        return [path]
    text = str(spec)
    if glob.has_magic(text):
        files = sorted(Path(p) for p in glob.glob(text, recursive=True))
        files = [p for p in files if p.is_file() and p.suffix.lower() in DATA_SUFFIXES and not is_site_costs(p)]
        if not files:
            raise OpscopeError(f"{text}: no *.csv or *.parquet files match this pattern")
        return files
    raise OpscopeError(f"{path}: no such file or directory")


def _note(notes: list[str] | None, text: str) -> None:
    log.warning("%s", text)
    if notes is not None:
        notes.append(text)


def _wrong_columns(got: list[str]) -> str:
    """'missing A, B; unexpected 'x'' for column names that are not the tidy schema's ('' when
    they all are, in any order)."""
    missing = [c for c in COLUMNS if c not in got]
    extra = [repr(c) for c in got if c not in COLUMNS]
    return "; ".join(
        ([f"missing {', '.join(missing)}"] if missing else []) + ([f"unexpected {', '.join(extra)}"] if extra else [])
    )


def _check_header(path: Path, first: bytes) -> None:
    got = [h.strip() for h in first.decode("utf-8-sig", "replace").rstrip("\r\n").split(",")]
    if got == list(COLUMNS):
        return
    if wrong := _wrong_columns(got):
        raise OpscopeError(f"{path}:1: wrong header ({wrong}); expected {HEADER}")
    raise OpscopeError(f"{path}:1: wrong header (columns out of order: {','.join(got)}); expected {HEADER}")


def _count_newlines(path: Path, end: int) -> int:
    """Newlines in the first `end` bytes of `path` (chunked, so no copy of a big file)."""
    n = 0
    with open(path, "rb") as f:
        left = end
        while left > 0:
            chunk = f.read(min(_COUNT_CHUNK, left))
            if not chunk:
                break
            n += chunk.count(b"\n")
            left -= len(chunk)
    return n


def _row_problem(row: list[str]) -> str | None:
    """Why a split CSV row is not a tidy row, or None when it is one."""
    if len(row) != len(COLUMNS):
        return f"expected {len(COLUMNS)} fields, found {len(row)}"
    for i, name in enumerate(COLUMNS):
        cell = row[i]
        if name in INT_COLUMNS and not _INT_RE.fullmatch(cell):
            return f"{name} is not an integer: {cell!r}"
        if name in STR_COLUMNS and cell == "":
            return f"empty {name}"
    if not _FLOAT_RE.fullmatch(row[-1]):
        return f"value is not a number: {row[-1]!r}"
    return None


def _first_bad_line(path: Path, stop_line: int | None) -> tuple[int, str] | None:
    """The first data line (1-based) that is not a tidy row, before `stop_line` (excluded).

    polars finds it in seconds for millions of rows: first each line as one text field
    (its comma count gives the first line with a wrong field count), then the lines before
    that as 13 text fields (the first whose fields do not parse). That line is then read
    and explained; if polars cannot do this, the `csv` module scans instead.
    """
    n_rows = None if stop_line is None else stop_line - 2
    try:
        lines = pl.read_csv(
            path, has_header=True, separator="\x1f", quote_char=None, infer_schema=False, n_rows=n_rows
        ).to_series()
        ragged = pl.select(
            pl.arg_where(
                lines.is_not_null()
                & (lines.str.strip_chars_end("\r").str.count_matches(",", literal=True) != len(COLUMNS) - 1)
            ).first()
        ).item()
        rows_ok = ragged if ragged is not None else n_rows
        raw = pl.read_csv(
            path,
            has_header=True,
            quote_char=None,
            infer_schema=False,
            n_rows=rows_ok,
            new_columns=list(COLUMNS),
            truncate_ragged_lines=True,
        )  # only rows before `ragged`
    except pl.exceptions.PolarsError:
        return _scan_bad_line(path, stop_line)
    blank = pl.all_horizontal(pl.col(c).is_null() for c in COLUMNS)
    wrong = [pl.col(c).is_null() for c in STR_COLUMNS]
    wrong += [pl.col(c).cast(pl.Int64, strict=False).is_null() for c in INT_COLUMNS]
    wrong.append(pl.col("value").cast(pl.Float64, strict=False).is_null())
    bad = raw.select(pl.arg_where(~blank & pl.any_horizontal(wrong)).first()).item()
    index = bad if bad is not None else ragged
    if index is None:
        return _scan_bad_line(path, stop_line)
    line = int(index) + 2  # the header is line 1; blank lines count as rows
    with open(path, encoding="utf-8-sig", errors="replace", newline="") as f:
        text = next(itertools.islice(f, line - 1, None), "")
    why = _row_problem(text.rstrip("\r\n").split(","))
    return (line, why) if why is not None else _scan_bad_line(path, stop_line)


def _scan_bad_line(path: Path, stop_line: int | None) -> tuple[int, str] | None:
    """`_first_bad_line` by a plain streaming scan with the `csv` module."""
    with open(path, newline="", encoding="utf-8-sig", errors="replace") as f:
        reader = csv.reader(f, quoting=csv.QUOTE_NONE)
        next(reader, None)
        for row in reader:
            line = reader.line_num
            if stop_line is not None and line >= stop_line:
                break
            if not row or all(c == "" for c in row):
                continue
            why = _row_problem(row)
            if why is not None:
                return line, why
    return None


def _read_csv(path: Path, notes: list[str] | None) -> pl.DataFrame:
    size = path.stat().st_size
    with open(path, "rb") as f:
        first = f.readline(_TAIL_BYTES)
        if not first.strip():
            raise OpscopeError(f"{path}:1: empty file (expected the header {HEADER})")
        _check_header(path, first)
        header_end = f.tell()
        f.seek(max(header_end, size - _TAIL_BYTES))
        tail = f.read()
        tail_start = size - len(tail)
    if size <= header_end or not tail.strip():
        _note(notes, f"{path}: header only, no data rows")
        return empty_tidy()

    # The last line: what follows the last newline, or the line before a final newline.
    ends_nl = tail.endswith(b"\n")
    body = tail.rstrip(b"\r\n") if ends_nl else tail
    cut = body.rfind(b"\n")
    last = body[cut + 1 :].rstrip(b"\r")
    if cut >= 0:
        last_start = tail_start + cut + 1
    else:  # no newline in the tail: one data line right after the header, or a line over 64 KiB
        last_start = header_end if tail_start == header_end else None
    n_rows = None
    if last_start is not None and last.strip():
        row = last.decode("utf-8", "replace").split(",")
        why = None
        if len(row) < len(COLUMNS):
            why = f"{len(row)} of {len(COLUMNS)} fields"
        elif not ends_nl and len(row) == len(COLUMNS) and _row_problem(row) is not None:
            why = f"no final newline and {_row_problem(row)}"
        if why is not None:
            lines_before = _count_newlines(path, last_start)
            _note(notes, f"{path}:{lines_before + 1}: truncated last line skipped ({why})")
            n_rows = lines_before - 1
            if n_rows <= 0:
                return empty_tidy()
        elif not ends_nl:
            log.info("%s: no newline at the end of the file; its last line parses and is kept", path)

    try:
        df = pl.read_csv(path, schema=SCHEMA, has_header=True, n_rows=n_rows, quote_char=None)
    except pl.exceptions.PolarsError as e:
        stop = None if n_rows is None else n_rows + 2
        bad = _first_bad_line(path, stop)
        if bad is not None:
            raise OpscopeError(f"{path}:{bad[0]}: {bad[1]}") from None
        msg = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise OpscopeError(f"{path}: cannot read as a tidy table: {msg}") from None

    if df.null_count().sum_horizontal().item():
        df = df.filter(~pl.all_horizontal(pl.all().is_null()))  # blank lines
        if df.null_count().sum_horizontal().item():
            bad = _first_bad_line(path, None if n_rows is None else n_rows + 2)
            where = f"{path}:{bad[0]}: {bad[1]}" if bad else f"{path}: a field is empty"
            raise OpscopeError(where)
    return df


def _read_parquet(path: Path) -> pl.DataFrame:
    try:
        scan = pl.scan_parquet(path)
        got = list(scan.collect_schema().names())
    except Exception as e:  # polars and OS errors alike: the file is not usable
        msg = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise OpscopeError(f"{path}: not a readable Parquet file ({msg})") from None
    if wrong := _wrong_columns(got):
        raise OpscopeError(f"{path}: wrong columns ({wrong}); expected {HEADER}")
    try:
        # Casting while scanning keeps one copy in memory (read-then-cast peaks at 2x).
        df = scan.select(pl.col(c).cast(SCHEMA[c], strict=True) for c in COLUMNS).collect()
    except pl.exceptions.PolarsError as e:
        msg = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise OpscopeError(f"{path}: cannot read as a tidy table ({msg})") from None
    nulls = df.null_count().row(0)
    if any(nulls):
        col = COLUMNS[next(i for i, n in enumerate(nulls) if n)]
        row = df.with_row_index("_row").filter(pl.col(col).is_null())["_row"][0]
        raise OpscopeError(f"{path}: row {row + 1}: null {col}")
    return df
