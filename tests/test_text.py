"""The text toolkit (opscope/text): one way to write each kind of number, tables aligned the
way every report aligns them. Pure Python, no compiler."""

from __future__ import annotations

from opscope.text.numbers import count, exact, flops, nbytes, num, percent, seconds, share
from opscope.text.table import markdown_table, table


def test_counts_bytes_and_flops_in_the_reference_format():
    assert [count(x) for x in (0, 999, 1500, 6_820_000, 2_000_000, 3e12, 4e15)] == [
        "0",
        "999",
        "1.50 K",
        "6.82 M",
        "2.00 M",
        "3.00 T",
        "4000.00 T",
    ]
    assert [nbytes(x) for x in (512, 1023, 1024, 1536, 1024**3 * 2.5)] == [
        "512 B",
        "1023 B",
        "1.00 KB",
        "1.50 KB",
        "2.50 GB",
    ]
    assert flops(606_208) == "606.21 K FLOPs" and flops(512) == "512 FLOPs"
    assert exact(1_234_567) == "1,234,567" and exact(None) == "-"


def test_percentages_and_unknowns():
    assert percent(0.995) == "99.5%" and percent(0.5, digits=0) == "50%" and percent(None) == "-"
    assert percent(0.123, sign=True) == "+12.3%" and percent(-0.004, sign=True) == "-0.4%"
    assert share(1, 4) == "25.0%" and share(3, 0) == "0.0%"
    assert [num(x, ".2f") for x in (1.234, None, float("inf"), float("-inf"), float("nan"))] == [
        "1.23",
        "-",
        "inf",
        "-inf",
        "nan",
    ]
    assert [seconds(s) for s in (0.000850, 0.0123, 4.71)] == ["850 µs", "12.3 ms", "4.7 s"]


def test_table_aligns_columns_and_strips_trailing_space():
    rows = [["a", "1", "x"], ["long name", "22", ""]]
    assert table(["site", "n", "note"], rows, right={1}) == ["site        n  note", "a           1  x", "long name  22"]
    assert table(["site", "n"], [["a", "1"]], right=lambda i: i > 0, rule=True) == ["site  n", "----  -", "a     1"]
    assert table(["only", "head"], []) == ["only  head"]


def test_markdown_table_escapes_pipes_in_every_cell():
    assert markdown_table(["max|Δ|", "b"], [["1|2", "3"]]) == ["| max\\|Δ\\| | b |", "|---|---|", "| 1\\|2 | 3 |"]
