"""Weights kept in an IREE parameter file (`externalize-weights`): the same sketches, bit for bit,
as with the weights inside the module, one file shared by every build, and a missing, corrupt or
stale file said in one line."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from opscope.errors import OpscopeError
from opscope.ir.loading import module_bytecode, new_context, parse_module
from opscope.ir.parameter_files import open_index, parameter_files, set_parameter_files
from opscope.ir.weights import read_weights, replace_weights
from opscope.pipeline.textual import run_pipeline
from opscope.run.compile import compile_module
from opscope.run.instrumented import InstrumentedModel
from opscope.run.runtime import load

pytest.importorskip("torch")


@pytest.fixture(scope="module")
def mlp(tmp_path_factory):
    """A two-layer MLP imported from torch (weights inside, as the FX importer writes them),
    the same module externalized to a parameter file, that file, and an input."""
    import torch

    from opscope.importers.torch_fx import import_torch

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 48), torch.nn.ReLU(), torch.nn.Linear(48, 8)).eval()
    x = torch.randn(4, 64)
    inline = module_bytecode(import_torch(model, (x,)))
    path = tmp_path_factory.mktemp("params") / "mlp.irpa"
    module = parse_module(inline, new_context())
    run_pipeline(module, f"externalize-weights{{path={path} min-bytes=0}}")
    first = model[0].weight.detach().numpy()
    return inline, module_bytecode(module), path, x.numpy(), first


def test_the_module_keeps_no_weight_bytes_and_names_its_file(mlp):
    inline, external, path, _, first = mlp
    needle = first.tobytes()[:64]
    assert needle in inline and needle not in external
    assert needle in path.read_bytes()
    assert parameter_files(parse_module(external, new_context())) == {"model": str(path)}
    vmfb = compile_module(external, "llvm-cpu").vmfb
    assert needle not in vmfb  # nor does the compiled module


def test_sketches_with_parameters_equal_sketches_with_inlined_weights(mlp, runnable_target):
    """Every result of a tapped call (the model's own, then every sketch, the weights' included),
    bit for bit, and the untapped build of the externalized module agrees with it (parity 0.0)."""
    inline, external, path, x, _ = mlp
    a = InstrumentedModel.build(inline, runnable_target)
    b = InstrumentedModel.build(external, runnable_target)
    assert b.loaded.compiled.parameters == (("model", str(path)),)
    assert b.manifest.weights_function  # the weights' sketches read the parameter globals
    outs_a, outs_b = a(x), b(x)
    assert len(outs_a) == len(outs_b) > 2
    for i, (p, q) in enumerate(zip(outs_a, outs_b)):
        np.testing.assert_array_equal(p, q, err_msg=f"result {i}")
    assert b.check_parity([x], outs_b) == 0.0


def test_read_weights_reads_the_parameter_file(mlp):
    inline, external, _, _, first = mlp
    inside = read_weights(parse_module(inline, new_context()))
    outside = read_weights(parse_module(external, new_context()))
    assert [w.name for w in outside] == [w.name for w in inside] and len(outside) == 2
    assert {w.source for w in outside} == {"parameter"}
    for w_in, w_out in zip(inside, outside):
        np.testing.assert_array_equal(w_out.values, w_in.values)
    np.testing.assert_array_equal(outside[0].matrix(), first)


def test_replaced_weights_beside_parameters_compute_as_inside(mlp):
    """`layers --measure` with a parameter file: a plan's rewritten weight goes into the module as a
    constant while the others stay parameters; the build computes what the module with every
    weight inside computes with the same replacement, bit for bit."""
    inline, external, path, x, first = mlp
    new = {read_weights(parse_module(inline, new_context()))[0].name: np.round(first * 8) / 8}
    outs = []
    for source in (inline, external):
        module = parse_module(source, new_context())
        replace_weights(module, new)
        outs.append(load(compile_module(module, "llvm-cpu")).invoke("main", x)[0])
        if source is external:
            assert parameter_files(module) == {"model": str(path)}
            assert "#flow.parameter.named" in str(module) and "dense_resource" in str(module)
    np.testing.assert_array_equal(outs[1], outs[0])


def test_one_file_serves_every_build_mapped_once(mlp):
    """The tapped and the untapped build read the file the import wrote: it is not rewritten, and
    the process maps it once."""
    _, external, path, x, _ = mlp
    before = path.stat().st_mtime_ns
    tapped = InstrumentedModel.build(external, "llvm-cpu")
    plain = load(compile_module(external, "llvm-cpu"))
    assert plain.compiled.parameters == tapped.loaded.compiled.parameters == (("model", str(path)),)
    np.testing.assert_array_equal(plain.invoke("main", x)[0], tapped.original(tapped(x))[0])
    assert path.stat().st_mtime_ns == before
    assert open_index(str(path)) is open_index(str(path))


def _copy(mlp, tmp_path, data: bytes | None):
    """The externalized module pointed at a file of its own in `tmp_path` holding `data` (None:
    no file), compiled."""
    _, external, path, _, _ = mlp
    text = str(parse_module(external, new_context())).replace(str(path), str(tmp_path / "w.irpa"))
    if data is not None:
        (tmp_path / "w.irpa").write_bytes(data)
    return compile_module(text, "llvm-cpu")


def test_a_missing_parameter_file_is_one_line_naming_it_before_compiling(mlp, tmp_path):
    with pytest.raises(OpscopeError, match=r"parameter file \S+w\.irpa is missing") as e:
        _copy(mlp, tmp_path, None)  # refused by compile_module, before iree-compile runs
    assert "\n" not in str(e.value)


def test_a_corrupt_parameter_file_is_one_line_naming_it_before_compiling(mlp, tmp_path):
    with pytest.raises(OpscopeError, match=r"parameter file \S+w\.irpa cannot be read as a parameter archive") as e:
        _copy(mlp, tmp_path, b"not an archive" * 8)
    assert "\n" not in str(e.value) and "magic" in str(e.value)


def test_a_parameter_file_gone_after_compiling_is_one_line_when_loading(mlp, tmp_path):
    from opscope.ir.parameter_files import release_index

    _, _, path, _, _ = mlp
    compiled = _copy(mlp, tmp_path, path.read_bytes())
    (tmp_path / "w.irpa").unlink()
    release_index(str(tmp_path / "w.irpa"))
    with pytest.raises(OpscopeError, match=r"parameter file \S+w\.irpa is missing") as e:
        load(compiled)
    assert "\n" not in str(e.value)


def test_a_file_without_the_modules_key_is_one_line_naming_it(mlp, tmp_path):
    """A file rewritten by another import (other keys) is found out when the module loads."""
    from iree.runtime.io import save_archive_file

    save_archive_file({"other": np.zeros(4, np.float32)}, str(tmp_path / "stale.irpa"))
    compiled = _copy(mlp, tmp_path, (tmp_path / "stale.irpa").read_bytes())
    with pytest.raises(
        OpscopeError, match=r"reads parameter 'weight_\d+', which its parameter files \(model=\S+\)"
    ) as e:
        load(compiled)
    assert "\n" not in str(e.value)


def test_externalizing_twice_is_refused(mlp, tmp_path):
    _, external, _, _, _ = mlp
    module = parse_module(external, new_context())
    with pytest.raises(OpscopeError, match="already in parameter scope 'model'"):
        run_pipeline(module, f"externalize-weights{{path={tmp_path / 'again.irpa'}}}")


def test_iree_benchmark_module_is_given_the_parameter_file(mlp):
    """`time_calls` (timing, plan) runs IREE's benchmark tool, which needs `--parameters` too."""
    from opscope.run.call_timing import time_calls

    inline, external, _, x, _ = mlp
    times = time_calls(
        [compile_module(inline, "llvm-cpu"), compile_module(external, "llvm-cpu")], "main", [x], rounds=1
    )
    assert len(times) == 2 and all(t.min_us > 0 for t in times)


