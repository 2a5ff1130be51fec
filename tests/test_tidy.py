"""Reading tidy tables: typed round trip, files/dirs/globs/Parquet, and every bad input as one line.

Files are written here line by line with the csv module (values as numpy's shortest f32
text, as the recorder writes them), independently of the polars reader under test.
Counts are checked exactly, values exactly (f32 text read back as f64 is the f32 value).
"""

from __future__ import annotations

import csv
import logging
from pathlib import Path

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from errors import one_line

from opscope.errors import OpscopeError
from opscope.record.tidy import COLUMNS, HEADER, SCHEMA, read_tidy, tidy_files


def f32_text(v: float) -> str:
    """A value as the recorder writes it: the shortest text that round-trips the f32."""
    return str(np.float32(v))


def write_tidy_csv(path: Path, rows: list[tuple], header: str = HEADER) -> Path:
    """Write 13-field tidy rows (the value field may be a float or ready text) as a CSV."""
    with open(path, "w", newline="") as f:
        f.write(header + "\n")
        w = csv.writer(f, lineterminator="\n")
        for r in rows:
            w.writerow([*r[:12], r[12] if isinstance(r[12], str) else f32_text(r[12])])
    return path


def simple_rows(n: int, run_id: int = 0, site: str = "matmul#0") -> list[tuple]:
    """n distinct rows of one pos_sumsq vector: idx i holds i / 7."""
    return [(run_id, 0, "llvm-cpu", "gaussian", 8, 4, 2, 32, site, "lhs", "pos_sumsq", i, i / 7) for i in range(n)]


def read_error(path: Path, *notes: list) -> str:
    """The message of the OpscopeError `read_tidy(path, *notes)` raises: the bad-input tests compare it whole."""
    with pytest.raises(OpscopeError) as e:
        read_tidy(path, *notes)
    return str(e.value)


def test_round_trip_types_and_values(tmp_path):
    rows = simple_rows(50)
    df = read_tidy(write_tidy_csv(tmp_path / "a.csv", rows))
    assert df.columns == list(COLUMNS)
    assert dict(df.schema) == SCHEMA
    assert df.height == 50
    assert df["idx"].to_list() == list(range(50))
    assert df["value"].to_list() == [float(np.float32(i / 7)) for i in range(50)]
    assert df["site"].cast(pl.String).to_list() == ["matmul#0"] * 50


def test_empty_file_is_one_line_error(tmp_path):
    p = tmp_path / "empty.csv"
    p.write_text("")
    with pytest.raises(OpscopeError, match=r"empty\.csv:1: empty file") as e:
        read_tidy(p)
    one_line(e)


def test_wrong_header_names_the_columns(tmp_path):
    p = write_tidy_csv(tmp_path / "h.csv", simple_rows(3), header=HEADER.replace("numel", "count"))
    with pytest.raises(OpscopeError, match=r"h\.csv:1: wrong header \(missing numel; unexpected 'count'\)"):
        read_tidy(p)
    q = write_tidy_csv(tmp_path / "o.csv", simple_rows(3), header=HEADER.replace("M,K,N", "K,M,N"))
    with pytest.raises(OpscopeError, match=r"o\.csv:1: wrong header \(columns out of order"):
        read_tidy(q)


def test_header_only_reads_as_empty_with_a_note(tmp_path):
    p = tmp_path / "h.csv"
    p.write_text(HEADER + "\n")
    notes: list[str] = []
    df = read_tidy(p, notes)
    assert df.height == 0 and dict(df.schema) == SCHEMA
    assert len(notes) == 1 and "no data rows" in notes[0]


@pytest.mark.parametrize(
    "bad, why",
    [
        ("abc", "value is not a number: 'abc'"),
        ("", "value is not a number: ''"),
    ],
)
def test_non_numeric_value_names_its_line(tmp_path, bad, why):
    rows = simple_rows(10)
    rows[5] = (*rows[5][:12], bad)  # data row 6 = line 7 (the header is line 1)
    p = write_tidy_csv(tmp_path / "v.csv", rows)
    assert read_error(p) == f"{p}:7: {why}"


def test_non_integer_field_names_its_line(tmp_path):
    rows = simple_rows(10)
    rows[2] = (*rows[2][:11], "1.5", rows[2][12])
    p = write_tidy_csv(tmp_path / "i.csv", rows)
    assert read_error(p) == f"{p}:4: idx is not an integer: '1.5'"


