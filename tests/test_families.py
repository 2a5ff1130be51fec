"""One test per model family a user brings, by every route: `opscope profile FILE --steps 2`.

Each family is random-initialised from its config at tiny shapes (`families.py`), exported to `.pt2`
(`torch.export.save`), ONNX (torch's default dynamo exporter, `onnx`; the legacy TorchScript one,
`onnx-legacy`) or `.jaxexport`, and profiled by the `opscope` command, run in this process
(`inprocess.py`: the imports are the session's, not paid again per route). Per route: exit 0; as many
sites as the model has matmuls + convolutions, counted without opscope (`Family.expected`, by construction,
checked against torch.export's core-ATen graph or the jaxpr); readable site names (no `<kind>#<n>`
fallback); "original results bit-identical with injection". One profile per (family, route) serves
every check of it (`Profiles`).

The default set runs every family once (`.pt2` for torch, `.jaxexport` for JAX) and the cheap extra
routes; the other routes carry the `families_full` marker (deselected by default):

    python -m pytest -q tests/test_families.py -m families_full

Known IREE 3.13 failures are reproduced in plain iree-compile below (`test_iree_*`), without
opscope's taps; where they touch a family, its parity check accepts what IREE does (a last-bit
difference, or no comparison when only the untapped model fails to compile), stated per case.
"""

from __future__ import annotations

import re
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("onnx")
pytest.importorskip("onnxscript")
pytest.importorskip("jax")

import families as F  # noqa: E402
from inprocess import opscope  # noqa: E402
from linalg_cases import COPY_REGION  # noqa: E402

from opscope.ir.dynamics import ATTENTION, RESIDUAL, ROUTING, SOFTMAX  # noqa: E402

DYNAMICS_SITE_KINDS = (SOFTMAX, ATTENTION, ROUTING, RESIDUAL)
DYNAMICS_EXPECTED = {  # by construction: tests/families.py builds 2-layer transformers
    "bert": {SOFTMAX: 2, RESIDUAL: 4},
    "t5_encoder": {SOFTMAX: 2, RESIDUAL: 4},
    "t5": {SOFTMAX: 6, RESIDUAL: 10},
    "vit": {SOFTMAX: 2, RESIDUAL: 4},
    "resnet18": {RESIDUAL: 5},  # 8 blocks, 3 with a projection shortcut (neither operand is the block's input)
    "mobilenet_v2": {RESIDUAL: 10},
    "qwen2": {SOFTMAX: 2, RESIDUAL: 4},
    "phi": {SOFTMAX: 2, RESIDUAL: 2},  # parallel attention and MLP: h + (attn(x) + mlp(x)), one add per layer
    "jax_attention": {SOFTMAX: 2, RESIDUAL: 4},
}

from opscope.errors import OpscopeError  # noqa: E402
from opscope.ir.loading import new_context, parse_module  # noqa: E402
from opscope.ir.manifest import Manifest  # noqa: E402

OPSCOPE = [str(Path(sys.executable).parent / "opscope")]
PARITY = "original results bit-identical with injection"

# -- why the known failures fail ---------------------------------------------------------------------

I1_PACK = (
    "IREE 3.13 bug: llvm-cpu data tiling packs the i1 causal mask of the dynamo ONNX export "
    "(\"'linalg.pack' op expected padding_value has 'i8' but got: 'i1'\"); the untapped model fails "
    "plain iree-compile the same way (test_iree_data_tiling_packs_i1_mask)"
)
EPILOGUE = (
    "IREE 3.13 compiles a matmul/conv whose result has a second use (a tap; or plain iree-compile with "
    "that result also returned) with another rounding of its fused epilogue: original results within "
    "a few ulp, not bit-identical (test_iree_second_use_changes_fused_epilogue_rounding)"
)
RESNET_32PX = (
    "IREE 3.13 bug: a 3x3 stride-2 conv with a 1x1 output (ResNet-18's last stage at <= 32 px) fails "
    "plain iree-compile (test_iree_stride2_conv_to_1x1)"
)

# -- the families -------------------------------------------------------------------------------------

