"""The tidy-CSV recorder: exact header, row layout, bit-exact float32 values, crash-safe
append/resume, the site-cost sidecar and the Parquet export.

References are independent of the writer: rows are rebuilt with a Python loop over
`Manifest.rows` and parsed back with both Python's `csv` module and polars; values are
compared bit for bit (NaN by being NaN: text keeps no NaN payload).
"""

from __future__ import annotations

import csv
import os

import numpy as np
import polars as pl
import pytest

from opscope.errors import OpscopeError
from opscope.ir.manifest import Manifest, SiteInfo, StatEntry
from opscope.record.recorder import (
    HEADER,
    SCHEMA,
    Recorder,
    format_rows,
    journal_path,
    read_site_costs,
    write_parquet,
    write_site_costs,
)

HEADER_TEXT = "run_id,step,backend,dist,M,K,N,numel,site,role,stat,idx,value\n"
SPECIAL = np.array(
    [
        0.0,
        -0.0,
        1.0,
        -1.5,
        0.1,
        1 / 3,
        np.nan,
        np.inf,
        -np.inf,
        1e-38,
        -1e-38,
        3.4e38,
        np.finfo(np.float32).max,
        np.finfo(np.float32).tiny,
        np.finfo(np.float32).smallest_subnormal,
        -np.finfo(np.float32).smallest_subnormal,
        3e-42,
        16777217.0,
        123456789.0,
    ],
    dtype=np.float32,
)


def manifest() -> Manifest:
    """Two sites, one with a comma in its name; results 1 (packed) and 2 hold the stats."""
    entries = [
        StatEntry(1, 0, 1, "enc,q", "lhs", "min", 12),
        StatEntry(1, 1, 4, "enc,q", "lhs", "hist", 12),
        StatEntry(1, 5, 1, "enc,q", "out", "max", 6),
        StatEntry(2, 0, 3, "dec", "rhs", "adj_sumsq", 20),
    ]
    sites = [SiteInfo("enc,q", "matmul", 1, 3, 4, 2, 48), SiteInfo("dec", "matmul", 1, 2, 5, 4, 80)]
    return Manifest("main", 3, 1, entries, sites)


def outputs(seed: int) -> list[np.ndarray]:
    """One run's outputs: an original result, then the packed stats (incl. special values)."""
    rng = np.random.default_rng(seed)
    packed = rng.standard_normal(6).astype(np.float32)
    packed[2], packed[3] = SPECIAL[seed % len(SPECIAL)], -0.0
    return [np.zeros((2, 2), np.float32), packed, rng.standard_normal(3).astype(np.float32) * 1e30]


def expected_rows(run_id: int, step: int, m: Manifest, outs) -> list[list[str]]:
    """The reference's rows, built one element at a time (values as float32, compared separately)."""
    numel = {(e.site, e.role): e.numel for e in m.entries}
    return [
        [
            str(run_id),
            str(step),
            "llvm-cpu",
            "gaussian",
            "3",
            "4",
            "2",
            str(numel[(site, role)]),
            site.replace(",", "_"),
            role,
            stat,
            str(i),
            np.float32(v),
        ]
        for site, role, stat, i, v in m.rows(outs)
    ]


def read_rows(path) -> list[list[str]]:
    with open(path, newline="") as f:
        return list(csv.reader(f))


def same_f32(a, b) -> bool:
    """Bit-equal float32 arrays, NaN matching NaN."""
    a, b = np.asarray(a, np.float32), np.asarray(b, np.float32)
    nan = np.isnan(a)
    return (
        a.shape == b.shape
        and np.array_equal(nan, np.isnan(b))
        and np.array_equal(a[~nan].view(np.uint32), b[~nan].view(np.uint32))
    )


def write_runs(path, runs, mode="w") -> Recorder:
    with Recorder(path, mode) as rec:
        for r in runs:
            rec.record(r, 0, "llvm-cpu", "gaussian", 3, 4, 2, manifest(), outputs(r))
    return rec


