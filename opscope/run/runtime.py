"""Run compiled IREE modules and read their results back as numpy arrays.

Results are read through a mapped staging buffer (`allocate_buffer` + `queue_copy`)
on drivers whose `DeviceArray.to_host()` cannot import host pointers (Vulkan on Mesa
lavapipe needs 4096-byte alignment there), and with `to_host()` elsewhere.

On the CPU each loaded module gets a device of its own, so the memory of IREE's queue
allocation pool goes with the module. That pool (IREE 3.13, local-task) grows in 64 MiB
slabs and never reuses a freed block whose death frontier spans more than 8 semaphores
(it is "tainted"); a program with many concurrent transients, as a tapped 1.1 B model,
leaks a few slabs every call (~280 MB there). A call that grows the process's own memory
by a slab or more beyond its results, after the first, makes the next call run on a fresh
device and context (`LoadedModule.renewals`): a few milliseconds, the pool's memory back.

`LoadedModule.release()` gives the device, its memory and the module's mapping of its parameter
files back when a driver is done calling (before mining a large model's run, so its weights' pages
leave the process); a later call loads the module again.

A GPU driver's device is shared by the modules loaded on it, and lives only while one of them
holds it: when the last is released or collected, IREE's process-wide cached device is dropped
too. An idle device is not free: IREE 3.13's Vulkan device on Mesa lavapipe keeps two threads
polling from its creation to its end, about one core busy while nothing runs (measured: a bare
device, 0.99 CPU-s a second idle; 0 once it is gone). `release_devices(driver)` gives back every
module's device of a driver at once (the test suite does it after each test).
"""

from __future__ import annotations

import gc
import logging
import weakref
from dataclasses import dataclass, field

import numpy as np

from opscope.errors import OpscopeError
from opscope.ir.parameter_files import release_index
from opscope.run.anon_memory import anon_bytes
from opscope.run.compile import CompiledModule
from opscope.run.heap import give_back_freed_memory, keep_freed_memory_once
from opscope.run.parameters import explain_context_error, io_parameters_module
from opscope.run.targets import require_runnable

_STAGED_DRIVERS = {"vulkan", "metal", "cuda", "hip"}
_OWN_DEVICE_DRIVERS = {"local-task", "local-sync"}  # cheap to create (ms); a GPU's device is shared
POOL_SLAB = 64 << 20  # what local-task's queue allocation pool grows by (IREE 3.13)
_live: weakref.WeakSet[LoadedModule] = weakref.WeakSet()  # every loaded module of this process
log = logging.getLogger("opscope")


