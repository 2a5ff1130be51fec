"""`opscope.render(report, fmt)`: the one way every report is written (issue 32). Every report
type has a text renderer that exists, json is its `to_dict()` unless it names its own,
markdown without a renderer of its own is the text in a code block, and bad input is one
line. Cheap reports only: static analyses of a small demo and a numpy parity report."""

from __future__ import annotations

import importlib
import inspect
import json

import numpy as np
import pytest

import opscope
from opscope.act.op_compare import compare, parity_text
from opscope.analysis.cost import analyze
from opscope.analysis.ledger import ledger_dict, ledger_text
from opscope.analysis.motifs import linear_motifs
from opscope.analysis.shapes import shape_histogram, shapes_text
from opscope.ir.loading import new_context, parse_module
from opscope.models.demo import transformer_module


@pytest.fixture(scope="module")
def module():
    return parse_module(transformer_module(2, 32, 8), new_context())


@pytest.mark.parametrize("kind", sorted(opscope._RENDERERS))
def test_every_report_type_has_renderers_that_exist(kind):
    renderers = opscope._RENDERERS[kind]
    assert "text" in renderers
    for fmt, named in renderers.items():
        assert fmt in opscope.FORMATS
        module, function = named.split(":")
        fn = getattr(importlib.import_module(module), function)
        assert next(iter(inspect.signature(fn).parameters)) != "self"


def test_every_report_the_api_names_renders():
    reports = {n for n in opscope.__all__ if n.endswith(("Report", "Plan", "Run"))}
    assert reports <= set(opscope._RENDERERS), reports - set(opscope._RENDERERS)


def test_text_and_json_are_the_renderers_and_options_reach_them(module):
    cost = analyze(module)
    assert opscope.render(cost, top=3, ridge=4.0) == ledger_text(cost, 3, 4.0)
    assert json.loads(opscope.render(cost, "json", top=3, ridge=4.0)) == json.loads(json.dumps(ledger_dict(cost, 4.0)))
    hist = shape_histogram(module)
    assert opscope.render(hist, top=2) == shapes_text(hist, 2)
    assert json.loads(opscope.render(hist, "json", top=2)) == json.loads(json.dumps(hist.to_dict()))


def test_markdown_falls_back_to_the_text_in_a_code_block(module):
    motifs = linear_motifs(module)
    text = opscope.render(motifs, top=3)
    assert opscope.render(motifs, "markdown", top=3) == "```\n" + text.rstrip("\n") + "\n```\n"


def test_parity_renders_in_every_format():
    a, b = {"x#0": np.ones(4, np.float32)}, {"x#0": np.array([1, 1, 1, 2], np.float32)}
    report = compare(a, b, tol=1e-3)
    assert opscope.render(report, all_ops=True) == parity_text(report, all_ops=True)
    assert opscope.render(report, "markdown").splitlines()[3].startswith("| # | op name |")
    assert json.loads(opscope.render(report, "json"))["first_beyond"] == "x#0"


def test_bad_input_is_one_line(module):
    with pytest.raises(opscope.OpscopeError, match=r"^render: dict is not a report \(reports: ActionsReport, "):
        opscope.render({})
    with pytest.raises(
        opscope.OpscopeError, match=r"^render: unknown format 'pdf' \(choose one of: text, markdown, json, html\)$"
    ):
        opscope.render(analyze(module), "pdf")


def test_the_site_list_and_the_target_table_render_as_reports(module):
    """`opscope sites` and `opscope targets` print these: a table of sites (the module's own, FLOPs
    as 2·batch·M·K·N) and one line a target; JSON holds the same numbers."""
    sites = opscope.sites(module)
    lines = opscope.render(sites).splitlines()
    assert lines[0].split() == ["site", "kind", "batch", "M", "K", "N", "FLOPs"]
    assert [line.split()[0] for line in lines[1:]] == [s.name for s in sites]
    first = lines[1].split()
    assert int(first[-1].replace(",", "")) == 2 * sites[0].batch * sites[0].m * sites[0].k * sites[0].n
    doc = json.loads(opscope.render(sites, "json"))
    assert doc["source"] == "" and [s["flops"] for s in doc["sites"]] == [s.flops for s in sites]
    assert opscope.render(opscope.SiteList(source="m.mlir")) == "m.mlir: no matmul sites\n"
    table = opscope.targets()
    text = opscope.render(table).splitlines()
    assert [line.split()[0] for line in text] == [t.name for t, _ in table]
    assert text[0].split()[1:3] == ["runs", "here"]  # llvm-cpu runs on every machine
    runs = {t["name"]: t["runs"] for t in json.loads(opscope.render(table, "json"))["targets"]}
    assert runs == {t.name: why is None for t, why in table}
