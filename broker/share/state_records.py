"""The records of `__share_group_state`, the share coordinator's internal topic, as Kafka 4.3.1
writes them (its ShareSnapshot*/ShareUpdate*.json message specs in the share-coordinator module).

A key opens with an int16 record type, then group id (int16-length string), topic id (uuid) and
partition (int32); a value opens with an int16 version (0), then its fields in the flexible
encoding (compact arrays, a tagged-field section after every struct):

    type 0  ShareSnapshot  -> snapshot epoch int32, state epoch int32, leader epoch int32, start
            offset int64, create timestamp int64, write timestamp int64, state batches
            [first offset int64, last offset int64, delivery state int8, delivery count int16]
            (tag 0: delivery complete count int32, absent when -1)
    type 1  ShareUpdate    -> snapshot epoch int32, leader epoch int32, start offset int64 (-1:
            unchanged), state batches as above (tag 0: delivery complete count)

A snapshot is the whole state of one share partition; an update carries only the state batches
a write changed, applied over the last snapshot. A null value (tombstone) on a snapshot key
deletes the share partition's state.
"""

from __future__ import annotations

import struct
import uuid
from dataclasses import dataclass

from broker.share.in_flight import PersisterStateBatch, RecordState
from protocol.errors import CorruptRecordError

SHARE_SNAPSHOT = 0
SHARE_UPDATE = 1

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_BATCH = struct.Struct(">qqbh")


@dataclass(frozen=True, slots=True)
class ShareStateKey:
    type: int
    group_id: str
    topic_id: uuid.UUID
    partition: int


@dataclass(frozen=True, slots=True)
class ShareSnapshotValue:
    snapshot_epoch: int
    state_epoch: int
    leader_epoch: int
    start_offset: int
    create_timestamp_ms: int
    write_timestamp_ms: int
    state_batches: tuple[PersisterStateBatch, ...]
    delivery_complete_count: int = -1


@dataclass(frozen=True, slots=True)
class ShareUpdateValue:
    snapshot_epoch: int
    leader_epoch: int
    start_offset: int
    state_batches: tuple[PersisterStateBatch, ...]
    delivery_complete_count: int = -1


# --- writing --------------------------------------------------------------------------------------


def _uvarint(out: bytearray, v: int) -> None:
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)


def key_bytes(key: ShareStateKey) -> bytes:
    group = key.group_id.encode("utf-8")
    return _I16.pack(key.type) + _I16.pack(len(group)) + group + key.topic_id.bytes + _I32.pack(key.partition)


def _batches_and_tags(
    out: bytearray, batches: tuple[PersisterStateBatch, ...], delivery_complete_count: int
) -> None:
    _uvarint(out, len(batches) + 1)
    for b in batches:
        out += _BATCH.pack(b.first_offset, b.last_offset, int(b.delivery_state), b.delivery_count)
        out.append(0)  # the batch's tagged fields
    if delivery_complete_count == -1:
        out.append(0)
    else:
        out += b"\x01\x00\x04" + _I32.pack(delivery_complete_count)  # one tagged field: tag 0, 4 bytes


def snapshot_value_bytes(v: ShareSnapshotValue) -> bytes:
    out = bytearray(_I16.pack(0))
    out += _I32.pack(v.snapshot_epoch) + _I32.pack(v.state_epoch) + _I32.pack(v.leader_epoch)
    out += _I64.pack(v.start_offset) + _I64.pack(v.create_timestamp_ms) + _I64.pack(v.write_timestamp_ms)
    _batches_and_tags(out, v.state_batches, v.delivery_complete_count)
    return bytes(out)


def update_value_bytes(v: ShareUpdateValue) -> bytes:
    out = bytearray(_I16.pack(0))
    out += _I32.pack(v.snapshot_epoch) + _I32.pack(v.leader_epoch) + _I64.pack(v.start_offset)
    _batches_and_tags(out, v.state_batches, v.delivery_complete_count)
    return bytes(out)


# --- reading --------------------------------------------------------------------------------------


