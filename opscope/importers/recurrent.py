"""Recurrent layers unrolled over time: the site names every route gives their matmuls.

An LSTM, GRU or plain RNN over a static sequence of T steps is imported unrolled (torch:
`aten.lstm`/`aten.gru`/`aten.rnn_*` decomposed with torch's own decompositions; ONNX: the
`LSTM`/`GRU`/`RNN` node rewritten into its per-step subgraph, `onnx_rnn.py`), so each of its
matmuls is a site in the function's entry block. Per layer and direction there are 1 + T of
them, in this order and with these names (`rnn` is the layer's module path; a model that is
the recurrent layer itself gives `l0.ih`, `l0.t0`, ...):

* `rnn.l0.ih`: the input projection of every step at once (`weight_ih_l0`, [T·B, I] × [I, G·H]);
* `rnn.l0.t0` … `rnn.l0.t{T-1}`: the recurrent projection of step t (`weight_hh_l0`, [B, H] × [H, G·H]);
* a bidirectional layer's backward pass is `rnn.l0_reverse.ih`, `rnn.l0_reverse.t{t}` with t the
  time index it reads (it runs t = T-1 down to 0), as PyTorch names its parameters.

L layers, D directions: L·D·(1+T) sites, the same from an nn.Module, a `.pt2` and an ONNX file.
"""

from __future__ import annotations


def step_scope(path: str, layer: int, reverse: bool, step: int | None) -> str:
    """The site name of one unrolled matmul: `step` None is the input projection, else a time index."""
    layer_name = f"l{layer}{'_reverse' if reverse else ''}"
    base = f"{path}.{layer_name}" if path else layer_name
    return f"{base}.ih" if step is None else f"{base}.t{step}"


def step_scopes(path: str, layers: int, directions: int, steps: int) -> list[str]:
    """The names of all L·D·(1+T) matmuls of one recurrent op, in the order the unrolled graph runs them."""
    names: list[str] = []
    for layer in range(layers):
        for d in range(directions):
            reverse = d == 1
            names.append(step_scope(path, layer, reverse, None))
            order = range(steps - 1, -1, -1) if reverse else range(steps)
            names.extend(step_scope(path, layer, reverse, t) for t in order)
    return names
