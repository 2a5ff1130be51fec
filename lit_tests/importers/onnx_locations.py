# REQUIRES: onnx
# RUN: %PYTHON %s | filecheck %s

# ONNX site names (STYLE rule 19): IREE's ONNX importer locates each op by
# `NameLoc(node.name)`; opscope wraps it in `NameLoc(<module path>)`, read from the node's
# `pkg.torch.onnx.name_scopes` metadata (torch's dynamo exporter writes the module paths, then
# the FX node's own name, which is dropped) or from a legacy exporter's
# `/encoder/layer.0/.../MatMul` node name. A node with neither keeps its own name. An
# LSTM/GRU/RNN node is unrolled over its steps: `<path>.l0.ih`, then `<path>.l0.t<step>`.

import numpy as np
from harness import print_sites, run
from onnx import TensorProto, helper, numpy_helper

from opscope.importers.onnx_model import import_onnx


def show(nodes, weights, x=(2, 8), y=(2, 4)):
    """Each site's name, kind and printed location, for a graph x → nodes → y."""
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(x))],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, list(y))],
        [numpy_helper.from_array(np.ones(s, np.float32), n) for n, s in weights.items()],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    module = import_onnx(model)  # held: sites point into it
    print_sites(module)


# CHECK-LABEL: TEST: legacy_node_names
@run
def legacy_node_names():
    # CHECK: encoder.layer.0.attention.self.query matmul loc("encoder.layer.0.attention.self.query"("/encoder/layer.0/attention/self/query/MatMul"))
    # CHECK-NEXT: encoder.layer.0.output.dense matmul loc("encoder.layer.0.output.dense"("/encoder/layer.0/output/dense/MatMul"))
    show(
        [
            helper.make_node("MatMul", ["x", "wq"], ["q"], name="/encoder/layer.0/attention/self/query/MatMul"),
            helper.make_node("MatMul", ["q", "wo"], ["y"], name="/encoder/layer.0/output/dense/MatMul"),
        ],
        {"wq": (8, 8), "wo": (8, 4)},
    )


# CHECK-LABEL: TEST: name_scopes_metadata
@run
def name_scopes_metadata():
    node = helper.make_node("MatMul", ["x", "w"], ["y"], name="node_MatMul_3")
    helper.set_metadata_props(node, {"pkg.torch.onnx.name_scopes": "['', 'blocks.1', 'blocks.1.mlp.fc', 'linear_3']"})
    # CHECK: blocks.1.mlp.fc matmul loc("blocks.1.mlp.fc"("node_MatMul_3"))
    show([node], {"w": (8, 4)})


# CHECK-LABEL: TEST: plain_node_name
@run
def plain_node_name():
    # CHECK: proj matmul loc("proj")
    show([helper.make_node("MatMul", ["x", "w"], ["y"], name="proj")], {"w": (8, 4)})


# CHECK-LABEL: TEST: lstm_unrolled_by_step
@run
def lstm_unrolled_by_step():
    # One legacy-exported layer over 2 steps: the input projection, then one recurrent matmul a step.
    lstm = helper.make_node("LSTM", ["x", "W", "R"], ["y"], name="/enc/rnn/LSTM", hidden_size=4)
    # CHECK: enc.rnn.l0.ih batch_matmul loc("enc.rnn.l0.ih"("/enc/rnn/LSTM/ih/MatMul_0"))
    # CHECK-NEXT: enc.rnn.l0.t0 matmul loc("enc.rnn.l0.t0"("/enc/rnn/LSTM/t0/MatMul_0"))
    # CHECK-NEXT: enc.rnn.l0.t1 matmul loc("enc.rnn.l0.t1"("/enc/rnn/LSTM/t1/MatMul_0"))
    show([lstm], {"W": (1, 16, 8), "R": (1, 16, 4)}, x=(2, 3, 8), y=(2, 1, 3, 4))
