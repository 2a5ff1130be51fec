"""Tables as lines of text: columns aligned for a terminal, or GitHub-flavoured Markdown."""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence

GAP = "  "  # between two columns


def table(
    head: Sequence[str],
    rows: Sequence[Sequence[str]],
    right: Collection[int] | Callable[[int], bool] = (),
    rule: bool = False,
) -> list[str]:
    """`head` and `rows` as aligned lines: each column as wide as its widest cell, the columns
    `right` names (indices, or a predicate on the index) right-aligned, the others left-aligned,
    two spaces between columns, no trailing spaces; with `rule`, a line of dashes under `head`."""
    is_right = right if callable(right) else (lambda i: i in right)
    widths = [max([len(h), *(len(r[i]) for r in rows)]) for i, h in enumerate(head)]

    def line(cells: Sequence[str]) -> str:
        return GAP.join(
            c.rjust(w) if is_right(i) else c.ljust(w) for i, (c, w) in enumerate(zip(cells, widths))
        ).rstrip()

    return [line(head), *([line(["-" * w for w in widths])] if rule else []), *(line(r) for r in rows)]


def markdown_table(head: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    """`head` and `rows` as a Markdown table, `|` in a cell escaped."""
    esc = [[c.replace("|", "\\|") for c in r] for r in [head, *rows]]
    return ["| " + " | ".join(esc[0]) + " |", "|" + "---|" * len(head), *("| " + " | ".join(r) + " |" for r in esc[1:])]