@pytest.mark.parametrize("fields", [12, 14])
def test_wrong_field_count_in_a_middle_line(tmp_path, fields):
    p = write_tidy_csv(tmp_path / "f.csv", simple_rows(10))
    lines = p.read_text().splitlines()
    parts = lines[4].split(",")
    lines[4] = ",".join(parts[:12] if fields == 12 else parts + ["9"])
    p.write_text("\n".join(lines) + "\n")
    assert read_error(p) == f"{p}:5: expected 13 fields, found {fields}"


@pytest.mark.parametrize("first", ["value", "fields"])
def test_the_first_of_two_bad_lines_is_reported(tmp_path, first):
    p = write_tidy_csv(tmp_path / "two.csv", simple_rows(30))
    lines = p.read_text().splitlines()
    bad_value, extra_field = (10, 20) if first == "value" else (20, 10)
    lines[bad_value] = lines[bad_value].rsplit(",", 1)[0] + ",x"
    lines[extra_field] += ",1"
    p.write_text("\n".join(lines) + "\n")
    want = "value is not a number: 'x'" if first == "value" else "expected 13 fields, found 14"
    assert read_error(p) == f"{p}:11: {want}"


def test_bad_line_found_by_the_fallback_scan(tmp_path):
    """A control character the fast locator splits on sends it to the csv-module scan."""
    rows = simple_rows(8)
    rows[1] = (*rows[1][:12], "abc")
    rows[4] = (*rows[4][:8], "odd\x1fsite", *rows[4][9:])
    p = write_tidy_csv(tmp_path / "x.csv", rows)
    assert read_error(p) == f"{p}:3: value is not a number: 'abc'"


def test_empty_string_field_is_an_error(tmp_path):
    rows = simple_rows(5)
    rows[1] = (*rows[1][:10], "", *rows[1][11:])
    p = write_tidy_csv(tmp_path / "s.csv", rows)
    assert read_error(p) == f"{p}:3: empty stat"


@pytest.mark.parametrize(
    "tail, why",
    [
        ("0,0,llvm-cpu,gaussian,8,4", "6 of 13 fields"),
        ("0,0,llvm-cpu,gaussian,8,4,2,32,matmul#0,lhs,pos_sumsq,9,1.5e-", "no final newline and value is not a number"),
        ("0,0,llvm-cpu,gaussian,8,4,2,32,matmul#0,lhs,pos_sumsq,9,", "no final newline and value is not a number"),
    ],
)
def test_truncated_last_line_is_skipped_with_a_note(tmp_path, caplog, tail, why):
    p = write_tidy_csv(tmp_path / "t.csv", simple_rows(9))
    with open(p, "a") as f:
        f.write(tail)
    notes: list[str] = []
    with caplog.at_level(logging.WARNING, logger="opscope"):
        df = read_tidy(p, notes)
    assert df.height == 9
    assert df["idx"].to_list() == list(range(9))
    assert len(notes) == 1 and notes[0].startswith(f"{p}:11: truncated last line skipped ({why}")
    assert notes[0] in caplog.text


def test_short_last_line_with_newline_is_also_truncation(tmp_path):
    p = write_tidy_csv(tmp_path / "t.csv", simple_rows(4))
    with open(p, "a") as f:
        f.write("0,0,llvm-cpu\n")
    notes: list[str] = []
    assert read_tidy(p, notes).height == 4
    assert notes == [f"{p}:6: truncated last line skipped (3 of 13 fields)"]


def test_only_data_line_truncated(tmp_path):
    p = tmp_path / "one.csv"
    p.write_text(HEADER + "\n0,0,llvm")
    notes: list[str] = []
    assert read_tidy(p, notes).height == 0
    assert notes == [f"{p}:2: truncated last line skipped (3 of 13 fields)"]


def test_complete_last_line_without_newline_is_kept(tmp_path):
    p = write_tidy_csv(tmp_path / "n.csv", simple_rows(4))
    p.write_text(p.read_text().rstrip("\n"))
    notes: list[str] = []
    assert read_tidy(p, notes).height == 4
    assert notes == []


def test_bad_line_before_a_truncated_tail_is_still_an_error(tmp_path):
    rows = simple_rows(6)
    rows[2] = (*rows[2][:12], "x")
    p = write_tidy_csv(tmp_path / "b.csv", rows)
    with open(p, "a") as f:
        f.write("0,0")
    assert read_error(p, []) == f"{p}:4: value is not a number: 'x'"


def test_blank_lines_and_crlf_are_accepted(tmp_path):
    p = write_tidy_csv(tmp_path / "c.csv", simple_rows(5))
    lines = p.read_text().splitlines()
    p.write_bytes(("\r\n".join(lines[:3] + [""] + lines[3:]) + "\r\n\r\n").encode())
    df = read_tidy(p)
    assert df["idx"].to_list() == list(range(5))


