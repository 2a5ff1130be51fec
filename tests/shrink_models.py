"""A failing generated model shrunk to the smallest model that still fails the same way.

Hypothesis draws the chunk's models again (the same seed, the same order as `fuzz_models.draw_models`)
without checking them until it reaches the failing one, checks that one alone (one model a compile),
and once it fails shrinks it with hypothesis's own shrinker: fewer layers, fewer heads, smaller dims,
simpler dtypes, each step checked alone and kept only if it fails with the same problem (the
problem's words, numbers and model names aside: `signature`). Hypothesis stops shrinking after 500
steps or 5 minutes. The smallest model's linalg and problems are what a regression test starts from.

    python tests/fuzz_models.py --shrink 1:7 --problem "batch 2: m4: result 0 is 1.2 from numpy's (bound 1e-05)"
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import generated_checks as gc
import generated_models as gm
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import seed as hypothesis_seed

BATCH = 25
TORCH_BATCH = 8

_LINE = re.compile(r"^(?P<where>batch|torch) (?P<n>\d+): (?P<rest>.*)$", re.S)
_TAG = re.compile(r"(?:^|: )(?P<tag>m\d+|batch)\b")  # the first model a problem names (after a stage's prefix)


@dataclass(frozen=True)
class Failure:
    """One problem of a chunk: the models of the chunk it may belong to (the one it names first) and the
    stage that found it: `check` (`check_batch`), a rewrite's name, or `torch` (its route in `route`)."""

    candidates: tuple[int, ...]
    stage: str
    problem: str
    seed: int  # the seed `check_batch` / `check_rewrite` / `check_torch_batch` was given for that batch
    route: str = ""


def locate(problem: str, seed: int, count: int, torch_ready: list[int] | None = None) -> Failure:
    """Where a problem line of `fuzz_models.run_chunk` (as logged or printed) came from. A model named
    `m<i>` in batch b is the chunk's model 25·b + i, or a later one of that batch where models before it
    were refused; a problem of the whole batch may be any of its models; `torch k` problems any of the
    k-th eight of `torch_ready` (the chunk's indices of models with a torch form)."""
    line = _LINE.match(problem.strip())
    if not line:
        raise ValueError(f"not a problem line of a chunk ('batch N: …' or 'torch N: …'): {problem[:80]!r}")
    n, rest = int(line["n"]), line["rest"]
    if line["where"] == "torch":
        ready = torch_ready or []
        route = rest.split(":", 1)[0]
        return Failure(tuple(ready[n * TORCH_BATCH : (n + 1) * TORCH_BATCH]), "torch", problem, seed, route)
    stage = "check"
    head, _, tail = rest.partition(": ")
    if head in gc.REWRITES:
        stage, rest = head, tail
    first, last = n * BATCH, min((n + 1) * BATCH, count)
    tag = _TAG.search(rest)
    at = first + int(tag["tag"][1:]) if tag and tag["tag"] != "batch" else first
    return Failure(tuple(range(at, last)), stage, problem, seed + n)


def signature(problem: str) -> str:
    """What stays of a problem when its model shrinks: its words, without the batch, model names and
    numbers (`batch 3: m7: site m7.mm2 counts 96 FLOPs` and `batch 0: m0: site m0.mm0 counts 8 FLOPs`
    are the same problem)."""
    line = _LINE.match(problem.strip())
    text = line["rest"] if line else problem
    text = re.sub(r"\bm\d+\b", "m", text)
    return re.sub(r"[-+]?\d+(\.\d+)?(e[-+]?\d+)?", "#", text).strip()  # a value's sign is a number's too


