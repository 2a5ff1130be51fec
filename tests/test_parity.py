"""Op-by-op parity: the comparison on hand-made arrays, `expose-all-ops` through IREE against
numpy, and on MiniLM: injection bit-identical at every op, llvm-cpu against vulkan-spirv,
IREE against PyTorch eager by site name; `opscope parity` as a subprocess.

Measured here (IREE 3.13, MiniLM-L6 on 2 sentences × 16 tokens; the tests keep its first 2
layers, 167 exposed ops, to stay fast; all 6 layers expose 443): the injected build equals
the plain one bit for bit at every op (all 443 with 6 layers too); vulkan-spirv (lavapipe)
against llvm-cpu leaves 9 ops identical, worst scale-relative error max|Δ|/max|A| 5.5e-6
(the exp of the attention scores; 6 layers: the same), median 4e-7, while max|Δ| reaches
0.035 (a LayerNorm's sum of squares, of magnitude 5e4) and max_rel 0.38 (entries near 0;
0.47 with 6 layers): the tolerance is 1e-4; IREE against PyTorch eager, 39 module outputs
(99 with 6 layers), worst 1.5e-6 (3.7e-6): the tolerance is 2e-5.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import skip_unless_runnable
from linalg_cases import map_region

from opscope import render
from opscope.act.op_compare import TINY, Tensor, by_site, compare, site_parity
from opscope.act.parity import exposed_run, op_parity, torch_module_outputs
from opscope.errors import OpscopeError
from opscope.models.zoo import missing_extra, missing_message

DEMOTE_I64 = "--iree-input-demote-i64-to-i32"  # lavapipe's SPIR-V has no 64-bit integers (token ids)
MINILM_INPUTS = ("input_ids", "attention_mask", "token_type_ids", "position_ids")
LAYERS = 2  # MiniLM's first 2 of 6 layers: the injected build of all 6 takes 24 s to compile here
needs_torch = pytest.mark.skipif(missing_extra("torch"), reason=missing_message("this test", "torch"))

BIN = Path(sys.executable).parent
ENTRY_POINTS = {"opscope": [str(BIN / "opscope")], "python -m opscope": [sys.executable, "-m", "opscope"]}

# x·s (s = 1.0) → exp → matmul → tanh → row sums, each op with a location but the fill.
SMALL = f"""
#map = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>
func.func @main(%x: tensor<4x8xf32>, %w: tensor<8x3xf32>) -> tensor<4xf32> {{
  %s = arith.constant 1.000000e+00 : f32
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<4x8xf32>
  %scaled = linalg.generic {{indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel"]}}
      ins(%x : tensor<4x8xf32>) outs(%e : tensor<4x8xf32>){map_region("arith.mulf %map_in, %s")} -> tensor<4x8xf32> loc("scale")
  %act = linalg.generic {{indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel"]}}
      ins(%scaled : tensor<4x8xf32>) outs(%e : tensor<4x8xf32>){map_region("math.exp %map_in")} -> tensor<4x8xf32> loc("act")
  %e2 = tensor.empty() : tensor<4x3xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e2 : tensor<4x3xf32>) -> tensor<4x3xf32>
  %m = linalg.matmul ins(%act, %w : tensor<4x8xf32>, tensor<8x3xf32>)
      outs(%f : tensor<4x3xf32>) -> tensor<4x3xf32> loc("fc")
  %t = linalg.generic {{indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel"]}}
      ins(%m : tensor<4x3xf32>) outs(%e2 : tensor<4x3xf32>){map_region("math.tanh %map_in")} -> tensor<4x3xf32> loc("fc")
  %e3 = tensor.empty() : tensor<4xf32>
  %f3 = linalg.fill ins(%zero : f32) outs(%e3 : tensor<4xf32>) -> tensor<4xf32>
  %sum = linalg.generic {{indexing_maps = [#map, #row], iterator_types = ["parallel", "reduction"]}}
      ins(%t : tensor<4x3xf32>) outs(%f3 : tensor<4xf32>) {{
  ^bb0(%in: f32, %acc: f32):
    %1 = arith.addf %in, %acc : f32
    linalg.yield %1 : f32
  }} -> tensor<4xf32> loc("head")
  return %sum : tensor<4xf32>
}}
"""


def small_inputs() -> list[np.ndarray]:
    rng = np.random.default_rng(0)
    return [rng.standard_normal((4, 8)).astype(np.float32), (rng.standard_normal((8, 3)) / 3).astype(np.float32)]


def arrays(**named) -> list[Tensor]:
    return [Tensor(name, np.asarray(v), op) for name, (op, v) in named.items()]


# -- the comparison on hand-made arrays ------------------------------------------------------------


def test_identical_builds_are_exact():
    a = {"x#0": np.arange(6, dtype=np.float32).reshape(2, 3), "x#1": np.ones(4, np.float32)}
    report = compare(a, {k: v.copy() for k, v in a.items()})
    assert report.ops_checked == 2 and report.identical == 2 and report.exact
    assert report.worst is None and report.first_beyond(0.0) is None and report.within(0.0)
    assert report.max_abs == 0 and report.max_rel == 0
    assert "2 ops compared, 2 bit-identical; worst: none; first beyond tol 0.001: none" in render(report)


def test_tolerance_is_relative_to_the_tensor_scale():
    """An entry near 0 makes max_rel explode for rounding noise; the rule judges max|Δ| against max|a|."""
    a = np.array([100.0, 1e-7, -50.0], np.float32)
    b = a + np.array([1e-3, 1e-4, 0.0], np.float32)
    d = compare({"y#0": a}, {"y#0": b}).ops[0]
    assert d.max_abs == pytest.approx(1e-3, rel=1e-3)
    assert d.max_rel == pytest.approx(1e-4 / TINY, rel=1e-2)  # the near-zero entry: |Δ| / max(|a|, 1e-6) = 100
    assert d.scale == pytest.approx(100.0) and d.err == pytest.approx(1e-5, rel=1e-3)
    assert d.within(1e-5 * 1.01) and not d.within(1e-6)
    zero = compare({"z#0": np.zeros(3)}, {"z#0": np.array([0, 1e-10, 0])}).ops[0]
    assert zero.scale == 0 and zero.err == pytest.approx(1e-4)  # an all-zero reference: max|a| floored at 1e-6


def test_worst_is_the_first_on_a_tie_and_first_beyond_is_in_program_order():
    a = arrays(
        **{
            "p#0": ("mulf", [1.0, 2.0]),
            "p#1": ("exp", [1.0, 2.0]),
            "q#0": ("addf", [1.0, 2.0]),
            "q#1": ("tanh", [4.0, 8.0]),
        }
    )
    b = arrays(
        **{
            "p#0": ("mulf", [1.0, 2.0]),
            "p#1": ("exp", [1.0, 2.2]),
            "q#0": ("addf", [1.0, 2.2]),
            "q#1": ("tanh", [4.0, 8.0 + 1e-3]),
        }
    )
    report = compare(a, b, tol=1e-2)
    assert [d.name for d in report.ops] == ["p#0", "p#1", "q#0", "q#1"]
    assert report.identical == 1 and not report.exact
    assert report.worst.name == "p#1"  # ties with q#0 (err 0.1): the first in program order
    assert report.first_beyond().name == "p#1" and [d.name for d in report.beyond()] == ["p#1", "q#0"]
    assert report.first_beyond(0.5) is None and report.first_beyond(1e-5).name == "p#1"
    assert [d.name for d in report.shown(top=1)] == ["p#1", "q#0"]  # beyond tol, plus the worst
    assert len(report.shown(all_ops=True)) == 4


def test_nan_and_inf_are_explicit():
    a = np.array([np.nan, np.inf, 1.0, -np.inf, 2.0], np.float32)
    same = compare({"n#0": a}, {"n#0": a.copy()}).ops[0]
    assert same.identical and same.nan == 1 and same.special == 0 and same.scale == 2.0
    b = np.array([np.nan, np.inf, np.nan, np.inf, 2.0], np.float32)  # NaN facing 1.0, +inf facing -inf
    d = compare({"n#0": a}, {"n#0": b}).ops[0]
    assert d.max_abs == np.inf and d.special == 2 and d.nan == 1 and not d.within(1e30)
    assert json.loads(render(compare({"n#0": a}, {"n#0": b}), "json"))["max_abs"] == "inf"


def test_integers_and_bools_compare_exactly():
    ids = np.array([[3, 7], [1, 0]], np.int64)
    assert compare({"i#0": ids}, {"i#0": ids.astype(np.int32)}).ops[0].identical  # a demoted build's i32
    d = compare({"i#0": ids}, {"i#0": ids + np.array([[0, 1], [0, 0]])}).ops[0]
    assert d.exact and d.max_abs == 1 and not d.within(1e9)
    mask = np.array([True, False, True])
    assert not compare({"m#0": mask}, {"m#0": ~mask}, tol=1.0).within()


def test_unmatched_tensors_are_listed_and_an_inserted_op_shifts_no_partner():
    """B's rewrite inserted a `round` under `fc` (renumbering `fc#1` as `fc#2`), dropped `head`, added `extra`."""
    a = arrays(
        **{
            "fc#0": ("matmul", np.ones((2, 3))),
            "fc#1": ("tanh", np.full((2, 3), 0.5)),
            "head#0": ("reduce", np.ones(2)),
            "shape#0": ("copy", np.ones((2, 3))),
        }
    )
    b = arrays(
        **{
            "fc#0": ("matmul", np.ones((2, 3))),
            "fc#1": ("round", np.ones((2, 3))),
            "fc#2": ("tanh", np.full((2, 3), 0.5)),
            "extra#0": ("exp", np.ones(2)),
            "shape#0": ("copy", np.ones((3, 2))),
        }
    )
    report = compare(a, b)
    assert [(d.name, d.b_name) for d in report.ops] == [("fc#0", None), ("fc#1", "fc#2")]
    assert report.exact  # what pairs is identical; what does not is listed, not compared
    assert report.only_a == ("head#0", "shape#0") and report.only_b == ("fc#1", "extra#0", "shape#0")
    assert "unmatched: 2 only in A, 3 only in B" in report.summary()
    squeezed = compare({"v#0": np.ones((2, 1, 3))}, {"v#0": np.ones((2, 3))})  # only size-1 dims differ
    assert squeezed.ops_checked == 1 and squeezed.exact


def test_renderings_agree():
    a = arrays(**{"fc#0": ("matmul", [1.0, 2.0]), "fc#1": ("tanh", [0.5, 0.25])})
    b = arrays(**{"fc#0": ("matmul", [1.0, 2.5]), "fc#1": ("tanh", [0.5, 0.25])})
    report = compare(a, b, a_label="plain", b_label="rewritten")
    text = render(report)
    assert text.splitlines()[:2] == ["A: plain", "B: rewritten"] and "BEYOND" in text
    assert text.splitlines()[-1] == (
        "2 ops compared, 1 bit-identical; worst: fc#0 (matmul) max|Δ| 0.5 = 0.25 of "
        "max|A|; first beyond tol 0.001: fc#0 (matmul, #0)"
    )
    md = render(report, "markdown", all_ops=True)
    assert "| # | op name | op | shape |" in md and md.count("\n| ") == 3
    data = json.loads(render(report, "json"))
    assert data["first_beyond"] == data["worst"] == "fc#0" and data["identical"] == 1
    assert [op["within"] for op in data["ops"]] == [False, True]


def test_by_site_keeps_each_module_output():
    """The last op under a module path is the module's output, for the path and every module above it."""
    tensors = [
        Tensor("layer.0.output#0", np.array([1.0]), "addf", 0, "layer.0.output"),
        Tensor("layer.0.output.norm#0", np.array([2.0]), "divf", 1, "layer.0.output.norm"),
        Tensor("generic<cmpi>#0", np.array([True]), "generic<cmpi>", 2, None),
        Tensor("pooler#0", np.array([3.0]), "tanh", 3, "pooler"),
    ]
    sites = by_site(tensors)
    assert set(sites) == {"layer", "layer.0", "layer.0.output", "layer.0.output.norm", "pooler"}
    assert sites["layer.0.output"][0] == 2.0 and sites["pooler"][0] == 3.0


def test_bad_tolerance_is_one_line():
    with pytest.raises(OpscopeError, match="tolerance must be a number >= 0"):
        compare({}, {}, tol=-1)


# -- expose-all-ops through IREE -------------------------------------------------------------------


def test_expose_refuses_a_called_function():
    """The refusal lit_tests/passes/invalid/expose-all-ops.mlir pins, asserted once from Python."""
    from opscope.ir.loading import parse_module
    from opscope.pipeline.textual import run_pipeline

    module = parse_module(
        "func.func @f(%t: tensor<4xf32>) -> tensor<4xf32> {\n %0 = arith.negf %t : tensor<4xf32>\n"
        " return %0 : tensor<4xf32>\n}\nfunc.func @g(%t: tensor<4xf32>) -> tensor<4xf32> {\n"
        " %0 = func.call @f(%t) : (tensor<4xf32>) -> tensor<4xf32>\n return %0 : tensor<4xf32>\n}"
    )
    with pytest.raises(OpscopeError, match=r"^expose-all-ops: @f is called by other functions"):
        run_pipeline(module, "expose-all-ops")
    with pytest.raises(OpscopeError, match=r"^expose-all-ops: bad 'ops' regex"):
        run_pipeline(module, "expose-all-ops{ops='('}")


def test_exposed_ops_equal_numpy():
    """Every op of a hand-written module, run through IREE, equals numpy (float64) within 1e-6 of its scale."""
    x, w = small_inputs()
    build, used = exposed_run(SMALL, inputs=[x, w])
    assert [(t.name, t.op) for t in build.tensors] == [
        ("scale#0", "generic<mulf>"),
        ("act#0", "generic<exp>"),
        ("fc#0", "matmul"),
        ("fc#1", "generic<tanh>"),
        ("head#0", "reduce<addf>"),
    ]
    assert build.original == 1 and used[0] is x
    act = np.exp(x.astype(np.float64))
    fc = act @ w
    want = {"scale#0": x, "act#0": act, "fc#0": fc, "fc#1": np.tanh(fc), "head#0": np.tanh(fc).sum(1)}
    report = compare(want, build.tensors, tol=1e-6)
    assert report.ops_checked == 5 and not report.only_a and not report.only_b
    assert report.within(), render(report, all_ops=True)  # measured: worst 1.3e-7 (tanh)


def test_a_rewrite_that_changes_numerics_is_found_at_its_op():
    """B scales by 1.01: everything from `scale#0` on moves, and `scale#0` is the first op beyond tolerance."""
    x, w = small_inputs()
    report = op_parity(SMALL, SMALL.replace("1.000000e+00", "1.010000e+00"), inputs=[x, w])
    assert report.ops_checked == 5 and report.identical == 0
    assert report.first_beyond().name == "scale#0"
    assert report.ops[0].err == pytest.approx(0.01, rel=1e-3)  # max 0.01·|x| / max|x|


# -- MiniLM ----------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def minilm():
    """MiniLM-L6 (eager attention) on 2 sentences × 16 tokens, imported with its token types and
    positions as arguments (IREE 3.13 cannot demote its i64 position/token-type buffers to i32 for
    vulkan-spirv: 'arith.constant op failed to verify'): (model, kwargs, module bytecode, inputs, plain build)."""
    import torch

    from opscope.importers.torch_fx import import_torch
    from opscope.ir.loading import module_bytecode
    from opscope.models import huggingface

    model, kwargs = huggingface.minilm(seq=16)
    model.encoder.layer = model.encoder.layer[:LAYERS]
    kwargs = dict(
        kwargs,
        token_type_ids=torch.zeros_like(kwargs["input_ids"]),
        position_ids=torch.arange(16).expand(2, 16).contiguous(),
    )
    source = module_bytecode(import_torch(model, (), name="minilm", example_kwargs=kwargs))
    inputs = [kwargs[k].numpy() for k in MINILM_INPUTS]
    plain, _ = exposed_run(source, inputs=inputs)
    return model, kwargs, source, inputs, plain


@needs_torch
def test_minilm_injection_is_bit_identical_at_every_op(minilm):
    """Exposing first and injecting every tap afterwards leaves every intermediate bit-identical."""
    _, _, source, inputs, plain = minilm
    report = op_parity(source, inject_b=True, inputs=inputs)
    assert len(plain.tensors) > 150  # 167 here (443 with all 6 layers, bit-identical too)
    assert report.ops_checked == len(plain.tensors) and not report.only_a and not report.only_b
    assert report.exact and report.identical == report.ops_checked, render(report)


@needs_torch
def test_minilm_vulkan_differs_per_op_within_tolerance(minilm):
    """vulkan-spirv against llvm-cpu: per-op rounding differences, every op within 1e-4 of its scale."""
    skip_unless_runnable("vulkan-spirv")
    _, _, source, inputs, plain = minilm
    report = op_parity(source, b_target="vulkan-spirv", b_flags=[DEMOTE_I64], inputs=inputs, tol=1e-4)
    assert report.ops_checked == len(plain.tensors) and not report.only_a and not report.only_b
    assert not report.exact and report.identical < report.ops_checked // 10  # measured: 9 of 167 identical
    assert report.within(), render(report)  # measured: worst 5.5e-6, an attention exp
    assert report.max_rel > 1e-2  # the reference's max_rel would fail it (measured 0.38: entries near 0)
    first = report.first_beyond(1e-7)
    assert first is not None and first.index < report.worst.index


@needs_torch
def test_minilm_iree_equals_pytorch_eager_by_site(minilm):
    """Each torch module's output against the last exposed op under its path: within 2e-5 of its scale."""
    model, kwargs, _, _, plain = minilm
    report = site_parity(
        torch_module_outputs(model, kwargs), plain.tensors, tol=2e-5, a_label="PyTorch eager", b_label="IREE llvm-cpu"
    )
    names = {d.name for d in report.ops}
    assert report.ops_checked >= 35  # measured: 39 (99 with all 6 layers)
    assert {"embeddings", "encoder.layer.0.attention.self", f"encoder.layer.{LAYERS - 1}.output", "pooler"} <= names
    assert all(name.endswith("dropout") for name in report.only_a)  # identity in eval: no op in the IR
    assert report.within(), render(report)  # measured: worst 1.5e-6


def torch_fake_quant(x, reduce_dims, bits: int = 8):
    """The round trip of `opscope.ir.fakequant` in PyTorch, f32, the same op order: amax over `reduce_dims`,
    1/amax (0 when amax <= 1e-20), ·qmax, round half away from zero (torch.round is half-to-even), clamp,
    ·(1/qmax), ·amax."""
    import torch

    qmax = float(2 ** (bits - 1) - 1)
    amax = x.abs().amax(dim=reduce_dims, keepdim=True)
    inv = torch.where(amax > 1e-20, 1.0 / amax, torch.zeros_like(amax))
    t = (x * inv) * qmax
    r = torch.sign(t) * torch.floor(t.abs() + 0.5)
    return (r.clamp(-qmax, qmax) * (1.0 / qmax)) * amax


@needs_torch
def test_minilm_w8a8_equals_a_pytorch_reimplementation_by_site(minilm):
    """W8A8 (fakequant-activations per token, fakequant-weights per output channel) site by site against
    PyTorch: each Linear's output in the IREE build against the same round trips in PyTorch applied to the
    IREE build's own input of that Linear (the output of the module that produced it), within 1e-4 of its
    scale. Fed its own input, each site is checked alone: run end to end, W8A8 is chaotic (a rounding that
    flips in layer 0 moves layer 1 by 3e-3 of its scale), which would test the chaos, not the rewrite."""
    import torch

    model, kwargs, source, inputs, _ = minilm
    linears = {name: m for name, m in model.named_modules() if isinstance(m, torch.nn.Linear)}
    producer: dict[str, str] = {}
    outputs: dict[int, tuple[str, object]] = {}  # id -> (module, the tensor, kept alive so no id is reused)

    def record_output(name):
        def hook(module, args, output):
            if isinstance(output, torch.Tensor):
                outputs.setdefault(id(output), (name, output))

        return hook

    def record_input(name):
        def hook(module, args):
            if id(args[0]) in outputs:
                producer[name] = outputs[id(args[0])][0]

        return hook

    handles = [m.register_forward_hook(record_output(n)) for n, m in model.named_modules() if n]
    handles += [m.register_forward_pre_hook(record_input(n)) for n, m in linears.items()]
    with torch.no_grad():
        model(**kwargs)
    for h in handles:
        h.remove()
    build, _ = exposed_run(source, pipeline="fakequant-activations,fakequant-weights", inputs=inputs)
    iree = by_site(build.tensors)
    want, got = {}, {}
    with torch.no_grad():
        for name, source_module in producer.items():
            linear = linears[name]
            x = torch_fake_quant(torch.from_numpy(iree[source_module]), (-1,))  # a scale per token
            w = torch_fake_quant(linear.weight, (1,))  # [N, K]: a scale per output channel
            want[name] = torch.nn.functional.linear(x, w, linear.bias).numpy()
            got[name] = iree[name]
    report = compare(want, got, tol=1e-4, a_label="PyTorch W8A8 on IREE's inputs", b_label="IREE W8A8")
    # q, k, v, up and down of every layer (attention.output.dense reads a reshape of p·v, no module's output)
    assert report.ops_checked == 5 * LAYERS and report.within(), render(report)  # measured: worst 8.4e-7
    plain = {
        name: torch.nn.functional.linear(torch.from_numpy(iree[src]), linears[name].weight, linears[name].bias)
        .detach()
        .numpy()
        for name, src in producer.items()
    }
    assert not compare(plain, got, tol=1e-4).within()  # float Linears miss by far: the check can fail


# -- opscope parity --------------------------------------------------------------------------------


@pytest.fixture(params=list(ENTRY_POINTS))
def opscope(request) -> list[str]:
    return ENTRY_POINTS[request.param]


@pytest.fixture(scope="module")
def small_files(tmp_path_factory) -> tuple[Path, Path]:
    """The small module, and a copy whose `scale` multiplies by 1.01."""
    folder = tmp_path_factory.mktemp("parity")
    a, b = folder / "a.mlir", folder / "b.mlir"
    a.write_text(SMALL)
    b.write_text(SMALL.replace("1.000000e+00", "1.010000e+00"))
    return a, b


def cli(argv: list[str], cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=240)


def test_cli_injection_is_bit_identical(opscope, small_files, tmp_path):
    proc = cli(opscope + ["parity", str(small_files[0]), "--inject", "--all"], tmp_path)
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout.splitlines()
    assert out[0].startswith(f"A: {small_files[0]}, 5 ops exposed; llvm-cpu")
    assert "stat taps injected" in out[1]
    assert len(out) == 2 + 1 + 5 + 1  # builds, header, 5 ops, summary
    assert out[-1] == "5 ops compared, 5 bit-identical; worst: none; first beyond tol 0.001: none"


def test_cli_beyond_tolerance_exits_1(opscope, small_files, tmp_path):
    proc = cli(opscope + ["parity", *map(str, small_files), "--json"], tmp_path)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr
    data = json.loads(proc.stdout)
    assert data["first_beyond"] == "scale#0" and data["ops_checked"] == 5 and data["identical"] == 0
    loose = cli(opscope + ["parity", *map(str, small_files), "--tol", "0.05"], tmp_path)
    assert loose.returncode == 0, loose.stderr
    assert loose.stdout.splitlines()[-1].endswith("first beyond tol 0.05: none")


@pytest.mark.parametrize(
    "args, message",
    [
        (["--b-pipeline", "no-such-pass"], "opscope: error: unknown pass or bad pipeline element 'no-such-pass'"),
        (["--b-target", "tpu"], "opscope: error: unknown target 'tpu'"),
        (["--a-pipeline", "expose-all-ops{nope=1}"], "opscope: error: expose-all-ops: unknown option 'nope'"),
    ],
)
def test_cli_bad_input_is_one_line(opscope, small_files, tmp_path, args, message):
    proc = cli(opscope + ["parity", str(small_files[0]), *args], tmp_path)
    assert proc.returncode == 1 and not proc.stdout
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(message), proc.stderr


def test_cli_missing_model_is_one_line(opscope, tmp_path):
    proc = cli(opscope + ["parity", "no-such-model.mlir"], tmp_path)
    assert proc.returncode == 1 and proc.stderr.strip() == "opscope: error: no such file: no-such-model.mlir"
