"""The records of a share group in `__consumer_offsets`, as Kafka 4.3.1 writes them (its
ShareGroup*Key/Value.json message specs in the group-coordinator module).

A key opens with an int16 record type, then the group (and, for member records, the member id)
as int16-length strings; a value opens with an int16 version (0), then its fields in the flexible
encoding (compact strings and arrays, uuids, a tagged-field section after every struct):

    type 10  ShareGroupMemberMetadata           group, member -> rack id?, client id, client
             host, subscribed topic names [string]
    type 11  ShareGroupMetadata                 group -> epoch int32, metadata hash int64
    type 12  ShareGroupTargetAssignmentMetadata group -> assignment epoch int32 (tag 0:
             assignment timestamp int64)
    type 13  ShareGroupTargetAssignmentMember   group, member -> [topic id uuid, [int32]]
    type 14  ShareGroupCurrentMemberAssignment  group, member -> member epoch int32, previous
             member epoch int32, state int8 (0: stable), assigned [topic id, [int32]]
    type 15  ShareGroupStatePartitionMetadata   group -> initializing and initialized topics
             [topic id, topic name, [int32]], deleting topics [topic id, topic name]

A null value is a tombstone. Samsa writes metadata hash 0 (it compares the subscribed topics
themselves, as its consumer groups do).
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass

from protocol.coordinator_wire import (
    I8,
    I16,
    I32,
    I64,
    Reader,
    classic_string,
    compact_int32s,
    compact_string,
    uvarint,
)
from protocol.errors import CorruptRecordError

MEMBER_METADATA = 10
GROUP_METADATA = 11
TARGET_METADATA = 12
TARGET_MEMBER = 13
CURRENT_ASSIGNMENT = 14
STATE_PARTITION_METADATA = 15
MEMBER_TYPES = frozenset({MEMBER_METADATA, TARGET_MEMBER, CURRENT_ASSIGNMENT})
TYPES = frozenset({GROUP_METADATA, TARGET_METADATA, STATE_PARTITION_METADATA}) | MEMBER_TYPES

Assignment = Mapping[uuid.UUID, frozenset[int]]


@dataclass(frozen=True, slots=True)
class ShareGroupKey:
    type: int
    group: str
    member_id: str | None = None


@dataclass(frozen=True, slots=True)
class GroupMetadataValue:
    epoch: int
    metadata_hash: int = 0


@dataclass(frozen=True, slots=True)
class MemberMetadataValue:
    rack_id: str | None
    client_id: str
    client_host: str
    subscribed_topic_names: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class TargetMetadataValue:
    assignment_epoch: int
    assignment_timestamp_ms: int = 0


@dataclass(frozen=True, slots=True)
class CurrentAssignmentValue:
    member_epoch: int
    previous_member_epoch: int
    assigned: Assignment
    state: int = 0


@dataclass(frozen=True, slots=True)
class TopicPartitionsInfo:
    topic_id: uuid.UUID
    topic_name: str
    partitions: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class StatePartitionMetadataValue:
    initializing: tuple[TopicPartitionsInfo, ...]
    initialized: tuple[TopicPartitionsInfo, ...]
    deleting: tuple[tuple[uuid.UUID, str], ...]


ShareGroupValue = (
    GroupMetadataValue
    | MemberMetadataValue
    | TargetMetadataValue
    | Assignment
    | CurrentAssignmentValue
    | StatePartitionMetadataValue
)
"""Assignment: a member's target (type 13)."""


# --- writing --------------------------------------------------------------------------------------


def key_bytes(key: ShareGroupKey) -> bytes:
    out = bytearray(I16.pack(key.type))
    classic_string(out, key.group)
    if key.type in MEMBER_TYPES:
        classic_string(out, key.member_id or "")
    return bytes(out)


def _assignment(out: bytearray, assignment: Assignment) -> None:
    uvarint(out, len(assignment) + 1)
    for topic_id, ps in sorted(assignment.items(), key=lambda item: str(item[0])):
        out += topic_id.bytes
        compact_int32s(out, sorted(ps))
        out.append(0)


def _topics(out: bytearray, topics: tuple[TopicPartitionsInfo, ...]) -> None:
    uvarint(out, len(topics) + 1)
    for t in topics:
        out += t.topic_id.bytes
        compact_string(out, t.topic_name)
        compact_int32s(out, list(t.partitions))
        out.append(0)


