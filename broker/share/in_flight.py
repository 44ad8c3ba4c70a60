"""In-flight records of a share partition: their states, as Kafka's RecordState, InFlightState
and InFlightBatch (server, org.apache.kafka.server.share.fetch), and the values a share partition
exchanges with share fetches, acknowledgements and the persister. The transitions are listed in
share_partition.py's docstring."""

from __future__ import annotations

import enum
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from protocol.errors import ErrorCode, KafkaError

EMPTY_MEMBER_ID = ""
"""The member of records no member holds (Kafka's SharePartition.EMPTY_MEMBER_ID)."""


class RecordState(enum.IntEnum):
    AVAILABLE = 0
    ACQUIRED = 1
    ACKNOWLEDGED = 2
    ARCHIVING = 3
    ARCHIVED = 4


class AcknowledgeType(enum.IntEnum):
    GAP = 0
    ACCEPT = 1
    RELEASE = 2
    REJECT = 3
    RENEW = 4
    """KIP-1222: extend the acquisition lock; the record stays ACQUIRED."""


ACK_TYPE_TO_RECORD_STATE = {
    AcknowledgeType.GAP: RecordState.ARCHIVED,
    AcknowledgeType.ACCEPT: RecordState.ACKNOWLEDGED,
    AcknowledgeType.RELEASE: RecordState.AVAILABLE,
    AcknowledgeType.REJECT: RecordState.ARCHIVED,
}


class DeliveryCountOp(enum.Enum):
    INCREASE = "increase"
    NO_OP = "no_op"


@dataclass(frozen=True, slots=True)
class SharePartitionSettings:
    """The group configs a share partition obeys (Kafka's defaults; the broker's are read per
    group through broker/coordinator/group_configs.py)."""

    record_lock_duration_ms: int = 30_000
    """`group.share.record.lock.duration.ms`"""
    delivery_count_limit: int = 5
    """`group.share.delivery.count.limit`"""
    max_in_flight_records: int = 2_000
    """`group.share.partition.max.record.locks`"""
    read_committed: bool = False
    """`share.isolation.level` read_committed: records of aborted transactions are archived."""
    auto_offset_reset: str = "latest"
    """`share.auto.offset.reset`: where a share partition never initialized starts (earliest,
    latest, by_duration:<ISO-8601 duration>)."""


@dataclass(frozen=True, slots=True)
class FetchedBatch:
    """A record batch read from the log for a share fetch: its offsets and, for read_committed
    share groups, what its header says of transactions."""

    base_offset: int
    last_offset: int
    producer_id: int = -1
    transactional: bool = False
    abort_marker: bool = False
    """A control batch holding an ABORT marker."""


@dataclass(frozen=True, slots=True)
class AbortedTransaction:
    """A Fetch's aborted transaction: its producer and first offset (from the transaction index)."""

    producer_id: int
    first_offset: int


@dataclass(frozen=True, slots=True)
class AcquiredRecords:
    """A range handed to a member (ShareFetchResponse AcquiredRecords)."""

    first_offset: int
    last_offset: int
    delivery_count: int


@dataclass(frozen=True, slots=True)
class AcknowledgementBatch:
    """A ShareAcknowledge (or piggy-backed ShareFetch) acknowledgement batch: one type for the
    whole range, or one per offset."""

    first_offset: int
    last_offset: int
    acknowledge_types: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class PersisterStateBatch:
    """A range of records in one state, as WriteShareGroupState and `__share_group_state` carry it."""

    first_offset: int
    last_offset: int
    delivery_state: RecordState
    delivery_count: int


