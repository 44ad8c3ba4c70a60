"""The share partition state machine (broker/share/share_partition.py): acquisition, locks,
delivery counts, acknowledgements and the share-partition start and end offsets, with the
answers Kafka's SharePartition gives."""

from __future__ import annotations

import pytest

from broker.share.in_flight import (
    EMPTY_MEMBER_ID,
    AbortedTransaction,
    AcknowledgementBatch,
    AcknowledgeType,
    AcquiredRecords,
    FetchedBatch,
    PersisterStateBatch,
    RecordState,
    SharePartitionSettings,
    acknowledgement_batches_valid,
)
from broker.share.share_partition import SharePartition
from protocol.errors import ErrorCode, KafkaError

A, B = "member-a", "member-b"
LOCK = 30_000
ACCEPT = int(AcknowledgeType.ACCEPT)
RELEASE = int(AcknowledgeType.RELEASE)
REJECT = int(AcknowledgeType.REJECT)


def share_partition(start: int = 0, **settings: int) -> SharePartition:
    return SharePartition("g", "t", 0, SharePartitionSettings(**settings), start)


def batches(*ranges: tuple[int, int]) -> list[FetchedBatch]:
    return [FetchedBatch(first, last) for first, last in ranges]


def acq(
    sp: SharePartition,
    member: str,
    fetched: list[FetchedBatch],
    max_records: int,
    now: int,
    batch_size: int = 500,
) -> list[AcquiredRecords]:
    """A share fetch reading the log at the share partition's next fetch offset."""
    return sp.acquire(member, fetched, sp.next_fetch_offset(), max_records, batch_size, now)


def ack(sp: SharePartition, member: str, first: int, last: int, *types: int, now: int = 0) -> None:
    sp.acknowledge(member, [AcknowledgementBatch(first, last, tuple(types))], now).commit(now)


def state(sp: SharePartition, offset: int) -> tuple[RecordState, int, str]:
    s = sp.record_state(offset)
    assert s is not None, offset
    return s.state, s.delivery_count, s.member_id


def error_of(call: object) -> ErrorCode:
    assert callable(call)
    with pytest.raises(KafkaError) as e:
        call()
    return e.value.code


def test_acquire_whole_fetched_batches_then_accept_moves_the_start_offset() -> None:
    sp = share_partition()
    assert sp.next_fetch_offset() == 0
    got = acq(sp, A, batches((0, 4), (5, 9)), 500, now=0)
    assert got == [AcquiredRecords(0, 9, 1)]
    assert (sp.start_offset, sp.end_offset, sp.next_fetch_offset()) == (0, 9, 10)
    assert state(sp, 3) == (RecordState.ACQUIRED, 1, A)
    ack(sp, A, 0, 9, ACCEPT)
    assert (sp.start_offset, sp.end_offset, sp.next_fetch_offset()) == (10, 10, 10)
    assert sp.cached_state == {} and sp.in_flight_records() == 0


def test_max_fetch_records_is_a_soft_limit_cut_at_a_fetched_batch_end() -> None:
    sp = share_partition()
    assert acq(sp, A, batches((0, 4), (5, 9)), 3, now=0) == [AcquiredRecords(0, 4, 1)]
    assert sp.next_fetch_offset() == 5
    assert acq(sp, B, batches((5, 9)), 3, now=0) == [AcquiredRecords(5, 9, 1)]


def test_a_share_partition_starts_at_its_reset_offset() -> None:
    sp = share_partition(start=100)
    assert sp.next_fetch_offset() == 100
    # A log read that returns a batch straddling the start offset acquires from the start offset.
    assert acq(sp, A, batches((95, 104)), 500, now=0) == [AcquiredRecords(100, 104, 1)]
    assert (sp.start_offset, sp.end_offset) == (100, 104)