@dataclass(eq=False)
class LoadedModule:
    """A compiled module loaded on a device, callable by function name."""

    compiled: CompiledModule
    config: object
    context: object
    _once: dict = field(default_factory=dict, repr=False, compare=False)  # function -> its kept results
    renewals: int = 0  # times the device and context were made afresh (the pool grew by a call)
    _calls: dict = field(default_factory=dict, repr=False, compare=False)  # function -> calls on this device
    _stale: bool = field(default=False, repr=False, compare=False)

    @property
    def driver(self) -> str:
        return self.compiled.target.driver

    def function_names(self) -> list[str]:
        if self.context is None:
            self._renew(())
        return list(self.context.modules.module.vm_module.function_names)

    def release(self, files: bool = True) -> None:
        """Give back the device and its memory and, with `files`, this module's mapping of its
        parameter files (kept while another loaded module maps them); the next call loads the
        module again, with the weights' statistics already computed kept."""
        if self.context is None:
            return
        self._drop()
        if not files:
            return
        others = {
            path for m in list(_live) if m is not self and m.context is not None for _, path in m.compiled.parameters
        }
        for _, path in self.compiled.parameters:
            if path not in others:
                release_index(path)

    def invoke_raw(self, function: str, *inputs):
        """Call `function` with numpy (or already uploaded `DeviceArray`) inputs; returns the
        runtime's device arrays (not yet on the host)."""
        import iree.runtime as rt

        if self._stale or self.context is None:
            inputs = self._renew(inputs)
        try:
            fn = self.context.modules.module[function]
        except (KeyError, AttributeError):
            raise OpscopeError(f"the compiled module has no function '{function}'") from None
        before = anon_bytes() if self.driver in _OWN_DEVICE_DRIVERS else None
        res = fn(*[a if isinstance(a, rt.DeviceArray) else np.ascontiguousarray(a) for a in inputs])
        out = [] if res is None else list(res) if isinstance(res, (tuple, list)) else [res]
        self._note_growth(function, before, out)
        return out

    def _note_growth(self, function: str, before: int | None, results: list) -> None:
        """Mark the device for renewal when this call, not the function's first on this device
        (which fills the pool with its working set), grew the process's own memory by a pool slab
        or more beyond what its results hold (see the module's docstring)."""
        self._calls[function] = calls = self._calls.get(function, 0) + 1
        after = anon_bytes() if before is not None else None
        if after is None or calls < 2:
            return
        held = sum(int(np.prod(a.shape)) * np.dtype(a.dtype).itemsize for a in results)
        if after - before - held >= POOL_SLAB:
            self._stale = True

    def _renew(self, inputs: tuple) -> list:
        """Load the module again on a fresh device (the old one, with its pool, goes when
        nothing holds it); inputs already uploaded to the old device come back through the host."""
        import iree.runtime as rt

        inputs = [np.array(a.to_host()) if isinstance(a, rt.DeviceArray) else a for a in inputs]
        self.renewals += self._stale  # a release is not a renewal
        self._drop()
        fresh = load(self.compiled)
        _live.discard(fresh)
        self.config, self.context = fresh.config, fresh.context
        self._stale, self._calls = False, {}
        return inputs

    def _drop(self, collect: bool = True) -> None:
        """Let the context, then its device, go (before a new device is made); without `collect`
        the caller collects once for several modules."""
        self.context = None
        self.config = None
        _forget_unused_device(self.driver)
        if collect:
            gc.collect()  # IREE's Python objects hold cycles: without a collection the old device stays
            give_back_freed_memory()  # its buffers' memory, which the heap would otherwise keep

    def to_numpy(self, arrays) -> list[np.ndarray]:
        """Bring device arrays to the host, as arrays of their own: `to_host()` maps the device's
        memory, which must not outlive the device (a CPU module's own, see the module docstring)."""
        if self.driver in _STAGED_DRIVERS:
            return [_read_staged(self.config.device, a) for a in arrays]
        return [np.array(a.to_host()) for a in arrays]

    def invoke_once(self, function: str) -> list[np.ndarray]:
        """The results of `function` (which takes nothing: the weights' statistics), computed on the
        first call and kept for the life of this loaded module."""
        if function not in self._once:
            self._once[function] = self.invoke(function)
        return self._once[function]

    def invoke(self, function: str, *inputs: np.ndarray) -> list[np.ndarray]:
        """Call `function` with numpy inputs and return every result as a numpy array. A GPU device
        lost during the call (VK_ERROR_DEVICE_LOST: a driver reset) is dropped and the call made once
        more on a fresh one; lost again, it is a one-line error."""
        try:
            return self.to_numpy(self.invoke_raw(function, *inputs))
        except RuntimeError as e:
            if not device_lost(e) or self.driver in _OWN_DEVICE_DRIVERS:
                raise
            forget_device(self.driver)
            self._drop()
            log.warning("the %s device was lost calling %s; calling it again on a fresh device", self.driver, function)
        try:
            return self.to_numpy(self.invoke_raw(function, *inputs))
        except RuntimeError as e:
            if not device_lost(e):
                raise
            forget_device(self.driver)
            self._drop()
            raise OpscopeError(
                f"the {self.driver} device was lost twice calling {function} (a driver reset each time): "
                f"{str(e).splitlines()[0][:200]}"
            ) from None


