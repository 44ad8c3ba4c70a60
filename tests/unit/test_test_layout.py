"""The test tree's own rule: pytest imports the modules under tests/ by their file names (tests/
is no package), so two test modules with one name in different directories stop the whole run at
collection. conftest.py files are the exception pytest itself makes: it imports each one as its
directory's own."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]


def test_module_names_under_tests_are_unique() -> None:
    names = Counter(p.name for p in TESTS.rglob("*.py") if "__pycache__" not in p.parts)
    assert [name for name, n in names.items() if n > 1 and name != "conftest.py"] == []
