"""Compile an MLIR module with IREE in-process, cached by IR hash + flags.

One `Session` per flag set, one `Invocation` per module; IR travels as bytecode so
locations survive. Before compiling, `check_compilable` refuses IR that would crash
iree-compile (left-over opscope ops, ops of unknown dialects) with a one-line error.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from iree.compiler import ir

from opscope.errors import OpscopeError
from opscope.ir.loading import module_bytecode, new_context, parse_module
from opscope.ir.parameter_files import PARAMETERS_ATTR, parameter_files
from opscope.ir.progress import phase
from opscope.run.target_limits import SPIRV_TARGETS
from opscope.run.targets import Target, get_target

log = logging.getLogger("opscope")


@dataclass(frozen=True)
class CompiledModule:
    """A compiled IREE module and how it was made."""

    vmfb: bytes
    target: Target
    flags: tuple[str, ...]
    statistics: dict = field(default_factory=dict, compare=False)
    cached: bool = field(default=False, compare=False)  # read from the memo or the on-disk cache
    # (scope, parameter file) of each file its weights are read from (`externalize-weights`)
    parameters: tuple[tuple[str, str], ...] = ()

    @property
    def untiled(self) -> bool:
        """Compiled without data tiling (asked for, or IREE's fallback: `DATA_TILING_BUGS`)."""
        return NO_DATA_TILING in self.flags

    @property
    def dispatch_count(self) -> int | None:
        """IREE's static dispatch count from its scheduling statistics (when requested).

        Static, whole-program: a `{noinline}` stats kernel counts once however many call
        sites it has. `bench/bench_compile.py` derives the per-invocation count.
        """
        try:
            return int(self.statistics["stream-aggregate"]["execution"]["dispatch-count"])
        except (KeyError, TypeError):
            return None


_MEMO: dict[str, CompiledModule] = {}

# A module that reads its weights from a parameter file is compiled without hoisting constant
# expressions: hoisted, every weight is re-laid out (data tiling's packing, transposes) into a
# second resident copy when the module loads; without, the re-layout runs inside each call and
# only the mapped file stays resident. Measured on a 222 M Llama (0.89 GB of f32 weights, 32
# tokens, llvm-cpu): 1.81 GB resident after loading (2.64 GB peak) hoisted, 0.94 GB (1.07 GB
# peak) not; 118 ms a call hoisted, 348 ms not. A caller's own hoisting flag wins.
STREAMED_WEIGHTS_FLAGS = ("--iree-opt-const-expr-hoisting=false",)


def cache_dir() -> Path:
    """Where compiled modules are cached on disk (`OPSCOPE_CACHE_DIR` overrides)."""
    base = os.environ.get("OPSCOPE_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "opscope"
    )
    return Path(base) / "vmfb"


def check_compilable(module: ir.Module) -> None:
    """Refuse IR that iree-compile cannot take, naming the first offending op and its location."""
    ctx = module.context
    problems: list[str] = []

    def visit(op):
        name = op.name
        if name.startswith("opscope."):
            problems.append(f"left-over '{name}' at {op.location}: run the lower-opscope pass before compiling")
            return ir.WalkResult.INTERRUPT
        if not ctx.is_registered_operation(name):
            problems.append(f"unknown op '{name}' at {op.location}: iree-compile cannot lower it")
            return ir.WalkResult.INTERRUPT
        return ir.WalkResult.ADVANCE

    module.operation.walk(visit)
    if problems:
        raise OpscopeError(problems[0])
    from opscope.run.target_limits import short_windows

    short = short_windows(module)
    if short:
        raise OpscopeError(short)


def compile_module(
    module: ir.Module | str | bytes,
    target: str | Target | None = "llvm-cpu",
    extra_flags: tuple[str, ...] | list[str] = (),
    statistics: bool = False,
    use_cache: bool = True,
) -> CompiledModule:
    """Compile `module` (an ir.Module, MLIR text or bytecode) for `target` with IREE."""
    if target is None:
        tgt = Target("iree-compile", (), "", "flags given by the caller")
    else:
        tgt = target if isinstance(target, Target) else get_target(target)
    source, parameters, flags = compiler_input(module, tgt, extra_flags)  # a damaged parameter file refused first
    key = hashlib.sha256(
        _compiler_version() + b"\0" + source + b"\0" + "\0".join(flags).encode() + bytes([statistics])
    ).hexdigest()
    if use_cache and key in _MEMO:  # the same model may read another copy of its parameter file
        return dataclasses.replace(_MEMO[key], cached=True, parameters=parameters)
    disk = cache_dir() / f"{key}.vmfb"
    if use_cache and not statistics and disk.exists():
        result = CompiledModule(disk.read_bytes(), tgt, flags, cached=True, parameters=parameters)
    else:
        result = _compile_untiled_if_needed(source, tgt, flags, statistics, parameters)
        if use_cache and not statistics:
            try:
                disk.parent.mkdir(parents=True, exist_ok=True)
                tmp = disk.with_suffix(f".tmp{os.getpid()}")
                tmp.write_bytes(result.vmfb)
                tmp.replace(disk)
            except OSError:
                pass  # a read-only cache only costs time
    if use_cache:
        _MEMO[key] = result
    return result


def _compile_untiled_if_needed(
    source: bytes, tgt: Target, flags: tuple[str, ...], statistics: bool, parameters: tuple
) -> CompiledModule:
    """Compile; where IREE 3.13's data tiling fails (`DATA_TILING_BUGS`: "tiling factors must be less
    than or equal to the input rank for pack" on a 1x1 by 1xN matmul whose lhs is computed; found by
    the generated-model tests), compile again without data tiling, said in one warning: the model
    runs, its matmuls untiled."""

    def once(fl: tuple[str, ...]) -> CompiledModule:
        if parameters and not statistics:  # a model large enough for a parameter file: see `_compile_child`
            return _compile_child(source, tgt, fl, parameters)
        return dataclasses.replace(_compile(source, tgt, fl, statistics), parameters=parameters)

    try:
        return once(flags)
    except CompileFailed as e:
        if not any(bug in e.first for bug in DATA_TILING_BUGS) or DATA_TILING not in flags:
            raise
        log.warning(
            "%s: IREE 3.13's data tiling fails on this model; compiling it again without data tiling (%s)",
            e.first,
            NO_DATA_TILING,
        )
        return once(tuple(f for f in flags if f != DATA_TILING) + (NO_DATA_TILING,))


DATA_TILING = "--iree-opt-data-tiling"
NO_DATA_TILING = "--iree-opt-data-tiling=false"
# IREE 3.13 failures that go away without data tiling (found by the generated-model tests): a 1x1 by 1xN
# matmul whose lhs is computed; some batches of torch-exported attention, convolution and MoE layers
# (each of which compiles alone) at LLVM translation.
DATA_TILING_BUGS = (
    "tiling factors must be less than or equal to the input rank for pack",
    "LLVM Translation failed for operation: builtin.unrealized_conversion_cast",
)


def compile_alike(
    first: ir.Module | str | bytes, second: ir.Module | str | bytes, target: str | Target = "llvm-cpu"
) -> tuple[CompiledModule, CompiledModule]:
    """Both modules compiled with one data-tiling choice: untiled both where IREE's data tiling fails
    on either (`DATA_TILING_BUGS`). A tiled and an untiled build sum their matmuls in another order,
    so comparing them bit for bit would blame a rewrite or the taps for IREE's kernels."""
    a = compile_module(first, target)
    b = compile_module(second, target, (NO_DATA_TILING,) if a.untiled else ())
    if b.untiled and not a.untiled:
        a = compile_module(first, target, (NO_DATA_TILING,))
    return a, b


def compile_isolated(
    module: ir.Module | str | bytes, target: str | Target = "llvm-cpu", extra_flags: tuple[str, ...] | list[str] = ()
) -> CompiledModule:
    """Compile `module` in a child `iree-compile` process, uncached. IREE 3.13's in-process
    compiler keeps every compiled module's dense resources (its weights) until the process
    exits, even after its session closes (measured: +550 MB per SmolLM2 compile), so a loop
    over many variants of a large model compiles each in a process of its own."""
    tgt = target if isinstance(target, Target) else get_target(target)
    source, parameters, flags = compiler_input(module, tgt, extra_flags)
    return _compile_child(source, tgt, flags, parameters)


def _compile_child(source: bytes, tgt: Target, flags: tuple[str, ...], parameters: tuple) -> CompiledModule:
    """Compile `source` with a child `iree-compile`. Also how a module whose weights live in a
    parameter file is compiled: the in-process compiler's memory stays with the process that
    then runs the model (a 222 M Llama's tapped compile left ~0.5 GB behind; the child peaks
    at 0.36 GB and returns it all)."""
    import subprocess

    from opscope.run.tools import find_tool

    with tempfile.TemporaryDirectory(prefix="opscope-compile-") as tmp:
        src = Path(tmp) / "module.mlirbc"
        src.write_bytes(source)
        out = Path(tmp) / "module.vmfb"
        # one process: resuming from an intermediate phase's bytecode loses dense resources in 3.13
        phase("compile: iree-compile (a child process)")
        proc = subprocess.run(
            [find_tool("iree-compile"), str(src), *flags, "-o", str(out)], capture_output=True, text=True
        )
        if proc.returncode != 0:
            lines = proc.stderr.strip().splitlines()
            first = next((line for line in lines if "error" in line), lines[0] if lines else "no diagnostic")
            raise CompileFailed(tgt.name, first.replace(str(src), "<module>"), _save_log(source, flags, lines))
        return CompiledModule(out.read_bytes(), tgt, flags, parameters=parameters)


def _flags(tgt: Target, extra_flags, parameters: tuple) -> tuple[str, ...]:
    """The target's flags and the caller's, and `STREAMED_WEIGHTS_FLAGS` for a module with
    parameter files unless the caller chose hoisting itself."""
    flags = tuple(tgt.flags) + tuple(extra_flags)
    if parameters and not any(f.startswith("--iree-opt-const-expr-hoisting") for f in flags):
        flags += STREAMED_WEIGHTS_FLAGS
    return flags


def compiler_input(
    module: ir.Module | str | bytes, tgt: Target, extra_flags: tuple[str, ...] | list[str] = ()
) -> tuple[bytes, tuple[tuple[str, str], ...], tuple[str, ...]]:
    """What `iree-compile` reads for `module` (`_source`), the parameter files it names, each checked
    readable before anything compiles (a one-line error naming a missing or damaged file), and the
    flags it compiles with on `tgt` (`_flags`)."""
    from opscope.ir.parameter_files import open_index

    data_tiled = DATA_TILING in tgt.flags and NO_DATA_TILING not in extra_flags
    source, parameters = _source(module, data_tiled, tgt.name in SPIRV_TARGETS)
    for _, path in parameters:
        open_index(path)
    return source, parameters, _flags(tgt, extra_flags, parameters)


def _source(
    module: ir.Module | str | bytes, data_tiled: bool = False, spirv: bool = False
) -> tuple[bytes, tuple[tuple[str, str], ...]]:
    """What the compiler reads (a module checked and written as bytecode, text encoded) and the
    (scope, file) of each parameter file the module names, sorted. The compiler's copy leaves
    the file names out (`without_file_names`): where the weights live is the loader's business,
    so a model compiles to one cached vmfb whichever run folder holds its parameter file. The
    copy is also worked around IREE 3.13's bugs (`_workarounds`): its contractions of K = 1 written
    elementwise, a loop index modulo a bound it never reaches written as the index, for a `data_tiled`
    target its normalized contraction operands guarded, for a `spirv` target its channels-first
    depthwise convolutions computed channels-last."""
    fixes = _workarounds(data_tiled, spirv)
    if isinstance(module, ir.Module):
        check_compilable(module)
        if any(found(module) for found, _, _ in fixes):
            module = _copy(module)
            for found, fix, _ in fixes:
                if found(module):
                    fix(module)
        files = parameter_files(module)
        return without_file_names(module, files), tuple(sorted(files.items()))
    source = module.encode() if isinstance(module, str) else bytes(module)
    maybe = [fix for _, fix, words in fixes if all(w in source for w in words)]
    if maybe and (hashlib.sha256(source).digest(), data_tiled, spirv) in _CHECKED:
        maybe = []  # parsed and checked already (`mark_checked`): a second parse holds another copy of the weights
    if PARAMETERS_ATTR.encode() not in source and not maybe:  # names are in the text or the bytecode's strings
        return source, ()
    parsed = parse_module(source, new_context())
    fixed = sum(bool(fix(parsed)) for fix in maybe)
    if not fixed and PARAMETERS_ATTR.encode() not in source:
        return source, ()
    files = parameter_files(parsed)
    return without_file_names(parsed, files), tuple(sorted(files.items()))


_CHECKED: set[tuple[bytes, bool, bool]] = set()  # (sha256 of a source, data_tiled, spirv): needs no workaround


def mark_checked(module: ir.Module, source: bytes, target: str | Target) -> None:
    """Remember that `source`, the bytes `module` was parsed from, needs none of `target`'s workarounds
    (`_workarounds`), so compiling those bytes later does not parse them again: a parse holds another
    copy of the weights (measured: a 400 MB bytecode, +390 MB peak RSS, 0.24 s), which the parity
    gate's untapped build paid on every model with a reduction."""
    tgt = target if isinstance(target, Target) else get_target(target)
    data_tiled, spirv = DATA_TILING in tgt.flags, tgt.name in SPIRV_TARGETS
    if not any(found(module) for found, _, _ in _workarounds(data_tiled, spirv)):
        _CHECKED.add((hashlib.sha256(source).digest(), data_tiled, spirv))


def _workarounds(data_tiled: bool, spirv: bool) -> list[tuple]:
    """(finder, fix, words a source must hold for the finder to find anything) for each IREE 3.13
    miscompile `target_limits` works around on this target."""
    from opscope.run import target_limits as tl
    from opscope.run.index_remainders import index_remainders, plain_indices

    fixes = [
        (tl.unit_k_contractions, tl.elementwise_unit_k, (b"linalg",)),  # tiled or not (its docstring)
        (index_remainders, plain_indices, (b"rem", b"linalg")),  # arith.remsi / remui
        (tl.padded_convolutions, tl.barrier_padded_convolutions, (b"insert_slice", b"linalg")),
    ]
    if data_tiled:
        fixes.append((tl.normalized_operands, tl.guard_normalized_operands, (b"reduction", b"linalg")))
    if spirv:
        fixes.append((tl.nchw_depthwise, tl.channels_last_depthwise, (b"depthwise_conv_2d_nchw_chw",)))
        fixes.append((tl.contraction_broadcasts, tl.barrier_contraction_broadcasts, (b"linalg",)))
    return fixes


def _copy(module: ir.Module):
    """The compiler's copy of `module` to edit: a clone in its context (the weights' blobs are the
    context's, shared, not copied), dropped after it is written."""
    return module.operation.clone()


def without_file_names(module: ir.Module, files: dict[str, str]) -> bytes:
    """`module` as bytecode without its `opscope.parameters` attribute (restored after)."""
    if not files:
        return module_bytecode(module)
    attrs = module.operation.attributes
    saved = attrs[PARAMETERS_ATTR]
    del attrs[PARAMETERS_ATTR]
    try:
        return module_bytecode(module)
    finally:
        attrs[PARAMETERS_ATTR] = saved


def _compiler_version() -> bytes:
    """The IREE compiler's version, so cached modules never outlive the compiler that made them."""
    try:
        from iree.compiler import version

        return f"{version.VERSION} {version.REVISIONS}".encode()
    except (ImportError, AttributeError):
        return b"unknown"


def _compile(
    source: bytes,
    tgt: Target,
    flags: tuple[str, ...],
    statistics: bool,
    output: str = "vm",
    compile_to: str | None = None,
) -> CompiledModule:
    from iree.compiler.api import Output, Session, Source

    stats_path = None
    all_flags = list(flags)
    if statistics:
        fd, stats_path = tempfile.mkstemp(suffix=".json", prefix="opscope-stats-")
        os.close(fd)
        all_flags += [
            "--iree-scheduling-dump-statistics-format=json",
            f"--iree-scheduling-dump-statistics-file={stats_path}",
        ]
    session = Session()
    try:
        try:
            session.set_flags(*all_flags)
        except ValueError as e:
            detail = " ".join(str(e).split())
            raise OpscopeError(f"iree-compile rejected the flags: {detail}") from None
        errors: list[str] = []
        log: list[str] = []

        def on_diag(d):
            log.extend(_diagnostic_lines(d))
            if str(d.severity).endswith("ERROR"):
                errors.append(f"{d.location}: {d.message}")
            return True

        session.context.attach_diagnostic_handler(on_diag)
        inv = session.invocation()
        src = Source.wrap_buffer(session, source)
        ok = inv.parse_source(src)
        if compile_to:  # iree-compile's --compile-to is a tool flag, not a session flag
            _set_compile_phases(inv, None, compile_to)
            ok = ok and inv.execute()
        else:  # phase by phase, each said to whoever shows progress (the same bytes as in one go)
            start = None
            for name, last in PHASES:
                if not ok:
                    break
                phase(f"compile: {name}")
                _set_compile_phases(inv, start, last)
                ok = inv.execute()
                start = last
        if not ok:
            raise CompileFailed(
                tgt.name, errors[0] if errors else "no diagnostic was produced", _save_log(source, flags, log)
            )
        out = Output.open_membuffer()
        if output == "vm":
            inv.output_vm_bytecode(out)
        elif output == "ir-bytecode":  # keeps locations, which text output drops
            inv.output_ir_bytecode(out, 0)
        else:
            inv.output_ir(out)
        vmfb = bytes(out.map_memory())
        out.close()
        inv.close()
    finally:
        session.close()
    stats = {}
    if stats_path:
        try:
            stats = json.loads(Path(stats_path).read_text() or "{}")
        except (OSError, json.JSONDecodeError):
            stats = {}
        finally:
            os.unlink(stats_path)
    return CompiledModule(vmfb, tgt, flags, stats)


# iree-compile's phases, grouped as the progress line names them: (what it does, the last phase run)
PHASES = (
    ("prepare the input", "preprocessing"),
    ("global optimization", "global-optimization"),
    ("form dispatches", "flow"),
    ("schedule streams", "stream"),
    ("generate code", "executable-targets"),
    ("link the module", "end"),
)
FIRST_ERROR_CHARS = 240  # of the first diagnostic in the one-line error; the log holds all of them


# IREE 3.13 failures whose diagnostic names no op of the model, with what they mean: (targets, words
# of the first diagnostic, the clause said after it). Found by the generated-model tests.
KNOWN_FAILURES: tuple[tuple[tuple[str, ...], tuple[str, ...], str], ...] = (
    (
        ("vulkan-spirv", "metal-spirv"),
        ("vector.bitcast", "bf16>"),
        "IREE 3.13's SPIR-V cannot lower this model's bf16 vectors; --target llvm-cpu runs it",
    ),
)


class CompileFailed(OpscopeError):
    """iree-compile refused a module: the first diagnostic in one line (with what it means where it
    is a known IREE failure, `KNOWN_FAILURES`), every diagnostic in a file."""

    def __init__(self, target: str, first: str, log: Path | None):
        self.target, self.log = target, log
        line = " ".join(first.split())
        self.first = line if len(line) <= FIRST_ERROR_CHARS else line[: FIRST_ERROR_CHARS - 1] + "…"
        where = f" for target '{target}'" if target != "iree-compile" else ""
        known = next((hint for t, words, hint in KNOWN_FAILURES if target in t and all(w in line for w in words)), "")
        super().__init__(
            f"iree-compile failed{where}: {self.first}"
            + (f" ({known})" if known else "")
            + (f" (all diagnostics: {log})" if log else "")
        )


def _diagnostic_lines(d) -> list[str]:
    """A diagnostic as text. (Its notes stay out: reading `Diagnostic.notes` inside the
    handler aborts the interpreter in IREE 3.13, which runs it without the GIL.)"""
    severity = str(d.severity).rsplit(".", 1)[-1].lower()
    return [f"{severity}: {d.location}: {d.message}"]


def _save_log(source: bytes, flags: tuple[str, ...], lines: list[str]) -> Path | None:
    """Every diagnostic of a failed compile, with the flags, in a file named by the module's hash."""
    digest = hashlib.sha256(source + "\0".join(flags).encode()).hexdigest()[:12]
    path = Path(tempfile.gettempdir()) / f"opscope-iree-{digest}.log"
    try:
        path.write_text("iree-compile " + " ".join(flags) + "\n\n" + "\n".join(lines) + "\n")
    except OSError:
        return None
    return path


def _set_compile_phases(inv, start: str | None, last: str) -> None:
    """`ireeCompilerInvocationSetCompileFromPhase` (after `start`, when given) and `...ToPhase`
    (through `last`), which iree.compiler.api (3.13) does not wrap."""
    from ctypes import c_char_p, c_void_p

    lib = inv._local_dylib
    for fn, value in (
        (lib.ireeCompilerInvocationSetCompileFromPhase, start),
        (lib.ireeCompilerInvocationSetCompileToPhase, last),
    ):
        if value is not None:
            fn.argtypes, fn.restype = [c_void_p, c_char_p], None
            fn(inv._inv_p, value.encode())
