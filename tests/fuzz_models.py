"""Generated models through every opscope pass, in chunks: the CI slice's engine and the long run.

Each chunk is `per_chunk` models drawn by hypothesis from one seed (`chunk_seed(seed, n)`), checked in
batches (`generated_checks.check_batch`: sites, FLOPs, attention, routing, residual adds, untapped vs
tapped bit for bit, every op and every sketch against numpy) and each batch through rewrites
(`generated_checks.REWRITES`: all of them, or `rewrites_per_batch` chosen in turn). One JSON line per
chunk goes to the log: models checked, refused (each refusal's line), rewrites run, problems.

    python tests/fuzz_models.py --models 5000 --seed 1 --log fuzz.jsonl   # the long run (docs/testing.md)
    python tests/fuzz_models.py --models 5000 --seed 1 --log fuzz.jsonl --resume   # after an interruption
    python tests/fuzz_models.py ... --resume --redo-failed   # and the chunks that failed, after their fixes
    python tests/fuzz_models.py ... --resume --chunks 16:50  # only those chunks (a run spread over sessions)
    python tests/fuzz_models.py --summary --log fuzz.jsonl       # its totals (docs/testing.md)
    python tests/fuzz_models.py --replay SEED:CHUNK                        # one chunk again, its problems printed
    python tests/fuzz_models.py --replay-chunk-seed S --per-chunk 200 --rewrites 1  # the CI slice's chunk
    python tests/fuzz_models.py --shrink SEED:CHUNK --problem LINE       # its model shrunk (shrink_models.py)
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

import generated_checks as gc  # noqa: E402
import generated_models as gm  # noqa: E402
import generated_torch as gt  # noqa: E402
from hypothesis import HealthCheck, Phase, given, settings  # noqa: E402
from hypothesis import seed as hypothesis_seed  # noqa: E402

BATCH = 25
TORCH_BATCH = 8


def chunk_seed(seed: int, n: int) -> int:
    """The hypothesis seed of chunk `n` of a run seeded `seed`."""
    return (seed * 1_000_003 + n) % 2**32


def draw_models(seed: int, count: int) -> list[gm.Program]:
    """`count` programs drawn by hypothesis from `seed` (the same seed, the same programs)."""
    drawn: list[gm.Program] = []

    @hypothesis_seed(seed)
    @settings(
        max_examples=count,
        database=None,
        deadline=None,
        phases=(Phase.generate,),
        suppress_health_check=list(HealthCheck),
    )
    @given(gm.models())
    def collect(program: gm.Program) -> None:
        drawn.append(program)

    with gm.seed_only():
        collect()
    return drawn[:count]


@dataclass
class Chunk:
    """What one chunk of generated models found."""

    seed: int
    models: int = 0
    checked: int = 0
    families: dict[str, int] = field(default_factory=dict)
    refused: list[str] = field(default_factory=list)
    torch: int = 0  # models also checked as PyTorch modules through an importer
    iree_torch: list[str] = field(default_factory=list)  # IREE's one-line failures on those batches
    failed: int = 0  # models taken out of their batch for a refusal of many lines (each also a problem)
    rewrites: dict[str, int] = field(default_factory=dict)  # rewrite -> models it ran on
    problems: list[str] = field(default_factory=list)
    seconds: float = 0.0


def run_chunk(
    seed: int, count: int, rewrites_per_batch: int | None = None, torch_models: int = 0, vulkan_every: int = 0
) -> Chunk:
    """`count` models from `seed` in batches of BATCH; `rewrites_per_batch` None runs every rewrite on
    every batch, else that many, taken in turn from the rewrites (vulkan-spirv apart: every
    `vulkan_every`-th batch, 0 never) starting at one the seed picks; the first
    `torch_models` with a torch form also go through PyTorch and an importer (`check_torch`)."""
    start = time.time()
    rotation = tuple(r for r in gc.REWRITES if r != "vulkan-spirv")
    turn = seed % len(rotation)
    programs = draw_models(seed, count)
    chunk = Chunk(seed, len(programs))
    for b, at in enumerate(range(0, len(programs), BATCH)):
        batch = gm.Batch(programs[at : at + BATCH])
        outcome = gc.check_batch(batch, seed + b)
        chunk.checked += outcome.checked
        chunk.refused += outcome.refused
        chunk.failed += len(outcome.failed)
        chunk.problems += [f"batch {b}: {p}" for p in outcome.problems]
        for p in outcome.batch.programs if outcome.batch else ():
            chunk.families[p.family] = chunk.families.get(p.family, 0) + 1
        if not outcome.checked:
            continue
        names = gc.REWRITES
        if rewrites_per_batch is not None:
            first = turn + b * rewrites_per_batch
            names = tuple(rotation[(first + j) % len(rotation)] for j in range(rewrites_per_batch))
            if vulkan_every and b % vulkan_every == 0:
                names += ("vulkan-spirv",)
        for name in names:
            found = gc.check_rewrite(outcome.batch, name, seed + b)
            chunk.rewrites[name] = chunk.rewrites.get(name, 0) + outcome.checked
            chunk.problems += [f"batch {b}: {name}: {p}" for p in found]
            if name == "vulkan-spirv":  # an idle lavapipe device keeps both cores polling (opscope.run.runtime)
                from opscope.run.runtime import release_devices

                release_devices("vulkan")
    if torch_models:
        before = len(gt.IREE_FAILURES)
        chunk.problems += check_torch(programs, seed, torch_models)
        chunk.iree_torch = gt.IREE_FAILURES[before:]
        chunk.torch = min(torch_models, sum(gt.torch_ready(p) for p in programs))
    chunk.seconds = round(time.time() - start, 1)
    return chunk


def torch_indices(programs: list[gm.Program]) -> list[int]:
    """The indices of the programs with a torch form IREE can compile (`generated_torch.torch_ready`,
    no short-window convolution), in order: the ones `check_torch` takes first."""
    from opscope.ir.loading import new_context, parse_module
    from opscope.run.target_limits import short_windows

    return [
        i
        for i, p in enumerate(programs)
        if gt.torch_ready(p) and not short_windows(parse_module(gm.Batch([p]).module(), new_context()))
    ]


def check_torch(programs: list[gm.Program], seed: int, count: int) -> list[str]:
    """The first `count` programs with a torch form (`torch_indices`), as one PyTorch module through
    `.pt2` (even seeds) or ONNX (odd), in batches of 8 against PyTorch."""
    import tempfile

    ready = [programs[i] for i in torch_indices(programs)][:count]
    route = "pt2" if seed % 2 == 0 else "onnx"
    problems = []
    with tempfile.TemporaryDirectory() as folder:
        for at in range(0, len(ready), TORCH_BATCH):
            found = gt.check_torch_batch(ready[at : at + TORCH_BATCH], seed, route, Path(folder))
            problems += [f"torch {at // TORCH_BATCH}: {p}" for p in found]
    return problems


def shrink_command(seed: int, count: int, problem: str, match: str | None, out: Path | None) -> int:
    """Shrink the model behind `problem` (a line of chunk seed `seed`'s problems) and print it."""
    import shrink_models

    programs = draw_models(seed, count)
    failure = shrink_models.locate(problem, seed, count, torch_indices(programs))
    try:
        shrunk = shrink_models.shrink(seed, count, failure, match=match)
    except ValueError as e:
        print(f"fuzz_models: cannot shrink: {e}", file=sys.stderr)
        return 1
    text = gm.Batch([shrunk.program]).module()
    print(shrunk.summary())
    print("\n".join(shrunk.problems))
    print(text)
    if out:
        out.write_text(f"// shrunk from chunk seed {seed}, model {shrunk.index}: {problem}\n{text}")
        print(f"written {out}")
    return 0


def source_commit() -> str:
    """The git commit of the checkout these checks run from (each log line names the code it tested)."""
    import subprocess

    done = subprocess.run(
        ["git", "-C", str(Path(__file__).parent), "rev-parse", "--short", "HEAD"], capture_output=True, text=True
    )
    return done.stdout.strip() or "unknown"


def summary(log: Path) -> dict:
    """A long run's totals from its log, each chunk judged by its newest line: models drawn, checked
    and refused, rewrites and models through PyTorch, chunks with problems, and the chunks and lines
    per commit (the code each ran)."""
    last: dict[int, dict] = {}
    lines = [json.loads(line) for line in log.read_text().splitlines() if line.strip()]
    for entry in lines:
        last[entry["chunk"]] = entry
    chunks = list(last.values())
    rewrites: dict[str, int] = {}
    for c in chunks:
        for name, n in c["rewrites"].items():
            rewrites[name] = rewrites.get(name, 0) + n
    return {
        "chunks": len(chunks),
        "models": sum(c["models"] for c in chunks),
        "checked": sum(c["checked"] for c in chunks),
        "refused": sum(len(c["refused"]) for c in chunks),
        "torch": sum(c["torch"] for c in chunks),
        "rewrites": rewrites,
        "open": sorted(c["chunk"] for c in chunks if c["problems"]),
        "problems_found_on_the_way": sum(len(e["problems"]) for e in lines),
        "commits": sorted({c["commit"] for c in chunks}),
        "hours": round(sum(c["seconds"] for c in chunks) / 3600, 2),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", type=int, default=200)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--per-chunk", type=int, default=100)
    ap.add_argument("--rewrites", type=int, default=None, help="rewrites per batch (default: all of them)")
    ap.add_argument("--torch", type=int, default=16, help="models per chunk also checked through PyTorch")
    ap.add_argument(
        "--vulkan-every", type=int, default=1, help="with --rewrites: vulkan-spirv every Nth batch (0: never)"
    )
    ap.add_argument("--log", type=Path, default=Path("fuzz.jsonl"))
    ap.add_argument("--resume", action="store_true")
    ap.add_argument(
        "--redo-failed", action="store_true", help="with --resume: run again the chunks whose last run had problems"
    )
    ap.add_argument(
        "--chunks", help="A:B: run only chunks A to B-1 of the run (a long run spread over sessions, by ranges)"
    )
    ap.add_argument("--replay", help="SEED:CHUNK: run that chunk again and print its problems")
    ap.add_argument("--replay-chunk-seed", type=int, help="a chunk's own seed (a failing test prints it)")
    ap.add_argument("--shrink", help="SEED:CHUNK: shrink the model behind --problem (tests/shrink_models.py)")
    ap.add_argument("--shrink-chunk-seed", type=int, help="the same, from a chunk's own seed")
    ap.add_argument("--problem", help="with --shrink: one problem line of that chunk, as logged or printed")
    ap.add_argument("--match", help="with --shrink: a regex the shrunk model's problem must match instead")
    ap.add_argument("--out", type=Path, help="with --shrink: write the shrunk model's linalg there")
    ap.add_argument("--summary", action="store_true", help="print the totals of --log (each chunk's newest run)")
    args = ap.parse_args(argv)
    if args.summary:
        print(json.dumps(summary(args.log), indent=1))
        return 0
    if args.shrink or args.shrink_chunk_seed is not None:
        if not args.problem:
            ap.error("--shrink needs --problem: the problem line to shrink, as the log or the run printed it")
        if args.shrink:
            seed, n = (int(x) for x in args.shrink.split(":"))
        at = args.shrink_chunk_seed if args.shrink_chunk_seed is not None else chunk_seed(seed, n)
        return shrink_command(at, args.per_chunk, args.problem, args.match, args.out)
    if args.replay or args.replay_chunk_seed is not None:
        if args.replay:
            seed, n = (int(x) for x in args.replay.split(":"))
        chunk = run_chunk(
            args.replay_chunk_seed if args.replay_chunk_seed is not None else chunk_seed(seed, n),
            args.per_chunk,
            args.rewrites,
            args.torch,
            args.vulkan_every,
        )
        print(json.dumps(chunk.__dict__, indent=1))
        return 1 if chunk.problems else 0
    done = set()
    if args.resume and args.log.exists():
        last = {}  # chunk -> its last line: a chunk run again after fixes is judged by its newest run
        for line in args.log.read_text().splitlines():
            if line.strip():
                entry = json.loads(line)
                last[entry["chunk"]] = entry
        done = {n for n, entry in last.items() if not (args.redo_failed and entry["problems"])}
    elif args.log.exists():
        args.log.unlink()
    chunks = -(-args.models // args.per_chunk)
    first, end = 0, chunks
    if args.chunks:
        first, end = (int(x) for x in args.chunks.split(":"))
        if not 0 <= first < end <= chunks:
            ap.error(f"--chunks {args.chunks}: a range A:B with 0 <= A < B <= {chunks} (the run's chunks)")
    commit = source_commit()
    total = {"checked": 0, "refused": 0, "problems": 0}
    for n in range(first, end):
        if n in done:
            continue
        chunk = run_chunk(chunk_seed(args.seed, n), args.per_chunk, args.rewrites, args.torch, args.vulkan_every)
        with args.log.open("a") as f:
            f.write(json.dumps({"chunk": n, "seed": args.seed, "commit": commit, **chunk.__dict__}) + "\n")
        total["checked"] += chunk.checked
        total["refused"] += len(chunk.refused)
        total["problems"] += len(chunk.problems)
        print(
            f"chunk {n + 1}/{chunks}: {chunk.checked} checked, {len(chunk.refused)} refused, "
            f"{len(chunk.problems)} problems, {chunk.seconds:.0f} s",
            flush=True,
        )
        for p in chunk.problems[:10]:
            print("   ", p[:300], flush=True)
    print(f"done: {total}")
    return 1 if total["problems"] else 0


if __name__ == "__main__":
    sys.exit(main())
