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
from protocol.coordinator_wire import I16, I32, I64, Reader, classic_string, uvarint
from protocol.errors import CorruptRecordError

SHARE_SNAPSHOT = 0
SHARE_UPDATE = 1

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


def key_bytes(key: ShareStateKey) -> bytes:
    out = bytearray(I16.pack(key.type))
    classic_string(out, key.group_id)
    return bytes(out + key.topic_id.bytes + I32.pack(key.partition))


def _batches_and_tags(
    out: bytearray, batches: tuple[PersisterStateBatch, ...], delivery_complete_count: int
) -> None:
    uvarint(out, len(batches) + 1)
    for b in batches:
        out += _BATCH.pack(b.first_offset, b.last_offset, int(b.delivery_state), b.delivery_count)
        out.append(0)  # the batch's tagged fields
    if delivery_complete_count == -1:
        out.append(0)
    else:
        out += b"\x01\x00\x04" + I32.pack(delivery_complete_count)  # one tagged field: tag 0, 4 bytes


def snapshot_value_bytes(v: ShareSnapshotValue) -> bytes:
    out = bytearray(I16.pack(0))
    out += I32.pack(v.snapshot_epoch) + I32.pack(v.state_epoch) + I32.pack(v.leader_epoch)
    out += I64.pack(v.start_offset) + I64.pack(v.create_timestamp_ms) + I64.pack(v.write_timestamp_ms)
    _batches_and_tags(out, v.state_batches, v.delivery_complete_count)
    return bytes(out)


def update_value_bytes(v: ShareUpdateValue) -> bytes:
    out = bytearray(I16.pack(0))
    out += I32.pack(v.snapshot_epoch) + I32.pack(v.leader_epoch) + I64.pack(v.start_offset)
    _batches_and_tags(out, v.state_batches, v.delivery_complete_count)
    return bytes(out)


# --- reading --------------------------------------------------------------------------------------


def _batches(r: Reader) -> tuple[PersisterStateBatch, ...]:
    out = []
    for _ in range(r.count()):
        first, last, state, count = _BATCH.unpack(r.take(_BATCH.size))
        try:
            delivery_state = RecordState(state)
        except ValueError:
            raise CorruptRecordError(f"unknown delivery state {state} in a share state record") from None
        out.append(PersisterStateBatch(first, last, delivery_state, count))
        r.tagged()
    return tuple(out)


def _delivery_complete_count(r: Reader) -> int:
    raw = r.tagged().get(0)
    if raw is None:
        return -1
    if len(raw) != 4:
        raise CorruptRecordError("delivery complete count of a share state record is not an int32")
    return int(I32.unpack(raw)[0])


def _version(buf: bytes) -> int:
    if len(buf) < 2:
        raise CorruptRecordError("share state record shorter than its version")
    return int(I16.unpack_from(buf)[0])


def read_key(buf: bytes) -> ShareStateKey:
    record_type = _version(buf)
    if record_type not in (SHARE_SNAPSHOT, SHARE_UPDATE):
        raise CorruptRecordError(f"unknown share state record type {record_type}")
    r = Reader(buf, 2, "share state")
    group = r.classic_string()
    return ShareStateKey(record_type, group, r.uuid(), r.i32())


def read_snapshot_value(buf: bytes) -> ShareSnapshotValue:
    if _version(buf) != 0:
        raise CorruptRecordError(f"unknown ShareSnapshotValue version {_version(buf)}")
    r = Reader(buf, 2, "share state")
    snapshot_epoch, state_epoch, leader_epoch = r.i32(), r.i32(), r.i32()
    start, created, written = r.i64(), r.i64(), r.i64()
    batches = _batches(r)
    return ShareSnapshotValue(
        snapshot_epoch,
        state_epoch,
        leader_epoch,
        start,
        created,
        written,
        batches,
        _delivery_complete_count(r),
    )


def read_update_value(buf: bytes) -> ShareUpdateValue:
    if _version(buf) != 0:
        raise CorruptRecordError(f"unknown ShareUpdateValue version {_version(buf)}")
    r = Reader(buf, 2, "share state")
    snapshot_epoch, leader_epoch, start = r.i32(), r.i32(), r.i64()
    batches = _batches(r)
    return ShareUpdateValue(snapshot_epoch, leader_epoch, start, batches, _delivery_complete_count(r))


def value_bytes(v: ShareSnapshotValue | ShareUpdateValue) -> bytes:
    return snapshot_value_bytes(v) if isinstance(v, ShareSnapshotValue) else update_value_bytes(v)


def read_value(record_type: int, buf: bytes) -> ShareSnapshotValue | ShareUpdateValue:
    """The value of a record of `record_type` (from its key)."""
    return read_snapshot_value(buf) if record_type == SHARE_SNAPSHOT else read_update_value(buf)