def test_members_divide_records_and_cannot_acknowledge_each_others() -> None:
    sp = share_partition()
    assert acq(sp, A, batches((0, 4)), 500, now=0) == [AcquiredRecords(0, 4, 1)]
    assert acq(sp, B, batches((5, 9)), 500, now=0) == [AcquiredRecords(5, 9, 1)]
    assert error_of(lambda: ack(sp, A, 5, 9, ACCEPT)) is ErrorCode.invalid_record_state
    assert state(sp, 5) == (RecordState.ACQUIRED, 1, B)
    # Records already held are not acquired twice.
    assert acq(sp, A, batches((0, 4), (5, 9)), 500, now=0) == []
    ack(sp, B, 5, 9, ACCEPT)
    assert sp.start_offset == 0  # 0-4 are still held by A
    ack(sp, A, 0, 4, ACCEPT)
    assert sp.start_offset == 10


def test_lock_expiry_makes_records_available_and_redelivery_raises_the_count() -> None:
    sp = share_partition()
    acq(sp, A, batches((0, 4)), 500, now=1_000)
    assert sp.next_lock_expiry_ms() == 1_000 + LOCK
    assert sp.expire_locks(1_000 + LOCK - 1) == []
    assert state(sp, 0) == (RecordState.ACQUIRED, 1, A)
    changed = sp.expire_locks(1_000 + LOCK)
    assert changed == [PersisterStateBatch(0, 4, RecordState.AVAILABLE, 1)]
    assert state(sp, 0) == (RecordState.AVAILABLE, 1, EMPTY_MEMBER_ID)
    assert sp.next_lock_expiry_ms() is None
    assert sp.next_fetch_offset() == 0
    # The crashed member's acknowledgement comes too late.
    assert error_of(lambda: ack(sp, A, 0, 4, ACCEPT)) is ErrorCode.invalid_record_state
    assert acq(sp, B, batches((0, 4)), 500, now=40_000) == [AcquiredRecords(0, 4, 2)]
    assert state(sp, 2) == (RecordState.ACQUIRED, 2, B)
    assert sp.next_fetch_offset() == 5


def test_the_delivery_count_limit_archives_instead_of_redelivering() -> None:
    sp = share_partition(delivery_count_limit=2)
    acq(sp, A, batches((0, 1)), 500, now=0)
    ack(sp, A, 0, 1, RELEASE)
    assert state(sp, 0) == (RecordState.AVAILABLE, 1, EMPTY_MEMBER_ID)
    assert acq(sp, A, batches((0, 1)), 500, now=0) == [AcquiredRecords(0, 1, 2)]
    # The second delivery was the last: releasing (or a lock expiry) archives the records.
    assert sp.expire_locks(LOCK) == [PersisterStateBatch(0, 1, RecordState.ARCHIVED, 2)]
    assert (sp.start_offset, sp.next_fetch_offset()) == (2, 2)
    assert sp.record_state(0) is None


def test_release_at_the_delivery_limit_archives() -> None:
    sp = share_partition(delivery_count_limit=1)
    acq(sp, A, batches((0, 2)), 500, now=0)
    ack(sp, A, 0, 2, RELEASE)
    assert sp.start_offset == 3 and sp.cached_state == {}


def test_reject_archives_and_moves_the_start_offset() -> None:
    sp = share_partition()
    acq(sp, A, batches((0, 4)), 500, now=0)
    transition = sp.acknowledge(A, [AcknowledgementBatch(0, 4, (REJECT,))], 0)
    assert transition.state_batches == [PersisterStateBatch(0, 4, RecordState.ARCHIVED, 1)]
    transition.commit(0)
    assert sp.start_offset == 5


