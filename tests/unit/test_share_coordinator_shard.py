"""The share coordinator's answers to the share-group state RPCs (broker/share/share_coordinator_shard.py)
with Kafka 4.3.1's ShareCoordinatorShard errors and messages; every record goes through its bytes
before the store replays it, as a loading coordinator would read it."""

from __future__ import annotations

import uuid

from broker.share import share_coordinator_shard as shard
from broker.share.in_flight import PersisterStateBatch, RecordState
from broker.share.share_state import SharePartitionKey, ShareStateRecord, ShareStateStore
from broker.share.state_records import key_bytes, read_key, read_value, value_bytes
from protocol.errors import ErrorCode

TOPIC = uuid.UUID(int=7)
KEY = SharePartitionKey("g", TOPIC, 0)
BATCH = PersisterStateBatch(0, 4, RecordState.ACKNOWLEDGED, 1)


def partitions(topic_id: uuid.UUID) -> int | None:
    return 2 if topic_id == TOPIC else None


def written(store: ShareStateStore, records: list[ShareStateRecord]) -> int:
    for key, value in records:
        k = read_key(key_bytes(key))
        store.replay((k, None if value is None else read_value(k.type, value_bytes(value))))
    return len(records)


def test_uninitialized_share_partition() -> None:
    store = ShareStateStore()
    answer, records = shard.write(store, partitions, KEY, 0, 0, 0, 0, [BATCH], now_ms=1)
    assert (answer.error, answer.message, records) == (
        ErrorCode.invalid_request,
        shard.WRITE_UNINITIALIZED,
        [],
    )
    read, records = shard.read(store, partitions, KEY, 0, now_ms=1)
    assert (read.error, read.message, records) == (ErrorCode.invalid_request, shard.READ_UNINITIALIZED, [])
    summary = shard.read_summary(store, partitions, KEY)
    assert summary == shard.SummaryAnswer(
        state_epoch=0, leader_epoch=0, start_offset=-1, delivery_complete_count=-1
    )
    assert shard.delete(store, partitions, KEY) == (shard.StateAnswer(), [])


def test_unknown_topic_partition_and_bad_partition() -> None:
    store = ShareStateStore()
    for key in (SharePartitionKey("g", uuid.UUID(int=8), 0), SharePartitionKey("g", TOPIC, 2)):
        answer, records = shard.initialize(store, partitions, key, 0, -1, now_ms=1)
        assert (answer.error, answer.message, records) == (
            ErrorCode.unknown_topic_or_partition,
            shard.UNKNOWN_TOPIC_OR_PARTITION,
            [],
        )
        assert shard.read_summary(store, partitions, key).error == ErrorCode.unknown_topic_or_partition
        assert shard.delete(store, partitions, key)[0].error == ErrorCode.unknown_topic_or_partition
    negative = SharePartitionKey("g", TOPIC, -1)
    assert shard.initialize(store, partitions, negative, 0, -1, now_ms=1)[0] == shard.StateAnswer(
        ErrorCode.invalid_request, shard.NEGATIVE_PARTITION_ID
    )
    assert shard.read(store, partitions, negative, 0, now_ms=1)[0].message == shard.NEGATIVE_PARTITION_ID


def test_initialize_write_read_and_the_epoch_fences() -> None:
    store = ShareStateStore()
    answer, records = shard.initialize(store, partitions, KEY, 1, -1, now_ms=1)
    assert answer == shard.StateAnswer() and written(store, records) == 1
    answer, records = shard.write(store, partitions, KEY, 1, 0, 0, 4, [BATCH], now_ms=2)
    assert answer == shard.StateAnswer() and written(store, records) == 1

    # the new leader of the partition reads with its leader epoch: recorded by a write
    read, records = shard.read(store, partitions, KEY, 3, now_ms=3)
    assert (read.error, read.state_epoch, read.start_offset, read.state_batches) == (
        ErrorCode.none,
        1,
        0,
        (BATCH,),
    )
    assert written(store, records) == 1 and store.leader_epochs[KEY] == 3
    assert shard.read(store, partitions, KEY, 3, now_ms=4)[1] == []  # already known: nothing written
    assert shard.read(store, partitions, KEY, -1, now_ms=4)[1] == []

    # an older leader or state epoch is fenced; -1 is not checked
    stale, records = shard.write(store, partitions, KEY, 1, 2, 0, 4, [], now_ms=5)
    assert (stale.error, stale.message, records) == (
        ErrorCode.fenced_leader_epoch,
        shard.FENCED_LEADER_EPOCH,
        [],
    )
    assert shard.read(store, partitions, KEY, 2, now_ms=5)[0].error == ErrorCode.fenced_leader_epoch
    assert shard.write(store, partitions, KEY, 0, 3, 0, 4, [], now_ms=5)[0] == shard.StateAnswer(
        ErrorCode.fenced_state_epoch, shard.FENCED_STATE_EPOCH
    )
    assert shard.initialize(store, partitions, KEY, 0, 0, now_ms=5)[0].error == ErrorCode.fenced_state_epoch
    answer, records = shard.write(store, partitions, KEY, -1, -1, 5, 5, [], now_ms=6)
    assert answer == shard.StateAnswer() and written(store, records) == 1

    summary = shard.read_summary(store, partitions, KEY)
    assert summary == shard.SummaryAnswer(
        state_epoch=1, leader_epoch=3, start_offset=5, delivery_complete_count=5
    )

    # a new state epoch re-initializes from scratch; a delete removes it all
    answer, records = shard.initialize(store, partitions, KEY, 2, 10, now_ms=7)
    assert answer == shard.StateAnswer() and written(store, records) == 1
    read, _ = shard.read(store, partitions, KEY, -1, now_ms=8)
    assert (read.state_epoch, read.start_offset, read.state_batches) == (2, 10, ())
    answer, records = shard.delete(store, partitions, KEY)
    assert answer == shard.StateAnswer() and written(store, records) == 1
    assert store.read(KEY) is None and KEY not in store.leader_epochs and KEY not in store.state_epochs
    assert shard.read(store, partitions, KEY, 0, now_ms=9)[0].message == shard.READ_UNINITIALIZED
