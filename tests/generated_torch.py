"""Generated models as PyTorch modules, through opscope's importers (`.pt2` and ONNX), against PyTorch.

`TorchBatch(programs)` is an `nn.Module` computing each program (`generated_models.Program`) with
torch ops (its weights `nn.Parameter`s, a mask a buffer), so the model a user would write goes
through `torch.export` or `torch.onnx.export` and opscope's own importer. `check_torch_batch`
then checks, against PyTorch alone:

* the sites' FLOPs sum to `torch.utils.flop_counter.FlopCounterMode`'s total of the eager forward;
* `opscope.act.weights.weight_bytes` equals the bytes of the parameters (and buffers: int8 codes)
  the matmuls and convolutions read, and of the inputs a model takes as weights;
* the compiled module gives the eager outputs (the parity rule, 1e-3·(1+max|y|)), and the tapped
  build gives the untapped one's bit for bit (both with one data-tiling choice), or, where a tap
  split a fused dispatch, the untapped build's with the taps' boundaries (`tap_boundaries`).

Programs the torch form cannot state the same way are left out (`torch_ready`): transposed
convolutions (PyTorch's own op lowers differently), bf16 activations (a bf16 matmul in PyTorch
rounds its result to bf16), einsums (see `torch_ready`).
"""

from __future__ import annotations

import numpy as np
from generated_models import Batch, Program
from tap_boundaries import boundary_build

IREE_FAILURES: list[str] = []  # IREE's one-line failures on torch batches (opscope's fallback included)
TORCH_DTYPES = {"f32": "float32", "f16": "float16", "bf16": "bfloat16", "i8": "int8", "i32": "int32"}


def torch_ready(p: Program) -> bool:
    """Whether `p` has a faithful torch form here. Not the einsum family: FlopCounterMode counts an
    einsum PyTorch lowers to mul + sum as 0 FLOPs (no reference), and `torch.einsum` may put the
    weight on the lhs of the matmul it exports. Nor a model with a generic contraction of K = 1:
    `torch.einsum` computes it as a broadcast multiply, so its weight is no matmul's (found by the
    CI slice, seed 2026)."""
    if p.family == "einsum":
        return False
    if any(f.kind == "generic" and _k_size(p, f) == 1 for f in p.expected.sites):
        return False  # torch.einsum computes a K = 1 product as a broadcast multiply: no matmul, no weight
    kinds = {f.kind for f in p.expected.sites}
    casts = [op for op in p.torch_ops.values() if op[0] == "cast" and op[1] != "f32"]
    return not any(k.startswith("conv_transpose") for k in kinds) and not casts


def _k_size(p: Program, fact) -> int:
    """The size of the site's K: its lhs dims that the contraction sums over, multiplied."""
    from generated_checks import _site_operand_ids

    shape = p.values[_site_operand_ids(p.refs[fact.out])[0]].shape
    return int(np.prod([shape[d] for d in fact.lhs_k])) if fact.lhs_k else 0


def _module_class():
    import torch

    class TorchBatch(torch.nn.Module):
        """Every program's forward, one after the other; the results in program order."""

        def __init__(self, programs: list[Program]):
            super().__init__()
            self.programs = programs
            self.site_weights = set()
            for i, p in enumerate(programs):
                weights = {w for f in p.expected.sites for w in _weight_leaves(p, f)}
                for v in p.values:
                    ref = p.refs[v.id]
                    if ref[0] != "const":
                        continue
                    t = _tensor(ref[1])
                    name = f"m{i}_c{v.id}"
                    if v.id in weights and t.is_floating_point():
                        self.register_parameter(name, torch.nn.Parameter(t, requires_grad=False))
                    else:  # int8 codes are a buffer (no integer parameters), a mask too
                        self.register_buffer(name, t)
                    if v.id in weights:
                        self.site_weights.add(name)

        def forward(self, *args):
            outs, at = [], 0
            for i, p in enumerate(self.programs):
                vals = {}
                for v in p.values:
                    vals[v.id] = _torch_op(self, i, p, v, vals, args[at:])
                at += len(p.args)
                outs += [vals[o.id] for o in p.outputs]
            return tuple(outs)

    return TorchBatch


