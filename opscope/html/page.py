"""One self-contained HTML page: the style, the script and the data inline, nothing fetched.

A renderer builds the body from `section`, `table` and `chart` and hands the charts' numbers to
`page`, which embeds them as one JSON block; `report.js` draws each chart from that block as SVG
when it first comes into view (a closed `<details>` draws when opened), so a page with hundreds
of sites stays quick to open. The numbers drawn are the report's numbers, rounded to 6
significant digits; nothing is computed in the browser but positions.
"""

from __future__ import annotations

import html
import json
import math
from collections.abc import Sequence
from importlib import resources
from typing import Any

DATA_ID = "opscope-data"
SIGNIFICANT = 6  # digits kept of every number the page embeds


def esc(text: Any) -> str:
    """`text` as HTML text (quotes escaped too, so it also serves as an attribute value)."""
    return html.escape(str(text), quote=True)


def _asset(name: str) -> str:
    return resources.files("opscope.html").joinpath(name).read_text(encoding="utf-8")


def _rounded(value: Any) -> Any:
    """JSON-safe numbers: floats to `SIGNIFICANT` digits, non-finite ones as null."""
    if isinstance(value, float):
        return float(f"{value:.{SIGNIFICANT}g}") if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _rounded(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_rounded(v) for v in value]
    return value


class Charts:
    """The charts of one page: each `add`ed spec gets an id its `<figure>` names."""

    def __init__(self) -> None:
        self.specs: dict[str, dict] = {}

    def add(self, kind: str, title: str = "", **spec: Any) -> str:
        """A figure that `report.js` draws as `kind` (bars, line, heatmap, scatter) from `spec`."""
        cid = f"c{len(self.specs)}"
        self.specs[cid] = _rounded({"kind": kind, **spec})
        caption = f"<figcaption>{esc(title)}</figcaption>" if title else ""
        return f'<figure class="chart" data-chart="{cid}">{caption}</figure>'


def section(title: str, body: str, anchor: str = "", level: int = 2, open_: bool = True) -> str:
    """A titled section; below level 2 a `<details>` that opens on a click (closed unless `open_`)."""
    ident = f' id="{esc(anchor)}"' if anchor else ""
    if level <= 2:
        return f"<section{ident}><h2>{esc(title)}</h2>\n{body}\n</section>"
    return f"<details{ident}{' open' if open_ else ''}><summary>{esc(title)}</summary>\n{body}\n</details>"


def table(
    head: Sequence[str],
    rows: Sequence[Sequence[Any]],
    numeric: Sequence[str] = (),
    links: Sequence[str | None] | None = None,
    filter_: bool = True,
    caption: str = "",
) -> str:
    """A table that sorts on a header click (columns in `numeric` by value) and, with `filter_`,
    filters on any text of a row; `links[i]` makes row i's first cell a link to that anchor."""
    nums = set(numeric)
    ths = "".join(f"<th{' data-num' if h in nums else ''}>{esc(h)}</th>" for h in head)
    body = []
    for i, row in enumerate(rows):
        cells = []
        for j, cell in enumerate(row):
            text = esc(cell)
            if j == 0 and links and links[i]:
                text = f'<a href="#{esc(links[i])}">{text}</a>'
            cells.append(f"<td{' class=num' if head[j] in nums else ''}>{text}</td>")
        body.append("<tr>" + "".join(cells) + "</tr>")
    box = (
        f'<p class="filter"><input type="search" placeholder="filter {len(rows)} rows" aria-label="filter">'
        f' <span class="shown">{len(rows)} of {len(rows)}</span></p>'
        if filter_
        else ""
    )
    cap = f"<caption>{esc(caption)}</caption>" if caption else ""
    return (
        f'<div class="table">{box}<table class="sortable">{cap}<thead><tr>{ths}</tr></thead>'
        f"<tbody>{''.join(body)}</tbody></table></div>"
    )


def preformatted(text: str) -> str:
    """Text as it prints in a terminal (the reports without an HTML renderer of their own)."""
    return f"<pre>{esc(text)}</pre>"


def page(title: str, body: str, charts: Charts | None = None, notes: Sequence[str] = ()) -> str:
    """The whole document: `body` under a title, the notes first, the charts' data and the script inline."""
    data = json.dumps({"charts": charts.specs if charts else {}}, separators=(",", ":"), allow_nan=False)
    data = data.replace("</", "<\\/")  # a site name cannot end the script block
    noted = "".join(f'<p class="note">{esc(n)}</p>' for n in notes)
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{esc(title)}</title><style>{_asset('report.css')}</style></head>\n"
        f"<body><header><h1>{esc(title)}</h1></header>\n{noted}\n{body}\n"
        f'<script type="application/json" id="{DATA_ID}">{data}</script>\n'
        f"<script>{_asset('report.js')}</script>\n</body></html>\n"
    )
