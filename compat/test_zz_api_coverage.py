"""Everything Samsa advertises in ApiVersions is exercised by a client of the differential suite.

Runs after the other compat tests (file order): the session's Samsa records every (API key,
version) it serves (broker/api_stats.py, SAMSA_API_STATS) and writes them when it stops; this test
stops it, reads them, starts it again, and compares with the handler registry (which is exactly
what ApiVersions advertises). Every advertised API key must have been used by some client; the
versions no client in the suite sent are listed in docs/compat.md.
"""

from __future__ import annotations

import json

from broker.handlers import registry
from compat.matrix import COVERAGE


def test_every_advertised_api_is_exercised(targets):
    samsa = targets.get("samsa")
    seen = samsa.api_versions_seen()
    apis = []
    for key, h in sorted(registry.load_handlers().items()):
        advertised = set(range(h.min_version, h.max_version + 1))
        used = sorted(seen.get(key, set()) & advertised)
        apis.append({"key": key, "name": h.name, "min": h.min_version, "max": h.max_version,
                     "seen": used, "missing": sorted(advertised - set(used))})
    COVERAGE.write_text(json.dumps({"apis": apis}, indent=1))
    unused = [f"{a['key']} {a['name']}" for a in apis if not a["seen"]]
    assert not unused, f"advertised in ApiVersions but sent by no client of the suite: {unused}"
