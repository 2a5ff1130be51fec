"""The tests' view of the seven reference distributions: a thin re-export of `opscope.data`.

Tests import `DISTS` and `sample(dist, shape, seed)` from here (or use the `dists`
fixture); the one generator lives in `opscope.data`, whose tests are `test_data.py`.
"""

from __future__ import annotations

from opscope.data import DISTS
from opscope.data import sample_shaped as sample

__all__ = ["DISTS", "sample"]
