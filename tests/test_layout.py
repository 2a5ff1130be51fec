"""The rooms of `opscope/` and the direction of imports between them (docs/layout.md).

Reads the "may import" table of docs/layout.md and every import statement of every module
(`ast`, so lazy imports inside functions count and nothing is executed; imports under
`if TYPE_CHECKING:` do not, they never run), then checks that each import stays in its
room or goes to a room the table allows, that no module sits outside a room, and that
no modules import each other in a cycle.
"""

from __future__ import annotations

import ast
import functools
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
# Source folders and the package each is installed as (setup.py's MOUNTED; tests/test_packaging.py builds the wheel).
SOURCES = {"opscope": REPO / "opscope", "opscope.dialect": REPO / "dialect", "opscope.passes": REPO / "passes"}
TOP_LEVEL = {"opscope": "api", "opscope.__main__": "cli", "opscope.errors": "errors"}


@functools.cache
def modules() -> dict[str, Path]:
    """Every module's dotted name -> its file."""
    found = {}
    for package, folder in SOURCES.items():
        for path in sorted(folder.rglob("*.py")):
            parts = path.relative_to(folder).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            found[".".join((package, *parts))] = path
    return found


def room(module: str) -> str:
    """The room a module belongs to."""
    if module in TOP_LEVEL:
        return TOP_LEVEL[module]
    return module.split(".")[1]


@functools.cache
def allowed_imports() -> dict[str, set[str]]:
    """The "may import" table of docs/layout.md: room -> rooms."""
    text = (REPO / "docs" / "layout.md").read_text()
    section = text.split("| room | may import |", 1)[1].split("\n\n", 1)[0]
    table = {}
    for line in section.strip().splitlines()[1:]:
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        table[cells[0]] = {r.strip() for r in cells[1].split(",") if r.strip()} if len(cells) > 1 else set()
    return table


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def imported_modules(path: Path, known: dict[str, Path], type_checking: bool = False) -> set[str]:
    """The opscope modules `path` imports at run time, and with `type_checking` also under
    `if TYPE_CHECKING:` (a `from package import name` of a submodule counts as that submodule)."""
    out: set[str] = set()

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and _is_type_checking(node) and not type_checking:
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names if a.name.split(".")[0] == "opscope")
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").split(".")[0] == "opscope":
            for alias in node.names:
                sub = f"{node.module}.{alias.name}"
                out.add(sub if sub in known else node.module)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(ast.parse(path.read_text(), str(path)))
    return out


@functools.cache
def import_graph(type_checking: bool = False) -> dict[str, set[str]]:
    known = modules()
    return {name: imported_modules(path, known, type_checking) - {name} for name, path in known.items()}


def test_the_table_names_every_room_and_only_rooms():
    table = allowed_imports()
    rooms = {room(m) for m in modules()}
    assert rooms == set(table), f"rooms without a row: {rooms - set(table)}; rows without a room: {set(table) - rooms}"
    for name, targets in table.items():
        assert targets <= set(table), f"{name} may import unknown rooms {targets - set(table)}"
        assert name not in targets


def test_no_module_outside_a_room():
    top = sorted(p.name for p in (REPO / "opscope").glob("*.py"))
    assert top == ["__init__.py", "__main__.py", "errors.py"]


@pytest.mark.parametrize("module", sorted(modules()))
def test_imports_only_from_earlier_stages(module):
    table = allowed_imports()
    mine = room(module)
    bad = sorted(
        f"{target} ({room(target)})"
        for target in import_graph()[module]
        if room(target) != mine and room(target) not in table[mine]
    )
    assert not bad, f"{module} ({mine}) imports {', '.join(bad)}; docs/layout.md allows {sorted(table[mine])}"


def test_every_import_names_an_existing_module():
    known = modules()
    for module, targets in import_graph().items():
        missing = sorted(t for t in targets if t not in known)
        assert not missing, f"{module} imports {missing}, which do not exist"


@pytest.mark.parametrize("type_checking", [False, True], ids=["run-time", "with-type-only"])
def test_no_import_cycles(type_checking):
    """No module reaches itself through imports (Tarjan's strongly connected components), not
    even through the imports only a type checker follows: a renderer names its report, a
    report never names its renderer."""
    graph = import_graph(type_checking)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    cycles: list[list[str]] = []

    def connect(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph.get(v, ()):
            if w not in graph:
                continue
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            connect(v)
    assert not cycles, f"import cycles: {cycles}"


def test_the_checker_sees_lazy_imports_and_skips_type_checking(tmp_path):
    """The graph counts an import inside a function and ignores one under TYPE_CHECKING."""
    src = tmp_path / "m.py"
    src.write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from opscope.drive.profile import x\n"
        "def f():\n    from opscope.mining.report import mine\n    import opscope.ir.sites\n"
        "from opscope.models import demo\n"
    )
    assert imported_modules(src, modules()) == {"opscope.mining.report", "opscope.ir.sites", "opscope.models.demo"}


def test_the_api_is_light_to_import():
    """`import opscope` loads no stage: the API imports them on first use."""
    import subprocess
    import sys

    code = "import sys, opscope; print(sorted(m for m in sys.modules if m.startswith(('opscope.', 'iree', 'polars'))))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "['opscope.errors']"


def test_module_docstrings_name_what_they_hold():
    """Every module and room says what it holds in its first line."""
    for name, path in modules().items():
        doc = ast.get_docstring(ast.parse(path.read_text()))
        assert doc and re.match(r"\S", doc), f"{name} has no docstring"


def test_every_subcommand_calls_documented_api_functions():
    """The CLI only parses: each subcommand's handler calls functions of the API (`opscope.X`), and
    each of them is documented in docs/api.md's table."""
    import argparse
    import inspect

    import opscope
    from opscope.cli import build_parser

    api = {n for n in opscope.__all__ if callable(getattr(opscope, n)) and n[0].islower()}
    documented = (REPO / "docs" / "api.md").read_text()
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    for name, parser in sub.choices.items():
        source = inspect.getsource(parser.get_default("fn"))
        called = {f for f in api - {"render"} if re.search(rf"(?<![\w.])(opscope\.)?{f}\(", source)}
        assert called, f"opscope {name} calls no API function"
        missing = sorted(f for f in called if f"`opscope.{f}(" not in documented)
        assert not missing, f"opscope {name} calls {missing}, which docs/api.md does not list"
