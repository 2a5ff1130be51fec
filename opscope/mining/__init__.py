"""The value miner: signals and the rule cascade (`signals`), cross-step and temporal
opportunities (`temporal`), the report that holds them (`report`) and its renderers
(`render`). Pure functions of a tidy frame; nothing here runs a model.
"""
