import sys

# kio registers Hypothesis strategies for its primitive types at import time when Hypothesis is
# importable (it is, in a test environment), which costs ~300 ms of start-up; the broker process
# never generates test data, so it blocks that import.
sys.modules.setdefault("hypothesis", None)  # type: ignore[arg-type]

from broker.cli import main  # noqa: E402

sys.exit(main())