FAMILIES = {
    f.name: f
    for f in (
        # 2 layers x (q, k, v, q.kT, p.v, attention out, intermediate, output) + the pooler
        F.Family("bert", F.bert, 2 * 8 + 1, ("pt2", "onnx", "onnx-legacy")),
        # 2 layers x (q, k, v, q.kT, p.v, o, wi, wo)
        F.Family("t5_encoder", F.t5_encoder, 2 * 8, ("pt2",), ("onnx", "onnx-legacy")),
        # the encoder, 2 decoder layers x (self 6 + cross 6 + wi, wo), the LM head
        F.Family("t5", F.t5, 2 * 8 + 2 * 14 + 1, ("pt2",), ("onnx", "onnx-legacy")),
        # the patch embedding (a conv), 2 layers x 8, the pooler
        F.Family("vit", F.vit, 1 + 2 * 8 + 1, ("pt2",), ("onnx", "onnx-legacy")),
        # stem + 4 stages x 2 basic blocks x 2 convs + 3 downsampling shortcuts
        F.Family("resnet18", F.resnet18, 1 + 4 * 2 * 2 + 3, ("pt2",), ("onnx", "onnx-legacy")),
        # stem (3x3, depthwise 3x3, 1x1) + 16 inverted residuals x (expand, depthwise, reduce) + the last 1x1
        F.Family("mobilenet_v2", F.mobilenet_v2, 3 + 16 * 3 + 1, ("pt2",), ("onnx", "onnx-legacy")),
        # 2 layers x (q, k, v, q.kT, p.v, o, gate, up, down)
        F.Family("qwen2", F.qwen2, 2 * 9, ("pt2",), ("onnx", "onnx-legacy")),
        # 2 layers x (q, k, v, q.kT, p.v, dense, fc1, fc2)
        F.Family("phi", F.phi, 2 * 8, ("pt2",), ("onnx", "onnx-legacy")),
        # layers x (input projection + one recurrent matmul per step) + the head
        F.Family("lstm", F.lstm, 2 * (1 + F.STEPS) + 1, ("pt2", "onnx"), ("onnx-legacy",)),
        F.Family("gru", F.gru, 2 * (1 + F.STEPS) + 1, ("pt2",), ("onnx", "onnx-legacy")),
        # conv1, conv2, fc
        F.Family("small_cnn", F.small_cnn, 3, ("pt2", "onnx"), ("onnx-legacy",)),
        F.Family("jax_mlp", F.jax_mlp, 3, ("jaxexport",), jax=True),
        # 2 layers x (q, k, v, scores, mix, out, up, down)
        F.Family("jax_attention", F.jax_attention, 2 * 8, ("jaxexport",), jax=True),
    )
}

# (family, route or "*", check) -> why it fails today (strict xfails); checks: runs, count, names, parity
XFAIL: dict[tuple[str, str, str], str] = {}
# (family, route or "*") -> what else its parity line may say, and why (IREE 3.13, CPU-dependent)
PARITY_ALSO = {
    ("mobilenet_v2", "*"): (r"within (\S+)", EPILOGUE),
    ("lstm", "onnx"): (r"within (\S+)", EPILOGUE),
    ("lstm", "onnx-legacy"): (r"within (\S+)", EPILOGUE),
    ("gru", "onnx"): (r"within (\S+)", EPILOGUE),
    ("gru", "onnx-legacy"): (r"within (\S+)", EPILOGUE),
    ("qwen2", "onnx"): (r"not compared \(the untapped model does not compile", I1_PACK),
    ("phi", "onnx"): (r"not compared \(the untapped model does not compile", I1_PACK),
}
EPILOGUE_MAX = 1e-6  # the largest |Δ| a last-bit epilogue difference reaches on these tiny models


def _cases(check: str) -> list:
    """pytest params `family-route` for `check`, with the `families_full` mark and known xfails."""
    params = []
    for fam in FAMILIES.values():
        for route in fam.routes + fam.full_routes:
            marks = [pytest.mark.families_full] if route in fam.full_routes else []
            why = XFAIL.get((fam.name, route, check)) or XFAIL.get((fam.name, "*", check))
            if why:
                marks.append(pytest.mark.xfail(strict=True, raises=AssertionError, reason=why))  # the checks assert
            params.append(pytest.param(fam.name, route, marks=marks, id=f"{fam.name}-{route}"))
    return params


# -- one profile per (family, route) ------------------------------------------------------------------


@dataclass
class Profile:
    path: Path
    out: Path
    proc: subprocess.CompletedProcess
    seconds: float

    @property
    def lines(self) -> list[str]:
        return self.proc.stdout.splitlines()

    def manifest(self) -> Manifest:
        assert self.proc.returncode == 0, self.proc.stderr
        return Manifest.load(self.out / "manifest.json")


