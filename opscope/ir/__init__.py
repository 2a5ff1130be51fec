"""The IR stage: one context, site discovery, constants, the stat config, the manifest,
pipelines mixing opscope and MLIR/IREE passes, injection, and the `opscope-opt` driver.

Nothing here compiles or runs a module (that is `opscope.run`).
"""
