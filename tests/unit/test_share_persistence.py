"""A share partition's state through the share coordinator's store and back (broker/share/):
what SharePartition writes on acknowledgements and lock expiries, replayed from the record bytes
as a new leader would, gives a SharePartition that never redelivers a record whose delivery was
completed and redelivers every other one."""

from __future__ import annotations

import uuid

from broker.share.in_flight import (
    AcknowledgementBatch,
    AcknowledgeType,
    AcquiredRecords,
    FetchedBatch,
    PersisterStateBatch,
    RecordState,
    SharePartitionSettings,
)
from broker.share.share_partition import SharePartition, StateTransition
from broker.share.share_state import (
    UNINITIALIZED_START_OFFSET,
    SharePartitionKey,
    ShareStateRecord,
    ShareStateStore,
)
from broker.share.state_records import key_bytes, read_key, read_value, value_bytes

KEY = SharePartitionKey("g", uuid.UUID(int=9), 0)
LOG = [FetchedBatch(first, first + 4) for first in range(0, 20, 5)]  # the partition: 20 records
ACCEPT, RELEASE, REJECT = (
    int(t) for t in (AcknowledgeType.ACCEPT, AcknowledgeType.RELEASE, AcknowledgeType.REJECT)
)


class Coordinator:
    """The share coordinator's store, every record written as bytes and replayed from them."""

    def __init__(self) -> None:
        self.store = ShareStateStore(updates_per_snapshot=2)
        self.log: list[tuple[bytes, bytes | None]] = []

    def append(self, record: ShareStateRecord) -> None:
        key, value = record
        raw = (key_bytes(key), None if value is None else value_bytes(value))
        self.log.append(raw)
        self.store.replay(_decode(raw))

    def reloaded(self) -> ShareStateStore:
        fresh = ShareStateStore(updates_per_snapshot=2)
        for raw in self.log:
            fresh.replay(_decode(raw))
        return fresh


def _decode(raw: tuple[bytes, bytes | None]) -> ShareStateRecord:
    key = read_key(raw[0])
    return key, None if raw[1] is None else read_value(key.type, raw[1])


def load(store: ShareStateStore, earliest: int) -> SharePartition:
    """A leader initializing its share partition from the store (Kafka's maybeInitialize)."""
    state = store.read(KEY)
    assert state is not None
    start = earliest if state.start_offset == UNINITIALIZED_START_OFFSET else state.start_offset
    return SharePartition("g", "t", 0, SharePartitionSettings(), start, state.state_batches)


def write(coordinator: Coordinator, sp: SharePartition, batches: list[PersisterStateBatch], now: int) -> None:
    coordinator.append(
        coordinator.store.write_record(KEY, sp.start_offset, 0, sp.delivery_complete_count(), batches, now)
    )


def persist(coordinator: Coordinator, sp: SharePartition, transition: StateTransition, now: int) -> None:
    write(coordinator, sp, transition.state_batches, now)
    transition.commit(now)


def fetch(sp: SharePartition, member: str, now: int) -> list[AcquiredRecords]:
    offset = sp.next_fetch_offset()
    return sp.acquire(member, [b for b in LOG if b.last_offset >= offset], offset, 500, 5, now)


def ack(
    coordinator: Coordinator, sp: SharePartition, member: str, first: int, last: int, t: int, now: int
) -> None:
    persist(coordinator, sp, sp.acknowledge(member, [AcknowledgementBatch(first, last, (t,))], now), now)


def test_completed_deliveries_survive_a_leader_change_and_the_rest_is_redelivered() -> None:
    coordinator = Coordinator()
    coordinator.append(coordinator.store.initialize_record(KEY, state_epoch=0, start_offset=-1, now_ms=0))
    sp = load(coordinator.store, earliest=0)
    assert [(a.first_offset, a.last_offset) for a in fetch(sp, "a", 0)] == [
        (0, 4),
        (5, 9),
        (10, 14),
        (15, 19),
    ]
    ack(coordinator, sp, "a", 0, 4, ACCEPT, 1)
    ack(coordinator, sp, "a", 5, 6, REJECT, 2)
    ack(coordinator, sp, "a", 10, 12, ACCEPT, 3)
    ack(coordinator, sp, "a", 13, 14, RELEASE, 4)
    # 7-9 and 15-19 are held by "a", which crashes: their locks expire.
    write(coordinator, sp, sp.expire_locks(40_000), 40_000)
    assert sp.start_offset == 7

    # The leader moves: a new one loads the state from the records' bytes.
    moved = load(coordinator.reloaded(), earliest=0)
    assert moved.start_offset == 7
    assert moved.next_fetch_offset() == 7
    delivered: dict[int, int] = {}
    for attempt in range(5):
        got = fetch(moved, "b", 50_000 + attempt)
        if not got:
            break
        for a in got:
            for offset in range(a.first_offset, a.last_offset + 1):
                delivered[offset] = a.delivery_count
            ack(coordinator, moved, "b", a.first_offset, a.last_offset, ACCEPT, 50_000 + attempt)
    # Every record whose delivery was not complete comes again, none of the completed ones.
    assert sorted(delivered) == [7, 8, 9, 13, 14, 15, 16, 17, 18, 19]
    assert delivered[13] == 2  # released once before: its count was persisted
    assert (moved.start_offset, moved.cached_state) == (20, {})
    final = coordinator.reloaded().read(KEY)
    assert final is not None and final.state_batches[-1].last_offset == 19


def test_an_uninitialized_share_partition_starts_at_the_reset_offset() -> None:
    coordinator = Coordinator()
    coordinator.append(coordinator.store.initialize_record(KEY, 0, -1, now_ms=0))
    sp = load(coordinator.store, earliest=10)
    assert sp.next_fetch_offset() == 10
    assert fetch(sp, "a", 0)[0] == AcquiredRecords(10, 14, 1)
    ack(coordinator, sp, "a", 10, 14, ACCEPT, 1)
    state = coordinator.reloaded().read(KEY)
    assert state is not None
    assert state.state_batches == (PersisterStateBatch(10, 14, RecordState.ACKNOWLEDGED, 1),)
    assert load(coordinator.reloaded(), earliest=0).next_fetch_offset() == 15
