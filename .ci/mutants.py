#!/usr/bin/env python3
"""A small mutation check over the numerics modules, run on demand (docs/testing.md).

Each mutant is a deliberate one-line bug: (file, the exact original text, the mutated text, the
tests that must catch it). For each, the script swaps the text in place, runs
`python -m pytest -q -x -p no:cacheprovider <tests>`, and puts the original back in a `finally`
(also on Ctrl-C or SIGTERM). A mutant is *killed* when pytest fails, *survived* when it passes.

    python .ci/mutants.py              # every mutant: a table, then exit status
    python .ci/mutants.py --list       # the mutants, nothing run
    python .ci/mutants.py --only NAME  # one mutant (repeatable)

Exit status: 1 when an original snippet does not occur exactly once in its file (the list has
rotted: fix the entry), 2 when the unmutated tests fail (nothing could be judged), 3 when a mutant
survived that is not marked `survives` (a gap: add a test, or state why it cannot be killed),
else 0. Standard library only; tests/test_mutants_list.py checks the snippets on every test run.
"""

from __future__ import annotations

import argparse
import re
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class Mutant:
    name: str
    file: str  # relative to the repository root
    original: str  # must occur exactly once in `file`
    mutated: str
    tests: tuple[str, ...]  # pytest paths or node ids
    select: str = ""  # a pytest -k expression (e.g. to leave out a slow test that cannot see the mutant)
    survives: str = ""  # why this mutant is expected to survive (an equivalent mutant); empty: must be killed


SKETCHES = ("tests/test_online_sketches.py",)
NOT_SLOW_TIMING = "not test_timing_joins_every_dispatch_with_its_static_cost"  # 25 s; it times a model

