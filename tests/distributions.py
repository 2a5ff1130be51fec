"""The tests' view of the seven reference distributions: a thin re-export of `opscope.drive.synthetic`.

Tests import `DISTS` and `sample(dist, shape, seed)` from here (or use the `dists`
fixture); the one generator lives in `opscope.drive.synthetic`, whose tests are `test_data.py`.
"""

from __future__ import annotations

from opscope.drive.synthetic import DISTS
from opscope.drive.synthetic import sample_shaped as sample

__all__ = ["DISTS", "sample"]
