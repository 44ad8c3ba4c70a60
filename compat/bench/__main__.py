"""`python -m compat.bench`: see compat/bench/cli.py."""

import sys

from compat.bench.cli import main

sys.exit(main())
