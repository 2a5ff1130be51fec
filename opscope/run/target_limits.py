"""What IREE 3.13 is known to compute wrong on a target, or not to compile, checked before a model
is tapped or compiled.

Measured here and pinned by strict xfails in `tests/test_stat_numerics.py`: on vulkan-spirv
(Mesa's lavapipe) a bare `arith.extf` f16 → f32 returns garbage, so an f16 model's matmuls and
statistics are garbage; and a bf16 max|x| over the 512 rows of a 512×1024 tensor (the
`chan_maxabs` statistic) is wrong, where small bf16 tensors match numpy. A profile with such
numbers would be recorded without a word, so the f16 case is refused on lavapipe (the device
it was measured on) and warned of on any other Vulkan device, as are an i8 model (a bare i8 matmul
is wrong there, an int8 weight dequantized in the graph reads as zeros in its statistics: found
by the generated-model tests) and a bf16 one (a bf16 matmul with an odd dim is wrong there, found
by the same tests).

Four silent miscompiles are worked around instead, on the compiler's copy of a module
(`opscope.run.compile`): llvm-cpu's data tiling of softmax · v (`guard_normalized_operands`), a
convolution's result with a unit dim padded by an insert into zeros (`barrier_padded_convolutions`),
the SPIR-V targets' channels-first 2-D depthwise convolution (`channels_last_depthwise`) and their
contraction fused with a broadcast of its result (`barrier_contraction_broadcasts`).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from iree.compiler import ir
from iree.compiler.dialects import linalg

from opscope.errors import OpscopeError
from opscope.ir.sites import loop_sizes

log = logging.getLogger("opscope")


@dataclass(frozen=True)
class Limitation:
    """Tensors of `element_type` on `target` come back wrong: `what`, one clause."""

    target: str
    element_type: str
    what: str
    refuse_on: tuple[str, ...]  # device names (substrings) where the results are known wrong: refuse


LIMITATIONS = (
    Limitation(
        "vulkan-spirv",
        "f16",
        "a bare f16 -> f32 extension returns garbage, so f16 matmuls and their statistics do",
        refuse_on=("llvmpipe",),
    ),
    Limitation(
        "vulkan-spirv",
        "i8",
        "i8 tensors come back wrong: a bare i8 x i8 matmul is off by ~2.8e6, an int8 weight dequantized "
        "in the graph reads as zeros in its statistics (found by the generated-model tests)",
        refuse_on=("llvmpipe",),
    ),
    Limitation(
        "vulkan-spirv",
        "bf16",
        "a bf16 matmul with an odd dim comes back wrong (20 of 36 shapes of M 1-5, K 1-3, N 2-8; found by the "
        "generated-model tests), larger ones fail to compile, chan_maxabs of a 512-row bf16 tensor is wrong",
        refuse_on=("llvmpipe",),
    ),
)


def tensor_element_types(module: ir.Module) -> set[str]:
    """The element types of every ranked tensor an op of `module` produces or takes."""
    found: set[str] = set()

    def visit(op):
        types = [value.type for value in list(op.results) + list(op.operands)]
        if op.name == "func.func":
            fn_type = ir.FunctionType(ir.TypeAttr(op.attributes["function_type"]).value)
            types += list(fn_type.inputs) + list(fn_type.results)
        found.update(str(ty.element_type) for ty in types if isinstance(ty, ir.RankedTensorType))
        return ir.WalkResult.ADVANCE

    module.operation.walk(visit)
    return found


def device_name(driver: str) -> str:
    """The first device `driver` reports here ('' when it reports none)."""
    import iree.runtime as rt

    try:
        infos = rt.get_driver(driver).query_available_devices()
    except Exception:  # the runtime raises plain RuntimeError/ValueError; the caller checked it runs
        return ""
    return str(infos[0].get("name", "")) if infos else ""


def check_target_limits(module: ir.Module, target: str, driver: str, name: str = "<model>") -> None:
    """Refuse (one line) a model IREE 3.13 cannot compile (`short_windows`) or whose tensors `target`
    computes wrong on this device, or warn (one line) where they may be wrong; nothing for the
    other targets and types."""
    short = short_windows(module)
    if short:
        raise OpscopeError(f"{name}: {short}")
    limits = [lim for lim in LIMITATIONS if lim.target == target]
    if not limits:
        return
    types = tensor_element_types(module)
    for lim in limits:
        if lim.element_type not in types:
            continue
        device = device_name(driver)
        line = (
            f"{name}: IREE 3.13 on {target} computes {lim.element_type} wrong ({lim.what}; measured on Mesa's "
            f"lavapipe, pinned by tests/test_stat_numerics.py)"
        )
        if any(known in device for known in lim.refuse_on):
            raise OpscopeError(f"{line}: refused on this device ({device}); use --target llvm-cpu")
        log.warning(
            "%s: its %s results on this device (%s) may be wrong; compare with --target llvm-cpu",
            line,
            lim.element_type,
            device or "unnamed",
        )


def short_windows(module: ir.Module) -> str | None:
    """One line naming the first convolution IREE 3.13 cannot compile on any target, else None: a
    convolution giving one output along a spatial dim whose one window stops short of the
    input's end (input 4, window 3, stride 3: iree-compile fails with "'linalg.generic' op
    inferred input/output operand #1 has shape's dimension #0 to be 4, but found 3"; found by
    the generated-model tests, pinned in tests/test_generated_models.py). Cropping the input to
    the window's extent gives the same result and compiles."""
    found: list[str] = []

    def visit(op):
        if op.name.startswith("linalg.") and linalg.isa_convolution_op(op):
            why = _short_window(op)
            if why:
                found.append(f"{op.name.removeprefix('linalg.')} at {op.location}: {why}")
                return ir.WalkResult.INTERRUPT
        return ir.WalkResult.ADVANCE

    module.operation.walk(visit)
    return found[0] if found else None