# -- layout ------------------------------------------------------------------------------
def test_header_is_the_reference_13_columns(tmp_path):
    assert HEADER == tuple(HEADER_TEXT.strip().split(","))
    Recorder(tmp_path / "a.csv").close()
    assert (tmp_path / "a.csv").read_text() == HEADER_TEXT


def test_rows_follow_the_manifest(tmp_path):
    path, m = tmp_path / "a.csv", manifest()
    with Recorder(path) as rec:
        assert rec.record(0, 0, "llvm-cpu", "gaussian", 3, 4, 2, m, outputs(0)) == 9
        assert rec.record(1, 0, "llvm-cpu", "gaussian", 3, 4, 2, m, outputs(1)) == 9
        assert rec.rows_written == 18
    rows = read_rows(path)
    assert rows[0] == list(HEADER)
    want = expected_rows(0, 0, m, outputs(0)) + expected_rows(1, 0, m, outputs(1))
    assert len(rows) == 1 + len(want) == 19
    for got, exp in zip(rows[1:], want):
        assert got[:12] == exp[:12]
        assert same_f32(np.float32(float(got[12])), exp[12])


def test_none_dims_take_each_sites_own_mkn(tmp_path):
    path, m = tmp_path / "a.csv", manifest()
    with Recorder(path) as rec:
        rec.record(0, 0, "llvm-cpu", "model", None, None, None, m, outputs(0))
    dims = {(r[8], r[9]): tuple(int(x) for x in r[4:7]) for r in read_rows(path)[1:]}
    assert dims == {("enc_q", "lhs"): (3, 4, 2), ("enc_q", "out"): (3, 4, 2), ("dec", "rhs"): (2, 5, 4)}


def test_record_values_without_a_manifest(tmp_path):
    path = tmp_path / "a.csv"
    values = {("s", "lhs", "nnz"): np.array([3.0], np.float32), ("s", "out", "hist"): np.arange(3, dtype=np.float32)}
    with Recorder(path) as rec:
        assert rec.record_values(7, 2, "cuda", "sparse90", 1, 2, 0, values, {("s", "lhs"): 2, ("s", "out"): 5}) == 4
    assert path.read_text() == HEADER_TEXT + (
        "7,2,cuda,sparse90,1,2,0,2,s,lhs,nnz,0,3.0\n"
        "7,2,cuda,sparse90,1,2,0,5,s,out,hist,0,0.0\n"
        "7,2,cuda,sparse90,1,2,0,5,s,out,hist,1,1.0\n"
        "7,2,cuda,sparse90,1,2,0,5,s,out,hist,2,2.0\n"
    )


def test_values_round_trip_bit_exactly(tmp_path):
    bits = np.random.default_rng(0).integers(0, 2**32, size=200_000, dtype=np.uint64).astype(np.uint32)
    vals = np.concatenate([SPECIAL, bits.view(np.float32)])
    path = tmp_path / "a.csv"
    with Recorder(path) as rec:
        rec.record_values(0, 0, "llvm-cpu", "uniform", 1, 1, 1, {("s", "out", "v"): vals}, {("s", "out"): 1})
    back = pl.read_csv(path, schema=SCHEMA)
    assert back.schema == pl.Schema(SCHEMA) and back.height == vals.size
    assert same_f32(back["value"].to_numpy(), vals)
    assert np.array_equal(back["idx"].to_numpy(), np.arange(vals.size))
    with open(path, newline="") as f:
        py = np.array([float(r["value"]) for r in csv.DictReader(f)], dtype=np.float64).astype(np.float32)
    assert same_f32(py, vals)
    text = path.read_text().splitlines()
    assert [line.rsplit(",", 1)[1] for line in text[1:4]] == ["0.0", "-0.0", "1.0"]  # shortest forms


