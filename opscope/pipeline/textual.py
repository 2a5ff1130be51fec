"""Textual pipelines that mix opscope passes with any MLIR/IREE pass, and the pass adapter.

Grammar (a subset of MLIR's, parsed here because `PassManager.parse` cannot see Python
passes):

    pipeline := element (',' element)*
    element  := name ('{' options '}')? | name '(' pipeline ')'
    options  := option (' ' | ',')? ...      option := key ('=' value)?

An element whose name is a registered opscope pass becomes that pass object; every other
element (`canonicalize`, `cse`, `func.func(cse)`, `iree-...`) goes verbatim to
`PassManager.add`, so both kinds interleave in one run.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, fields
from typing import Any

from iree.compiler import ir, passmanager

from opscope.errors import OpscopeError
from opscope.passes import PASSES, get_pass_class


def split_top_level(text: str, sep: str = ",") -> list[str]:
    """Split on `sep` outside (), {} and quotes."""
    parts, depth, cur, quote = [], 0, [], None
    for ch in text:
        if quote:
            cur.append(ch)
            if ch == quote:
                quote = None
            continue
        if ch in "\"'":
            quote = ch
        elif ch in "({[":
            depth += 1
        elif ch in ")}]":
            depth -= 1
        if ch == sep and depth == 0:
            parts.append("".join(cur).strip())
            cur = []
        else:
            cur.append(ch)
    if quote or depth:
        raise OpscopeError(f"unbalanced brackets or quotes in pipeline '{text}'")
    tail = "".join(cur).strip()
    if tail:
        parts.append(tail)
    return [p for p in parts if p]


def _parse_options(pass_name: str, cls: type, text: str) -> dict[str, Any]:
    valid = {f.name.replace("_", "-"): f for f in fields(cls) if f.init and not f.metadata.get("api_only")}
    opts: dict[str, Any] = {}
    items: list[str] = []
    for chunk in split_top_level(text, ","):
        items += [c for c in split_top_level(chunk, " ")]
    for item in items:
        key, _, raw = item.partition("=")
        key = key.strip()
        f = valid.get(key) or valid.get(key.replace("_", "-"))
        if f is None:
            choices = ", ".join(sorted(valid)) or "none"
            raise OpscopeError(f"{pass_name}: unknown option '{key}' (valid options: {choices})")
        opts[f.name] = _convert(pass_name, key, f, raw.strip() if "=" in item else "true")
    return opts


def _convert(pass_name: str, key: str, f: dataclasses.Field, raw: str) -> Any:
    ty = (
        f.type
        if not isinstance(f.type, str)
        else {"int": int, "float": float, "bool": bool, "str": str}.get(f.type, str)
    )
    if raw.startswith(("'", '"')) and raw.endswith(raw[0]) and len(raw) >= 2:
        raw = raw[1:-1]
    try:
        if ty is bool:
            low = raw.lower()
            if low not in ("true", "false", "1", "0"):
                raise ValueError(raw)
            return low in ("true", "1")
        if ty is int:
            return int(raw)
        if ty is float:
            return float(raw)
        return raw
    except ValueError:
        raise OpscopeError(f"{pass_name}: option '{key}' expects {getattr(ty, '__name__', ty)}, got '{raw}'") from None


def format_option(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str) and (not value or any(c in value for c in " ,{}()[]'\"")):
        quote = "'" if '"' in value and "'" not in value else '"'
        return quote + value + quote
    return str(value)


def pass_to_text(p: Any) -> str:
    """The pipeline text of an opscope pass object (only options that differ from defaults)."""
    parts = []
    for f in fields(p):
        if not f.init or f.metadata.get("api_only"):
            continue
        v = getattr(p, f.name)
        if f.default is not dataclasses.MISSING and v == f.default:
            continue
        parts.append(f"{f.name.replace('_', '-')}={format_option(v)}")
    return p.name + ("{" + " ".join(parts) + "}" if parts else "")


@dataclass(frozen=True)
class Pipeline:
    """A parsed pipeline: opscope pass objects and verbatim MLIR pass texts, in order."""

    elements: tuple[Any, ...]

    def __str__(self) -> str:
        return ",".join(e if isinstance(e, str) else pass_to_text(e) for e in self.elements)


def parse_pipeline(text: str) -> Pipeline:
    """Parse a pipeline string; opscope elements become pass objects."""
    text = text.strip()
    if text.startswith("builtin.module(") and text.endswith(")"):
        text = text[len("builtin.module(") : -1]
    elements: list[Any] = []
    for element in split_top_level(text, ","):
        name = element.split("{", 1)[0].split("(", 1)[0].strip()
        if name in PASSES:
            cls = get_pass_class(name)
            opts_text = ""
            if "{" in element:
                if not element.endswith("}"):
                    raise OpscopeError(f"{name}: malformed options in '{element}'")
                opts_text = element[element.index("{") + 1 : -1]
            elements.append(cls(**_parse_options(name, cls, opts_text)))
        else:
            elements.append(element)
    return Pipeline(tuple(elements))


class _Adapter:
    """Runs one Python pass inside a PassManager; traps its exception for re-raising."""

    def __init__(self, pass_obj: Any):
        self.pass_obj = pass_obj
        self.error: BaseException | None = None

    def __call__(self, op, pass_) -> None:
        try:
            module = op if isinstance(op, ir.Module) else _as_module(op)
            self.pass_obj.apply(module)
        except BaseException as e:  # re-raised by run_pipeline after the pass manager returns
            self.error = e
            pass_.signal_pass_failure()


def _as_module(op) -> Any:
    """Python passes take the module op; passes call `.operation`/`.body` on it."""
    return ModuleView(op.operation if hasattr(op, "operation") else op)


@dataclass(frozen=True)
class ModuleView:
    """A module-like wrapper over a `builtin.module` operation."""

    operation: ir.Operation

    @property
    def body(self) -> ir.Block:
        return self.operation.regions[0].blocks[0]

    @property
    def context(self) -> ir.Context:
        return self.operation.context


def add_to_pass_manager(pm: passmanager.PassManager, element: Any) -> _Adapter | None:
    """Add one pipeline element to `pm`; returns the adapter of a Python pass."""
    if isinstance(element, str):
        try:
            pm.add(element)
        except ValueError as e:
            first = str(e).strip().splitlines()[0] if str(e).strip() else element
            raise OpscopeError(f"unknown pass or bad pipeline element '{element}': {first}") from None
        return None
    adapter = _Adapter(element)
    pm.add(
        adapter,
        name=type(element).__name__,
        argument=element.name,
        description=(type(element).__doc__ or "").strip().splitlines()[0],
    )
    return adapter


def run_pipeline(
    module: ir.Module,
    pipeline: Pipeline | str,
    print_ir_after_all: bool = False,
    verify_each: bool = True,
) -> None:
    """Run `pipeline` on `module` in place; raises the first pass's own error."""
    if isinstance(pipeline, str):
        pipeline = parse_pipeline(pipeline)
    with module.context:
        pm = passmanager.PassManager("builtin.module")
        pm.enable_verifier(verify_each)
        if print_ir_after_all:
            pm.enable_ir_printing(print_after_all=True)
        adapters = [a for a in (add_to_pass_manager(pm, e) for e in pipeline.elements) if a]
        errors: list[str] = []
        handler = module.context.attach_diagnostic_handler(
            lambda d: errors.append(f"{d.location}: {d.message}") or True
        )
        try:
            pm.run(module.operation)
        except Exception as e:  # MLIRError from pass failures or verifier errors
            for a in adapters:
                if a.error is not None:
                    raise a.error from None
            detail = errors[0] if errors else str(e).strip().splitlines()[0]
            raise OpscopeError(f"pipeline '{pipeline}' failed: {detail}") from None
        finally:
            handler.detach()
        for a in adapters:
            if a.error is not None:
                raise a.error
