"""JAX → canonical linalg: an MLP and an attention block, traced with `jax.jit` or exported.

Each model's canonical module compiles on llvm-cpu and matches JAX (XLA on CPU) within
rtol = atol = 1e-5 in f32, as is and with stat injection; its site names are the
`jax.named_scope` paths. Bad input ends in one-line `OpscopeError`s.
"""

from __future__ import annotations

import inspect
import sys

import numpy as np
import pytest
from errors import one_line

jax = pytest.importorskip("jax")
import jax.numpy as jnp  # noqa: E402

from opscope.errors import OpscopeError  # noqa: E402
from opscope.importers import describe, import_source  # noqa: E402
from opscope.importers.jax_export import import_jax  # noqa: E402
from opscope.ir.sites import find_sites  # noqa: E402
from opscope.run.compile import compile_module  # noqa: E402
from opscope.run.instrumented import InstrumentedModel  # noqa: E402
from opscope.run.runtime import load  # noqa: E402

RTOL = ATOL = 1e-5  # f32, XLA-CPU vs IREE llvm-cpu: different reduction orders, a few ulps apart


def mlp(params: dict, x):
    """Two dense layers under named scopes; params is a pytree (leaves in sorted-key order)."""
    with jax.named_scope("fc1"):
        h = jax.nn.relu(x @ params["w1"] + params["b1"])
    with jax.named_scope("fc2"):
        return h @ params["w2"] + params["b2"]


def attention(x, wq, wk, wv, wo):
    """One softmax attention block written with einsum, a scope per projection."""
    with jax.named_scope("attn"):
        with jax.named_scope("q"):
            q = jnp.einsum("bsd,de->bse", x, wq)
        with jax.named_scope("k"):
            k = jnp.einsum("bsd,de->bse", x, wk)
        with jax.named_scope("v"):
            v = x @ wv
        with jax.named_scope("scores"):
            p = jax.nn.softmax(jnp.einsum("bqe,bke->bqk", q, k) / np.sqrt(q.shape[-1]), axis=-1)
        with jax.named_scope("mix"):
            o = jnp.einsum("bqk,bke->bqe", p, v)
    with jax.named_scope("out"):
        return o @ wo


def _mlp_args(rng):
    params = {
        "w1": rng.standard_normal((16, 32), np.float32) / 4,
        "b1": rng.standard_normal((32,), np.float32),
        "w2": rng.standard_normal((32, 10), np.float32) / 6,
        "b2": rng.standard_normal((10,), np.float32),
    }
    return params, rng.standard_normal((8, 16), np.float32)


def _attention_args(rng):
    x = rng.standard_normal((2, 6, 16), np.float32)
    return (x, *(rng.standard_normal((16, 16), np.float32) / 4 for _ in range(4)))


MODELS = {
    "mlp": (mlp, _mlp_args, ["fc1", "fc2"]),
    "attention": (attention, _attention_args, ["attn/q", "attn/k", "attn/v", "attn/scores", "attn/mix", "out"]),
}


@pytest.fixture(scope="module", params=sorted(MODELS))
def imported(request):
    """(name, module, flat inputs, JAX outputs) per model, imported once."""
    fn, make_args, _ = MODELS[request.param]
    args = make_args(np.random.Generator(np.random.Philox(7)))
    module = import_source(fn, example_args=args)
    flat = [np.asarray(a) for a in jax.tree_util.tree_leaves(args)]
    expected = [np.asarray(o) for o in jax.tree_util.tree_leaves(jax.jit(fn)(*args))]
    return request.param, module, flat, expected


def test_canonical_module_is_plain_func_on_linalg(imported):
    _, module, flat, _ = imported
    names: set[str] = set()
    module.operation.walk(lambda op: names.add(op.name) or 0)
    assert "func.func" in names and "util.func" not in names
    assert not [n for n in names if n.split(".")[0] in ("stablehlo", "chlo", "vhlo")]
    assert {n.split(".")[0] for n in names} <= {"builtin", "func", "linalg", "tensor", "arith", "math"}


def test_site_names_come_from_named_scopes(imported):
    name, module, _, _ = imported
    assert [s.name for s in find_sites(module)] == MODELS[name][2]