def test_per_offset_acknowledgement_splits_the_batch_and_redelivers_one_record() -> None:
    sp = share_partition()
    acq(sp, A, batches((0, 9)), 500, now=0)
    ack(sp, A, 0, 4, ACCEPT)
    assert (sp.start_offset, sp.next_fetch_offset()) == (5, 10)
    ack(sp, A, 5, 9, ACCEPT, RELEASE, REJECT, ACCEPT, ACCEPT)
    assert state(sp, 6) == (RecordState.AVAILABLE, 1, EMPTY_MEMBER_ID)
    assert state(sp, 7)[0] is RecordState.ARCHIVED
    assert (sp.start_offset, sp.next_fetch_offset()) == (6, 6)
    assert sp.state_batches() == [
        PersisterStateBatch(6, 6, RecordState.AVAILABLE, 1),
        PersisterStateBatch(7, 7, RecordState.ARCHIVED, 1),
        PersisterStateBatch(8, 9, RecordState.ACKNOWLEDGED, 1),
    ]
    # The log read from offset 6 returns the whole batch 0-9; only offset 6 is acquired.
    assert acq(sp, B, batches((0, 9)), 500, now=0) == [AcquiredRecords(6, 6, 2)]
    assert sp.next_fetch_offset() == 10
    ack(sp, B, 6, 6, ACCEPT)
    assert (sp.start_offset, sp.end_offset, sp.cached_state) == (10, 10, {})


def test_acknowledging_records_not_acquired_is_invalid_record_state() -> None:
    sp = share_partition()
    acq(sp, A, batches((0, 4)), 500, now=0)
    ack(sp, A, 0, 0, RELEASE)  # 0 is AVAILABLE again, 1-4 still ACQUIRED
    assert error_of(lambda: ack(sp, A, 0, 1, ACCEPT)) is ErrorCode.invalid_record_state
    assert state(sp, 1) == (RecordState.ACQUIRED, 1, A)  # nothing changed
    ack(sp, A, 1, 4, ACCEPT)
    assert error_of(lambda: ack(sp, A, 1, 1, ACCEPT)) is ErrorCode.invalid_record_state


def test_acknowledgements_outside_the_acquired_records() -> None:
    sp = share_partition(start=10)
    assert error_of(lambda: ack(sp, A, 10, 12, ACCEPT)) is ErrorCode.invalid_record_state  # nothing in flight
    acq(sp, A, batches((10, 14)), 500, now=0)
    assert error_of(lambda: ack(sp, A, 12, 20, ACCEPT)) is ErrorCode.invalid_request
    assert error_of(lambda: ack(sp, A, 15, 16, ACCEPT)) is ErrorCode.invalid_request
    ack(sp, A, 0, 9, ACCEPT)  # wholly below the start offset: already done, ignored
    assert state(sp, 10) == (RecordState.ACQUIRED, 1, A)


def test_malformed_acknowledgements_are_invalid_request() -> None:
    sp = share_partition()
    acq(sp, A, batches((0, 4)), 500, now=0)
    assert error_of(lambda: ack(sp, A, 0, 4, 9)) is ErrorCode.invalid_request
    assert error_of(lambda: ack(sp, A, 0, 4, ACCEPT, ACCEPT)) is ErrorCode.invalid_request
    assert error_of(lambda: ack(sp, A, 4, 0, ACCEPT)) is ErrorCode.invalid_request


def test_a_refused_acknowledgement_changes_nothing() -> None:
    sp = share_partition()
    acq(sp, A, batches((0, 4)), 500, now=0)
    acq(sp, B, batches((5, 9)), 500, now=0)
    request = [AcknowledgementBatch(0, 4, (ACCEPT,)), AcknowledgementBatch(5, 9, (ACCEPT,))]
    assert error_of(lambda: sp.acknowledge(A, request, 0)) is ErrorCode.invalid_record_state
    assert state(sp, 0) == (RecordState.ACQUIRED, 1, A)
    assert sp.start_offset == 0


def test_an_acknowledgement_being_written_holds_its_records() -> None:
    sp = share_partition()
    acq(sp, A, batches((0, 4)), 500, now=0)
    transition = sp.acknowledge(A, [AcknowledgementBatch(0, 4, (ACCEPT,))], 0)
    assert state(sp, 0) == (RecordState.ACKNOWLEDGED, 1, EMPTY_MEMBER_ID)
    assert sp.start_offset == 0  # moves only once written
    assert error_of(lambda: ack(sp, A, 0, 4, ACCEPT)) is ErrorCode.invalid_record_state
    assert sp.expire_locks(LOCK) == []  # the lock is left to the write's outcome
    # The write failed and the lock expired meanwhile: the records are AVAILABLE again.
    transition.rollback(now_ms=LOCK)
    assert state(sp, 0) == (RecordState.AVAILABLE, 1, EMPTY_MEMBER_ID)
    assert sp.next_fetch_offset() == 0


