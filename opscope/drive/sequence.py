"""`opscope seq` and `opscope replay`: one model called step after step (§4.1).

* `seq`: decode-like `C = A·W`, A [64,128], W [128,128] fixed (normals, seed 777); A
  starts as normals (seed 1) and takes a random-walk step `A += 0.05·N(0,1)` (seed 2) per
  step > 0. dist `decode`. Expected: the weight is stationary, lhs/out drift.
* `replay`: the "pyramid" MLP (32 rows, 64→128→64→512→64, matmul→relu, He weights, seed
  0xA11CE). With `pool > 0` each step feeds one of `pool` fixed inputs, picked at random
  (exact repeats → memoize); with `pool == 0` a slow walk `x += 0.03·N(0,1)` (→ delta
  compute). dist `replay`; writes the `site,flops` sidecar next to the CSV.

Both record `run_id` 0 and `step` t; M/K/N are the reference's (64,128,128) and (32,64,0).
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from itertools import islice
from pathlib import Path

import numpy as np
from tqdm import tqdm

from opscope.analysis.coverage import coverage
from opscope.errors import OpscopeError
from opscope.ir.loading import new_context, parse_module
from opscope.ir.stat_config import StatConfig
from opscope.models.demo import matmul_module, pyramid_module
from opscope.record.recorder import MODULE_ROW, UNKNOWN_ROW, UNTAPPED_PREFIX, Recorder, write_site_costs
from opscope.run.instrumented import InstrumentedModel

PYRAMID_WIDTHS = (64, 128, 64, 512, 64)
PYRAMID_ROWS = 32


def _normal(seed: int) -> np.random.Generator:
    return np.random.Generator(np.random.Philox(seed))


@dataclass
class SequenceResult:
    """What a sequence driver recorded."""

    out: Path
    steps: int
    rows: int
    parity: float | None  # None: the untapped model does not compile (IREE), results not compared
    site_costs: Path
    seconds: float  # the calls and their recording, not the parity check
    first_outputs: list = field(default_factory=list)  # the model's own results on step 0 (what verify compares)

    def to_dict(self) -> dict:
        """JSON-safe: where and how much was recorded, parity, the time (not the step-0 outputs)."""
        return {
            "out": str(self.out),
            "steps": self.steps,
            "rows": self.rows,
            "parity": self.parity,
            "site_costs": str(self.site_costs),
            "seconds": self.seconds,
        }


def decode_inputs(steps: int) -> Iterator[list[np.ndarray]]:
    """`seq`'s inputs: a drifting A [64,128] and a fixed W [128,128]."""
    w = _normal(777).standard_normal((128, 128)).astype(np.float32)
    a = _normal(1).standard_normal((64, 128))
    walk = _normal(2)
    for t in range(steps):
        if t > 0:
            a = a + 0.05 * walk.standard_normal(a.shape)
        yield [a.astype(np.float32), w]


def pyramid_weights(widths=PYRAMID_WIDTHS, seed: int = 0xA11CE) -> list[np.ndarray]:
    """He-scaled normal weights (scale sqrt(2/fan_in)) for the pyramid MLP."""
    rng = _normal(seed)
    return [(rng.standard_normal((i, o)) * np.sqrt(2.0 / i)).astype(np.float32) for i, o in zip(widths, widths[1:])]


def replay_inputs(
    steps: int, pool: int, rows: int = PYRAMID_ROWS, width: int = PYRAMID_WIDTHS[0], seed: int = 0xA11CE + 1
) -> Iterator[np.ndarray]:
    """`replay`'s activations: picks from a pool of `pool` inputs, or a slow walk if pool == 0."""
    rng = _normal(seed)
    if pool < 0:
        raise OpscopeError(f"replay: pool must be >= 0, got {pool}")
    if pool:
        inputs = [rng.standard_normal((rows, width)).astype(np.float32) for _ in range(pool)]
        for _ in range(steps):
            yield inputs[int(rng.integers(0, pool))]
    else:
        x = rng.standard_normal((rows, width))
        for t in range(steps):
            if t > 0:
                x = x + 0.03 * rng.standard_normal(x.shape)
            yield x.astype(np.float32)