def test_outputs_match_jax(imported):
    _, module, flat, expected = imported
    got = load(compile_module(module, "llvm-cpu")).invoke("main", *flat)
    assert len(got) == len(expected)
    for g, e in zip(got, expected):
        np.testing.assert_allclose(g, e, rtol=RTOL, atol=ATOL)


def test_outputs_match_jax_with_injection(imported):
    """Includes a stats kernel called with a reshape of an argument (JAX's 3-D x @ w), which
    lower-opscope must count as external like the argument itself."""
    name, module, flat, expected = imported
    model = InstrumentedModel.build(module, "llvm-cpu", name=name)
    assert [e.site for e in model.manifest.entries][:1] == MODELS[name][2][:1]
    outputs = model(*flat)
    for g, e in zip(model.original(outputs), expected):
        np.testing.assert_allclose(g, e, rtol=RTOL, atol=ATOL)
    assert model.check_parity(flat, outputs) <= 1e-5


def test_jax_export_file_imports_like_the_callable(tmp_path):
    args = _mlp_args(np.random.Generator(np.random.Philox(3)))
    exported = jax.export.export(jax.jit(mlp))(*args)
    path = tmp_path / "mlp.jaxexport"
    path.write_bytes(exported.serialize())
    from_file = import_source(path)
    assert [s.name for s in find_sites(from_file)] == ["fc1", "fc2"]
    assert [s.name for s in find_sites(import_source(exported))] == ["fc1", "fc2"]
    flat = [np.asarray(a) for a in jax.tree_util.tree_leaves(args)]
    got = load(compile_module(from_file, "llvm-cpu")).invoke("main", *flat)
    np.testing.assert_allclose(got[0], np.asarray(mlp(*args)), rtol=RTOL, atol=ATOL)


def test_unscoped_matmul_is_named_by_its_line():
    """A top-level op (no scope names it) is its kind at the user's Python line."""
    x = np.ones((4, 8), np.float32)
    line = inspect.currentframe().f_lineno + 1
    module = import_jax(lambda a, b: jnp.tanh(a @ b), x, x.T)
    [site] = find_sites(module)
    assert site.name == f"matmul@test_import_jax.py:{line}"


def test_trace_failure_isone_line():
    with pytest.raises(OpscopeError) as e:
        import_jax(lambda a, b: a @ b, np.ones((4, 8), np.float32), np.ones((3, 2), np.float32))
    assert one_line(e).startswith("jax could not trace <lambda>: TypeError")


def test_callable_without_example_args():
    with pytest.raises(OpscopeError, match="needs example_args"):
        import_source(mlp)


def test_corrupt_jaxexport_isone_line(tmp_path):
    path = tmp_path / "bad.jaxexport"
    path.write_bytes(b"\x00\x01not a flatbuffer at all")
    with pytest.raises(OpscopeError) as e:
        import_source(path)
    assert "is not a jax.export serialization" in one_line(e)


def test_missing_jax_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "jax", None)  # `import jax` now raises ImportError
    with pytest.raises(OpscopeError) as e:
        import_source(lambda x: x, example_args=(np.ones(2, np.float32),))
    assert one_line(e) == "importing jax models needs the jax extra: pip install 'opscope[jax]'"


def test_describe_names_the_kind():
    assert describe(mlp) == "a JAX callable mlp"
    assert describe("m.jaxexport").startswith("a jax.export artifact")


def test_a_symbolic_batch_is_the_dynamic_dim_one_liner(tmp_path):
    """Issue 31: a `.jaxexport` with a symbolic batch got IREE's StableHLO error at a reshape far
    from the cause; now the same one line `.pt2` and `.onnx` give, before lowering."""

    def f(x, w):
        return jnp.tanh(x @ w).reshape(-1, 2).sum(0)

    (b,) = jax.export.symbolic_shape("b")
    spec = (jax.ShapeDtypeStruct((b, 8), jnp.float32), jax.ShapeDtypeStruct((8, 4), jnp.float32))
    path = tmp_path / "dyn.jaxexport"
    path.write_bytes(jax.export.export(jax.jit(f))(*spec).serialize())
    with pytest.raises(OpscopeError) as e:
        import_source(path)
    assert one_line(e).startswith(
        "argument 0 (tensor<?x8xf32>) has a dynamic dim (0): drivers feed static shapes; export the model "
        "with static shapes"
    )
