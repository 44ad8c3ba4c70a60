"""Which (API key, version) pairs this broker has served, for the compat suite's check that every
version Samsa advertises in ApiVersions is exercised by some client.

The connection layer calls `record()` for every request it decodes (one set insertion). When the
environment variable SAMSA_API_STATS names a file, `samsa serve` writes the pairs there as JSON
(`{"<key>": [versions...]}`) at shutdown; otherwise nothing is written.
"""

from __future__ import annotations

import json
import os

ENV = "SAMSA_API_STATS"

_seen: set[tuple[int, int]] = set()


def record(api_key: int, api_version: int) -> None:
    _seen.add((api_key, api_version))


def seen() -> dict[int, list[int]]:
    out: dict[int, list[int]] = {}
    for key, version in sorted(_seen):
        out.setdefault(key, []).append(version)
    return out


def write_if_requested() -> None:
    path = os.environ.get(ENV)
    if not path:
        return
    tmp = f"{path}.tmp"
    with open(tmp, "w") as f:
        json.dump({str(k): v for k, v in seen().items()}, f)
    os.replace(tmp, path)
