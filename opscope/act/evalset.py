"""The real inputs a what-if is measured on: a model, batches of its inputs, and what its output is.

Zoo models bring held-out data sized for the question: `smollm2` (and the tiny causal LMs)
as many corpus sentences as give `tokens` predicted next tokens (2,000 by default), `minilm`
64 sentences of the corpus, `digits` the 448 held-out images of its test split with their
labels. Any other model (a file, MLIR) is measured on its outputs (`task="outputs"`) for the
inputs the drivers give it (`--inputs` files, `--text` through a tokenizer, else generated
from its signature); a user's own language model can say `task="causal-lm"` with `--text`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from tempfile import TemporaryDirectory

import numpy as np

from opscope.act.quality import check_task
from opscope.drive.inputs import check_feed
from opscope.errors import OpscopeError
from opscope.models.source import ModelSource, is_zoo_name, open_apart
from opscope.models.zoo import DIGITS_BATCH, get_entry

DEFAULT_TOKENS = 2000
MINILM_STEPS = 8  # 64 sentences
DEFAULT_STEPS = 4  # a model that brings no data


@dataclass(frozen=True)
class EvalSet:
    """A model and the batches a what-if runs both builds on."""

    name: str
    task: str  # causal-lm | encoder | classifier | outputs (`opscope.act.quality`)
    module: str | bytes  # MLIR text or bytecode of the original model
    batches: list[list[np.ndarray]]
    labels: list[np.ndarray] | None = field(default=None, repr=False)
    data: str = ""  # what the batches are, in words
    weights: TemporaryDirectory | None = field(default=None, repr=False, compare=False)  # its parameter file's folder

    @property
    def examples(self) -> int:
        return sum(len(b[0]) for b in self.batches)

    def digest(self) -> str:
        """A hash of the model and its batches: what names a job measured on this set (`opscope.jobs`)."""
        from opscope.jobs.shards import content_digest

        module = self.module if isinstance(self.module, bytes) else self.module.encode()
        return content_digest([module, *(np.asarray(a) for batch in self.batches for a in batch)])

    def shipped(self) -> EvalSet:
        """This set as a job's argument: without its parameter file's folder, which stays this process's
        (workers on this machine map the one file; a cluster elsewhere needs it on a shared file system)."""
        import dataclasses

        return dataclasses.replace(self, weights=None)


def predicted_tokens(batch: Sequence[np.ndarray]) -> int:
    """Next-token predictions a causal LM makes on one batch: positions whose token and next token are real."""
    ids = batch[0]
    mask = batch[1] if len(batch) > 1 and np.shape(batch[1]) == np.shape(ids) else np.ones_like(ids)
    return int(((mask[:, :-1] != 0) & (mask[:, 1:] != 0)).sum())


def steps_for_tokens(inputs: Callable[[int], list[list[np.ndarray]]], tokens: int, most: int = 400) -> int:
    """The fewest steps of `inputs(steps)` that give `tokens` predicted tokens (doubling, then exact)."""
    steps = 1
    while True:
        batches = inputs(steps)
        counts = np.cumsum([predicted_tokens(b) for b in batches])
        if counts[-1] >= tokens:
            return int(np.searchsorted(counts, tokens) + 1)
        if steps >= most:
            raise OpscopeError(f"{tokens} predicted tokens need more than {most} batches of this model's data")
        steps = min(2 * steps, most)


def eval_set(
    source,
    *,
    task: str | None = None,
    tokens: int = DEFAULT_TOKENS,
    steps: int | None = None,
    inputs=None,
    text: str | Path | Sequence[str] | None = None,
    tokenizer: str | Path | None = None,
    progress: Callable[[str], None] | None = None,
    parameters: bool | None = None,
    weights_dtype: str | None = None,
) -> EvalSet:
    """The evaluation set of `source` (a zoo name, a model file, MLIR): see the module docstring.
    `parameters`: the model's weights go to a parameter file in a temporary folder that every
    build maps (`opscope.models.source.open_apart`; None: so for a large model), float32 ones
    stored as `weights_dtype` when given."""
    if tokens < 1:
        raise OpscopeError(f"tokens must be >= 1, got {tokens}")
    check_feed(inputs, text, tokenizer)
    if isinstance(source, str) and is_zoo_name(source) and inputs is None and text is None:
        return _zoo(source, task, tokens, steps, progress, parameters, weights_dtype)
    from opscope.drive.profile import resolve_inputs

    model: ModelSource
    model, folder = open_apart(
        source, steps or DEFAULT_STEPS, progress=progress, parameters=parameters, weights_dtype=weights_dtype
    )
    task = check_task(task or model.task)
    batches, label = resolve_inputs(model, steps or DEFAULT_STEPS, inputs, text, tokenizer)
    if task == "classifier":
        raise OpscopeError("task classifier needs labels, which only the zoo's digits brings; use task outputs")
    return EvalSet(model.name, task, _source(model.module), batches, None, f"{len(batches)} batches of {label}", folder)


def _zoo(
    name: str,
    task: str | None,
    tokens: int,
    steps: int | None,
    progress,
    parameters: bool | None,
    weights_dtype: str | None,
) -> EvalSet:
    """A zoo model with held-out data sized for its task."""
    entry = get_entry(name)
    task = check_task(task or entry.task)
    if steps is None:
        if entry.task == "causal-lm":
            steps = steps_for_tokens(_token_inputs(name), tokens)
        elif name == "minilm":
            steps = MINILM_STEPS
        elif name == "digits":
            from opscope.models.digits import train_digits

            steps = len(train_digits().x_test) // DIGITS_BATCH  # held-out images only
        else:
            steps = DEFAULT_STEPS
    model, folder = open_apart(name, steps, progress=progress, parameters=parameters, weights_dtype=weights_dtype)
    source, inputs, dist, display = model.module, model.inputs, model.dist, model.name
    batches = [list(b) for b in inputs]
    labels = None
    if name == "digits":
        from opscope.models.digits import digit_labels

        every = digit_labels(DIGITS_BATCH * steps)
        labels = [every[t * DIGITS_BATCH : (t + 1) * DIGITS_BATCH] for t in range(steps)]
    data = {
        "causal-lm": f"{sum(predicted_tokens(b) for b in batches):,} predicted tokens",
        "encoder": f"{sum(len(b[0]) for b in batches)} sentences",
        "classifier": f"{sum(len(b[0]) for b in batches)} held-out images",
    }.get(entry.task, f"{steps} batches")
    return EvalSet(display, task, _source(source), batches, labels, f"{data} ({dist})", folder)


def _token_inputs(name: str) -> Callable[[int], list[list[np.ndarray]]]:
    """The real inputs of zoo causal LM `name` for a number of steps, without building the model."""
    from opscope.models import zoo

    if name == "smollm2":
        return zoo.smollm2_inputs
    from opscope.models.huggingface import TINY_VOCAB

    return lambda steps: zoo.tiny_inputs(steps, TINY_VOCAB)


def _source(module) -> str | bytes:
    """MLIR text or bytecode of a resolved model's module."""
    from iree.compiler import ir

    from opscope.ir.loading import module_bytecode

    return module_bytecode(module) if isinstance(module, ir.Module) else module
