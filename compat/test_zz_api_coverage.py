"""Everything Samsa advertises in ApiVersions is exercised by a client of the differential suite.

Runs after the other compat tests (file order): every Samsa of the session (the shared one and the
franz-go version sweep's own, compat/test_go_versions.py) records each (API key, version) it serves
(broker/api_stats.py, SAMSA_API_STATS) and writes them when it stops; this test stops them, reads
them, starts them again, and compares the union with the handler registry (which is exactly what
ApiVersions advertises). Every advertised version of every API key must have been sent by some
client; docs/compat.md shows the table.
"""

from __future__ import annotations

import json

from broker.handlers import registry
from compat.conftest import Targets
from compat.matrix import COVERAGE


def test_every_advertised_api_version_is_exercised(targets: Targets) -> None:
    seen = targets.api_versions_seen()
    apis = []
    missing: list[str] = []
    for key, h in sorted(registry.load_handlers().items()):
        advertised = set(range(h.min_version, h.max_version + 1))
        used = sorted(seen.get(key, set()) & advertised)
        unused = sorted(advertised - set(used))
        apis.append({"key": key, "name": h.name, "min": h.min_version, "max": h.max_version,
                     "seen": used, "missing": unused})
        if unused:
            missing.append(f"{h.name} (key {key}) " + ", ".join(f"v{v}" for v in unused))
    COVERAGE.write_text(json.dumps({"apis": apis}, indent=1))
    assert not missing, "advertised in ApiVersions but sent by no client of the suite: " + "; ".join(missing)
