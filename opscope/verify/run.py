"""`verify_run`: a recorded run folder checked against the model run again by its own framework.

The reference is what `opscope.models.source.Reference` says: a PyTorch exported program
(sketches of a sample of sites, FLOPs and outputs; `opscope.verify.check.verify_torch`), an ONNX
file (onnxruntime's outputs) or a JAX export (jax's outputs). The verdict is one line appended
to the run's `notes.json` (every report mined from the run prints it first) and the whole of it
in `verify.json`.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from iree.compiler import ir

from opscope.errors import OpscopeError
from opscope.record.tidy import NOTES_NAME
from opscope.verify.check import SAMPLE, Verification, compare_outputs, recorded_step, verify_torch

log = logging.getLogger("opscope")

VERIFY_NAME = "verify.json"


def verify_run(
    reference,
    module: ir.Module,
    out_dir: str | Path,
    csv: str | Path,
    inputs: Sequence[np.ndarray],
    outputs: Sequence[np.ndarray],
    row_stride: int = 1,
    weights_dtype: str | None = None,
    per_group: int = SAMPLE,
) -> Verification:
    """Check the run in `out_dir` (its tidy table `csv`, `outputs` of the first step's `inputs`,
    `module` the untapped canonical linalg) against `reference` (`opscope.models.source.Reference`);
    write the verdict to `notes.json` and `verify.json` there and return it. A reference that
    cannot run is a verdict too ("could not check against PyTorch, nothing was verified: ..."), never
    an exception that loses the run."""
    try:
        check = _check(reference, module, csv, inputs, outputs, row_stride, weights_dtype, per_group)
    except OpscopeError as e:
        check = Verification(_LABELS.get(reference.kind, reference.kind), failed=str(e))
    except Exception as e:  # a framework's own failure: said in the report, the run kept
        log.debug("verify failed", exc_info=True)
        first = str(e).splitlines()[0][:200] if str(e) else ""
        check = Verification(_LABELS.get(reference.kind, reference.kind), failed=f"{type(e).__name__}: {first}")
    write_verdict(Path(out_dir), check)
    return check


_LABELS = {"torch": "PyTorch", "onnx": "onnxruntime", "jax": "JAX"}


def _check(reference, module, csv, inputs, outputs, row_stride, weights_dtype, per_group) -> Verification:
    if reference.kind == "torch":
        return verify_torch(
            reference.load(), module, recorded_step(csv), inputs, outputs, row_stride, weights_dtype, per_group
        )
    if reference.kind == "onnx":
        check = Verification("onnxruntime")
        compare_outputs(check, outputs, onnx_outputs(reference.load(), inputs))
        return check
    if reference.kind == "jax":
        check = Verification("JAX")
        compare_outputs(check, outputs, jax_outputs(reference.load(), inputs))
        return check
    raise OpscopeError(f"no reference runs a '{reference.kind}' model")


def onnx_outputs(path: str | Path, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    """The ONNX model at `path` run by onnxruntime's CPU provider on `inputs`, in its graph's input order."""
    try:
        import onnxruntime
    except ImportError:
        raise OpscopeError("onnxruntime is not installed: pip install 'opscope[onnx]'") from None
    session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    names = [i.name for i in session.get_inputs()]
    if len(names) != len(inputs):
        raise OpscopeError(f"onnxruntime sees {len(names)} inputs, the compiled model {len(inputs)}")
    return [np.asarray(o) for o in session.run(None, dict(zip(names, inputs)))]


def jax_outputs(path: str | Path, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    """The `.jaxexport` at `path` called by jax on `inputs` (its flat arguments)."""
    try:
        import jax
        from jax import export
    except ImportError:
        raise OpscopeError("JAX is not installed: pip install 'opscope[jax]'") from None
    exported = export.deserialize(bytearray(Path(path).read_bytes()))
    out = exported.call(*inputs)
    return [np.asarray(o) for o in jax.tree_util.tree_leaves(out)]


def write_verdict(out: Path, check: Verification) -> None:
    """`verify.json` (everything) and the one line appended to `notes.json`."""
    (out / VERIFY_NAME).write_text(json.dumps(check.to_dict(), indent=1) + "\n")
    notes_path = out / NOTES_NAME
    try:
        notes = json.loads(notes_path.read_text())
    except (OSError, ValueError):
        notes = []
    notes = [n for n in notes if not str(n).startswith("verify:")] + [check.line()]
    notes_path.write_text(json.dumps(notes, indent=1) + "\n")