MUTANTS: tuple[Mutant, ...] = (
    # -- the seven of issue 29 -------------------------------------------------------------------------
    Mutant(
        "hll-bias-constant",
        "opscope/online/hll.py",
        "raw = 0.7213 / (1 + 1.079 / m)",
        "raw = 0.5 / (1 + 1.079 / m)",
        SKETCHES,
    ),
    Mutant(
        "dado-no-search",
        "opscope/probe/allocate.py",
        "for it in range(cfg.iters):",
        "for it in range(0):",
        ("tests/test_probe_layers.py",),
    ),
    Mutant(
        "memoize-fifo",
        "opscope/act/memoize.py",
        "                self.hits += 1\n                self._cache.move_to_end(key)\n",
        "                self.hits += 1\n",
        ("tests/test_memoize.py",),
    ),
    Mutant(
        "skip-zero-guard-constant-false",
        "passes/skip_zero_channels.py",
        "        if not guarded:\n            ok = arith.ConstantOp(ir.IntegerType.get_signless(1), 1, ip=ip).result",
        "        if True:\n            ok = arith.ConstantOp(ir.IntegerType.get_signless(1), 0, ip=ip).result",
        ("tests/test_skip_zero_channels.py",),
    ),
    Mutant(
        "skip-zero-guard-constant-true",
        "passes/skip_zero_channels.py",
        "        if not guarded:\n            ok = arith.ConstantOp(ir.IntegerType.get_signless(1), 1, ip=ip).result",
        "        if True:\n            ok = arith.ConstantOp(ir.IntegerType.get_signless(1), 1, ip=ip).result",
        ("tests/test_skip_zero_channels.py",),
    ),
    Mutant(
        "skip-zero-guard-never-holds",  # the check is built, but compares so it is false on any finite input
        "passes/skip_zero_channels.py",
        "arith.CmpFPredicate.OEQ, _max_abs(",
        "arith.CmpFPredicate.UNO, _max_abs(",
        ("tests/test_skip_zero_channels.py",),
    ),
    Mutant(
        "skip-zero-guard-false-runs-dense",
        "passes/skip_zero_channels.py",
        "ok = arith.ConstantOp(ir.IntegerType.get_signless(1), 1, ip=ip).result",
        "ok = arith.ConstantOp(ir.IntegerType.get_signless(1), 0, ip=ip).result",
        ("tests/test_skip_zero_channels.py",),
    ),
    Mutant(
        "reservoir-merge-equal-weights",
        "opscope/online/reservoir.py",
        "wa = self.seen - (len(a) - len(rest_a))  # seen elements of A not yet drawn\n"
        "            wb = other.seen - (len(b) - len(rest_b))",
        "wa = len(rest_a)  # seen elements of A not yet drawn\n            wb = len(rest_b)",
        SKETCHES,
    ),
    Mutant(
        "median-is-min",
        "opscope/act/timing.py",
        "    return sorted(times)[len(times) // 2]",
        "    return min(times)",
        ("tests/test_timing.py",),
        NOT_SLOW_TIMING,
    ),
    Mutant(
        "quantize-ties-to-even",
        "opscope/ir/fakequant.py",
        "codes = np.clip(np.sign(t) * np.floor(np.abs(t) + 0.5), -q, q)",
        "codes = np.clip(np.rint(t), -q, q)",
        ("tests/test_quantize_weight.py",),
    ),
    Mutant(
        "quantize-activation-ties-to-even",  # W8A8: the activation's codes, rounded on the device
        "passes/quantize_weight.py",
        "arith.maximumf(math.round(t), lo), hi))",
        "arith.maximumf(math.roundeven(t), lo), hi))",
        ("tests/test_quantize_weight.py",),
    ),
    # -- more over the same modules ---------------------------------------------------------------------
    Mutant(
        "hll-alpha-correction-dropped",
        "opscope/online/hll.py",
        "raw = 0.7213 / (1 + 1.079 / m)",
        "raw = 0.7213 / (1 + 0.0 / m)",
        SKETCHES,
    ),
    Mutant(
        "hll-linear-counting-threshold",
        "opscope/online/hll.py",
        "if raw <= 2.5 * m and zeros else raw",
        "if raw <= 0.5 * m and zeros else raw",
        SKETCHES,
    ),
    Mutant(
        "hll-merge-is-intersection",
        "opscope/online/hll.py",
        "np.maximum(self.registers, other.registers, out=self.registers)",
        "np.minimum(self.registers, other.registers, out=self.registers)",
        SKETCHES,
    ),
    Mutant(
        "reservoir-push-always-replaces",
        "opscope/online/reservoir.py",
        "j = splitmix64(self.seen) % (self.seen + 1)",
        "j = splitmix64(self.seen) % self.k",
        SKETCHES,
    ),
    Mutant(
        "fixed-quantiles-bin-upper-edge",
        "opscope/online/quantiles.py",
        "return self.lo + (i + 0.5) / self.nbins",
        "return self.lo + (i + 1.0) / self.nbins",
        SKETCHES,
    ),
    Mutant(
        "fixed-quantiles-rank-side",
        "opscope/online/quantiles.py",
        'target, side="left"))',
        'target, side="right"))',
        SKETCHES,
    ),
    Mutant(
        "site-merge-drops-other-values",
        "opscope/online/site.py",
        "        values.merge(self.values)\n        values.merge(other.values)\n",
        "        values.merge(self.values)\n",
        ("tests/test_live.py::test_report_quantiles_are_within_the_kll_rank_error_of_numpy",),
    ),
    Mutant(
        "greedy-ignores-bytes-saved",
        "opscope/probe/allocate.py",
        "np.maximum(err - cur_err, 0.0) / saves, np.inf)",
        "np.maximum(err - cur_err, 0.0) / 1.0, np.inf)",
        ("tests/test_probe_layers.py",),
    ),
    Mutant(
        "dado-accepts-infeasible",
        "opscope/probe/allocate.py",
        "feasible = np.flatnonzero((sizes <= budget) & (errs < best_err))",
        "feasible = np.flatnonzero(errs < best_err)",
        ("tests/test_probe_layers.py",),
    ),
    Mutant(
        "dado-refits-on-the-worst",
        "opscope/probe/allocate.py",
        'np.argsort(loss, kind="stable")[:elite]',
        'np.argsort(-loss, kind="stable")[:elite]',
        ("tests/test_probe_layers.py",),
    ),
    Mutant(
        "median-times-in-microseconds",
        "opscope/act/timing.py",
        "times.append((time.perf_counter() - start) * 1e3)",
        "times.append((time.perf_counter() - start) * 1e6)",
        ("tests/test_timing.py",),
        NOT_SLOW_TIMING,
    ),
    Mutant(
        "roofline-bandwidth-bound-strict",
        "opscope/act/timing.py",
        "if frac >= BANDWIDTH_BOUND:",
        "if frac > BANDWIDTH_BOUND:",
        ("tests/test_timing.py",),
        NOT_SLOW_TIMING,
    ),
    Mutant(
        "roofline-compute-bound-strict",
        "opscope/act/timing.py",
        "elif intensity >= ridge and (flop_frac is None or flop_frac >= COMPUTE_BOUND):",
        "elif intensity > ridge and (flop_frac is None or flop_frac >= COMPUTE_BOUND):",
        ("tests/test_timing.py",),
        NOT_SLOW_TIMING,
    ),
    Mutant(
        "memoize-evicts-most-recent",
        "opscope/act/memoize.py",
        "self._cache.popitem(last=False)",
        "self._cache.popitem(last=True)",
        ("tests/test_memoize.py",),
    ),
    Mutant(
        "memoize-trusts-the-hash",
        "opscope/act/memoize.py",
        "            if _same(stored[0], arrays):",
        "            if True:",
        ("tests/test_memoize.py",),
    ),
    Mutant(
        "quantize-clip-one-past-qmax",
        "opscope/ir/fakequant.py",
        "codes = np.clip(np.sign(t) * np.floor(np.abs(t) + 0.5), -q, q)",
        "codes = np.clip(np.sign(t) * np.floor(np.abs(t) + 0.5), -q - 1, q + 1)",
        ("tests/test_quantize_weight.py",),
        survives="equivalent: t = f32(f32(w·f32(1/amax))·qmax) is at most qmax·(1 + 2^-22) < qmax + 0.5 "
        "(|w| ≤ amax), so a rounded code never passes ±qmax and the clip never binds",
    ),
    Mutant(
        "fakequant-ties-to-even",
        "opscope/ir/fakequant.py",
        "t = arith.minimumf(arith.maximumf(math.round(t), lo), hi)",
        "t = arith.minimumf(arith.maximumf(math.roundeven(t), lo), hi)",
        ("tests/test_fakequant.py",),
    ),
)