def record_steps(
    model: InstrumentedModel,
    inputs: Iterable[list[np.ndarray]],
    steps: int,
    out: Path,
    dist: str,
    mkn: tuple[int, int, int] | None,
    costs: Path,
    desc: str,
    progress: bool | None = None,
) -> SequenceResult:
    """Call `model` once per step on `inputs`, record each step as (run 0, step t) into `out`
    (M/K/N `mkn`, or each site's own when None), check parity on step 0, and write the
    `site,flops` sidecar `costs` with the module rows (`module_rows`)."""
    rows, parity, seconds, first = 0, 0.0, 0.0, []
    with Recorder(out, mode="w") as rec:
        for t, args in enumerate(
            tqdm(
                islice(inputs, steps),
                total=steps,
                desc=desc,
                unit="step",
                disable=None if progress is None else not progress,
            )
        ):
            t0 = time.perf_counter()
            outputs = model(*args)
            rows += rec.record(0, t, model.target, dist, *(mkn or (None, None, None)), model.manifest, outputs)
            seconds += time.perf_counter() - t0
            if t == 0:
                parity = model.check_parity(args, outputs)
                first = model.original(outputs)
    write_site_costs(costs, model.manifest, module_rows(model))
    return SequenceResult(out, steps, rows, parity, costs, seconds, first)


def module_rows(model: InstrumentedModel) -> dict[str, int]:
    """The sidecar's module rows for `model`: its FLOPs per call, the ops the cost model
    cannot count, and the FLOPs of every kind of op no tapped site covers
    (`opscope.analysis.coverage`), so cost shares are of the whole module."""
    cov = coverage(parse_module(model.base_source, new_context()), [s.name for s in model.manifest.sites])
    rows = {MODULE_ROW: cov.module_flops, UNKNOWN_ROW: cov.unknown_ops}
    rows.update({UNTAPPED_PREFIX + label: flops for label, flops in cov.untapped.items()})
    return rows


def _sidecar(out: Path) -> Path:
    return Path(str(out) + ".sites")


def _check_new(out: Path, steps: int) -> None:
    if steps < 1:
        raise OpscopeError(f"steps must be >= 1, got {steps}")
    if out.exists() and out.stat().st_size:
        raise OpscopeError(f"{out} exists: remove it or choose another --out")


def seq(
    out: str | Path,
    target: str = "llvm-cpu",
    steps: int = 16,
    config: StatConfig = StatConfig(),
    progress: bool | None = None,
) -> SequenceResult:
    """Record the decode-like sequence into `out`."""
    out = Path(out)
    _check_new(out, steps)
    model = InstrumentedModel.build(matmul_module(64, 128, 128, name="decode"), target, config, name="decode")
    return record_steps(
        model, decode_inputs(steps), steps, out, "decode", (64, 128, 128), _sidecar(out), f"seq {target}", progress
    )


def replay(
    out: str | Path,
    target: str = "llvm-cpu",
    steps: int = 20,
    pool: int = 4,
    config: StatConfig = StatConfig(),
    progress: bool | None = None,
) -> SequenceResult:
    """Record the replay workload (a pool of repeated inputs, or a slow walk) into `out`."""
    out = Path(out)
    _check_new(out, steps)
    model = InstrumentedModel.build(pyramid_module(PYRAMID_ROWS, PYRAMID_WIDTHS), target, config, name="pyramid")
    weights = pyramid_weights()
    inputs = ([x, *weights] for x in replay_inputs(steps, pool))
    return record_steps(
        model,
        inputs,
        steps,
        out,
        "replay",
        (PYRAMID_ROWS, PYRAMID_WIDTHS[0], 0),
        _sidecar(out),
        f"replay {target}",
        progress,
    )
