"""Known-garbage paths do not reach a user silently: profiling an f16 model on vulkan-spirv is
refused on lavapipe (IREE 3.13 returns garbage there, `tests/test_stat_numerics.py` pins it)
and warned of on other Vulkan devices, and so is a bf16 model; f32 models and llvm-cpu are
left alone. Through `InstrumentedModel.build`, which every driver (and `opscope profile`) uses.
"""

from __future__ import annotations

import logging
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import skip_unless_runnable
from errors import one_line

from opscope.errors import OpscopeError
from opscope.models.demo import matmul_module
from opscope.run.instrumented import InstrumentedModel
from opscope.run.target_limits import device_name, tensor_element_types
from opscope.run.targets import get_target

F16 = matmul_module(16, 24, 8, dtype="f16")
BF16 = matmul_module(16, 24, 8, dtype="bf16")
F32 = matmul_module(16, 24, 8)


def on_lavapipe() -> bool:
    return "llvmpipe" in device_name(get_target("vulkan-spirv").driver)


def test_element_types_of_a_module():
    from opscope.ir.loading import parse_module

    assert tensor_element_types(parse_module(F16)) == {"f16"}
    assert "bf16" in tensor_element_types(parse_module(BF16))


@pytest.mark.parametrize(
    "source,dtype,name,what",
    [(F16, "f16", "half", "(a bare f16 -> f32 extension"), (BF16, "bf16", "brain", "(a bf16 matmul with an odd dim")],
    ids=["f16", "bf16"],
)
def test_a_half_model_on_vulkan_is_refused_on_lavapipe_in_one_line(vulkan, caplog, source, dtype, name, what):
    """f16 (a bare extension returns garbage) and bf16 (a matmul with an odd dim comes back wrong: found
    by the generated-model tests) are refused on lavapipe and warned of, once, on other Vulkan devices."""
    if on_lavapipe():
        with pytest.raises(OpscopeError) as e:
            InstrumentedModel.build(source, vulkan, name=name)
        text = one_line(e)
        assert text.startswith(f"{name}: IREE 3.13 on vulkan-spirv computes {dtype} wrong {what}")
        assert text.endswith("refused on this device (" + device_name("vulkan") + "); use --target llvm-cpu")
    else:  # another Vulkan device: warned of, in one line, and the build goes on
        with caplog.at_level(logging.WARNING, logger="opscope"):
            model = InstrumentedModel.build(source, vulkan, name=name)
        warned = [r.getMessage() for r in caplog.records if f"computes {dtype} wrong" in r.getMessage()]
        assert len(warned) == 1 and "\n" not in warned[0]
        assert model.manifest.entries


@pytest.mark.parametrize(
    "source,target",
    [(F32, "vulkan-spirv"), (F16, "llvm-cpu"), (BF16, "llvm-cpu")],
    ids=["f32-vulkan", "f16-cpu", "bf16-cpu"],
)
def test_other_models_and_targets_are_left_alone(source, target, caplog):
    skip_unless_runnable(target)
    with caplog.at_level(logging.WARNING, logger="opscope"):
        InstrumentedModel.build(source, target, name="plain")
    assert not [r for r in caplog.records if "wrong" in r.getMessage()]


def test_cli_profile_of_an_f16_model_on_vulkan_is_one_line(vulkan, tmp_path):
    if not on_lavapipe():
        pytest.skip("the refusal is for lavapipe; other Vulkan devices are warned of (above)")
    path = tmp_path / "half.mlir"
    path.write_text(F16)
    proc = subprocess.run(
        [
            str(Path(sys.executable).parent / "opscope"),
            "profile",
            str(path),
            "--target",
            vulkan,
            "--steps",
            "1",
            "--out",
            str(tmp_path / "run"),
        ],
        capture_output=True,
        text=True,
    )
    assert proc.returncode != 0 and "Traceback" not in proc.stderr
    last = proc.stderr.strip().splitlines()[-1]
    assert "computes f16 wrong" in last and "use --target llvm-cpu" in last
    assert not (tmp_path / "run").exists() or not any((tmp_path / "run").iterdir())
