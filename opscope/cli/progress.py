"""Progress lines of the long-running commands, on stderr so that stdout stays the report."""

from __future__ import annotations

import sys
from collections.abc import Callable


def progress(command: str) -> Callable[[str], None]:
    """The API's `progress` callback for `opscope COMMAND`: each line on stderr as `opscope COMMAND: ...`."""
    return lambda line: print(f"opscope {command}: {line}", file=sys.stderr, flush=True)