def test_a_rolled_back_acknowledgement_within_the_lock_restores_the_holder() -> None:
    sp = share_partition()
    acq(sp, A, batches((0, 4)), 500, now=0)
    sp.acknowledge(A, [AcknowledgementBatch(0, 4, (REJECT,))], 0).rollback(now_ms=10)
    assert state(sp, 0) == (RecordState.ACQUIRED, 1, A)
    assert sp.next_lock_expiry_ms() == LOCK
    ack(sp, A, 0, 4, ACCEPT)
    assert sp.start_offset == 5


def test_release_acquired_records_of_a_member_whose_session_closes() -> None:
    sp = share_partition()
    acq(sp, A, batches((0, 4)), 500, now=0)
    acq(sp, B, batches((5, 9)), 500, now=0)
    transition = sp.release_acquired_records(A, now_ms=0)
    assert transition.state_batches == [PersisterStateBatch(0, 4, RecordState.AVAILABLE, 1)]
    transition.commit(0)
    assert state(sp, 0) == (RecordState.AVAILABLE, 1, EMPTY_MEMBER_ID)
    assert state(sp, 5) == (RecordState.ACQUIRED, 1, B)
    assert sp.next_fetch_offset() == 0


def test_the_in_flight_limit_stops_acquisition_of_new_records() -> None:
    sp = share_partition(max_in_flight_records=10)
    acq(sp, A, batches((0, 9)), 500, now=0)
    assert not sp.can_acquire_records()
    assert acq(sp, B, batches((10, 19)), 500, now=0) == []
    ack(sp, A, 0, 4, ACCEPT)
    assert sp.in_flight_records() == 5 and sp.can_acquire_records()
    assert acq(sp, B, batches((10, 14), (15, 19)), 500, now=0) == [AcquiredRecords(10, 14, 1)]
    assert not sp.can_acquire_records()
    # Released records may be acquired again at the limit: they are in flight already.
    ack(sp, B, 10, 14, RELEASE)
    assert sp.can_acquire_records() and sp.next_fetch_offset() == 10


def test_initialized_from_persisted_state() -> None:
    persisted = [
        PersisterStateBatch(5, 7, RecordState.AVAILABLE, 2),
        PersisterStateBatch(8, 9, RecordState.ACKNOWLEDGED, 1),
    ]
    sp = SharePartition("g", "t", 0, SharePartitionSettings(), 5, persisted)
    assert (sp.start_offset, sp.end_offset, sp.next_fetch_offset()) == (5, 9, 5)
    assert acq(sp, A, batches((5, 9)), 500, now=0) == [AcquiredRecords(5, 7, 3)]
    assert sp.next_fetch_offset() == 10
    ack(sp, A, 5, 7, ACCEPT)
    assert (sp.start_offset, sp.end_offset, sp.cached_state) == (10, 10, {})


def test_initialized_from_persisted_state_that_is_all_done() -> None:
    persisted = [PersisterStateBatch(5, 9, RecordState.ARCHIVED, 5)]
    sp = SharePartition("g", "t", 0, SharePartitionSettings(), 5, persisted)
    assert (sp.start_offset, sp.end_offset, sp.next_fetch_offset()) == (10, 10, 10)


def test_persisted_state_below_the_start_offset_is_refused() -> None:
    with pytest.raises(ValueError):
        SharePartition(
            "g", "t", 0, SharePartitionSettings(), 5, [PersisterStateBatch(3, 6, RecordState.AVAILABLE, 1)]
        )


def test_a_lock_expiry_with_the_start_offset_inside_the_batch_archives_below_it() -> None:
    sp = share_partition()
    acq(sp, A, batches((0, 9)), 500, now=0)
    ack(sp, A, 0, 3, ACCEPT)
    assert sp.start_offset == 4
    changed = sp.expire_locks(LOCK)
    assert [(c.first_offset, c.delivery_state) for c in changed] == [
        (o, RecordState.AVAILABLE) for o in range(4, 10)
    ]
    assert sp.next_fetch_offset() == 4
    # Contiguous records of a split batch go out as one range, as Kafka 4.3 returns them.
    assert acq(sp, B, batches((0, 9)), 500, now=LOCK) == [AcquiredRecords(4, 9, 2)]


