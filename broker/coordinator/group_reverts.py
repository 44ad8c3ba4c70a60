"""A consumer-protocol group change whose records cannot be written is reverted, as Kafka 4.3.1's
coordinator runtime does (CoordinatorRuntime.failCurrentBatch: SnapshottableCoordinator
.revertLastWrittenOffset to the snapshot taken before the batch, every write of the batch failed
with the append's error).

A change (a heartbeat, a classic member's request served by a consumer group, a LeaveGroup, a
timer's fencing) takes a `GroupSnapshot` of its group before touching it; its write
(ordered_writes.py) then ends in one of these states:

    written   its records reached the log (a later failure while waiting for the replicas
              keeps the change: the log holds it, as Kafka keeps what it appended).
    reverted  the append failed before the records reached the log: the group returns to the
              snapshot, which drops the changes made after it too; the revert generation of the
              group id is bumped.
    dropped   a revert happened since the change was made: its records are not written (they
              were computed from a state that no longer exists) and it is answered with the
              error of the append that caused the revert.

What a snapshot holds: the holder's consumer group (`ConsumerGroup.snapshot`: a copy-on-write copy,
its members immutable values), its classic membership fields (an upgrade moved them away, a
downgrade put new ones there) and the holder's presence in its partition (a revert puts a deleted
holder back). Offsets are not part of it (they have their own writes).
Timers follow the restored state: the timers of the members the revert removes stop (the classic
side's through GroupMembership.hand_over), the restored consumer members' sessions and pending
revocations start again, so do the join and sync timeouts of its classic members (those running
and those the change stopped, at their deadlines), and a restored classic group resumes
(GroupMembership.resume).
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from broker.coordinator.consumer_group import ConsumerGroup, MemberState
from broker.coordinator.group import ClassicGroup, GroupState
from broker.coordinator.group_conversion import ClassicState, put_classic_state, take_classic_state
from protocol.errors import ErrorCode

if TYPE_CHECKING:
    from broker.coordinator.membership import GroupMembership

log = logging.getLogger("samsa.coordinator")


class ConsumerTimers(Protocol):
    """The consumer-protocol timers (ConsumerGroups)."""

    def unload(self, group: ConsumerGroup) -> None: ...

    def start_session(self, group_id: str, member_id: str, timeout_ms: int | None = None) -> None: ...

    def schedule_revocation_timeout(self, group_id: str, member_id: str, epoch: int, timeout_ms: int) -> None: ...

    def classic_timeouts(self, group: ConsumerGroup) -> list[ClassicTimeout]: ...

    def restore_classic_timeout(self, timeout: ClassicTimeout) -> None: ...


@dataclass(frozen=True, slots=True)
class ClassicTimeout:
    """A classic member's join or sync timeout in a consumer group (classic_join.py)."""

    kind: str
    """"join" or "sync"."""
    group_id: str
    member_id: str
    deadline: float
    """In the event loop's time."""
    reason: str


def _classic_state(group: ClassicGroup) -> ClassicState:
    return ClassicState(group.state, group.state_timestamp_ms, group.generation, group.protocol_type,
                        group.protocol_name, group.leader_id, dict(group.members), dict(group.static_members),
                        set(group.pending_sync))  # fmt: skip


@dataclass(frozen=True, slots=True)
class GroupSnapshot:
    """A group as it was before a change (holder None: the group id had no live group)."""

    group_id: str
    groups: dict[str, ClassicGroup]
    """The partition's groups, where the holder is (or is added)."""
    holder: ClassicGroup | None
    consumer: ConsumerGroup | None
    classic: ClassicState | None
    generation: int


class GroupReverts:
    """Snapshots of the groups being changed, and their reverts."""

    def __init__(self, timers: ConsumerTimers, membership: GroupMembership) -> None:
        self._timers = timers
        self._membership = membership
        self._reverted: dict[str, tuple[int, ErrorCode]] = {}
        """Group id -> (its revert generation, the error of its last revert): only groups once
        reverted."""

    def take(self, groups: dict[str, ClassicGroup], group_id: str) -> Change:
        """The group as it is before a change."""
        holder = groups.get(group_id)
        generation = self._reverted.get(group_id, (0, ErrorCode.none))[0]
        if holder is None or holder.is_in(GroupState.DEAD):  # the change may create the group
            return Change(self, GroupSnapshot(group_id, groups, None, None, None, generation))
        consumer = None if holder.consumer is None else holder.consumer.snapshot()
        return Change(self, GroupSnapshot(group_id, groups, holder, consumer, _classic_state(holder), generation))

    def dropped(self, snapshot: GroupSnapshot) -> ErrorCode:
        """The error of a revert made since the snapshot (the change is dropped), else none."""
        generation, error = self._reverted.get(snapshot.group_id, (0, ErrorCode.none))
        return error if generation != snapshot.generation else ErrorCode.none

    def revert(self, snapshot: GroupSnapshot, error: ErrorCode) -> None:
        """The change's records did not reach the log: the group goes back to the snapshot (put
        back in its partition if the change deleted it)."""
        if self.dropped(snapshot) != ErrorCode.none:
            return  # already reverted to an earlier snapshot
        self._reverted[snapshot.group_id] = (snapshot.generation + 1, error)
        holder = snapshot.groups.get(snapshot.group_id)
        if holder is None and snapshot.holder is not None:  # deleted by this change or a later one
            holder = snapshot.groups[snapshot.group_id] = snapshot.holder
        if holder is None or (snapshot.holder is not None and holder is not snapshot.holder):
            return  # deleted then made anew since (its records are written after this change's)
        running: list[ClassicTimeout] = []
        if holder.consumer is not None:
            running = self._timers.classic_timeouts(holder.consumer)
            self._timers.unload(holder.consumer)
        if holder.members:  # a downgrade made it a classic group
            self._membership.hand_over(holder)
            take_classic_state(holder)
        holder.consumer = None if snapshot.consumer is None else snapshot.consumer.snapshot()
        if snapshot.holder is None:
            if not holder.offsets and not holder.pending_offset_commits:
                del snapshot.groups[snapshot.group_id]
        elif snapshot.classic is not None:
            put_classic_state(holder, snapshot.classic)
            if holder.members:  # an upgrade is undone
                self._membership.resume(holder)
        if holder.consumer is not None:
            for member in holder.consumer.members.values():
                classic = member.classic
                self._timers.start_session(snapshot.group_id, member.member_id,
                                           None if classic is None else classic.session_timeout_ms)  # fmt: skip
                if member.state is MemberState.UNREVOKED_PARTITIONS:
                    self._timers.schedule_revocation_timeout(snapshot.group_id, member.member_id,
                                                             member.member_epoch, member.rebalance_timeout_ms)  # fmt: skip
            for timeout in running:
                self._timers.restore_classic_timeout(timeout)
        log.warning("consumer group change reverted group=%s reason=records_not_written error=%s type=%s",
                    snapshot.group_id, error.name, "consumer" if holder.consumer is not None else "classic")  # fmt: skip


@dataclass(frozen=True, slots=True)
class Change:
    """A change being written, with the snapshot taken before it (ordered_writes.Revertible)."""

    reverts: GroupReverts
    snapshot: GroupSnapshot
    undo: list[Callable[[], None]] = dataclasses.field(default_factory=list)
    """What the change did outside the snapshot (a classic timeout stopped, offsets deleted),
    undone when its records are not written, reverted or dropped."""

    def dropped(self) -> ErrorCode:
        return self.reverts.dropped(self.snapshot)

    def not_written(self, error: ErrorCode) -> None:
        self.reverts.revert(self.snapshot, error)
        for undo in self.undo:
            undo()
