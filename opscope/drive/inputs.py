"""Inputs for a model a user brings: generated from its signature, read from files, or
tokenized from text; checked against the signature before anything compiles.

Generated (the default), per step:
* float argument 0: a fresh N(0, 1) batch (the activations); other float arguments fixed
  N(0, 1/fan-in) tensors (weights passed as arguments), as the reference's drivers;
* an integer argument that indexes a table (`Argument.index_bound`: an embedding's rows,
  the vocabulary): fresh uniform ids below that size;
* any other integer or i1 argument: ones (attention masks).

Files (`read_files`): one `.npz` or `.safetensors` whose arrays are named `arg0`, `arg1`,
... (`np.savez`'s `arr_0`, `arr_1`, ... too), or one `.npy` per argument in order. An
array shaped like its argument is reused every step; one with an extra leading axis of S
holds S steps. Dtypes and shapes must match the signature exactly.

Text (`tokenize`): sentences (one per non-empty line) through a Hugging Face tokenizer,
padded or truncated to the ids argument's [batch, seq]; the mask argument gets the
tokenizer's attention mask, other integer arguments zeros (token types).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Sequence
from itertools import islice
from pathlib import Path
from typing import Any

import numpy as np

from opscope.errors import OpscopeError
from opscope.ir.arguments import Argument

NUMPY_DTYPES: dict[str, Any] = {
    "f64": np.float64,
    "f32": np.float32,
    "f16": np.float16,
    "i64": np.int64,
    "i32": np.int32,
    "i16": np.int16,
    "i8": np.int8,
    "ui8": np.uint8,
    "i1": np.bool_,
}
INPUT_SUFFIXES = (".npz", ".safetensors", ".npy")
_ARG_NAME = re.compile(r"^(?:arg|arr_)?(\d+)$")


def check_feed(inputs: Any, text: Any, tokenizer: Any) -> None:
    """What a model runs on is input files or arrays, or text (through `tokenizer`, else the model's
    own), or neither (generated): anything else is refused in one line before a model is read."""
    if inputs is not None and text is not None:
        raise OpscopeError("give inputs or text, not both (--inputs or --text)")
    if tokenizer is not None and text is None:
        raise OpscopeError("--tokenizer (tokenizer) goes with --text (text): give the text it tokenizes")


def numpy_dtype(arg: Argument) -> np.dtype:
    """The numpy dtype that feeds `arg` (bf16 through ml_dtypes), or a one-line error."""
    if arg.dtype == "bf16":
        try:
            import ml_dtypes
        except ImportError:
            raise OpscopeError(f"{arg.describe()} is bf16: pip install ml_dtypes to feed it") from None
        return np.dtype(ml_dtypes.bfloat16)
    if arg.dtype not in NUMPY_DTYPES:
        raise OpscopeError(f"{arg.describe()}: element type {arg.dtype} cannot be fed from numpy")
    return np.dtype(NUMPY_DTYPES[arg.dtype])


def generate(args: Sequence[Argument], steps: int, seed: int = 0) -> Iterator[list[np.ndarray]]:
    """`steps` generated argument lists (see the module docstring)."""
    dtypes = [numpy_dtype(a) for a in args]  # unsupported types fail here, before any step
    rng = np.random.Generator(np.random.Philox(seed))
    fixed: dict[int, np.ndarray] = {}
    for a, dt in zip(args, dtypes):
        if a.is_float and a.index > 0:
            fan_in = a.shape[-2] if len(a.shape) >= 2 else 1
            fixed[a.index] = (rng.standard_normal(a.shape) / np.sqrt(fan_in)).astype(dt)
        elif not a.is_float and a.index_bound is None:
            fixed[a.index] = np.ones(a.shape, dt)
    for _ in range(steps):
        step = []
        for a, dt in zip(args, dtypes):
            if a.index in fixed:
                step.append(fixed[a.index])
            elif a.is_float:
                step.append(rng.standard_normal(a.shape).astype(dt))
            else:
                step.append(rng.integers(0, a.index_bound, a.shape).astype(dt))
        yield step


def check_steps(
    inputs: Iterable[Sequence[Any]], args: Sequence[Argument], steps: int, source: str = "inputs"
) -> list[list[np.ndarray]]:
    """The first `steps` argument lists of `inputs`, each checked against the signature."""
    out = []
    for t, step in enumerate(islice(inputs, steps)):
        step = [np.asarray(x) for x in step]
        if len(step) != len(args):
            raise OpscopeError(f"{source}: step {t} has {len(step)} arrays, the model takes {len(args)} arguments")
        for a, x in zip(args, step):
            _check(a, x, f"{source}: step {t}")
        out.append(step)
    if len(out) < steps:
        raise OpscopeError(f"{source}: {len(out)} steps of inputs, {steps} asked for (pass --steps {len(out)})")
    return out


def _check(arg: Argument, x: np.ndarray, where: str) -> None:
    """One array against its argument: dtype and shape exactly, and ids within the table they
    index (an id past it reads memory that is not the table's: NaNs or garbage, which parity
    would blame on the taps)."""
    want = numpy_dtype(arg)
    if x.dtype != want:
        raise OpscopeError(f"{where}: {arg.describe()} takes {want}, got {x.dtype} (save it as {want})")
    if tuple(x.shape) != arg.shape:
        raise OpscopeError(f"{where}: {arg.describe()} takes shape {list(arg.shape)}, got {list(x.shape)}")
    check_finite(arg, x, where)
    check_ids(arg, x, where)


def check_finite(arg: Argument, x: np.ndarray, where: str) -> None:
    """Refuse NaN or infinite values in a float argument, in one line naming it and the first one:
    every statistic of every tensor downstream would be NaN, and the report would say nothing."""
    if x.dtype.kind != "f" or not x.size:
        return
    bad = ~np.isfinite(x)
    if bad.any():
        first = tuple(int(i) for i in np.argwhere(bad)[0])
        nan = int(np.isnan(x).sum())
        raise OpscopeError(
            f"{where}: {arg.describe()} holds {nan} NaN and {int(bad.sum()) - nan} infinite values "
            f"(the first at {list(first)}: {x[first]}): give finite inputs"
        )


def check_ids(arg: Argument, x: np.ndarray, where: str) -> None:
    """Refuse ids of `arg` outside [-V, V) for the V rows of the table it indexes (negative ids
    count from the end, as ONNX's Gather takes them), in one line naming the argument."""
    bound = arg.index_bound
    if bound is None or not x.size:
        return
    low, high = int(x.min()), int(x.max())
    if high >= bound or low < -bound:
        bad = high if high >= bound else low
        raise OpscopeError(
            f"{where}: {arg.describe()} indexes a table of {bound} rows (the vocabulary) but holds id {bad}: "
            f"give ids in [0, {bound}) (this model's tokenizer, or --text with it)"
        )


def read_files(paths: Sequence[str | Path], args: Sequence[Argument], steps: int) -> list[list[np.ndarray]]:
    """`steps` argument lists from input files (see the module docstring), checked."""
    paths = [Path(p) for p in paths]
    label = ", ".join(str(p) for p in paths)
    for p in paths:
        if p.suffix.lower() not in INPUT_SUFFIXES:
            raise OpscopeError(f"{p}: inputs are {', '.join(INPUT_SUFFIXES)} files")
        if not p.is_file():
            raise OpscopeError(f"{p}: no such file")
    if all(p.suffix.lower() == ".npy" for p in paths):
        arrays = [_load_npy(p) for p in paths]
    elif len(paths) == 1:
        arrays = _ordered(paths[0], _load_named(paths[0]))
    else:
        raise OpscopeError(f"{label}: give one .npz or .safetensors file, or one .npy file per argument")
    if len(arrays) != len(args):
        raise OpscopeError(
            f"{label}: {len(arrays)} arrays for a model of {len(args)} arguments "
            f"({', '.join(a.describe() for a in args)})"
        )
    held = {}
    for a, x in zip(args, arrays):
        if x.ndim == len(a.shape) + 1 and tuple(x.shape[1:]) == a.shape:
            held[a.index] = x.shape[0]
        else:
            _check(a, x, label)
    if len(set(held.values())) > 1:
        raise OpscopeError(f"{label}: arguments hold different numbers of steps ({sorted(set(held.values()))})")
    stepped = next(iter(held.values()), None)
    if stepped is not None and stepped < steps:
        raise OpscopeError(f"{label}: holds {stepped} steps, {steps} asked for (pass --steps {stepped})")
    per_step = ([x[t] if a.index in held else x for a, x in zip(args, arrays)] for t in range(steps))
    return check_steps(per_step, args, steps, label)


def _load_npy(path: Path) -> np.ndarray:
    try:
        return np.load(path, allow_pickle=False)
    except (ValueError, OSError, EOFError) as e:  # EOFError: an empty or cut file
        why = (str(e).splitlines() or [type(e).__name__])[0]
        raise OpscopeError(f"{path}: not a readable .npy file ({why})") from None


def _load_named(path: Path) -> dict[str, np.ndarray]:
    """The named arrays of an `.npz` or `.safetensors` file."""
    try:
        if path.suffix.lower() == ".npz":
            with np.load(path, allow_pickle=False) as f:
                return {k: f[k] for k in f.files}
        from safetensors.numpy import load_file

        return load_file(str(path))
    except Exception as e:  # zip, safetensors and numpy errors alike become one line
        raise OpscopeError(
            f"{path}: not a readable {path.suffix} file ({type(e).__name__}: {(str(e).splitlines() or [''])[0]})"
        ) from None


def _ordered(path: Path, named: dict[str, np.ndarray]) -> list[np.ndarray]:
    """The arrays in argument order, by the number in their names (`arg0`, `arr_0`, `0`)."""
    numbers = {}
    for name in named:
        m = _ARG_NAME.match(name)
        if m is None:
            raise OpscopeError(f"{path}: name the arrays arg0, arg1, ... in argument order; got {', '.join(named)}")
        numbers[int(m.group(1))] = named[name]
    if sorted(numbers) != list(range(len(numbers))):
        raise OpscopeError(f"{path}: arrays arg0..arg{len(numbers) - 1} expected, got {', '.join(named)}")
    return [numbers[i] for i in range(len(numbers))]


def load_tokenizer(name_or_dir: str | Path):
    """A Hugging Face tokenizer from a local folder (nothing is downloaded), or a one-line error."""
    try:
        import transformers
    except ImportError:
        raise OpscopeError("tokenizing text needs transformers: pip install 'opscope[torch]'") from None
    try:
        return transformers.AutoTokenizer.from_pretrained(str(name_or_dir), local_files_only=True)
    except Exception as e:
        raise OpscopeError(
            f"no tokenizer at {name_or_dir} ({type(e).__name__}): give a folder holding a Hugging "
            "Face tokenizer (tokenizer.json or vocab files)"
        ) from None


def read_sentences(path: str | Path) -> list[str]:
    """The non-empty lines of a text file."""
    path = Path(path)
    try:
        lines = [ln.strip() for ln in path.read_text(encoding="utf-8").splitlines()]
    except (OSError, UnicodeDecodeError) as e:
        raise OpscopeError(f"{path}: cannot read text ({type(e).__name__})") from None
    sentences = [ln for ln in lines if ln]
    if not sentences:
        raise OpscopeError(f"{path}: no text (one sentence per line)")
    return sentences


def tokenize(
    sentences: Sequence[str], tokenizer, args: Sequence[Argument], steps: int, source: str = "text"
) -> list[list[np.ndarray]]:
    """`steps` argument lists of tokenized `sentences` (see the module docstring), checked."""
    ids = max((a for a in args if a.is_integer and a.index_bound), key=lambda a: a.index_bound, default=None)
    if ids is None or len(ids.shape) != 2:
        raise OpscopeError(
            f"{source}: the model has no [batch, seq] token-id argument to feed text to "
            f"({', '.join(a.describe() for a in args)})"
        )
    vocab = len(tokenizer)
    if vocab > ids.index_bound:
        raise OpscopeError(
            f"{source}: the tokenizer's vocabulary ({vocab}) exceeds the model's embedding "
            f"({ids.index_bound} rows): not this model's tokenizer"
        )
    batch, seq = ids.shape
    masks = [a for a in args if a.is_integer and a.index_bound is None and a.shape == ids.shape]
    others = [a for a in args if a is not ids and a not in masks]
    if any(a.is_float for a in others):
        raise OpscopeError(
            f"{source}: text feeds token ids; {next(a for a in others if a.is_float).describe()} needs --inputs"
        )
    out = []
    for t in range(steps):
        chunk = [sentences[(t * batch + i) % len(sentences)] for i in range(batch)]
        enc = tokenizer(chunk, padding="max_length", truncation=True, max_length=seq, return_tensors="np")
        step = []
        for a in args:
            if a is ids:
                step.append(enc["input_ids"].astype(numpy_dtype(a)))
            elif a in masks:
                step.append(enc["attention_mask"].astype(numpy_dtype(a)))
            else:
                step.append(np.zeros(a.shape, numpy_dtype(a)))
        out.append(step)
    return check_steps(out, args, steps, source)


def degenerate_notes(args: Sequence[Argument], steps: Sequence[Sequence[np.ndarray]]) -> list[str]:
    """What would make a run describe its inputs rather than the model at work, one line each: the
    token ids (the argument indexing the largest table: the vocabulary) or the first float argument
    (the activations) the same at every position of every sequence, or the same at every step.
    Masks, token types (a small table, often all 0) and weights passed as arguments are meant to
    stay fixed and are not judged."""
    floats = [a for a in args if a.is_float]
    ids = max((a for a in args if a.index_bound is not None), key=lambda a: a.index_bound, default=None)
    data = [a for a in args if a is ids or (floats and a is floats[0])]
    notes = []
    for a in data:
        xs = [np.asarray(step[a.index]) for step in steps]
        what = "token ids" if a.index_bound is not None else "activations"
        axis = -1 if a.index_bound is not None else -2  # ids [.., seq]; activations [.., seq, features]
        if xs and xs[0].ndim >= -axis and xs[0].shape[axis] > 1 and all(_constant_along(x, axis) for x in xs):
            notes.append(
                f"inputs: {a.describe()} ({what}) holds the same value at every position of every sequence: "
                "the statistics describe a constant input, not the model at work; feed real or varied inputs"
            )
        if len(xs) > 1 and all(np.array_equal(xs[0], x) for x in xs[1:]):
            notes.append(
                f"inputs: {a.describe()} ({what}) is identical at all {len(xs)} steps: cross-step and "
                "reuse findings describe one input repeated"
            )
    return notes


def _constant_along(x: np.ndarray, axis: int) -> bool:
    first = np.take(x, [0], axis=axis)
    return bool(np.all(x == first))