def test_per_offset_ownership_is_checked() -> None:
    sp = share_partition()
    acq(sp, A, batches((0, 4)), 500, now=0)
    ack(sp, A, 2, 2, RELEASE)
    assert acq(sp, B, batches((0, 4)), 500, now=0) == [AcquiredRecords(2, 2, 2)]
    assert error_of(lambda: ack(sp, A, 0, 4, ACCEPT)) is ErrorCode.invalid_record_state
    assert error_of(lambda: ack(sp, A, 2, 2, ACCEPT)) is ErrorCode.invalid_record_state
    ack(sp, B, 2, 2, ACCEPT)
    ack(sp, A, 0, 1, ACCEPT)
    ack(sp, A, 3, 4, ACCEPT)
    assert (sp.start_offset, sp.cached_state) == (5, {})


def test_new_records_are_cut_into_batches_of_batch_size_at_fetched_batch_boundaries() -> None:
    fetched = batches((0, 2), (3, 5), (6, 8), (9, 9))
    sp = share_partition()
    assert acq(sp, A, fetched, 500, now=0, batch_size=3) == [
        AcquiredRecords(0, 2, 1),
        AcquiredRecords(3, 5, 1),
        AcquiredRecords(6, 8, 1),
        AcquiredRecords(9, 9, 1),
    ]
    assert sorted(sp.cached_state) == [0, 3, 6, 9]
    sp = share_partition()
    assert acq(sp, A, fetched, 500, now=0, batch_size=4) == [
        AcquiredRecords(0, 5, 1),
        AcquiredRecords(6, 9, 1),
    ]


def test_renew_extends_the_lock_without_changing_the_state() -> None:
    sp = share_partition()
    acq(sp, A, batches((0, 4)), 500, now=0)
    transition = sp.acknowledge(A, [AcknowledgementBatch(0, 4, (int(AcknowledgeType.RENEW),))], 20_000)
    assert transition.state_batches == []
    transition.commit(20_000)
    assert state(sp, 0) == (RecordState.ACQUIRED, 1, A)
    assert sp.expire_locks(LOCK) == [] and sp.next_lock_expiry_ms() == 20_000 + LOCK
    assert sp.expire_locks(20_000 + LOCK) == [PersisterStateBatch(0, 4, RecordState.AVAILABLE, 1)]


def test_often_redelivered_records_go_out_in_smaller_groups_and_alone_on_their_last_attempt() -> None:
    sp = share_partition(delivery_count_limit=5)  # throttled from the 3rd delivery on
    fetched = batches((0, 7))
    for delivery in (1, 2, 3):
        assert acq(sp, A, fetched, 500, now=0) == [AcquiredRecords(0, 7, delivery)]
        ack(sp, A, 0, 7, RELEASE)
    # Delivered 3 times: half the batch at a time.
    assert acq(sp, A, fetched, 500, now=0) == [AcquiredRecords(0, 3, 4)]
    assert acq(sp, B, fetched, 500, now=0) == [AcquiredRecords(4, 7, 4)]
    ack(sp, A, 0, 3, RELEASE)
    ack(sp, B, 4, 7, RELEASE)
    # The 5th delivery is the last: one record per fetch.
    assert acq(sp, A, fetched, 500, now=0) == [AcquiredRecords(0, 0, 5)]
    assert acq(sp, B, fetched, 500, now=0) == [AcquiredRecords(1, 1, 5)]
    ack(sp, A, 0, 0, REJECT)
    ack(sp, B, 1, 1, RELEASE)  # at the limit: archived, not redelivered
    assert state(sp, 1)[0] is RecordState.ARCHIVED
    assert (sp.start_offset, sp.next_fetch_offset()) == (2, 2)


