"""Inputs for a model a user brings: the signature read from the IR (index bounds of token
ids), generated inputs, input files and text, all checked before anything compiles."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from errors import one_line
from linalg_cases import gather_region

import opscope
from opscope.drive.inputs import check_steps, generate, read_files, read_sentences, tokenize
from opscope.errors import OpscopeError
from opscope.ir.arguments import Argument, arguments, function_args
from opscope.ir.loading import new_context, parse_module
from opscope.mining.render import render
from opscope.models.demo import transformer_module

# An embedding lookup (ids index a 50-row table through a view), a mask multiplied in, and a
# matmul: what an imported text model looks like at the linalg level.
EMBEDDING = """
#map = affine_map<(d0, d1, d2) -> (d0, d1)>
#map1 = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
func.func @main(%ids: tensor<2x8xi64>, %mask: tensor<2x8xi64>, %types: tensor<2x8xi64>) -> tensor<16x4xf32> {
  %table = arith.constant dense<0.5> : tensor<50x16xf32>
  %type_table = arith.constant dense<0.25> : tensor<2x16xf32>
  %w = arith.constant dense<0.25> : tensor<16x4xf32>
  %flat_ids = tensor.collapse_shape %ids [[0, 1]] : tensor<2x8xi64> into tensor<16xi64>
  %ids2 = tensor.expand_shape %flat_ids [[0, 1]] output_shape [2, 8] : tensor<16xi64> into tensor<2x8xi64>
  %e0 = tensor.empty() : tensor<2x8x16xf32>
  %emb = linalg.generic {indexing_maps = [#map, #map, #map, #map1], iterator_types = ["parallel", "parallel", "parallel"]} ins(%ids2, %mask, %types : tensor<2x8xi64>, tensor<2x8xi64>, tensor<2x8xi64>) outs(%e0 : tensor<2x8x16xf32>) {
  ^bb0(%i: i64, %m: i64, %t: i64, %out: f32):
    %idx = arith.index_cast %i : i64 to index
    %tdx = arith.index_cast %t : i64 to index
    %j = linalg.index 2 : index
    %v = tensor.extract %table[%idx, %j] : tensor<50x16xf32>
    %u = tensor.extract %type_table[%tdx, %j] : tensor<2x16xf32>
    %mf = arith.sitofp %m : i64 to f32
    %s = arith.addf %v, %u : f32
    %r = arith.mulf %s, %mf : f32
    linalg.yield %r : f32
  } -> tensor<2x8x16xf32>
  %flat = tensor.collapse_shape %emb [[0, 1], [2]] : tensor<2x8x16xf32> into tensor<16x16xf32>
  %z = arith.constant 0.0 : f32
  %o0 = tensor.empty() : tensor<16x4xf32>
  %o1 = linalg.fill ins(%z : f32) outs(%o0 : tensor<16x4xf32>) -> tensor<16x4xf32>
  %out = linalg.matmul ins(%flat, %w : tensor<16x16xf32>, tensor<16x4xf32>) outs(%o1 : tensor<16x4xf32>) -> tensor<16x4xf32>
  return %out : tensor<16x4xf32>
}
"""
DYNAMIC = """
func.func @main(%x: tensor<?x8xf32>) -> tensor<?x8xf32> {
  return %x : tensor<?x8xf32>
}
"""


def signature(text: str = EMBEDDING) -> list[Argument]:
    return arguments(parse_module(text, new_context()))


def test_signature_reads_token_id_bounds_through_views():
    ids, mask, types = signature()
    assert (ids.shape, ids.dtype, ids.index_bound) == ((2, 8), "i64", 50)  # through collapse + expand
    assert mask.index_bound is None and types.index_bound == 2
    assert ids.describe() == "argument 0 (tensor<2x8xi64>)"


# ONNX's Gather as the legacy importer lowers it: negative ids wrapped, `select(ids < 0, ids + V,
# ids)`, over three generics, then a clamp into range before the lookup; the mask only decides.
WRAPPED = f"""
#map = affine_map<(d0, d1) -> (d0, d1)>
#map1 = affine_map<(d0, d1) -> (d0)>
func.func @main(%ids: tensor<2x5xi64>, %mask: tensor<2x5xi64>) -> tensor<10x16xf32> {{
  %table = arith.constant dense<0.5> : tensor<50x16xf32>
  %c0 = arith.constant 0 : i64
  %c49 = arith.constant 49 : i64
  %c50 = arith.constant 50 : i64
  %b = tensor.empty() : tensor<2x5xi1>
  %neg = linalg.generic {{indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel"]}} ins(%ids : tensor<2x5xi64>) outs(%b : tensor<2x5xi1>) {{
  ^bb0(%in: i64, %out: i1):
    %c = arith.cmpi slt, %in, %c0 : i64
    linalg.yield %c : i1
  }} -> tensor<2x5xi1>
  %e = tensor.empty() : tensor<2x5xi64>
  %plus = linalg.generic {{indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel"]}} ins(%ids : tensor<2x5xi64>) outs(%e : tensor<2x5xi64>) {{
  ^bb0(%in: i64, %out: i64):
    %a = arith.addi %in, %c50 : i64
    linalg.yield %a : i64
  }} -> tensor<2x5xi64>
  %wrapped = linalg.generic {{indexing_maps = [#map, #map, #map, #map, #map], iterator_types = ["parallel", "parallel"]}} ins(%neg, %plus, %ids, %mask : tensor<2x5xi1>, tensor<2x5xi64>, tensor<2x5xi64>, tensor<2x5xi64>) outs(%e : tensor<2x5xi64>) {{
  ^bb0(%n: i1, %p: i64, %i: i64, %m: i64, %out: i64):
    %on = arith.cmpi ne, %m, %c0 : i64
    %w = arith.select %n, %p, %i : i64
    %k = arith.select %on, %w, %c0 : i64
    %lo = arith.maxsi %k, %c0 : i64
    %hi = arith.minsi %lo, %c49 : i64
    linalg.yield %hi : i64
  }} -> tensor<2x5xi64>
  %flat = tensor.collapse_shape %wrapped [[0, 1]] : tensor<2x5xi64> into tensor<10xi64>
  %o = tensor.empty() : tensor<10x16xf32>
  %emb = linalg.generic {{indexing_maps = [#map1, #map], iterator_types = ["parallel", "parallel"]}} ins(%flat : tensor<10xi64>) outs(%o : tensor<10x16xf32>){gather_region("%table", (50, 16))} -> tensor<10x16xf32>
  return %emb : tensor<10x16xf32>
}}
"""


def test_token_id_bounds_are_followed_through_index_arithmetic():
    """Issue 31: legacy-ONNX text models were fed id 1 everywhere (the mask rule) because the
    bound was not followed through the wrap of negative ids; a mask that only decides stays a mask."""
    ids, mask = signature(WRAPPED)
    assert ids.index_bound == 50 and mask.index_bound is None
    steps = list(generate([ids, mask], 2))
    assert all(len(np.unique(s[0])) > 1 and 0 <= s[0].min() and s[0].max() < 50 for s in steps)
    assert not np.array_equal(steps[0][0], steps[1][0])


def test_a_legacy_onnx_text_models_ids_reach_it_varied():
    """A hand-built ONNX Gather + MatMul through the ONNX importer: the ids argument is bounded
    by the table's 50 rows, and the generated ids differ along the sequence and across steps."""
    pytest.importorskip("onnx")
    from onnx import TensorProto, helper, numpy_helper

    from opscope.importers.onnx_model import import_onnx

    rng = np.random.default_rng(0)
    graph = helper.make_graph(
        [
            helper.make_node("Gather", ["E", "ids"], ["h"], name="/emb/Gather"),
            helper.make_node("MatMul", ["h", "W"], ["y"], name="/proj/MatMul"),
        ],
        "g",
        [helper.make_tensor_value_info("ids", TensorProto.INT64, [2, 5])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 5, 8])],
        [
            numpy_helper.from_array(rng.standard_normal((50, 16)).astype(np.float32), "E"),
            numpy_helper.from_array(rng.standard_normal((16, 8)).astype(np.float32), "W"),
        ],
    )
    (ids,) = arguments(import_onnx(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])))
    assert ids.index_bound == 50
    (first,), (second,) = generate([ids], 2)
    assert len(np.unique(first)) > 1 and not np.array_equal(first, second)


def test_out_of_range_ids_are_refused_naming_the_argument():
    args = signature()
    (step,) = generate(args, 1)
    for bad in (50, -51):
        step[0][1, 3] = bad
        with pytest.raises(OpscopeError) as e:
            check_steps([step], args, 1)
        assert one_line(e) == (
            f"inputs: step 0: argument 0 (tensor<2x8xi64>) indexes a table of 50 rows (the vocabulary) but "
            f"holds id {bad}: give ids in [0, 50) (this model's tokenizer, or --text with it)"
        )
    step[0][1, 3] = -50  # counted from the end, as ONNX's Gather takes it
    assert len(check_steps([step], args, 1)) == 1


def test_float_arguments_have_no_bound():
    args = signature(transformer_module(1, 16, 8))
    assert args[0].is_float and all(a.index_bound is None for a in args)
    assert [(a.shape, a.dtype) for a in args] == function_args(parse_module(transformer_module(1, 16, 8)))


def test_dynamic_dim_names_the_argument_and_the_fix():
    with pytest.raises(OpscopeError) as e:
        signature(DYNAMIC)
    assert one_line(e).startswith(
        "argument 0 (tensor<?x8xf32>) has a dynamic dim (0): drivers feed static shapes; "
        "export the model with static shapes"
    )


def test_a_scalar_argument_names_the_export_flag_fix():
    """A Python flag passed at export (`use_cache=False` as a keyword) reaches the module as a scalar i1."""
    text = "func.func @main(%x: tensor<2x8xf32>, %flag: i1) -> tensor<2x8xf32> { return %x : tensor<2x8xf32> }"
    with pytest.raises(OpscopeError) as e:
        function_args(parse_module(text))
    assert one_line(e).startswith("argument 1 has type i1, not a tensor: opscope feeds tensors only") and (
        "set it on the model's config instead" in str(e.value)
    )


def test_generated_ids_masks_and_floats():
    args = signature()
    steps = list(generate(args, 3))
    for ids, mask, types in steps:
        assert ids.dtype == np.int64 and ids.min() >= 0 and ids.max() < 50
        assert types.min() >= 0 and types.max() < 2
        assert np.array_equal(mask, np.ones((2, 8), np.int64))
    assert not np.array_equal(steps[0][0], steps[1][0])  # fresh ids every step
    again = list(generate(args, 3))
    assert all(np.array_equal(a, b) for s, t in zip(steps, again) for a, b in zip(s, t))  # seeded


def test_generated_floats_are_the_reference_drivers():
    """Argument 0 a fresh N(0,1) batch per step, the others fixed N(0, 1/fan-in), drawn from
    Philox(0) weights first (what `profile` fed before signatures, so recordings are unchanged)."""
    args = signature(transformer_module(1, 16, 8))
    steps = list(generate(args, 2))
    rng = np.random.Generator(np.random.Philox(0))
    fixed = [(rng.standard_normal(a.shape) / np.sqrt(a.shape[-2])).astype(np.float32) for a in args[1:]]
    for step in steps:
        assert np.array_equal(step[0], rng.standard_normal(args[0].shape).astype(np.float32))
        assert all(np.array_equal(x, w) for x, w in zip(step[1:], fixed))


def test_input_files_reused_or_per_step(tmp_path):
    args = signature()
    ids = np.arange(16, dtype=np.int64).reshape(2, 8)
    mask = np.ones((2, 8), np.int64)
    types = np.zeros((2, 8), np.int64)
    np.savez(tmp_path / "one.npz", ids, mask, types)  # arr_0, arr_1, arr_2: one batch, reused
    steps = read_files([tmp_path / "one.npz"], args, 3)
    assert len(steps) == 3 and all(np.array_equal(s[0], ids) for s in steps)
    stacked = np.stack([ids, ids + 1])
    np.savez(tmp_path / "two.npz", arg1=mask, arg0=stacked, arg2=types)  # a leading axis of 2 steps
    steps = read_files([tmp_path / "two.npz"], args, 2)
    assert np.array_equal(steps[1][0], ids + 1) and np.array_equal(steps[1][1], mask)
    for i, x in enumerate((ids, mask, types)):
        np.save(tmp_path / f"a{i}.npy", x)
    steps = read_files([tmp_path / f"a{i}.npy" for i in range(3)], args, 2)
    assert np.array_equal(steps[0][2], types)


def test_safetensors_inputs(tmp_path):
    from safetensors.numpy import save_file

    args = signature()
    arrays = {
        "arg0": np.full((2, 8), 3, np.int64),
        "arg1": np.ones((2, 8), np.int64),
        "arg2": np.zeros((2, 8), np.int64),
    }
    save_file(arrays, str(tmp_path / "in.safetensors"))
    steps = read_files([tmp_path / "in.safetensors"], args, 1)
    assert all(np.array_equal(a, b) for a, b in zip(steps[0], arrays.values()))


@pytest.mark.parametrize(
    "arrays, want",
    [
        (
            {"arg0": np.zeros((2, 8), np.int32), "arg1": np.ones((2, 8), np.int64), "arg2": np.zeros((2, 8), np.int64)},
            "argument 0 (tensor<2x8xi64>) takes int64, got int32 (save it as int64)",
        ),
        (
            {"arg0": np.zeros((2, 9), np.int64), "arg1": np.ones((2, 8), np.int64), "arg2": np.zeros((2, 8), np.int64)},
            "argument 0 (tensor<2x8xi64>) takes shape [2, 8], got [2, 9]",
        ),
        ({"arg0": np.zeros((2, 8), np.int64)}, "1 arrays for a model of 3 arguments"),
        ({"input_ids": np.zeros((2, 8), np.int64)}, "name the arrays arg0, arg1, ... in argument order"),
        (
            {
                "arg0": np.zeros((2, 2, 8), np.int64),
                "arg1": np.ones((3, 2, 8), np.int64),
                "arg2": np.zeros((2, 8), np.int64),
            },
            "arguments hold different numbers of steps ([2, 3])",
        ),
        (
            {
                "arg0": np.zeros((2, 2, 8), np.int64),
                "arg1": np.ones((2, 8), np.int64),
                "arg2": np.zeros((2, 8), np.int64),
            },
            "holds 2 steps, 4 asked for (pass --steps 2)",
        ),
    ],
)
def test_bad_input_files_are_one_line(tmp_path, arrays, want):
    np.savez(tmp_path / "in.npz", **arrays)
    with pytest.raises(OpscopeError) as e:
        read_files([tmp_path / "in.npz"], signature(), 4)
    assert want in one_line(e) and str(tmp_path / "in.npz") in str(e.value)


@pytest.mark.parametrize(
    "name, content, want",
    [
        ("in.txt", b"", "inputs are .npz, .safetensors, .npy files"),
        ("in.npz", b"not a zip", "not a readable .npz file"),
        ("in.npy", b"nope", "not a readable .npy file"),
    ],
)
def test_unreadable_input_files(tmp_path, name, content, want):
    (tmp_path / name).write_bytes(content)
    with pytest.raises(OpscopeError) as e:
        read_files([tmp_path / name], signature(), 1)
    assert want in one_line(e)


def test_given_steps_are_checked():
    args = signature(transformer_module(1, 16, 8))
    good = list(generate(args, 2))
    assert len(check_steps(iter(good), args, 2)) == 2
    with pytest.raises(OpscopeError, match=r"inputs: 2 steps of inputs, 3 asked for \(pass --steps 2\)"):
        check_steps(iter(good), args, 3)
    with pytest.raises(OpscopeError, match="step 0 has 1 arrays, the model takes"):
        check_steps([[good[0][0]]], args, 1)


class WordTokenizer:
    """A tokenizer with the Hugging Face call signature: words -> ids (test double)."""

    def __init__(self, vocab: int):
        self.vocab = vocab

    def __len__(self) -> int:
        return self.vocab

    def __call__(self, texts, padding, truncation, max_length, return_tensors):
        ids = np.zeros((len(texts), max_length), np.int64)
        mask = np.zeros((len(texts), max_length), np.int64)
        for i, t in enumerate(texts):
            words = [1 + (sum(map(ord, w)) % (self.vocab - 1)) for w in t.split()][:max_length]
            ids[i, : len(words)] = words
            mask[i, : len(words)] = 1
        return {"input_ids": ids, "attention_mask": mask}


def test_text_is_tokenized_into_ids_and_mask(tmp_path):
    path = tmp_path / "text.txt"
    path.write_text("the cat sat\n\non the mat today\nit was warm\n")
    sentences = read_sentences(path)
    assert sentences == ["the cat sat", "on the mat today", "it was warm"]
    steps = tokenize(sentences, WordTokenizer(50), signature(), 2)
    ids, mask, types = steps[0]
    assert mask[0].tolist() == [1, 1, 1, 0, 0, 0, 0, 0] and mask[1].sum() == 4
    assert ids.max() < 50 and not types.any()
    assert steps[1][1][0].sum() == 3 and steps[1][1][1].sum() == 3  # sentences 3 and 1 again (cycled)


def test_text_errors_are_one_line(tmp_path):
    with pytest.raises(OpscopeError) as e:
        tokenize(["a b"], WordTokenizer(30522), signature(), 1)
    assert one_line(e).endswith(
        "the tokenizer's vocabulary (30522) exceeds the model's embedding (50 rows): not this model's tokenizer"
    )
    with pytest.raises(OpscopeError, match="no \\[batch, seq\\] token-id argument"):
        tokenize(["a b"], WordTokenizer(10), signature(transformer_module(1, 16, 8)), 1)
    (tmp_path / "empty.txt").write_text("\n \n")
    with pytest.raises(OpscopeError, match="no text"):
        read_sentences(tmp_path / "empty.txt")


def test_minilm_tokenizer_feeds_the_zoo_model_text(tmp_path):
    """The zoo's MiniLM brings its tokenizer: --text works without --tokenizer; the ids are
    the tokenizer's own (CLS first), masks follow the sentence lengths."""
    pytest.importorskip("transformers")
    from opscope.models.huggingface import minilm_tokenizer

    tok = minilm_tokenizer()
    args = [Argument(0, (2, 12), "i64", 30522), Argument(1, (2, 12), "i64", None)]
    ids, mask = tokenize(["A short one.", "Sentences of the Python docs are text too."], tok, args, 1)[0]
    assert ids[0, 0] == tok.cls_token_id and mask[0].sum() < mask[1].sum()


@pytest.fixture(scope="module")
def embedding_file(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("emb") / "emb.mlir"
    path.write_text(EMBEDDING)
    return path


def test_profile_generates_token_ids_for_an_integer_model(embedding_file, tmp_path):
    run = opscope.profile(embedding_file, steps=2, out=tmp_path / "run")
    assert run.parity == 0.0 and len(run.manifest.sites) == 1
    assert opscope.read_sketches(run)["dist"].unique().to_list() == ["synthetic"]
    assert not run.report.notes and not (tmp_path / "run" / "notes.json").exists()  # varied ids: nothing to say


def test_profile_reads_input_files(embedding_file, tmp_path):
    ids = (np.arange(16).reshape(2, 8) % 50).astype(np.int64)  # one batch of ids, reused
    masks = np.stack([np.ones((2, 8)), np.zeros((2, 8))]).astype(np.int64)  # step 1 masks every token
    np.savez(tmp_path / "batch.npz", arg0=ids, arg1=masks, arg2=np.zeros((2, 8), np.int64))
    run = opscope.profile(embedding_file, steps=2, out=tmp_path / "run", inputs=tmp_path / "batch.npz")
    frame = opscope.read_sketches(run)
    assert frame["dist"].unique().to_list() == ["batch.npz"]
    # lhs = (table[id] + type_table[type]) * mask = (0.5 + 0.25) * mask
    lhs_max = frame.filter((frame["role"] == "lhs") & (frame["stat"] == "max")).sort("step")["value"].to_list()
    assert lhs_max == [0.75, 0.0]
    # the one batch of ids reused at both steps is said first, and again when the run is re-mined
    said = "inputs: argument 0 (tensor<2x8xi64>) (token ids) is identical at all 2 steps"
    assert [n for n in run.report.notes if n.startswith("inputs:")] == [
        said + ": cross-step and reuse findings describe one input repeated"
    ]
    assert render(run.report, "findings").startswith(f"note: {said}")
    assert any(n.startswith(said) for n in opscope.mine(tmp_path / "run").notes)


def test_degenerate_inputs_are_named():
    """Issue 31: ids the same at every position (legacy ONNX fed 1 everywhere), activations constant
    along the sequence, a data argument repeated at every step; a mask of ones is no finding."""
    ids, mask, types = signature()
    steps = [[np.full((2, 8), 7, np.int64), np.ones((2, 8), np.int64), np.zeros((2, 8), np.int64)] for _ in range(2)]
    steps[1][0] = np.full((2, 8), 9, np.int64)  # changes between steps, constant along each sequence
    (note,) = opscope.drive.inputs.degenerate_notes([ids, mask, types], steps)
    assert note.startswith("inputs: argument 0 (tensor<2x8xi64>) (token ids) holds the same value at every position")
    args = signature(transformer_module(1, 16, 8))
    x = np.repeat(np.random.default_rng(0).standard_normal((1, 16)).astype(np.float32), 8, axis=0)
    rest = [np.ones(a.shape, np.float32) for a in args[1:]]
    notes = opscope.drive.inputs.degenerate_notes(args, [[x, *rest], [x, *rest]])
    assert len(notes) == 1 + 1 and "(activations) holds the same value at every position" in notes[0]
    assert "(activations) is identical at all 2 steps" in notes[1]  # the fixed weights are not judged


def test_cli_bad_inputs_fail_before_compiling(embedding_file, tmp_path):
    """A wrong dtype in --inputs is one line naming the argument, before any compile (the
    compile cache stays empty)."""
    np.savez(
        tmp_path / "bad.npz",
        arg0=np.zeros((2, 8), np.float32),
        arg1=np.ones((2, 8), np.int64),
        arg2=np.zeros((2, 8), np.int64),
    )
    cache = tmp_path / "cache"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "opscope",
            "profile",
            str(embedding_file),
            "--inputs",
            str(tmp_path / "bad.npz"),
            "--out",
            str(tmp_path / "run"),
        ],
        capture_output=True,
        text=True,
        env={**__import__("os").environ, "OPSCOPE_CACHE_DIR": str(cache)},
    )
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert proc.stderr.strip() == (
        f"opscope: error: {tmp_path / 'bad.npz'}: argument 0 (tensor<2x8xi64>) takes "
        "int64, got float32 (save it as int64)"
    )
    assert not cache.exists()
    text = subprocess.run(
        [sys.executable, "-m", "opscope", "profile", str(embedding_file), "--text", str(embedding_file)],
        capture_output=True,
        text=True,
    )
    assert text.returncode == 1 and text.stderr.strip().endswith(
        "text needs a tokenizer: pass --tokenizer DIR (a local Hugging Face tokenizer folder)"
    )
    tok = subprocess.run(
        [
            sys.executable,
            "-m",
            "opscope",
            "profile",
            str(embedding_file),
            "--text",
            str(embedding_file),
            "--tokenizer",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
    )
    assert tok.returncode == 1 and f"no tokenizer at {tmp_path}" in tok.stderr and len(tok.stderr.splitlines()) == 1


def test_cli_dynamic_dims_fail_before_compiling(tmp_path):
    """A model with a dynamic dim: one line naming the argument, the dim and the fix, before any compile."""
    path = tmp_path / "dyn.mlir"
    path.write_text(DYNAMIC)
    cache = tmp_path / "cache"
    proc = subprocess.run(
        [sys.executable, "-m", "opscope", "profile", str(path), "--out", str(tmp_path / "run")],
        capture_output=True,
        text=True,
        env={**__import__("os").environ, "OPSCOPE_CACHE_DIR": str(cache)},
    )
    assert proc.returncode == 1 and len(proc.stderr.splitlines()) == 1 and "Traceback" not in proc.stderr
    assert proc.stderr.startswith(
        "opscope: error: argument 0 (tensor<?x8xf32>) has a dynamic dim (0): drivers feed "
        "static shapes; export the model with static shapes"
    )
    assert not cache.exists()
