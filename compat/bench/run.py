"""Kept for the old command line: `python -m compat.bench.run` is `python -m compat.bench`."""

import sys

from compat.bench.cli import main

if __name__ == "__main__":
    sys.exit(main())
