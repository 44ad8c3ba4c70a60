"""The share coordinator's state store (broker/share/share_state.py): initialize, write as
updates then snapshots, replay after a restart, delete; merging written batches (Kafka's own
combiner checks the merge in compat/test_share_state.py)."""

from __future__ import annotations

import uuid

from broker.share.in_flight import PersisterStateBatch, RecordState
from broker.share.share_state import SharePartitionKey, ShareStateStore, combine_state_batches
from broker.share.state_records import (
    SHARE_SNAPSHOT,
    SHARE_UPDATE,
    key_bytes,
    read_key,
    read_value,
    value_bytes,
)

KEY = SharePartitionKey("g", uuid.UUID(int=7), 0)
A, K, X = RecordState.AVAILABLE, RecordState.ACKNOWLEDGED, RecordState.ARCHIVED


def b(first: int, last: int, state: RecordState, count: int) -> PersisterStateBatch:
    return PersisterStateBatch(first, last, state, count)


def test_initialize_then_write_updates_and_a_snapshot_every_n() -> None:
    store = ShareStateStore(updates_per_snapshot=2)
    store.replay(store.initialize_record(KEY, state_epoch=1, start_offset=-1, now_ms=100))
    state = store.read(KEY)
    assert state is not None
    assert (state.snapshot_epoch, state.state_epoch, state.start_offset, state.delivery_complete_count) == (
        0,
        1,
        -1,
        -1,
    )

    first = store.write_record(KEY, 0, 0, -1, [b(0, 4, K, 1), b(5, 9, A, 1)], now_ms=200)
    assert first[0].type == SHARE_UPDATE
    store.replay(first)
    second = store.write_record(KEY, 5, 0, -1, [b(5, 6, X, 1)], now_ms=300)
    store.replay(second)
    state = store.read(KEY)
    assert state is not None and state.start_offset == 5
    assert state.state_batches == (b(5, 6, X, 1), b(7, 9, A, 1))
    # Two updates since the snapshot: the next write is a new snapshot of everything.
    third = store.write_record(KEY, -1, 0, 3, [b(7, 9, K, 1)], now_ms=400)
    assert third[0].type == SHARE_SNAPSHOT
    store.replay(third)
    state = store.read(KEY)
    assert state is not None
    assert (state.snapshot_epoch, state.start_offset, state.create_timestamp_ms) == (1, 5, 400)
    assert state.state_batches == (b(5, 6, X, 1), b(7, 9, K, 1))
    assert store.write_record(KEY, -1, 0, 3, [], now_ms=500)[0].type == SHARE_UPDATE


def test_replaying_the_written_bytes_rebuilds_the_same_state() -> None:
    store = ShareStateStore(updates_per_snapshot=3)
    log = [store.initialize_record(KEY, 1, 0, now_ms=1)]
    store.replay(log[-1])
    for i in range(6):
        log.append(
            store.write_record(KEY, i, 0, -1, [b(i, i, K, 1), b(i + 1, i + 3, A, i + 1)], now_ms=10 + i)
        )
        store.replay(log[-1])
    reloaded = ShareStateStore(updates_per_snapshot=3)
    for key, value in log:
        k = read_key(key_bytes(key))
        reloaded.replay((k, None if value is None else read_value(k.type, value_bytes(value))))
    assert reloaded.read(KEY) == store.read(KEY)


def test_a_tombstone_deletes_the_state() -> None:
    store = ShareStateStore()
    store.replay(store.initialize_record(KEY, 1, 0, now_ms=1))
    store.replay(store.delete_record(KEY))
    assert store.read(KEY) is None
    # A re-initialization starts a new snapshot epoch sequence.
    store.replay(store.initialize_record(KEY, 2, 40, now_ms=2))
    state = store.read(KEY)
    assert state is not None and (state.snapshot_epoch, state.state_epoch, state.delivery_complete_count) == (
        0,
        2,
        0,
    )


def test_combining_keeps_the_most_advanced_state_of_each_record() -> None:
    assert combine_state_batches([b(0, 9, A, 1)], [b(3, 5, K, 1)], -1) == [
        b(0, 2, A, 1),
        b(3, 5, K, 1),
        b(6, 9, A, 1),
    ]
    assert combine_state_batches([b(0, 9, A, 2)], [b(3, 5, K, 1)], -1) == [b(0, 9, A, 2)]
    assert combine_state_batches([b(0, 4, K, 1)], [b(5, 9, K, 1)], 2) == [b(2, 9, K, 1)]