def _short_window(op: ir.Operation) -> str | None:
    """Why `op` (a linalg convolution) hits IREE 3.13's one-output short-window failure, or None."""
    maps_attr = linalg.get_indexing_maps(op)
    if maps_attr is None or not len(op.operands):
        return None
    maps = [ir.AffineMapAttr(a).value for a in maps_attr]
    operands = list(op.operands)
    sizes = loop_sizes(maps, operands)
    dims = linalg.infer_convolution_dimensions(op)
    image = ir.RankedTensorType(operands[0].type) if isinstance(operands[0].type, ir.RankedTensorType) else None
    if dims is None or image is None or not image.has_static_shape:
        return None
    pairs = dict(zip(dims.output_image, zip(dims.filter_loop, dims.strides, dims.dilations)))
    for pos, expr in enumerate(maps[0].results):
        used = _dims_of(expr)
        for out_loop, (filt_loop, stride, dilation) in pairs.items():
            if out_loop not in used or filt_loop not in used:
                continue
            out, window = sizes[out_loop], sizes[filt_loop]
            if out is None or window is None:
                continue
            reach = (out - 1) * stride + (window - 1) * dilation + 1
            if out == 1 and image.shape[pos] > reach:
                return (
                    f"IREE 3.13 cannot compile a convolution with one output along input dim {pos} whose window "
                    f"stops short of the input's end (input {image.shape[pos]}, window reaches {reach}, stride "
                    f"{stride}); crop that dim of its input to {reach} first (the same result)"
                )
    return None


def _dims_of(expr: ir.AffineExpr) -> set[int]:
    """The loop dims an affine expression reads."""
    if isinstance(expr, ir.AffineDimExpr):
        return {expr.position}
    if isinstance(expr, ir.AffineBinaryExpr):
        return _dims_of(expr.lhs) | _dims_of(expr.rhs)
    return set()


def normalized_operands(module: ir.Module) -> list[tuple[ir.Operation, int]]:
    """(contraction, operand index) of every matmul-like op reading a normalized tensor: an elementwise
    `linalg.generic` that combines a tensor with a reduction of that same tensor (a softmax's
    e / Σe, x − max x). IREE 3.13's data tiling fuses that producer into the contraction and computes
    it wrong at some shapes (measured: softmax · v as a batch_matmul of 2, 3 or 4 heads at sequence
    lengths 3, 5, 6, 7, 9, 12, off by O(1); 16 heads, 2-D matmuls and other lengths right; found by
    the generated-model tests, pinned in tests/test_generated_models.py)."""
    found: list[tuple[ir.Operation, int]] = []

    def visit(op):
        if op.name.startswith("linalg.") and linalg.isa_contraction_op(op):
            for i, value in enumerate(list(op.operands)[:2]):
                if _normalized(value):
                    found.append((op, i))
        return ir.WalkResult.ADVANCE

    module.operation.walk(visit)
    return found


