"""How tests read an error that must be one line: no newline, no padding, no traceback."""

from __future__ import annotations

import pytest


def one_line(error: pytest.ExceptionInfo) -> str:
    """The message of a raised error, checked to be a single clean line (no traceback text)."""
    message = str(error.value)
    assert "\n" not in message and message.strip() == message and "Traceback" not in message
    return message
