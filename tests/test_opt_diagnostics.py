"""`opscope-opt --verify-diagnostics`: where an expectation points and where an error is.

The driver's end-to-end behaviour (failing on a missing, unexpected, misplaced or
mistyped error) is pinned by lit_tests/tools/verify-diagnostics*.mlir; these pin the two
rules underneath on plain text, without running a pipeline.
"""

from __future__ import annotations

from opscope.pipeline.opt import _error_line, _expected

NAME = "in.mlir"


def test_below_and_above_skip_lines_holding_directives():
    text = "\n".join(
        [
            "// expected-error @below {{a}}",  # 1 -> 3: line 2 holds a directive too
            "// expected-error @below {{b}}",  # 2 -> 3
            "op",  # 3
            "// expected-error @above {{c}}",  # 4 -> 3
            "// expected-error @above {{d}}",  # 5 -> 3: line 4 holds a directive
            "op // expected-error {{e}}",  # 6 -> 6
            "// expected-error @-2 {{f}}",  # 7 -> 5: plain offsets count every line
            "// expected-error @unknown {{g}}",  # 8 -> no line
        ]
    )
    expected, problems = _expected(text, NAME)
    assert problems == []
    assert [(e.at, e.line, e.text) for e in expected] == [
        (1, 3, "a"),
        (2, 3, "b"),
        (4, 3, "c"),
        (5, 3, "d"),
        (6, 6, "e"),
        (7, 5, "f"),
        (8, None, "g"),
    ]


def test_only_a_comment_starting_with_expected_is_a_directive():
    text = "// CHECK: // expected-error {{x}}\n// An expected-error {{y}} in prose\n"
    assert _expected(text, NAME) == ([], [])


def test_an_expectation_past_the_input_is_a_problem():
    expected, problems = _expected("// expected-error @below {{a}}\n// expected-error @-5 {{b}}", NAME)
    assert expected == []
    assert problems == [
        "in.mlir:1: error: expected-error @below designates no line of the input",
        "in.mlir:2: error: expected-error @-5 designates no line of the input",
    ]


TEXT = "\n".join(
    [
        "func.func @f() {",  # 1
        '  op loc("a")',  # 2
        '  op loc("twice")',  # 3
        '  op loc("twice")',  # 4
        '  op loc(#l) // loc("a") too',  # 5: a comment is not a location
        "}",  # 6
        '#l = loc("aliased")',  # 7
        '  op loc("l0"("model.py":3:0))',  # 8: a name around another file's location
        "  op loc(unknown)",  # 9
    ]
)


def test_an_error_is_at_the_first_location_its_message_names():
    symbols = {"f": 1, "g": None}

    def line(message: str) -> int | None:
        return _error_line(message, NAME, TEXT, symbols)

    assert line('p: site at loc("in.mlir":4:3), see @f') == 4
    assert line("malformed MLIR at in.mlir:5:7: expected ')'") == 5
    assert line("p: site 'a' at loc(\"a\"): refused") == 2
    assert line('p: site at loc("aliased")') == 5
    assert line("p: @f must have a single block") == 1
    assert line('p: site \'l0\' at loc("l0"("model.py":3:0))') == 8
    assert line('p: @f reads loc("a")') == 1
    # Locations that map to no one line of the input: no line, so only @unknown matches.
    assert line('p: site at loc("twice")') is None
    assert line('p: site at loc("nowhere")') is None
    assert line('p: site at loc("other.mlir":4:3)') is None
    assert line("p: site at /elsewhere/in.mlir:4:3") is None
    assert line("p: site at loc(unknown)") is None  # even where the input writes one
    assert line("p: @g is defined twice") is None
    assert line("p: @h is not defined here") is None
    assert line("p: no matmul site in this module") is None
