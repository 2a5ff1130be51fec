"""One IR context for opscope and loading modules from text, bytecode or files.

Parse errors become one-line `OpscopeError`s that name the file, line and column.
"""

from __future__ import annotations

import io
from pathlib import Path

from iree.compiler import ir

from opscope.errors import OpscopeError


def new_context() -> ir.Context:
    """A context with every IREE dialect, that also admits opscope's generic ops."""
    ctx = ir.Context()
    ctx.allow_unregistered_dialects = True
    return ctx


def parse_module(source: str | bytes, context: ir.Context | None = None, name: str = "<input>") -> ir.Module:
    """Parse MLIR text or bytecode into a module, or raise a one-line error with its location."""
    ctx = context or new_context()
    try:
        if isinstance(source, bytes) and source.startswith(b"ML\xefR"):
            return ir.Module.parse(source, ctx)
        text = source.decode() if isinstance(source, bytes) else source
        return _parse_named(text, ctx, name)
    except ir.MLIRError as e:
        diags = getattr(e, "error_diagnostics", None) or []
        if diags:
            d = diags[0]
            loc = str(d.location)
            loc = loc.replace('loc("-":', f'loc("{name}":') if loc.startswith('loc("-":') else loc
            raise OpscopeError(f"malformed MLIR at {_short_loc(loc, name)}: {d.message}") from None
        raise OpscopeError(f"malformed MLIR in {name}: {str(e).splitlines()[0]}") from None
    except UnicodeDecodeError:
        raise OpscopeError(f"{name} is neither MLIR text nor MLIR bytecode") from None


def _parse_named(text: str, ctx: ir.Context, name: str) -> ir.Module:
    """Parse text so file locations carry `name` (Module.parse would say "-").

    A file holding several top-level ops is wrapped as `module {<text>\n}` on its first
    line, which shifts only the columns of line 1.
    """
    try:
        top = ir.Operation.parse(text, source_name=name, context=ctx)
    except ir.MLIRError as e:
        if "single top-level operation" not in str(e):
            raise
        top = ir.Operation.parse("module {" + text + "\n}", source_name=name, context=ctx)
    with ctx, ir.Location.unknown():
        module = ir.Module.create()
    top = top.operation
    if top.name == "builtin.module":
        attrs = top.attributes  # iterating yields names on IREE 3.13; indexing yields NamedAttributes
        for i in range(len(attrs)):
            module.operation.attributes[attrs[i].name] = attrs[i].attr
        for op in list(top.regions[0].blocks[0].operations):
            op.operation.detach_from_parent()
            module.body.append(op.operation)
        top.erase()
    else:
        module.body.append(top)
    return module


def _short_loc(loc: str, name: str) -> str:
    """'loc("x.mlir":3:7)' -> 'x.mlir:3:7'."""
    if loc.startswith("loc(") and loc.endswith(")"):
        inner = loc[4:-1]
        if inner.startswith('"') and '":' in inner:
            file, _, rest = inner[1:].partition('":')
            return f"{name if file in ('-', '') else file}:{rest}"
        return inner
    return loc


def load_module(path: str | Path, context: ir.Context | None = None) -> ir.Module:
    """Load an .mlir (text) or .mlirbc (bytecode) file; '-' reads standard input."""
    import sys

    if str(path) == "-":
        data = sys.stdin.buffer.read()
        return parse_module(data, context, "<stdin>")
    p = Path(path)
    if not p.exists():
        raise OpscopeError(f"no such file: {p}")
    if p.is_dir():
        raise OpscopeError(f"{p} is a directory, not an MLIR file")
    return parse_module(p.read_bytes(), context, str(p))


def module_text(module: ir.Module, debug_info: bool = False) -> str:
    """Print a module; `debug_info` keeps locations (default printing drops them)."""
    buf = io.StringIO()
    module.operation.print(file=buf, enable_debug_info=debug_info)
    return buf.getvalue()


def module_bytecode(module: ir.Module) -> bytes:
    """The module as MLIR bytecode (keeps locations, unlike default text printing)."""
    buf = io.BytesIO()
    module.operation.write_bytecode(buf)
    return buf.getvalue()