def test_at_the_in_flight_limit_only_records_inside_the_in_flight_range_are_acquired() -> None:
    sp = share_partition(max_in_flight_records=10)
    acq(sp, A, batches((0, 9)), 500, now=0)
    ack(sp, A, 5, 5, RELEASE)
    assert sp.next_fetch_offset() == 5
    # The log read at 5 returns batch 0-9 and more; only the released record is acquired.
    assert acq(sp, B, batches((0, 9), (10, 19)), 500, now=0) == [AcquiredRecords(5, 5, 2)]
    assert sp.end_offset == 9


def test_the_log_start_offset_passing_the_start_offset_archives_what_is_available() -> None:
    sp = share_partition()
    acq(sp, A, batches((0, 4)), 500, now=0)
    acq(sp, A, batches((5, 9)), 500, now=0)
    ack(sp, A, 0, 4, RELEASE)  # 0-4 AVAILABLE, 5-9 still held
    sp.update_cache_and_offsets(7)
    assert state(sp, 2)[0] is RecordState.ARCHIVED
    assert state(sp, 6) == (RecordState.ACQUIRED, 1, A)  # held records are left to their holder
    assert (sp.start_offset, sp.end_offset, sp.next_fetch_offset()) == (7, 9, 10)
    ack(sp, A, 5, 9, ACCEPT)  # 5-6 lie below the SPSO now: left to their lock, as in Kafka
    assert (sp.start_offset, state(sp, 5)[0], state(sp, 7)[0]) == (
        7,
        RecordState.ACQUIRED,
        RecordState.ACKNOWLEDGED,
    )
    assert sp.expire_locks(LOCK)[0] == PersisterStateBatch(5, 5, RecordState.ARCHIVED, 1)
    assert (sp.start_offset, sp.cached_state) == (10, {})
    # With nothing in flight, both offsets follow the log start offset.
    sp.update_cache_and_offsets(50)
    assert (sp.start_offset, sp.end_offset, sp.next_fetch_offset()) == (50, 50, 50)
    sp.update_cache_and_offsets(40)  # never backwards
    assert sp.start_offset == 50


def test_in_flight_records_compaction_removed_are_archived_on_the_next_fetch() -> None:
    sp = share_partition()
    acq(sp, A, batches((0, 4), (5, 9)), 500, now=0, batch_size=5)
    ack(sp, A, 0, 9, RELEASE)
    # Compaction removed batch 0-4: the log read at 0 returns 5-9 first.
    assert sp.acquire(B, batches((5, 9)), 0, 500, 500, 0) == [AcquiredRecords(5, 9, 2)]
    assert state(sp, 0)[0] is RecordState.ARCHIVED
    assert sp.start_offset == 0  # moves with the next state write, as in Kafka
    ack(sp, B, 5, 9, ACCEPT)
    assert (sp.start_offset, sp.cached_state) == (10, {})


def test_an_archived_record_stays_archived_whatever_the_write_of_its_release() -> None:
    sp = share_partition()
    acq(sp, A, batches((0, 4)), 500, now=0)
    transition = sp.acknowledge(A, [AcknowledgementBatch(0, 4, (RELEASE,))], 0)
    sp.update_cache_and_offsets(5)  # the release made them AVAILABLE; the log start passes them
    transition.rollback(now_ms=0)
    assert state(sp, 0) is not None and state(sp, 0)[0] is RecordState.ARCHIVED


def test_releasing_a_member_leaves_its_acknowledgements_being_written() -> None:
    sp = share_partition()
    acq(sp, A, batches((0, 4)), 500, now=0)
    acq(sp, A, batches((5, 9)), 500, now=0)
    pending = sp.acknowledge(A, [AcknowledgementBatch(5, 9, (ACCEPT,))], 0)
    # 5-9 are ACKNOWLEDGED in transition, not ACQUIRED: the release takes 0-4 only.
    sp.release_acquired_records(A, now_ms=0).commit(0)
    assert state(sp, 0) == (RecordState.AVAILABLE, 1, EMPTY_MEMBER_ID)
    pending.commit(0)
    assert sp.start_offset == 0 and state(sp, 5)[0] is RecordState.ACKNOWLEDGED


