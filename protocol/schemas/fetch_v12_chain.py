"""Fetch v12 request with Samsa's chain-replication carrier (broker/replication/chain.py).

A chain member (a follower that serves the next follower of a `replication.pipeline.enable`
topic) reports its successors' replica states upstream on its own replica fetch, in a tagged field
of the fetched partition with a tag Samsa reserves (`CHAIN_REPORTS_TAG`). Kafka's generated
readers keep a tagged field they do not know as an unknown tag and ignore it, so the request stays
valid Kafka v12; the version is the same, so ApiVersions advertises nothing new. kio rejects an
unknown tag (`KeyError: Unknown tagged field tag`), so Samsa decodes every Fetch v12 request with
these classes (protocol/messages.py): subclasses of kio's, equal to them but for the one field.

The field's value is `CHAIN_REPORT` entries packed back to back (pure functions below): per
successor its broker id, its log end offset (its last fetch offset from this member), how long
ago, in ms, it fetched, and how long ago it was last caught up with this member's log end offset (an age, not a timestamp,
so that the brokers' clocks need not agree).

No `from __future__ import annotations` here: kio reads the field types at run time.
"""

import struct
from dataclasses import dataclass, field

from kio.schema.fetch.v12 import request as v12

CHAIN_REPORTS_TAG = 0x5A4D
"""Samsa's tag (far above Kafka's, which number from 0) for the chain reports."""

_ENTRY = struct.Struct(">iqii")
MAX_REPORTS = 64
"""More successors than any replica list has; a longer field is malformed."""


@dataclass(frozen=True, slots=True)
class ChainReport:
    """One successor's replica state, as the chain member that serves it saw it."""

    replica_id: int
    log_end_offset: int
    fetch_age_ms: int
    """how long ago the successor last fetched (the observation's age)"""
    caught_up_age_ms: int


def encode_chain_reports(reports: "tuple[ChainReport, ...] | list[ChainReport]") -> bytes:
    return b"".join(_ENTRY.pack(r.replica_id, r.log_end_offset, _age(r.fetch_age_ms), _age(r.caught_up_age_ms)) for r in reports)


def _age(ms: int) -> int:
    return min(max(ms, 0), 0x7FFFFFFF)


def decode_chain_reports(data: bytes) -> tuple[ChainReport, ...]:
    """The reports in `data`; ValueError if it is not whole entries or holds too many."""
    if len(data) % _ENTRY.size or len(data) // _ENTRY.size > MAX_REPORTS:
        raise ValueError(f"chain reports of {len(data)} bytes")
    return tuple(ChainReport(*_ENTRY.unpack_from(data, i)) for i in range(0, len(data), _ENTRY.size))


@dataclass(frozen=True, slots=True, kw_only=True)
class FetchPartition(v12.FetchPartition):
    chain_reports: bytes | None = field(
        metadata={"kafka_type": "bytes", "tag": CHAIN_REPORTS_TAG}, default=None
    )
    """Samsa's: the chain member's successors' replica states (`encode_chain_reports`)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class FetchTopic(v12.FetchTopic):
    partitions: tuple[FetchPartition, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class FetchRequest(v12.FetchRequest):
    topics: tuple[FetchTopic, ...]
