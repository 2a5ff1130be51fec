"""Specialized builds of a zoo model side by side: ms per call against the f32 build, and quality.

One run: the model's f32 untapped build, each single technique on every projection (W8A16,
W8A8 per token, W8A8 with SmoothQuant α 0.5, W8A8 with a static scale after SmoothQuant α 0.8)
and, given, the module `opscope plan RUN --apply --quality Q -o FILE` wrote; quality on the
model's held-out evaluation set (`opscope.act.evalset`: MiniLM's 64 sentences, SmolLM2's 2,000
predicted tokens), time per call by `iree-benchmark-module` in interleaved rounds on the
evaluation set's first batch. The SmoothQuant maxima come from a profile of the sentences that
follow the evaluation set's in the corpus (held out from it). Nothing asserts on time.

    python bench/bench_specialize.py                                   # MiniLM
    python bench/bench_specialize.py --model smollm2 --rounds 3
    python bench/bench_specialize.py --specialized minilm-spec.mlir    # + the plan's build
    python bench/bench_specialize.py --quick                           # f32 and W8A8 only, one round
    python bench/bench_specialize.py --model smollm2 --pipeline @applied.txt --no-techniques  # f32 and a pipeline
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import header, run_main, table  # noqa: E402

CALIBRATION_SENTENCES = 32


def variants(calibration: str, quick: bool) -> dict[str, str]:
    """Label -> pipeline of every single technique measured."""
    if quick:
        return {"W8A8": "quantize-weight{activations=true}"}
    cal = f'calibration="{calibration}"'
    return {
        "W8A16": "quantize-weight",
        "W8A8": "quantize-weight{activations=true}",
        "W8A8 SQ 0.5": f"quantize-weight{{activations=true smooth=0.5 {cal}}}",
        "W8A8 static SQ 0.8": f"quantize-weight{{activations=true static=true smooth=0.8 {cal}}}",
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="minilm", help="a zoo model with held-out data (minilm, smollm2)")
    ap.add_argument("--specialized", help="a module `opscope plan --apply -o` wrote, measured beside the rest")
    ap.add_argument("--rounds", type=int, default=5, help="interleaved timing rounds (default 5)")
    ap.add_argument("--quick", action="store_true", help="f32 and W8A8 only, one round")
    ap.add_argument(
        "--pipeline", help="a rewrite pipeline (the plan's `applied:` line; @FILE reads it) measured beside the rest"
    )
    ap.add_argument(
        "--no-techniques", action="store_true", help="the single techniques left out: f32 and what is given"
    )
    args = ap.parse_args(argv)
    given = args.pipeline
    if given and given.startswith("@"):
        given = Path(given[1:]).read_text().strip()
    header(f"specialized builds of {args.model}: time per call and quality", argv)

    import opscope
    from opscope.act.evalset import eval_set
    from opscope.act.quality import COUNTS, compare, headline, own
    from opscope.act.whatif import Bench
    from opscope.ir.arguments import function_op, symbol_name
    from opscope.ir.loading import new_context, parse_module
    from opscope.models.corpus import sentences
    from opscope.pipeline.textual import run_pipeline
    from opscope.run.call_timing import time_calls
    from opscope.run.compile import compile_module
    from opscope.run.runtime import load

    ev = eval_set(args.model)
    bench = Bench(ev)
    with tempfile.TemporaryDirectory(prefix="opscope-bench-specialize-") as tmp:
        chosen = {}
        if not args.no_techniques:
            text = sentences(ev.examples + CALIBRATION_SENTENCES)[ev.examples :]
            batch = len(ev.batches[0][0])
            run = opscope.profile(args.model, text=text, steps=len(text) // batch, out=Path(tmp) / "run")
            chosen = variants(str(opscope.write_calibration(run.out_dir)), args.quick)
        if given:
            chosen["pipeline"] = given
        compiled = {"f32": compile_module(ev.module, "llvm-cpu")}  # each build compiled once, for both measures
        metrics = {"f32": own(bench.reference)}  # its own perplexity, accuracy (agreements are against it)
        for label, pipeline in [*chosen.items(), *([("plan --apply", "")] if args.specialized else [])]:
            module = parse_module(Path(args.specialized).read_text() if not pipeline else ev.module, new_context())
            if pipeline:
                run_pipeline(module, pipeline)
            compiled[label] = compile_module(module, "llvm-cpu")
            del module  # one parsed model at a time
            loaded = load(compiled[label])
            metrics[label] = compare(bench.reference, bench.summarize(loaded, label))
            loaded.release()
        function = symbol_name(function_op(parse_module(ev.module, new_context())))
        times = time_calls(list(compiled.values()), function, ev.batches[0], rounds=1 if args.quick else args.rounds)
    base = times[0]
    names = sorted({k for m in metrics.values() for k in m if k not in COUNTS})
    rows = []
    for label, t in zip(compiled, times):
        rows.append(
            [
                label,
                f"{t.min_us / 1000:.2f}",
                f"{t.median_us / 1000:.2f}",
                f"{base.min_us / t.min_us:.2f}×",
                f"{base.median_us / t.median_us:.2f}×",
                *(f"{metrics[label][k]:.4f}" if k in metrics[label] else "-" for k in names),
            ]
        )
    print(f"# {ev.name}: {ev.data}; headline {headline(ev.task)}; time on the first batch")
    print(table(rows, ["build", "ms (min)", "ms (median)", "speedup", "at median", *names]))
    return 0


if __name__ == "__main__":
    run_main(main, "bench_specialize")
