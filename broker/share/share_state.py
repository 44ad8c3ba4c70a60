"""The share coordinator's state of share partitions, kept in `__share_group_state` as Kafka 4.3.1's
ShareCoordinatorShard keeps it: pure (the caller appends the records this returns, and replays
every record it reads or appended).

Each share partition (group, topic id, partition) has a `ShareGroupOffset`: snapshot, state and
leader epochs, the share-partition start offset, the delivery complete count, and its in-flight
state batches. Records:

    initialize (InitializeShareGroupState)  a new snapshot: state epoch from the request, start
                                            offset as given (-1: not yet decided), no batches
    write (WriteShareGroupState)            an update record with just the written batches, or,
                                            once `share.coordinator.snapshot.update.records.per.snapshot`
                                            updates followed the last snapshot, a new snapshot
                                            (snapshot epoch + 1) of everything merged
    delete                                  a tombstone on the snapshot key

Replaying merges an update's batches over the current ones (`combine_state_batches`, Kafka's
PersisterStateBatchCombiner): batches below the start offset are pruned, contiguous batches in
one state and delivery count are joined, and where batches overlap the one with the higher
delivery count wins, or, with equal counts, the higher state id (ARCHIVED over ACKNOWLEDGED over
AVAILABLE): a record's state only moves forward.
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from broker.share.in_flight import PersisterStateBatch
from broker.share.state_records import (
    SHARE_SNAPSHOT,
    SHARE_UPDATE,
    ShareSnapshotValue,
    ShareStateKey,
    ShareUpdateValue,
)

UNINITIALIZED_START_OFFSET = -1
UNINITIALIZED_DELIVERY_COMPLETE_COUNT = -1


@dataclass(frozen=True, slots=True)
class SharePartitionKey:
    group_id: str
    topic_id: uuid.UUID
    partition: int


@dataclass(frozen=True, slots=True)
class ShareGroupOffset:
    snapshot_epoch: int
    state_epoch: int
    leader_epoch: int
    start_offset: int
    delivery_complete_count: int
    state_batches: tuple[PersisterStateBatch, ...]
    create_timestamp_ms: int
    write_timestamp_ms: int


ShareStateRecord = tuple[ShareStateKey, ShareSnapshotValue | ShareUpdateValue | None]


def _info(b: PersisterStateBatch) -> tuple[int, int]:
    """Kafka's compareBatchDeliveryInfo order: delivery count, then state id."""
    return (b.delivery_count, int(b.delivery_state))


def _order(b: PersisterStateBatch) -> tuple[int, int, int, int]:
    """PersisterStateBatch.compareTo."""
    return (b.first_offset, b.last_offset, b.delivery_count, int(b.delivery_state))


def combine_state_batches(
    so_far: Sequence[PersisterStateBatch], new: Sequence[PersisterStateBatch], start_offset: int
) -> list[PersisterStateBatch]:
    """Kafka's PersisterStateBatchCombiner.combineStateBatches (see the module docstring)."""
    combined = [*so_far, *new]
    if start_offset != -1:
        combined = [
            b if b.first_offset >= start_offset else dataclasses.replace(b, first_offset=start_offset)
            for b in combined
            if b.last_offset >= start_offset
        ]
    if len(combined) < 2:
        return combined
    pending = set(combined)
    final: list[PersisterStateBatch] = []
    while True:
        pair = _merge_candidates(pending, final)
        if pair is None:
            break
        prev, cand = pair
        pending -= {prev, cand}
        pending.update(_resolve(prev, cand))
    final.extend(sorted(pending, key=_order))
    return final


def _merge_candidates(
    pending: set[PersisterStateBatch], final: list[PersisterStateBatch]
) -> tuple[PersisterStateBatch, PersisterStateBatch] | None:
    """The first overlapping (or contiguous, same state) pair in order; the batches before it can
    no longer change and move to `final` (Kafka's getMergeCandidatePair)."""
    ordered = sorted(pending, key=_order)
    if not ordered:
        return None
    prev = ordered[0]
    settled: list[PersisterStateBatch] = []
    for cand in ordered[1:]:
        if cand.first_offset <= prev.last_offset or (
            prev.last_offset + 1 == cand.first_offset and _info(prev) == _info(cand)
        ):
            pending.difference_update(settled)
            final.extend(settled)
            return prev, cand
        settled.append(prev)
        prev = cand
    pending.difference_update(settled)
    final.extend(settled)
    return None


def _resolve(prev: PersisterStateBatch, cand: PersisterStateBatch) -> list[PersisterStateBatch]:
    """What replaces an overlapping or contiguous pair (`prev` first in order)."""

    def part(b: PersisterStateBatch, first: int, last: int) -> PersisterStateBatch:
        return PersisterStateBatch(first, last, b.delivery_state, b.delivery_count)

    if _info(cand) == _info(prev):
        return [part(prev, prev.first_offset, max(prev.last_offset, cand.last_offset))]
    cand_loses = _info(cand) < _info(prev)
    if cand.first_offset == prev.first_offset:
        if cand.last_offset == prev.last_offset:
            return [cand]
        if cand_loses:
            return [prev, part(cand, prev.last_offset + 1, cand.last_offset)]
        return [cand]
    if cand.last_offset < prev.last_offset:  # prev swallows cand
        if cand_loses:
            return [prev]
        return [
            part(prev, prev.first_offset, cand.first_offset - 1),
            cand,
            part(prev, cand.last_offset + 1, prev.last_offset),
        ]
    if cand.last_offset == prev.last_offset:
        if cand_loses:
            return [prev]
        return [part(prev, prev.first_offset, cand.first_offset - 1), cand]
    if cand_loses:
        return [prev, part(cand, prev.last_offset + 1, cand.last_offset)]
    return [part(prev, prev.first_offset, cand.first_offset - 1), cand]


