"""The IR-text emitter of every opscope kernel: a function body's lines with fresh SSA names,
and the text of types, affine maps, f32 literals and `linalg.generic` ops.

Kernels are written as MLIR text (parsed once into the module by `lower-opscope`): the
stats kernels (`kernel`) and the inference-dynamics kernels (`dialect/dynamics.py`).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

# f32 constants as MLIR prints them.
ZERO = "0.000000e+00"
ONE = "1.000000e+00"
POS_INF = "0x7F800000"
NEG_INF = "0xFF800000"


def f32_hex(x: float) -> str:
    """An f32 literal that MLIR prints and parses exactly (hex bit pattern)."""
    return f"0x{struct.unpack('<I', struct.pack('<f', x))[0]:08X}"


def tensor_type(shape: tuple[int, ...], elem: str = "f32") -> str:
    """`tensor<AxBx...xelem>`."""
    return "tensor<" + "".join(f"{d}x" for d in shape) + elem + ">"


def dim_list(n: int) -> str:
    """`d0, d1, ..., d{n-1}`: the dimensions of an n-d iteration space."""
    return ", ".join(f"d{i}" for i in range(n))


def affine_map(dims: int, results: str) -> str:
    """The indexing map of an operand of a `dims`-d generic: `(d0, ...) -> (results)`."""
    return f"affine_map<({dim_list(dims)}) -> ({results})>"


def yield_line(names: list[str], ty: str = "f32") -> str:
    """A generic body's last line: yield `names`, all of type `ty`."""
    return f"linalg.yield {', '.join(names)} : {', '.join(ty for _ in names)}"


@dataclass(frozen=True)
class Operand:
    """One generic operand: SSA value, type, indexing map, block argument name and type."""

    value: str
    type: str
    map: str
    arg: str
    arg_type: str


@dataclass
class Emitter:
    """Accumulates the lines of one function body with fresh SSA names."""

    lines: list[str] = field(default_factory=list)
    counter: int = 0

    def fresh(self, hint: str) -> str:
        self.counter += 1
        return f"%_{hint}{self.counter}"  # body names never start with "_"

    def emit(self, line: str) -> None:
        self.lines.append("  " + line)

    def line(self, rhs: str, hint: str = "v") -> str:
        """`%fresh = rhs`; returns the fresh name."""
        name = self.fresh(hint)
        self.emit(f"{name} = {rhs}")
        return name

    def filled(self, shape: tuple[int, ...], init: str) -> str:
        """An f32 tensor of `shape` filled with the literal `init`."""
        ty = tensor_type(shape, "f32")
        e, c, f = self.fresh("e"), self.fresh("c"), self.fresh("init")
        self.emit(f"{e} = tensor.empty() : {ty}")
        self.emit(f"{c} = arith.constant {init} : f32")
        self.emit(f"{f} = linalg.fill ins({c} : f32) outs({e} : {ty}) -> {ty}")
        return f

    def empty(self, ty: str) -> str:
        e = self.fresh("e")
        self.emit(f"{e} = tensor.empty() : {ty}")
        return e

    def flat(self, value: str, shape: tuple[int, int], hint: str = "flat") -> str:
        """A [a, b] f32 tensor as [a·b]."""
        return self.line(
            f"tensor.collapse_shape {value} [[0, 1]] : {tensor_type(shape)} into {tensor_type((shape[0] * shape[1],))}",
            hint,
        )

    def generic(
        self, hint: str, iterators: list[str], ins: list[Operand], outs: list[Operand], body: list[str]
    ) -> list[str]:
        """One `linalg.generic` (its body ends in a `yield_line`); returns the SSA names of its results."""
        res = self.fresh(hint)
        maps = ", ".join(o.map for o in ins + outs)
        its = ", ".join(f'"{i}"' for i in iterators)
        ins_txt = f"ins({', '.join(o.value for o in ins)} : {', '.join(o.type for o in ins)}) " if ins else ""
        out_tys = ", ".join(o.type for o in outs)
        n = len(outs)
        head = f"{res}:{n}" if n > 1 else res
        self.emit(
            f"{head} = linalg.generic {{indexing_maps = [{maps}], iterator_types = [{its}]}} "
            f"{ins_txt}outs({', '.join(o.value for o in outs)} : {out_tys}) {{"
        )
        self.emit("^bb0(" + ", ".join(f"{o.arg}: {o.arg_type}" for o in ins + outs) + "):")
        for line in body:
            self.emit("  " + line)
        self.emit(f"}} -> ({out_tys})" if n > 1 else f"}} -> {out_tys}")
        return [f"{res}#{i}" for i in range(n)] if n > 1 else [res]

    def function(self, name: str, params: str, outs: list[tuple[str, str]], noinline: bool) -> str:
        """The body as a private `func.func @name(params)` returning `outs` ((value, type) pairs)."""
        res_tys = ", ".join(t for _, t in outs)
        attrs = " attributes {noinline}" if noinline else ""
        head = f"func.func private @{name}({params}) -> ({res_tys}){attrs} {{"
        ret = f"  return {', '.join(v for v, _ in outs)} : {res_tys}"
        return "\n".join([head, *self.lines, ret, "}"])