def device_lost(error: BaseException) -> bool:
    """The runtime's error says the device was lost (a GPU driver reset, lavapipe's included)."""
    return "DEVICE_LOST" in str(error)


def forget_device(driver: str) -> None:
    """Drop IREE's process-wide device of `driver`: a lost device fails every later load and call
    (the long run's chunks 18–21: one VK_ERROR_DEVICE_LOST, then every vulkan batch of the process)."""
    from iree.runtime import system_setup

    system_setup._GLOBAL_DEVICES_BY_URI.pop(driver, None)  # IREE 3.13: the cache `rt.Config(driver)` reads


def _forget_unused_device(driver: str) -> None:
    """Drop IREE's cached device of a shared-device `driver` once no live loaded module holds a
    context on it, so the device goes with the last module that used it (see the module docstring)."""
    if driver in _OWN_DEVICE_DRIVERS:
        return
    if not any(m.driver == driver and m.context is not None for m in list(_live)):
        forget_device(driver)


def release_devices(driver: str) -> int:
    """Give back every loaded module's device on `driver` (their next call loads them again) and
    IREE's cached one, so no device of `driver` is left in this process; returns how many modules
    were released. An idle lavapipe device keeps a core busy (the module docstring)."""
    from iree.runtime import system_setup

    held = [m for m in list(_live) if m.driver == driver and m.context is not None]
    cached = driver in system_setup._GLOBAL_DEVICES_BY_URI
    for m in held:
        m._drop(collect=False)  # one collection below serves them all
    forget_device(driver)  # cached with no module holding it
    if held or cached:
        gc.collect()
        give_back_freed_memory()
    return len(held)


def load(compiled: CompiledModule, retry: bool = True) -> LoadedModule:
    """Load `compiled` on its target's runtime driver (one-line error if it cannot run here); on a
    GPU device lost earlier, once more on a fresh device (`retry`)."""
    import iree.runtime as rt

    require_runnable(compiled.target)
    keep_freed_memory_once()  # buffers above 32 MiB would be page-faulted in again every call
    driver = compiled.target.driver
    if driver in _OWN_DEVICE_DRIVERS:  # its pool's memory goes with the module
        config = rt.Config(device=rt.system_api.get_first_device([driver], cache=False))
    else:
        config = rt.Config(driver)
    modules = [io_parameters_module(config.vm_instance, compiled.parameters)] if compiled.parameters else []
    modules.append(rt.VmModule.copy_buffer(config.vm_instance, compiled.vmfb))
    try:
        ctx = rt.SystemContext(config=config, vm_modules=modules)
    except (ValueError, RuntimeError) as e:
        if device_lost(e) and driver not in _OWN_DEVICE_DRIVERS and retry:  # a device lost before
            forget_device(driver)
            return load(compiled, retry=False)
        explained = explain_context_error(e, compiled.parameters)
        if explained is None:
            raise
        raise explained from None
    loaded = LoadedModule(compiled, config, ctx)
    _live.add(loaded)
    # Collected without a release: the same; not at exit, where the process takes its devices anyway.
    weakref.finalize(loaded, _forget_unused_device, driver).atexit = False
    return loaded


def _read_staged(device, array) -> np.ndarray:
    """Copy one device array into a host-visible mapped buffer and read it."""
    import iree.runtime as rt

    view = array._buffer_view
    src = view.get_buffer()
    nbytes = src.byte_length()
    dtype = array.dtype
    shape = tuple(array.shape)
    if nbytes == 0:
        return np.zeros(shape, dtype)
    staging = device.allocator.allocate_buffer(
        memory_type=int(rt.MemoryType.HOST_LOCAL | rt.MemoryType.DEVICE_VISIBLE),
        allowed_usage=int(rt.BufferUsage.TRANSFER | rt.BufferUsage.MAPPING),
        allocation_size=nbytes,
    )
    sem = device.create_semaphore(0)
    device.queue_copy(src, staging, [], [(sem, 1)])
    sem.wait(1)
    host = staging.map().asarray(shape, dtype)
    return np.array(host, copy=True)
