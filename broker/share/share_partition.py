# Over 700 lines: SharePartition is one state machine (acquire, acknowledge, release, locks, SPSO) whose rules change together, as Kafka's.
"""The state of one share partition: one share group's view of one topic partition (KIP-932).

Pure state and rules, as Kafka's SharePartition (core, kafka.server.share) and InFlightState
have them: no clock (the caller passes `now_ms`, a monotonic time, and calls `expire_locks` when
`next_lock_expiry_ms` passes), no I/O (the caller reads the log, and persists the state batches
a change returns before committing it). Not reachable from any handler yet.

Offsets. The share-partition start offset (SPSO, `start_offset`) is the first offset not yet
delivered to completion: every record below it is ACKNOWLEDGED or ARCHIVED. The share-partition
end offset (SPEO, `end_offset`) is the last offset acquired so far. The in-flight records lie
between them, in `cached_state`: in-flight batches keyed by first offset, each holding one state
for the whole batch or, once some of its records differ (a subset was acquired or acknowledged),
one state per offset. A batch is removed once all its records are at or below the SPSO.

Record states (`RecordState`, ids as Kafka persists them) and transitions:

    AVAILABLE     may be handed to a consumer.
        -> ACQUIRED       a share fetch acquires it for one member: its delivery count is raised
                          and an acquisition lock of `record_lock_duration_ms` starts
    ACQUIRED      held by one member until it acknowledges or its lock expires; RENEW restarts
                  the lock.
        -> ACKNOWLEDGED   the member accepts it (ACCEPT)
        -> ARCHIVED       the member rejects it (REJECT) or reports it a gap (GAP)
        -> AVAILABLE      the member releases it (RELEASE), its lock expires, or its share session
                          closes; the delivery count is kept, so the next acquisition raises it
        -> ARCHIVED       instead of AVAILABLE when its delivery count has reached
                          `delivery_count_limit`, or when it lies below the SPSO
    ACKNOWLEDGED  terminal: delivered and processed.
    ARCHIVING     part of Kafka's persisted format; never entered.
    ARCHIVED      terminal: never delivered again.

An acknowledgement is two steps, as in Kafka: `acknowledge` starts the transitions and returns a
`StateTransition` listing the state batches to persist; while it is open those records refuse
other changes (INVALID_RECORD_STATE), and `commit` ends it once the state is written (the SPSO
then moves past every leading ACKNOWLEDGED or ARCHIVED record) or `rollback` restores the states
(an ACQUIRED record whose lock expired meanwhile becomes AVAILABLE).

Acquisition (Kafka's batch-optimized mode) hands out whole fetched batches, so the fetch's record
count is a soft limit, and cuts new records into in-flight batches of the fetch's batch size. It
keeps at most `max_in_flight_records` between the SPSO and the SPEO, and throttles records
delivered at least half the delivery limit times (fewer per fetch, a record on its last attempt
alone), so a record that fails every time does not take its neighbours to the limit with it.

Errors are Kafka's: acknowledging a record that is not ACQUIRED, or acquired by another member,
or outside the in-flight records below the SPEO, is INVALID_RECORD_STATE; an offset past the
acquired records or an unknown acknowledge type is INVALID_REQUEST.

AVAILABLE records are archived for good when the log no longer has them: below a log start offset
that passed the SPSO (`update_cache_and_offsets`), or between the fetch offset and the first
batch a read returned (compaction).

With read_committed (the group's `share.isolation.level`), acquired records of aborted
transactions are archived at once and left out of the answer.

Initialized from persisted state with holes (records acquired before a leader change but never
written), the holes are fetched first and the SPSO does not pass them (Kafka's persister read gap
window), so no record whose delivery was not completed is skipped.

Not modelled yet (Kafka 4.3.1 has it): the record_limit acquire mode (KIP-1206).
"""

from __future__ import annotations

import bisect
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from broker.share.in_flight import (
    EMPTY_MEMBER_ID,
    AbortedTransaction,
    AcknowledgementBatch,
    AcquiredRecords,
    DeliveryCountOp,
    FetchedBatch,
    InFlightBatch,
    InFlightState,
    PersisterStateBatch,
    RecordState,
    SharePartitionSettings,
    aborted_batches,
    ack_targets,
    is_terminal,
    last_offset_of_batch_holding,
    without_batches,
)
from protocol.errors import ErrorCode, KafkaError


