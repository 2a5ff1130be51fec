"""`opscope-opt`: an mlir-opt-style driver for pipelines mixing opscope and MLIR/IREE passes.

    opscope-opt input.mlir -p 'inject-matmul-stats{hist-bins=0},lower-opscope,canonicalize'

The IR is verified before the pipeline, between passes and after it. Errors print as
one line (`file:line:col: error: ...`); with `--verify-diagnostics` expected errors are
written in the input as `// expected-error @+1 {{pass-name: ...}}` and checked instead.
"""

from __future__ import annotations

import argparse
import logging
import re
import sys

from opscope.errors import OpscopeError
from opscope.ir.loading import module_text, new_context, parse_module
from opscope.ir.pipeline import parse_pipeline, run_pipeline

SPLIT_MARKER = re.compile(r"^// -----[ \t]*$", re.M)  # not \s: it would eat newlines
EXPECTED = re.compile(r"//\s*expected-(error|warning|remark)\s*(@[+-]?\d+|@above|@below)?\s*\{\{(.*?)\}\}")


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


def _run_chunk(text: str | bytes, name: str, pipeline, args):
    """Parse, verify and transform one input chunk; returns the module."""
    module = parse_module(text, new_context(), name)
    with module.context:
        if not module.operation.verify():
            raise OpscopeError(f"{name}: input IR does not verify")
        run_pipeline(module, pipeline, print_ir_after_all=args.print_ir_after_all)
    return module


def _expected(text: str) -> list[tuple[int, str]]:
    """(1-based line, message) of every expected-error in `text`."""
    out = []
    for i, line in enumerate(text.splitlines(), 1):
        m = EXPECTED.search(line)
        if not m or m.group(1) != "error":
            continue
        where = m.group(2) or "@+0"
        off = {"@above": -1, "@below": 1}.get(where)
        off = int(where[1:]) if off is None else off
        out.append((i + off, m.group(3).strip()))
    return out


def _error_line(message: str, name: str) -> int | None:
    m = re.search(re.escape(name) + r'":(\d+):\d+', message) or re.search(r":(\d+):\d+", message)
    return int(m.group(1)) if m else None


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
            expected = _expected(text) if (args.verify_diagnostics and is_text) else []
            try:
                outputs.append(_run_chunk(text, name, pipeline, args))
            except OpscopeError as e:
                if not args.verify_diagnostics:
                    raise
                got = str(e)
                line = _error_line(got, name)
                match = next(((el, msg) for el, msg in expected
                              if msg in got and (line is None or line == el)), None)
                if match is None:
                    where = f"{name}:{line}" if line is not None else name
                    print(f"{where}: error: unexpected error: {got}", file=sys.stderr)
                    failures += 1
                else:
                    expected.remove(match)
            # A pass stops at its first error, so every other expectation of the chunk is unmet.
            for line, msg in expected:
                print(f"{name}:{line}: error: expected error \"{msg}\" was not produced", file=sys.stderr)
                failures += 1
        if failures:
            return 1
        if args.verify_diagnostics:
            return 0
        if args.emit_bytecode:
            # Written from the module itself: re-parsing printed text would drop every
            # location (default printing has no debug info), site names included.
            if len(outputs) != 1:
                raise OpscopeError(
                    f"--emit-bytecode writes one module, but {name} has {len(outputs)} "
                    "(drop --split-input-file)"
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
