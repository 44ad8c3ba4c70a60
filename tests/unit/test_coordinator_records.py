"""`__consumer_offsets` record formats, byte for byte as Kafka's OffsetCommitKey/Value and
GroupMetadataKey/Value specs lay them out, and the group -> partition mapping (Java hashCode)."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from broker.coordinator.loader import LoadState, decode_chunk
from broker.coordinator.records import (
    GroupMetadataKey,
    GroupMetadataValue,
    MemberRecord,
    OffsetAndMetadata,
    OffsetCommitKey,
    group_metadata_key,
    group_metadata_value,
    java_string_hash,
    offset_commit_key,
    offset_commit_value,
    partition_for,
    read_group_value,
    read_key,
    read_offset_value,
)
from protocol.errors import CorruptRecordError
from protocol.records import NewRecord, build_batch
from protocol.topic_partition import TopicPartition
from protocol.types import LeaderEpoch, Offset


def s16(text: str) -> bytes:
    data = text.encode()
    return struct.pack(">h", len(data)) + data


def test_offset_commit_key_is_version_1_group_topic_partition() -> None:
    assert offset_commit_key("grp", "topic", 7) == b"\x00\x01" + s16("grp") + s16("topic") + b"\x00\x00\x00\x07"
    assert read_key(offset_commit_key("grp", "topic", 7)) == OffsetCommitKey("grp", "topic", 7)
    # key version 0 (older Kafka) has the same layout
    assert read_key(b"\x00\x00" + s16("g") + s16("t") + b"\x00\x00\x00\x01") == OffsetCommitKey("g", "t", 1)


def test_group_metadata_key_is_version_2_group() -> None:
    assert group_metadata_key("grp") == b"\x00\x02" + s16("grp")
    assert read_key(group_metadata_key("grp")) == GroupMetadataKey("grp")


def test_unknown_key_versions_are_skipped_not_errors() -> None:
    # Kafka 3.x+/4.x consumer-group (KIP-848) records use key versions 3 and up
    assert read_key(b"\x00\x03" + s16("grp")) is None
    with pytest.raises(CorruptRecordError):
        read_key(b"\x00")


def test_offset_commit_value_v3_layout() -> None:
    value = OffsetAndMetadata(Offset(42), LeaderEpoch(5), "meta", 1_700_000_000_000)
    expected = (
        b"\x00\x03" + struct.pack(">q", 42) + struct.pack(">i", 5) + s16("meta") + struct.pack(">q", 1_700_000_000_000)
    )
    assert offset_commit_value(value) == expected
    assert read_offset_value(expected) == value


def test_offset_commit_value_v1_carries_the_expire_timestamp() -> None:
    value = OffsetAndMetadata(Offset(9), LeaderEpoch(-1), "", 1000, expire_timestamp=5000)
    encoded = offset_commit_value(value)
    assert encoded == b"\x00\x01" + struct.pack(">q", 9) + s16("") + struct.pack(">q", 1000) + struct.pack(">q", 5000)
    assert read_offset_value(encoded) == value


def test_offset_commit_values_v0_v2_v4_are_read() -> None:
    v0 = b"\x00\x00" + struct.pack(">q", 3) + s16("x") + struct.pack(">q", 77)
    assert read_offset_value(v0) == OffsetAndMetadata(Offset(3), LeaderEpoch(-1), "x", 77)
    v2 = b"\x00\x02" + v0[2:]
    assert read_offset_value(v2) == OffsetAndMetadata(Offset(3), LeaderEpoch(-1), "x", 77)
    # v4 is flexible: compact string (length + 1 as unsigned varint), trailing tagged fields
    v4 = b"\x00\x04" + struct.pack(">q", 3) + struct.pack(">i", 2) + b"\x02x" + struct.pack(">q", 77) + b"\x00"
    assert read_offset_value(v4) == OffsetAndMetadata(Offset(3), LeaderEpoch(2), "x", 77)
    assert read_offset_value(None) is None  # tombstone


def test_truncated_value_is_corrupt() -> None:
    encoded = offset_commit_value(OffsetAndMetadata(Offset(1), LeaderEpoch(0), "abc", 1))
    with pytest.raises(CorruptRecordError):
        read_offset_value(encoded[:-3])
    with pytest.raises(CorruptRecordError):
        read_offset_value(b"\x00\x09" + encoded[2:])


MEMBER = MemberRecord("m-1", "inst-1", "client", "/10.0.0.1", 30000, 10000, b"\x00\x01sub", b"\x00\x01asg")


def test_group_metadata_value_v3_layout() -> None:
    value = GroupMetadataValue("consumer", 4, "range", "m-1", 123456, (MEMBER,))
    expected = (
        b"\x00\x03"
        + s16("consumer")
        + struct.pack(">i", 4)
        + s16("range")
        + s16("m-1")
        + struct.pack(">q", 123456)
        + struct.pack(">i", 1)
        + s16("m-1")
        + s16("inst-1")
        + s16("client")
        + s16("/10.0.0.1")
        + struct.pack(">i", 30000)
        + struct.pack(">i", 10000)
        + struct.pack(">i", 5) + b"\x00\x01sub"
        + struct.pack(">i", 5) + b"\x00\x01asg"
    )  # fmt: skip
    assert group_metadata_value(value) == expected
    assert read_group_value(expected) == value


def test_empty_group_value_has_null_protocol_and_leader() -> None:
    value = GroupMetadataValue("consumer", 2, None, None, 99, ())
    encoded = group_metadata_value(value)
    assert encoded == b"\x00\x03" + s16("consumer") + struct.pack(">i", 2) + b"\xff\xff\xff\xff" + struct.pack(">q", 99) + b"\x00\x00\x00\x00"
    assert read_group_value(encoded) == value


def test_group_metadata_value_v0_has_no_rebalance_timeout_instance_or_timestamp() -> None:
    v0 = (
        b"\x00\x00" + s16("consumer") + struct.pack(">i", 1) + s16("range") + s16("m")
        + struct.pack(">i", 1) + s16("m") + s16("c") + s16("/h") + struct.pack(">i", 10000)
        + struct.pack(">i", 1) + b"s" + struct.pack(">i", 1) + b"a"
    )  # fmt: skip
    got = read_group_value(v0)
    assert got == GroupMetadataValue(
        "consumer", 1, "range", "m", -1, (MemberRecord("m", None, "c", "/h", 10000, 10000, b"s", b"a"),)
    )


@given(
    group=st.text(min_size=1, max_size=40),
    topic=st.text(min_size=1, max_size=40),
    partition=st.integers(0, 2**31 - 1),
    offset=st.integers(-1, 2**63 - 1),
    epoch=st.integers(-1, 2**31 - 1),
    metadata=st.text(max_size=60),
    ts=st.integers(0, 2**62),
)
def test_offset_records_round_trip(
    group: str, topic: str, partition: int, offset: int, epoch: int, metadata: str, ts: int
) -> None:
    assert read_key(offset_commit_key(group, topic, partition)) == OffsetCommitKey(group, topic, partition)
    value = OffsetAndMetadata(Offset(offset), LeaderEpoch(epoch), metadata, ts)
    assert read_offset_value(offset_commit_value(value)) == value


def test_java_string_hash_and_partition() -> None:
    assert java_string_hash("") == 0
    assert java_string_hash("hello") == 99162322
    assert java_string_hash("Hello World") == -862545276
    assert java_string_hash("\U0001f600") == 0xD83D * 31 + 0xDE00  # two UTF-16 code units
    # hashCode == Integer.MIN_VALUE: Kafka's Utils.abs maps it to 0
    assert java_string_hash("polygenelubricants") == -(2**31)
    assert partition_for("polygenelubricants", 50) == 0
    assert partition_for("Hello World", 50) == 862545276 % 50
    assert partition_for("hello", 7) == 99162322 % 7


def test_load_state_keeps_the_last_value_and_honours_tombstones() -> None:
    tp = TopicPartition("t", 0)
    records = [
        NewRecord(offset_commit_key("g", "t", 0), offset_commit_value(OffsetAndMetadata(Offset(1), LeaderEpoch(0), "", 1))),
        NewRecord(offset_commit_key("g", "t", 0), offset_commit_value(OffsetAndMetadata(Offset(5), LeaderEpoch(0), "", 2))),
        NewRecord(offset_commit_key("g", "t", 1), offset_commit_value(OffsetAndMetadata(Offset(3), LeaderEpoch(0), "", 2))),
        NewRecord(offset_commit_key("g", "t", 1), None),
        NewRecord(group_metadata_key("g"), group_metadata_value(GroupMetadataValue("consumer", 1, None, None, 5, ()))),
        NewRecord(group_metadata_key("gone"), group_metadata_value(GroupMetadataValue("consumer", 1, None, None, 5, ()))),
        NewRecord(group_metadata_key("gone"), None),
        NewRecord(b"\x00\x05junk", b"whatever"),  # a key version Samsa does not use
    ]
    data = build_batch(records[:4], base_offset=10) + build_batch(records[4:], base_offset=14)
    chunk = decode_chunk(data + build_batch(records[:1], base_offset=18)[:30], 10)  # + a partial batch
    assert chunk.next_offset == 18
    assert chunk.skipped == 1
    state = LoadState()
    state.apply(chunk)
    assert state.offsets == {"g": {tp: OffsetAndMetadata(Offset(5), LeaderEpoch(0), "", 2)}}
    assert set(state.groups) == {"g"}
    assert state.group_ids() == {"g"}
