"""The import structure: no cycles among Samsa's modules, type-checking imports included.

The layer rules themselves (protocol pure, controller never importing broker, handlers never
importing the log) are import-linter contracts in pyproject.toml, run by tests/check.sh; this test
adds what import-linter has no contract for: a module never depends on itself through others; and
the partition is the one gate to its log: outside broker/log/, only broker/replication/partition.py
calls a log's mutating methods, on its log or its future log (ruff's SLF001 keeps anyone from reaching `partition._log`).
"""

from __future__ import annotations

import ast
from pathlib import Path

import grimp

ROOT = Path(__file__).resolve().parents[2]
LOG_MUTATORS = frozenset({
    "append_as_leader", "append_as_follower", "maybe_increment_log_start_offset",
    "delete_retention_segments", "replace_segments", "roll", "truncate_fully_and_start_at",
    "truncate_to",
})
"""UnifiedLog's methods that change a log (truncate_to and truncate_fully_and_start_at are also
Partition's, which are the way in)."""
GATE = ROOT / "broker" / "replication" / "partition.py"


def _cycles(graph: grimp.ImportGraph) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = [0]

    def visit(module: str) -> None:
        index[module] = low[module] = counter[0]
        counter[0] += 1
        stack.append(module)
        on_stack.add(module)
        for imported in sorted(graph.find_modules_directly_imported_by(module)):
            if imported not in index:
                visit(imported)
                low[module] = min(low[module], low[imported])
            elif imported in on_stack:
                low[module] = min(low[module], index[imported])
        if low[module] == index[module]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == module:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for module in sorted(graph.modules):
        if module not in index:
            visit(module)
    return found


def test_no_import_cycles() -> None:
    graph = grimp.build_graph(
        "protocol", "controller", "broker", exclude_type_checking_imports=False, cache_dir=None
    )
    cycles = _cycles(graph)
    assert not cycles, "import cycles:\n" + "\n".join(" <-> ".join(c) for c in cycles)


def test_only_the_partition_changes_a_log() -> None:
    """Outside broker/log/, a mutating UnifiedLog method is called only by Partition, on its own
    log (`self._log.<method>`); every other caller goes through the partition."""
    offenders = []
    for path in sorted((ROOT / "broker").rglob("*.py")) + sorted((ROOT / "controller").rglob("*.py")):
        if (ROOT / "broker" / "log") in path.parents:
            continue
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
                continue
            if node.func.attr not in LOG_MUTATORS:
                continue
            receiver = ast.unparse(node.func.value)
            if path == GATE and receiver in ("self._log", "self._future_log"):
                continue
            if node.func.attr in ("truncate_to", "truncate_fully_and_start_at") and "partition" in receiver:
                continue  # Partition's own methods of the same names, on a partition
            offenders.append(f"{path.relative_to(ROOT)}:{node.lineno}: {receiver}.{node.func.attr}()")
    assert not offenders, "the log changed other than through its partition:\n" + "\n".join(offenders)
