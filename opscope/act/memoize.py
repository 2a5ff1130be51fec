"""Memoization behind an exact guard: a repeated input returns the stored output, bit-identical.

The reference's `MemoMatmul` (§3.4) generalized to any call, such as a compiled model's
`invoke`: hash the inputs, and on a hash hit **verify the stored inputs equal these
exactly** (bit patterns, so -0.0 ≠ 0.0 and NaN payloads count) before returning the stored
outputs. Anything else (a miss, or a hash collision) runs the call. A miss is stored only
while the cache holds fewer than `cap` entries (no eviction), unless `evict=True` (then
the least recently used entry makes room). A hit is correct by construction.

The key is BLAKE2b over the raw bytes, shapes and dtypes: fast and in C. The reference's
FNV-1a over f32 bit patterns (`fnv1a_f32`) is kept for its definition; it is sequential,
so slow in Python.

`memoize_site(module, "fc1")` memoizes one site of a model by itself, on the host: the site
is outlined alone (`extract-site{only=true}`), compiled for the target (through opscope's
compile cache) and its call (`compile_site`, a `CompiledSite`: the site's runtime operands
in, its result out) wrapped in `Memoized`.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from iree.compiler import ir

    from opscope.ir.arguments import Argument
    from opscope.run.runtime import LoadedModule

FNV_OFFSET, FNV_PRIME = 0xCBF29CE484222325, 0x100000001B3
MASK64 = (1 << 64) - 1


def fnv1a_f32(x: np.ndarray) -> int:
    """The reference's `hash_f32`: 64-bit FNV-1a over the raw f32 bit patterns (XOR the 32-bit word, multiply)."""
    h = FNV_OFFSET
    for word in np.ascontiguousarray(x, dtype=np.float32).reshape(-1).view(np.uint32).tolist():
        h = ((h ^ word) * FNV_PRIME) & MASK64
    return h


def _key(args: Sequence[np.ndarray]) -> bytes:
    h = hashlib.blake2b(digest_size=16)
    for a in args:
        h.update(f"{a.dtype.str}{a.shape}".encode())
        h.update(_raw(a).data if a.size else b"")
    return h.digest()


def _same(a: Sequence[np.ndarray], b: Sequence[np.ndarray]) -> bool:
    """Bit-identical argument lists (dtype, shape and every byte)."""
    return len(a) == len(b) and all(
        x.dtype == y.dtype and x.shape == y.shape and np.array_equal(_raw(x), _raw(y)) for x, y in zip(a, b)
    )


def _raw(x: np.ndarray) -> np.ndarray:
    """The array's bytes as a flat uint8 view (no copy when contiguous): compared bit for bit."""
    return np.ascontiguousarray(x).reshape(-1).view(np.uint8)


class Memoized:
    """`fn` behind an exact guard: `Memoized(loaded.invoke_fn, cap=16)(*arrays)`; counters `hits`,
    `misses`, `collisions` (a hash hit whose stored inputs differ: run, never returned)."""

    def __init__(self, fn: Callable[..., object], cap: int = 16, evict: bool = False):
        if cap < 0:
            from opscope.errors import OpscopeError

            raise OpscopeError(f"memoize: cap must be >= 0, got {cap}")
        self.fn, self.cap, self.evict = fn, cap, evict
        self.hits = self.misses = self.collisions = 0
        self._cache: OrderedDict[bytes, tuple[list[np.ndarray], object]] = OrderedDict()

    def __call__(self, *args: np.ndarray):
        arrays = [np.asarray(a) for a in args]
        key = _key(arrays)
        stored = self._cache.get(key)
        if stored is not None:
            if _same(stored[0], arrays):
                self.hits += 1
                self._cache.move_to_end(key)
                return stored[1]
            self.collisions += 1
        self.misses += 1
        out = self.fn(*args)
        if stored is None and self.cap:
            if len(self._cache) >= self.cap and self.evict:
                self._cache.popitem(last=False)
            if len(self._cache) < self.cap:
                self._cache[key] = ([a.copy() for a in arrays], _frozen(out))
        return out

    @property
    def hit_rate(self) -> float:
        return self.hits / max(self.hits + self.misses, 1)

    def __len__(self) -> int:
        return len(self._cache)


def _frozen(out):
    """A private, read-only copy of the outputs (an array or a list/tuple of them), so a caller
    that writes into a returned array cannot change what the next hit returns."""
    if isinstance(out, np.ndarray):
        frozen = out.copy()
        frozen.flags.writeable = False
        return frozen
    if isinstance(out, (list, tuple)):
        return type(out)(_frozen(o) for o in out)
    return out


@dataclass
class CompiledSite:
    """One site outlined alone and compiled: `site(*operands) -> result`, the operands in the
    outlined function's order (the lhs, then each runtime operand: a computed or argument
    rhs, an init that is no fill of a constant; `arguments` gives their shapes and types)."""

    site: str
    function: str
    arguments: list[Argument]
    loaded: LoadedModule = field(repr=False)

    def __call__(self, *operands: np.ndarray) -> np.ndarray:
        if len(operands) != len(self.arguments):
            from opscope.errors import OpscopeError

            wanted = ", ".join(a.describe() for a in self.arguments)
            raise OpscopeError(
                f"site '{self.site}' takes {len(self.arguments)} operands ({wanted}), got {len(operands)}"
            )
        return self.loaded.invoke(self.function, *operands)[0]


def compile_site(module: ir.Module | str | bytes, site: str | int, target: str = "llvm-cpu") -> CompiledSite:
    """Outline `site` (a site name or 0-based ordinal, as `extract-site` takes it) of `module`
    alone (`extract-site{only=true}`, on a copy: the caller's module is left as it was),
    compile it for `target` with opscope's compile cache and load it."""
    from iree.compiler import ir

    from opscope.ir.arguments import arguments, symbol_name
    from opscope.ir.loading import module_bytecode, new_context, parse_module
    from opscope.passes.extract_site import SITE_ATTR, ExtractSite
    from opscope.pipeline.textual import Pipeline, run_pipeline
    from opscope.run.compile import compile_module
    from opscope.run.runtime import load

    source = module if isinstance(module, (str, bytes)) else module_bytecode(module)
    outlined = parse_module(source, new_context())
    run_pipeline(outlined, Pipeline((ExtractSite(site=str(site), only=True),)))
    fn = next(op.operation for op in outlined.body.operations if SITE_ATTR in op.operation.attributes)
    name = symbol_name(fn)
    site_name = ir.StringAttr(fn.attributes[SITE_ATTR]).value
    loaded = load(compile_module(outlined, target))
    return CompiledSite(site_name, name, arguments(outlined, name), loaded)


def memoize_site(
    module: ir.Module | str | bytes, site: str | int, target: str = "llvm-cpu", cap: int = 16, evict: bool = False
) -> Memoized:
    """`site` of `module` outlined alone, compiled for `target` (`compile_site`) and behind
    the exact guard: `memo = memoize_site(text, "fc1"); memo(x, w1)`; `memo.fn` is the
    un-memoized compiled call."""
    return Memoized(compile_site(module, site, target), cap=cap, evict=evict)
