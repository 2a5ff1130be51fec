"""`python -m opscope` is the `opscope` command."""

import sys

from opscope.cli import main

sys.exit(main())