def test_profile_parameters_writes_the_weights_to_the_run_folder(mlp, tmp_path):
    """`opscope profile --parameters`: the run folder holds weights.irpa and the same sketches,
    row for row, as the run with the weights inside the module."""
    import polars as pl
    from inprocess import opscope

    inline, _, _, _, first = mlp
    model = tmp_path / "mlp.mlirbc"
    model.write_bytes(inline)
    runs = {}
    for how in ("inside", "parameters"):
        flags = ["--parameters"] if how == "parameters" else []
        proc = opscope("profile", str(model), "--steps", "2", "--out", str(tmp_path / how), *flags)
        assert proc.returncode == 0, proc.stderr[-2000:]
        runs[how] = pl.read_csv(tmp_path / how / "sketches.csv")
    irpa = tmp_path / "parameters" / "weights.irpa"
    assert first.tobytes()[:64] in irpa.read_bytes()
    assert not (tmp_path / "inside" / "weights.irpa").exists()
    assert runs["inside"].height > 0 and runs["inside"].equals(runs["parameters"])


def _mapped(path: Path) -> bool:
    """Whether this process maps `path` (Linux: /proc/self/maps)."""
    return str(path.resolve()) in Path("/proc/self/maps").read_text()


def test_a_released_module_unmaps_its_file_and_loads_again(mlp, tmp_path):
    """`LoadedModule.release()`: the device goes, the file stays mapped while another loaded module
    maps it and leaves the process with the last; the next call loads it again, same results."""
    if not Path("/proc/self/maps").exists():
        pytest.skip("no /proc/self/maps here to see the mapping")
    compiled = _copy(mlp, tmp_path, mlp[2].read_bytes())
    x = mlp[3]
    first, second = load(compiled), load(compiled)
    expected = first.invoke("main", x)[0]
    np.testing.assert_array_equal(second.invoke("main", x)[0], expected)
    first.release()
    assert first.context is None and _mapped(tmp_path / "w.irpa")  # the second module still reads it
    second.release()
    assert not _mapped(tmp_path / "w.irpa")
    np.testing.assert_array_equal(first.invoke("main", x)[0], expected)  # loaded again, on the file
    assert _mapped(tmp_path / "w.irpa") and first.renewals == 0  # a release is not a renewal


