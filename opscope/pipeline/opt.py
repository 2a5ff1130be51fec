"""`opscope-opt`: an mlir-opt-style driver for pipelines mixing opscope and MLIR/IREE passes.

    opscope-opt input.mlir -p 'inject-matmul-stats{hist-bins=0},lower-opscope,canonicalize'

The IR is verified before the pipeline, between passes and after it. Errors print as
one line (`file:line:col: error: ...`); with `--verify-diagnostics` expected errors are
written in the input and checked instead, as MLIR's `-verify-diagnostics` does:

    // expected-error {{text}}           on this line (after an op: `op ... // expected-error ...`)
    // expected-error @+N {{text}}       N lines below (@-N: above)
    // expected-error @below {{text}}    the next line holding no expected-* comment (@above: previous)
    // expected-error @unknown {{text}}  an error that names no line of the input

An expectation matches a produced error on exactly its line whose message contains the
text; every expectation must be produced and every produced error expected, else each
problem prints as one `file:line: error: ...` line and the exit status is 1. An error's
line is that of the first location its message names: a `file:line:col` of the input, a
location without one (`loc("name")`) written verbatim on exactly one line of the input
(the op a pass refused), or the line defining a `@symbol`; an error naming none of these (a module-wide refusal) has no
line and matches only `@unknown`. Only errors are produced, so `expected-warning`,
`-remark` and `-note` are refused rather than ignored.
"""

from __future__ import annotations

import argparse
import logging
import re
import sys
from dataclasses import dataclass

from iree.compiler import ir

from opscope.errors import OpscopeError
from opscope.ir.loading import module_text, new_context, parse_module
from opscope.pipeline.textual import parse_pipeline, run_pipeline

SPLIT_MARKER = re.compile(r"^// -----[ \t]*$", re.M)  # not \s: it would eat newlines
# Matched against a line's comment (after its first `//`), so only a comment that starts
# with `expected-` is a directive; prose and CHECK lines that mention one are not.
DIRECTIVE = re.compile(r"\s*expected-(error|warning|remark|note)\b")
EXPECTED = re.compile(r"\s*expected-(error|warning|remark|note)(?:\s*@([+-]\d+|above|below|unknown))?\s*\{\{(.*)\}\}")
SYMBOL = re.compile(r'(?<![\w"@])@([A-Za-z_$.][\w$.-]*)')


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="opscope-opt", description=__doc__.splitlines()[0])
    p.add_argument("input", nargs="?", default="-", help="an .mlir or .mlirbc file ('-' = stdin)")
    p.add_argument("-p", "--passes", default="", help="pipeline, e.g. 'inject-matmul-stats,lower-opscope'")
    p.add_argument("-o", "--output", default="-", help="where to write the IR ('-' = stdout)")
    p.add_argument("--split-input-file", action="store_true", help="treat '// -----' as separate inputs")
    p.add_argument("--verify-diagnostics", action="store_true", help="check expected-error comments")
    p.add_argument("--print-debuginfo", action="store_true", help="print locations")
    p.add_argument("--print-ir-after-all", action="store_true", help="print the IR between passes")
    p.add_argument("--emit-bytecode", action="store_true", help="write MLIR bytecode")
    return p


def _chunks(text: str, split: bool) -> list[tuple[int, str]]:
    """(first line number - 1, text) for each input chunk."""
    if not split:
        return [(0, text)]
    out, line = [], 0
    for part in SPLIT_MARKER.split(text):
        out.append((line, part))
        line += part.count("\n")
    return out


def _run_chunk(text: str | bytes, name: str, pipeline, args, symbols: dict[str, int | None] | None = None):
    """Parse, verify and transform one input chunk; returns the module.

    `symbols`, where given, is filled before the pipeline runs with the input line defining
    each symbol (None where several lines define it or its location has no line).
    """
    module = parse_module(text, new_context(), name)
    with module.context:
        if not module.operation.verify():
            raise OpscopeError(f"{name}: input IR does not verify")
        if symbols is not None:
            _symbol_lines(module.operation, name, symbols)
        run_pipeline(module, pipeline, print_ir_after_all=args.print_ir_after_all)
    return module


