"""Run compiled IREE modules and read their results back as numpy arrays.

Results are read through a mapped staging buffer (`allocate_buffer` + `queue_copy`)
on drivers whose `DeviceArray.to_host()` cannot import host pointers (Vulkan on Mesa
lavapipe needs 4096-byte alignment there), and with `to_host()` elsewhere.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from opscope.errors import OpscopeError
from opscope.run.compile import CompiledModule
from opscope.run.heap import keep_freed_memory_once
from opscope.run.parameters import explain_context_error, io_parameters_module
from opscope.run.targets import require_runnable

_STAGED_DRIVERS = {"vulkan", "metal", "cuda", "hip"}


@dataclass
class LoadedModule:
    """A compiled module loaded on a device, callable by function name."""

    compiled: CompiledModule
    config: object
    context: object
    _once: dict = field(default_factory=dict, repr=False, compare=False)  # function -> its kept results

    @property
    def driver(self) -> str:
        return self.compiled.target.driver

    def function_names(self) -> list[str]:
        return list(self.context.modules.module.vm_module.function_names)

    def invoke_raw(self, function: str, *inputs):
        """Call `function` with numpy (or already uploaded `DeviceArray`) inputs; returns the
        runtime's device arrays (not yet on the host)."""
        import iree.runtime as rt

        try:
            fn = self.context.modules.module[function]
        except (KeyError, AttributeError):
            raise OpscopeError(f"the compiled module has no function '{function}'") from None
        res = fn(*[a if isinstance(a, rt.DeviceArray) else np.ascontiguousarray(a) for a in inputs])
        if res is None:
            return []
        return list(res) if isinstance(res, (tuple, list)) else [res]

    def to_numpy(self, arrays) -> list[np.ndarray]:
        """Bring device arrays to the host."""
        if self.driver in _STAGED_DRIVERS:
            return [_read_staged(self.config.device, a) for a in arrays]
        return [np.asarray(a.to_host()) for a in arrays]

    def invoke_once(self, function: str) -> list[np.ndarray]:
        """The results of `function` (which takes nothing: the weights' statistics), computed on the
        first call and kept for the life of this loaded module."""
        if function not in self._once:
            self._once[function] = self.invoke(function)
        return self._once[function]

    def invoke(self, function: str, *inputs: np.ndarray) -> list[np.ndarray]:
        """Call `function` with numpy inputs and return every result as a numpy array."""
        return self.to_numpy(self.invoke_raw(function, *inputs))


def load(compiled: CompiledModule) -> LoadedModule:
    """Load `compiled` on its target's runtime driver (one-line error if it cannot run here)."""
    import iree.runtime as rt

    require_runnable(compiled.target)
    keep_freed_memory_once()  # buffers above 32 MiB would be page-faulted in again every call
    config = rt.Config(compiled.target.driver)
    modules = [io_parameters_module(config.vm_instance, compiled.parameters)] if compiled.parameters else []
    modules.append(rt.VmModule.copy_buffer(config.vm_instance, compiled.vmfb))
    try:
        ctx = rt.SystemContext(config=config, vm_modules=modules)
    except (ValueError, RuntimeError) as e:
        explained = explain_context_error(e, compiled.parameters)
        if explained is None:
            raise
        raise explained from None
    return LoadedModule(compiled, config, ctx)


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