def test_plan_maps_the_weights_and_apply_writes_them_beside_the_module(mlp, tmp_path):
    """`opscope plan RUN --parameters`: every build maps one parameter file, the candidates' errors
    equal those of the plan with the weights inside, and `--apply -o FILE` writes the weights to
    FILE's .irpa, which the written module names (the temporary file is gone after the plan)."""
    import opscope

    inline, _, _, x, _ = mlp
    model = tmp_path / "mlp.mlirbc"
    model.write_bytes(inline)
    opscope.profile(str(model), out=tmp_path / "run", steps=1)
    out = tmp_path / "spec.mlir"
    plans = {
        apart: opscope.kernel_plan(
            tmp_path / "run",
            kinds=("quantize-weight",),
            rounds=1,
            parameters=apart,
            apply=apart,
            out=out if apart else None,
        )
        for apart in (False, True)
    }
    errors = {
        apart: [(c.site, c.proposal.label, c.rel_error) for c in plan.candidates] for apart, plan in plans.items()
    }
    assert len(errors[True]) == 4 and errors[True] == errors[False]  # W8A16 and W8A8 of both layers (one step:
    # no SmoothQuant, whose maxima would come from the step its error is measured on)
    irpa = (tmp_path / "spec.irpa").resolve()
    assert plans[True].applied.weights == (("model", irpa),)
    written = parse_module(out.read_text(), new_context())
    assert parameter_files(written) == {"model": str(irpa)}
    assert "--parameters=model=" in opscope.render(plans[True])
    got = load(compile_module(written, "llvm-cpu")).invoke("main", x)[0]
    want = load(compile_module(inline, "llvm-cpu")).invoke("main", x)[0]
    np.testing.assert_allclose(got, want, rtol=0.05, atol=0.05)  # int8 sites within the plan's bound


# ----- the torch route: weights written straight from the tensors (`importers.torch_parameters`)


def _graph_modules() -> int:
    import gc
    import warnings

    import torch

    gc.collect()
    with warnings.catch_warnings():  # isinstance on torch's deprecated lazy attributes warns
        warnings.simplefilter("ignore", FutureWarning)
        return sum(isinstance(o, torch.fx.GraphModule) for o in gc.get_objects())