class _Reader:
    __slots__ = ("buf", "pos")

    def __init__(self, buf: bytes, pos: int) -> None:
        self.buf = buf
        self.pos = pos

    def take(self, n: int) -> bytes:
        end = self.pos + n
        if n < 0 or end > len(self.buf):
            raise CorruptRecordError(f"share state record truncated at {self.pos}")
        data = self.buf[self.pos : end]
        self.pos = end
        return data

    def i32(self) -> int:
        return int(_I32.unpack(self.take(4))[0])

    def i64(self) -> int:
        return int(_I64.unpack(self.take(8))[0])

    def uvarint(self) -> int:
        value = shift = 0
        while True:
            byte = self.take(1)[0]
            value |= (byte & 0x7F) << shift
            if not byte & 0x80:
                return value
            shift += 7
            if shift > 28:
                raise CorruptRecordError("unsigned varint too long in a share state record")

    def tagged(self) -> dict[int, bytes]:
        fields = {}
        for _ in range(self.uvarint()):
            tag = self.uvarint()
            fields[tag] = self.take(self.uvarint())
        return fields

    def batches(self) -> tuple[PersisterStateBatch, ...]:
        out = []
        for _ in range(max(self.uvarint() - 1, 0)):
            first, last, state, count = _BATCH.unpack(self.take(_BATCH.size))
            try:
                delivery_state = RecordState(state)
            except ValueError:
                raise CorruptRecordError(f"unknown delivery state {state} in a share state record") from None
            out.append(PersisterStateBatch(first, last, delivery_state, count))
            self.tagged()
        return tuple(out)

    def delivery_complete_count(self) -> int:
        tags = self.tagged()
        raw = tags.get(0)
        if raw is None:
            return -1
        if len(raw) != 4:
            raise CorruptRecordError("delivery complete count of a share state record is not an int32")
        return int(_I32.unpack(raw)[0])


def _version(buf: bytes) -> int:
    if len(buf) < 2:
        raise CorruptRecordError("share state record shorter than its version")
    return int(_I16.unpack_from(buf)[0])


def read_key(buf: bytes) -> ShareStateKey:
    record_type = _version(buf)
    if record_type not in (SHARE_SNAPSHOT, SHARE_UPDATE):
        raise CorruptRecordError(f"unknown share state record type {record_type}")
    r = _Reader(buf, 2)
    n = int(_I16.unpack(r.take(2))[0])
    group = r.take(max(n, 0)).decode("utf-8", "replace")
    topic_id = uuid.UUID(bytes=r.take(16))
    return ShareStateKey(record_type, group, topic_id, r.i32())


def read_snapshot_value(buf: bytes) -> ShareSnapshotValue:
    if _version(buf) != 0:
        raise CorruptRecordError(f"unknown ShareSnapshotValue version {_version(buf)}")
    r = _Reader(buf, 2)
    snapshot_epoch, state_epoch, leader_epoch = r.i32(), r.i32(), r.i32()
    start, created, written = r.i64(), r.i64(), r.i64()
    batches = r.batches()
    return ShareSnapshotValue(
        snapshot_epoch,
        state_epoch,
        leader_epoch,
        start,
        created,
        written,
        batches,
        r.delivery_complete_count(),
    )


def read_update_value(buf: bytes) -> ShareUpdateValue:
    if _version(buf) != 0:
        raise CorruptRecordError(f"unknown ShareUpdateValue version {_version(buf)}")
    r = _Reader(buf, 2)
    snapshot_epoch, leader_epoch, start = r.i32(), r.i32(), r.i64()
    batches = r.batches()
    return ShareUpdateValue(snapshot_epoch, leader_epoch, start, batches, r.delivery_complete_count())


def value_bytes(v: ShareSnapshotValue | ShareUpdateValue) -> bytes:
    return snapshot_value_bytes(v) if isinstance(v, ShareSnapshotValue) else update_value_bytes(v)


def read_value(record_type: int, buf: bytes) -> ShareSnapshotValue | ShareUpdateValue:
    """The value of a record of `record_type` (from its key)."""
    return read_snapshot_value(buf) if record_type == SHARE_SNAPSHOT else read_update_value(buf)
