"""Request streams for live serving: a pool of real inputs replayed in a Zipf order.

A production stream repeats some requests far more than others; a Zipf law over a pool
(request of popularity rank r drawn with probability ∝ r^−s) is the usual model of it, and
s = 0 is the reference's uniform replay of a pool. The pool is real where the model brings
real inputs: a zoo text model's requests are sentences of the Python Language Reference
(`opscope.models.corpus`) through the model's own tokenizer, one sentence per call; a model
file's are generated from its signature. The trace knows its own truth (which pool entry each
request is), so a report can be checked against the exact recurrence.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from tempfile import TemporaryDirectory

import numpy as np
from iree.compiler import ir

from opscope.drive.inputs import generate
from opscope.errors import OpscopeError
from opscope.ir.arguments import arguments
from opscope.ir.loading import new_context, parse_module
from opscope.models.demo import mlp_module
from opscope.models.source import ModelSource, open_apart

DEMO_REQUESTS, DEMO_POOL, DEMO_EVERY, DEMO_SEED = 500, 8, 5, 0x11FE  # the reference's opscope-live
DEMO_LAYERS, DEMO_WIDTH, DEMO_ROWS = 4, 64, 16


@dataclass(frozen=True)
class Trace:
    """`order[i]` is the pool entry request i sends; `labels[j]` names pool entry j."""

    pool: list[list[np.ndarray]]
    labels: list[str]
    order: np.ndarray
    description: str

    def __len__(self) -> int:
        return len(self.order)

    def requests(self, start: int = 0, stride: int = 1) -> Iterator[tuple[list[np.ndarray], str]]:
        """(inputs, label) of requests start, start + stride, ... (one worker's share)."""
        for j in self.order[start::stride]:
            yield self.pool[int(j)], self.labels[int(j)]

    def exact_recurrence(self) -> float:
        """The stream's truth: the share of requests that repeat an earlier one."""
        return 1.0 - len(np.unique(self.order)) / len(self.order) if len(self.order) else 0.0

    def exact_sampled_recurrence(self, every: int, workers: int = 1) -> float:
        """The truth of the reference's estimate: 1 − distinct/samples over the sampled requests (each of
        `workers` serves every `workers`-th request and samples its own calls N, 2N, ...)."""
        sampled = np.concatenate([self.order[w::workers][every - 1 :: every] for w in range(workers)])
        return 1.0 - len(np.unique(sampled)) / len(sampled) if len(sampled) else 0.0


def zipf_order(pool: int, requests: int, s: float, seed: int = 0) -> np.ndarray:
    """`requests` pool indices, index r drawn with probability ∝ (r + 1)^−s (s = 0: uniform)."""
    if pool < 1 or requests < 1:
        raise OpscopeError(f"trace: pool and requests must be >= 1, got pool {pool}, requests {requests}")
    if not np.isfinite(s) or s < 0:
        raise OpscopeError(f"trace: the Zipf exponent must be >= 0 (0: uniform), got {s}")
    rng = np.random.Generator(np.random.Philox(seed))
    if s == 0:
        return rng.integers(0, pool, requests)
    p = np.arange(1, pool + 1, dtype=np.float64) ** -s
    return rng.choice(pool, size=requests, p=p / p.sum())


def demo_trace(
    requests: int = DEMO_REQUESTS, pool: int = DEMO_POOL, seed: int = DEMO_SEED, zipf: float = 0.0
) -> tuple[str, Trace]:
    """The reference's live demo: a 4-layer matmul→relu MLP on [16, 64] (weights built in), a pool of
    random inputs replayed uniformly; returns (MLIR text, trace)."""
    module = mlp_module(DEMO_LAYERS, DEMO_WIDTH, DEMO_ROWS, weights="globals")
    rng = np.random.Generator(np.random.Philox(seed))
    inputs = [[rng.standard_normal((DEMO_ROWS, DEMO_WIDTH)).astype(np.float32)] for _ in range(pool)]
    order = zipf_order(pool, requests, zipf, seed)
    what = "uniformly" if zipf == 0 else f"Zipf s={zipf:g}"
    return module, Trace(
        inputs,
        [f"input #{i}" for i in range(pool)],
        order,
        f"{requests} requests over a pool of {pool} random [16,64] inputs, drawn {what}",
    )


def model_trace(
    source, requests: int, pool: int, zipf: float, seed: int = 0, parameters: bool | None = None
) -> tuple[ModelSource, Trace, TemporaryDirectory | None]:
    """A model's trace: a zoo model built for one example per call with `pool` of its own inputs
    (text models: corpus sentences, labelled by their text), or a file's signature-generated inputs;
    and the temporary folder of the parameter file its builds map (`open_apart`: `parameters`, or
    None for a model of 128 MiB or more; None when the weights stay in the module), to keep while
    they run."""
    if pool < 1 or requests < 1:
        raise OpscopeError(f"trace: pool and requests must be >= 1, got pool {pool}, requests {requests}")
    model, held = open_apart(source, steps=pool, batch=1, parameters=parameters)
    order = zipf_order(pool, requests, zipf, seed)
    if model.inputs is not None:
        inputs = [list(x) for x in model.inputs][:pool]
        if model.tokenizer is not None:
            from opscope.models.corpus import sentences

            labels = sentences(pool)
        else:
            labels = [f"{model.dist} input #{i}" for i in range(pool)]
    else:  # a file is imported to a module already; MLIR text or bytecode is parsed for its signature
        module = model.module
        args = arguments(module if isinstance(module, ir.Module) else parse_module(module, new_context(), model.name))
        inputs = list(generate(args, pool, seed))
        labels = [f"generated input #{i}" for i in range(pool)]
    what = "uniformly" if zipf == 0 else f"Zipf s={zipf:g}"
    trace = Trace(
        inputs,
        labels,
        order,
        f"{requests} requests over a pool of {pool} inputs ({labels[0][:40]}"
        f"{'…' if len(labels[0]) > 40 else ''}, ...), drawn {what}",
    )
    return model, trace, held
