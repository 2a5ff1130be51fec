"""Models to run: demo builders written in MLIR, the digits MLP, the offline text corpus,
Hugging Face builders that need no network, and the zoo that names them.
"""
