"""`python -m broker` and the `samsa` console script (pyproject.toml [project.scripts])."""

import sys


def main() -> int:
    # kio registers Hypothesis strategies for its primitive types at import time when Hypothesis
    # is importable (it is in a test environment, and the README's test command installs it into
    # the same .venv as the run command), which costs ~300 ms of start-up; the broker never
    # generates test data, so it blocks that import before anything imports kio.
    sys.modules.setdefault("hypothesis", None)  # type: ignore[arg-type]
    from broker.cli import main as cli_main

    return cli_main()


if __name__ == "__main__":
    sys.exit(main())
