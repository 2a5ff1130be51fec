"""Running passes: textual pipelines mixing opscope and MLIR/IREE passes (the pass adapter),
the taps as one call (inject + lower), and the `opscope-opt` driver. Above `passes/`, below `run/`.
"""