def test_torch_import_writes_the_weights_straight_to_the_file(tmp_path):
    """`import_torch(..., parameters=)`: no weight of 4 KiB or more inside the module, globals
    named by the torch names, the file holding exactly those tensors' bytes; the compiled
    module computes what the inline import computes, bit for bit; nothing of the traced
    program outlives the import (torch 2.13 keeps its last graph in a module-level map)."""
    import torch

    from opscope.importers.torch_fx import import_torch
    from opscope.run.compile import STREAMED_WEIGHTS_FLAGS

    torch.manual_seed(1)
    model = torch.nn.Sequential(torch.nn.Linear(64, 48), torch.nn.ReLU(), torch.nn.Linear(48, 8)).eval()
    x = torch.randn(4, 64)
    before = _graph_modules()
    path = tmp_path / "w.irpa"
    module = import_torch(model, (x,), parameters=path)
    assert _graph_modules() == before
    text = str(module)
    assert '#flow.parameter.named<"model"::"0.weight">' in text and "dense_resource" in text  # small ones stay
    assert parameter_files(module) == {"model": str(path)}
    index = open_index(str(path))
    assert [index[i].key for i in range(len(index))] == ["0.weight"]  # 12 KiB; the rest < 4 KiB
    assert bytes(index[0].file_view) == model[0].weight.detach().numpy().tobytes()
    streamed = compile_module(module, "llvm-cpu")
    assert set(STREAMED_WEIGHTS_FLAGS) <= set(streamed.flags)
    inline = compile_module(import_torch(model, (x,)), "llvm-cpu")
    assert not set(STREAMED_WEIGHTS_FLAGS) & set(inline.flags)
    got, want = load(streamed).invoke("main", x.numpy())[0], load(inline).invoke("main", x.numpy())[0]
    np.testing.assert_array_equal(got, want)
    np.testing.assert_allclose(got, model(x).detach().numpy(), rtol=1e-5, atol=1e-5)


def test_bf16_weights_are_stored_as_bf16(tmp_path):
    """A bf16 model's weights go to the file in bf16 (their own two bytes each) and the module
    computes torch's bf16 result (to bf16's precision)."""
    import ml_dtypes
    import torch

    from opscope.importers.torch_fx import import_torch

    torch.manual_seed(2)
    model = torch.nn.Linear(64, 48).to(torch.bfloat16).eval()
    x = torch.randn(4, 64, dtype=torch.bfloat16)
    module = import_torch(model, (x,), parameters=tmp_path / "w.irpa")
    assert "tensor<48x64xbf16>" in str(module)
    index = open_index(str(tmp_path / "w.irpa"))
    assert bytes(index[0].file_view) == model.weight.detach().view(torch.int16).numpy().tobytes()
    got = load(compile_module(module, "llvm-cpu")).invoke("main", x.float().numpy().astype(ml_dtypes.bfloat16))[0]
    want = model(x).float().detach().numpy()
    np.testing.assert_allclose(np.asarray(got).astype(np.float32), want, rtol=2e-2, atol=2e-2)


def test_profile_puts_a_large_models_weights_in_a_file_by_default(tmp_path, monkeypatch):
    """`parameters=None` (the default): a model file of `AUTO_BYTES` or more is imported
    in a child process that writes weights.irpa, and profiles to the same rows, bit for bit, as
    with the weights inside; below the threshold nothing is written."""
    import polars as pl
    import torch

    import opscope
    from opscope.ir import parameter_files

    torch.manual_seed(3)
    model = torch.nn.Sequential(torch.nn.Linear(64, 48), torch.nn.ReLU(), torch.nn.Linear(48, 8)).eval()
    pt2 = tmp_path / "mlp.pt2"
    torch.export.save(torch.export.export(model, (torch.randn(4, 64),)), str(pt2))
    small = opscope.profile(pt2, out=tmp_path / "small", steps=2)
    monkeypatch.setattr(parameter_files, "AUTO_BYTES", pt2.stat().st_size)
    large = opscope.profile(pt2, out=tmp_path / "large", steps=2)
    assert not (tmp_path / "small" / "weights.irpa").exists() and not small.model.loaded.compiled.parameters
    irpa = tmp_path / "large" / "weights.irpa"
    assert large.model.loaded.compiled.parameters == (("model", str(irpa)),)
    assert model[0].weight.detach().numpy().tobytes() in irpa.read_bytes()
    a, b = pl.read_csv(small.sketches), pl.read_csv(large.sketches)
    assert a.height > 0 and a.equals(b)
    assert large.parity == 0.0


