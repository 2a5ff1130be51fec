"""PyTorch importer: canonical modules compile on llvm-cpu and match PyTorch eager, with and without taps.

Tolerances: both sides compute in f32; IREE reorders reductions (tiling, data-tiled
matmuls), fuses elementwise chains and uses polynomial `math.erf`/`math.exp`, so results
differ by accumulated rounding, not by semantics. Tiny models (d_model ≤ 32): rtol = atol =
1e-4 (measured ≤ 2e-7). MiniLM (6 layers, K up to 1536): atol 5e-4 on outputs of magnitude
~1-10 (measured ≤ 8e-5). Sketches vs forward hooks: chan_maxabs and sumsq rtol 1e-4
(the tapped activations themselves carry the rounding above), nnz exact.
"""

from __future__ import annotations

import re

import numpy as np
import pytest
from errors import one_line
from families import forward_hooked

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from iree.compiler import ir  # noqa: E402

from opscope.errors import OpscopeError  # noqa: E402
from opscope.importers import import_source  # noqa: E402
from opscope.importers.torch_fx import eager_outputs, flat_inputs, import_torch  # noqa: E402
from opscope.ir.loading import module_bytecode, parse_module
from opscope.ir.sites import find_sites  # noqa: E402
from opscope.models import huggingface  # noqa: E402
from opscope.pipeline.taps import inject_matmul_stats  # noqa: E402
from opscope.run.compile import compile_module  # noqa: E402
from opscope.run.runtime import load  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore::FutureWarning")  # torch's own pytree deprecation

TINY = dict(rtol=1e-4, atol=1e-4)
# Injected as `opscope profile` injects imported models: lower-opscope's defaults (stats of
# weights inlined behind barriers, the rest in outlined kernels) and one tensor per stats call
# (IMPORTED_BATCH: IREE 3.13 segfaults on batched calls in MiniLM).
# Tapping every site multiplies compile time (tiny Llama: 3.7 s plain, 17 s with all 19 sites
# tapped, measured with every stats kernel inlined), so the HF models tap a few layer-0 sites of each
# kind (projection, attention batch_matmul, MoE router and experts), MiniLM the hook-checked ones.
TAPPED = {
    "gpt2": r"^transformer\.h\.0\.attn(\.c_attn)?$",
    "llama": r"^model\.layers\.0\.self_attn(\.q_proj)?$",
    "mixtral": r"^model\.layers\.0\.mlp\.(gate|experts)$",
}
MINILM_TAPPED = (
    "encoder.layer.0.attention.self.query",
    "encoder.layer.3.intermediate.dense",
    "encoder.layer.5.output.dense",
    "pooler.dense",
)


class MLP(torch.nn.Module):
    """Two Linear layers with a ReLU between them."""

    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(16, 32)
        self.fc2 = torch.nn.Linear(32, 8)

    def forward(self, x):
        return self.fc2(torch.relu(self.fc1(x)))