def value_bytes(value: ShareGroupValue) -> bytes:
    out = bytearray(I16.pack(0))
    if isinstance(value, GroupMetadataValue):
        out += I32.pack(value.epoch) + I64.pack(value.metadata_hash)
    elif isinstance(value, MemberMetadataValue):
        compact_string(out, value.rack_id)
        compact_string(out, value.client_id)
        compact_string(out, value.client_host)
        uvarint(out, len(value.subscribed_topic_names) + 1)
        for name in value.subscribed_topic_names:
            compact_string(out, name)
    elif isinstance(value, TargetMetadataValue):
        out += I32.pack(value.assignment_epoch)
        if value.assignment_timestamp_ms:
            out += b"\x01\x00\x08" + I64.pack(value.assignment_timestamp_ms)  # tag 0, 8 bytes
            return bytes(out)
    elif isinstance(value, CurrentAssignmentValue):
        out += I32.pack(value.member_epoch) + I32.pack(value.previous_member_epoch) + I8.pack(value.state)
        _assignment(out, value.assigned)
    elif isinstance(value, StatePartitionMetadataValue):
        _topics(out, value.initializing)
        _topics(out, value.initialized)
        uvarint(out, len(value.deleting) + 1)
        for topic_id, name in value.deleting:
            out += topic_id.bytes
            compact_string(out, name)
            out.append(0)
    else:
        _assignment(out, value)
    out.append(0)
    return bytes(out)


# --- reading --------------------------------------------------------------------------------------


def read_key(buf: bytes) -> ShareGroupKey | None:
    """A share group record key, or None for another record type."""
    if len(buf) < 2:
        raise CorruptRecordError("group record key shorter than its type")
    record_type = int(I16.unpack_from(buf)[0])
    if record_type not in TYPES:
        return None
    r = Reader(buf, 2, "share group")
    group = r.classic_string()
    return ShareGroupKey(record_type, group, r.classic_string() if record_type in MEMBER_TYPES else None)


def _read_assignment(r: Reader) -> Assignment:
    out: dict[uuid.UUID, frozenset[int]] = {}
    for _ in range(r.count()):
        topic_id = r.uuid()
        out[topic_id] = frozenset(r.compact_int32s())
        r.tagged()
    return out


def _read_topics(r: Reader) -> tuple[TopicPartitionsInfo, ...]:
    out = []
    for _ in range(r.count()):
        topic_id, name = r.uuid(), r.compact_string() or ""
        out.append(TopicPartitionsInfo(topic_id, name, tuple(r.compact_int32s())))
        r.tagged()
    return tuple(out)


def read_value(record_type: int, buf: bytes | None) -> ShareGroupValue | None:
    """The value of a record of this type; None for a tombstone."""
    if buf is None:
        return None
    if len(buf) < 2 or I16.unpack_from(buf)[0] != 0:
        raise CorruptRecordError(f"share group record type {record_type}: unknown value version")
    r = Reader(buf, 2, "share group")
    value: ShareGroupValue
    if record_type == GROUP_METADATA:
        value = GroupMetadataValue(r.i32(), r.i64())
    elif record_type == MEMBER_METADATA:
        rack, client_id, host = r.compact_string(), r.compact_string() or "", r.compact_string() or ""
        value = MemberMetadataValue(
            rack, client_id, host, tuple(r.compact_string() or "" for _ in range(r.count()))
        )
    elif record_type == TARGET_METADATA:
        epoch = r.i32()
        raw = r.tagged().get(0, b"")
        return TargetMetadataValue(epoch, int(I64.unpack(raw)[0]) if len(raw) == 8 else 0)
    elif record_type == TARGET_MEMBER:
        value = _read_assignment(r)
    elif record_type == CURRENT_ASSIGNMENT:
        epoch, previous, state = r.i32(), r.i32(), r.unpack(I8)
        value = CurrentAssignmentValue(epoch, previous, _read_assignment(r), state)
    elif record_type == STATE_PARTITION_METADATA:
        initializing, initialized = _read_topics(r), _read_topics(r)
        deleting = []
        for _ in range(r.count()):
            topic_id, name = r.uuid(), r.compact_string() or ""
            deleting.append((topic_id, name))
            r.tagged()
        value = StatePartitionMetadataValue(initializing, initialized, tuple(deleting))
    else:
        raise CorruptRecordError(f"unknown share group record type {record_type}")
    r.tagged()
    return value
