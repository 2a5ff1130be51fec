"""The Python API of the spine: inject statistics into a module and get its manifest."""

from __future__ import annotations

from typing import Callable

from opscope.manifest import Manifest
from opscope.passes.inject_matmul_stats import InjectMatmulStats
from opscope.passes.lower_opscope import LowerOpscope
from opscope.pipeline import Pipeline, run_pipeline
from opscope.sites import Site
from opscope.stat_config import StatConfig
from opscope.targets import get_target


def inject_matmul_stats(
    module,
    config: StatConfig = StatConfig(),
    keep: Callable[[Site], bool] | None = None,
    sites: str = "",
    pack: bool = True,
    outline: bool = True,
    batch: int = 0,
    hoist_constants: bool = False,
    target: str | None = None,
    hist_counts: str | None = None,
    row_lanes: int | None = None,
):
    """Tap every matmul site of `module` (in place) and lower the taps; returns (module, manifest).

    `keep(site)` is the reference's filtered form (it sees `site.lhs_numel`,
    `site.out_numel`, `site.name`, ...); `sites` is a name regex. `pack`, `outline`,
    `batch`, `hoist_constants`, `hist_counts` and `row_lanes` are lower-opscope's options;
    `hist_counts` and `row_lanes` default to `target`'s layout (`Target.hist_counts`,
    `Target.row_lanes`: i8 counts and 16 row lanes on llvm-cpu), and to i32 counts and
    straight rows when the target is not given.
    """
    tgt = get_target(target) if target else None
    if hist_counts is None:
        hist_counts = tgt.hist_counts if tgt else "i32"
    if row_lanes is None:
        row_lanes = tgt.row_lanes if tgt else 0
    pipeline = Pipeline((
        InjectMatmulStats.from_config(config, sites=sites, keep=keep),
        LowerOpscope(pack=pack, outline=outline, batch=batch, hoist_constants=hoist_constants,
                     hist_counts=hist_counts, row_lanes=row_lanes),
    ))
    run_pipeline(module, pipeline)
    return module, Manifest.from_module(module)
