"""One transactional id's state (Kafka's TransactionMetadata and TransactionState).

States (the int8 ids are Kafka's, written in `__transaction_state`):

    EMPTY (0)               no transaction; after InitProducerId
    ONGOING (1)             partitions (or the group's offsets partition) added
    PREPARE_COMMIT (2)      EndTxn(commit) written; markers being sent
    PREPARE_ABORT (3)       EndTxn(abort), a timeout or a fencing InitProducerId; markers being sent
    COMPLETE_COMMIT (4)     every COMMIT marker written
    COMPLETE_ABORT (5)      every ABORT marker written
    DEAD (6)                the transactional id expired (a tombstone is written)
    PREPARE_EPOCH_FENCE (7) in memory only: an InitProducerId found the transaction ONGOING; the
                            bumped epoch aborts it (never returned to a client)

Transactions v2 (KIP-890 part 2; `client_transaction_version` 2, set by the request that began
the transaction: AddPartitionsToTxn v4+, EndTxn v5+): PREPARE_COMMIT/PREPARE_ABORT bump the
producer epoch (`last_producer_epoch` keeps the one the client used, so a retried EndTxn is
recognised); when the epoch would reach Short.MAX_VALUE a new producer id is taken
(`next_producer_id`), which COMPLETE_* then adopts with epoch 0.

Transitions (`VALID_PREVIOUS`), each first prepared (`pending_state` set, a `TxnTransit` value
describing the new state), written to the log, then completed (`complete_transition`), so a
failed write leaves the state as it was:

    EMPTY | COMPLETE_* --InitProducerId (epoch bump or new producer id)--> EMPTY
    EMPTY | COMPLETE_* | ONGOING --AddPartitionsToTxn / AddOffsetsToTxn--> ONGOING
    ONGOING --EndTxn(commit)--> PREPARE_COMMIT --all markers written--> COMPLETE_COMMIT
    ONGOING --EndTxn(abort), timeout--> PREPARE_ABORT --all markers written--> COMPLETE_ABORT
    EMPTY | COMPLETE_* --EndTxn(abort) of transactions v2--> PREPARE_ABORT (nothing to abort)
    ONGOING --InitProducerId--> PREPARE_EPOCH_FENCE --> PREPARE_ABORT (epoch bumped)
    EMPTY | COMPLETE_* --idle transactional.id.expiration.ms--> DEAD
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

from protocol.errors import ErrorCode, KafkaError
from protocol.topic_partition import TopicPartition

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
SHORT_MAX = 32767


class TransactionState(enum.IntEnum):
    EMPTY = 0
    ONGOING = 1
    PREPARE_COMMIT = 2
    PREPARE_ABORT = 3
    COMPLETE_COMMIT = 4
    COMPLETE_ABORT = 5
    DEAD = 6
    PREPARE_EPOCH_FENCE = 7

    @property
    def kafka_name(self) -> str:
        """The name kafka-transactions.sh and DescribeTransactions use (Kafka's stateName)."""
        return _NAMES[self]


_NAMES = {
    TransactionState.EMPTY: "Empty",
    TransactionState.ONGOING: "Ongoing",
    TransactionState.PREPARE_COMMIT: "PrepareCommit",
    TransactionState.PREPARE_ABORT: "PrepareAbort",
    TransactionState.COMPLETE_COMMIT: "CompleteCommit",
    TransactionState.COMPLETE_ABORT: "CompleteAbort",
    TransactionState.DEAD: "Dead",
    TransactionState.PREPARE_EPOCH_FENCE: "PrepareEpochFence",
}

S = TransactionState
VALID_PREVIOUS: dict[TransactionState, frozenset[TransactionState]] = {
    S.EMPTY: frozenset({S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}),
    S.ONGOING: frozenset({S.ONGOING, S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}),
    S.PREPARE_COMMIT: frozenset({S.ONGOING}),
    S.PREPARE_ABORT: frozenset({S.ONGOING, S.PREPARE_EPOCH_FENCE, S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}),
    S.COMPLETE_COMMIT: frozenset({S.PREPARE_COMMIT}),
    S.COMPLETE_ABORT: frozenset({S.PREPARE_ABORT}),
    S.DEAD: frozenset({S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}),
    S.PREPARE_EPOCH_FENCE: frozenset({S.ONGOING}),
}


@dataclass(frozen=True, slots=True)
class TxnTransit:
    """The state a transition leads to (Kafka's TxnTransitMetadata)."""

    producer_id: int
    previous_producer_id: int
    next_producer_id: int
    producer_epoch: int
    last_producer_epoch: int
    timeout_ms: int
    state: TransactionState
    partitions: frozenset[TopicPartition]
    start_timestamp_ms: int
    last_update_timestamp_ms: int
    client_transaction_version: int = 0


@dataclass(slots=True)
class TransactionMetadata:
    transactional_id: str
    producer_id: int
    previous_producer_id: int = NO_PRODUCER_ID
    next_producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH
    last_producer_epoch: int = NO_PRODUCER_EPOCH
    timeout_ms: int = 60_000
    state: TransactionState = TransactionState.EMPTY
    partitions: set[TopicPartition] = field(default_factory=set)
    start_timestamp_ms: int = -1
    last_update_timestamp_ms: int = -1
    client_transaction_version: int = 0
    pending_state: TransactionState | None = None
    has_failed_epoch_fence: bool = False

    @property
    def pending_transition_in_progress(self) -> bool:
        return self.pending_state is not None

    @property
    def is_producer_epoch_exhausted(self) -> bool:
        return self.producer_epoch >= SHORT_MAX - 1

    # -- preparing transitions (Kafka's prepare* methods) ----------------------------------------

    def _transit(self, state: TransactionState, **changes: object) -> TxnTransit:
        if self.pending_state is not None:
            raise KafkaError(
                ErrorCode.concurrent_transactions,
                f"{self.transactional_id}: transition to {state.name} while {self.pending_state.name} is pending",
            )
        if self.state not in VALID_PREVIOUS[state]:
            raise RuntimeError(f"{self.transactional_id}: no transition from {self.state.name} to {state.name}")
        values: dict[str, object] = {
            "producer_id": self.producer_id,
            "previous_producer_id": self.previous_producer_id,
            "next_producer_id": self.next_producer_id,
            "producer_epoch": self.producer_epoch,
            "last_producer_epoch": self.last_producer_epoch,
            "timeout_ms": self.timeout_ms,
            "state": state,
            "partitions": frozenset(self.partitions),
            "start_timestamp_ms": self.start_timestamp_ms,
            "last_update_timestamp_ms": self.last_update_timestamp_ms,
            "client_transaction_version": self.client_transaction_version,
        }
        values.update(changes)
        self.pending_state = state
        return TxnTransit(**values)  # type: ignore[arg-type]

    def prepare_increment_producer_epoch(
        self, timeout_ms: int, expected_epoch: int | None, now_ms: int
    ) -> TxnTransit:
        """InitProducerId on an existing id: bump the epoch (Kafka's prepareIncrementProducerEpoch);
        PRODUCER_FENCED when the expected epoch is neither the current nor the last one."""
        bumped = self.producer_epoch + 1
        if expected_epoch is None:
            epoch, last = bumped, NO_PRODUCER_EPOCH
        elif self.producer_epoch == NO_PRODUCER_EPOCH or expected_epoch == self.producer_epoch:
            epoch, last = bumped, self.producer_epoch
        elif expected_epoch == self.last_producer_epoch:
            epoch, last = self.producer_epoch, self.last_producer_epoch  # a retry
        else:
            raise KafkaError(ErrorCode.producer_fenced, f"{self.transactional_id}: epoch {expected_epoch} is fenced")
        return self._transit(
            TransactionState.EMPTY, producer_epoch=epoch, last_producer_epoch=last, timeout_ms=timeout_ms,
            partitions=frozenset(), start_timestamp_ms=-1, last_update_timestamp_ms=now_ms,
        )  # fmt: skip

    def prepare_producer_id_rotation(
        self, new_producer_id: int, timeout_ms: int, now_ms: int, record_last_epoch: bool
    ) -> TxnTransit:
        """The epoch is exhausted: a new producer id with epoch 0."""
        return self._transit(
            TransactionState.EMPTY, producer_id=new_producer_id, previous_producer_id=self.producer_id,
            producer_epoch=0, last_producer_epoch=self.producer_epoch if record_last_epoch else NO_PRODUCER_EPOCH,
            timeout_ms=timeout_ms, partitions=frozenset(), start_timestamp_ms=-1, last_update_timestamp_ms=now_ms,
        )  # fmt: skip

    def prepare_fence_producer_epoch(self) -> TxnTransit:
        """Kafka's prepareFenceProducerEpoch: bump the epoch (once, even if the write failed
        before) to abort the ongoing transaction and fence its producer."""
        bumped = self.producer_epoch if self.has_failed_epoch_fence else self.producer_epoch + 1
        return self._transit(
            TransactionState.PREPARE_EPOCH_FENCE, producer_epoch=bumped, last_producer_epoch=NO_PRODUCER_EPOCH
        )

    def prepare_add_partitions(
        self, added: set[TopicPartition], now_ms: int, client_transaction_version: int
    ) -> TxnTransit:
        start = now_ms if self.state in (S.EMPTY, S.COMPLETE_ABORT, S.COMPLETE_COMMIT) else self.start_timestamp_ms
        return self._transit(
            TransactionState.ONGOING, partitions=frozenset(self.partitions | added), start_timestamp_ms=start,
            last_update_timestamp_ms=now_ms, client_transaction_version=client_transaction_version,
        )  # fmt: skip

    def prepare_abort_or_commit(
        self,
        state: TransactionState,
        now_ms: int,
        client_transaction_version: int = 0,
        next_producer_id: int = NO_PRODUCER_ID,
        no_partition_added: bool = False,
    ) -> TxnTransit:
        """Kafka's prepareAbortOrCommit: transactions v2 bump the epoch; an abort with nothing
        added starts (and ends) the transaction now."""
        if client_transaction_version >= 2:
            epoch, last = self.producer_epoch + 1, self.producer_epoch
        else:
            epoch, last = self.producer_epoch, self.last_producer_epoch
        return self._transit(
            state, producer_epoch=epoch, last_producer_epoch=last, next_producer_id=next_producer_id,
            start_timestamp_ms=now_ms if no_partition_added else self.start_timestamp_ms,
            last_update_timestamp_ms=now_ms, client_transaction_version=client_transaction_version,
        )  # fmt: skip

    def prepare_complete(self, now_ms: int) -> TxnTransit:
        """Kafka's prepareComplete: a transactions v2 epoch overflow moves to the next producer id."""
        state = S.COMPLETE_COMMIT if self.state is S.PREPARE_COMMIT else S.COMPLETE_ABORT
        if self.client_transaction_version >= 2 and self.next_producer_id != NO_PRODUCER_ID:
            return self._transit(
                state, producer_id=self.next_producer_id, previous_producer_id=self.producer_id, producer_epoch=0,
                next_producer_id=NO_PRODUCER_ID, partitions=frozenset(), last_update_timestamp_ms=now_ms,
            )  # fmt: skip
        return self._transit(
            state, next_producer_id=NO_PRODUCER_ID, partitions=frozenset(), last_update_timestamp_ms=now_ms
        )

    def prepare_dead(self) -> TxnTransit:
        return self._transit(TransactionState.DEAD, partitions=frozenset())

    # -- completing ------------------------------------------------------------------------------

    def complete_transition(self, transit: TxnTransit) -> None:
        """The transit was written: it becomes the state (Kafka's completeTransitionTo)."""
        self.producer_id = transit.producer_id
        self.previous_producer_id = transit.previous_producer_id
        self.next_producer_id = transit.next_producer_id
        self.producer_epoch = transit.producer_epoch
        self.last_producer_epoch = transit.last_producer_epoch
        self.timeout_ms = transit.timeout_ms
        self.state = transit.state
        self.partitions = set(transit.partitions)
        self.start_timestamp_ms = transit.start_timestamp_ms
        self.last_update_timestamp_ms = transit.last_update_timestamp_ms
        self.client_transaction_version = transit.client_transaction_version
        self.pending_state = None
        if transit.state is not S.PREPARE_EPOCH_FENCE:
            self.has_failed_epoch_fence = False

    def abort_transition(self) -> None:
        self.pending_state = None
