"""The target table: every target compiles an instrumented model here; the ones without a
device here refuse to run in one line; names are looked up forgivingly, and a wrong name
lists the choices.
"""

from __future__ import annotations

import io
import zipfile

import pytest

from opscope.errors import OpscopeError
from opscope.ir.loading import new_context, parse_module
from opscope.models.demo import matmul_module, transformer_module
from opscope.pipeline.taps import inject_matmul_stats
from opscope.run.compile import compile_module
from opscope.run.runtime import load
from opscope.run.targets import TARGETS, driver_available, get_target, runnable_targets

# Target -> a marker in the name of the executable the vmfb embeds.
EXECUTABLE_MARKER = {
    "llvm-cpu": "embedded_elf",
    "vulkan-spirv": "vulkan_spirv",
    "metal-spirv": "metal_msl",
    "cuda": "cuda_nvptx",
    "rocm": "rocm_hsaco",
}
COMPILE_ONLY = ("metal-spirv", "cuda", "rocm")


@pytest.fixture(scope="module")
def demo_vmfbs() -> dict:
    """An instrumented 1-layer transformer (8 sites, softmax and a transposed matmul) per compile-only target."""
    out = {}
    for name in COMPILE_ONLY:
        source = transformer_module(1, 16, 8, ffn=16)  # few distinct shapes: 6 stats kernels
        module, manifest = inject_matmul_stats(parse_module(source, new_context()))
        assert len(manifest.entries) == 8 * 39
        out[name] = compile_module(module, name)
    return out


def vmfb_members(vmfb: bytes) -> list[str]:
    """The vmfb is a zip-wrapped flatbuffer: `module.fb` (identifier IREE) plus its executables."""
    assert vmfb[:4] == b"PK\x03\x04"
    archive = zipfile.ZipFile(io.BytesIO(vmfb))
    names = archive.namelist()
    assert names[0] == "module.fb"
    assert archive.read("module.fb")[8:12] == b"IREE"  # size-prefixed flatbuffer, file identifier
    return names


@pytest.mark.parametrize("target", COMPILE_ONLY)
def test_compile_only_targets_produce_a_module(demo_vmfbs, target):
    compiled = demo_vmfbs[target]
    assert len(compiled.vmfb) > 10_000
    assert compiled.target is TARGETS[target]
    assert compiled.flags[: len(TARGETS[target].flags)] == TARGETS[target].flags
    names = vmfb_members(compiled.vmfb)
    assert any(EXECUTABLE_MARKER[target] in n for n in names[1:]), names


@pytest.mark.parametrize("target", COMPILE_ONLY)
def test_compile_only_targets_refuse_to_run_in_one_line(demo_vmfbs, target):
    if driver_available(TARGETS[target].driver) is None:
        pytest.skip(f"{target} has a device on this machine; its cannot-run path is unreachable")
    with pytest.raises(OpscopeError) as info:
        load(demo_vmfbs[target])
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith(f"target '{target}' cannot run here: ")
    assert message.endswith("(it still compiles)")


@pytest.mark.parametrize("target", ("llvm-cpu", "vulkan-spirv"))
def test_runnable_targets_embed_their_executable(modules, target):
    if driver_available(TARGETS[target].driver):
        pytest.skip(f"{target} cannot run here: {driver_available(TARGETS[target].driver)}")
    built = modules.build(matmul_module(16, 24, 8), target)
    assert any(EXECUTABLE_MARKER[target] in n for n in vmfb_members(built.compiled.vmfb)[1:])
    assert target in runnable_targets()


def test_invoke_takes_uploaded_device_arrays_as_inputs(modules):
    """Inputs already on the device (how benchmarks keep the upload out of a timing) give
    the same results as numpy inputs."""
    import iree.runtime as rt
    import numpy as np

    built = modules.build(matmul_module(16, 24, 8), "llvm-cpu", inject=False)
    lhs = np.arange(16 * 24, dtype=np.float32).reshape(16, 24) / 100
    rhs = np.ones((24, 8), np.float32)
    on_device = rt.asdevicearray(built.loaded.config.device, lhs)
    want = built.loaded.invoke("main", lhs, rhs)[0]
    np.testing.assert_array_equal(built.loaded.invoke("main", on_device, rhs)[0], want)
    np.testing.assert_allclose(want, lhs @ rhs, rtol=1e-6)


def test_the_table_has_the_five_targets():
    assert list(TARGETS) == ["llvm-cpu", "vulkan-spirv", "metal-spirv", "cuda", "rocm"]
    assert {t.driver for t in TARGETS.values()} == {"local-task", "vulkan", "metal", "cuda", "hip"}
    for t in TARGETS.values():
        assert t.flags and all(f.startswith("--iree-") for f in t.flags)


def test_unknown_target_lists_the_choices():
    with pytest.raises(OpscopeError) as info:
        get_target("tpu")
    assert str(info.value) == ("unknown target 'tpu' (choose one of: llvm-cpu, vulkan-spirv, metal-spirv, cuda, rocm)")


def test_compile_with_unknown_target_is_the_same_error():
    with pytest.raises(OpscopeError, match=r"unknown target 'webgpu' \(choose one of: llvm-cpu, "):
        compile_module(matmul_module(2, 2, 2), "webgpu")


@pytest.mark.parametrize(
    ("spelling", "name"),
    [
        ("llvm-cpu", "llvm-cpu"),
        ("LLVM_CPU", "llvm-cpu"),
        ("Llvm-Cpu", "llvm-cpu"),
        ("vulkan_spirv", "vulkan-spirv"),
        ("VULKAN-SPIRV", "vulkan-spirv"),
        (" metal_SPIRV ", "metal-spirv"),
        ("CUDA", "cuda"),
        ("Rocm", "rocm"),
    ],
)
def test_target_lookup_is_case_insensitive_with_underscores(spelling, name):
    assert get_target(spelling) is TARGETS[name]


def test_compiled_modules_are_cached_by_ir_and_flags(tmp_path, monkeypatch):
    from opscope.run import compile as compile_mod

    monkeypatch.setenv("OPSCOPE_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(compile_mod, "_MEMO", {})
    source = matmul_module(2, 3, 4)
    first = compile_module(source, "llvm-cpu")
    second = compile_module(source, "llvm-cpu")
    assert second.vmfb is first.vmfb and second.cached and not first.cached  # the memo, and it says so
    assert len(list((tmp_path / "vmfb").glob("*.vmfb"))) == 1
    compile_mod._MEMO.clear()  # a new process: served from disk, same bytes
    again = compile_module(source, "llvm-cpu")
    assert again is not first and again.vmfb == first.vmfb and again.cached
    other = compile_module(source, "llvm-cpu", extra_flags=("--iree-opt-level=O1",))
    assert other.flags[-1] == "--iree-opt-level=O1" and not other.cached
    assert len(list((tmp_path / "vmfb").glob("*.vmfb"))) == 2
