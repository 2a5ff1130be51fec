"""Host probes on weight and activation tensors (`stats`, `svd`), their decompositions
(`decompose`), tensor files (`tensors`), per-layer profiles and the byte-budget allocators."""
