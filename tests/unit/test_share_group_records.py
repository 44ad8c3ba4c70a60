"""A share group's `__consumer_offsets` records (broker/share/group_records.py) byte for byte as
Kafka 4.3.1 writes them. The expected bytes were produced by Kafka's own generated classes
(kafka-group-coordinator-4.3.1.jar: ShareGroup*Key/Value written with
MessageUtil.toCoordinatorTypePrefixedBytes / toVersionPrefixedBytes(0, ...)) for the values
below."""

from __future__ import annotations

import uuid

import pytest

from broker.share import group_records as rec
from protocol.errors import CorruptRecordError

T = uuid.UUID("01020304-0506-0708-090a-0b0c0d0e0f10")

KEYS = {
    "000b00026731": rec.ShareGroupKey(rec.GROUP_METADATA, "g1"),
    "000a0002673100026d31": rec.ShareGroupKey(rec.MEMBER_METADATA, "g1", "m1"),
    "000d0002673100026d31": rec.ShareGroupKey(rec.TARGET_MEMBER, "g1", "m1"),
    "000e0002673100026d31": rec.ShareGroupKey(rec.CURRENT_ASSIGNMENT, "g1", "m1"),
    "000c00026731": rec.ShareGroupKey(rec.TARGET_METADATA, "g1"),
    "000f00026731": rec.ShareGroupKey(rec.STATE_PARTITION_METADATA, "g1"),
}
VALUES: list[tuple[int, rec.ShareGroupValue, str]] = [
    (rec.GROUP_METADATA, rec.GroupMetadataValue(7), "000000000007000000000000000000"),
    (
        rec.MEMBER_METADATA,
        rec.MemberMetadataValue(None, "c", "/127.0.0.1", ("foo", "bar")),
        "00000002630b2f3132372e302e302e310304666f6f0462617200",
    ),
    (
        rec.TARGET_METADATA,
        rec.TargetMetadataValue(3, 1_700_000_000_000),
        "0000000000030100080000018bcfe56800",
    ),
    (
        rec.TARGET_MEMBER,
        {T: frozenset({0, 2})},
        "0000020102030405060708090a0b0c0d0e0f100300000000000000020000",
    ),
    (
        rec.CURRENT_ASSIGNMENT,
        rec.CurrentAssignmentValue(4, 3, {T: frozenset({1})}),
        "0000000000040000000300020102030405060708090a0b0c0d0e0f1002000000010000",
    ),
    (
        rec.STATE_PARTITION_METADATA,
        rec.StatePartitionMetadataValue(
            (rec.TopicPartitionsInfo(T, "foo", (2,)),),
            (rec.TopicPartitionsInfo(T, "foo", (0, 1)),),
            ((T, "old"),),
        ),
        "0000020102030405060708090a0b0c0d0e0f1004666f6f020000000200020102030405060708090a0b0c0d0e0f1004666f6f"
        "03000000000000000100020102030405060708090a0b0c0d0e0f10046f6c640000",
    ),
]


@pytest.mark.parametrize(("raw", "key"), list(KEYS.items()))
def test_keys_as_kafka_writes_them(raw: str, key: rec.ShareGroupKey) -> None:
    assert rec.key_bytes(key).hex() == raw
    assert rec.read_key(bytes.fromhex(raw)) == key


@pytest.mark.parametrize(("record_type", "value", "raw"), VALUES)
def test_values_as_kafka_writes_them(record_type: int, value: rec.ShareGroupValue, raw: str) -> None:
    assert rec.value_bytes(value).hex() == raw
    assert rec.read_value(record_type, bytes.fromhex(raw)) == value


def test_other_record_types_and_tombstones() -> None:
    assert rec.read_key(bytes.fromhex("000300026731")) is None  # a consumer group's record
    assert rec.read_value(rec.GROUP_METADATA, None) is None
    with pytest.raises(CorruptRecordError):
        rec.read_value(rec.CURRENT_ASSIGNMENT, bytes.fromhex(VALUES[4][2])[:-5])
