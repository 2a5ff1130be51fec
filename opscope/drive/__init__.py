"""The drivers: what feeds a model step after step and records it. Synthetic
distributions, the sweep, decode-like sequences and replays, and the main job `profile`.
"""