class ShareStateStore:
    """The share partitions of one `__share_group_state` partition."""

    def __init__(self, updates_per_snapshot: int = 500) -> None:
        self.updates_per_snapshot = updates_per_snapshot
        """`share.coordinator.snapshot.update.records.per.snapshot`"""
        self.states: dict[SharePartitionKey, ShareGroupOffset] = {}
        self._updates_since_snapshot: dict[SharePartitionKey, int] = {}

    def read(self, key: SharePartitionKey) -> ShareGroupOffset | None:
        return self.states.get(key)

    # -- replay (Kafka's ShareCoordinatorShard.replay) ---------------------------------------------

    def replay(self, record: ShareStateRecord) -> None:
        key, value = record
        sp = SharePartitionKey(key.group_id, key.topic_id, key.partition)
        if key.type == SHARE_SNAPSHOT:
            if value is None:
                self.states.pop(sp, None)
                self._updates_since_snapshot.pop(sp, None)
                return
            assert isinstance(value, ShareSnapshotValue)
            self.states[sp] = ShareGroupOffset(
                value.snapshot_epoch,
                value.state_epoch,
                value.leader_epoch,
                value.start_offset,
                value.delivery_complete_count,
                value.state_batches,
                value.create_timestamp_ms,
                value.write_timestamp_ms,
            )
            if self._updates_since_snapshot.get(sp, 0) >= self.updates_per_snapshot:
                self._updates_since_snapshot[sp] = 0
            return
        if key.type != SHARE_UPDATE or value is None:
            return
        assert isinstance(value, ShareUpdateValue)
        current = self.states.get(sp)
        if current is None:
            self.states[sp] = ShareGroupOffset(
                value.snapshot_epoch,
                0,
                value.leader_epoch,
                value.start_offset,
                value.delivery_complete_count,
                value.state_batches,
                0,
                0,
            )  # fmt: skip  (Kafka's ShareGroupOffset.fromRecord: no state epoch, no timestamps)
        else:
            start = current.start_offset if value.start_offset == -1 else value.start_offset
            self.states[sp] = dataclasses.replace(
                current,
                start_offset=start,
                leader_epoch=current.leader_epoch if value.leader_epoch == -1 else value.leader_epoch,
                delivery_complete_count=value.delivery_complete_count,
                state_batches=tuple(combine_state_batches(current.state_batches, value.state_batches, start)),
            )
        self._updates_since_snapshot[sp] = self._updates_since_snapshot.get(sp, 0) + 1

    # -- records for requests ------------------------------------------------------------------------

    def initialize_record(
        self, key: SharePartitionKey, state_epoch: int, start_offset: int, now_ms: int
    ) -> ShareStateRecord:
        """A fresh snapshot (Kafka's generateInitializeStateRecord)."""
        current = self.states.get(key)
        return _snapshot(
            key,
            ShareGroupOffset(
                snapshot_epoch=0 if current is None else current.snapshot_epoch + 1,
                state_epoch=state_epoch,
                leader_epoch=0,
                start_offset=start_offset,
                delivery_complete_count=(
                    UNINITIALIZED_DELIVERY_COMPLETE_COUNT if start_offset == UNINITIALIZED_START_OFFSET else 0
                ),
                state_batches=(),
                create_timestamp_ms=now_ms,
                write_timestamp_ms=now_ms,
            ),
        )

    def write_record(
        self,
        key: SharePartitionKey,
        start_offset: int,
        leader_epoch: int,
        delivery_complete_count: int,
        batches: Iterable[PersisterStateBatch],
        now_ms: int,
        update_leader_epoch: bool = False,
    ) -> ShareStateRecord:
        """The record for a write of `key`'s state, which must exist (Kafka's
        generateShareStateRecord)."""
        current = self.states[key]
        new_batches = list(batches)
        epoch = current.leader_epoch
        if update_leader_epoch and leader_epoch != -1:
            epoch = leader_epoch
        if self._updates_since_snapshot.get(key, 0) >= self.updates_per_snapshot:
            start = current.start_offset if start_offset == -1 else start_offset
            return _snapshot(
                key,
                dataclasses.replace(
                    current,
                    snapshot_epoch=current.snapshot_epoch + 1,
                    start_offset=start,
                    delivery_complete_count=delivery_complete_count,
                    leader_epoch=epoch,
                    state_batches=tuple(combine_state_batches(current.state_batches, new_batches, start)),
                    create_timestamp_ms=now_ms,
                    write_timestamp_ms=now_ms,
                ),
            )
        return (
            ShareStateKey(SHARE_UPDATE, key.group_id, key.topic_id, key.partition),
            ShareUpdateValue(
                current.snapshot_epoch,
                epoch,
                start_offset,
                tuple(combine_state_batches((), new_batches, start_offset)),
                delivery_complete_count,
            ),
        )

    def delete_record(self, key: SharePartitionKey) -> ShareStateRecord:
        return (ShareStateKey(SHARE_SNAPSHOT, key.group_id, key.topic_id, key.partition), None)


def _snapshot(key: SharePartitionKey, state: ShareGroupOffset) -> ShareStateRecord:
    return (
        ShareStateKey(SHARE_SNAPSHOT, key.group_id, key.topic_id, key.partition),
        ShareSnapshotValue(
            state.snapshot_epoch,
            state.state_epoch,
            state.leader_epoch,
            state.start_offset,
            state.create_timestamp_ms,
            state.write_timestamp_ms,
            state.state_batches,
            state.delivery_complete_count,
        ),
    )
