"""`LiveSampler`: a model served as is, 1 call in N instrumented, its sketches folded in bounded memory.

Both builds are compiled once: the plain one answers N − 1 calls in N and pays nothing; the
instrumented one (each matmul's lhs: the seven scalars and the elemsig fingerprint,
`StatConfig.live()`, or the `config` given: more roles, a fixed-range histogram; plus attention
and routing taps where the model has them) answers the
Nth, and its sketches fold into a `StreamSketch` (`opscope.online`). Every call's inputs are
fingerprinted on the host (blake2b, microseconds) so the report knows how often the stream
itself repeats. Memory does not grow with the stream; concurrent callers are safe (each
build's runtime context is called by one thread at a time, the sketches fold under a lock).
Every `snapshot_every` sampled calls, the period's aggregate statistics are written as one
step of the tidy CSV (`opscope mine` reads it) and the sketches saved as JSON (workers merge).
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from opscope.errors import OpscopeError
from opscope.ir.manifest import Manifest
from opscope.ir.stat_config import StatConfig
from opscope.online.hashing import fingerprint
from opscope.online.report import LiveReport, live_report
from opscope.online.snapshot import save
from opscope.online.stream import StreamSketch, config_fields
from opscope.record.recorder import Recorder, write_parquet, write_site_costs
from opscope.record.tidy import SITES_SUFFIX
from opscope.run.compile import compile_module
from opscope.run.instrumented import InstrumentedModel, tapped_outputs
from opscope.run.runtime import LoadedModule, load
from opscope.run.ticker import ticking

LIVE_TAPS = ("matmul", "attention", "routing")  # recurrence needs the matmul lhs; loads come from the others
DIST = "live"


def check_every(every: object) -> int:
    """`every` as the sampling period (1 call in N), or a one-line error."""
    if isinstance(every, bool) or not isinstance(every, (int, np.integer)) or every < 1:
        raise OpscopeError(
            f"live sampling: --every must be an integer >= 1 (1 call in N is instrumented), got {every!r}"
        )
    return int(every)


def live_config(config: StatConfig | None) -> StatConfig:
    """The sketches a sampled call records: `config`, or `StatConfig.live()`; a one-line error for a
    config without role lhs (the fingerprints and the drift read each site's lhs) before any compile."""
    if config is None:
        return StatConfig.live()
    if "lhs" not in config.roles:
        raise OpscopeError(
            f"live sampling fingerprints each site's lhs: keep lhs among the roles (got {','.join(config.roles)}), "
            "e.g. --roles lhs,out"
        )
    return config


def check_fingerprints(manifest: Manifest, name: str) -> None:
    """Live recurrence fingerprints each matmul's lhs by its elemsig sketch: refuse a build without one."""
    if not any(e.stat == "elemsig" and e.role == "lhs" for e in manifest.entries):
        raise OpscopeError(
            f"{name}: live sampling fingerprints each matmul's lhs by its elemsig sketch and this "
            "build records none; build it with StatConfig.live() (or a config that keeps role lhs), and with "
            "--sites, choose a matmul or convolution among the sites"
        )


class LiveSampler:
    """Serve a model: call it like the model (results are the original ones), 1 call in `every` instrumented."""

    def __init__(
        self,
        manifest: Manifest,
        tapped: LoadedModule,
        plain: LoadedModule,
        every: int,
        *,
        target: str = "llvm-cpu",
        name: str = "<model>",
        fingerprint_inputs: bool = True,
        csv: str | Path | None = None,
        state: str | Path | None = None,
        snapshot_every: int = 0,
        sketch: StreamSketch | None = None,
    ) -> None:
        self.every = check_every(every)
        check_fingerprints(manifest, name)
        if snapshot_every < 0:
            raise OpscopeError(f"live sampling: snapshot_every must be >= 0 (0: only on close), got {snapshot_every}")
        self.manifest, self.tapped, self.plain = manifest, tapped, plain
        self.target, self.name, self.fingerprint_inputs = target, name, fingerprint_inputs
        self.sketch = sketch if sketch is not None else StreamSketch(self.every)
        self.snapshot_every = snapshot_every
        self.state = Path(state) if state is not None else None
        self.csv = Path(csv) if csv is not None else None
        self._numel = {(e.site, e.role): e.numel for e in manifest.entries}
        self._dims = {s.name: (s.m, s.k, s.n) for s in manifest.sites}
        self._keys = {s.name: s.n for s in manifest.sites}  # an attention site's N is its key count
        self._lock, self._plain_lock, self._tapped_lock = threading.Lock(), threading.Lock(), threading.Lock()
        self._count = self.sketch.calls
        self._since_snapshot = 0  # sampled calls since the last snapshot
        self._recorder = self.open_tidy(self.csv) if self.csv is not None else None

    @classmethod
    def build(
        cls,
        source,
        every: int,
        target: str = "llvm-cpu",
        name: str = "<model>",
        taps: Sequence[str] = LIVE_TAPS,
        sites: str = "",
        config: StatConfig | None = None,
        **options,
    ) -> LiveSampler:
        """Compile `source` twice for `target` (plain, and tapped with `config`, default `StatConfig.live()`;
        `sites` a regex on site names, "" all) and serve it."""
        every = check_every(every)
        config = live_config(config)
        model = InstrumentedModel.build(source, target, config, name, taps=tuple(taps), sites=sites)
        options.setdefault("sketch", StreamSketch(every, config=config_fields(config)))
        return cls.from_model(model, every, name=name, **options)

    @classmethod
    def from_model(cls, model: InstrumentedModel, every: int, **options) -> LiveSampler:
        """Serve an already built `InstrumentedModel` (its plain build is compiled here)."""
        every = check_every(every)
        check_fingerprints(model.manifest, options.get("name", "<model>"))
        with ticking(f"compile the plain model for {model.target} (the calls that are not sampled)"):
            plain = load(compile_module(model.base_source, model.target))
        return cls(model.manifest, model.loaded, plain, every, target=model.target, **options)

    def __call__(self, *inputs: np.ndarray, label: str | None = None) -> list[np.ndarray]:
        """One call: the model's own results; sampled calls also fold their sketches."""
        with self._lock:
            self._count += 1
            sampled = self._count % self.every == 0
        fp = fingerprint(inputs) if self.fingerprint_inputs else None
        values = None
        if sampled:
            with self._tapped_lock:
                outs = tapped_outputs(self.tapped, self.manifest, inputs)
            values = self.manifest.values(outs)
            results = outs[: self.manifest.num_original_results]
        else:
            with self._plain_lock:
                results = self.plain.invoke(self.manifest.function, *inputs)
        with self._lock:
            self.sketch.fold_call(fp, label)
            if values is not None:
                self.sketch.fold_sample(values, self._numel, fp, self._keys)
                self._since_snapshot += 1
                if self.snapshot_every and self._since_snapshot >= self.snapshot_every:
                    self._snapshot()
        return results

    def report(self) -> LiveReport:
        with self._lock:
            return live_report(self.sketch)

    def snapshot(self) -> None:
        """Write the period's tidy step (when a CSV was given) and save the sketches (when a state file was)."""
        with self._lock:
            self._snapshot()

    def open_tidy(self, csv: Path) -> Recorder:
        """A tidy CSV for this model's periods, with its `site,flops` sidecar beside it."""
        write_site_costs(csv.with_name(csv.name + SITES_SUFFIX), self.manifest)
        return Recorder(csv, durable=False)

    def record_period(self, recorder: Recorder, sketch: StreamSketch) -> None:
        """`sketch`'s period since its last snapshot as one tidy step (dist `live`), then a fresh period."""
        step, values = sketch.take_period()
        recorder.record_values(0, step, self.target, DIST, 0, 0, 0, values, self._numel, self._dims)

    def _snapshot(self) -> None:
        self._since_snapshot = 0
        if self._recorder is not None and self.sketch.period.count:
            self.record_period(self._recorder, self.sketch)
        if self.state is not None:
            save(self.sketch, self.state)

    def close(self, parquet: str | Path | None = None) -> None:
        """Write the last period and the sketches, close the CSV (and convert it to Parquet when asked)."""
        self.snapshot()
        if self._recorder is not None:
            self._recorder.close()
            self._recorder = None
            if parquet is not None:
                write_parquet(self.csv, parquet)

    def __enter__(self) -> LiveSampler:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