class Profiles:
    """Export and profile each (family, route) once; every check of it reads the same run."""

    def __init__(self, root: Path):
        self.root, self.done = root, {}

    def get(self, family: str, route: str) -> Profile:
        if (family, route) not in self.done:
            folder = self.root / f"{family}-{route}"
            folder.mkdir()
            path = F.save(FAMILIES[family], route, folder)
            t0 = time.perf_counter()
            proc = opscope("profile", str(path), "--steps", "2", "--out", str(folder / "run"))
            self.done[family, route] = Profile(path, folder / "run", proc, time.perf_counter() - t0)
        return self.done[family, route]


@pytest.fixture(scope="module")
def profiles(tmp_path_factory) -> Profiles:
    return Profiles(tmp_path_factory.mktemp("families"))


def _fallback_names(manifest: Manifest) -> list[str]:
    """Site names that are `<kind>#<n>`: the op had no location naming it."""
    return [s.name for s in manifest.sites if re.fullmatch(re.escape(s.kind) + r"#\d+", s.name)]


# -- the checks ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("family,route", _cases("runs"))
def test_profile_runs(profiles, family, route):
    run = profiles.get(family, route)
    assert run.proc.returncode == 0, run.proc.stderr[-2000:]
    assert "Traceback" not in run.proc.stderr
    assert run.lines[0] == f"opscope profile: {run.path} on llvm-cpu"
    assert {p.name for p in run.out.iterdir()} >= {"manifest.json", "sketches.csv", "site_costs.csv", "report.md"}


@pytest.mark.parametrize("family,route", _cases("count"))
def test_site_count(profiles, family, route):
    """As many matmul and convolution sites as the model has matmuls + convolutions, and the
    summary line says so beside the attention, routing and residual sites."""
    run = profiles.get(family, route)
    sites = run.manifest().sites
    expected = FAMILIES[family].expected
    value_sites = [s for s in sites if s.kind not in DYNAMICS_SITE_KINDS]
    assert len(value_sites) == expected, [s.name for s in value_sites]
    if len(sites) == expected:
        assert re.match(rf"  {expected} (matmul )?sites", run.lines[1]), run.lines[1]
    else:
        assert run.lines[1].startswith(f"  {len(sites)} sites ("), run.lines[1]


@pytest.mark.parametrize("family,route", _cases("count"))
def test_dynamics_site_count(profiles, family, route):
    """Per family by construction: a softmax per attention (2 layers; T5 has self- and
    cross-attention), two residual adds per transformer layer (Phi's parallel block one),
    one per ResNet block and MobileNetV2 inverted residual whose skip is its input."""
    sites = profiles.get(family, route).manifest().sites
    got = {k: sum(s.kind == k for s in sites) for k in DYNAMICS_SITE_KINDS}
    assert got == {**dict.fromkeys(DYNAMICS_SITE_KINDS, 0), **DYNAMICS_EXPECTED.get(family, {})}, [
        (s.name, s.kind) for s in sites if s.kind in DYNAMICS_SITE_KINDS
    ]


@pytest.mark.parametrize("family,route", _cases("names"))
def test_site_names_are_readable(profiles, family, route):
    manifest = profiles.get(family, route).manifest()
    assert manifest.sites
    assert _fallback_names(manifest) == []


@pytest.mark.parametrize("family,route", _cases("parity"))
def test_original_results_bit_identical(profiles, family, route):
    """Bit-identical; where IREE 3.13 rounds a fused epilogue differently once a result has a
    second use, within a last bit; where it cannot compile the untapped model, not compared."""
    run = profiles.get(family, route)
    assert run.proc.returncode == 0, run.proc.stderr[-2000:]
    if PARITY in run.lines[1]:
        return
    also = PARITY_ALSO.get((family, route)) or PARITY_ALSO.get((family, "*"))
    assert also is not None, run.lines[1]
    found = re.search("original results " + also[0], run.lines[1])
    assert found, (run.lines[1], also[1])
    if found.groups():
        assert float(found.group(1)) <= EPILOGUE_MAX, run.lines[1]