def problems_alone(program: gm.Program, failure: Failure) -> list[str]:
    """`program` checked alone at `failure`'s stage, its problems as `run_chunk` would log them (a
    batch of one: `batch 0: …`, `torch 0: …`)."""
    if failure.stage == "torch":
        import tempfile
        from pathlib import Path

        import generated_torch as gt

        with tempfile.TemporaryDirectory() as folder:
            found = gt.check_torch_batch([program], failure.seed, failure.route, Path(folder))
        return [f"torch 0: {p}" for p in found]
    outcome = gc.check_batch(gm.Batch([program]), failure.seed)
    found = [f"batch 0: {p}" for p in outcome.problems]
    if failure.stage != "check" and outcome.checked:
        found += [
            f"batch 0: {failure.stage}: {p}" for p in gc.check_rewrite(outcome.batch, failure.stage, failure.seed)
        ]
    return found


Check = Callable[[gm.Program, Failure], list[str]]


@dataclass
class Shrunk:
    """A shrinking's result: the smallest failing model, its problems, and how it got there."""

    program: gm.Program
    problems: list[str]
    index: int  # the chunk's model it started from
    original: gm.Program
    steps: int = 0  # models checked while shrinking
    seconds: float = 0.0
    matching: list[str] = field(default_factory=list)  # the problems that matched the original's

    def summary(self) -> str:
        was, now = self.original, self.program
        return (
            f"model {self.index} ({was.family}): {len(was.lines)} ops, {len(was.expected.sites)} sites → "
            f"{len(now.lines)} ops, {len(now.expected.sites)} sites in {self.steps} checks, {self.seconds:.0f} s"
        )


def reproduces(program: gm.Program, failure: Failure, check: Check, match: re.Pattern | None) -> list[str]:
    """The problems of `program` alone that are `failure`'s (by `match`, else by `signature`)."""
    try:
        found = check(program, failure)
    except Exception as e:  # a crash is a problem of its own: it matches only a crash of the same kind
        found = [f"batch 0: raised {type(e).__name__}: {' '.join(str(e).split())[:300]}"]
    if match is not None:
        return [p for p in found if match.search(p)]
    want = signature(failure.problem)
    return [p for p in found if signature(p) == want]


def shrink(seed: int, count: int, failure: Failure, check: Check = problems_alone, match: str | None = None) -> Shrunk:
    """The smallest model that fails like `failure` does, shrunk from the first of its candidates
    that fails alone (`count` models drawn from chunk seed `seed`). Raises ValueError where none does
    alone (the problem needs its batch: a regression must keep the batch)."""
    pattern = re.compile(match) if match else None
    programs = draw(seed, count)
    start = time.time()
    origin = next((i for i in failure.candidates if reproduces(programs[i], failure, check, pattern)), None)
    if origin is None:
        raise ValueError(
            f"no model of {list(failure.candidates)[:8]}… fails alone with {signature(failure.problem)!r}: "
            "the problem needs its batch (or --match a looser pattern)"
        )
    want = gm.Batch([programs[origin]]).module()
    calls, failing, steps, drift = [0], [], [0], []

    @hypothesis_seed(seed)
    @settings(
        max_examples=count,
        database=None,
        deadline=None,
        phases=(Phase.generate, Phase.shrink),
        suppress_health_check=list(HealthCheck),
        report_multiple_bugs=False,
    )
    @given(gm.models())
    def fails(program: gm.Program) -> None:
        calls[0] += 1
        if not failing:
            if calls[0] - 1 != origin:
                return
            if gm.Batch([program]).module() != want:  # not a failure: hypothesis must not shrink it
                drift.append(origin)
                return
        steps[0] += 1
        found = reproduces(program, failure, check, pattern)
        if found:
            failing.append((program, found))
            raise AssertionError(found[0])

    try:
        with gm.seed_only():  # as draw_models drew them
            fails()
    except AssertionError:
        pass
    if drift:
        raise ValueError(f"hypothesis drew another model at {origin} than the chunk's: its order changed")
    if not failing:
        raise ValueError(f"model {origin} did not fail again when drawn by hypothesis (a flaky problem?)")
    program, found = failing[-1]
    return Shrunk(program, found, origin, programs[origin], steps[0], time.time() - start, found)


def draw(seed: int, count: int) -> list[gm.Program]:
    from fuzz_models import draw_models

    return draw_models(seed, count)