def _normalized(value: ir.Value) -> bool:
    """`value` is an elementwise generic of some tensor x and a reduction of x."""
    if not isinstance(value, ir.OpResult) or value.owner.name != "linalg.generic":
        return False
    op = value.owner
    if any("reduction" in str(it) for it in ir.ArrayAttr(op.attributes["iterator_types"])):
        return False
    inputs = list(op.opview.inputs)
    for r in inputs:
        if not isinstance(r, ir.OpResult) or r.owner.name != "linalg.generic":
            continue
        reducer = r.owner
        if any("reduction" in str(it) for it in ir.ArrayAttr(reducer.attributes["iterator_types"])):
            if any(src in inputs for src in reducer.opview.inputs):
                return True
    return False


def guard_normalized_operands(module) -> int:
    """Put an `iree_tensor_ext.compute_barrier.start` between each normalized operand and its
    contraction (`normalized_operands`), so IREE 3.13 does not fuse the two (the result is the same
    tensor; the contraction stays data-tiled); returns how many. Done on the compiler's copy only
    (`opscope.run.compile`), for targets that data-tile."""
    return _barriers(module, normalized_operands(module))


def _barriers(module: ir.Module, found: list[tuple[ir.Operation, int]]) -> int:
    """An `iree_tensor_ext.compute_barrier.start` on operand i of each (op, i) of `found` (IREE fuses
    nothing across it; the value is the same tensor); returns how many."""
    from iree.compiler.dialects import iree_tensor_ext

    with module.operation.context:
        for op, i in found:
            value = op.operands[i]
            with op.location:
                barrier = iree_tensor_ext.ComputeBarrierStartOp(value.type, value, [], ip=ir.InsertionPoint(op))
            op.operands[i] = barrier.result
    return len(found)


SPIRV_TARGETS = ("vulkan-spirv", "metal-spirv")  # IREE's SPIR-V codegen, whichever driver runs it
NCHW_DEPTHWISE = "linalg.depthwise_conv_2d_nchw_chw"


def nchw_depthwise(module: ir.Module) -> list[ir.Operation]:
    """The 2-D depthwise convolutions in channels-first layout (`linalg.depthwise_conv_2d_nchw_chw`,
    torch-mlir's depthwise `nn.Conv2d`): IREE 3.13's SPIR-V code for them computes some outputs as
    zeros (on lavapipe: with C channels, channel c's first outputs of each row; half of an 8-channel
    3x3 convolution's outputs), where the channels-last form is right (found by the generated-model
    tests; a strict xfail pins it)."""
    found: list[ir.Operation] = []

    def visit(op):
        if op.name == NCHW_DEPTHWISE:
            found.append(op)
        return ir.WalkResult.ADVANCE

    module.operation.walk(visit)
    return found


def channels_last_depthwise(module: ir.Module) -> int:
    """Compute each `nchw_depthwise` convolution channels-last, between transposes (x and the
    result NCHW ⇄ NHWC, the filter CHW → HWC, its accumulator too), at its own location; returns how
    many. The result is the same tensor; done on the compiler's copy for the SPIR-V targets only
    (`opscope.run.compile`)."""
    from iree.compiler.dialects import tensor

    found = nchw_depthwise(module)
    for op in found:
        x, w, init = op.operands[0], op.operands[1], op.operands[2]
        ip = ir.InsertionPoint(op)
        with op.location, ip:
            xt, wt, it = (
                _transposed(v, perm, tensor) for v, perm in ((x, [0, 2, 3, 1]), (w, [1, 2, 0]), (init, [0, 2, 3, 1]))
            )
            conv = linalg.depthwise_conv_2d_nhwc_hwc(
                xt, wt, outs=[it], strides=op.attributes["strides"], dilations=op.attributes["dilations"]
            )
            back = _transposed(conv, [0, 3, 1, 2], tensor)
        op.results[0].replace_all_uses_with(back)
        op.erase()
    return len(found)