@pytest.mark.parametrize("family,route", _cases("verify"))
def test_verify_agrees_with_the_framework(profiles, family, route):
    """`profile` verifies small models by default: a .pt2 against PyTorch (a sample of every kind of
    site present, their FLOPs against FlopCounterMode, the outputs), an ONNX file against onnxruntime,
    a .jaxexport against jax; the first report line says it agrees, verify.json holds the details."""
    import json

    run = profiles.get(family, route)
    verdict = json.loads((run.out / "verify.json").read_text())
    assert verdict["agrees"], verdict
    line = next(ln for ln in run.lines if ln.startswith("note: verify:"))
    assert " agrees: " in line, line
    assert verdict["outputs"] and verdict["outputs"][1] <= verdict["outputs"][2]
    if route == "pt2":
        dynamics = DYNAMICS_EXPECTED.get(family, {})
        want = {"residual"} if dynamics.get(RESIDUAL) else set()
        want |= {"softmax"} if dynamics.get(SOFTMAX) else set()
        assert want <= set(verdict["compared"]) and {"matmul", "conv"} & set(verdict["compared"]), verdict
        assert verdict["flops"][0] == verdict["flops"][1], verdict["flops"]
        assert not verdict["not_compared"], verdict["not_compared"]


@pytest.mark.parametrize("family", list(FAMILIES))
def test_expected_count_matches_the_framework(family):
    """`Family.expected` (by construction) equals the matmuls + convolutions torch.export's core-ATen
    graph (mm, addmm, bmm, baddbmm, convolution; recurrent layers unrolled) or the jaxpr holds."""
    fam = FAMILIES[family]
    model, inputs = fam.build()
    counted = F.jaxpr_site_count(model, inputs) if fam.jax else F.aten_site_count(model, inputs)
    assert counted == fam.expected


@pytest.mark.families_full
@pytest.mark.parametrize("family", [f for f, fam in FAMILIES.items() if len(fam.routes + fam.full_routes) > 1])
def test_same_site_names_from_every_route(profiles, family):
    """Every route that profiles names the same sites, in the same order, as the first route does."""
    fam = FAMILIES[family]
    names = {}
    for route in fam.routes + fam.full_routes:
        run = profiles.get(family, route)
        if run.proc.returncode == 0:  # pooling sites aside (POOLING_SITE: legacy ONNX has one more)
            names[route] = [s.name for s in run.manifest().sites if not s.kind.startswith("pooling_")]
    first = names[fam.routes[0]]
    for route, got in names.items():
        assert got == first, route


# -- ResNet-18's report: its convolutions and a coverage that adds up ---------------------------------


def test_resnet18_report_lists_convolutions_and_full_coverage(profiles):
    import opscope

    run = profiles.get("resnet18", "pt2")
    manifest = run.manifest()
    convs = [s.name for s in manifest.sites if s.kind.startswith(("conv", "depthwise_conv"))]
    assert len(convs) == 20
    assert re.match(r"  25 sites \(20 convolutions, 5 residual adds\)", run.lines[1]), run.lines[1]
    report = (run.out / "report.md").read_text()
    assert all(f"| {name} |" in report for name in convs)
    # site_costs.csv: the sites, the module, unknown ops, the untapped kinds; they add up to the module
    rows = dict(line.rsplit(",", 1) for line in (run.out / "site_costs.csv").read_text().splitlines()[1:])
    module = int(rows.pop("(module)"))
    assert int(rows.pop("(unknown ops)")) == 0
    assert sum(int(v) for v in rows.values()) == module
    # the report's coverage frame: shares of the module that sum to 1, the tapped share as the line says
    coverage = opscope.mine(run.out).coverage
    assert coverage is not None and coverage["flops"].sum() == module
    assert abs(coverage["share"].sum() - 1.0) < 1e-12
    tapped = coverage.filter(coverage["what"] == "tapped sites")["share"].item()
    line = next(ln for ln in run.lines if ln.startswith("Tapped sites: "))
    assert line.startswith(f"Tapped sites: {100 * tapped:.1f}% of the module's ")
    # report.md's coverage table: the same rows, their FLOPs the module's, their shares 100 % (as rounded)
    table = report.split("## Coverage", 1)[1].split("\n## ", 1)[0]
    cells = [[c.strip() for c in ln.strip("|").split("|")] for ln in table.splitlines() if ln.startswith("| ")][1:]
    assert [c[0] for c in cells] == coverage["what"].to_list()
    assert sum(int(c[1].replace(",", "")) for c in cells) == module
    assert abs(sum(float(c[2].rstrip("%")) for c in cells) - 100) <= 0.05 * len(cells)


