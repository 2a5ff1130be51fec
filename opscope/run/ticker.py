"""Elapsed time on the terminal while a long step runs (a compile can take a minute).

`ticking("compile for llvm-cpu")` shows `compile for llvm-cpu: 12 s` on stderr, updated
every half second, and clears it when the step ends; a phase the step says
(`opscope.ir.progress.phase`) shows beside it: `import the model (lower torch to linalg): 31 s`.
Off the terminal (pipes, tests, notebooks) it shows nothing, as tqdm decides.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

from tqdm import tqdm

from opscope.ir.progress import listening

INTERVAL_S = 0.5


@contextmanager
def ticking(what: str, enabled: bool | None = None) -> Iterator[None]:
    """Show `what` and the seconds it has taken until the block ends (`enabled`: None = on a terminal)."""
    bar = tqdm(
        total=None,
        desc=what,
        bar_format="{desc}: {elapsed}",
        leave=False,
        disable=None if enabled is None else not enabled,
    )
    if bar.disable:
        yield
        return
    done = threading.Event()

    def tick() -> None:
        while not done.wait(INTERVAL_S):
            bar.refresh()

    def show(text: str) -> None:
        bar.set_description_str(f"{what} ({text})")

    thread = threading.Thread(target=tick, daemon=True)
    thread.start()
    try:
        with listening(show):
            yield
    finally:
        done.set()
        thread.join()
        bar.close()
