"""Measured time of every dispatch of a module, with IREE's own per-dispatch benchmarks.

`iree-compile --iree-hal-dump-executable-benchmarks-to=DIR` writes, for each executable of
the compiled module, a standalone benchmark module that runs only that dispatch with its
real workgroup count and binding sizes (on zero-filled buffers). Each is compiled with
`iree-compile` and timed by `iree-benchmark-module --batch_size=N` (N dispatches per
iteration, the time reported per dispatch), `--benchmark_repetitions` times; the median
repetition is kept. No home-made timer around the whole call: the per-dispatch times are
what IREE's runtime measures for that dispatch alone, launch overhead included.
"""

from __future__ import annotations

import re
import tempfile
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from iree.compiler import ir

from opscope.errors import OpscopeError
from opscope.ir.weights import RESOURCE_REF, ResourceBlobs
from opscope.run.compile import CompiledModule, compiler_input
from opscope.run.targets import Target, get_target, require_runnable
from opscope.run.tools import ToolFailed, benchmark_us, run_tool

BATCH = 100  # dispatches per benchmark iteration: launch jitter averages out
REPETITIONS = 5
_FUNC = re.compile(r"util\.func public @([\w$.-]+)\([^)]*\)[^\n]*iree\.benchmark = \"dispatch\"")
_DISPATCH = re.compile(r"stream\.cmd\.dispatch @([\w$.-]+)::")
ENCODING = "_encoding_"  # IREE's data-layout dispatches: weights passed as arguments are packed on every call
_NAME = re.compile(r"^module_(.+?)_(?:embedded_elf|vulkan|cuda|metal|rocm|system_elf)")


@dataclass(frozen=True)
class DispatchTime:
    """One dispatch's measured time: its executable's name (as the flow phase names it), the
    benchmark function, and the median over repetitions of the time per dispatch."""

    name: str
    function: str
    us: float | None  # None: IREE could not rebuild this dispatch's benchmark (`untimed` says why)
    repetitions: int
    calls: int | None = None  # per call of the module, counted in IREE's stream IR (set for `_encoding_N`
    # dispatches, which IREE adds to re-lay out arguments and which the static view cannot see)
    untimed: str | None = None  # why `us` is None: IREE's first error compiling the dumped benchmark
    rebuilt: str | None = None  # how its benchmark was rebuilt, when IREE's own dump did not compile as written


def time_dispatches(
    module: ir.Module | str | bytes, target: str | Target = "llvm-cpu", **options
) -> list[DispatchTime]:
    """The measured time of each dispatch of `module` on `target`, in the order IREE numbers them
    (`options`: `timed_build`'s batch, repetitions and progress)."""
    return timed_build(module, target, **options)[0]