def test_bad_values_are_refused(tmp_path):
    with Recorder(tmp_path / "a.csv") as rec:
        args = ({("s", "out", "v"): np.ones(1)}, {("s", "out"): 1})
        with pytest.raises(OpscopeError, match="backend 'a,b' must be a string without commas"):
            rec.record_values(0, 0, "a,b", "gaussian", 1, 1, 1, *args)
        with pytest.raises(OpscopeError, match="run_id must be a non-negative integer, got -1"):
            rec.record_values(-1, 0, "cpu", "gaussian", 1, 1, 1, *args)
        with pytest.raises(OpscopeError, match="no numel given for site 's' role 'out'"):
            rec.record_values(0, 0, "cpu", "gaussian", 1, 1, 1, args[0], {})
    assert (tmp_path / "a.csv").read_text() == HEADER_TEXT
    with pytest.raises(OpscopeError, match="mode must be 'w' or 'a'"):
        Recorder(tmp_path / "b.csv", "x")


# -- append and resume ---------------------------------------------------------------------
def test_append_to_a_file_with_the_tidy_header(tmp_path):
    write_runs(tmp_path / "one.csv", [0, 1, 2])
    write_runs(tmp_path / "two.csv", [0])
    rec = write_runs(tmp_path / "two.csv", [1, 2], mode="a")
    assert rec.completed_runs == {0, 1, 2}
    assert (tmp_path / "two.csv").read_bytes() == (tmp_path / "one.csv").read_bytes()
    assert journal_path(tmp_path / "two.csv").read_text() == journal_path(tmp_path / "one.csv").read_text()


@pytest.mark.parametrize("content", [b"", b"run_id,step,ba"])
def test_append_to_a_missing_empty_or_half_created_file_writes_the_header(tmp_path, content):
    (tmp_path / "b.csv").write_bytes(content)
    for path in (tmp_path / "a.csv", tmp_path / "b.csv"):
        with Recorder(path, "a") as rec:
            assert rec.completed_runs == set()
        assert path.read_text() == HEADER_TEXT


def test_append_refuses_a_different_header(tmp_path):
    path = tmp_path / "a.csv"
    path.write_text("run_id,backend,value\n0,cpu,1.0\n")
    with pytest.raises(OpscopeError, match=r"a\.csv: header 'run_id,backend,value' is not the opscope tidy header"):
        Recorder(path, "a")
    assert path.read_text() == "run_id,backend,value\n0,cpu,1.0\n"


