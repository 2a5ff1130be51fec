"""The Python API of the spine: inject statistics into a module and get its manifest."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable

from opscope.errors import OpscopeError
from opscope.ir.manifest import Manifest
from opscope.ir.sites import Site
from opscope.ir.stat_config import StatConfig
from opscope.passes.inject_attention_stats import InjectAttentionStats
from opscope.passes.inject_infer_stats import InjectInferStats
from opscope.passes.inject_matmul_stats import InjectMatmulStats
from opscope.passes.inject_residual_stats import InjectResidualStats
from opscope.passes.lower_opscope import LowerOpscope
from opscope.passes.sample_rows import SampleRows
from opscope.passes.split_weight_stats import SplitWeightStats
from opscope.pipeline.textual import Pipeline, run_pipeline

# What can be tapped: matmul/convolution sketches, and the inference dynamics (attention
# probabilities, fused or not; top-k routing with its gate; residual adds).
TAPS: tuple[str, ...] = ("matmul", "attention", "routing", "residual")


def parse_taps(spec: str | Iterable[str] | None) -> tuple[str, ...]:
    """The tap families of `spec` ("all", "matmul,residual", a list; None: all), in `TAPS`
    order, or a one-line error naming the unknown ones."""
    if spec is None:
        return TAPS
    words = [w.strip() for w in (spec.split(",") if isinstance(spec, str) else spec) if w.strip()]
    if words == ["all"]:
        return TAPS
    unknown = [w for w in words if w not in TAPS]
    if unknown or not words:
        raise OpscopeError(
            f"unknown taps {', '.join(unknown) or '(none given)'}: choose from all, {', '.join(TAPS)} (comma-separated)"
        )
    return tuple(t for t in TAPS if t in words)


def check_sites_regex(sites: str) -> str:
    """`sites` (a regex on site names, "" all) back, or a one-line error naming what does not compile."""
    try:
        re.compile(sites)
    except re.error as e:
        raise OpscopeError(
            f"sites: {sites!r} is not a regular expression ({e}); e.g. 'layers\\.1\\.' or 'mlp'"
        ) from None
    return sites


def tap_passes(
    config: StatConfig = StatConfig(),
    taps: str | Iterable[str] | None = TAPS,
    sites: str = "",
    keep: Callable[[Site], bool] | None = None,
    every_add: bool = False,
) -> tuple:
    """The inject passes of `taps`, in one pipeline's order (all before `lower-opscope`);
    `sites` (a name regex) selects among every kind, `keep` (a predicate on `Site`) among
    the matmul and convolution sites."""
    taps = parse_taps(taps)
    passes = []
    if "matmul" in taps:
        passes.append(InjectMatmulStats.from_config(config, sites=sites, keep=keep))
    if "attention" in taps or "routing" in taps:
        passes.append(InjectInferStats(softmax="attention" in taps, routing="routing" in taps, sites=sites))
    if "attention" in taps:
        passes.append(InjectAttentionStats(sites=sites))
    if "residual" in taps:
        passes.append(InjectResidualStats(every_add=every_add, sites=sites))
    return tuple(passes)


def inject_stats(
    module,
    config: StatConfig = StatConfig(),
    taps: str | Iterable[str] | None = TAPS,
    keep: Callable[[Site], bool] | None = None,
    sites: str = "",
    every_add: bool = False,
    weights_once: bool = False,
    **lowering,
):
    """Tap `taps` of `module` (in place) and lower the taps in one pipeline; returns (module,
    manifest). `sites` (a name regex) selects sites of every kind, `keep` (a predicate on
    `Site`) matmul and convolution sites; `lowering` is lower-opscope's options (see
    `inject_matmul_stats`). `weights_once` moves the statistics of constant tensors (weights) into
    `@<function>$weights`, computed once per loaded module (`split-weight-stats`). A `config`
    with `row_stride` K > 1 sketches each activation on 1 row in K (`sample-rows`), without
    adjacent-row differences."""
    split = (SplitWeightStats(),) if weights_once else ()
    sample = ()
    if config.row_stride > 1:  # adjacent-row differences need consecutive rows
        config, sample = config.replace(adjacency=False), (SampleRows(config.row_stride),)
    taps = tap_passes(config, taps, sites, keep, every_add)
    pipeline = Pipeline(taps + sample + split + (LowerOpscope(**lowering),))
    run_pipeline(module, pipeline)
    return module, Manifest.from_module(module)


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
    weights_once: bool = False,
):
    """Tap every matmul site of `module` (in place) and lower the taps; returns (module, manifest).

    `keep(site)` is the reference's filtered form (it sees `site.lhs_numel`,
    `site.out_numel`, `site.name`, ...); `sites` is a name regex. `pack`, `outline`,
    `batch`, `hoist_constants`, `hist_counts` and `row_lanes` are lower-opscope's options;
    the defaults (i32 counts, straight rows) suit every target, and a target's faster
    layout is `opscope.run.targets.Target.layout` (i8 counts and 16 row lanes on llvm-cpu):
    `inject_matmul_stats(module, config, **get_target("llvm-cpu").layout)`. `weights_once` moves the
    weights' statistics into `@<function>$weights` (`split-weight-stats`).
    """
    return inject_stats(
        module,
        config,
        ("matmul",),
        keep=keep,
        sites=sites,
        weights_once=weights_once,
        pack=pack,
        outline=outline,
        batch=batch,
        hoist_constants=hoist_constants,
        hist_counts=hist_counts,
        row_lanes=row_lanes,
    )
