"""Static analyses of a canonical linalg module: nothing here executes the model.

`labels` names ops readably (the vocabulary every other analysis reports in).
"""