@dataclass(slots=True)
class InFlightState:
    """The state of one in-flight record, or of a whole in-flight batch."""

    state: RecordState
    delivery_count: int
    member_id: str = EMPTY_MEMBER_ID
    lock_expiry_ms: int | None = None
    rollback: tuple[RecordState, int, str, int | None] | None = None
    """The state before an open transition; None when none is open."""
    terminal: bool = False
    """ARCHIVED for good (the log start offset passed it, or compaction removed it): an open
    transition's outcome no longer changes it."""

    def try_update(
        self, new_state: RecordState, op: DeliveryCountOp, delivery_count_limit: int, member_id: str
    ) -> bool:
        """Kafka's InFlightState.tryUpdateState: a record made AVAILABLE again after its last
        allowed delivery is ARCHIVED instead."""
        if self.rollback is not None:
            return False
        if new_state is RecordState.AVAILABLE and self.delivery_count >= delivery_count_limit:
            new_state = RecordState.ARCHIVED
        if not valid_transition(self.state, new_state):
            return False
        self.state = new_state
        if new_state is not RecordState.ARCHIVED and op is DeliveryCountOp.INCREASE:
            self.delivery_count += 1
        self.member_id = member_id
        if new_state is not RecordState.ACQUIRED:
            self.lock_expiry_ms = None
        return True

    def start_transition(self, new_state: RecordState, delivery_count_limit: int, member_id: str) -> bool:
        before = (self.state, self.delivery_count, self.member_id, self.lock_expiry_ms)
        if not self.try_update(new_state, DeliveryCountOp.NO_OP, delivery_count_limit, member_id):
            return False
        self.rollback = before
        return True

    def archive(self) -> None:
        """Kafka's InFlightState.archive."""
        self.terminal = True
        self.state, self.member_id, self.lock_expiry_ms = RecordState.ARCHIVED, EMPTY_MEMBER_ID, None

    def complete_transition(self, commit: bool, now_ms: int) -> None:
        before, self.rollback = self.rollback, None
        if commit or before is None or self.terminal:
            return
        state, self.delivery_count, member_id, lock_expiry_ms = before
        if state is RecordState.ACQUIRED and lock_expiry_ms is not None and lock_expiry_ms <= now_ms:
            # The lock expired while the acknowledgement was being written: as Kafka, the record
            # goes back to AVAILABLE rather than to a member whose lock is gone.
            self.state, self.member_id, self.lock_expiry_ms = RecordState.AVAILABLE, EMPTY_MEMBER_ID, None
        else:
            self.state, self.member_id, self.lock_expiry_ms = state, member_id, lock_expiry_ms


def valid_transition(current: RecordState, new: RecordState) -> bool:
    """Kafka's RecordState.validateTransition."""
    if current is new or current in (RecordState.ACKNOWLEDGED, RecordState.ARCHIVED):
        return False
    if current is RecordState.AVAILABLE:
        return new is RecordState.ACQUIRED
    return True


def is_terminal(state: RecordState) -> bool:
    return state in (RecordState.ACKNOWLEDGED, RecordState.ARCHIVED)


@dataclass(slots=True)
class InFlightBatch:
    """Records `first_offset`..`last_offset` acquired together: one `batch_state`, or, once split,
    one state per offset in `offset_state` (and `batch_state` None)."""

    first_offset: int
    last_offset: int
    batch_state: InFlightState | None
    offset_state: dict[int, InFlightState] | None = None

    def split(self) -> dict[int, InFlightState]:
        """Track this batch per offset from now on (Kafka's maybeInitializeOffsetStateUpdate)."""
        if self.offset_state is None:
            assert self.batch_state is not None
            b = self.batch_state
            self.offset_state = {
                offset: InFlightState(b.state, b.delivery_count, b.member_id, b.lock_expiry_ms)
                for offset in range(self.first_offset, self.last_offset + 1)
            }
            self.batch_state = None
        return self.offset_state

    def states(self) -> Iterator[tuple[int, int, InFlightState]]:
        """(first, last, state) for each range of this batch that has one state object."""
        if self.offset_state is None:
            assert self.batch_state is not None
            yield self.first_offset, self.last_offset, self.batch_state
        else:
            for offset, state in self.offset_state.items():
                yield offset, offset, state


