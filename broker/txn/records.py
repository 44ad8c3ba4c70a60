"""The records of `__transaction_state`, byte for byte as Apache Kafka 4.3 writes them.

Key (TransactionLogKey.json, the record key): int16 version 0, TransactionalId as an
int16-length string. Value (TransactionLogValue.json; null = the transactional id expired):

    v0: ProducerId int64, ProducerEpoch int16, TransactionTimeoutMs int32, TransactionStatus int8
        (Kafka's TransactionState ids), TransactionPartitions nullable array of (Topic string,
        PartitionIds []int32), TransactionLastUpdateTimestampMs int64,
        TransactionStartTimestampMs int64
    v1: the same fields, flexible (compact strings and arrays, tagged fields), plus the tagged
        fields PreviousProducerId (tag 0, default -1), NextProducerId (1, -1),
        ClientTransactionVersion (2, 0) and NextProducerEpoch (3, -1)

Kafka writes v0 while its finalized transaction.version is below 2 and v1 from TV2 on, and null
partitions for an Empty transaction; Samsa does the same and reads both. Partitions are written
sorted by topic and partition (Kafka writes them in its hash set's order: the same set).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

from protocol.errors import CorruptRecordError
from protocol.topic_partition import TopicPartition

KEY_VERSION = 0
_I8 = struct.Struct(">b")
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1


@dataclass(frozen=True, slots=True)
class TransactionLogValue:
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    status: int
    partitions: frozenset[TopicPartition] | None
    last_update_timestamp_ms: int
    start_timestamp_ms: int
    previous_producer_id: int = NO_PRODUCER_ID
    next_producer_id: int = NO_PRODUCER_ID
    next_producer_epoch: int = NO_PRODUCER_EPOCH
    client_transaction_version: int = 0
    unknown_tags: dict[int, bytes] = field(default_factory=dict, compare=False)


def _uvarint(n: int) -> bytes:
    out = bytearray()
    while True:
        byte = n & 0x7F
        n >>= 7
        if n:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def key_bytes(transactional_id: str) -> bytes:
    raw = transactional_id.encode("utf-8")
    return _I16.pack(KEY_VERSION) + _I16.pack(len(raw)) + raw


def read_key(buf: bytes | None) -> str | None:
    """The transactional id of a key; None for a key version Samsa does not know."""
    if buf is None or len(buf) < 4:
        raise CorruptRecordError("transaction log key too short")
    (version,) = _I16.unpack_from(buf, 0)
    if version != KEY_VERSION:
        return None
    (size,) = _I16.unpack_from(buf, 2)
    if size < 0 or 4 + size > len(buf):
        raise CorruptRecordError("transaction log key string out of bounds")
    return bytes(buf[4 : 4 + size]).decode("utf-8")


def _grouped(partitions: frozenset[TopicPartition]) -> list[tuple[str, list[int]]]:
    by_topic: dict[str, list[int]] = {}
    for tp in sorted(partitions, key=lambda t: (t.topic, t.partition)):
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    return list(by_topic.items())


def value_bytes(value: TransactionLogValue, version: int) -> bytes:
    out = bytearray(_I16.pack(version))
    out += _I64.pack(value.producer_id) + _I16.pack(value.producer_epoch)
    out += _I32.pack(value.timeout_ms) + _I8.pack(value.status)
    groups = None if value.partitions is None else _grouped(value.partitions)
    if version == 0:
        if groups is None:
            out += _I32.pack(-1)
        else:
            out += _I32.pack(len(groups))
            for topic, ids in groups:
                raw = topic.encode("utf-8")
                out += _I16.pack(len(raw)) + raw + _I32.pack(len(ids))
                out += b"".join(_I32.pack(i) for i in ids)
    else:
        if groups is None:
            out += _uvarint(0)
        else:
            out += _uvarint(len(groups) + 1)
            for topic, ids in groups:
                raw = topic.encode("utf-8")
                out += _uvarint(len(raw) + 1) + raw + _uvarint(len(ids) + 1)
                out += b"".join(_I32.pack(i) for i in ids)
                out += _uvarint(0)  # the element's tagged fields
    out += _I64.pack(value.last_update_timestamp_ms) + _I64.pack(value.start_timestamp_ms)
    if version >= 1:
        tags: list[tuple[int, bytes]] = []
        if value.previous_producer_id != NO_PRODUCER_ID:
            tags.append((0, _I64.pack(value.previous_producer_id)))
        if value.next_producer_id != NO_PRODUCER_ID:
            tags.append((1, _I64.pack(value.next_producer_id)))
        if value.client_transaction_version != 0:
            tags.append((2, _I16.pack(value.client_transaction_version)))
        if value.next_producer_epoch != NO_PRODUCER_EPOCH:
            tags.append((3, _I16.pack(value.next_producer_epoch)))
        out += _uvarint(len(tags))
        for tag, data in tags:
            out += _uvarint(tag) + _uvarint(len(data)) + data
    return bytes(out)


class _Reader:
    def __init__(self, buf: bytes) -> None:
        self.buf = buf
        self.pos = 0

    def take(self, st: struct.Struct) -> int:
        if self.pos + st.size > len(self.buf):
            raise CorruptRecordError("transaction log value truncated")
        (v,) = st.unpack_from(self.buf, self.pos)
        self.pos += st.size
        return int(v)

    def uvarint(self) -> int:
        shift = result = 0
        while True:
            if self.pos >= len(self.buf) or shift > 28:
                raise CorruptRecordError("bad varint in transaction log value")
            b = self.buf[self.pos]
            self.pos += 1
            result |= (b & 0x7F) << shift
            if not b & 0x80:
                return result
            shift += 7

    def raw(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.buf):
            raise CorruptRecordError("transaction log value field out of bounds")
        data = self.buf[self.pos : self.pos + n]
        self.pos += n
        return data


def read_value(buf: bytes | None) -> TransactionLogValue | None:
    """A value (None for a tombstone); CorruptRecordError if unreadable or of an unknown version."""
    if buf is None:
        return None
    r = _Reader(bytes(buf))
    version = r.take(_I16)
    if version not in (0, 1):
        raise CorruptRecordError(f"unknown transaction log value version {version}")
    pid, epoch = r.take(_I64), r.take(_I16)
    timeout, status = r.take(_I32), r.take(_I8)
    partitions: set[TopicPartition] | None
    if version == 0:
        count = r.take(_I32)
        partitions = None if count < 0 else set()
        for _ in range(max(count, 0)):
            topic = r.raw(r.take(_I16)).decode("utf-8")
            for _ in range(r.take(_I32)):
                assert partitions is not None
                partitions.add(TopicPartition(topic, r.take(_I32)))
    else:
        count = r.uvarint() - 1
        partitions = None if count < 0 else set()
        for _ in range(max(count, 0)):
            topic = r.raw(r.uvarint() - 1).decode("utf-8")
            for _ in range(r.uvarint() - 1):
                assert partitions is not None
                partitions.add(TopicPartition(topic, r.take(_I32)))
            for _ in range(r.uvarint()):  # element tagged fields
                r.uvarint()
                r.raw(r.uvarint())
    last_update, start = r.take(_I64), r.take(_I64)
    value = TransactionLogValue(
        pid, epoch, timeout, status, None if partitions is None else frozenset(partitions), last_update, start
    )
    if version >= 1:
        prev = nxt = NO_PRODUCER_ID
        next_epoch = NO_PRODUCER_EPOCH
        tv = 0
        unknown: dict[int, bytes] = {}
        for _ in range(r.uvarint()):
            tag, data = r.uvarint(), r.raw(r.uvarint())
            if tag == 0:
                (prev,) = _I64.unpack(data)
            elif tag == 1:
                (nxt,) = _I64.unpack(data)
            elif tag == 2:
                (tv,) = _I16.unpack(data)
            elif tag == 3:
                (next_epoch,) = _I16.unpack(data)
            else:
                unknown[tag] = data
        value = TransactionLogValue(
            pid, epoch, timeout, status, value.partitions, last_update, start,
            prev, nxt, next_epoch, tv, unknown,
        )  # fmt: skip
    return value