def _tensor(a: np.ndarray):
    """A numpy array as a torch tensor (bf16 through its bits: torch takes no ml_dtypes array)."""
    import torch

    a = np.ascontiguousarray(a)
    if a.dtype.name == "bfloat16":
        return torch.from_numpy(a.view(np.uint16)).view(torch.bfloat16)
    return torch.from_numpy(a)


def _weight_leaves(p: Program, fact) -> list[int]:
    """The constants a site's weight is computed from (the parameters it reads)."""
    from generated_checks import _operands, _site_operand_ids

    if not (fact.weight or fact.weight_lhs):
        return []
    found, todo = [], [_site_operand_ids(p.refs[fact.out])[0 if fact.weight_lhs else 1]]
    while todo:
        vid = todo.pop()
        ref = p.refs[vid]
        if ref[0] == "const":
            found.append(vid)
        elif ref[0] in ("transpose", "reshape", "map", "dequant"):
            todo += _operands(ref)
    return found


def _weight_args(p: Program, args: list) -> list:
    """The inputs a site reads as its rhs (a model taking its weights as inputs: opscope counts them)."""
    from generated_checks import _site_operand_ids

    ids = {_site_operand_ids(p.refs[f.out])[1] for f in p.expected.sites if not f.weight_lhs}
    return [a for v, a in zip(p.args, args) if v.id in ids]