def test_a_child_import_failure_is_the_childs_one_line(tmp_path):
    from opscope.importers import import_source

    bad = tmp_path / "bad.pt2"
    bad.write_bytes(b"not a zip")
    with pytest.raises(OpscopeError, match=r"bad\.pt2: not a readable torch.export program") as e:
        import_source(bad, parameters=tmp_path / "w.irpa")
    assert "\n" not in str(e.value) and not (tmp_path / "w.irpa").exists()


def test_the_cli_states_the_threshold_it_uses():
    from inprocess import opscope

    from opscope.ir.parameter_files import AUTO_BYTES

    proc = opscope("profile", "--help")
    assert f"{AUTO_BYTES >> 20} MiB" in " ".join(proc.stdout.split())


@pytest.mark.parametrize(("dtype", "routes"), [("bfloat16", (False, True)), ("float16", (True,))])
def test_a_16_bit_model_profiles_in_its_own_dtype(tmp_path, dtype, routes):
    """A bf16 / f16 torch model (most LLM checkpoints are bf16) profiles as it is, weights inside
    or in a parameter file: the taps read the 16-bit tensors and accumulate in f32 (the input's
    min, max and mean equal numpy's of the same values), the same rows both ways, parity within
    one rounding of the result type here (a tap that splits a fused dispatch rounds once more).
    Before, IREE 3.13 refused every tapped bf16 build (a bias `dense_resource` in a dispatch)."""
    import ml_dtypes
    import polars as pl
    import torch

    import opscope

    dt = getattr(torch, dtype)
    np_dt = np.dtype(ml_dtypes.bfloat16 if dtype == "bfloat16" else np.float16)
    torch.manual_seed(4)
    model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 8)).to(dt).eval()
    pt2 = tmp_path / "m.pt2"
    torch.export.save(torch.export.export(model, (torch.randn(4, 64, dtype=dt),)), str(pt2))
    x = torch.randn(4, 64).numpy().astype(np_dt)
    runs = {}
    for how in routes:
        r = opscope.profile(pt2, out=tmp_path / str(how), steps=1, inputs=[[x]], parameters=how)
        assert r.parity is not None and r.parity <= 2 * float(ml_dtypes.finfo(np_dt).eps)  # one rounding
        runs[how] = opscope.read_sketches(r)
    assert runs[True].height > 0 and all(run.equals(runs[True]) for run in runs.values())
    lhs = runs[True].filter((pl.col("site") == "0") & (pl.col("role") == "lhs"))
    got = {s: lhs.filter(pl.col("stat") == s)["value"][0] for s in ("min", "max", "mean")}
    want = x.astype(np.float32)
    assert got["min"] == want.min() and got["max"] == want.max()
    assert got["mean"] == pytest.approx(float(want.mean()), rel=1e-6, abs=1e-7)


def test_a_model_compiles_once_whichever_folder_holds_its_parameter_file(mlp, tmp_path):
    """The compiler never sees where the weights live: the same module naming another copy of its
    file is a cache hit, and the hit loads that other copy."""
    _, external, path, x, _ = mlp
    first = compile_module(external, "llvm-cpu")
    (tmp_path / "copy.irpa").write_bytes(path.read_bytes())
    moved = parse_module(external, new_context())
    set_parameter_files(moved, {"model": str(tmp_path / "copy.irpa")})
    second = compile_module(moved, "llvm-cpu")
    assert second.cached and second.vmfb == first.vmfb
    assert second.parameters == (("model", str(tmp_path / "copy.irpa")),)
    np.testing.assert_array_equal(load(second).invoke("main", x)[0], load(first).invoke("main", x)[0])


