"""The records of a KIP-848 consumer group in `__consumer_offsets`, as Kafka 4.3 writes them (facts
from its ConsumerGroup*Key/Value.json message specs in the group-coordinator module).

A key opens with an int16 record type, then the key's fields in the classic encoding (int16-length
strings); a value opens with an int16 version (0), then its fields in the flexible encoding
(compact strings and arrays, uuids, a tagged-field section after every struct):

    type 3  ConsumerGroupMetadata          group    -> epoch int32 (tag 0: metadata hash int64)
    type 5  ConsumerGroupMemberMetadata    group, member -> instance id?, rack id?, client id,
            client host, subscribed topic names [string], subscribed regex?, rebalance timeout
            int32, server assignor? (tag 0: classic member metadata)
    type 6  ConsumerGroupTargetAssignmentMetadata  group -> assignment epoch int32 (tag 0:
            assignment timestamp int64, KIP-1263)
    type 7  ConsumerGroupTargetAssignmentMember    group, member -> [topic id uuid, [int32]]
    type 8  ConsumerGroupCurrentMemberAssignment   group, member -> member epoch int32, previous
            member epoch int32, state int8, assigned [topic id, [int32] (tag 0: the partitions'
            assignment epochs [int32], KIP-1251)], pending revocation (same)
    type 16 ConsumerGroupRegularExpression group, regular expression -> topics [string] (sorted),
            version int64, timestamp int64 (a resolution: regex_resolution.py)

A null value is a tombstone. Samsa writes no metadata hash (Kafka's default 0: Samsa compares the
subscribed topics themselves). The classic member metadata (session timeout int32, supported
protocols [name string, metadata bytes]) is written for a member that uses the classic protocol.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field

from broker.coordinator.consumer_group import (
    Assignment,
    ClassicMemberMetadata,
    MemberState,
    ResolvedRegularExpression,
)
from protocol.coordinator_wire import (
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

GROUP_METADATA = 3
MEMBER_METADATA = 5
TARGET_METADATA = 6
TARGET_MEMBER = 7
CURRENT_ASSIGNMENT = 8
REGULAR_EXPRESSION = 16
TYPES = frozenset({GROUP_METADATA, MEMBER_METADATA, TARGET_METADATA, TARGET_MEMBER, CURRENT_ASSIGNMENT,
                   REGULAR_EXPRESSION})
_SECOND_KEY_FIELD = frozenset({MEMBER_METADATA, TARGET_MEMBER, CURRENT_ASSIGNMENT, REGULAR_EXPRESSION})

STATE_CODES = {MemberState.STABLE: 0, MemberState.UNREVOKED_PARTITIONS: 1, MemberState.UNRELEASED_PARTITIONS: 2}
STATES = {code: state for state, code in STATE_CODES.items()}



@dataclass(frozen=True, slots=True)
class ConsumerGroupKey:
    """The key of a consumer group record: its type, group and (member records) member id, or
    (type 16) the regular expression."""

    type: int
    group: str
    member_id: str | None = None


@dataclass(frozen=True, slots=True)
class MemberMetadataValue:
    instance_id: str | None
    rack_id: str | None
    client_id: str
    client_host: str
    subscribed_topic_names: tuple[str, ...]
    subscribed_topic_regex: str | None
    rebalance_timeout_ms: int
    server_assignor: str | None
    classic: ClassicMemberMetadata | None = None


@dataclass(frozen=True, slots=True)
class CurrentAssignmentValue:
    member_epoch: int
    previous_member_epoch: int
    state: MemberState
    assigned: Assignment
    pending_revocation: Assignment
    partition_epochs: Mapping[tuple[uuid.UUID, int], int] = field(default_factory=dict)
    """Each partition's assignment epoch (KIP-1251); read back, a topic without them takes the
    member epoch (never below 0: Kafka's Utils.assignmentFromTopicPartitions)."""


@dataclass(frozen=True, slots=True)
class TargetMetadataValue:
    assignment_epoch: int
    assignment_timestamp_ms: int


ConsumerGroupValue = (
    int | MemberMetadataValue | TargetMetadataValue | Assignment | CurrentAssignmentValue | ResolvedRegularExpression
)
"""int: the group epoch (type 3); Assignment: a member's target (type 7)."""


# --- writing --------------------------------------------------------------------------------------








def _partitions(
    out: bytearray, assignment: Assignment, epochs: Mapping[tuple[uuid.UUID, int], int] | None = None
) -> None:
    """A [topic id, [partition]] array; with `epochs`, each topic's tag 0 holds its partitions'
    assignment epochs in the same order (the member epoch where `epochs` has none)."""
    uvarint(out, len(assignment) + 1)
    for topic_id, ps in sorted(assignment.items(), key=lambda item: str(item[0])):
        out += topic_id.bytes
        uvarint(out, len(ps) + 1)
        for p in sorted(ps):
            out += I32.pack(p)
        if epochs is None or not ps:
            out.append(0)  # tagged fields
            continue
        field_bytes = bytearray()
        compact_int32s(field_bytes, [epochs[topic_id, p] for p in sorted(ps)])
        out += b"\x01\x00"  # one tagged field, tag 0
        uvarint(out, len(field_bytes))
        out += field_bytes


def key_bytes(key: ConsumerGroupKey) -> bytes:
    out = bytearray(I16.pack(key.type))
    classic_string(out, key.group)
    if key.member_id is not None:
        classic_string(out, key.member_id)
    return bytes(out)


def group_epoch_value(epoch: int) -> bytes:
    return I16.pack(0) + I32.pack(epoch) + b"\x00"


def member_metadata_value(v: MemberMetadataValue) -> bytes:
    out = bytearray(I16.pack(0))
    compact_string(out, v.instance_id)
    compact_string(out, v.rack_id)
    compact_string(out, v.client_id)
    compact_string(out, v.client_host)
    uvarint(out, len(v.subscribed_topic_names) + 1)
    for name in v.subscribed_topic_names:
        compact_string(out, name)
    compact_string(out, v.subscribed_topic_regex)
    out += I32.pack(v.rebalance_timeout_ms)
    compact_string(out, v.server_assignor)
    if v.classic is None:
        # Kafka writes a null classic member metadata as tag 0 holding a 0 marker (its reader
        # takes a missing tag 0 for an empty, non-null one: a classic member)
        out += b"\x01\x00\x01\x00"
        return bytes(out)
    classic = bytearray(I32.pack(v.classic.session_timeout_ms))
    uvarint(classic, len(v.classic.supported_protocols) + 1)
    for name, metadata in v.classic.supported_protocols:
        compact_string(classic, name)
        uvarint(classic, len(metadata) + 1)
        classic += metadata
        classic.append(0)  # tagged fields
    classic.append(0)
    out += b"\x01\x00"  # one tagged field, tag 0
    uvarint(out, len(classic) + 1)
    out.append(1)  # not null
    out += classic
    return bytes(out)


def target_metadata_value(v: TargetMetadataValue) -> bytes:
    out = bytearray(I16.pack(0) + I32.pack(v.assignment_epoch))
    if v.assignment_timestamp_ms:
        out += b"\x01\x00\x08" + I64.pack(v.assignment_timestamp_ms)  # one tagged field: tag 0, 8 bytes
    else:
        out.append(0)
    return bytes(out)


def target_member_value(assignment: Assignment) -> bytes:
    out = bytearray(I16.pack(0))
    _partitions(out, assignment)
    out.append(0)
    return bytes(out)


def current_assignment_value(v: CurrentAssignmentValue) -> bytes:
    out = bytearray(I16.pack(0) + I32.pack(v.member_epoch) + I32.pack(v.previous_member_epoch))
    out.append(STATE_CODES[v.state])
    epochs = {
        (topic_id, p): v.partition_epochs.get((topic_id, p), max(v.member_epoch, 0))
        for parts in (v.assigned, v.pending_revocation)
        for topic_id, ps in parts.items()
        for p in ps
    }
    _partitions(out, v.assigned, epochs)
    _partitions(out, v.pending_revocation, epochs)
    out.append(0)
    return bytes(out)


def regular_expression_value(v: ResolvedRegularExpression) -> bytes:
    out = bytearray(I16.pack(0))
    uvarint(out, len(v.topics) + 1)
    for name in sorted(v.topics):
        compact_string(out, name)
    out += I64.pack(v.version) + I64.pack(v.timestamp_ms)
    out.append(0)
    return bytes(out)


# --- reading --------------------------------------------------------------------------------------


class _Reader(Reader):
    __slots__ = ()

    def __init__(self, buf: bytes, pos: int = 2) -> None:
        """`pos`: where to start (2: after a value's version)."""
        super().__init__(buf, pos, "consumer group")

    def partitions(self, epochs: dict[tuple[uuid.UUID, int], int] | None = None) -> Assignment:
        """A [topic id, [partition]] array; the assignment epochs of its tag 0 go into `epochs`
        (a topic whose epochs do not match its partitions has none, as Kafka logs and ignores)."""
        out: dict[uuid.UUID, frozenset[int]] = {}
        for _ in range(self.count()):
            topic_id = self.uuid()
            ps = self.compact_int32s()
            out[topic_id] = frozenset(ps)
            tagged = self.tagged()
            if epochs is not None and 0 in tagged:
                inner = _Reader(tagged[0], 0)
                topic_epochs = inner.compact_int32s()
                if len(topic_epochs) == len(ps):
                    epochs.update(((topic_id, p), e) for p, e in zip(ps, topic_epochs, strict=True))
        return out


def _classic_member_metadata(buf: bytes) -> ClassicMemberMetadata | None:
    r = _Reader(buf, 0)
    if r.uvarint() == 0:
        return None
    session_timeout = r.i32()
    protocols: list[tuple[str, bytes]] = []
    for _ in range(max(r.uvarint() - 1, 0)):
        name = r.compact_string() or ""
        protocols.append((name, r.take(max(r.uvarint() - 1, 0))))
        r.tagged()
    r.tagged()
    return ClassicMemberMetadata(session_timeout, tuple(protocols))


def read_key(buf: bytes) -> ConsumerGroupKey | None:
    """A consumer group record key, or None for another record type."""
    record_type = int(I16.unpack_from(buf, 0)[0])
    if record_type not in TYPES:
        return None
    r = _Reader(buf)
    group = r.classic_string()
    member = r.classic_string() if record_type in _SECOND_KEY_FIELD else None
    return ConsumerGroupKey(record_type, group, member)


def read_value(record_type: int, buf: bytes | None) -> ConsumerGroupValue | None:
    """The value of a record of this type; None for a tombstone."""
    if buf is None:
        return None
    r = _Reader(buf)
    if record_type == GROUP_METADATA:
        epoch = r.i32()
        r.tagged()
        return epoch
    if record_type == MEMBER_METADATA:
        instance_id, rack_id, client_id, client_host = r.compact_string(), r.compact_string(), r.compact_string(), r.compact_string()
        names = tuple(r.compact_string() or "" for _ in range(max(r.uvarint() - 1, 0)))
        regex = r.compact_string()
        rebalance_timeout = r.i32()
        assignor = r.compact_string()
        tagged = r.tagged()
        classic = _classic_member_metadata(tagged[0]) if 0 in tagged else None
        return MemberMetadataValue(instance_id, rack_id, client_id or "", client_host or "", names, regex,
                                   rebalance_timeout, assignor, classic)  # fmt: skip
    if record_type == TARGET_METADATA:
        epoch = r.i32()
        tagged = r.tagged()
        timestamp = int(I64.unpack(tagged[0])[0]) if len(tagged.get(0, b"")) == 8 else 0
        return TargetMetadataValue(epoch, timestamp)
    if record_type == TARGET_MEMBER:
        assignment = r.partitions()
        r.tagged()
        return assignment
    if record_type == CURRENT_ASSIGNMENT:
        epoch, previous = r.i32(), r.i32()
        state = STATES.get(r.take(1)[0], MemberState.UNREVOKED_PARTITIONS)
        partition_epochs: dict[tuple[uuid.UUID, int], int] = {}
        assigned, pending = r.partitions(partition_epochs), r.partitions(partition_epochs)
        r.tagged()
        for parts in (assigned, pending):  # a topic without epochs: the member epoch, as Kafka reads it
            for topic_id, ps in parts.items():
                for p in ps:
                    partition_epochs.setdefault((topic_id, p), max(epoch, 0))
        return CurrentAssignmentValue(epoch, previous, state, assigned, pending, partition_epochs)
    if record_type == REGULAR_EXPRESSION:
        topics = frozenset(r.compact_string() or "" for _ in range(max(r.uvarint() - 1, 0)))
        version, timestamp = r.i64(), r.i64()
        r.tagged()
        return ResolvedRegularExpression(topics, version, timestamp)
    raise CorruptRecordError(f"unknown consumer group record type {record_type}")
