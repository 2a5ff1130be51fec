"""A run checked against an independent one: the same inputs through PyTorch (each site's tensors
captured as torch computes them), onnxruntime or JAX, their sketches and outputs compared."""
