"""opscope.run.runtime on the CPU: each loaded module has a device of its own (IREE's queue
allocation pool goes with it), its results are arrays of their own that outlive it, and a call
that grows the process's memory by a pool slab makes the next call run on a fresh device.

The growth itself (IREE 3.13's pool keeping "tainted" blocks, ~280 MB a call of a tapped 1.1 B
bf16 Llama) needs a model of that size; here the memory reading is replaced to drive the
renewal, and the results are checked against numpy on every side of it.
"""

import gc
import mmap

import iree.runtime as rt
import numpy as np
import pytest

import opscope.run.runtime as runtime
from opscope.run.anon_memory import anon_bytes
from opscope.run.compile import compile_module
from opscope.run.runtime import POOL_SLAB, load

SOURCE = """
func.func @main(%a: tensor<4xf32>, %b: tensor<4xf32>) -> tensor<4xf32> {
  %r = arith.addf %a, %b : tensor<4xf32>
  return %r : tensor<4xf32>
}
func.func @constant() -> tensor<3xf32> {
  %c = arith.constant dense<[1.0, 2.0, 3.0]> : tensor<3xf32>
  return %c : tensor<3xf32>
}
"""

A = np.arange(4, dtype=np.float32)
B = np.full(4, 0.5, np.float32)


@pytest.fixture(scope="module")
def compiled():
    return compile_module(SOURCE, "llvm-cpu")


def test_own_device_and_results_that_outlive_it(compiled):
    first, second = load(compiled), load(compiled)
    assert first.config.device is not second.config.device
    out = first.invoke("main", A, B)[0]
    del first
    gc.collect()
    assert out.flags.owndata  # a copy, not a view of the dropped device's memory
    np.testing.assert_array_equal(out, A + B)
    np.testing.assert_array_equal(second.invoke("main", A, B)[0], A + B)


def test_anon_bytes_reads_this_process():
    before = anon_bytes()
    if before is None:
        pytest.skip("no /proc/self/statm here: renewal is off, nothing to read")
    block = mmap.mmap(-1, 64 << 20, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)  # fresh pages, not the heap's
    block.write(b"\1" * (64 << 20))
    assert anon_bytes() - before >= 60 << 20
    block.close()


class Growing:
    """Stands for anon_bytes: every reading `step` bytes above the last."""

    def __init__(self, step: int):
        self.value, self.step = 1 << 30, step

    def __call__(self) -> int:
        self.value += self.step
        return self.value


def test_a_growing_call_renews_the_device_once_and_keeps_results(compiled, monkeypatch):
    loaded = load(compiled)
    device = loaded.config.device
    on_old = rt.asdevicearray(device, A)
    monkeypatch.setattr(runtime, "anon_bytes", Growing(2 * POOL_SLAB))  # each call grows two slabs
    kept = loaded.invoke_once("constant")  # a function's first call on a device is not judged (warm-up)
    np.testing.assert_array_equal(loaded.invoke("main", A, B)[0], A + B)  # main's first: not judged
    assert loaded.renewals == 0 and not loaded._stale
    np.testing.assert_array_equal(loaded.invoke("main", A, B)[0], A + B)  # grew: renew before the next
    assert loaded.renewals == 0
    # the next call runs on a fresh device; an input uploaded to the old one comes through the host
    np.testing.assert_array_equal(loaded.to_numpy(loaded.invoke_raw("main", on_old, B))[0], A + B)
    assert loaded.renewals == 1 and loaded.config.device is not device
    assert loaded.invoke_once("constant") is kept  # the weights' results are not computed again
    np.testing.assert_array_equal(kept[0], [1.0, 2.0, 3.0])
    np.testing.assert_array_equal(loaded.invoke("main", A, B)[0], A + B)  # the fresh device's second call
    assert loaded.renewals == 1
    np.testing.assert_array_equal(loaded.invoke("main", A, B)[0], A + B)  # it grew too: renewed again
    assert loaded.renewals == 2


def test_no_renewal_while_memory_stays(compiled, monkeypatch):
    loaded = load(compiled)
    monkeypatch.setattr(runtime, "anon_bytes", Growing(POOL_SLAB // 2))  # half a slab a call
    for _ in range(4):
        np.testing.assert_array_equal(loaded.invoke("main", A, B)[0], A + B)
    assert loaded.renewals == 0


def test_a_lost_gpu_device_is_dropped_and_the_call_made_again(vulkan, monkeypatch, caplog):
    """VK_ERROR_DEVICE_LOST (a driver reset) fails every later call on IREE's cached device: the call
    that meets it drops the device and runs once more on a fresh one (numpy's sum); lost twice, one line."""
    from iree.runtime import system_setup

    from opscope.errors import OpscopeError

    loaded = load(compile_module(SOURCE, vulkan))
    before = system_setup._GLOBAL_DEVICES_BY_URI.get("vulkan")
    assert before is not None
    real, failures = runtime.LoadedModule.invoke_raw, [2]

    def flaky(self, function, *inputs):
        if failures[0]:
            failures[0] -= 1
            raise RuntimeError("queue.c:2867: DATA_LOSS; [vkSignalSemaphore] VK_ERROR_DEVICE_LOST; while invoking")
        return real(self, function, *inputs)

    monkeypatch.setattr(runtime.LoadedModule, "invoke_raw", flaky)
    with pytest.raises(OpscopeError, match="the vulkan device was lost twice calling main"):
        loaded.invoke("main", A, B)
    failures[0] = 1
    np.testing.assert_array_equal(loaded.invoke("main", A, B)[0], A + B)
    assert system_setup._GLOBAL_DEVICES_BY_URI.get("vulkan") is not before  # a fresh device
    assert "the vulkan device was lost calling main; calling it again on a fresh device" in caplog.text


def test_a_shared_gpu_device_goes_with_the_last_module_that_holds_it(vulkan):
    """IREE caches one Vulkan device per process, and an idle lavapipe device keeps a core polling:
    the device stays while a loaded module holds it and goes with the last one released or collected
    (no cached device left); `release_devices` gives back every module's at once; every call still
    gives numpy's sum, a released module loading itself again."""
    from iree.runtime import system_setup

    cached = system_setup._GLOBAL_DEVICES_BY_URI
    compiled = compile_module(SOURCE, vulkan)
    first, second = load(compiled), load(compiled)
    assert "vulkan" in cached
    first.release()
    assert "vulkan" in cached  # the second still holds it
    np.testing.assert_array_equal(second.invoke("main", A, B)[0], A + B)
    second.release()
    assert "vulkan" not in cached
    np.testing.assert_array_equal(first.invoke("main", A, B)[0], A + B)  # loads again, on a fresh device
    assert "vulkan" in cached
    del first
    gc.collect()
    assert "vulkan" not in cached  # collected without a release: the device went with it
    np.testing.assert_array_equal(second.invoke("main", A, B)[0], A + B)
    assert runtime.release_devices("vulkan") == 1
    assert "vulkan" not in cached and second.context is None
    assert runtime.release_devices("vulkan") == 0
    np.testing.assert_array_equal(second.invoke("main", A, B)[0], A + B)