@pytest.mark.families_full
@pytest.mark.xfail(strict=True, raises=AssertionError, reason=RESNET_32PX)
def test_resnet18_at_32px(tmp_path):
    """32 px is one pixel too small for IREE 3.13 (33 px, the suite's size, compiles)."""
    model, inputs = F.resnet18(image=32)
    path = F.save_pt2(model, inputs, tmp_path / "resnet18-32.pt2")
    proc = subprocess.run(
        OPSCOPE + ["profile", str(path), "--steps", "2", "--out", str(tmp_path / "run")],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr


# -- the IREE 3.13 bugs, in plain iree-compile (no taps) -----------------------------------------------

PLAIN = (
    "--iree-hal-target-device=local",
    "--iree-hal-local-target-device-backends=llvm-cpu",
    "--iree-llvmcpu-target-cpu=host",
)  # plain iree-compile for the CPU: none of opscope's tuned flags

I1_MASK = """
func.func @main(%a: tensor<8x16xf32>, %b: tensor<16x8xf32>, %mask: tensor<8x8xi1>) -> tensor<8x8xf32> {
  %zero = arith.constant 0.0 : f32
  %ninf = arith.constant -3.0e38 : f32
  %e = tensor.empty() : tensor<8x8xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<8x8xf32>) -> tensor<8x8xf32>
  %s = linalg.matmul ins(%a, %b : tensor<8x16xf32>, tensor<16x8xf32>) outs(%f : tensor<8x8xf32>) -> tensor<8x8xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>,
                                        affine_map<(i, j) -> (i, j)>], iterator_types = ["parallel", "parallel"]}
      ins(%s, %mask : tensor<8x8xf32>, tensor<8x8xi1>) outs(%e : tensor<8x8xf32>) {
  ^bb0(%x: f32, %m: i1, %o: f32):
    %v = arith.select %m, %x, %ninf : f32
    linalg.yield %v : f32
  } -> tensor<8x8xf32>
  return %r : tensor<8x8xf32>
}
"""

STRIDE2_TO_1X1 = """
func.func @main(%x: tensor<1x8x2x2xf32>, %w: tensor<16x8x3x3xf32>) -> tensor<1x16x1x1xf32> {
  %zero = arith.constant 0.0 : f32
  %p = tensor.pad %x low[0, 0, 1, 1] high[0, 0, 1, 1] {
  ^bb0(%i: index, %j: index, %k: index, %l: index):
    tensor.yield %zero : f32
  } : tensor<1x8x2x2xf32> to tensor<1x8x4x4xf32>
  %e = tensor.empty() : tensor<1x16x1x1xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<1x16x1x1xf32>) -> tensor<1x16x1x1xf32>
  %c = linalg.conv_2d_nchw_fchw {dilations = dense<1> : vector<2xi64>, strides = dense<2> : vector<2xi64>}
       ins(%p, %w : tensor<1x8x4x4xf32>, tensor<16x8x3x3xf32>) outs(%f : tensor<1x16x1x1xf32>) -> tensor<1x16x1x1xf32>
  return %c : tensor<1x16x1x1xf32>
}
"""

# The LSTM head of the ONNX route: [T, B, H] → [B, T, H] × a broadcast constant weight, + bias.
# `ALSO` returns the matmul's result too (what a tap does: a second use of it).
EPILOGUE_HEAD = """
func.func @main(%h: tensor<4x2x6xf32>) -> (tensor<2x4x3xf32>{also_type}) {{
  %w = arith.constant dense<{w}> : tensor<6x3xf32>
  %b = arith.constant dense<{b}> : tensor<3xf32>
  %zero = arith.constant 0.0 : f32
  %e0 = tensor.empty() : tensor<2x4x6xf32>
  %t = linalg.transpose ins(%h : tensor<4x2x6xf32>) outs(%e0 : tensor<2x4x6xf32>) permutation = [1, 0, 2]
  %e1 = tensor.empty() : tensor<2x6x3xf32>
  %wb = linalg.generic {{indexing_maps = [affine_map<(d0, d1, d2) -> (d1, d2)>, affine_map<(d0, d1, d2) -> (d0, d1, d2)>],
                        iterator_types = ["parallel", "parallel", "parallel"]}}
      ins(%w : tensor<6x3xf32>) outs(%e1 : tensor<2x6x3xf32>){copy} -> tensor<2x6x3xf32>
  %e2 = tensor.empty() : tensor<2x4x3xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e2 : tensor<2x4x3xf32>) -> tensor<2x4x3xf32>
  %mm = linalg.batch_matmul ins(%t, %wb : tensor<2x4x6xf32>, tensor<2x6x3xf32>) outs(%f : tensor<2x4x3xf32>) -> tensor<2x4x3xf32>
  %y = linalg.generic {{indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d1, d2)>, affine_map<(d0, d1, d2) -> (d2)>,
                                        affine_map<(d0, d1, d2) -> (d0, d1, d2)>],
                       iterator_types = ["parallel", "parallel", "parallel"]}}
      ins(%mm, %b : tensor<2x4x3xf32>, tensor<3xf32>) outs(%e2 : tensor<2x4x3xf32>) {{
  ^bb0(%in: f32, %c: f32, %out: f32):
    %s = arith.addf %in, %c : f32
    linalg.yield %s : f32
  }} -> tensor<2x4x3xf32>
  return %y{also} : tensor<2x4x3xf32>{also_type}
}}
"""


def _plain_compile(text: str, *extra: str):
    """`iree-compile` with `PLAIN` + `extra` flags (in-process), for the local-task driver."""
    from opscope.run.compile import compile_module
    from opscope.run.targets import Target

    plain = Target("plain-llvm-cpu", PLAIN + extra, "local-task", "plain iree-compile flags")
    return compile_module(parse_module(text, new_context()), plain)


def test_iree_data_tiling_packs_i1_mask():
    """An f32 matmul whose result is selected by an i1 mask: data tiling packs the mask with an i8 pad."""
    with pytest.raises(OpscopeError, match="'linalg.pack' op expected padding_value has 'i8' but got: 'i1'"):
        _plain_compile(I1_MASK, "--iree-opt-data-tiling")
    _plain_compile(I1_MASK)  # without data tiling it compiles


def test_iree_stride2_conv_to_1x1():
    """IREE 3.13 fails on this convolution (MLIR text goes to it unchecked); opscope refuses the module
    before compiling, in one line naming the crop (`target_limits.short_windows`)."""
    from opscope.run.compile import compile_module
    from opscope.run.targets import Target

    plain = Target("plain-llvm-cpu", PLAIN, "local-task", "plain iree-compile flags")
    with pytest.raises(OpscopeError, match="operand #1 has shape's dimension #2 to be 4, but found 3"):
        compile_module(STRIDE2_TO_1X1, plain)
    with pytest.raises(OpscopeError, match="cannot compile a convolution with one output along input dim 2"):
        _plain_compile(STRIDE2_TO_1X1)


def test_iree_second_use_changes_fused_epilogue_rounding():
    """The same batch_matmul + bias, compiled once as is and once with the matmul's result returned
    too: the biased results may differ in the last bit (opscope's flags or none), no more."""
    from opscope.run.runtime import load

    rng = np.random.default_rng(0)
    w = (rng.standard_normal((6, 3)) * 0.3).astype(np.float32)
    b = (rng.standard_normal(3) * 0.3).astype(np.float32)

    def dense(a) -> str:
        return np.array2string(a, separator=", ", floatmode="unique", threshold=10**6).replace("\n", "")

    from opscope.run.compile import compile_module

    text = EPILOGUE_HEAD.format(w=dense(w), b=dense(b), copy=COPY_REGION, also="", also_type="")
    also = EPILOGUE_HEAD.format(w=dense(w), b=dense(b), copy=COPY_REGION, also=", %mm", also_type=", tensor<2x4x3xf32>")
    xs = [np.random.default_rng(s).standard_normal((4, 2, 6)).astype(np.float32) for s in range(20)]
    opscope_flags = [compile_module(parse_module(t, new_context()), "llvm-cpu") for t in (text, also)]
    for compiled in ([_plain_compile(text), _plain_compile(also)], opscope_flags):
        one, two = (load(c) for c in compiled)
        diffs = [np.abs(one.invoke("main", x)[0] - two.invoke("main", x)[0]).max() for x in xs]
        # at most a last-bit difference on values of order 1 (on this project's znver4 machines
        # max(diffs) > 0: how a CPU rounds the fused epilogue decides whether they differ at all)
        assert max(diffs) <= 2.5e-7


@pytest.mark.families_full
@pytest.mark.parametrize(
    "family,route,message",
    [
        ("qwen2", "onnx", "'linalg.pack' op expected padding_value has 'i8' but got: 'i1'"),
        ("phi", "onnx", "'linalg.pack' op expected padding_value has 'i8' but got: 'i1'"),
    ],
    ids=["qwen2-onnx", "phi-onnx"],
)
def test_untapped_model_fails_plain_compile_the_same_way(tmp_path, family, route, message):
    """The xfailed routes' failure is IREE's: the untapped imported module fails on the opscope target too."""
    from opscope.importers import import_source
    from opscope.run.compile import compile_module

    path = F.save(FAMILIES[family], route, tmp_path)
    with pytest.raises(OpscopeError, match=re.escape(message)):
        compile_module(import_source(path), "llvm-cpu")
