"""The share coordinator's answers to the share-group state RPCs for one share partition, over the
store of the `__share_group_state` partition that holds it: InitializeShareGroupState,
ReadShareGroupState, WriteShareGroupState, DeleteShareGroupState and ReadShareGroupStateSummary, as
Kafka 4.3.1's ShareCoordinatorShard answers them (its maybeGet*Error checks, in its order, with its
messages).

Pure: each function returns the answer and the records to append; the caller appends them to the
`__share_group_state` partition, replays them into the store once written, and only then answers
(Kafka's CoordinatorRuntime): share_coordinator.py does. No handler serves these APIs yet.

Checks, per request (the first that fails answers):

    initialize  partition >= 0 (INVALID_REQUEST); a state epoch older than the store's FENCED_STATE_EPOCH;
                the topic and partition must exist (UNKNOWN_TOPIC_OR_PARTITION)
    write       partition; the share partition must be initialized (INVALID_REQUEST);
                an older leader epoch FENCED_LEADER_EPOCH, an older state epoch
                FENCED_STATE_EPOCH; the topic and partition must exist
    read        partition; initialized; an older leader epoch FENCED_LEADER_EPOCH; the
                topic and partition must exist. A newer leader epoch is recorded (a write of
                no batches), as the new partition leader reads the state.
    summary     partition; the topic and partition must exist; an uninitialized share
                partition answers start offset -1
    delete      partition; the topic and partition must exist; deleting a share
                partition that has no state writes nothing
An epoch of -1 in a request is not checked.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from broker.share.in_flight import PersisterStateBatch
from broker.share.share_state import (
    UNINITIALIZED_DELIVERY_COMPLETE_COUNT,
    UNINITIALIZED_START_OFFSET,
    SharePartitionKey,
    ShareStateRecord,
    ShareStateStore,
)
from protocol.errors import ErrorCode

PartitionCount = Callable[[uuid.UUID], "int | None"]
"""A topic's partition count in the cluster's metadata (None: no such topic)."""

NEGATIVE_PARTITION_ID = "The partition id cannot be a negative number."
WRITE_UNINITIALIZED = "Write operation on uninitialized share partition not allowed."
READ_UNINITIALIZED = "Read operation on uninitialized share partition not allowed."
FENCED_LEADER_EPOCH = "The leader epoch in the request is older than the epoch on the broker."
FENCED_STATE_EPOCH = "The share coordinator rejected the request because the share-group state epoch did not match."
UNKNOWN_TOPIC_OR_PARTITION = "This server does not host this topic-partition."

DEFAULT_STATE_EPOCH = 0
DEFAULT_LEADER_EPOCH = 0


@dataclass(frozen=True, slots=True)
class StateAnswer:
    """A share partition's result in an Initialize, Write or Delete answer."""

    error: ErrorCode = ErrorCode.none
    message: str | None = None


@dataclass(frozen=True, slots=True)
class ReadAnswer:
    error: ErrorCode = ErrorCode.none
    message: str | None = None
    state_epoch: int = 0
    start_offset: int = 0
    state_batches: tuple[PersisterStateBatch, ...] = ()


@dataclass(frozen=True, slots=True)
class SummaryAnswer:
    error: ErrorCode = ErrorCode.none
    message: str | None = None
    state_epoch: int = 0
    leader_epoch: int = 0
    start_offset: int = 0
    delivery_complete_count: int = 0


Result = tuple[StateAnswer, list[ShareStateRecord]]


def _key_error(key: SharePartitionKey) -> tuple[ErrorCode, str] | None:
    """Kafka also refuses a null topic id, which its wire format cannot carry (a uuid field)."""
    if key.partition < 0:
        return ErrorCode.invalid_request, NEGATIVE_PARTITION_ID
    return None


def _unknown(key: SharePartitionKey, partitions: PartitionCount) -> bool:
    count = partitions(key.topic_id)
    return count is None or count <= key.partition


def _older(requested: int, known: int | None) -> bool:
    return requested != -1 and known is not None and known > requested


def initialize(
    store: ShareStateStore, partitions: PartitionCount, key: SharePartitionKey, state_epoch: int,
    start_offset: int, now_ms: int,
) -> Result:  # fmt: skip
    """InitializeShareGroupState: a fresh snapshot of the share partition."""
    failed = _key_error(key)
    if failed is not None:
        return StateAnswer(*failed), []
    if _older(state_epoch, store.state_epochs.get(key)):
        return StateAnswer(ErrorCode.fenced_state_epoch, FENCED_STATE_EPOCH), []
    if _unknown(key, partitions):
        return StateAnswer(ErrorCode.unknown_topic_or_partition, UNKNOWN_TOPIC_OR_PARTITION), []
    return StateAnswer(), [store.initialize_record(key, state_epoch, start_offset, now_ms)]


