"""Model size against memory and time: `opscope profile --steps 2` on random-init Llama-architecture
models from ~135 M to 1.1 B parameters.

Each model is built from a transformers `LlamaConfig` (random init, f32, eager attention),
exported with `torch.export` (ids and attention mask, 1 x 32 tokens, logits out) to a `.pt2`
in a temporary folder by a child process, then profiled by the `opscope` CLI in another child
under `/usr/bin/time -v` with every site tapped. The weights go to a parameter file (the
default from 128 MiB on). Printed per model: parameters, f32 weight bytes, peak RSS (the
largest process of the run: the profile or the import and compile children it starts), peak
RSS over weight bytes, wall time, and the compile and step times the profile reports
(import, parameter writing and mining are the rest of the wall time). Nothing asserts on time.

    python bench/bench_scale.py                        # 135m, 500m, 1.1b: ~15 min and 10 GB of disk on 2 cores
    python bench/bench_scale.py --models 135m,224m     # a subset
    python bench/bench_scale.py --inline               # the weights inside the module (the old route)
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import header, run_main, table  # noqa: E402

# name -> LlamaConfig fields (hidden, layers, heads, kv heads, intermediate, vocab, tied embeddings)
MODELS: dict[str, tuple[int, int, int, int, int, int, bool]] = {
    "135m": (576, 30, 9, 3, 1536, 49152, True),  # SmolLM2-135M's shape
    "224m": (768, 24, 12, 12, 2304, 49152, True),  # the 222 M model of issue 30's first table
    "500m": (1280, 22, 20, 4, 4096, 32000, False),
    "1.1b": (2048, 22, 32, 4, 5632, 32000, False),  # TinyLlama-1.1B's shape
}
TOKENS = 32

EXPORT = r"""
import sys, torch, transformers
from transformers import LlamaConfig
d, n, h, kv, inter, vocab, tied = (int(x) for x in sys.argv[2:9])
cfg = LlamaConfig(hidden_size=d, num_hidden_layers=n, num_attention_heads=h, num_key_value_heads=kv,
                  intermediate_size=inter, vocab_size=vocab, tie_word_embeddings=bool(tied),
                  max_position_embeddings=512, use_cache=False)
torch.manual_seed(0)
m = transformers.AutoModelForCausalLM.from_config(cfg, attn_implementation="eager").eval()
ids = torch.randint(0, vocab, (1, int(sys.argv[9]))); mask = torch.ones_like(ids)
class Logits(torch.nn.Module):
    def __init__(self, m): super().__init__(); self.m = m
    def forward(self, ids, mask): return self.m(input_ids=ids, attention_mask=mask, use_cache=False).logits
with torch.no_grad():
    ep = torch.export.export(Logits(m), (ids, mask))
torch.export.save(ep, sys.argv[1])
print(sum(p.numel() for p in m.parameters()))
"""


def export(name: str, folder: Path) -> tuple[Path, int]:
    """The model's `.pt2` in `folder` and its parameter count."""
    path = folder / f"llama-{name}.pt2"
    args = [str(int(v)) for v in MODELS[name]]
    proc = subprocess.run(
        [sys.executable, "-c", EXPORT, str(path), *args, str(TOKENS)], capture_output=True, text=True, check=False
    )
    if proc.returncode != 0:
        raise RuntimeError(f"exporting {name} failed: {proc.stderr.strip().splitlines()[-1]}")
    return path, int(proc.stdout.strip().splitlines()[-1])


def profile(path: Path, out: Path, inline: bool) -> dict:
    """`opscope profile --steps 2` on `path` under /usr/bin/time -v: peak RSS, wall, compile and step times."""
    argv = ["/usr/bin/time", "-v", sys.executable, "-m", "opscope", "profile", str(path), "--steps", "2"]
    argv += ["--out", str(out)] + (["--no-parameters"] if inline else [])
    proc = subprocess.run(argv, capture_output=True, text=True, check=False)
    text = proc.stdout + proc.stderr
    if proc.returncode != 0:
        last = [ln for ln in proc.stderr.splitlines() if "error" in ln.lower()] or proc.stderr.splitlines()[-1:]
        raise RuntimeError(f"profiling {path.name} failed: {last[-1] if last else proc.returncode}")
    rss = int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", text).group(1)) * 1024
    wall = re.search(r"Elapsed \(wall clock\) time \(h:mm:ss or m:ss\): ([\d:.]+)", text).group(1)
    seconds = sum(float(p) * 60**i for i, p in enumerate(reversed(wall.split(":"))))
    compiled = re.search(r"compile ([\d.]+) s", text)
    steps = re.search(r"2 steps in ([\d.]+) s", text)
    rows = re.search(r"sketches\.csv \(([\d,]+) rows\)", text)
    return {
        "rss": rss,
        "wall": seconds,
        "compile": float(compiled.group(1)) if compiled else float("nan"),
        "steps": float(steps.group(1)) if steps else float("nan"),
        "rows": rows.group(1) if rows else "?",
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="135m,500m,1.1b", help=f"comma-separated, of {', '.join(MODELS)}")
    parser.add_argument("--inline", action="store_true", help="keep the weights inside the module (--no-parameters)")
    args = parser.parse_args()
    names = [n.strip() for n in args.models.split(",") if n.strip()]
    unknown = [n for n in names if n not in MODELS]
    if unknown:
        raise ValueError(f"unknown model {unknown[0]}: choose from {', '.join(MODELS)}")
    header("bench_scale: opscope profile --steps 2 against model size", sys.argv[1:])
    rows = []
    for name in names:
        with tempfile.TemporaryDirectory(prefix="opscope-scale-") as tmp:
            path, params = export(name, Path(tmp))
            r = profile(path, Path(tmp) / "run", args.inline)
        weights = params * 4
        rows.append(
            [
                name,
                f"{params / 1e6:,.0f} M",
                f"{weights / 1e9:.2f} GB",
                f"{r['rss'] / 1e9:.2f} GB",
                f"{r['rss'] / weights:.2f}x",
                f"{r['wall']:.0f} s",
                f"{r['compile']:.1f} s",
                f"{r['steps']:.1f} s",
                r["rows"],
            ]
        )
        print(table(rows[-1:], HEAD), flush=True)
    print()
    print(table(rows, HEAD))
    return 0


HEAD = ["model", "parameters", "f32 weights", "peak RSS", "RSS/weights", "wall", "compile", "2 steps", "rows"]

if __name__ == "__main__":
    run_main(main, "bench_scale")
