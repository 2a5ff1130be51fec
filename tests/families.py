"""Tiny random-init models of the families users bring, their exports, and independent site counts.

Each torch builder returns `(model, kwargs)`: an eval-mode `nn.Module` (seeded) and the keyword
tensors to call and export it with. Transformers models use `attn_implementation="eager"` (attention
is two matmuls, both sites) and `use_cache=False` with an explicit `attention_mask` (what
transformers-5 needs under torch.export).

The expected site count of a torch model is counted twice, neither time through opscope:
`aten_site_count` walks the core-ATen graph of `torch.export` (`mm`, `addmm`, `bmm`, `baddbmm`,
`convolution`), and each family states its count by construction (`Family.expected`). A JAX
function's count is its jaxpr's `dot_general` and `conv_general_dilated` equations.
"""

from __future__ import annotations

import contextlib
import io
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

SEQ, BATCH, VOCAB = 8, 1, 96
TINY_ENCODER = dict(
    vocab_size=VOCAB,
    hidden_size=32,
    num_hidden_layers=2,
    num_attention_heads=4,
    intermediate_size=64,
    max_position_embeddings=32,
)
STEPS, FEATURES, HIDDEN = 4, 5, 6  # recurrent layers: T, input features, hidden size

# core-ATen ops that are matmuls or convolutions (every linear, matmul and conv lands on one of these)
ATEN_SITES = (
    "aten.mm.default",
    "aten.addmm.default",
    "aten.bmm.default",
    "aten.baddbmm.default",
    "aten.convolution.default",
)


def _torch():
    import torch

    return torch


def _transformers():
    import transformers

    transformers.utils.logging.disable_progress_bar()
    transformers.utils.logging.set_verbosity_error()
    return transformers


def _tokens(seed: int = 0, batch: int = BATCH, seq: int = SEQ, vocab: int = VOCAB) -> dict:
    torch = _torch()
    g = torch.Generator().manual_seed(seed)
    return {
        "input_ids": torch.randint(0, vocab, (batch, seq), generator=g),
        "attention_mask": torch.ones(batch, seq, dtype=torch.long),
    }


def _hf(model_cls: str, config):
    torch = _torch()
    torch.manual_seed(0)
    return getattr(_transformers(), model_cls)(config).eval()


def bert():
    tf = _transformers()
    cfg = tf.BertConfig(**TINY_ENCODER, attn_implementation="eager")
    return _hf("BertModel", cfg), _tokens()


def _t5_config(**extra):
    tf = _transformers()
    return tf.T5Config(
        vocab_size=VOCAB,
        d_model=32,
        d_kv=8,
        d_ff=64,
        num_layers=2,
        num_decoder_layers=2,
        num_heads=4,
        relative_attention_num_buckets=8,
        use_cache=False,
        decoder_start_token_id=0,
        attn_implementation="eager",
        **extra,
    )


def t5_encoder():
    return _hf("T5EncoderModel", _t5_config()), _tokens()