def write(
    store: ShareStateStore, partitions: PartitionCount, key: SharePartitionKey, state_epoch: int,
    leader_epoch: int, start_offset: int, delivery_complete_count: int,
    batches: Iterable[PersisterStateBatch], now_ms: int,
) -> Result:  # fmt: skip
    """WriteShareGroupState: an update (or, every so many updates, a snapshot) of the share
    partition's state."""
    failed = _key_error(key)
    if failed is not None:
        return StateAnswer(*failed), []
    if store.read(key) is None:
        return StateAnswer(ErrorCode.invalid_request, WRITE_UNINITIALIZED), []
    if _older(leader_epoch, store.leader_epochs.get(key)):
        return StateAnswer(ErrorCode.fenced_leader_epoch, FENCED_LEADER_EPOCH), []
    if _older(state_epoch, store.state_epochs.get(key)):
        return StateAnswer(ErrorCode.fenced_state_epoch, FENCED_STATE_EPOCH), []
    if _unknown(key, partitions):
        return StateAnswer(ErrorCode.unknown_topic_or_partition, UNKNOWN_TOPIC_OR_PARTITION), []
    record = store.write_record(key, start_offset, leader_epoch, delivery_complete_count, batches, now_ms)
    return StateAnswer(), [record]


def read(
    store: ShareStateStore, partitions: PartitionCount, key: SharePartitionKey, leader_epoch: int, now_ms: int
) -> tuple[ReadAnswer, list[ShareStateRecord]]:
    """ReadShareGroupState (Kafka's readStateAndMaybeUpdateLeaderEpoch)."""
    failed = _key_error(key)
    if failed is not None:
        return ReadAnswer(*failed), []
    state = store.read(key)
    if state is None:
        return ReadAnswer(ErrorCode.invalid_request, READ_UNINITIALIZED), []
    known = store.leader_epochs.get(key)
    if _older(leader_epoch, known):
        return ReadAnswer(ErrorCode.fenced_leader_epoch, FENCED_LEADER_EPOCH), []
    if _unknown(key, partitions):
        return ReadAnswer(ErrorCode.unknown_topic_or_partition, UNKNOWN_TOPIC_OR_PARTITION), []
    answer = ReadAnswer(
        state_epoch=state.state_epoch, start_offset=state.start_offset, state_batches=state.state_batches
    )
    if leader_epoch == -1 or known == leader_epoch:
        return answer, []
    record = store.write_record(
        key, state.start_offset, leader_epoch, state.delivery_complete_count, (), now_ms, update_leader_epoch=True
    )
    return answer, [record]


def read_summary(store: ShareStateStore, partitions: PartitionCount, key: SharePartitionKey) -> SummaryAnswer:
    """ReadShareGroupStateSummary (Kafka's readStateSummary)."""
    failed = _key_error(key)
    if failed is not None:
        return SummaryAnswer(*failed)
    if _unknown(key, partitions):
        return SummaryAnswer(ErrorCode.unknown_topic_or_partition, UNKNOWN_TOPIC_OR_PARTITION)
    state = store.read(key)
    if state is None:
        return SummaryAnswer(
            state_epoch=DEFAULT_STATE_EPOCH,
            leader_epoch=DEFAULT_LEADER_EPOCH,
            start_offset=UNINITIALIZED_START_OFFSET,
            delivery_complete_count=UNINITIALIZED_DELIVERY_COMPLETE_COUNT,
        )
    return SummaryAnswer(
        state_epoch=state.state_epoch,
        leader_epoch=state.leader_epoch,
        start_offset=state.start_offset,
        delivery_complete_count=state.delivery_complete_count,
    )


def delete(store: ShareStateStore, partitions: PartitionCount, key: SharePartitionKey) -> Result:
    """DeleteShareGroupState: a tombstone for the share partition's state."""
    failed = _key_error(key)
    if failed is not None:
        return StateAnswer(*failed), []
    if _unknown(key, partitions):
        return StateAnswer(ErrorCode.unknown_topic_or_partition, UNKNOWN_TOPIC_OR_PARTITION), []
    if store.read(key) is None:
        return StateAnswer(), []
    return StateAnswer(), [store.delete_record(key)]
