"""Model size against memory and time: `opscope profile --steps 2` on random-init Llama-architecture
models from ~135 M to 1.1 B parameters.

Each model is built from a transformers `LlamaConfig` (random init, f32 or `--dtype bf16`, eager attention),
exported with `torch.export` (ids and attention mask, 1 x 32 tokens, logits out) to a `.pt2`
in a temporary folder by a child process, then profiled by the `opscope` CLI in another child
under `/usr/bin/time -v` with every site tapped (and, with `--commands`, `opscope whatif
--fakequant w8a8` and `opscope parity --inject` on it too). The weights go to a parameter file (the
default from 128 MiB on). Printed per model and command: parameters, weight bytes, peak RSS (the
largest process of the run: the profile or the import and compile children it starts), peak
RSS over weight bytes, wall time, and the compile and step times the profile reports
(import, parameter writing and mining are the rest of the wall time). Nothing asserts on time.

    python bench/bench_scale.py                        # 135m, 500m, 1.1b: ~15 min and 10 GB of disk on 2 cores
    python bench/bench_scale.py --models 135m,224m     # a subset
    python bench/bench_scale.py --inline               # the weights inside the module (the old route)
    python bench/bench_scale.py --dtype bf16           # the models in bf16 (a bf16 checkpoint), profiled as such
    python bench/bench_scale.py --models 500m --commands profile,whatif,parity   # the variants' memory too
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
DTYPES = {"f32": "float32", "bf16": "bfloat16"}  # the exported model's own dtype (a bf16 checkpoint: bf16)
# what each measured command runs on the model (profile into a run folder of its own)
COMMANDS = {"profile": ["--steps", "2"], "whatif": ["--fakequant", "w8a8"], "parity": ["--inject"]}

EXPORT = r"""
import sys, torch, transformers
from transformers import LlamaConfig
d, n, h, kv, inter, vocab, tied = (int(x) for x in sys.argv[2:9])
dtype = getattr(torch, sys.argv[10])
cfg = LlamaConfig(hidden_size=d, num_hidden_layers=n, num_attention_heads=h, num_key_value_heads=kv,
                  intermediate_size=inter, vocab_size=vocab, tie_word_embeddings=bool(tied),
                  max_position_embeddings=512, use_cache=False)
torch.manual_seed(0)
m = transformers.AutoModelForCausalLM.from_config(cfg, attn_implementation="eager").to(dtype).eval()
ids = torch.randint(0, vocab, (1, int(sys.argv[9]))); mask = torch.ones_like(ids)
class Logits(torch.nn.Module):
    def __init__(self, m): super().__init__(); self.m = m
    def forward(self, ids, mask): return self.m(input_ids=ids, attention_mask=mask, use_cache=False).logits
with torch.no_grad():
    ep = torch.export.export(Logits(m), (ids, mask))
torch.export.save(ep, sys.argv[1])
print(sum(p.numel() for p in m.parameters()))
"""


def export(name: str, folder: Path, dtype: str) -> tuple[Path, int]:
    """The model's `.pt2` in `folder`, its weights in `dtype`, and its parameter count."""
    path = folder / f"llama-{name}.pt2"
    args = [str(int(v)) for v in MODELS[name]]
    proc = subprocess.run(
        [sys.executable, "-c", EXPORT, str(path), *args, str(TOKENS), DTYPES[dtype]],
        capture_output=True,
        text=True,
        check=False,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"exporting {name} failed: {proc.stderr.strip().splitlines()[-1]}")
    return path, int(proc.stdout.strip().splitlines()[-1])


def measured(command: str, path: Path, out: Path, inline: bool) -> dict:
    """`opscope COMMAND` (`COMMANDS`) on `path` under /usr/bin/time -v: peak RSS, wall, and for a
    profile its compile and step times."""
    argv = ["/usr/bin/time", "-v", sys.executable, "-m", "opscope", command, str(path), *COMMANDS[command]]
    argv += (["--out", str(out)] if command == "profile" else []) + (["--no-parameters"] if inline else [])
    proc = subprocess.run(argv, capture_output=True, text=True, check=False)
    text = proc.stdout + proc.stderr
    if proc.returncode != 0:
        last = [ln for ln in proc.stderr.splitlines() if "error" in ln.lower()] or proc.stderr.splitlines()[-1:]
        raise RuntimeError(f"{command} of {path.name} failed: {last[-1] if last else proc.returncode}")
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
    parser.add_argument("--dtype", choices=DTYPES, default="f32", help="the exported model's dtype (default f32)")
    parser.add_argument(
        "--commands", default="profile", help=f"comma-separated, of {', '.join(COMMANDS)} (default profile)"
    )
    args = parser.parse_args()
    names = [n.strip() for n in args.models.split(",") if n.strip()]
    commands = [c.strip() for c in args.commands.split(",") if c.strip()]
    unknown = [n for n in names if n not in MODELS] + [c for c in commands if c not in COMMANDS]
    if unknown:
        raise ValueError(
            f"unknown model or command {unknown[0]}: models {', '.join(MODELS)}; commands {', '.join(COMMANDS)}"
        )
    header(f"bench_scale: opscope {', '.join(commands)} against model size ({args.dtype})", sys.argv[1:])
    rows = []
    for name in names:
        with tempfile.TemporaryDirectory(prefix="opscope-scale-") as tmp:
            path, params = export(name, Path(tmp), args.dtype)
            weights = params * (4 if args.dtype == "f32" else 2)
            for command in commands:
                r = measured(command, path, Path(tmp) / "run", args.inline)
                rows.append(
                    [
                        name,
                        command,
                        f"{params / 1e6:,.0f} M",
                        f"{weights / 1e9:.2f} GB",
                        f"{r['rss'] / 1e9:.2f} GB",
                        f"{r['rss'] / weights:.2f}x",
                        f"{r['wall']:.0f} s",
                        _seconds(r["compile"]),
                        _seconds(r["steps"]),
                        r["rows"],
                    ]
                )
                print(table(rows[-1:], HEAD), flush=True)
    print()
    print(table(rows, HEAD))
    return 0


def _seconds(x: float) -> str:
    """`x` seconds, or a dash where the command reports none (whatif, parity)."""
    return "-" if x != x else f"{x:.1f} s"


HEAD = ["model", "command", "parameters", "weights", "peak RSS", "RSS/weights", "wall", "compile", "2 steps", "rows"]

if __name__ == "__main__":
    run_main(main, "bench_scale")
