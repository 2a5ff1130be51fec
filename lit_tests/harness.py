"""What the Python lit scripts share: their test decorator and the site listing their CHECK lines read.

lit.cfg.py puts this folder on the scripts' PYTHONPATH and keeps this file out of the tests.
"""

import gc

from iree.compiler import ir

from opscope.ir.sites import find_sites


def run(f):
    """Run test `f` under its CHECK-LABEL line, then fail if it leaked an `ir.Context` (each script's decorator)."""
    print("\nTEST:", f.__name__)
    f()
    gc.collect()
    assert ir.Context._get_live_count() == 0, "leaked an ir.Context"
    return f


def print_sites(module: ir.Module) -> None:
    """Print each site's name, kind and printed location, one a line: what the importer scripts check."""
    for site in find_sites(module):
        print(site.name, site.kind, site.location)