def test_resume_after_a_crash_drops_the_unjournaled_tail(tmp_path):
    clean, crashed = tmp_path / "clean.csv", tmp_path / "crashed.csv"
    write_runs(clean, [0, 1, 2])
    write_runs(crashed, [0, 1, 2])
    data, _ = format_rows(
        3,
        0,
        "llvm-cpu",
        "gaussian",
        3,
        4,
        2,
        manifest().values(outputs(3)),
        {(e.site, e.role): e.numel for e in manifest().entries},
    )
    with open(crashed, "ab") as f:  # run 3 cut mid-line, then a half line: no journal entry
        f.write(data[: len(data) // 2] + b"\n3,0,llvm-cpu,gau")
    with Recorder(crashed, "a") as rec:
        assert rec.completed_runs == {0, 1, 2}
        assert crashed.read_bytes() == clean.read_bytes()
        rec.record(3, 0, "llvm-cpu", "gaussian", 3, 4, 2, manifest(), outputs(3))
    write_runs(clean, [3], mode="a")
    assert crashed.read_bytes() == clean.read_bytes()
    assert journal_path(crashed).read_text() == journal_path(clean).read_text()


def test_resume_drops_a_cut_journal_line(tmp_path):
    clean, crashed = tmp_path / "clean.csv", tmp_path / "crashed.csv"
    write_runs(clean, [0, 1])
    write_runs(crashed, [0, 1, 2])
    journal = journal_path(crashed)
    lines = journal.read_text().splitlines()
    journal.write_text("\n".join(lines[:2]) + "\n" + lines[2][:3])  # crash while journaling run 2
    with Recorder(crashed, "a") as rec:
        assert rec.completed_runs == {0, 1}
    assert crashed.read_bytes() == clean.read_bytes()
    assert journal.read_text() == journal_path(clean).read_text()


def test_resume_without_a_journal_keeps_complete_lines_and_rebuilds_the_journal(tmp_path):
    clean, foreign = tmp_path / "clean.csv", tmp_path / "foreign.csv"
    with Recorder(clean) as rec:
        for run, step in [(0, 0), (0, 1), (5, 0), (2, 0)]:
            rec.record(run, step, "llvm-cpu", "gaussian", 3, 4, 2, manifest(), outputs(run + step))
    foreign.write_bytes(clean.read_bytes() + b"9,0,llvm")
    with Recorder(foreign, "a") as rec:
        assert rec.completed_runs == {0, 5, 2}
        assert rec.completed_steps == {(0, 0), (0, 1), (5, 0), (2, 0)}
    assert foreign.read_bytes() == clean.read_bytes()
    assert journal_path(foreign).read_text() == journal_path(clean).read_text()


def test_resume_refuses_a_ragged_file_without_journal(tmp_path):
    path = tmp_path / "a.csv"
    path.write_text(HEADER_TEXT + "0,0,cpu,gaussian,1,1,1,1,s,out,v,0,1.0\n0,0,cpu,gaussian,1,1\n")
    with pytest.raises(OpscopeError, match=r"a\.csv:3: expected 13 fields"):
        Recorder(path, "a")


def test_resume_refuses_a_journal_past_the_end_of_the_file(tmp_path):
    path = tmp_path / "a.csv"
    write_runs(path, [0, 1])
    path.write_bytes(path.read_bytes()[:-40])
    with pytest.raises(OpscopeError, match=r"a\.csv\.runs: runs end at byte \d+ but .* has only"):
        Recorder(path, "a")
    journal_path(path).write_text("0,0,100\nzero,0,200\n")
    with pytest.raises(OpscopeError, match=r"a\.csv\.runs:2: expected 'run_id,step,byte_offset_end'"):
        Recorder(path, "a")


def test_write_mode_removes_a_stale_journal(tmp_path):
    path = tmp_path / "a.csv"
    write_runs(path, [0, 1])
    with Recorder(path, "w") as rec:
        assert rec.completed_runs == set()
    assert path.read_text() == HEADER_TEXT and journal_path(path).read_text() == ""


# -- site costs ----------------------------------------------------------------------------
def test_site_costs_follow_manifest_order_or_sorted_names(tmp_path):
    write_site_costs(tmp_path / "m.sites", manifest())
    assert (tmp_path / "m.sites").read_text() == "site,flops\nenc_q,48\ndec,80\n"
    assert read_site_costs(tmp_path / "m.sites") == {"enc_q": 48, "dec": 80}
    write_site_costs(tmp_path / "d.sites", {"zeta": 3, "alpha": 10**15, "mid,x": 0})
    assert (tmp_path / "d.sites").read_text() == "site,flops\nalpha,1000000000000000\nmid_x,0\nzeta,3\n"
    assert list(read_site_costs(tmp_path / "d.sites")) == ["alpha", "mid_x", "zeta"]
    (tmp_path / "r.sites").write_text("site,flops\nb,2\na,1\nb,5\n")
    assert read_site_costs(tmp_path / "r.sites") == {"b": 2, "a": 1}  # first wins, file order kept


@pytest.mark.parametrize(
    "text,error",
    [
        ("", r"x\.sites:1: header '\(empty file\)' is not 'site,flops'"),
        ("site,cost\na,1\n", r"x\.sites:1: header 'site,cost' is not 'site,flops'"),
        ("site,flops\na,1\nb,lots\n", r"x\.sites:3: expected 'site,flops' .*'b,lots'"),
        ("site,flops\na,-4\n", r"x\.sites:2: expected 'site,flops'"),
        ("site,flops\nnocomma\n", r"x\.sites:2: expected 'site,flops'"),
    ],
)
def test_bad_site_costs_name_file_and_line(tmp_path, text, error):
    (tmp_path / "x.sites").write_text(text)
    with pytest.raises(OpscopeError, match=error):
        read_site_costs(tmp_path / "x.sites")


def test_missing_site_costs_and_bad_flops(tmp_path):
    with pytest.raises(OpscopeError, match="no such site-costs file"):
        read_site_costs(tmp_path / "nope.sites")
    with pytest.raises(OpscopeError, match="flops of site 'a' must be a non-negative integer"):
        write_site_costs(tmp_path / "x.sites", {"a": 1.5})


# -- Parquet ----------------------------------------------------------------------------------
def test_parquet_round_trip_keeps_rows_types_and_bits(tmp_path):
    csv_path, pq_path = tmp_path / "a.csv", tmp_path / "a.parquet"
    write_runs(csv_path, [0, 1, 2])
    with Recorder(csv_path, "a") as rec:
        rec.record_values(3, 0, "llvm-cpu", "outlier", 1, 1, 1, {("s", "out", "v"): SPECIAL}, {("s", "out"): 1})
    write_parquet(csv_path, pq_path)
    table = pl.read_parquet(pq_path)
    assert table.schema == pl.Schema(SCHEMA)
    assert list(table.columns) == list(HEADER)
    rows = read_rows(csv_path)[1:]
    assert table.height == len(rows) == 27 + SPECIAL.size
    for i, col in enumerate(HEADER[:-1]):
        assert [str(v) for v in table[col].to_list()] == [r[i] for r in rows], col
    assert same_f32(table["value"].to_numpy(), np.array([float(r[12]) for r in rows]).astype(np.float32))


def test_parquet_is_zstd_with_unsigned_ints(tmp_path):
    pq = pytest.importorskip("pyarrow.parquet", reason="pyarrow reads the file's own metadata")
    write_runs(tmp_path / "a.csv", [0])
    write_parquet(tmp_path / "a.csv", tmp_path / "a.parquet")
    meta = pq.ParquetFile(tmp_path / "a.parquet")
    schema = meta.schema_arrow
    assert [f.name for f in schema] == list(HEADER)
    assert {str(schema.field(c).type) for c in ("run_id", "step", "M", "K", "N", "numel", "idx")} == {"uint64"}
    assert str(schema.field("value").type) == "float"
    codecs = {meta.metadata.row_group(0).column(i).compression for i in range(len(HEADER))}
    assert codecs == {"ZSTD"}


def test_parquet_of_an_empty_recording_has_the_schema(tmp_path):
    Recorder(tmp_path / "a.csv").close()
    write_parquet(tmp_path / "a.csv", tmp_path / "a.parquet")
    table = pl.read_parquet(tmp_path / "a.parquet")
    assert table.height == 0 and table.schema == pl.Schema(SCHEMA)


def test_parquet_refuses_missing_or_foreign_csv(tmp_path):
    with pytest.raises(OpscopeError, match="no such recording"):
        write_parquet(tmp_path / "nope.csv", tmp_path / "a.parquet")
    (tmp_path / "f.csv").write_text("a,b\n1,2\n")
    with pytest.raises(OpscopeError, match="is not the opscope tidy header"):
        write_parquet(tmp_path / "f.csv", tmp_path / "a.parquet")
    (tmp_path / "g.csv").write_text(HEADER_TEXT + "0,0,cpu,gaussian,1,1,1,1,s,out,v,zero,1.0\n")
    with pytest.raises(OpscopeError, match=r"g\.csv: cannot convert to Parquet"):
        write_parquet(tmp_path / "g.csv", tmp_path / "a.parquet")
    assert sorted(os.listdir(tmp_path)) == ["f.csv", "g.csv"]  # no partial Parquet file left behind
