"""Model Explorer: a model's linalg graph and a run's statistics on it, for Google's graph viewer.

`node_data` (a mined run's statistics per tapped op, one overlay per statistic, coloured),
`export` (`opscope graph`: the graph JSON and the overlays written), `viewer` (`opscope view`:
Model Explorer started on them, an optional extra).
"""