def _torch_op(mod, i: int, p: Program, v, vals: dict, args: tuple):
    """The torch value of `v` (one op of `p`), from the values before it."""
    import torch
    import torch.nn.functional as F

    ref = p.refs[v.id]
    kind = ref[0]
    if kind == "arg":
        return args[ref[1]]
    if kind == "const":
        return getattr(mod, f"m{i}_c{v.id}")
    if kind == "map":
        op, x = p.torch_ops[v.id], [vals[j] for j in ref[2]]
        name = op[0]
        if name == "add":
            return x[0] + x[1]
        if name == "mul":
            return x[0] * x[1]
        if name == "scale":
            return x[0] * op[1]
        if name == "cast":
            return x[0].to(getattr(torch, TORCH_DTYPES[op[1]]))
        if name == "square":
            return x[0] * x[0]
        return {"relu": torch.relu, "tanh": torch.tanh, "sigmoid": torch.sigmoid, "silu": F.silu}[name](x[0])
    if kind == "dequant":
        return vals[ref[1]].to(torch.float32) * vals[ref[2]][:, None]
    if kind == "reduce":
        x = vals[ref[2]]
        return x.sum(dim=ref[3]) if ref[1] is np.sum else x.amax(dim=ref[3])
    if kind == "div_last":
        return vals[ref[1]] / vals[ref[2]][..., None]
    if kind == "exp_sub_last":
        return torch.exp(vals[ref[1]] - vals[ref[2]][..., None])
    if kind == "rmsnorm":
        x, ss, g, d, eps = vals[ref[1]], vals[ref[2]], vals[ref[3]], ref[4], ref[5]
        return x * torch.rsqrt(ss[..., None] / d + eps) * g
    if kind == "transpose":
        return vals[ref[1]].permute(*ref[2])
    if kind == "reshape":
        return vals[ref[1]].reshape(ref[2])
    if kind == "slice":
        return vals[ref[1]].narrow(ref[2], ref[3], ref[4])
    if kind == "repeat":
        x = vals[ref[1]]
        return x[:, None].expand(x.shape[0], ref[2], *x.shape[1:])
    if kind == "bcast":
        x = vals[ref[1]]
        return x[None].expand(ref[2], *x.shape)
    if kind == "einsum":
        a, b = (vals[j] for j in ref[2])
        if ref[1] in ("mk,kn->mn", "bmk,bkn->bmn"):
            return torch.matmul(a, b)
        return torch.einsum(ref[1], a, b)
    if kind == "pad":
        pads = [q for p_ in reversed(ref[2]) for q in (p_, p_)]
        return F.pad(vals[ref[1]], pads)
    if kind == "conv":
        x, w, stride, dilation, groups, depthwise = vals[ref[1]], vals[ref[2]], ref[3], ref[4], ref[5], ref[6]
        conv = F.conv1d if x.dim() == 3 else F.conv2d
        if depthwise:
            return conv(x, w[:, None], stride=stride, dilation=dilation, groups=groups)
        return conv(x, w, stride=stride, dilation=dilation)
    if kind == "conv_grouped":
        x, w, stride, dilation, g = vals[ref[1]], vals[ref[2]], ref[3], ref[4], ref[5]
        y = F.conv2d(x, w, stride=stride, dilation=dilation, groups=g)
        return y.reshape(y.shape[0], g, y.shape[1] // g, *y.shape[2:])
    if kind in ("topk_values", "topk_indices"):
        values, indices = torch.topk(vals[ref[1]], ref[2], dim=-1)
        return values if kind == "topk_values" else indices
    if kind == "combine":
        v_, idx, e = vals[ref[1]], vals[ref[2]], ref[3]
        return torch.zeros(v_.shape[0], e, dtype=v_.dtype).scatter_add(1, idx, v_)
    raise ValueError(f"no torch form for {kind}")


def torch_inputs(batch: Batch, seed: int) -> list:
    import torch

    return [torch.from_numpy(a) for a in batch.inputs(seed)]


def check_torch_batch(programs: list[Program], seed: int, route: str, folder) -> list[str]:
    """The checks of the module docstring on `programs` exported through `route` (`pt2` or `onnx`)."""
    batch = Batch(programs)
    from opscope.run.compile import CompileFailed

    try:
        return _check(programs, batch, seed, route, folder)
    except CompileFailed as e:  # IREE's own failure in one line, also untiled: listed apart, as in check_batch
        IREE_FAILURES.append(f"{route}: {' '.join(str(e).split())[:300]}")
        return []
    except Exception as e:  # an importer's failure is a finding, said in one line
        return [f"{route}: {type(e).__name__}: {' '.join(str(e).split())[:300]}"]


def _check(programs: list[Program], batch: Batch, seed: int, route: str, folder) -> list[str]:
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    import opscope
    from opscope.act.weights import weight_bytes
    from opscope.run.compile import compile_alike
    from opscope.run.runtime import load

    module = _module_class()(programs).eval()
    inputs = torch_inputs(batch, seed)
    with torch.no_grad(), FlopCounterMode(display=False) as counter:
        eager = [t.numpy() for t in module(*inputs)]
    path = folder / f"batch.{route}"
    if route == "pt2":
        torch.export.save(torch.export.export(module, tuple(inputs)), str(path))
    else:
        torch.onnx.export(module, tuple(inputs), str(path), dynamo=True, optimize=False, verbose=False)
    imported = opscope.load_model(path)
    problems = []
    flops = sum(s.flops for s in opscope.sites(imported))
    if flops != counter.get_total_flops():
        problems.append(f"{route}: the sites count {flops} FLOPs, FlopCounterMode {counter.get_total_flops()}")
    # equal tensors are one constant once imported (the importer's canonicalization merges them)
    stored = {
        (str(t.dtype), tuple(t.shape), t.view(-1).view(torch.uint8).numpy().tobytes())
        for t in (getattr(module, n) for n in module.site_weights)
    }
    want = sum(len(b) for _, _, b in stored)
    want += sum(a.nbytes for p, args in zip(programs, batch.split(batch.inputs(seed))) for a in _weight_args(p, args))
    have = weight_bytes(opscope.load_model(path))
    if have != want:
        problems.append(f"{route}: weight_bytes counts {have}, the matmul and conv parameters hold {want}")
    args = [t.numpy() for t in inputs]
    tapped, manifest = opscope.inject(opscope.load_model(path), target="llvm-cpu")
    plain, built = compile_alike(imported, tapped, "llvm-cpu")  # one data-tiling choice: the same kernels
    base = load(plain).invoke("main", *args)
    for r, (got, y) in enumerate(zip(base, eager)):
        y64 = np.asarray(y, np.float64)
        err = float(np.abs(np.asarray(got, np.float64) - y64).max(initial=0.0))
        if not err <= 1e-3 * (1 + float(np.abs(y64).max(initial=0.0))):
            problems.append(f"{route}: result {r} is {err:.3g} from PyTorch's")
    outs = load(built).invoke("main", *args)[: len(base)]
    if any(not np.array_equal(a, b, equal_nan=True) for a, b in zip(outs, base)):  # the taps' boundaries aside
        base = load(boundary_build(opscope.load_model(path), "llvm-cpu", built)).invoke("main", *args)
    for r, (a, b) in enumerate(zip(outs, base)):
        if not np.array_equal(a, b, equal_nan=True):
            problems.append(
                f"{route}: result {r} not bit-identical after the taps, nor to the build with their boundaries"
            )
    return problems