def timed_build(
    module: ir.Module | str | bytes,
    target: str | Target = "llvm-cpu",
    *,
    batch: int = BATCH,
    repetitions: int = REPETITIONS,
    select: Callable[[str], bool] | None = None,
    min_time_s: float | None = None,
    progress: Callable[[str], None] | None = None,
) -> tuple[list[DispatchTime], CompiledModule]:
    """`time_dispatches`, and the module itself as the same `iree-compile` run built it (so timing the
    whole call does not compile it again). `select` (a dispatch name -> bool) times only the dispatches
    it takes (the others are left out); `min_time_s` is each repetition's minimum running time
    (Google benchmark's own default, half a second, when None)."""
    tgt = target if isinstance(target, Target) else get_target(target)
    require_runnable(tgt)  # before anything compiles
    source, parameters, flags = compiler_input(module, tgt)  # parameter files checked before compiling
    with tempfile.TemporaryDirectory(prefix="opscope-dispatch-") as tmp:
        root = Path(tmp)
        (root / "module.mlirbc").write_bytes(source)
        run_tool(
            [
                "iree-compile",
                str(root / "module.mlirbc"),
                *flags,
                f"--iree-hal-dump-executable-benchmarks-to={root / 'bench'}",
                "-o",
                str(root / "module.vmfb"),
            ],
            "compiling the module",
        )
        files = sorted((root / "bench").glob("*.mlir"), key=_order)
        if select is not None:
            files = [f for f in files if select(_dispatch_name(f.stem))]
        if not files:
            raise OpscopeError("IREE wrote no dispatch benchmarks for this module (no dispatches to time)")
        out, blobs = [], {}  # the source's resource blobs, read when a dump needs one
        for i, path in enumerate(files):
            if progress is not None:
                progress(f"dispatch {i + 1}/{len(files)}: {path.stem}")
            text = path.read_text()
            found = _FUNC.search(text)
            if found is None:
                raise OpscopeError(f"{path.name}: no benchmark function in IREE's dispatch benchmark")
            vmfb = path.with_suffix(".vmfb")
            name = _dispatch_name(path.stem)
            try:
                note = _rebuild(path, text, vmfb, lambda: blobs.setdefault("source", _source_blobs(source)))
            except ToolFailed as e:
                out.append(DispatchTime(name, found.group(1), None, 0, untimed=e.first.replace(str(path), path.name)))
                continue
            us = _benchmark(vmfb, found.group(1), tgt.driver, batch, repetitions, min_time_s)
            out.append(DispatchTime(name, found.group(1), us, repetitions, rebuilt=note))
        if any(t.name.startswith(ENCODING) for t in out):
            counts = _stream_calls(root / "module.mlirbc", tgt)
            out = [replace(t, calls=counts.get(t.name)) if t.name.startswith(ENCODING) else t for t in out]
        vmfb = (root / "module.vmfb").read_bytes()
        return out, CompiledModule(vmfb, tgt, flags, parameters=parameters)


def _rebuild(path: Path, text: str, vmfb: Path, source_blobs: Callable[[], ResourceBlobs]) -> str | None:
    """Compile IREE's dumped benchmark `path` to `vmfb`; None, or how it had to be rebuilt.

    IREE 3.13 cannot rebuild some of its own dumps: a constant the dispatch inlined refers to a
    `dense_resource` blob the dump leaves out ("resource does not exist"; the blob is copied in
    from the source module), or the configuration it chose does not rebuild ("failed to build
    pass pipeline": a transpose fused with a data-tiling pack, convolutions). Then the dispatch
    is compiled without that configuration, so IREE chooses one for it anew, and the note says
    so. The first error of the last attempt is the ToolFailed raised.
    """
    try:
        run_tool(["iree-compile", str(path), "-o", str(vmfb)], f"compiling {path.name}")
        return None
    except ToolFailed as e:
        first = e
    notes = []
    missing = [r for r in dict.fromkeys(RESOURCE_REF.findall(text)) if not _has_blob(text, r)]
    if missing:
        text = _with_blobs(text, {r: source_blobs().hex(r) for r in missing})
        notes.append(f"{len(missing)} constant blob{'s' * (len(missing) > 1)} copied in from the module")
    if "failed to build pass pipeline" in first.first:
        text = strip_configuration(text)
        notes.append(
            f"IREE's own configuration did not rebuild ({_quote(first.first)}): timed as IREE configures the dispatch anew"
        )
    if not notes:
        raise first
    fixed = path.with_name(path.stem + ".rebuilt.mlir")
    fixed.write_text(text)
    try:
        run_tool(["iree-compile", str(fixed), "-o", str(vmfb)], f"compiling {fixed.name}")
    except ToolFailed as e:
        raise ToolFailed(e.what, f"{_quote(first.first)}; rebuilt ({'; '.join(notes)}): {e.first}") from None
    return "; ".join(notes)


def _quote(error: str) -> str:
    """An error line without its file position: `x.mlir:10:9: error: failed to ...` -> `failed to ...`."""
    return error.split("error: ", 1)[-1]


def _source_blobs(source: bytes) -> ResourceBlobs:
    from opscope.ir.loading import new_context, parse_module

    return ResourceBlobs(parse_module(source, new_context()))