def contraction_broadcasts(module: ir.Module) -> list[tuple[ir.Operation, int]]:
    """(op, input index) of each linalg op that broadcasts an input (a `linalg.broadcast`, a generic
    whose input map leaves out a parallel loop, or a 1x1 convolution of one input channel:
    `_unit_reduction_broadcasts`) holding a contraction's or convolution's result, through pure copies
    (`opscope.ir.weight_trace.copy_source`: reshapes, transposes) and elementwise ops
    (`_reads_contraction`): GQA's repeat_kv of the k and v projections. IREE 3.13's SPIR-V code for
    a matmul fused with a broadcast along a new outer dim comes back wrong on small shapes (on lavapipe: 30 of 45 shapes of M 2-16, K 2-8, N 1-8 into
    [2, M, N], off by O(1) or garbage; 32×64×16 and up right), where the same two ops in two
    dispatches are right (found by the generated-model tests on a GQA attention; a strict xfail
    pins it)."""
    from opscope.ir.flops import indexing_maps
    from opscope.ir.sites import find_sites

    results = {site.op.results[0] for site in find_sites(module) if len(site.op.results) == 1}
    found: list[tuple[ir.Operation, int]] = []

    def visit(op):
        if op.name == "linalg.broadcast":
            spread = [0]
        elif op.name == "linalg.generic":
            maps = indexing_maps(op.attributes["indexing_maps"])
            iters = [str(it) for it in ir.ArrayAttr(op.attributes["iterator_types"])]
            spread = []
            for i in range(len(op.opview.inputs)):
                used = {ir.AffineDimExpr(e).position for e in maps[i].results if isinstance(e, ir.AffineDimExpr)}
                if any("parallel" in iters[d] and d not in used for d in range(maps[i].n_dims)):
                    spread.append(i)
        elif op.name.startswith("linalg."):
            spread = _unit_reduction_broadcasts(op)
        else:
            return ir.WalkResult.ADVANCE
        for i in spread:
            if _reads_contraction(op.operands[i], results):
                found.append((op, i))
        return ir.WalkResult.ADVANCE

    module.operation.walk(visit)
    return found


def _reads_contraction(value: ir.Value, results: set[ir.Value]) -> bool:
    """Whether `value` is one of `results` through pure copies and elementwise generics (all loops
    parallel, followed through the inputs indexed as the result is: a ReLU or a bias add on the
    contraction's result, which IREE fuses into its dispatch with the broadcast after it)."""
    from opscope.ir.flops import indexing_maps
    from opscope.ir.weight_trace import copy_source

    seen: set[ir.Value] = set()
    todo = [value]
    while todo:
        source, _, _ = copy_source(todo.pop(), ())
        if source in results:
            return True
        if source in seen or not isinstance(source, ir.OpResult):
            continue
        seen.add(source)
        op = source.owner.operation if hasattr(source.owner, "operation") else source.owner
        if op.name != "linalg.generic" or len(op.results) != 1:
            continue
        iters = [str(it) for it in ir.ArrayAttr(op.attributes["iterator_types"])]
        maps = indexing_maps(op.attributes["indexing_maps"])
        if all("parallel" in it for it in iters):
            todo += [x for x, m in zip(op.opview.inputs, maps) if m == maps[-1]]
    return False


def padded_convolutions(module: ir.Module) -> list[tuple[ir.Operation, int]]:
    """(op, 0) of each `tensor.insert_slice` of a convolution's result (through copies and elementwise
    ops: `_reads_contraction`) with a unit dim into a filled tensor: the result padded. IREE 3.13
    fuses the convolution into the padding's dispatch and computes it wrong on llvm-cpu when a batch
    of 1 has one output row or column (a [1, F, 1, W'] result padded on both sides of a dim: off by
    O(1); a batch of 2, one channel or `tensor.pad` are right; found by the generated-model tests, a
    transposed convolution's spread after a convolution). Measured on llvm-cpu; done on every target."""
    from opscope.ir.sites import find_sites, is_convolution

    inserts: list[ir.Operation] = []  # inserts of a tensor with a unit dim into a filled one

    def visit(op):
        if op.name == "tensor.insert_slice":
            source, dest = op.operands[0], op.operands[1]
            filled = isinstance(dest, ir.OpResult) and dest.owner.name == "linalg.fill"
            if filled and 1 in ir.RankedTensorType(source.type).shape:
                inserts.append(op)
        return ir.WalkResult.ADVANCE

    module.operation.walk(visit)
    if not inserts:  # the common case: no site discovery on the compile path
        return []
    results = {site.op.results[0] for site in find_sites(module) if is_convolution(site) and len(site.op.results) == 1}
    return [(op, 0) for op in inserts if _reads_contraction(op.operands[0], results)]


def barrier_padded_convolutions(module: ir.Module) -> int:
    """A compute barrier before each `padded_convolutions` source (IREE then pads the convolution's
    result in a dispatch of its own); returns how many. The compiler's copy only (`opscope.run.compile`)."""
    return _barriers(module, padded_convolutions(module))