def t5():
    torch = _torch()
    kwargs = _tokens()
    kwargs["decoder_input_ids"] = torch.randint(0, VOCAB, (BATCH, SEQ // 2), generator=torch.Generator().manual_seed(1))
    return _hf("T5ForConditionalGeneration", _t5_config()), kwargs


def vit(image: int = 32, patch: int = 8):
    torch = _torch()
    tf = _transformers()
    cfg = tf.ViTConfig(
        image_size=image,
        patch_size=patch,
        num_channels=3,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=64,
        attn_implementation="eager",
    )
    return _hf("ViTModel", cfg), {
        "pixel_values": torch.randn(BATCH, 3, image, image, generator=torch.Generator().manual_seed(0))
    }


# The smallest image IREE 3.13 compiles ResNet-18 at: at <= 32 px its last stage's stride-2 conv has a
# 1x1 output, which fails plain iree-compile (tests/test_families.py `test_iree_stride2_conv_to_1x1`).
RESNET_IMAGE = 33


def resnet18(image: int = RESNET_IMAGE):
    """ResNet-18's layer config (basic blocks, depths 2-2-2-2), narrow (8..64 channels)."""
    torch = _torch()
    tf = _transformers()
    cfg = tf.ResNetConfig(
        num_channels=3,
        embedding_size=8,
        hidden_sizes=[8, 16, 32, 64],
        depths=[2, 2, 2, 2],
        layer_type="basic",
        hidden_act="relu",
        downsample_in_first_stage=False,
    )
    return _hf("ResNetModel", cfg), {
        "pixel_values": torch.randn(BATCH, 3, image, image, generator=torch.Generator().manual_seed(0))
    }


def mobilenet_v2(image: int = 32):
    torch = _torch()
    tf = _transformers()
    cfg = tf.MobileNetV2Config(num_channels=3, image_size=image, depth_multiplier=0.25, min_depth=4)
    return _hf("MobileNetV2Model", cfg), {
        "pixel_values": torch.randn(BATCH, 3, image, image, generator=torch.Generator().manual_seed(0))
    }


def _decoder_config(name: str, **extra):
    """A decoder's config of the tiny encoder's sizes (2 layers, width 32, 4 heads), eager and cache-free."""
    return getattr(_transformers(), name)(**TINY_ENCODER, use_cache=False, attn_implementation="eager", **extra)


def qwen2():
    return _hf("Qwen2Model", _decoder_config("Qwen2Config", num_key_value_heads=2)), _tokens()


def phi():
    return _hf("PhiModel", _decoder_config("PhiConfig", num_key_value_heads=4, partial_rotary_factor=0.5)), _tokens()


def _recurrent_class():
    torch = _torch()

    class RecurrentNet(torch.nn.Module):
        """An LSTM or GRU (2 layers, batch first) and a Linear head on its outputs."""

        def __init__(self, cell: str, layers: int = 2):
            super().__init__()
            self.rnn = getattr(torch.nn, cell)(FEATURES, HIDDEN, num_layers=layers, batch_first=True)
            self.fc = torch.nn.Linear(HIDDEN, 3)

        def forward(self, x):
            y, _ = self.rnn(x)
            return self.fc(y)

    return RecurrentNet


def _recurrent(cell: str):
    torch = _torch()
    torch.manual_seed(0)
    model = _recurrent_class()(cell).eval()
    return model, {"x": torch.randn(2, STEPS, FEATURES, generator=torch.Generator().manual_seed(0))}


def lstm():
    return _recurrent("LSTM")


def gru():
    return _recurrent("GRU")


def _cnn_class():
    torch = _torch()
    nn = torch.nn

    class SmallCNN(nn.Module):
        """conv → ReLU → max-pool → conv (stride 2) → ReLU → global average → Linear: two convs and one matmul."""

        def __init__(self):
            super().__init__()
            self.conv1 = nn.Conv2d(3, 8, 3, padding=1)
            self.pool = nn.MaxPool2d(2)
            self.conv2 = nn.Conv2d(8, 16, 3, stride=2, padding=1)
            self.fc = nn.Linear(16, 10)

        def forward(self, x):
            h = self.pool(torch.relu(self.conv1(x)))
            h = torch.relu(self.conv2(h)).mean(dim=(2, 3))
            return self.fc(h)

    return SmallCNN


def small_cnn():
    torch = _torch()
    torch.manual_seed(0)
    return _cnn_class()().eval(), {"x": torch.randn(2, 3, 16, 16, generator=torch.Generator().manual_seed(0))}


# -- JAX ------------------------------------------------------------------------------------


def jax_mlp():
    """A 3-layer MLP (named scopes fc0..fc2) on a [16, 32] batch: 3 dot_generals."""
    import jax
    import jax.numpy as jnp

    keys = jax.random.split(jax.random.PRNGKey(0), 3)
    sizes = [(32, 64), (64, 64), (64, 10)]
    params = [(jax.random.normal(k, s, jnp.float32) * 0.1, jnp.zeros(s[1], jnp.float32)) for k, s in zip(keys, sizes)]

    def mlp(x):
        for i, (w, b) in enumerate(params):
            with jax.named_scope(f"fc{i}"):
                x = x @ w + b
            if i < len(params) - 1:
                x = jax.nn.relu(x)
        return x

    return mlp, (jnp.zeros((16, 32), jnp.float32),)


def jax_attention(layers: int = 2, d: int = 32, heads: int = 4, seq: int = SEQ):
    """Self-attention blocks (q, k, v, scores, mix, out, up, down per layer): 8 dot_generals a layer."""
    import jax
    import jax.numpy as jnp

    rng = iter(jax.random.split(jax.random.PRNGKey(1), 6 * layers))
    shapes = dict(q=(d, d), k=(d, d), v=(d, d), o=(d, d), up=(d, 2 * d), down=(2 * d, d))
    params = [{n: jax.random.normal(next(rng), s, jnp.float32) * 0.1 for n, s in shapes.items()} for _ in range(layers)]
    hd = d // heads

    def attention(x):
        for i, p in enumerate(params):
            with jax.named_scope(f"layer{i}"):
                with jax.named_scope("attn"):

                    def split(t):
                        return t.reshape(seq, heads, hd).transpose(1, 0, 2)

                    with jax.named_scope("q"):
                        q = split(x @ p["q"])
                    with jax.named_scope("k"):
                        k = split(x @ p["k"])
                    with jax.named_scope("v"):
                        v = split(x @ p["v"])
                    with jax.named_scope("scores"):
                        s = jnp.einsum("hqd,hkd->hqk", q, k) / jnp.sqrt(jnp.float32(hd))
                    with jax.named_scope("mix"):
                        a = jnp.einsum("hqk,hkd->hqd", jax.nn.softmax(s, axis=-1), v)
                    with jax.named_scope("out"):
                        x = x + a.transpose(1, 0, 2).reshape(seq, d) @ p["o"]
                with jax.named_scope("ffn"):
                    with jax.named_scope("up"):
                        h = jax.nn.gelu(x @ p["up"])
                    with jax.named_scope("down"):
                        x = x + h @ p["down"]
        return x

    return attention, (jnp.zeros((seq, d), jnp.float32),)


def jaxpr_site_count(fn, args) -> int:
    """`dot_general` + `conv_general_dilated` equations of `fn`'s jaxpr, nested jaxprs included."""
    import jax
    from jax.extend.core import jaxprs_in_params

    def count(jaxpr) -> int:
        n = 0
        for eqn in jaxpr.eqns:
            n += eqn.primitive.name in ("dot_general", "conv_general_dilated")
            for sub in jaxprs_in_params(eqn.params):
                n += count(sub)
        return n

    return count(jax.make_jaxpr(fn)(*args).jaxpr)


def save_jaxexport(fn, args, path: Path) -> Path:
    import jax

    path.write_bytes(jax.export.export(jax.jit(fn))(*args).serialize())
    return path


# -- torch exports and counts ---------------------------------------------------------------


@contextlib.contextmanager
def quiet():
    """Exporters print progress and warn about their own deprecations: none of it is the test's."""
    with (
        warnings.catch_warnings(),
        contextlib.redirect_stdout(io.StringIO()),
        contextlib.redirect_stderr(io.StringIO()),
    ):
        warnings.simplefilter("ignore")
        yield


def forward_hooked(model, kwargs: dict, handles: list) -> None:
    """One eager forward of `model` with its hooks `handles` registered, removed after."""
    torch = _torch()
    try:
        with torch.no_grad():
            model(**kwargs)
    finally:
        for handle in handles:
            handle.remove()


def exported(model, kwargs):
    torch = _torch()
    with quiet():
        return torch.export.export(model, (), kwargs, strict=False)


def aten_site_count(model, kwargs) -> int:
    """mm/addmm/bmm/baddbmm/convolution nodes of the core-ATen graph of `torch.export` (oneDNN off, so a
    recurrent layer unrolls into per-step mms as in opscope's import)."""
    torch = _torch()
    mkldnn = torch.backends.mkldnn.enabled
    torch.backends.mkldnn.enabled = False
    try:
        with quiet():
            prog = exported(model, kwargs).run_decompositions()
    finally:
        torch.backends.mkldnn.enabled = mkldnn
    return sum(1 for n in prog.graph.nodes if n.op == "call_function" and str(n.target) in ATEN_SITES)


def save_pt2(model, kwargs, path: Path) -> Path:
    _torch().export.save(exported(model, kwargs), str(path))
    return path


def _positional(model, names: list[str]):
    """`model` with a `forward(*args)` that passes its arguments on by name, for the legacy exporter.

    The legacy exporter (`_decide_input_format`) appends every defaulted parameter of forward() to the
    positional arguments (`use_cache=None` among them), and transformers-5's `merge_with_config_defaults`
    then adds `use_cache` from the config as a keyword: "forward() got multiple values for argument
    'use_cache'". The class is swapped, not wrapped, so node names keep the model's own module paths.
    """
    base = type(model)
    if not base.__module__.startswith("transformers."):
        return model

    class Positional(base):
        def forward(self, *args):
            return base.forward(self, **dict(zip(names, args)))

    model.__class__ = Positional
    return model


def save_onnx(model, kwargs, path: Path, dynamo: bool) -> Path:
    """torch.onnx.export: the default (dynamo) exporter, or the legacy TorchScript one; inputs named as kwargs."""
    torch = _torch()
    names = list(kwargs)
    with quiet():
        if dynamo:
            torch.onnx.export(model, (), str(path), kwargs=kwargs, dynamo=True, input_names=names)
        else:
            torch.onnx.export(
                _positional(model, names), tuple(kwargs.values()), str(path), dynamo=False, input_names=names
            )
    return path


@dataclass(frozen=True)
class Family:
    """A model family: its builder, its sites by construction, and the routes a user brings it by.

    `routes` run in the default suite; `full_routes` only with `-m families_full`.
    """

    name: str
    build: Callable
    expected: int
    routes: tuple[str, ...]
    full_routes: tuple[str, ...] = ()
    jax: bool = False


def save(family: Family, route: str, folder: Path) -> Path:
    """Export `family` by `route` ('pt2', 'onnx' = dynamo exporter, 'onnx-legacy', 'jaxexport') into `folder`."""
    built, inputs = family.build()
    if route == "jaxexport":
        return save_jaxexport(built, inputs, folder / f"{family.name}.jaxexport")
    if route == "pt2":
        return save_pt2(built, inputs, folder / f"{family.name}.pt2")
    return save_onnx(built, inputs, folder / f"{family.name}-{route}.onnx", dynamo=route == "onnx")
