"""Forward time of two opscope revisions' injected modules, side by side in one process.

Run-to-run noise on a shared machine (the same variant measured 1.36x and 1.47x base in two
`bench_overhead.py` runs an hour apart) hides changes to the lowering smaller than ~0.2x.
This script builds the base module and each revision's injected module (each in a
subprocess that imports opscope from that revision's source tree: a `git worktree` of the
revision, or `.` for the working tree as it is), loads all of them in this process, uploads
the inputs once (device-resident, so no variant pays a host copy) and times them
round-robin: the ratios are paired per round.

    python bench/bench_revisions.py HEAD~1 .                       # the uncommitted change
    python bench/bench_revisions.py c4e7708 d6912cc --models transformer --set lean
    python bench/bench_revisions.py . . --quick                      # smoke run
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from common import REPO, header, interleaved, load_line, median, paired_ratio, table  # noqa: E402

# Model -> (`opscope.models.demo` builder, its arguments, with --quick): both the revisions' builds
# and this process's inputs are made from these.
MODELS = {
    "matmul": ("matmul_module", (512, 1024, 1024), (64, 128, 128)),
    "transformer": ("transformer_module", (8, 256, 128), (1, 32, 16)),
}

# Runs in a subprocess with one revision's tree first on sys.path: build one vmfb.
# `dialect/` and `passes/` sit beside `opscope/` in a tree and are installed as
# `opscope.dialect` and `opscope.passes`: the editable install would hand back the working
# tree's, so the tree's own are loaded first (and checked). Trees from before the rooms
# (issue 11) use the flat module paths.
_BUILD = """
import importlib.util, json, os, sys
tree, builder, dims, config, out = sys.argv[1:6]
sys.path.insert(0, tree)
import opscope
for sub in ("dialect", "passes"):
    spec = importlib.util.spec_from_file_location(
        f"opscope.{sub}", f"{tree}/{sub}/__init__.py", submodule_search_locations=[f"{tree}/{sub}"])
    mod = sys.modules[spec.name] = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
# Decide the layout by the tree's files, not by ImportError: a module the tree lacks would
# be found in the working tree through the editable install.
if os.path.isdir(os.path.join(tree, "opscope", "ir")):
    from opscope.ir.loading import new_context, parse_module
    from opscope.ir.stat_config import StatConfig
    from opscope.models import demo
    from opscope.run.compile import compile_module
    def inject(m, c):
        opscope.inject(m, c, target="llvm-cpu")
else:
    from opscope import demo
    from opscope.compile import compile_module
    from opscope.instrument import inject_matmul_stats
    from opscope.loading import new_context, parse_module
    from opscope.stat_config import StatConfig
    def inject(m, c):
        inject_matmul_stats(m, c, target="llvm-cpu")
assert sys.modules["opscope.dialect.lowering"].__file__.startswith(tree), "the tree's own lowering"
m = parse_module(getattr(demo, builder)(*json.loads(dims)), new_context())
if config != "base":
    inject(m, StatConfig() if config == "default" else StatConfig.lean())
