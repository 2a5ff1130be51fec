"""The IR stage: facts about a module and the helpers passes build on: one context, site
discovery, weight tracing, constants, FLOPs, the stat config, the manifest.

Nothing here runs a pass pipeline (that is `opscope.pipeline`) or compiles a module (`opscope.run`).
"""
