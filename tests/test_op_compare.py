"""The op-by-op comparison (`opscope.act.op_compare`) on tiny hand-made arrays, no compiler:
counts, errors and the tolerance rule against values computed by hand, the first op beyond
tolerance, NaN and inf, integer exactness, pairing by shape and by op label, the report's
text and JSON; and importing the module loads nothing of IREE."""

from __future__ import annotations

import json
import math
import subprocess
import sys

import numpy as np
import pytest

import opscope
from opscope.act.op_compare import Tensor, compare
from opscope.errors import OpscopeError


def f32(*xs):
    return np.array(xs, dtype=np.float32)


# Three ops in program order; B differs from A in the last two (every value exact in float32).
A = {"l0#0": f32(1, 2, 3, 4), "l1#0": f32(10, -20), "l2#0": f32(0.5, 0.5)}
B = {"l0#0": f32(1, 2, 3, 4), "l1#0": f32(10, -20.5), "l2#0": f32(0.5, 0.75)}


def test_identical_builds_agree_everywhere():
    r = compare(A, {k: v.copy() for k, v in A.items()})
    assert (r.ops_checked, r.identical, r.exact, r.max_abs, r.max_rel) == (3, 3, True, 0.0, 0.0)
    assert r.worst is None and r.first_beyond() is None and r.within(0.0)
    assert (r.only_a, r.only_b) == ((), ())


def test_a_planted_difference_is_the_first_divergence():
    r = compare(A, B)
    assert [d.name for d in r.ops] == ["l0#0", "l1#0", "l2#0"] and [d.index for d in r.ops] == [0, 1, 2]
    l0, l1, l2 = r.ops
    assert l0.identical and l0.err == 0.0
    # l1: |−20 − (−20.5)| = 0.5; max_rel 0.5/|−20| = 0.025; scale max|A| = 20; err 0.5/20 = 0.025
    assert (l1.max_abs, l1.max_rel, l1.scale, l1.err) == (0.5, 0.025, 20.0, 0.025)
    # l2: |0.5 − 0.75| = 0.25; max_rel 0.25/0.5 = 0.5; scale 0.5; err 0.25/0.5 = 0.5
    assert (l2.max_abs, l2.max_rel, l2.scale, l2.err) == (0.25, 0.5, 0.5, 0.5)
    assert (r.ops_checked, r.identical, r.exact, r.max_abs, r.max_rel) == (3, 1, False, 0.5, 0.5)
    assert r.worst is l2
    assert r.first_beyond() is l1  # default tol 1e-3: both beyond, l1 first in program order
    assert r.first_beyond(0.1) is l2  # 0.025 ≤ 0.1 < 0.5
    assert r.first_beyond(0.025) is l2  # the rule is err ≤ tol: l1 sits exactly on it
    assert r.first_beyond(0.5) is None and r.within(0.5)
    assert [d.name for d in r.beyond()] == ["l1#0", "l2#0"]
    assert r.summary() == (
        "3 ops compared, 1 bit-identical; worst: l2#0 max|Δ| 0.25 = 0.5 of max|A|; first beyond tol 0.001: l1#0 (#1)"
    )


def test_the_tolerance_is_relative_to_the_tensors_scale_floored_at_1e_6():
    r = compare({"z#0": f32(0, 0)}, {"z#0": np.array([0, 1e-9], dtype=np.float64)}, tol=1e-3)
    (d,) = r.ops
    assert d.scale == 0.0 and d.err == pytest.approx(1e-9 / 1e-6) and d.within(1e-3)
    assert not d.within(1e-4)


def test_nan_in_the_same_places_agrees_and_facing_a_number_does_not():
    same = compare({"x#0": f32(np.nan, 1, np.inf)}, {"x#0": f32(np.nan, 1, np.inf)}).ops[0]
    assert same.identical and (same.nan, same.special, same.scale) == (1, 0, 1.0)
    apart = compare({"x#0": f32(np.nan, 1, -np.inf)}, {"x#0": f32(0, 1, np.inf)}).ops[0]
    assert (apart.max_abs, apart.err, apart.nan, apart.special) == (math.inf, math.inf, 0, 2)
    assert not apart.within(1e30)


def test_integers_are_compared_exactly():
    d = compare({"i#0": np.array([1, 2], np.int32)}, {"i#0": np.array([1, 3], np.int64)}).ops[0]
    assert d.exact and (d.max_abs, d.max_rel, d.scale, d.err) == (1.0, 0.5, 2.0, math.inf)
    assert not d.within(1e30)


def test_different_shapes_are_not_compared_but_size_1_dims_are():
    r = compare({"x#0": np.zeros((2, 3)), "y#0": np.ones((1, 3))}, {"x#0": np.zeros((3, 2)), "y#0": np.ones(3)})
    assert [d.name for d in r.ops] == ["y#0"] and r.ops[0].shape == (1, 3) and r.ops[0].identical
    assert (r.only_a, r.only_b) == (("x#0",), ("x#0",))


def test_an_inserted_op_does_not_shift_its_neighbours_partners():
    v0, v1 = f32(1, 2), f32(3, 4)
    a = [Tensor("p#0", v0, "mul"), Tensor("p#1", v1, "exp")]
    b = [Tensor("p#0", v0, "mul"), Tensor("p#1", f32(9, 9), "round"), Tensor("p#2", v1, "exp")]
    r = compare(a, b)
    assert [(d.name, d.op, d.b_name, d.identical) for d in r.ops] == [
        ("p#0", "mul", None, True),
        ("p#1", "exp", "p#2", True),
    ]
    assert (r.only_a, r.only_b) == ((), ("p#1",))


def test_the_report_renders_as_text_and_json():
    r = compare(A, B, a_label="ref", b_label="new")
    text = opscope.render(r)
    assert text.splitlines()[:2] == ["A: ref", "B: new"] and text.endswith(r.summary())
    assert [row[1] for row in r.rows()] == ["l1#0", "l2#0"]  # l0 identical: shown only with all_ops
    assert [row[-1] for row in r.rows(all_ops=True)] == ["ok", "BEYOND", "BEYOND"]
    assert "l0#0" not in text and "l0#0" in opscope.render(r, all_ops=True)
    out = json.loads(opscope.render(r, "json"))
    assert (out["ops_checked"], out["identical"], out["first_beyond"], out["worst"]) == (3, 1, "l1#0", "l2#0")
    assert [o["within"] for o in out["ops"]] == [True, False, False] and out["ops"][1]["err"] == 0.025
    nan = json.loads(opscope.render(compare({"x#0": f32(np.nan)}, {"x#0": f32(1)}), "json"))
    assert nan["max_abs"] == "inf" and nan["ops"][0]["err"] == "inf"


def test_a_negative_tolerance_is_refused():
    with pytest.raises(OpscopeError, match="tolerance"):
        compare(A, B, tol=-1)


def test_importing_the_comparison_loads_no_compiler():
    code = (
        "import opscope.act.op_compare, sys; "
        "bad = [m for m in sys.modules if m.startswith(('iree', 'opscope.run', 'opscope.pipeline', 'opscope.passes'))]; "
        "assert not bad, bad"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