def _has_blob(text: str, resource: str) -> bool:
    """Whether `text`'s resource section holds `resource`."""
    start = text.rfind("{-#")
    return start >= 0 and re.search(rf"[\s,{{]{re.escape(resource)}\s*:", text[start:]) is not None


def _with_blobs(text: str, hexes: dict[str, str | None]) -> str:
    """`text` with a resource section holding `hexes` (name -> printed blob); a blob the source
    module lacks too stays missing (the rebuild then fails with IREE's own error)."""
    entries = ",\n".join(f'      {name}: "{blob}"' for name, blob in hexes.items() if blob is not None)
    if not entries:
        return text
    section = re.search(r"\{-#\s*dialect_resources\s*:\s*\{\s*builtin\s*:\s*\{", text)
    if section is not None:
        return text[: section.end()] + "\n" + entries + ",\n" + text[section.end() :]
    return text + "\n{-#\n  dialect_resources: {\n    builtin: {\n" + entries + "\n    }\n  }\n#-}\n"


_CONFIG = re.compile(r"(translation_info|lowering_config|compilation_info) = #")


def strip_configuration(text: str) -> str:
    """`text` without the codegen configuration IREE chose (`translation_info`, `lowering_config`,
    `compilation_info` attributes), so compiling it configures every dispatch anew."""
    out, pos = [], 0
    while (m := _CONFIG.search(text, pos)) is not None:
        end = _attribute_end(text, m.end())
        start = m.start()
        # the entry's separator: ", " before it, else ", " after it
        if text[start - 2 : start] == ", ":
            start -= 2
        elif text[end : end + 2] == ", ":
            end += 2
        out.append(text[pos:start])
        pos = end
    out.append(text[pos:])
    text = "".join(out)
    return re.sub(r"(?: attrs =\s*\{\}| attributes \{\}| \{\}(?= :))", "", text)


def _attribute_end(text: str, pos: int) -> int:
    """The end of the attribute starting at `pos` (its dialect name, then <...> balanced; `->`
    inside an affine map is not a bracket)."""
    depth = 0
    while pos < len(text):
        c = text[pos]
        if c == "<":
            depth += 1
        elif c == ">" and text[pos - 1] != "-":
            depth -= 1
            if depth == 0:
                return pos + 1
        elif depth == 0 and c in ",}\n":
            return pos
        pos += 1
    return pos


def _stream_calls(source: Path, tgt: Target) -> dict[str, int]:
    """How often each executable is dispatched per call: `stream.cmd.dispatch @name` ops of the
    module compiled to IREE's stream phase (one more, partial compile)."""
    text = run_tool(
        [
            "iree-compile",
            str(source),
            *tgt.flags,
            "--compile-to=stream",
            # the dispatch ops are all it reads: weights printed in full would be the bulk of the text
            "--mlir-elide-resource-strings-if-larger=16",
            "--mlir-elide-elementsattrs-if-larger=16",
        ],
        "compiling the module to the stream phase",
    )
    return dict(Counter(_DISPATCH.findall(text)))


def _order(path: Path) -> tuple[int, str]:
    """Benchmark files in dispatch order (dispatch_10 after dispatch_9)."""
    m = re.search(r"dispatch_(\d+)", path.stem)
    return (int(m.group(1)) if m else -1, path.stem)


def _dispatch_name(stem: str) -> str:
    """`module_main_dispatch_3_embedded_elf_x86_64_benchmark` -> `main_dispatch_3` (the flow executable's name)."""
    m = _NAME.match(stem)
    return m.group(1) if m else stem


def _benchmark(
    vmfb: Path, function: str, driver: str, batch: int, repetitions: int, min_time_s: float | None = None
) -> float:
    """Median over repetitions of the microseconds per dispatch."""
    options = [f"--batch_size={batch}", f"--benchmark_repetitions={max(repetitions, 1)}"]
    if min_time_s is not None:
        options.append(f"--benchmark_min_time={min_time_s}s")
    times = sorted(benchmark_us(vmfb, function, driver, options))
    return times[len(times) // 2]