@pytest.fixture(scope="module")
def mlp_pt2(tmp_path_factory):
    """A three-layer MLP saved as a `.pt2` (two weights of 4 KiB or more, one below)."""
    import torch

    torch.manual_seed(5)
    model = torch.nn.Sequential(
        torch.nn.Linear(64, 96), torch.nn.ReLU(), torch.nn.Linear(96, 64), torch.nn.ReLU(), torch.nn.Linear(64, 8)
    ).eval()
    pt2 = tmp_path_factory.mktemp("pt2") / "mlp.pt2"
    torch.export.save(torch.export.export(model, (torch.randn(4, 64),)), str(pt2))
    return pt2, model


def test_whatif_variants_share_one_parameter_file(mlp_pt2):
    """`whatif(parameters=True)`: the model's weights go to one file in a temporary folder, the
    module every variant is built from holds none of their bytes, the report equals the one with
    the weights inside, number for number, and the folder goes with the evaluation set."""
    import gc

    from opscope.act.evalset import eval_set
    from opscope.act.whatif import fakequant, whatif

    pt2, model = mlp_pt2
    evalset = eval_set(pt2, steps=2, parameters=True)
    folder = Path(evalset.weights.name)
    files = parameter_files(parse_module(evalset.module, new_context()))
    assert files == {"model": str(folder / "weights.irpa")}
    needle = model[0].weight.detach().numpy().tobytes()[:64]
    assert needle not in evalset.module and needle in (folder / "weights.irpa").read_bytes()
    apart = whatif(evalset, [fakequant("w8a8")])
    inside = whatif(eval_set(pt2, steps=2, parameters=False), [fakequant("w8a8")])
    assert apart.to_dict() == inside.to_dict()
    assert apart.weights == 4 * (64 * 96 + 96 * 64 + 64 * 8)  # every matmul weight counted, the file's too
    del evalset
    gc.collect()
    assert not folder.exists()


def test_parity_builds_share_one_parameter_file(mlp_pt2):
    """`parity(inject_b=True, parameters=True)`: both builds read the weights from the file, and
    injection still leaves every op bit-identical."""
    import opscope

    pt2, _ = mlp_pt2
    report = opscope.parity(pt2, inject_b=True, parameters=True)
    assert report.exact and {"0#0", "2#0", "4#0"} <= {d.name for d in report.ops}


def test_weights_dtype_bf16_stores_half_and_computes_in_f32(mlp_pt2, tmp_path):
    """`weights_dtype="bf16"` on an f32 torch model: the file holds each large weight's bf16 bits
    (torch's own rounding), the model computes in f32 what torch computes with those rounded
    weights, the weights' sketches are the rounded weights' numpy statistics, injection stays
    bit-identical; without a parameter file it is one line."""
    import copy

    import ml_dtypes
    import polars as pl
    import torch

    import opscope

    pt2, model = mlp_pt2
    run = opscope.profile(pt2, out=tmp_path / "run", steps=1, weights_dtype="bf16")
    assert run.parity == 0.0
    index = open_index(str(tmp_path / "run" / "weights.irpa"))
    stored = {index[i].key: bytes(index[i].file_view) for i in range(len(index))}
    w0 = model[0].weight.detach()
    assert stored["0.weight"] == w0.to(torch.bfloat16).view(torch.int16).numpy().tobytes()
    rounded = copy.deepcopy(model)  # the weights of 4 KiB or more rounded, as the file stores them
    rounded.load_state_dict(
        {k: v.to(torch.bfloat16).float() if v.numel() * 4 >= 4096 else v for k, v in model.state_dict().items()}
    )
    x = np.random.default_rng(0).standard_normal((4, 64)).astype(np.float32)
    got = load(compile_module(run.model.base_source, "llvm-cpu")).invoke("main", x)[0]
    np.testing.assert_allclose(got, rounded(torch.from_numpy(x)).detach().numpy(), rtol=1e-5, atol=1e-6)
    rows = opscope.read_sketches(run).filter((pl.col("site") == "0") & (pl.col("role") == "rhs"))
    want = w0.to(torch.bfloat16).float().numpy()
    assert rows.filter(pl.col("stat") == "max")["value"][0] == want.max()
    assert rows.filter(pl.col("stat") == "min")["value"][0] == want.min()
    assert np.dtype(ml_dtypes.bfloat16).itemsize * w0.numel() == len(stored["0.weight"])
    with pytest.raises(OpscopeError, match="drop --no-parameters") as e:
        opscope.profile(pt2, out=tmp_path / "inline", weights_dtype="bf16", parameters=False)
    assert "\n" not in str(e.value)