def test_many_files_dir_glob_and_list(tmp_path):
    a = write_tidy_csv(tmp_path / "a.csv", simple_rows(3, run_id=0))
    b = write_tidy_csv(tmp_path / "b.csv", simple_rows(4, run_id=1))
    (tmp_path / "site_costs.csv").write_text("site,flops\nmatmul#0,128\n")
    (tmp_path / "a.csv.sites").write_text("site,flops\nmatmul#0,128\n")
    (tmp_path / "renamed_costs.csv").write_text("site,flops\nmatmul#0,128\n")
    (tmp_path / "notes.txt").write_text("not data")
    (tmp_path / "a.csv.runs").write_text("0,0,100\n")  # the recorder's journal
    assert tidy_files(tmp_path) == [a, b]
    assert tidy_files(str(tmp_path / "*.csv")) == [a, b]
    assert tidy_files(str(tmp_path / "*")) == [a, b]
    assert tidy_files([b, a, b]) == [b, a]
    for spec in (tmp_path, str(tmp_path / "?.csv"), [a, b]):
        df = read_tidy(spec)
        assert df.group_by("run_id").len().sort("run_id").rows() == [(0, 3), (1, 4)]


def test_no_match_and_missing_paths(tmp_path):
    with pytest.raises(OpscopeError, match=r"nope\*\.csv: no \*\.csv or \*\.parquet files match this pattern"):
        read_tidy(str(tmp_path / "nope*.csv"))
    with pytest.raises(OpscopeError, match=r"missing\.csv: no such file or directory"):
        read_tidy(tmp_path / "missing.csv")
    (tmp_path / "sub").mkdir()
    with pytest.raises(OpscopeError, match=r"sub: no \*\.csv or \*\.parquet tidy files"):
        read_tidy(tmp_path / "sub")
    (tmp_path / "site_costs.csv").write_text("site,flops\n")
    with pytest.raises(OpscopeError, match="a site-cost sidecar"):
        read_tidy(tmp_path / "site_costs.csv")


def _parquet_table(rows: list[tuple]) -> pa.Table:
    """The reference's Parquet sink types: u64 integers, utf8 strings, f32 values."""
    cols = list(zip(*rows))
    types = {c: pa.uint64() for c in ("run_id", "step", "M", "K", "N", "numel", "idx")}
    types.update({c: pa.string() for c in ("backend", "dist", "site", "role", "stat")})
    types["value"] = pa.float32()
    return pa.table({c: pa.array(list(v), type=types[c]) for c, v in zip(COLUMNS, cols)})


def test_parquet_reads_like_the_csv(tmp_path):
    rows = simple_rows(20)
    pq.write_table(_parquet_table(rows), tmp_path / "a.parquet")
    write_tidy_csv(tmp_path / "a.csv", rows)
    from_pq = read_tidy(tmp_path / "a.parquet")
    assert dict(from_pq.schema) == SCHEMA
    assert from_pq.equals(read_tidy(tmp_path / "a.csv"))
    notes: list[str] = []
    assert read_tidy(tmp_path, notes).equals(from_pq)  # a CSV and its Parquet export: read once
    assert notes == [f"{tmp_path / 'a.csv'}: skipped, a.parquet beside it holds its Parquet export"]
    write_tidy_csv(tmp_path / "b.csv", simple_rows(5, run_id=1))
    mixed = read_tidy([tmp_path / "a.parquet", tmp_path / "b.csv"])
    assert mixed.group_by("run_id").len().sort("run_id").rows() == [(0, 20), (1, 5)]


def test_bad_parquet_files(tmp_path):
    t = _parquet_table(simple_rows(3)).drop_columns(["numel"])
    pq.write_table(t, tmp_path / "cols.parquet")
    with pytest.raises(OpscopeError, match=r"cols\.parquet: wrong columns \(missing numel\)"):
        read_tidy(tmp_path / "cols.parquet")
    (tmp_path / "junk.parquet").write_bytes(b"not parquet at all")
    with pytest.raises(OpscopeError, match=r"junk\.parquet: not a readable Parquet file"):
        read_tidy(tmp_path / "junk.parquet")
    t = _parquet_table(simple_rows(3))
    t = t.set_column(COLUMNS.index("value"), "value", pa.array([1.0, None, 2.0], type=pa.float32()))
    pq.write_table(t, tmp_path / "null.parquet")
    with pytest.raises(OpscopeError, match=r"null\.parquet: row 2: null value"):
        read_tidy(tmp_path / "null.parquet")
