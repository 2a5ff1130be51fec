"""The phase a long step is in (an import: load, import, lower, write the weights), for whoever
shows its progress: `opscope.run.ticker` shows it beside the step's elapsed time, and a child
process hands it to its parent (`opscope.importers.isolated`). Nothing listens by default, and
then `phase` costs a list lookup.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

_listeners: list[Callable[[str], None]] = []


def phase(text: str) -> None:
    """Say that the step under way is now in phase `text` (a few words, lower case): to the
    innermost listener (a step inside another shows its own phases)."""
    if _listeners:
        _listeners[-1](text)


@contextmanager
def listening(listener: Callable[[str], None]) -> Iterator[None]:
    """Call `listener` with every phase said while the block runs."""
    _listeners.append(listener)
    try:
        yield
    finally:
        _listeners.remove(listener)
