"""The parameter files a compiled module reads its weights from, attached when it is loaded.

A module whose weights were externalized (`externalize-weights`) carries no weight bytes; its
loaded context needs IREE's `io_parameters` module, with one provider per scope, placed before
it. The files are mapped once per process (`opscope.ir.parameter_files.open_index`), so every
build of a model (tapped, untapped, rewritten) loaded here reads the same pages of one file.
"""

from __future__ import annotations

import re

from opscope.errors import OpscopeError
from opscope.ir.parameter_files import open_index

_MISSING_KEY = re.compile(r"no parameter found in index with key '([^']*)'")
_MISSING_SCOPE = re.compile(r"no provider registered that handles scopes like '([^']*)'")


def io_parameters_module(vm_instance, files: tuple[tuple[str, str], ...]):
    """IREE's `io_parameters` VM module serving each (scope, file) of `files`."""
    import iree.runtime as rt

    providers = [open_index(path).create_provider(scope=scope) for scope, path in files]
    return rt.create_io_parameters_module(vm_instance, *providers)


def parameter_flags(files: tuple[tuple[str, str], ...]) -> list[str]:
    """The `--parameters=scope=file` flags IREE's command-line tools take for `files`."""
    for _, path in files:
        open_index(path)  # a missing or corrupt file is said here, in one line, not by the tool
    return [f"--parameters={scope}={path}" for scope, path in files]


def explain_context_error(error: Exception, files: tuple[tuple[str, str], ...]) -> OpscopeError | None:
    """A one-line error for a context that could not be created because a parameter or a scope
    is missing from the files, else None."""
    text = str(error)
    named = ", ".join(f"{scope}={path}" for scope, path in files) or "none"
    if found := _MISSING_KEY.search(text):
        return OpscopeError(
            f"the module reads parameter '{found.group(1)}', which its parameter files ({named}) do not hold: "
            "the file was rewritten by another import; import the model again"
        )
    if found := _MISSING_SCOPE.search(text):
        return OpscopeError(
            f"the module reads parameters of scope '{found.group(1)}' but no parameter file serves it "
            f"(files: {named}): compile it from a module that names its files (opscope.parameters)"
        )
    return None