open(out, "wb").write(compile_module(m, "llvm-cpu", use_cache=False).vmfb)
"""


def source_tree(rev: str, workdir: Path) -> Path:
    """The source tree of `rev`: the repository itself for '.', else a fresh git worktree."""
    if rev == ".":
        return REPO
    tree = workdir / f"tree-{len(list(workdir.iterdir()))}"
    try:
        done = subprocess.run(
            ["git", "-C", str(REPO), "worktree", "add", "--detach", "-f", str(tree), rev],
            capture_output=True,
            text=True,
            check=False,
        )
    except OSError as e:  # no git on this machine
        raise SystemExit(f"bench_revisions: cannot check out '{rev}': {e}") from None
    if done.returncode != 0:
        why = (done.stderr.strip().splitlines() or ["git worktree add failed"])[-1]
        raise SystemExit(f"bench_revisions: cannot check out '{rev}': {why}")
    return tree


def model_args(model: str, quick: bool) -> tuple[str, tuple[int, ...]]:
    """The `opscope.models.demo` builder of `model` and its arguments."""
    builder, full, small = MODELS[model]
    return builder, small if quick else full


def build(tree: Path, model: str, config: str, out: Path, quick: bool) -> Path:
    builder, dims = model_args(model, quick)
    done = subprocess.run(
        [sys.executable, "-c", _BUILD, str(tree), builder, json.dumps(dims), config, str(out)],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        tail = (done.stderr.strip().splitlines() or ["(no output)"])[-1]
        raise SystemExit(f"bench_revisions: building {model}/{config} from {tree} failed: {tail}")
    return out


def bench_model(model: str, config: str, trees: dict[str, Path], workdir: Path, repeats: int, quick: bool) -> None:
    import iree.runtime as rt

    from opscope.ir.arguments import function_args
    from opscope.ir.loading import new_context, parse_module
    from opscope.models import demo

    paths = {"base": build(REPO, model, "base", workdir / f"{model}-base.vmfb", quick)}
    for label, tree in trees.items():
        paths[label] = build(tree, model, config, workdir / f"{model}-{config}-{len(paths)}.vmfb", quick)
    cfg = rt.Config("local-task")
    fns = {}
    for label, path in paths.items():
        vm = rt.VmModule.copy_buffer(cfg.vm_instance, path.read_bytes())
        fns[label] = rt.SystemContext(config=cfg, vm_modules=[vm]).modules.module["main"]
    builder, dims = model_args(model, quick)
    shapes = [s for s, _ in function_args(parse_module(getattr(demo, builder)(*dims), new_context()))]
    inputs = [rt.asdevicearray(cfg.device, x) for x in demo.random_inputs(shapes, seed=0)]

    def run(fn):
        def call():
            res = fn(*inputs)
            for r in res if isinstance(res, (list, tuple)) else [res]:
                r.to_host()  # wait for the results, as a caller reading them would

        return call

    times = interleaved({label: run(fn) for label, fn in fns.items()}, repeats, warmup=2)
    rows = [
        [
            label,
            f"{median(t['total'] for t in times[label]) * 1e3:.2f}",
            f"{paired_ratio(times[label], times['base']):.2f}",
        ]
        for label in fns
    ]
    print(f"\n## {model}, {config} set, llvm-cpu, device-resident inputs; {repeats} interleaved rounds")
    print(table(rows, ["module", "median ms", "x base"]))
    sys.stdout.flush()


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("old", help="a git revision, or '.' for the working tree")
    p.add_argument("new", help="a git revision, or '.' for the working tree")
    p.add_argument("--models", default="matmul,transformer", help="comma list of: matmul, transformer")
    p.add_argument("--set", dest="config", choices=("default", "lean"), default="default", help="sketch set")
    p.add_argument("--repeats", type=int, default=None, help="timed rounds (default 15; --quick 3)")
    p.add_argument("--quick", action="store_true", help="tiny models, 3 rounds: a smoke run")
    args = p.parse_args(argv)
    repeats = args.repeats or (3 if args.quick else 15)
    header("opscope bench_revisions: injected forward time of two revisions, side by side", argv)
    with tempfile.TemporaryDirectory(prefix="opscope-revs-") as d:
        workdir = Path(d)
        (workdir / "trees").mkdir()
        trees = {
            f"old ({args.old})": source_tree(args.old, workdir / "trees"),
            f"new ({args.new})": source_tree(args.new, workdir / "trees"),
        }
        try:
            for model in [m.strip() for m in args.models.split(",") if m.strip()]:
                if model not in MODELS:
                    p.error(f"unknown model '{model}' (choose {', '.join(MODELS)})")
                bench_model(model, args.config, trees, workdir, repeats, args.quick)
        finally:
            for tree in trees.values():
                if tree != REPO:
                    subprocess.run(
                        ["git", "-C", str(REPO), "worktree", "remove", "--force", str(tree)],
                        capture_output=True,
                        check=False,
                    )
    print("\n# columns: x base = median over rounds of the module's time / base's time in the same round")
    print(f"# at the end: {load_line()}")


if __name__ == "__main__":
    main()
