# REQUIRES: torch
# RUN: %PYTHON %s | filecheck %s

# PyTorch site names (STYLE rule 19): the FX importer's location hook wraps each node's
# file:line callsite in `NameLoc(<nn.Module path>)` from `nn_module_stack`, so a Linear's
# matmul is named by its module path; an op run by the root module keeps only its callsite
# and is named `<kind>#<ordinal>`. Locations survive the torch → linalg lowering.

import torch
from harness import print_sites, run

from opscope.importers.torch_fx import import_torch


def show(model, *args):
    """Each site's name, kind and printed location."""
    module = import_torch(model.eval(), args)  # held: sites point into it
    print_sites(module)


# CHECK-LABEL: TEST: mlp_module_paths
@run
def mlp_module_paths():
    class MLP(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1 = torch.nn.Linear(8, 16)
            self.fc2 = torch.nn.Linear(16, 4)

        def forward(self, x):
            return self.fc2(torch.relu(self.fc1(x)))

    # CHECK: fc1 matmul loc("fc1"(callsite("{{.*}}linear.py":{{[0-9]+}}:0 at "{{.*}}torch_fx_locations.py":{{[0-9]+}}:0)))
    # CHECK-NEXT: fc2 matmul loc("fc2"(callsite("{{.*}}linear.py":{{[0-9]+}}:0 at "{{.*}}torch_fx_locations.py":{{[0-9]+}}:0)))
    show(MLP(), torch.randn(2, 8))


# CHECK-LABEL: TEST: nested_and_listed_modules
@run
def nested_and_listed_modules():
    class Attention(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.query = torch.nn.Linear(8, 8)
            self.key = torch.nn.Linear(8, 8)

        def forward(self, x):
            return torch.softmax(self.query(x) @ self.key(x).transpose(-1, -2), dim=-1) @ x

    class Encoder(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.layer = torch.nn.ModuleList([Attention(), Attention()])

        def forward(self, x):
            return self.layer[1](self.layer[0](x))

    class Model(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.encoder = Encoder()

        def forward(self, x):
            return self.encoder(x)

    # The same source lines in both layers: only the NameLoc tells them apart. The two
    # matmuls the Attention module runs itself share its path; find_sites numbers the second.
    # CHECK: encoder.layer.0.query batch_matmul loc("encoder.layer.0.query"(callsite("{{.*}}linear.py"
    # CHECK-NEXT: encoder.layer.0.key batch_matmul loc("encoder.layer.0.key"(callsite("{{.*}}linear.py"
    # CHECK-NEXT: encoder.layer.0 batch_matmul loc("encoder.layer.0"(callsite("{{.*}}torch_fx_locations.py"
    # CHECK-NEXT: encoder.layer.0#1 batch_matmul loc("encoder.layer.0"(callsite("{{.*}}torch_fx_locations.py"
    # CHECK-NEXT: encoder.layer.1.query batch_matmul loc("encoder.layer.1.query"(callsite("{{.*}}linear.py"
    # CHECK-NEXT: encoder.layer.1.key batch_matmul loc("encoder.layer.1.key"(callsite("{{.*}}linear.py"
    # CHECK-NEXT: encoder.layer.1 batch_matmul loc("encoder.layer.1"(callsite("{{.*}}torch_fx_locations.py"
    # CHECK-NEXT: encoder.layer.1#1 batch_matmul loc("encoder.layer.1"(callsite("{{.*}}torch_fx_locations.py"
    show(Model(), torch.randn(1, 4, 8))


# CHECK-LABEL: TEST: root_ops_keep_their_line
@run
def root_ops_keep_their_line():
    class Bare(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.w = torch.nn.Parameter(torch.randn(8, 4))

        def forward(self, x):
            return x @ self.w

    # the site is named by the line: its kind at the innermost Python frame
    # CHECK: matmul@torch_fx_locations.py:[[LINE:[0-9]+]] matmul loc("{{.*}}torch_fx_locations.py":[[LINE]]:0)
    show(Bare(), torch.randn(2, 8))


# CHECK-LABEL: TEST: lstm_unrolled_by_step
@run
def lstm_unrolled_by_step():
    class Tagger(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.rnn = torch.nn.LSTM(8, 4, batch_first=True)

        def forward(self, x):
            return self.rnn(x)[0]

    # torch's decomposition unrolls aten.lstm over the 2 steps; the name-steps phase names each
    # matmul by layer and step, around the LSTM module's callsite.
    # CHECK: rnn.l0.ih batch_matmul loc("rnn.l0.ih"(callsite("{{.*}}rnn.py":{{[0-9]+}}:0 at "{{.*}}torch_fx_locations.py"
    # CHECK-NEXT: rnn.l0.t0 batch_matmul loc("rnn.l0.t0"(callsite("{{.*}}rnn.py":{{[0-9]+}}:0 at "{{.*}}torch_fx_locations.py"
    # CHECK-NEXT: rnn.l0.t1 batch_matmul loc("rnn.l0.t1"(callsite("{{.*}}rnn.py":{{[0-9]+}}:0 at "{{.*}}torch_fx_locations.py"
    show(Tagger(), torch.randn(3, 2, 8))
