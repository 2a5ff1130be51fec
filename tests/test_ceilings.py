"""The roofline's ceilings, measured on the target through IREE (`opscope.run.ceilings`).

The two probes compute what they say (run small on llvm-cpu against numpy), the ceilings are
the probes' bytes and FLOPs over IREE's measured time (a scripted benchmark: exact arithmetic),
and the probe's matmul output fill is not taken for the matmul. A real measurement's numbers
are checked in `tests/test_timing.py` (the timing report's ceilings line).
"""

from __future__ import annotations

import numpy as np
import pytest

from opscope.errors import OpscopeError
from opscope.run import ceilings
from opscope.run.ceilings import Ceilings, matmul_module, measure_ceilings, stream_module
from opscope.run.dispatch_timing import DispatchTime


def test_the_probes_compute_what_they_say():
    from opscope.run.compile import compile_module
    from opscope.run.runtime import load

    x = np.arange(7, dtype=np.float32) - 3
    (y,) = load(compile_module(stream_module(7))).invoke("stream", x)
    np.testing.assert_array_equal(y, 2 * x)  # one read, one write of each value
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((2, 5, 5), dtype=np.float32)
    (c,) = load(compile_module(matmul_module(5))).invoke("matmul", a, b)
    np.testing.assert_allclose(c, a @ b, rtol=1e-5, atol=1e-5)


def test_ceilings_are_the_probes_work_over_the_measured_time(monkeypatch):
    scripted = {"stream": [DispatchTime("stream_dispatch_0", "f", 1000.0, 3)], "matmul": []}
    scripted["matmul"] = [
        DispatchTime("matmul_dispatch_0", "f", 50.0, 3),  # the fill of the output: quicker, not the matmul
        DispatchTime("matmul_dispatch_1", "f", 2000.0, 3),
        DispatchTime("_encoding_0", "f", None, 0, untimed="no rebuild"),
    ]
    monkeypatch.setattr(ceilings, "_MEASURED", {})
    monkeypatch.setattr(
        "opscope.run.dispatch_timing.time_dispatches",
        lambda text, target, **_: scripted["stream" if "@stream" in text else "matmul"],
    )
    said = []
    c = measure_ceilings("llvm-cpu", said.append)
    n = ceilings.STREAM_MB * 2**20 // 4
    assert c.stream_bytes == 2 * 4 * n and c.gbps == pytest.approx(8 * n / 1000e-6 / 1e9)
    assert c.matmul_n == 2048 and c.gflops == pytest.approx(2 * 2048**3 / 2000e-6 / 1e9)
    assert c.ridge == pytest.approx(c.gflops / c.gbps)
    assert said == [f"measuring llvm-cpu's ceilings: streaming {2 * ceilings.STREAM_MB} MB, an f32 matmul 2048³"]
    assert measure_ceilings("llvm-cpu", said.append) is c and len(said) == 1  # once per process
    assert c.how.startswith("measured on llvm-cpu through IREE: streaming 537 MB 536.9 GB/s, f32 matmul 2048³ ")
    scripted["stream"] = [DispatchTime("stream_dispatch_0", "f", None, 0, untimed="error: no")]
    with pytest.raises(OpscopeError, match="IREE could not time the ceiling probe: error: no"):
        measure_ceilings("vulkan-spirv")


def test_ceilings_dataclass_says_its_ridge():
    c = Ceilings("cuda", 4000.0, 40_000.0, 2**29, 4096)
    assert c.ridge == 10.0 and "f32 matmul 4096³ 40,000.0 GFLOP/s (ridge 10.0 FLOP/B)" in c.how
