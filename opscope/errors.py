"""The one exception type opscope raises for user-facing problems.

Every command-line entry point catches `OpscopeError` and prints its message as a single
line (`opscope: error: ...`), so bad input never ends in a bare traceback.
"""


class OpscopeError(Exception):
    """A problem with the user's input or environment, explained in one line."""