@dataclass
class Expected:
    """One `expected-error`: where it is written, the line it designates (None: @unknown)."""

    at: int
    line: int | None
    text: str

    def __str__(self) -> str:
        return f'expected error{" @unknown" if self.line is None else ""} "{self.text}"'


def _expected(text: str, name: str) -> tuple[list[Expected], list[str]]:
    """Every expected-error of `text` (a chunk, padded to keep the file's line numbers),
    and one problem line per directive that cannot be checked."""
    comments = [line[len(_code(line)) + 2 :] for line in text.splitlines()]  # "" where none
    plain = [not DIRECTIVE.match(c) for c in comments]
    out, problems = [], []
    for i, comment in enumerate(comments, 1):
        if plain[i - 1]:
            continue
        m = EXPECTED.match(comment)
        if m is None or not m.group(3).strip():
            problems.append(
                f"{name}:{i}: error: malformed directive: write "
                "'// expected-error [@+N|@-N|@above|@below|@unknown] {{text}}' with a non-empty text"
            )
            continue
        if m.group(1) != "error":
            problems.append(
                f"{name}:{i}: error: expected-{m.group(1)} cannot be checked: opscope-opt produces only errors"
            )
            continue
        where = m.group(2) or "+0"
        if where == "unknown":
            target = None
        elif where == "below":
            target = next((j for j in range(i + 1, len(comments) + 1) if plain[j - 1]), 0)
        elif where == "above":
            target = next((j for j in range(i - 1, 0, -1) if plain[j - 1]), 0)
        else:
            target = i + int(where)
        if target is not None and not 0 < target <= len(comments):
            problems.append(f"{name}:{i}: error: expected-error @{where} designates no line of the input")
            continue
        out.append(Expected(i, target, m.group(3).strip()))
    return out, problems


def _code(line: str) -> str:
    """`line` without its `//` comment (one inside a string literal stays)."""
    quoted, i = False, 0
    while i < len(line):
        if quoted and line[i] == "\\":
            i += 2
            continue
        if line[i] == '"':
            quoted = not quoted
        elif not quoted and line.startswith("//", i):
            return line[:i]
        i += 1
    return line


def _lines_with(text: str, needle: str) -> list[int]:
    return [i for i, line in enumerate(text.splitlines(), 1) if needle in _code(line)]


def _named_line(text: str, loc: str) -> int | None:
    """The one line of `text` whose code carries `loc` verbatim (`loc("fc1")`), or None.

    A location alias (`#loc3 = loc("fc1")`) is followed to the one line using it.
    """
    found = _lines_with(text, loc)
    if len(found) != 1:
        return None
    alias = re.match(r"\s*(#[\w$.-]+)\s*=", text.splitlines()[found[0] - 1])
    if alias:
        found = _lines_with(text, f"loc({alias.group(1)})")
    return found[0] if len(found) == 1 else None


def _symbol_lines(op, name: str, out: dict[str, int | None]) -> None:
    """Record the input line of every op defining a symbol under `op`."""
    file_line = re.compile(r'"' + re.escape(name) + r'":(\d+):\d+')
    for region in op.regions:
        for block in region.blocks:
            for child in block.operations:
                child = child.operation
                if "sym_name" in child.attributes:
                    sym = ir.StringAttr(child.attributes["sym_name"]).value
                    m = file_line.search(str(child.location))
                    line = int(m.group(1)) if m else None
                    out[sym] = line if sym not in out or out[sym] == line else None
                _symbol_lines(child, name, out)


def _error_line(message: str, name: str, text: str | None, symbols: dict[str, int | None]) -> int | None:
    """The input line a produced error is at: that of the first location its message names
    (see the module docstring), or None where it names none that maps to one line."""
    file_line = re.compile(r'(?:"{0}"|(?<![\w/.-]){0}):(\d+):\d+'.format(re.escape(name)))  # loc or short form
    refs = [m for m in (message.find("loc("), file_line.search(message), SYMBOL.search(message)) if m not in (-1, None)]
    if not refs:
        return None
    first = min(refs, key=lambda m: m if isinstance(m, int) else m.start())
    if isinstance(first, int):  # a printed location: `loc(...)`, up to its closing parenthesis
        depth, end = 0, len(message)
        for j in range(first + 3, len(message)):
            depth += {"(": 1, ")": -1}.get(message[j], 0)
            if depth == 0:
                end = j + 1
                break
        loc = message[first:end]
        inner = file_line.search(loc)
        if inner:
            return int(inner.group(1))
        return _named_line(text, loc) if text is not None and loc != "loc(unknown)" else None
    if first.re is SYMBOL:
        return symbols.get(first.group(1))
    return int(first.group(1))