def _bf16_bits(x: np.ndarray) -> bytes:
    import ml_dtypes

    return x.astype(ml_dtypes.bfloat16).tobytes()


def _rounded(x: np.ndarray) -> np.ndarray:
    import ml_dtypes

    return x.astype(ml_dtypes.bfloat16).astype(np.float32)


def test_weights_dtype_on_the_other_routes(mlp, tmp_path):
    """`weights_dtype="bf16"` beyond torch (`externalize-weights{dtype=bf16}`): an MLIR file, an
    ONNX file (imported in a child process) and a module in memory store each float32 weight's bf16 bits
    (rounded to nearest even, as torch rounds), declare it bf16 and compute in f32 what numpy
    computes with the rounded weights; injection stays bit-identical. The child's import phases
    reach the parent as they happen (a ticker shows them)."""
    import opscope
    from opscope.importers import import_source
    from opscope.ir.progress import listening

    inline, _, _, x, first = mlp
    model = tmp_path / "mlp.mlirbc"
    model.write_bytes(inline)
    run = opscope.profile(str(model), out=tmp_path / "mlir", steps=1, weights_dtype="bf16")
    assert run.parity == 0.0
    index = open_index(str(tmp_path / "mlir" / "weights.irpa"))
    stored = sorted(bytes(index[i].file_view) for i in range(len(index)))
    assert _bf16_bits(first) in stored and len(stored) == 1  # the 48x8 weight is under MIN_BYTES
    assert "tensor<48x64xbf16>" in str(parse_module(run.model.base_source, new_context()))

    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper, numpy_helper

    w = np.random.default_rng(2).standard_normal((64, 48)).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "W"], ["y"], name="/proj/MatMul")],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 64])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 48])],
        [numpy_helper.from_array(w, "W")],
    )
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), tmp_path / "m.onnx")
    with listening((phases := []).append):  # the child's phases, said here as it enters them
        module = import_source(tmp_path / "m.onnx", parameters=tmp_path / "onnx.irpa", weights_dtype="bf16")
    assert phases[:2] == ["load the ONNX model", "import to MLIR"] and "lower: onnx-to-torch" in phases
    assert phases[-2:] == ["write the weights to onnx.irpa", "store the weights as bf16"]
    index = open_index(str(tmp_path / "onnx.irpa"))
    assert [bytes(index[i].file_view) for i in range(len(index))] == [_bf16_bits(w)]
    got = load(compile_module(module, "llvm-cpu")).invoke("main", x)[0]
    np.testing.assert_allclose(got, x.astype(np.float64) @ _rounded(w), rtol=1e-5, atol=1e-5)

    from opscope.models.source import open_apart

    apart, folder = open_apart(inline, weights_dtype="bf16")  # a module in memory
    assert "tensor<48x64xbf16>" in str(parse_module(apart.module, new_context()))
    index = open_index(str(Path(folder.name) / "weights.irpa"))
    assert [bytes(index[i].file_view) for i in range(len(index))] == [_bf16_bits(first)]


def test_weights_dtype_without_stored_weights_says_so(caplog):
    """The zoo's digits MLP takes its weights as arguments: nothing to store as bf16, and a warning
    says so instead of a run that silently ignored the option."""
    from opscope.ir.loading import parse_module as parse
    from opscope.models.source import open_apart

    with caplog.at_level("WARNING", logger="opscope"):
        model, folder = open_apart("digits", weights_dtype="bf16")
    assert "weights dtype bf16: the module holds no float32 weight" in caplog.text
    assert "bf16" not in str(parse(model.module, new_context())) and folder is not None
