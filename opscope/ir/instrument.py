"""The Python API of the spine: inject statistics into a module and get its manifest."""

from __future__ import annotations

from typing import Callable

from opscope.ir.manifest import Manifest
from opscope.ir.pipeline import Pipeline, run_pipeline
from opscope.ir.sites import Site
from opscope.ir.stat_config import StatConfig
from opscope.passes.inject_matmul_stats import InjectMatmulStats
from opscope.passes.lower_opscope import LowerOpscope


def inject_matmul_stats(
    module,
    config: StatConfig = StatConfig(),
    keep: Callable[[Site], bool] | None = None,
    sites: str = "",
    pack: bool = True,
    outline: bool = True,
    batch: int = 0,
    hoist_constants: bool = False,
    hist_counts: str = "i32",
    row_lanes: int = 0,
):
    """Tap every matmul site of `module` (in place) and lower the taps; returns (module, manifest).

    `keep(site)` is the reference's filtered form (it sees `site.lhs_numel`,
    `site.out_numel`, `site.name`, ...); `sites` is a name regex. `pack`, `outline`,
    `batch`, `hoist_constants`, `hist_counts` and `row_lanes` are lower-opscope's options;
    the defaults (i32 counts, straight rows) suit every target, and a target's faster
    layout is `opscope.run.targets.Target.layout` (i8 counts and 16 row lanes on llvm-cpu):
    `inject_matmul_stats(module, config, **get_target("llvm-cpu").layout)`.
    """
    pipeline = Pipeline((
        InjectMatmulStats.from_config(config, sites=sites, keep=keep),
        LowerOpscope(pack=pack, outline=outline, batch=batch, hoist_constants=hoist_constants,
                     hist_counts=hist_counts, row_lanes=row_lanes),
    ))
    run_pipeline(module, pipeline)
    return module, Manifest.from_module(module)
