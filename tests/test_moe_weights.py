"""A MoE's expert weights, gathered per token from a bank, are weights: counted once, fake-quantized,
read and replaced (`opscope.ir.weight_source`).

The model is the tiny Mixtral (2 layers, 4 experts, top-2, `batched_mm` experts) built in the test;
the references are its own parameters and the same model run in torch with every weight rounded by
numpy the way `fakequant-weights` rounds it.
"""

from __future__ import annotations

import numpy as np
import pytest

import opscope
from opscope.models.zoo import missing_extra, missing_message

pytestmark = pytest.mark.skipif(missing_extra("torch"), reason=missing_message("this test", "torch"))

INPUTS = ("input_ids", "attention_mask")


@pytest.fixture(scope="module")
def mixtral():
    """(torch model, kwargs, the imported module's text, with the locations that name its sites)."""
    from opscope.importers.torch_fx import import_torch
    from opscope.ir.loading import module_text
    from opscope.models import huggingface

    model, kwargs = huggingface.tiny_mixtral()
    return model, kwargs, module_text(import_torch(model, (), example_kwargs=kwargs), debug_info=True)


def parsed(text: str):
    from opscope.ir.loading import new_context, parse_module

    return parse_module(text, new_context())


def matmul_weights(model) -> dict[str, np.ndarray]:
    """Every weight a matmul reads: Linear weights and the experts' banks (not the embedding table)."""
    return {n: p.detach().numpy() for n, p in model.named_parameters() if p.dim() >= 2 and "embed_tokens" not in n}


def test_expert_banks_are_counted_once_as_stored(mixtral):
    from opscope.act.weights import weight_bytes

    model, _, text = mixtral
    want = matmul_weights(model)
    assert any("experts.gate_up_proj" in n for n in want) and any("experts.down_proj" in n for n in want)
    assert weight_bytes(parsed(text)) == sum(w.nbytes for w in want.values())
    # 4 bits per element and one f32 scale per output channel: a bank [E, out, K] has E·out channels
    bits4 = sum(w.size // 2 + 4 * (w.size // w.shape[-1]) for w in want.values())
    assert weight_bytes(parsed(text), "fakequant-weights{bits=4}") == bits4


def test_read_weights_reads_each_expert_bank_whole(mixtral):
    from opscope.ir.weights import read_weights

    model, _, text = mixtral
    banks = {n: w for n, w in matmul_weights(model).items() if ".experts." in n}
    read = {w.name: w for w in read_weights(parsed(text)) if w.name.endswith(("experts", "experts#1"))}
    assert sorted(read) == [f"model.layers.{i}.mlp.experts{s}" for i in (0, 1) for s in ("", "#1")]
    for i in (0, 1):
        for name, param in (("experts", "gate_up_proj"), ("experts#1", "down_proj")):
            w = read[f"model.layers.{i}.mlp.{name}"]
            want = banks[f"model.layers.{i}.mlp.experts.{param}"]
            assert w.shape == want.shape and w.k_dims == (2,)
            np.testing.assert_array_equal(w.matrix(), want.reshape(-1, want.shape[-1]))


def test_fakequant_weights_rounds_the_experts_as_torch_does(mixtral):
    """The compiled fake-quant module equals torch with every matmul weight, the expert banks among
    them, rounded per output channel in numpy; without the banks rounded it does not."""
    import torch
    from test_fakequant import emulate

    from opscope.pipeline.textual import parse_pipeline, run_pipeline

    model, kwargs, text = mixtral
    module = parsed(text)
    run_pipeline(module, parse_pipeline("fakequant-weights{bits=4}"))
    assert "tensor<4x128x32xf32>" in str(module)
    loaded = opscope.load(opscope.compile(module, "llvm-cpu"))
    got = np.asarray(loaded.invoke("main", *[kwargs[k].numpy() for k in INPUTS])[0])

    def torch_logits(rounded: dict[str, np.ndarray]) -> np.ndarray:
        saved = {n: p.detach().clone() for n, p in model.named_parameters()}
        try:
            with torch.no_grad():
                for n, p in model.named_parameters():
                    if n in rounded:
                        p.copy_(torch.from_numpy(rounded[n]))
                return model(**kwargs, use_cache=False).logits.numpy()
        finally:
            with torch.no_grad():
                for n, p in model.named_parameters():
                    p.copy_(saved[n])

    weights = matmul_weights(model)
    every = {n: emulate(w, axis=-1, bits=4) for n, w in weights.items()}
    want = torch_logits(every)
    # measured: max |Δ| 7.5e-8 on logits up to 0.37 (f32 sums in another order)
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-6)
    banks_float = torch_logits({n: w for n, w in every.items() if ".experts." not in n})
    assert np.abs(got - banks_float).max() > 1e-3  # the banks' rounding shows in the logits