def ack_targets(ack: AcknowledgementBatch) -> list[RecordState | None]:
    """The state each acknowledge type asks for; None for RENEW."""
    span = ack.last_offset - ack.first_offset + 1
    if ack.last_offset < ack.first_offset or len(ack.acknowledge_types) not in (1, span):
        raise KafkaError(
            ErrorCode.invalid_request, f"Invalid acknowledgement batch {ack.first_offset}-{ack.last_offset}"
        )
    try:
        types = [AcknowledgeType(t) for t in ack.acknowledge_types]
    except ValueError:
        raise KafkaError(
            ErrorCode.invalid_request, f"Invalid acknowledge type: {list(ack.acknowledge_types)}"
        ) from None
    return [None if t is AcknowledgeType.RENEW else ACK_TYPE_TO_RECORD_STATE[t] for t in types]


def last_offset_of_batch_holding(fetched: Sequence[FetchedBatch], offset: int) -> int:
    """The last offset of the fetched batch that holds `offset` (a batch is acquired whole)."""
    holding = None
    for batch in fetched:
        if offset < batch.base_offset:
            break
        holding = batch
    if holding is not None and offset <= holding.last_offset:
        return holding.last_offset
    return offset


def aborted_batches(
    fetched: Sequence[FetchedBatch], aborted: Sequence[AbortedTransaction]
) -> list[FetchedBatch]:
    """The fetched batches of aborted transactions (Kafka's fetchAbortedTransactionRecordBatches):
    a transactional batch whose producer has an aborted transaction starting at or before it and
    not yet closed by its ABORT marker."""
    pending = sorted(aborted, key=lambda t: t.first_offset)
    aborting: set[int] = set()
    doomed: list[FetchedBatch] = []
    for batch in fetched:
        if batch.producer_id < 0:
            continue
        while pending and pending[0].first_offset <= batch.last_offset:
            aborting.add(pending.pop(0).producer_id)
        if batch.abort_marker:
            aborting.discard(batch.producer_id)
        elif batch.transactional and batch.producer_id in aborting:
            doomed.append(batch)
    return doomed


def without_batches(
    acquired: Sequence[AcquiredRecords], batches: Sequence[FetchedBatch]
) -> list[AcquiredRecords]:
    """`acquired` with the offsets of `batches` cut out (Kafka's
    filterRecordBatchesFromAcquiredRecords)."""
    result: list[AcquiredRecords] = []
    for a in acquired:
        pieces = [a]
        for batch in batches:
            kept = []
            for p in pieces:
                if p.last_offset < batch.base_offset or p.first_offset > batch.last_offset:
                    kept.append(p)
                    continue
                if p.first_offset < batch.base_offset:
                    kept.append(AcquiredRecords(p.first_offset, batch.base_offset - 1, p.delivery_count))
                if p.last_offset > batch.last_offset:
                    kept.append(AcquiredRecords(batch.last_offset + 1, p.last_offset, p.delivery_count))
            pieces = kept
        result += pieces
    return result


def acknowledgement_batches_valid(
    batches: Sequence[AcknowledgementBatch], supports_renew: bool, is_renew_ack: bool
) -> bool:
    """Whether one partition's acknowledgement batches in a ShareFetch or ShareAcknowledge are
    well formed; if not, the partition gets INVALID_REQUEST (Kafka's KafkaApis
    validateAcknowledgementBatches): first <= last, batches in order (each starting at or after
    the previous one's last offset), one type or one per offset, types 0-3 (0-4 with RENEW, a
    version that supports it, and the request flagged IsRenewAck)."""
    previous_last = -1
    max_type = AcknowledgeType.RENEW if supports_renew else AcknowledgeType.REJECT
    for b in batches:
        types = b.acknowledge_types
        if b.first_offset > b.last_offset or b.first_offset < previous_last or not types:
            return False
        if len(types) > 1 and b.last_offset - b.first_offset != len(types) - 1:
            return False
        if any(t < 0 or t > max_type for t in types):
            return False
        if AcknowledgeType.RENEW in types and not is_renew_ack:
            return False
        previous_last = b.last_offset
    return True