@dataclass(slots=True)
class StateTransition:
    """An acknowledgement or release in progress: `state_batches` are what to persist; `commit`
    once written, `rollback` if the write failed."""

    share_partition: SharePartition
    states: list[InFlightState]
    state_batches: list[PersisterStateBatch]

    def commit(self, now_ms: int) -> None:
        for state in self.states:
            state.complete_transition(True, now_ms)
        self.share_partition.transition_completed(committed=True)

    def rollback(self, now_ms: int) -> None:
        for state in self.states:
            state.complete_transition(False, now_ms)
        self.share_partition.transition_completed(committed=False)


class SharePartition:
    """One share group's in-flight records of one topic partition (see the module docstring)."""

    def __init__(
        self,
        group_id: str,
        topic: str,
        partition: int,
        settings: SharePartitionSettings,
        start_offset: int,
        state_batches: Sequence[PersisterStateBatch] = (),
    ) -> None:
        """`start_offset` is the persisted SPSO or, for a share partition never initialized, the
        offset `share.auto.offset.reset` resolves to (the caller asks the partition);
        `state_batches` are the persisted in-flight records (Kafka's maybeInitialize).
        `settings` may be replaced at any time (the manager sets the group's current configs
        before each use, as Kafka reads its group config provider on each acquisition)."""
        self.group_id = group_id
        self.topic = topic
        self.partition = partition
        self.settings = settings
        self.start_offset = start_offset
        self.cached_state: dict[int, InFlightBatch] = {}
        self._keys: list[int] = []
        for sb in state_batches:
            if sb.first_offset < start_offset:
                raise ValueError(
                    f"state batch {sb.first_offset}-{sb.last_offset} starts below the start offset {start_offset}"
                )
            self._put(
                InFlightBatch(
                    sb.first_offset, sb.last_offset, InFlightState(sb.delivery_state, sb.delivery_count)
                )
            )
        self._find_next_fetch_offset = bool(self._keys)
        self._gap: list[int] | None = None
        """[end offset, first gap]: persisted state with holes (records acquired but never written,
        so never completed); while the SPEO is still the persisted one, the holes are fetched first
        and the SPSO stops at the first (Kafka's persister read gap window)."""
        if self._keys:
            self.end_offset = self.cached_state[self._keys[-1]].last_offset
            previous_last = start_offset - 1
            for sb in state_batches:
                if sb.first_offset > previous_last + 1:
                    self._gap = [self.end_offset, previous_last + 1]
                    break
                previous_last = sb.last_offset
            self._maybe_update_cached_state_and_offsets()
        else:
            self.end_offset = start_offset

    # -- the cache ---------------------------------------------------------------------------

    def _put(self, batch: InFlightBatch) -> None:
        bisect.insort(self._keys, batch.first_offset)
        self.cached_state[batch.first_offset] = batch

    def _floor_key(self, offset: int) -> int | None:
        i = bisect.bisect_right(self._keys, offset)
        return self._keys[i - 1] if i else None

    def _sub_map(self, first_key: int, last_key: int) -> list[InFlightBatch]:
        lo = bisect.bisect_left(self._keys, first_key)
        hi = bisect.bisect_right(self._keys, last_key)
        return [self.cached_state[k] for k in self._keys[lo:hi]]

    def _all_states(self) -> Iterator[tuple[int, int, InFlightState]]:
        for key in self._keys:
            yield from self.cached_state[key].states()

    def _gap_start(self) -> int | None:
        """The first hole of the persisted state while its gap window is active."""
        if self._gap is None or self._gap[0] != self.end_offset:
            return None
        return self._gap[1]

    def _gap_filled_up_to(self, offset: int) -> None:
        """Records up to `offset` - 1 were acquired (Kafka's maybeUpdatePersisterGapWindowStartOffset)."""
        if self._gap is not None:
            if self._gap[0] == self.end_offset and offset <= self._gap[0]:
                self._gap[1] = offset
            else:
                self._gap = None

    def in_flight_records(self) -> int:
        return 0 if not self._keys else self.end_offset - self.start_offset + 1

    def delivery_complete_count(self) -> int:
        """In-flight records at or above the SPSO that are ACKNOWLEDGED or ARCHIVED (Kafka's
        deliveryCompleteCount, persisted with every write for the group's lag)."""
        return sum(
            last - max(first, self.start_offset) + 1
            for first, last, state in self._all_states()
            if last >= self.start_offset and is_terminal(state.state)
        )

    # -- acquiring ---------------------------------------------------------------------------

    def next_fetch_offset(self) -> int:
        """Where the next share fetch reads the log: the first AVAILABLE in-flight record, or the
        record after the SPEO (Kafka's nextFetchOffset)."""
        beyond = not self._keys or self.start_offset > self.cached_state[self._keys[-1]].last_offset
        if beyond:
            self._find_next_fetch_offset = False
            return self.end_offset
        if self._find_next_fetch_offset:
            gap = self._gap_start()
            for key in self._keys:
                batch = self.cached_state[key]
                if gap is not None:
                    if key > gap:
                        return gap
                    gap = max(batch.last_offset + 1, gap)
                for first, _last, state in batch.states():
                    if state.state is RecordState.AVAILABLE and state.rollback is None:
                        return first
            self._find_next_fetch_offset = False
        return self.end_offset + 1

    @property
    def throttle_limit(self) -> int:
        """Delivery count from which records are handed out in ever smaller groups."""
        return max(2, -(-self.settings.delivery_count_limit // 2))

    def can_acquire_records(self) -> bool:
        """Whether a share fetch may acquire anything: some in-flight record is AVAILABLE, or fewer
        than `max_in_flight_records` are in flight (Kafka's canAcquireRecords)."""
        if self.next_fetch_offset() != self.end_offset + 1:
            return True
        return self.in_flight_records() < self.settings.max_in_flight_records

    def acquire(
        self,
        member_id: str,
        fetched: Sequence[FetchedBatch],
        fetch_offset: int,
        max_fetch_records: int,
        batch_size: int,
        now_ms: int,
        aborted: Sequence[AbortedTransaction] | None = None,
    ) -> list[AcquiredRecords]:
        """Acquire for `member_id` what is AVAILABLE among the batches a log read from
        `fetch_offset` returned (Kafka's acquire, batch-optimized mode). Whole fetched batches are
        acquired, so `max_fetch_records` is a soft limit; new records are cut into in-flight
        batches of about `batch_size` records at fetched batch boundaries; records at or past
        half the delivery limit are handed out in ever smaller groups, a record on its last
        attempt alone, so one bad record does not take its neighbours to the limit with it.
        `aborted` (read_committed: the aborted transactions the read returned) archives what it
        acquired of aborted transactions and leaves it out of the answer."""
        acquired = self._acquire(member_id, fetched, fetch_offset, max_fetch_records, batch_size, now_ms)
        if not aborted or not acquired:
            return acquired
        return self._drop_aborted(fetched, acquired, aborted)

    def _acquire(
        self,
        member_id: str,
        fetched: Sequence[FetchedBatch],
        fetch_offset: int,
        max_fetch_records: int,
        batch_size: int,
        now_ms: int,
    ) -> list[AcquiredRecords]:
        if max_fetch_records <= 0 or not fetched or fetched[-1].last_offset < self.start_offset:
            return []
        last_to_acquire, max_records = self._last_offset_and_max_records(
            fetch_offset, max_fetch_records, fetched[-1].last_offset
        )
        if max_records <= 0:
            return []
        first_fetched = fetched[0].base_offset
        base = first_fetched
        if self._keys and fetch_offset < base:
            # The records between the fetch offset and the first fetched batch are gone from the
            # log (compaction): archive what of them is in flight, so the SPSO can move on.
            floor = self._floor_key(fetch_offset)
            low = (
                floor
                if floor is not None and self.cached_state[floor].last_offset >= fetch_offset
                else fetch_offset
            )
            stale = [b for b in self._sub_map(low, base) if b.first_offset < base]
            if self._archive_available(fetch_offset, base, stale):
                self._find_next_fetch_offset = True
        floor = self._floor_key(base)
        if floor is None:
            base = max(base, self.start_offset)
        elif self.cached_state[floor].last_offset >= base:
            base = floor
        overlapping = self._sub_map(min(first_fetched, base), last_to_acquire)
        if not overlapping:
            return self._acquire_new_batches(
                member_id, fetched, base, last_to_acquire, batch_size, max_records, now_ms
            )

        result: list[AcquiredRecords] = []
        count = 0
        maybe_gap = base
        for batch in overlapping:
            if count >= max_records:
                break
            if self._gap_start() is not None:
                if maybe_gap < batch.first_offset:
                    # A hole of the persisted state: its records are acquired as new ones.
                    new = self._acquire_new_batches(
                        member_id,
                        fetched,
                        maybe_gap,
                        batch.first_offset - 1,
                        batch_size,
                        max_records - count,
                        now_ms,
                    )
                    result += new
                    count += sum(a.last_offset - a.first_offset + 1 for a in new)
                maybe_gap = batch.last_offset + 1
                if count >= max_records:
                    break
            full_match = batch.first_offset >= first_fetched and batch.last_offset <= last_to_acquire
            throttle = self._should_throttle(batch, first_fetched, last_to_acquire)
            if throttle and count > 0:
                max_records = 0  # the throttled records go out on their own in a later fetch
                break
            if not full_match or batch.offset_state is not None or throttle:
                if batch.offset_state is None:
                    assert batch.batch_state is not None
                    if batch.batch_state.state is not RecordState.AVAILABLE or batch.batch_state.rollback:
                        continue
                acquired = self._acquire_subset(
                    member_id, first_fetched, last_to_acquire, batch, result, now_ms
                )
                count += acquired
                if throttle and acquired > 0:
                    max_records = 0
                    break
                continue
            assert batch.batch_state is not None
            if batch.batch_state.state is not RecordState.AVAILABLE:
                continue
            if not self._acquire_state(batch.batch_state, member_id, now_ms):
                continue
            result.append(
                AcquiredRecords(batch.first_offset, batch.last_offset, batch.batch_state.delivery_count)
            )
            count += batch.last_offset - batch.first_offset + 1

        last_cached = overlapping[-1].last_offset
        if count < max_records and last_cached < last_to_acquire:
            result += self._acquire_new_batches(
                member_id, fetched, last_cached + 1, last_to_acquire, batch_size, max_records - count, now_ms
            )
        if result:
            self._gap_filled_up_to(result[-1].last_offset + 1)
        return result

    def _drop_aborted(
        self,
        fetched: Sequence[FetchedBatch],
        acquired: list[AcquiredRecords],
        aborted: Sequence[AbortedTransaction],
    ) -> list[AcquiredRecords]:
        """Archive the acquired records of aborted transactions and cut them out of `acquired`
        (Kafka's filterAbortedTransactionalAcquiredRecords)."""
        doomed = aborted_batches(fetched, aborted)
        for batch in doomed:
            floor = self._floor_key(batch.base_offset)
            if floor is not None:
                in_flight = self._sub_map(floor, batch.last_offset)
                self._archive(batch.base_offset, batch.last_offset + 1, in_flight, RecordState.ACQUIRED)
        return without_batches(acquired, doomed)

    def _last_offset_and_max_records(
        self, fetch_offset: int, max_fetch_records: int, last: int
    ) -> tuple[int, int]:
        """Keep the in-flight records under `max_in_flight_records`; at the limit, only records
        inside the in-flight range (released or expired ones) may be acquired (Kafka's
        lastOffsetAndMaxRecordsToAcquire)."""
        max_records = min(max_fetch_records, self.settings.max_in_flight_records - self.in_flight_records())
        if max_records <= 0 and fetch_offset <= self.end_offset:
            max_records = min(max_fetch_records, self.end_offset - fetch_offset + 1)
            last = min(last, self.end_offset)
        return last, max_records

    def _should_throttle(self, batch: InFlightBatch, first: int, last: int) -> bool:
        """Whether records of `batch` have been delivered at least half the delivery limit times
        (Kafka's shouldThrottleRecordsDelivery)."""
        if batch.offset_state is None:
            b = batch.batch_state
            assert b is not None
            return (
                b.state is RecordState.AVAILABLE
                and b.rollback is None
                and b.delivery_count >= self.throttle_limit
            )
        counts = [
            s.delivery_count
            for offset, s in batch.offset_state.items()
            if first <= offset <= last and s.state is RecordState.AVAILABLE
        ]
        return max(counts, default=0) >= self.throttle_limit

    def _acquire_subset(
        self,
        member_id: str,
        first: int,
        last: int,
        batch: InFlightBatch,
        result: list[AcquiredRecords],
        now_ms: int,
    ) -> int:
        """Acquire the AVAILABLE offsets of `batch` within `first`..`last` (Kafka's
        acquireSubsetBatchRecords), contiguous ones with one delivery count as one range;
        throttled as `acquire` says."""
        limit = self.settings.delivery_count_limit
        offsets = batch.split()
        acquired = 0
        ranges: list[AcquiredRecords] = []
        throttled_max = -1
        for offset, state in offsets.items():
            if offset < first:
                continue
            if offset > last:
                break
            if state.state is not RecordState.AVAILABLE or state.rollback is not None:
                continue
            if limit > 2 and state.delivery_count == limit - 1 and acquired > 0:
                break  # its last attempt: delivered alone, in the next fetch
            if state.delivery_count >= self.throttle_limit and throttled_max < 0:
                throttled_max = max(1, len(offsets) >> (state.delivery_count - self.throttle_limit + 1))
            if not self._acquire_state(state, member_id, now_ms):
                continue
            prev = ranges[-1] if ranges else None
            if (
                prev is not None
                and prev.last_offset + 1 == offset
                and prev.delivery_count == state.delivery_count
            ):
                ranges[-1] = AcquiredRecords(prev.first_offset, offset, state.delivery_count)
            else:
                ranges.append(AcquiredRecords(offset, offset, state.delivery_count))
            acquired += 1
            if limit > 2 and state.delivery_count == limit:
                break
            if acquired == throttled_max:
                break
        result += ranges
        return acquired

    def _acquire_state(self, state: InFlightState, member_id: str, now_ms: int) -> bool:
        if not state.try_update(
            RecordState.ACQUIRED, DeliveryCountOp.INCREASE, self.settings.delivery_count_limit, member_id
        ):
            return False
        state.lock_expiry_ms = now_ms + self.settings.record_lock_duration_ms
        return True

    def _acquire_new_batches(
        self,
        member_id: str,
        fetched: Sequence[FetchedBatch],
        first: int,
        last: int,
        batch_size: int,
        max_records: int,
        now_ms: int,
    ) -> list[AcquiredRecords]:
        """Records never acquired become ACQUIRED in-flight batches: cut after the fetched batch
        holding the `max_records`-th record, and into batches of `batch_size` records or more
        at fetched batch boundaries (Kafka's acquireNewBatchRecords and createBatches)."""
        if not self._keys and self.end_offset > first:
            first = self.end_offset
        if first > last:
            return []
        if max_records < last - first + 1:
            cut = last_offset_of_batch_holding(fetched, first + max_records - 1)
            # Inside the gap window fetched batches need not align with the holes.
            last = min(cut, last) if self._gap_start() is not None else cut
        cuts = [first]
        if last - first + 1 > batch_size:
            for batch in fetched:
                if batch.base_offset > last:
                    break
                if batch.base_offset - cuts[-1] >= batch_size:
                    cuts.append(batch.base_offset)
        ends = [c - 1 for c in cuts[1:]] + [last]
        expiry = now_ms + self.settings.record_lock_duration_ms
        for lo, hi in zip(cuts, ends, strict=True):
            self._put(InFlightBatch(lo, hi, InFlightState(RecordState.ACQUIRED, 1, member_id, expiry)))
        if self._keys[0] == first:
            self.start_offset = first
        self.end_offset = max(self.end_offset, last)
        self._gap_filled_up_to(last + 1)
        return [AcquiredRecords(lo, hi, 1) for lo, hi in zip(cuts, ends, strict=True)]

    # -- acknowledging and releasing ------------------------------------------------------

    def acknowledge(
        self, member_id: str, batches: Sequence[AcknowledgementBatch], now_ms: int
    ) -> StateTransition:
        """Start the transitions `batches` ask for (Kafka's acknowledge); raises KafkaError, with
        every state it changed rolled back, when any of them is refused."""
        transition = StateTransition(self, [], [])
        try:
            for ack in batches:
                self._acknowledge_one(member_id, ack, transition, now_ms)
        except KafkaError:
            transition.rollback(now_ms)
            raise
        return transition

    def _acknowledge_one(
        self, member_id: str, ack: AcknowledgementBatch, transition: StateTransition, now_ms: int
    ) -> None:
        targets = ack_targets(ack)
        if ack.last_offset < self.start_offset:
            return  # already archived
        floor = self._floor_key(ack.first_offset)
        if floor is None:
            if ack.first_offset < self.start_offset <= ack.last_offset:
                floor = self._floor_key(self.start_offset)
            if floor is None:
                raise KafkaError(
                    ErrorCode.invalid_record_state,
                    "Batch record not found. The request batch offsets are not found in the cache.",
                )
        sub = self._sub_map(floor, ack.last_offset)
        if not sub or sub[-1].last_offset < ack.first_offset:
            raise KafkaError(
                ErrorCode.invalid_request,
                "Batch record not found. The first offset in request is past acquired records.",
            )
        if ack.last_offset > sub[-1].last_offset:
            raise KafkaError(
                ErrorCode.invalid_request,
                "Batch record not found. The last offset in request is past acquired records.",
            )
        for batch in sub:
            if batch.last_offset < self.start_offset:
                continue
            if batch.offset_state is None:
                assert batch.batch_state is not None
                if batch.batch_state.member_id == EMPTY_MEMBER_ID:
                    raise KafkaError(
                        ErrorCode.invalid_record_state,
                        "The batch cannot be acknowledged. The batch is not in the acquired state.",
                    )
                if batch.batch_state.member_id != member_id:
                    raise KafkaError(
                        ErrorCode.invalid_record_state, "Member is not the owner of batch record"
                    )
            full_match = batch.first_offset >= ack.first_offset and batch.last_offset <= ack.last_offset
            start_moved = batch.first_offset < self.start_offset <= batch.last_offset
            if not full_match or batch.offset_state is not None or len(targets) > 1 or start_moved:
                if batch.offset_state is None:
                    assert batch.batch_state is not None
                    if batch.batch_state.state is not RecordState.ACQUIRED:
                        raise KafkaError(
                            ErrorCode.invalid_record_state,
                            "The batch cannot be acknowledged. The subset batch is not in the acquired state.",
                        )
                for offset, state in batch.split().items():
                    if offset < ack.first_offset or offset < self.start_offset:
                        continue
                    if offset > ack.last_offset:
                        break
                    if state.state is not RecordState.ACQUIRED:
                        raise KafkaError(
                            ErrorCode.invalid_record_state,
                            "The batch cannot be acknowledged. The offset is not acquired.",
                        )
                    if state.member_id != member_id:
                        raise KafkaError(ErrorCode.invalid_record_state, "Member is not the owner of offset")
                    target = targets[offset - ack.first_offset] if len(targets) > 1 else targets[0]
                    if target is None:
                        self._renew(state, now_ms)
                        continue
                    self._start(state, target, offset, offset, transition)
            else:
                assert batch.batch_state is not None
                if batch.batch_state.state is not RecordState.ACQUIRED:
                    raise KafkaError(
                        ErrorCode.invalid_record_state,
                        "The batch cannot be acknowledged. The batch is not in the acquired state.",
                    )
                if targets[0] is None:
                    self._renew(batch.batch_state, now_ms)
                else:
                    self._start(
                        batch.batch_state, targets[0], batch.first_offset, batch.last_offset, transition
                    )

    def _renew(self, state: InFlightState, now_ms: int) -> None:
        """RENEW: the member keeps the record for another lock duration; nothing is persisted."""
        state.lock_expiry_ms = now_ms + self.settings.record_lock_duration_ms

    def _start(
        self, state: InFlightState, target: RecordState, first: int, last: int, transition: StateTransition
    ) -> None:
        if not state.start_transition(target, self.settings.delivery_count_limit, EMPTY_MEMBER_ID):
            raise KafkaError(ErrorCode.invalid_record_state, "Unable to acknowledge records for the batch")
        transition.states.append(state)
        transition.state_batches.append(PersisterStateBatch(first, last, state.state, state.delivery_count))
        if state.state is RecordState.AVAILABLE:
            self._find_next_fetch_offset = True

    def release_acquired_records(self, member_id: str, now_ms: int) -> StateTransition:
        """Release every record `member_id` holds, as when its share session closes or it leaves
        the group (Kafka's releaseAcquiredRecords): AVAILABLE again, or ARCHIVED below the SPSO or
        at the delivery limit. Raises KafkaError, with nothing changed, when one of them has an
        acknowledgement being written."""
        transition = StateTransition(self, [], [])
        try:
            for batch in [self.cached_state[key] for key in self._keys]:
                b = batch.batch_state
                if (
                    b is not None
                    and b.state is RecordState.ACQUIRED
                    and b.member_id == member_id
                    and batch.first_offset < self.start_offset <= batch.last_offset
                ):
                    batch.split()
                for first, last, state in batch.states():
                    if (
                        state.member_id not in (member_id, EMPTY_MEMBER_ID)
                        or state.state is not RecordState.ACQUIRED
                    ):
                        continue
                    target = RecordState.ARCHIVED if last < self.start_offset else RecordState.AVAILABLE
                    self._start(state, target, first, last, transition)
        except KafkaError:
            transition.rollback(now_ms)
            raise
        return transition

    # -- acquisition locks -----------------------------------------------------------------

    def next_lock_expiry_ms(self) -> int | None:
        """When the earliest acquisition lock expires; None when no record is held."""
        expiries = [
            s.lock_expiry_ms
            for _f, _l, s in self._all_states()
            if s.lock_expiry_ms is not None and s.rollback is None
        ]
        return min(expiries, default=None)

    def expire_locks(self, now_ms: int) -> list[PersisterStateBatch]:
        """Release every record whose acquisition lock has expired by `now_ms` (Kafka's
        releaseAcquisitionLockOnTimeout); returns the state batches to persist. Records with an
        acknowledgement being written are left to its outcome (`StateTransition.rollback`)."""
        changed: list[PersisterStateBatch] = []
        for key in list(self._keys):
            batch = self.cached_state[key]
            for first, last, state in list(batch.states()):
                if (
                    state.state is not RecordState.ACQUIRED
                    or state.rollback is not None
                    or state.lock_expiry_ms is None
                    or state.lock_expiry_ms > now_ms
                ):
                    continue
                if batch.offset_state is None and first < self.start_offset <= last:
                    # Part of the batch is below the SPSO: release it offset by offset.
                    for offset, s in batch.split().items():
                        changed.extend(self._release_on_timeout(s, offset, offset))
                    break
                changed.extend(self._release_on_timeout(state, first, last))
        if changed:
            self._find_next_fetch_offset = True
            self._maybe_update_cached_state_and_offsets()
        return changed

    def _release_on_timeout(self, state: InFlightState, first: int, last: int) -> list[PersisterStateBatch]:
        if state.state is not RecordState.ACQUIRED or state.rollback is not None:
            return []
        target = RecordState.ARCHIVED if last < self.start_offset else RecordState.AVAILABLE
        if not state.try_update(
            target, DeliveryCountOp.NO_OP, self.settings.delivery_count_limit, EMPTY_MEMBER_ID
        ):
            return []
        return [PersisterStateBatch(first, last, state.state, state.delivery_count)]

    # -- the start offset ------------------------------------------------------------------

    def update_cache_and_offsets(self, log_start_offset: int) -> None:
        """The log start offset moved past the SPSO (retention, DeleteRecords): the AVAILABLE
        records below it are archived and the SPSO moves to it (Kafka's updateCacheAndOffsets;
        the new SPSO is persisted with the next state write)."""
        if log_start_offset <= self.start_offset:
            return
        if not self._keys:
            self.start_offset = self.end_offset = log_start_offset
            return
        if self._archive_available(
            self.start_offset, log_start_offset, [self.cached_state[k] for k in self._keys]
        ):
            self._find_next_fetch_offset = True
        self.start_offset = log_start_offset
        self.end_offset = max(self.end_offset, self.start_offset)

    def _archive_available(self, first: int, end: int, batches: list[InFlightBatch]) -> bool:
        return self._archive(first, end, batches, RecordState.AVAILABLE)

    def _archive(self, first: int, end: int, batches: list[InFlightBatch], initial: RecordState) -> bool:
        """Archive for good the `initial` records in `first`..`end`-1 (Kafka's archiveRecords)."""
        archived = False
        for batch in batches:
            if batch.first_offset >= end:
                break
            if batch.offset_state is None and batch.first_offset >= first and batch.last_offset <= end - 1:
                assert batch.batch_state is not None
                if batch.batch_state.state is initial:
                    batch.batch_state.archive()
                    archived = True
                continue
            if batch.offset_state is None:
                assert batch.batch_state is not None
                if batch.batch_state.state is not initial:
                    continue
            for offset, state in batch.split().items():
                if first <= offset < end and state.state is initial:
                    state.archive()
                    archived = True
        return archived

    def transition_completed(self, committed: bool) -> None:
        """A `StateTransition` ended: the SPSO may move, or rolled-back records may be AVAILABLE."""
        if committed:
            self._maybe_update_cached_state_and_offsets()
        else:
            self._find_next_fetch_offset = True

    def _maybe_update_cached_state_and_offsets(self) -> None:
        """Move the SPSO past every leading ACKNOWLEDGED or ARCHIVED record and drop the in-flight
        batches wholly below it (Kafka's maybeUpdateCachedStateAndOffsets): not past a hole of the
        persisted state, nor while the record at the SPSO has a transition open."""
        floor = self._floor_key(self.start_offset)
        if floor is None or self.cached_state[floor].last_offset < self.start_offset:
            return  # the SPSO is in a hole: its records have yet to be fetched
        gap = self._gap_start()
        last_done = -1
        for key in self._keys:
            batch = self.cached_state[key]
            if gap is not None and batch.last_offset >= gap:
                break
            done = True
            for _first, last, state in batch.states():
                if not is_terminal(state.state) or state.rollback is not None:
                    done = False
                    break
                last_done = last
            if not done:
                break
        if last_done < self.start_offset:
            return
        last_cached = self.cached_state[self._keys[-1]].last_offset
        if last_done == last_cached:
            self.start_offset = self.end_offset = last_cached + 1
            self.cached_state.clear()
            self._keys.clear()
            return
        holder = self._floor_key(last_done)
        assert holder is not None
        if last_done == self.cached_state[holder].last_offset:
            following = self._keys[bisect.bisect_right(self._keys, last_done)]
            self.start_offset = max(self.start_offset, following)
            if gap is not None:
                self.start_offset = min(gap, self.start_offset)
            drop_through: int | None = holder
        else:
            self.start_offset = max(self.start_offset, last_done + 1)
            drop_through = self._keys[self._keys.index(holder) - 1] if holder != self._keys[0] else None
        if drop_through is not None:
            while self._keys and self._keys[0] <= drop_through:
                del self.cached_state[self._keys.pop(0)]

    def state_batches(self) -> list[PersisterStateBatch]:
        """The in-flight records at or above the SPSO as runs of one state and delivery count:
        what a snapshot of this share partition persists."""
        runs: list[PersisterStateBatch] = []
        for first, last, state in self._all_states():
            if last < self.start_offset:
                continue
            first = max(first, self.start_offset)
            persisted = RecordState.AVAILABLE if state.state is RecordState.ACQUIRED else state.state
            prev = runs[-1] if runs else None
            if (
                prev is not None
                and prev.last_offset + 1 == first
                and prev.delivery_state is persisted
                and prev.delivery_count == state.delivery_count
            ):
                runs[-1] = PersisterStateBatch(prev.first_offset, last, persisted, state.delivery_count)
            else:
                runs.append(PersisterStateBatch(first, last, persisted, state.delivery_count))
        return runs

    def record_state(self, offset: int) -> InFlightState | None:
        """The in-flight state of `offset`; None when it is not in flight."""
        key = self._floor_key(offset)
        if key is None or self.cached_state[key].last_offset < offset:
            return None
        batch = self.cached_state[key]
        return batch.batch_state if batch.offset_state is None else batch.offset_state.get(offset)
