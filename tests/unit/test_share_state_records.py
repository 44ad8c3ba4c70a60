"""`__share_group_state` records (broker/share/state_records.py) byte for byte as Kafka 4.3.1
writes them. The expected bytes were produced by Kafka's own generated classes
(kafka-share-coordinator-4.3.1.jar: ShareSnapshotKey/Value, ShareUpdateKey/Value written with
MessageUtil.toCoordinatorTypePrefixedBytes / toVersionPrefixedBytes(0, ...)) for the values
below."""

from __future__ import annotations

import uuid

import pytest

from broker.share.in_flight import PersisterStateBatch, RecordState
from broker.share.state_records import (
    SHARE_SNAPSHOT,
    SHARE_UPDATE,
    ShareSnapshotValue,
    ShareStateKey,
    ShareUpdateValue,
    key_bytes,
    read_key,
    read_snapshot_value,
    read_update_value,
    snapshot_value_bytes,
    update_value_bytes,
)
from protocol.errors import CorruptRecordError

TOPIC = uuid.UUID("01020304-0506-0708-090a-0b0c0d0e0f10")
SNAPSHOT = ShareSnapshotValue(
    snapshot_epoch=2,
    state_epoch=1,
    leader_epoch=7,
    start_offset=100,
    create_timestamp_ms=1_700_000_000_000,
    write_timestamp_ms=1_700_000_000_123,
    state_batches=(
        PersisterStateBatch(100, 104, RecordState.AVAILABLE, 2),
        PersisterStateBatch(105, 105, RecordState.ARCHIVED, 5),
    ),
)
UPDATE = ShareUpdateValue(2, 7, -1, (PersisterStateBatch(106, 109, RecordState.ACKNOWLEDGED, 1),))

KAFKA = {
    "snapshot_key": "0000000267310102030405060708090a0b0c0d0e0f1000000003",
    "update_key": "0001000267310102030405060708090a0b0c0d0e0f1000000003",
    "snapshot_value": "000000000002000000010000000700000000000000640000018bcfe568000000018bcfe5687b03"
    "0000000000000064000000000000006800000200000000000000006900000000000000690400050000",
    "snapshot_value_dcc": "000000000002000000010000000700000000000000640000018bcfe568000000018bcfe5687b03"
    "0000000000000064000000000000006800000200000000000000006900000000000000690400050001000400000001",
    "update_value": "00000000000200000007ffffffffffffffff02000000000000006a000000000000006d0200010000",
    "update_value_dcc": "00000000000200000007ffffffffffffffff02000000000000006a000000000000006d0200010001000400000004",
}


def test_keys_as_kafka_writes_them() -> None:
    snapshot_key = ShareStateKey(SHARE_SNAPSHOT, "g1", TOPIC, 3)
    update_key = ShareStateKey(SHARE_UPDATE, "g1", TOPIC, 3)
    assert key_bytes(snapshot_key).hex() == KAFKA["snapshot_key"]
    assert key_bytes(update_key).hex() == KAFKA["update_key"]
    assert read_key(bytes.fromhex(KAFKA["snapshot_key"])) == snapshot_key
    assert read_key(bytes.fromhex(KAFKA["update_key"])) == update_key


@pytest.mark.parametrize(
    ("value", "name"),
    [
        (SNAPSHOT, "snapshot_value"),
        (
            ShareSnapshotValue(2, 1, 7, 100, 1_700_000_000_000, 1_700_000_000_123, SNAPSHOT.state_batches, 1),
            "snapshot_value_dcc",
        ),
    ],
)
def test_snapshot_values_as_kafka_writes_them(value: ShareSnapshotValue, name: str) -> None:
    assert snapshot_value_bytes(value).hex() == KAFKA[name]
    assert read_snapshot_value(bytes.fromhex(KAFKA[name])) == value


@pytest.mark.parametrize(
    ("value", "name"),
    [(UPDATE, "update_value"), (ShareUpdateValue(2, 7, -1, UPDATE.state_batches, 4), "update_value_dcc")],
)
def test_update_values_as_kafka_writes_them(value: ShareUpdateValue, name: str) -> None:
    assert update_value_bytes(value).hex() == KAFKA[name]
    assert read_update_value(bytes.fromhex(KAFKA[name])) == value


@pytest.mark.parametrize(
    "data",
    [
        b"",
        bytes.fromhex(KAFKA["snapshot_value"])[:-3],
        bytes.fromhex("0001") + bytes.fromhex(KAFKA["snapshot_value"])[2:],
        bytes.fromhex(KAFKA["snapshot_value"]).replace(
            bytes.fromhex("0400050000"), bytes.fromhex("0900050000")
        ),
    ],
)
def test_corrupt_snapshot_values_are_refused(data: bytes) -> None:
    with pytest.raises(CorruptRecordError):
        read_snapshot_value(data)


def test_unknown_key_types_are_refused() -> None:
    with pytest.raises(CorruptRecordError):
        read_key(bytes.fromhex("0005" + KAFKA["snapshot_key"][4:]))
