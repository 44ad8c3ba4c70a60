"""Produce v3-12 request bodies decoded without copying their records.

kio's reader copies each partition's records out of the frame (64 KiB to 1 MB per request, cold in
the cache: the frame was just received), and `protocol.prescan` walks the body once more before it
to bound every count. A Produce body has one shape in every version from 3 to 12 (transactional id,
acks, timeout, topics of partitions of records; compact and tagged from v9), so `decode` reads it in
one pass, checking each count and length against the bytes left as it goes, and gives each
partition's records as a read-only memoryview of the frame, which the record check and the segment
write (pwritev) take as they are. The entities are kio's classes of the request's version, equal to
what `protocol.messages.decode_request` returns for the same bytes (the records compare equal as
bytes), and a body kio's path refuses is refused here too: tests/unit/test_produce_request.py
checks both on random and mutated requests of every version.
"""

from __future__ import annotations

import datetime
import struct
from dataclasses import fields
from functools import cache
from typing import Any

from protocol.frames import read_uvarint, skip_tagged_fields
from protocol.kio_compat import EntityTupleField, classify_field

__all__ = ["VERSIONS", "decode"]

VERSIONS = range(3, 13)
"""The Produce versions read here (v0-2 are Samsa's own schemas, v13 names topics by id)."""

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_HEAD = struct.Struct(">hi")  # acks, timeout_ms


class MalformedProduceError(ValueError):
    """The body does not parse (the connection is closed, as for any malformed request; a cut
    varint or tag section raises frames.MalformedFrameError)."""


@cache
def _classes(request_class: type) -> tuple[type, type]:
    """(TopicProduceData, PartitionProduceData) of a version's ProduceRequest class."""
    topic_field = {f.name: f for f in fields(request_class)}["topic_data"]
    topic_kind = classify_field(topic_field)
    assert isinstance(topic_kind, EntityTupleField)
    topic_cls = topic_kind.type_
    partition_kind = classify_field({f.name: f for f in fields(topic_cls)}["partition_data"])
    assert isinstance(partition_kind, EntityTupleField)
    return topic_cls, partition_kind.type_


def _length(buf: memoryview, pos: int, flexible: bool, wide: bool) -> tuple[int, int]:
    """A length or count prefix: -1 for null (compact: n + 1 as a varint; legacy: int16 for
    strings, int32 for bytes and arrays)."""
    if flexible:
        n, pos = read_uvarint(buf, pos)
        return n - 1, pos
    fmt = _I32 if wide else _I16
    if pos + fmt.size > len(buf):
        raise MalformedProduceError("truncated length")
    return fmt.unpack_from(buf, pos)[0], pos + fmt.size


def _string(buf: memoryview, pos: int, flexible: bool, nullable: bool) -> tuple[str | None, int]:
    n, pos = _length(buf, pos, flexible, wide=False)
    if n < 0:
        if nullable and n == -1:
            return None, pos
        raise MalformedProduceError("null or negative string length")
    if pos + n > len(buf):
        raise MalformedProduceError("truncated string")
    try:
        return str(buf[pos : pos + n], "utf-8"), pos + n
    except UnicodeDecodeError as e:
        raise MalformedProduceError("string is not UTF-8") from e


def _count(buf: memoryview, pos: int, flexible: bool, min_item: int) -> tuple[int, int]:
    """An array's item count, which the bytes left must be able to hold (no null arrays here)."""
    n, pos = _length(buf, pos, flexible, wide=True)
    if n < 0:
        raise MalformedProduceError("null or negative array length")
    if n * min_item > len(buf) - pos:
        raise MalformedProduceError(f"array of {n} items cannot fit in {len(buf) - pos} bytes")
    return n, pos


def decode(request_class: type, flexible: bool, payload: bytes | memoryview, offset: int) -> tuple[Any, int]:
    """The request (an instance of `request_class`, the version's kio class) and the bytes read;
    raises MalformedProduceError on anything that does not parse."""
    buf = memoryview(payload).toreadonly()
    topic_cls, partition_cls = _classes(request_class)
    transactional_id, pos = _string(buf, offset, flexible, nullable=True)
    if pos + _HEAD.size > len(buf):
        raise MalformedProduceError("truncated acks and timeout")
    acks, timeout_ms = _HEAD.unpack_from(buf, pos)
    pos += _HEAD.size
    # the smallest topic is an empty name and no partitions; a partition, its index and null records
    topic_count, pos = _count(buf, pos, flexible, 2 if flexible else 6)
    topics = []
    for _ in range(topic_count):
        name, pos = _string(buf, pos, flexible, nullable=False)
        partition_count, pos = _count(buf, pos, flexible, 6 if flexible else 8)
        partitions = []
        for _ in range(partition_count):
            if pos + 4 > len(buf):
                raise MalformedProduceError("truncated partition index")
            (index,) = _I32.unpack_from(buf, pos)
            pos += 4
            size, pos = _length(buf, pos, flexible, wide=True)
            records: memoryview | None
            if size < 0:
                if size != -1:
                    raise MalformedProduceError("negative records length")
                records = None
            else:
                if pos + size > len(buf):
                    raise MalformedProduceError("truncated records")
                records = buf[pos : pos + size]
                pos += size
            if flexible:
                pos = skip_tagged_fields(buf, pos)
            partitions.append(partition_cls(index=index, records=records))
        if flexible:
            pos = skip_tagged_fields(buf, pos)
        topics.append(topic_cls(name=name, partition_data=tuple(partitions)))
    if flexible:
        pos = skip_tagged_fields(buf, pos)  # Produce requests define no tags
    request = request_class(
        transactional_id=transactional_id, acks=acks,
        timeout=datetime.timedelta(milliseconds=timeout_ms), topic_data=tuple(topics),
    )  # fmt: skip
    return request, pos - offset
