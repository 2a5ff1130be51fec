# RUN: %PYTHON %s | filecheck %s

# The typed builder of dialect/ops.py creates the generic `opscope.stat` op (the IREE
# 3.13 context has no IRDL), with the attribute types the IRDL file and lower-opscope
# expect, and refuses what `verify_stat` refuses, leaving no half-built op behind.

from harness import run
from iree.compiler import ir
from iree.compiler.dialects import func

from opscope.dialect import StatOp, stat
from opscope.ir.loading import new_context


def _function(arg_type: str):
    """A module holding `func.func @f(%x: <arg_type>)` with an empty body but for return."""
    module = ir.Module.create()
    with ir.InsertionPoint(module.body):
        fn = func.FuncOp("f", ([ir.Type.parse(arg_type)], []))
        block = fn.add_entry_block()
        with ir.InsertionPoint(block):
            ret = func.ReturnOp([])
    return module, block.arguments[0], ret


# CHECK-LABEL: TEST: builds_generic_stat_op
@run
def builds_generic_stat_op():
    with new_context(), ir.Location.name("fc1"):
        module, x, ret = _function("tensor<4x8xf32>")
        op = stat(x, "max", "fc1", "lhs", ip=ir.InsertionPoint(ret))
        # CHECK: "opscope.stat"(%arg0) {kind = "max", options = {}, role = "lhs", site = "fc1"} : (tensor<4x8xf32>) -> ()
        print(op)
        view = StatOp(op)
        # CHECK: max fc1 lhs {}
        print(view.kind, view.site, view.role, view.options)
        # CHECK: True
        print(module.operation.verify())


# CHECK-LABEL: TEST: hist_options_are_typed
@run
def hist_options_are_typed():
    with new_context(), ir.Location.unknown():
        module, x, ret = _function("tensor<4x8xbf16>")
        op = stat(
            x, "hist", "fc1", "out", {"bins": 16, "lo": -1.0, "hi": 1.0, "normalize": True}, ip=ir.InsertionPoint(ret)
        )
        # CHECK: options = {bins = 16 : i64, hi = 1.000000e+00 : f32, lo = -1.000000e+00 : f32, normalize = true}
        print(op)
        # CHECK: {'bins': 16, 'hi': 1.0, 'lo': -1.0, 'normalize': True}
        print(dict(sorted(StatOp(op).options.items())))


# CHECK-LABEL: TEST: refuses_what_the_verifier_refuses
@run
def refuses_what_the_verifier_refuses():
    with new_context(), ir.Location.unknown():
        for arg_type, kind, role, options in [
            ("tensor<4x8xf32>", "median", "lhs", None),
            ("tensor<4x8xf32>", "min", "weight", None),
            ("tensor<?x8xf32>", "min", "lhs", None),
            ("tensor<4x8xi8>", "min", "lhs", None),
            ("tensor<4x8xf32>", "hist", "lhs", {"bins": 0, "lo": -1.0, "hi": 1.0, "normalize": True}),
        ]:
            module, x, ret = _function(arg_type)
            try:
                stat(x, kind, "fc1", role, options, ip=ir.InsertionPoint(ret))
            except ValueError as e:
                # CHECK:      opscope.stat: unknown kind 'median' (expected one of min, max, mean, l1, sumsq, nnz, kurtosis, hist, elemsig, chan_maxabs, chan_outlier, pos_sumsq, adj_sumsq, attn_qmax, attn_krecv, attn_entropy, gate_top2, route_load, res_a_sumsq, res_b_sumsq, res_cos)
                # CHECK-NEXT: opscope.stat: unknown role 'weight' (expected one of lhs, rhs, out, attn, gate, route, residual)
                # CHECK-NEXT: opscope.stat: dynamic shape tensor<?x8xf32> is not supported (stat kernels are static-shaped)
                # CHECK-NEXT: opscope.stat: unsupported element type i8 (expected f32, f16 or bf16)
                # CHECK-NEXT: opscope.stat: hist needs bins > 0 and lo < hi
                print(e)
            # The refused op was erased: only func.return is left in the body.
            assert [o.operation.name for o in module.body.operations[0].regions[0].blocks[0].operations] == [
                "func.return"
            ]
