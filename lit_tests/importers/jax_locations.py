# REQUIRES: jax
# RUN: %PYTHON %s | filecheck %s

# JAX site names (STYLE rule 19): the importer turns each op's name stack into
# `NameLoc(<scope path>)` around the user's line, dropping transform wrappers (`jit(f)`),
# einsum specs and the primitive; a nested `jax.jit` inlined under two scopes gets both
# paths; an op under no scope keeps only its line, so it is named `<kind>#<ordinal>`.

import jax
import jax.numpy as jnp
import numpy as np
from harness import print_sites, run

from opscope.importers import import_source


def show(fn, *args):
    """Each site's name, kind and printed location."""
    module = import_source(fn, example_args=args)  # keep the module alive while its ops are read
    print_sites(module)


def ones(*shape):
    return np.ones(shape, np.float32)


# CHECK-LABEL: TEST: mlp_scopes
@run
def mlp_scopes():
    def mlp(x, w1, w2):
        with jax.named_scope("fc1"):
            h = jax.nn.relu(x @ w1)
        with jax.named_scope("fc2"):
            return h @ w2

    # CHECK: fc1 matmul loc("fc1"("{{.*}}jax_locations.py":{{[0-9]+}}:{{[0-9]+}} to :{{[0-9]+}}))
    # CHECK-NEXT: fc2 matmul loc("fc2"("{{.*}}jax_locations.py":{{[0-9]+}}:{{[0-9]+}} to :{{[0-9]+}}))
    show(mlp, ones(4, 8), ones(8, 16), ones(16, 3))


# CHECK-LABEL: TEST: attention_einsum_scopes
@run
def attention_einsum_scopes():
    def attention(x, wq, wk):
        with jax.named_scope("attn"):
            with jax.named_scope("q"):
                q = jnp.einsum("bsd,de->bse", x, wq)
            k = jnp.einsum("bsd,de->bse", x, wk)
            p = jax.nn.softmax(jnp.einsum("bqe,bke->bqk", q, k), axis=-1)
            return jnp.einsum("bqk,bke->bqe", p, x)

    # CHECK: attn/q matmul loc("attn/q"(
    # CHECK-NEXT: attn matmul loc("attn"(
    # CHECK-NEXT: attn#1 batch_matmul loc("attn"(
    # CHECK-NEXT: attn#2 batch_matmul loc("attn"(
    show(attention, ones(2, 5, 8), ones(8, 8), ones(8, 8))


# CHECK-LABEL: TEST: nested_jit_inlined_under_two_scopes
@run
def nested_jit_inlined_under_two_scopes():
    @jax.jit
    def dense(x, w):
        with jax.named_scope("proj"):
            return jnp.tanh(x @ w)

    def tower(x, w1, w2):
        with jax.named_scope("layer0"):
            h = dense(x, w1)
        with jax.named_scope("layer1"):
            return dense(h, w2)

    # CHECK: layer0/proj matmul loc("layer0/proj"(
    # CHECK-NEXT: layer1/proj matmul loc("layer1/proj"(
    show(tower, ones(4, 8), ones(8, 8), ones(8, 8))


# CHECK-LABEL: TEST: unscoped_matmul_keeps_only_its_line
@run
def unscoped_matmul_keeps_only_its_line():
    # the site is named by the line: its kind at the innermost Python frame
    # CHECK: matmul@jax_locations.py:[[LINE:[0-9]+]] matmul loc("{{.*}}jax_locations.py":[[LINE]]:{{[0-9]+}} to :{{[0-9]+}})
    show(lambda a, b: a @ b, ones(4, 8), ones(8, 2))