def test_read_committed_archives_acquired_records_of_aborted_transactions() -> None:
    sp = share_partition()
    fetched = [
        FetchedBatch(0, 1, producer_id=7, transactional=True),  # aborted below
        FetchedBatch(2, 3),  # not transactional
        FetchedBatch(4, 4, producer_id=7, transactional=True, abort_marker=True),
        FetchedBatch(5, 6, producer_id=7, transactional=True),  # a later transaction: committed
    ]
    got = sp.acquire(A, fetched, 0, 500, 500, 0, aborted=[AbortedTransaction(producer_id=7, first_offset=0)])
    assert got == [AcquiredRecords(2, 6, 1)]
    assert state(sp, 0)[0] is RecordState.ARCHIVED and state(sp, 1)[0] is RecordState.ARCHIVED
    # The marker (4) is acquired with the rest and acknowledged as a gap by the client.
    ack(sp, A, 2, 6, ACCEPT)
    assert (sp.start_offset, sp.cached_state) == (7, {})


def test_holes_in_the_persisted_state_are_fetched_first_and_hold_the_start_offset() -> None:
    # 0-4 were acquired before the failover but never written: only 5-9 (accepted) were.
    persisted = [PersisterStateBatch(5, 9, RecordState.ACKNOWLEDGED, 1)]
    sp = SharePartition("g", "t", 0, SharePartitionSettings(), 0, persisted)
    assert (sp.start_offset, sp.end_offset, sp.next_fetch_offset()) == (0, 9, 0)
    got = sp.acquire(B, batches((0, 4), (5, 9), (10, 14)), 0, 500, 500, 0)
    assert got == [AcquiredRecords(0, 4, 1), AcquiredRecords(10, 14, 1)]
    ack(sp, B, 0, 4, ACCEPT)
    assert sp.start_offset == 10  # through the accepted 5-9
    ack(sp, B, 10, 14, ACCEPT)
    assert (sp.start_offset, sp.cached_state) == (15, {})


def test_a_hole_between_persisted_batches() -> None:
    persisted = [
        PersisterStateBatch(0, 2, RecordState.ACKNOWLEDGED, 1),
        PersisterStateBatch(6, 9, RecordState.AVAILABLE, 1),
    ]
    sp = SharePartition("g", "t", 0, SharePartitionSettings(), 0, persisted)
    assert (sp.start_offset, sp.next_fetch_offset()) == (3, 3)  # not past the hole 3-5
    # The read at 3 returns the whole batch 0-4 and the next one.
    got = sp.acquire(B, batches((0, 4), (5, 9)), 3, 500, 500, 0)
    assert got == [AcquiredRecords(3, 5, 1), AcquiredRecords(6, 9, 2)]
    assert sp.next_fetch_offset() == 10
    ack(sp, B, 3, 9, ACCEPT)
    assert (sp.start_offset, sp.cached_state) == (10, {})


def test_acknowledgement_batches_are_validated_as_kafka_does() -> None:
    def valid(*bs: tuple[int, int, tuple[int, ...]], renew: bool = False, flagged: bool = False) -> bool:
        return acknowledgement_batches_valid(
            [AcknowledgementBatch(first, last, types) for first, last, types in bs], renew, flagged
        )

    assert valid((0, 4, (ACCEPT,)), (4, 6, (RELEASE, REJECT, 0)))  # may start at the previous last offset
    assert not valid((5, 4, (ACCEPT,)))
    assert not valid((5, 9, (ACCEPT,)), (3, 4, (ACCEPT,)))
    assert not valid((0, 4, ()))
    assert not valid((0, 4, (ACCEPT, ACCEPT)))
    assert not valid((0, 0, (7,)))
    renew = int(AcknowledgeType.RENEW)
    assert not valid((0, 0, (renew,)))  # a version without RENEW
    assert not valid((0, 0, (renew,)), renew=True)  # not flagged IsRenewAck
    assert valid((0, 0, (renew,)), renew=True, flagged=True)
