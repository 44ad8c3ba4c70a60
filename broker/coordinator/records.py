"""The records of `__consumer_offsets`, byte for byte as Apache Kafka writes them.

Every record's key and value start with an int16 version; the fields follow in Kafka's classic
(non-flexible) encoding: int16-length strings (-1 = null), int32-length bytes, big-endian ints.

Keys (the record key; compaction keeps the latest value of each):

    version 0 or 1  OffsetCommitKey      group string, topic string, partition int32
    version 2       GroupMetadataKey     group string

Values (a null value is a tombstone: the offset or the whole group was deleted):

    OffsetCommitValue  v0: offset int64, metadata string, commit_timestamp int64
                       v1: v0 + expire_timestamp int64 (after commit_timestamp)
                       v2: as v0
                       v3: offset, leader_epoch int32, metadata, commit_timestamp
                       v4: as v3, flexible (compact strings, tagged fields)
    GroupMetadataValue v0: protocol_type string, generation int32, protocol string?, leader
                           string?, members [member_id, client_id, client_host,
                           session_timeout int32, subscription bytes, assignment bytes]
                       v1: members add rebalance_timeout int32 before session_timeout
                       v2: current_state_timestamp int64 after leader
                       v3: members add group_instance_id string? after member_id
                       v4: as v3, flexible

Samsa writes key version 1 and value version 3 for offsets (value version 1 when a commit carries
an expire timestamp, OffsetCommit v2-4 retention_time, as Kafka does) and key version 2 with value
version 3 for groups, which is what Kafka 2.3 to 4.x write; it reads all versions above. Facts from
Kafka's OffsetCommitKey/Value.json and GroupMetadataKey/Value.json message specs.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from protocol.errors import CorruptRecordError
from protocol.types import NO_LEADER_EPOCH, LeaderEpoch, Offset

OFFSET_COMMIT_KEY_VERSION = 1
GROUP_METADATA_KEY_VERSION = 2
OFFSET_VALUE_VERSION = 3
OFFSET_VALUE_VERSION_WITH_EXPIRY = 1
GROUP_VALUE_VERSION = 3
NO_TIMESTAMP = -1

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")


# --- values ---------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class OffsetCommitKey:
    group: str
    topic: str
    partition: int


@dataclass(frozen=True, slots=True)
class GroupMetadataKey:
    group: str


RecordKey = OffsetCommitKey | GroupMetadataKey


@dataclass(frozen=True, slots=True)
class OffsetAndMetadata:
    """A committed offset (OffsetCommitValue)."""

    offset: Offset
    leader_epoch: LeaderEpoch
    metadata: str
    commit_timestamp: int
    expire_timestamp: int = NO_TIMESTAMP


@dataclass(frozen=True, slots=True)
class MemberRecord:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    subscription: bytes
    assignment: bytes


@dataclass(frozen=True, slots=True)
class GroupMetadataValue:
    protocol_type: str
    generation: int
    protocol: str | None
    leader: str | None
    current_state_timestamp: int
    members: tuple[MemberRecord, ...]


# --- writer ---------------------------------------------------------------------------------------


class _Writer:
    __slots__ = ("out",)

    def __init__(self, version: int) -> None:
        self.out = bytearray(_I16.pack(version))

    def i32(self, v: int) -> None:
        self.out += _I32.pack(v)

    def i64(self, v: int) -> None:
        self.out += _I64.pack(v)

    def string(self, v: str | None) -> None:
        if v is None:
            self.out += _I16.pack(-1)
            return
        data = v.encode("utf-8")
        if len(data) > 0x7FFF:
            raise ValueError(f"string of {len(data)} bytes does not fit an int16 length")
        self.out += _I16.pack(len(data))
        self.out += data

    def bytes_(self, v: bytes) -> None:
        self.out += _I32.pack(len(v))
        self.out += v


def offset_commit_key(group: str, topic: str, partition: int) -> bytes:
    w = _Writer(OFFSET_COMMIT_KEY_VERSION)
    w.string(group)
    w.string(topic)
    w.i32(partition)
    return bytes(w.out)


def group_metadata_key(group: str) -> bytes:
    w = _Writer(GROUP_METADATA_KEY_VERSION)
    w.string(group)
    return bytes(w.out)


def offset_commit_value(value: OffsetAndMetadata) -> bytes:
    """Version 3, or version 1 when the commit has an expire timestamp (as Kafka chooses)."""
    if value.expire_timestamp != NO_TIMESTAMP:
        w = _Writer(OFFSET_VALUE_VERSION_WITH_EXPIRY)
        w.i64(value.offset)
        w.string(value.metadata)
        w.i64(value.commit_timestamp)
        w.i64(value.expire_timestamp)
        return bytes(w.out)
    w = _Writer(OFFSET_VALUE_VERSION)
    w.i64(value.offset)
    w.i32(value.leader_epoch)
    w.string(value.metadata)
    w.i64(value.commit_timestamp)
    return bytes(w.out)


def group_metadata_value(value: GroupMetadataValue) -> bytes:
    w = _Writer(GROUP_VALUE_VERSION)
    w.string(value.protocol_type)
    w.i32(value.generation)
    w.string(value.protocol)
    w.string(value.leader)
    w.i64(value.current_state_timestamp)
    w.i32(len(value.members))
    for m in value.members:
        w.string(m.member_id)
        w.string(m.group_instance_id)
        w.string(m.client_id)
        w.string(m.client_host)
        w.i32(m.rebalance_timeout_ms)
        w.i32(m.session_timeout_ms)
        w.bytes_(m.subscription)
        w.bytes_(m.assignment)
    return bytes(w.out)


# --- reader ---------------------------------------------------------------------------------------


class _Reader:
    """Reads classic or (for value version 4) flexible encodings."""

    __slots__ = ("buf", "pos", "flexible")

    def __init__(self, buf: bytes, flexible: bool = False) -> None:
        self.buf = buf
        self.pos = 2  # after the version
        self.flexible = flexible

    def _take(self, n: int) -> bytes:
        end = self.pos + n
        if n < 0 or end > len(self.buf):
            raise CorruptRecordError(f"__consumer_offsets record truncated at {self.pos}")
        data = self.buf[self.pos : end]
        self.pos = end
        return data

    def i32(self) -> int:
        return int(_I32.unpack(self._take(4))[0])

    def i64(self) -> int:
        return int(_I64.unpack(self._take(8))[0])

    def uvarint(self) -> int:
        value = shift = 0
        while True:
            byte = self._take(1)[0]
            value |= (byte & 0x7F) << shift
            if not byte & 0x80:
                return value
            shift += 7
            if shift > 28:
                raise CorruptRecordError("unsigned varint too long in __consumer_offsets record")

    def string(self) -> str | None:
        n = self.uvarint() - 1 if self.flexible else int(_I16.unpack(self._take(2))[0])
        if n < 0:
            return None
        try:
            return self._take(n).decode("utf-8")
        except UnicodeDecodeError as e:
            raise CorruptRecordError(f"invalid UTF-8 in __consumer_offsets record: {e}") from e

    def bytes_(self) -> bytes:
        n = self.uvarint() - 1 if self.flexible else self.i32()
        return b"" if n < 0 else self._take(n)

    def array_len(self) -> int:
        return self.uvarint() - 1 if self.flexible else self.i32()

    def tagged_fields(self) -> None:
        if self.flexible:
            for _ in range(self.uvarint()):
                self.uvarint()  # tag
                self._take(self.uvarint())


def _version(buf: bytes | None) -> int:
    if buf is None or len(buf) < 2:
        raise CorruptRecordError("__consumer_offsets record key or value shorter than its version")
    return int(_I16.unpack_from(buf, 0)[0])


def read_key(buf: bytes | None) -> RecordKey | None:
    """The key of a `__consumer_offsets` record; None for key versions Samsa does not use
    (Kafka 3.x/4.x new-protocol consumer and share group records)."""
    version = _version(buf)
    assert buf is not None
    r = _Reader(buf)
    if version in (0, 1):
        group, topic = r.string(), r.string()
        partition = r.i32()
        if group is None or topic is None:
            raise CorruptRecordError("null group or topic in an offset commit key")
        return OffsetCommitKey(group, topic, partition)
    if version == 2:
        group = r.string()
        if group is None:
            raise CorruptRecordError("null group in a group metadata key")
        return GroupMetadataKey(group)
    return None


def read_offset_value(buf: bytes | None) -> OffsetAndMetadata | None:
    """An OffsetCommitValue v0-v4; None for a tombstone."""
    if buf is None:
        return None
    version = _version(buf)
    if not 0 <= version <= 4:
        raise CorruptRecordError(f"unknown offset commit value version {version}")
    r = _Reader(buf, flexible=version >= 4)
    offset = r.i64()
    epoch = r.i32() if version >= 3 else NO_LEADER_EPOCH
    metadata = r.string() or ""
    commit_timestamp = r.i64()
    expire = r.i64() if version == 1 else NO_TIMESTAMP
    r.tagged_fields()
    return OffsetAndMetadata(Offset(offset), LeaderEpoch(epoch), metadata, commit_timestamp, expire)


def read_group_value(buf: bytes | None) -> GroupMetadataValue | None:
    """A GroupMetadataValue v0-v4; None for a tombstone."""
    if buf is None:
        return None
    version = _version(buf)
    if not 0 <= version <= 4:
        raise CorruptRecordError(f"unknown group metadata value version {version}")
    r = _Reader(buf, flexible=version >= 4)
    protocol_type = r.string() or ""
    generation = r.i32()
    protocol = r.string()
    leader = r.string()
    state_ts = r.i64() if version >= 2 else NO_TIMESTAMP
    members = []
    for _ in range(max(r.array_len(), 0)):
        member_id = r.string() or ""
        instance_id = r.string() if version >= 3 else None
        client_id = r.string() or ""
        client_host = r.string() or ""
        rebalance_timeout = r.i32() if version >= 1 else -1
        session_timeout = r.i32()
        if rebalance_timeout < 0:
            rebalance_timeout = session_timeout
        subscription = r.bytes_()
        assignment = r.bytes_()
        r.tagged_fields()
        members.append(
            MemberRecord(
                member_id, instance_id, client_id, client_host, rebalance_timeout,
                session_timeout, subscription, assignment,
            )
        )  # fmt: skip
    r.tagged_fields()
    return GroupMetadataValue(protocol_type, generation, protocol, leader, state_ts, tuple(members))


# --- the partition of a group ---------------------------------------------------------------------


def java_string_hash(s: str) -> int:
    """Java's String.hashCode: h = 31*h + c over UTF-16 code units, as an int32."""
    h = 0
    data = s.encode("utf-16-be", "surrogatepass")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def partition_for(group_id: str, num_partitions: int) -> int:
    """Kafka's `Utils.abs(groupId.hashCode) % offsets.topic.num.partitions` (abs(MIN_INT) = 0)."""
    h = java_string_hash(group_id)
    return (0 if h == -(1 << 31) else abs(h)) % num_partitions