def _check_error(message: str, line: int | None, expected: list[Expected], name: str) -> list[str]:
    """Match one produced error against `expected` (removing the match); its problem lines."""
    match = next((e for e in expected if e.line == line and e.text in message), None)
    if match is not None:
        expected.remove(match)
        return []
    shown = " ".join(message.split())
    elsewhere = next((e for e in expected if e.text in message), None)
    if line is None:
        hint = " (an error naming no line of the input matches only 'expected-error @unknown')"
        return [f"{name}: error: unexpected error at no line: {shown}{hint if elsewhere else ''}"]
    hint = f" (the expected-error with this text designates line {elsewhere.line})" if elsewhere else ""
    if elsewhere and elsewhere.line is None:
        hint = " (the expected-error with this text says @unknown, but the error is at this line)"
    return [f"{name}:{line}: error: unexpected error: {shown}{hint}"]


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(format="opscope-opt: warning: %(message)s", level=logging.WARNING)
    name = args.input if args.input != "-" else "<stdin>"
    try:
        pipeline = parse_pipeline(args.passes) if args.passes else parse_pipeline("")
        if args.input == "-":
            raw = sys.stdin.buffer.read()
        else:
            from pathlib import Path

            path = Path(args.input)
            if not path.exists():
                raise OpscopeError(f"no such file: {path}")
            raw = path.read_bytes()
        if raw.startswith(b"ML\xefR"):
            chunks, is_text = [(0, raw)], False
        else:
            chunks, is_text = _chunks(raw.decode(), args.split_input_file), True
        outputs, failures = [], 0
        for base, chunk in chunks:
            text = ("\n" * base + chunk) if is_text else chunk  # keep line numbers of the file
            verify = args.verify_diagnostics
            expected, problems = _expected(text, name) if (verify and is_text) else ([], [])
            symbols: dict[str, int | None] = {}
            try:
                outputs.append(_run_chunk(text, name, pipeline, args, symbols if verify else None))
            except OpscopeError as e:
                if not verify:
                    raise
                line = _error_line(str(e), name, text if is_text else None, symbols)
                problems += _check_error(str(e), line, expected, name)
            # A pass stops at its first error, so every other expectation of the chunk is unmet.
            for e in expected:
                where = f"{name}:{e.at if e.line is None else e.line}"
                problems.append(f"{where}: error: {e} was not produced")
            for problem in problems:
                print(problem, file=sys.stderr)
            failures += len(problems)
        if failures:
            return 1
        if args.verify_diagnostics:
            return 0
        if args.emit_bytecode:
            # Written from the module itself: re-parsing printed text would drop every
            # location (default printing has no debug info), site names included.
            if len(outputs) != 1:
                raise OpscopeError(
                    f"--emit-bytecode writes one module, but {name} has {len(outputs)} (drop --split-input-file)"
                )
            from opscope.ir.loading import module_bytecode

            data = module_bytecode(outputs[0])
            if args.output == "-":
                sys.stdout.buffer.write(data)
            else:
                with open(args.output, "wb") as f:
                    f.write(data)
            return 0
        text_out = "\n// -----\n".join(module_text(m, debug_info=args.print_debuginfo) for m in outputs)
        if args.output == "-":
            sys.stdout.write(text_out)
        else:
            with open(args.output, "w") as f:
                f.write(text_out)
        return 0
    except OpscopeError as e:
        print(f"opscope-opt: error: {e}", file=sys.stderr)
        return 1
    except BrokenPipeError:
        # The reader closed the pipe (`opscope-opt ... | head`): the output it wanted is
        # written; point stdout at /dev/null so the interpreter's final flush stays quiet.
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


if __name__ == "__main__":
    sys.exit(main())
