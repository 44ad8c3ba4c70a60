"""A share partition's state through the share coordinator, for the share partition's leader
(Kafka's SharePartition.maybeInitialize and its writeShareGroupState calls through the persister):
the SharePartition is built from ReadShareGroupState, and every acknowledgement, release or lock
expiry is written with WriteShareGroupState before it is committed (rolled back if the write
fails).

The state is reached through a `StatePersister` (Kafka's Persister): the local ShareCoordinator
answers for the state partitions this broker leads; the share fetch manager (share_fetch.py) is
its user.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol

from broker.share.in_flight import PersisterStateBatch, SharePartitionSettings
from broker.share.share_coordinator_shard import ReadAnswer, StateAnswer
from broker.share.share_partition import SharePartition, StateTransition
from broker.share.share_state import UNINITIALIZED_START_OFFSET, SharePartitionKey
from protocol.errors import ErrorCode


class StatePersister(Protocol):
    """ReadShareGroupState and WriteShareGroupState of one share partition (Kafka's Persister)."""

    async def read(self, key: SharePartitionKey, leader_epoch: int) -> ReadAnswer: ...

    async def write(
        self, key: SharePartitionKey, state_epoch: int, leader_epoch: int, start_offset: int,
        delivery_complete_count: int, batches: Iterable[PersisterStateBatch],
    ) -> StateAnswer: ...  # fmt: skip


@dataclass(frozen=True, slots=True)
class SharePartitionPersister:
    """Where one share partition's leader writes its state: the key, its leader epoch (fences an
    older leader) and the state epoch it read (fences a write over a re-initialized state)."""

    coordinator: StatePersister
    key: SharePartitionKey
    leader_epoch: int
    state_epoch: int

    async def write(self, sp: SharePartition, batches: Sequence[PersisterStateBatch]) -> ErrorCode:
        """WriteShareGroupState of the share partition's start offset, delivery complete count
        and these state batches."""
        answer = await self.coordinator.write(
            self.key,
            self.state_epoch,
            self.leader_epoch,
            sp.start_offset,
            sp.delivery_complete_count(),
            batches,
        )
        return answer.error

    async def persist(self, sp: SharePartition, transition: StateTransition, now_ms: int) -> ErrorCode:
        """Write a transition's state batches, then commit it, or roll it back if refused."""
        error = await self.write(sp, transition.state_batches)
        if error == ErrorCode.none:
            transition.commit(now_ms)
        else:
            transition.rollback(now_ms)
        return error


async def load(
    coordinator: StatePersister, key: SharePartitionKey, topic: str, leader_epoch: int,
    settings: SharePartitionSettings, reset_offset: Callable[[], int],
) -> tuple[ErrorCode, SharePartition | None, SharePartitionPersister | None]:  # fmt: skip
    """Kafka's maybeInitialize: ReadShareGroupState with this leader's epoch; a share partition
    never started (start offset -1) starts at `reset_offset()` (`share.auto.offset.reset`)."""
    answer = await coordinator.read(key, leader_epoch)
    if answer.error != ErrorCode.none:
        return answer.error, None, None
    start = reset_offset() if answer.start_offset == UNINITIALIZED_START_OFFSET else answer.start_offset
    sp = SharePartition(key.group_id, topic, key.partition, settings, start, answer.state_batches)
    return ErrorCode.none, sp, SharePartitionPersister(coordinator, key, leader_epoch, answer.state_epoch)
