"""split-weight-stats: the weights' sketches computed once per loaded module, the recording unchanged.

The reference is the per-call build: the same model tapped without the split must give the
same values, bit for bit (the same kernels compute them), in the same tidy rows, byte for byte.
"""

from __future__ import annotations

import numpy as np

from opscope.ir.manifest import Manifest
from opscope.ir.stat_config import StatConfig
from opscope.models.demo import transformer_module
from opscope.record.recorder import Recorder
from opscope.run.instrumented import InstrumentedModel

MODEL = transformer_module(1, 32, 16, weights="globals")


def _record(model: InstrumentedModel, inputs, path) -> bytes:
    with Recorder(path) as rec:
        for step, x in enumerate(inputs):
            rec.record(0, step, model.target, "t", None, None, None, model.manifest, model(*x))
    return path.read_bytes()


def test_weights_once_records_the_same_table_byte_for_byte(runnable_target, tmp_path):
    every_call = InstrumentedModel.build(MODEL, runnable_target, name="per-call", weights_once=False)
    once = InstrumentedModel.build(MODEL, runnable_target, name="once", weights_once=True)
    assert once.manifest.weights_function == "main$weights" and once.manifest.weights_results >= 1
    assert not every_call.manifest.weights_function
    assert [(e.site, e.role, e.stat) for e in once.manifest.entries] == [
        (e.site, e.role, e.stat) for e in every_call.manifest.entries
    ]
    assert {e.role for e in once.manifest.entries if e.result >= once.manifest.call_results} == {"rhs"}
    rng = np.random.default_rng(0)
    inputs = [[rng.standard_normal(every_call.args[0].shape).astype(np.float32)] for _ in range(3)]
    assert _record(once, inputs, tmp_path / "once.csv") == _record(every_call, inputs, tmp_path / "every.csv")


def test_the_weights_function_runs_once_per_loaded_module(monkeypatch):
    model = InstrumentedModel.build(MODEL, name="once", weights_once=True)
    calls = []
    invoke = model.loaded.invoke
    monkeypatch.setattr(model.loaded, "invoke", lambda fn, *a: calls.append(fn) or invoke(fn, *a))
    x = np.ones(model.args[0].shape, np.float32)
    first, second = model(x), model(2 * x)
    assert calls == ["main", "main$weights", "main"]
    assert len(first) == len(second) == model.manifest.num_results
    weights = model.manifest.call_results
    assert all(np.array_equal(a, b) for a, b in zip(first[weights:], second[weights:]))


def test_manifest_json_keeps_the_weights_function(tmp_path):
    model = InstrumentedModel.build(MODEL, name="once", weights_once=True, config=StatConfig.lean())
    model.manifest.save(tmp_path / "m.json")
    back = Manifest.load(tmp_path / "m.json")
    assert (back.weights_function, back.weights_results, back.call_results) == (
        model.manifest.weights_function,
        model.manifest.weights_results,
        model.manifest.call_results,
    )


def test_weights_passed_as_arguments_stay_per_call():
    model = InstrumentedModel.build(transformer_module(1, 32, 16), name="args", weights_once=True)
    assert model.manifest.weights_function == "" and model.manifest.call_results == model.manifest.num_results
    assert any(e.role == "rhs" for e in model.manifest.entries)


def test_live_sampler_reads_the_weights_once_build():
    from opscope.drive.live import LiveSampler

    model = InstrumentedModel.build(MODEL, name="once", weights_once=True, config=StatConfig())
    s = LiveSampler.from_model(model, 2, name="once")
    x = np.ones(model.args[0].shape, np.float32)
    for _ in range(4):
        s(x)
    assert s.sketch.samples == 2 and s.sketch.period.count == 2