def by_name() -> dict[str, Mutant]:
    return {m.name: m for m in MUTANTS}


def rotted(mutants) -> list[str]:
    """One line per mutant whose original text does not occur exactly once in its file."""
    out = []
    for m in mutants:
        path = ROOT / m.file
        if not path.is_file():
            out.append(f"{m.name}: {m.file} does not exist")
            continue
        count = path.read_text(encoding="utf-8").count(m.original)
        if count != 1:
            out.append(f"{m.name}: its original text occurs {count} times in {m.file} (want exactly once)")
    return out


def _pytest(m: Mutant | None, tests: tuple[str, ...], select: str = "") -> tuple[int, str]:
    cmd = [sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", *tests]
    if select:
        cmd += ["-k", select]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    return proc.returncode, proc.stdout + proc.stderr


def _first_failure(output: str) -> str:
    """The test that failed (pytest's short summary), or the last line when pytest did not get that far."""
    found = re.search(r"^(?:FAILED|ERROR) (\S+)", output, re.M)
    if found:
        return found.group(1)
    lines = [ln for ln in output.strip().splitlines() if ln.strip()]
    return lines[-1][:100] if lines else "(no output)"


class _Interrupted(Exception):
    pass


def _raise_interrupted(signum, frame):
    raise _Interrupted(signal.Signals(signum).name)


def run_one(m: Mutant) -> tuple[str, str, float]:
    """(killed | survived, by what, seconds): the mutant applied in place, tested, always restored."""
    path = ROOT / m.file
    original = path.read_bytes()
    text = original.decode("utf-8")
    mutated = text.replace(m.original, m.mutated, 1).encode("utf-8")
    t0 = time.perf_counter()
    try:
        path.write_bytes(mutated)
        rc, output = _pytest(m, m.tests, m.select)
    finally:
        blocked = {signal.SIGINT, signal.SIGTERM}
        signal.pthread_sigmask(signal.SIG_BLOCK, blocked)  # a second Ctrl-C cannot cut the restore short
        try:
            current = path.read_bytes()
            if current == mutated:
                path.write_bytes(original)
            else:  # someone edited the file meanwhile: undo only the mutation, keep their edit
                path.write_bytes(current.decode("utf-8").replace(m.mutated, m.original, 1).encode("utf-8"))
        finally:
            signal.pthread_sigmask(signal.SIG_UNBLOCK, blocked)
    seconds = time.perf_counter() - t0
    if rc == 0:
        return "survived", "", seconds
    if rc == 5:
        return "error", "pytest collected no test (check `tests` and `select`)", seconds
    return "killed", _first_failure(output), seconds


def table(rows: list[tuple[str, str, str, str, float]]) -> str:
    head = ("mutant", "file", "result", "killed by (first failing test) / why it survives", "s")
    cells = [head, *[(n, f, r, b, f"{s:.1f}") for n, f, r, b, s in rows]]
    widths = [max(len(c[i]) for c in cells) for i in range(4)]
    lines = []
    for i, c in enumerate(cells):
        lines.append("  ".join(c[j].ljust(widths[j]) for j in range(4)) + "  " + c[4].rjust(6))
        if i == 0:
            lines.append("  ".join("-" * w for w in widths) + "  " + "-" * 6)
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--list", action="store_true", help="print the mutants and exit")
    ap.add_argument("--only", action="append", metavar="NAME", help="run only this mutant (repeatable)")
    ap.add_argument("--no-baseline", action="store_true", help="skip running the unmutated tests first")
    args = ap.parse_args(argv)

    mutants = list(MUTANTS)
    if args.only:
        known = by_name()
        unknown = [n for n in args.only if n not in known]
        if unknown:
            print(f"mutants: unknown mutant {', '.join(unknown)} (see --list)", file=sys.stderr)
            return 1
        mutants = [known[n] for n in args.only]
    bad = rotted(mutants)
    if bad:
        print("mutants: the list has rotted:\n  " + "\n  ".join(bad), file=sys.stderr)
        return 1
    if args.list:
        for m in mutants:
            tests = " ".join(m.tests) + (f" -k '{m.select}'" if m.select else "")
            note = f"  [survives: {m.survives}]" if m.survives else ""
            print(f"{m.name}\n    {m.file}: {m.original!r} -> {m.mutated!r}\n    tests: {tests}{note}")
        return 0

    signal.signal(signal.SIGTERM, _raise_interrupted)
    signal.signal(signal.SIGINT, _raise_interrupted)
    try:
        if not args.no_baseline:
            for tests, select in dict.fromkeys((m.tests, m.select) for m in mutants):
                t0 = time.perf_counter()
                rc, output = _pytest(None, tests, select)
                print(f"baseline {' '.join(tests)}: rc {rc} in {time.perf_counter() - t0:.1f} s", flush=True)
                if rc != 0:
                    print(f"mutants: the unmutated tests fail ({_first_failure(output)}): nothing to judge")
                    return 2
        rows = []
        for m in mutants:
            result, by, seconds = run_one(m)
            if result == "survived" and m.survives:
                result, by = "survived (expected)", m.survives
            rows.append((m.name, m.file, result, by, seconds))
            print(f"{m.name}: {result} {by} ({seconds:.1f} s)", flush=True)
    except _Interrupted as e:
        print(f"mutants: interrupted ({e}); every file is restored", file=sys.stderr)
        return 130
    print()
    print(table(rows))
    killed = sum(r[2] == "killed" for r in rows)
    gaps = [r[0] for r in rows if r[2] in ("survived", "error")]
    print(f"\n{killed} of {len(rows)} killed; {len(gaps)} unexpected survivors{': ' + ', '.join(gaps) if gaps else ''}")
    return 3 if gaps else 0


if __name__ == "__main__":
    sys.exit(main())