class Block(torch.nn.Module):
    """A pre-LN transformer block without convolutions: explicit attention matmuls and a GELU FFN."""

    def __init__(self, d: int = 32, heads: int = 4):
        super().__init__()
        self.heads = heads
        self.ln1 = torch.nn.LayerNorm(d)
        self.qkv = torch.nn.Linear(d, 3 * d)
        self.proj = torch.nn.Linear(d, d)
        self.ln2 = torch.nn.LayerNorm(d)
        self.up = torch.nn.Linear(d, 4 * d)
        self.down = torch.nn.Linear(4 * d, d)

    def forward(self, x):
        b, s, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).reshape(b, s, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        att = torch.softmax(q @ k.transpose(-1, -2) / (d // self.heads) ** 0.5, dim=-1)
        x = x + self.proj((att @ v).transpose(1, 2).reshape(b, s, d))
        return x + self.down(torch.nn.functional.gelu(self.up(self.ln2(x))))


def _op_names(module: ir.Module) -> set[str]:
    names: set[str] = set()

    def visit(op):
        names.add(op.name)
        return ir.WalkResult.ADVANCE

    module.operation.walk(visit)
    return names


def _assert_close(got, want, **tol):
    assert len(got) >= len(want)
    for i, (g, w) in enumerate(zip(got, want)):
        assert g.shape == w.shape, f"result {i}: {g.shape} vs {w.shape}"
        np.testing.assert_allclose(g, w, err_msg=f"result {i}", **tol)


def _check_model(model, args=(), kwargs=None, sites: str = "", **tol):
    """Import, compile plain and tapped (sites matching the `sites` regex, all when empty) and compare
    both against eager; returns (the imported module, the manifest, the tapped run's results)."""
    module = import_torch(model, args, example_kwargs=kwargs)
    inputs = flat_inputs(model, args, kwargs)
    want = eager_outputs(model, args, kwargs)
    source = module_bytecode(module)  # before injection edits the module in place
    plain = load(compile_module(module, "llvm-cpu")).invoke("main", *inputs)
    _assert_close(plain, want, **tol)
    tapped, manifest = inject_matmul_stats(parse_module(source), sites=sites)
    outs = load(compile_module(tapped, "llvm-cpu")).invoke("main", *inputs)
    _assert_close(outs[: manifest.num_original_results], want, **tol)
    assert len(outs) > len(want)
    return parse_module(source), manifest, outs


def test_mlp_sites_named_and_numerics():
    torch.manual_seed(0)
    module, manifest, _ = _check_model(MLP().eval(), (torch.randn(4, 16),), **TINY)
    assert [s.name for s in find_sites(module)] == ["fc1", "fc2"]
    assert {e.site for e in manifest.entries} == {"fc1", "fc2"}


def test_saved_export_program_file(tmp_path):
    """A `.pt2` file (torch.export.save) imports by path, as `opscope import|profile x.pt2` do."""
    torch.manual_seed(0)
    model, x = MLP().eval(), torch.randn(4, 16)
    path = tmp_path / "mlp.pt2"
    torch.export.save(torch.export.export(model, (x,)), str(path))
    module = import_source(path)
    assert [s.name for s in find_sites(module)] == ["fc1", "fc2"]
    got = load(compile_module(module, "llvm-cpu")).invoke("main", x.numpy())
    _assert_close(got, eager_outputs(model, (x,)), **TINY)
    (tmp_path / "bad.pt2").write_bytes(b"not a zip")
    with pytest.raises(OpscopeError, match=r"^.*bad\.pt2: not a readable torch\.export program \(BadZipFile"):
        import_source(tmp_path / "bad.pt2")


def test_weights_stored_narrow_and_read_as_f32_stay_narrow():
    """A bf16 and an f16 parameter the forward reads as f32 (`.float()`): torch-mlir's lowering folded
    each cast into an f32 constant, so the module stored them at twice the model's bytes and
    `weight_bytes` said so (found by the generated-model tests; the ONNX route the same). Now they
    stay bf16 and f16 constants widened where read (`opscope.importers.narrow_weights`)."""
    from opscope.act.weights import weight_bytes

    class Narrow(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.a = torch.nn.Parameter(torch.randn(6, 5).to(torch.bfloat16), requires_grad=False)
            self.b = torch.nn.Parameter(torch.randn(5, 3).to(torch.float16), requires_grad=False)

        def forward(self, x):
            return torch.relu(x @ self.a.float()) @ self.b.float()

    torch.manual_seed(0)
    model, x = Narrow().eval(), torch.randn(4, 6)
    module = import_torch(model, (x,))
    text = str(module)
    assert "tensor<6x5xbf16>" in text and "tensor<5x3xf16>" in text
    assert weight_bytes(module) == (6 * 5 + 5 * 3) * 2
    got = load(compile_module(module, "llvm-cpu")).invoke("main", x.numpy())
    _assert_close(got, eager_outputs(model, (x,)), **TINY)


def test_transformer_block():
    torch.manual_seed(0)
    module, _, _ = _check_model(Block().eval(), (torch.randn(2, 8, 32),), **TINY)
    names = [s.name for s in find_sites(module)]
    assert {"qkv", "proj", "up", "down"} <= set(names)
    assert len(names) == 6  # four Linear + q·kᵀ and att·v (named by the block: '' path → kind#n)
    assert {s.kind for s in find_sites(module)} == {"batch_matmul"}


@pytest.mark.parametrize("builder", ["gpt2", "llama", "mixtral"])
def test_tiny_hf_causal_lm(builder):
    model, kwargs = huggingface.BUILDERS[builder]()
    module, manifest, _ = _check_model(model, (), kwargs, sites=TAPPED[builder], **TINY)
    sites = find_sites(module)
    assert {e.site for e in manifest.entries} == {s.name for s in sites if re.match(TAPPED[builder], s.name)}
    assert len({e.site for e in manifest.entries}) == 2
    kinds = {s.kind for s in sites}
    assert "batch_matmul" in kinds
    layer0 = {
        "gpt2": "transformer.h.0.attn.c_attn",
        "llama": "model.layers.0.self_attn.q_proj",
        "mixtral": "model.layers.0.mlp.gate",
    }[builder]
    assert layer0 in {s.name for s in sites}
    assert all("#" not in s.name or s.name.split("#")[0] for s in sites)  # every site is named
    if builder == "mixtral":
        assert "iree_linalg_ext.sort" in _op_names(module)  # top-k routing
        assert {"model.layers.0.mlp.experts", "model.layers.0.mlp.experts#1"} <= {s.name for s in sites}


def test_sdpa_becomes_fused_attention_which_is_not_a_site():
    """With "sdpa", attention lowers to `iree_linalg_ext.attention`: the projections stay sites, q·kᵀ and p·v do not."""
    model, kwargs = huggingface.tiny_llama(attn_implementation="sdpa")
    module = import_torch(model, (), example_kwargs=kwargs)
    assert "iree_linalg_ext.attention" in _op_names(module)
    names = [s.name for s in find_sites(module)]
    assert "model.layers.0.self_attn.q_proj" in names
    assert not any(n.startswith("model.layers.0.self_attn") and n.count(".") == 3 for n in names)
    plain = load(compile_module(module, "llvm-cpu")).invoke("main", *flat_inputs(model, (), kwargs))
    _assert_close(plain, eager_outputs(model, (), kwargs), **TINY)


@pytest.fixture(scope="module")
def minilm_run():
    model, kwargs = huggingface.minilm(seq=16)
    tapped = "^(" + "|".join(re.escape(s) for s in MINILM_TAPPED) + ")$"
    module, manifest, outs = _check_model(model, (), kwargs, sites=tapped, rtol=1e-3, atol=5e-4)
    return model, kwargs, module, manifest, outs


def test_minilm_every_matmul_site_named(minilm_run):
    model, _, module, manifest, _ = minilm_run
    sites = find_sites(module)
    linears = [n for n, m in model.named_modules() if isinstance(m, torch.nn.Linear)]
    layers = model.config.num_hidden_layers
    assert len(linears) == 37
    assert len(sites) == len(linears) + 2 * layers  # + q·kᵀ and p·v per layer (eager attention)
    names = [s.name for s in sites]
    assert set(linears) <= set(names)
    for i in range(layers):
        assert {f"encoder.layer.{i}.attention.self", f"encoder.layer.{i}.attention.self#1"} <= set(names)
    assert {e.site for e in manifest.entries} == set(MINILM_TAPPED)


def test_minilm_sketches_match_forward_hooks(minilm_run):
    model, kwargs, _, manifest, outs = minilm_run
    sites = MINILM_TAPPED
    seen: dict[str, tuple[np.ndarray, np.ndarray]] = {}

    def hook(name):
        def record(mod, args, out):
            x = args[0].detach()
            seen[name] = (x.numpy(), (x @ mod.weight.detach().T).numpy())  # the matmul, before the bias add

        return record

    mods = dict(model.named_modules())
    forward_hooked(model, kwargs, [mods[s].register_forward_hook(hook(s)) for s in sites])
    values = manifest.values(outs)
    for site in sites:
        lhs, out = seen[site]
        for role, x in (("lhs", lhs), ("out", out)):
            flat = x.reshape(-1, x.shape[-1]).astype(np.float64)
            np.testing.assert_allclose(
                values[(site, role, "chan_maxabs")],
                np.abs(flat).max(axis=0),
                rtol=1e-4,
                atol=1e-6,
                err_msg=f"{site} {role} chan_maxabs",
            )
            np.testing.assert_allclose(
                values[(site, role, "sumsq")], [np.square(flat).sum()], rtol=1e-4, err_msg=f"{site} {role} sumsq"
            )
            assert values[(site, role, "nnz")][0] == np.count_nonzero(x), f"{site} {role} nnz"
        weight = mods[site].weight.detach().numpy()
        np.testing.assert_allclose(values[(site, "rhs", "chan_maxabs")], np.abs(weight).max(axis=1), rtol=1e-6)


class _TopLevel(torch.nn.Module):
    """A matmul the root module runs itself (no submodule names it), then a Linear."""

    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.randn(8, 4))
        self.fc = torch.nn.Linear(4, 2)

    def forward(self, x):
        return self.fc(x @ self.w)  # TOP-LEVEL LINE


def test_a_top_level_op_is_named_by_its_python_line():
    """Not `matmul#0`: the kind at the model's own line, which the user can open."""
    import inspect

    line = next(i for i, text in enumerate(inspect.getsourcelines(_TopLevel)[0]) if "TOP-LEVEL LINE" in text)
    line += inspect.getsourcelines(_TopLevel)[1]
    names = [s.name for s in find_sites(import_torch(_TopLevel().eval(), (torch.randn(3, 8),)))]
    assert names == [f"matmul@test_import_torch.py:{line}", "fc"], names


def test_export_failure_is_one_line():
    class Branchy(torch.nn.Module):
        def forward(self, x):
            return x * 2 if x.sum() > 0 else x - 1  # data-dependent control flow

    with pytest.raises(OpscopeError) as e:
        import_torch(Branchy(), (torch.randn(3),))
    msg = one_line(e)
    assert msg.startswith("Branchy: torch.export failed:") and "; try: " in msg


def test_unsupported_op_names_op_and_place():
    class Inv(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.proj = torch.nn.Linear(4, 4)

        def forward(self, x):
            return self.proj(torch.linalg.inv(x))

    with pytest.raises(OpscopeError) as e:
        import_torch(Inv(), (torch.randn(4, 4),))
    msg = one_line(e)
    assert msg.startswith("Inv: unsupported op 'aten.linalg_inv' at test_import_torch.py:")


def test_missing_torch_says_which_extra(monkeypatch):
    from opscope.importers import torch_fx

    monkeypatch.setitem(__import__("sys").modules, "torch", None)
    with pytest.raises(OpscopeError, match=r"pip install 'opscope\[torch\]'"):
        torch_fx.import_torch(object(), ())