def _unit_reduction_broadcasts(op: ir.Operation) -> list[int]:
    """The inputs of a named linalg op whose reduction loops all have size 1 (an elementwise op
    written as a convolution or contraction: a 1x1 convolution of one input channel into F) that
    leave out a parallel loop of size > 1: what IREE turns into a broadcast of that input (found by
    the generated-model tests: a convolution into one channel, then a 1x1 one into two, on SPIR-V)."""
    maps_attr = linalg.get_indexing_maps(op)
    if maps_attr is None or len(op.results) != 1:
        return []
    maps = [ir.AffineMapAttr(a).value for a in maps_attr]
    sizes = loop_sizes(maps, list(op.operands))
    out = maps[-1]
    parallel = {ir.AffineDimExpr(e).position for e in out.results if isinstance(e, ir.AffineDimExpr)}
    if any(sizes[d] != 1 for d in range(out.n_dims) if d not in parallel):
        return []
    spread = []
    for i in range(len(maps) - 1):  # one result: every map but the last is an input's
        used = set().union(*(_dims_of(e) for e in maps[i].results))  # through strides and windows too
        if any(d not in used and sizes[d] not in (1, None) for d in parallel):
            spread.append(i)
    return spread


def barrier_contraction_broadcasts(module: ir.Module) -> int:
    """Put an `iree_tensor_ext.compute_barrier.start` before each `contraction_broadcasts` input, so
    IREE 3.13 does not fuse the broadcast into the contraction's dispatch (the result is the same
    tensor); returns how many. Done on the compiler's copy for the SPIR-V targets only
    (`opscope.run.compile`)."""
    return _barriers(module, contraction_broadcasts(module))


def _transposed(value: ir.Value, perm: list[int], tensor) -> ir.Value:
    """`value` transposed by `perm` (a `linalg.transpose` into a new empty tensor), at the current insertion point."""
    ty = ir.RankedTensorType(value.type)
    shape = [ty.shape[p] for p in perm]
    empty = tensor.EmptyOp(shape, ty.element_type).result
    made = linalg.transpose(value, outs=[empty], permutation=perm)  # the op (its region built), not its value
    return made.results[0] if isinstance(made, ir.OpView) else made


def unit_k_contractions(module: ir.Module) -> list[ir.Operation]:
    """The linalg contractions (not convolutions) whose every K loop has size 1: an outer product
    written as a matmul. IREE 3.13's data tiling fails on a 1x1 by 1xN one whose lhs is computed
    ("tiling factors must be less than or equal to the input rank for pack"), and opscope's fallback
    then built the whole model untiled; a tapped build of the same model could tile, so the two
    differed in their last bits. Untiled, a K = 1 matmul beside an ONNX top-k's gather made the
    gather's dispatch fail at LLVM translation (`builtin.unrealized_conversion_cast`, vector<13xindex>)
    when some sites were tapped (both found by the generated-model tests)."""
    from opscope.ir.sites import find_sites, is_convolution

    found = []
    for site in find_sites(module):
        op = site.op
        if site.dynamic or site.k != 1 or is_convolution(site) or not op.name.startswith("linalg."):
            continue
        maps = [ir.AffineMapAttr(a).value for a in linalg.get_indexing_maps(op)]
        if all(isinstance(e, ir.AffineDimExpr) for m in maps for e in m.results):
            found.append(op)
    return found


def elementwise_unit_k(module: ir.Module) -> int:
    """Write each `unit_k_contractions` op as the elementwise op it is: the same body over the loops
    that are not K, each K index 0 (out + a·b for a matmul: the same value, bit for bit); returns how
    many. Done on the compiler's copy for every target (`opscope.run.compile`), so the rest of the
    model keeps data tiling."""
    from opscope.ir.build import regeneric

    found = unit_k_contractions(module)
    for op in found:
        maps = [ir.AffineMapAttr(a).value for a in linalg.get_indexing_maps(op)]
        k_loops = set(linalg.infer_contraction_dimensions(op).k)
        keep = [d for d in range(maps[0].n_dims) if d not in k_loops]
        at = {d: i for i, d in enumerate(keep)}
        with op.location:
            new_maps = [
                ir.AffineMap.get(
                    len(keep),
                    0,
                    [
                        ir.AffineConstantExpr.get(0)
                        if ir.AffineDimExpr(e).position in k_loops
                        else ir.AffineDimExpr.get(at[ir.AffineDimExpr(e).position])
                        for e in m.results
                    ],
                )
                for m in maps
            ]
        new = regeneric(op, new_maps, ["parallel"] * len(keep))
        op.results[0].replace_all_uses_with(new.results[0])
        op.erase()
    return len(found)
