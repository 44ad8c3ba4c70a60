"""KIP-848 online migration applied to a group's record (`ClassicGroup`, which holds the group's
offsets whichever protocol it runs): the upgrade of a classic group with members to a consumer
group, and the downgrade back, as Kafka 4.3.1's GroupMetadataManager.convertToConsumerGroup and
convertToClassicGroup do them. migration.py decides (the policy's checks) and converts the
members; this module moves the membership between the classic side (GroupMembership: its
waiters and timers) and the consumer side (ConsumerGroups, which writes the records and calls
these functions).

- `upgrade`: members waiting for a JoinGroup or SyncGroup answer get REBALANCE_IN_PROGRESS (the
  joining consumer-protocol member bumps the group epoch: they rejoin), the classic timers stop,
  the classic membership is set aside and the converted consumer group installed. Its records are
  the classic group's tombstone then ConsumerGroups.creation_records.
  When those records cannot be written, group_reverts.py puts the classic group back as it was
  (its sessions and its rebalance phase's timer restart), as Kafka's runtime reverts the change;
  so it does for a downgrade.
- `downgrade`: the staying (classic) members become a Stable classic group at generation = group
  epoch, each assigned its target assignment; their sessions start and the group rebalances at
  once (always when members left; when a static member replaced another, only if the target
  assignment was stale). Its records are the consumer group's tombstones then the classic
  group's metadata record (`classic_record`).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Mapping, Set
from dataclasses import dataclass
from typing import TYPE_CHECKING

from broker import clock
from broker.coordinator.consumer_group import ConsumerGroup
from broker.coordinator.group import ClassicGroup, GroupState, Member
from broker.coordinator.migration import (
    MigrationError,
    MigrationPolicy,
    classic_group_from_consumer,
    consumer_group_from_classic,
    upgrade_refusal,
)
from broker.coordinator.records import group_metadata_key, group_metadata_value
from protocol.records import NewRecord

if TYPE_CHECKING:
    from broker.coordinator.membership import GroupMembership

log = logging.getLogger("samsa.coordinator")


@dataclass(frozen=True, slots=True)
class ClassicState:
    """A classic group's membership, as its metadata record holds it."""

    state: GroupState
    state_timestamp_ms: int
    generation: int
    protocol_type: str | None
    protocol_name: str | None
    leader_id: str | None
    members: dict[str, Member]
    static_members: dict[str, str]
    pending_sync: set[str]


def take_classic_state(group: ClassicGroup) -> ClassicState:
    """The group's classic membership, removed from it (the group is left Empty, generation 0)."""
    taken = ClassicState(group.state, group.state_timestamp_ms, group.generation, group.protocol_type,
                         group.protocol_name, group.leader_id, group.members, group.static_members,
                         group.pending_sync)  # fmt: skip
    # Not a transition of the classic state machine: the group stops being a classic group.
    group.state, group.generation, group.protocol_type, group.protocol_name = GroupState.EMPTY, 0, None, None
    group.leader_id, group.members, group.static_members, group.pending_sync = None, {}, {}, set()
    return taken


def put_classic_state(group: ClassicGroup, s: ClassicState) -> None:
    group.state, group.state_timestamp_ms, group.generation = s.state, s.state_timestamp_ms, s.generation
    group.protocol_type, group.protocol_name, group.leader_id = s.protocol_type, s.protocol_name, s.leader_id
    group.members, group.static_members, group.pending_sync = s.members, s.static_members, s.pending_sync


@dataclass(frozen=True, slots=True)
class Upgrade:
    """A classic group converted in memory, its records not yet written."""

    holder: ClassicGroup
    group: ConsumerGroup

    def records(self, creation_records: list[NewRecord]) -> list[NewRecord]:
        """Kafka's order: the classic group's tombstone, then the consumer group's records."""
        return [NewRecord(group_metadata_key(self.holder.group_id), None), *creation_records]


def upgrade(
    holder: ClassicGroup, policy: MigrationPolicy, consumer_max_size: int, topic_ids: Mapping[str, uuid.UUID],
    membership: GroupMembership,
) -> Upgrade:  # fmt: skip
    """Kafka's validateOnlineUpgrade and convertToConsumerGroup: raises MigrationError with Kafka's
    message (answered GROUP_ID_NOT_FOUND) when the group may not or cannot be converted."""
    refusal = upgrade_refusal(policy, holder, consumer_max_size)
    if refusal is not None:
        raise MigrationError(refusal)
    group = consumer_group_from_classic(holder, topic_ids)
    membership.hand_over(holder)
    classic = take_classic_state(holder)
    holder.consumer = group
    log.info("classic group converted to consumer group group=%s generation=%d members=%d",
             holder.group_id, classic.generation, len(group.members))  # fmt: skip
    return Upgrade(holder, group)


def downgrade(
    holder: ClassicGroup, group: ConsumerGroup, leaving: Set[str], topic_names: Mapping[uuid.UUID, str],
    membership: GroupMembership, rebalance: str | None,
) -> NewRecord:  # fmt: skip
    """Kafka's convertToClassicGroup: the consumer group is replaced by a classic group of its
    staying members (a joining static member already took the place of the one it replaces),
    which rebalances for the reason given, if one is; returns the classic group's metadata record
    (the caller writes the consumer group's tombstones before it)."""
    classic = classic_group_from_consumer(group, leaving, topic_names, clock.now_ms())
    holder.consumer = None
    put_classic_state(holder, take_classic_state(classic))
    record = classic_record(holder)
    for member in holder.members.values():
        membership.start_session(holder, member)
    log.info("consumer group converted to classic group group=%s generation=%d members=%d rebalance=%r",
             holder.group_id, holder.generation, len(holder.members), rebalance)  # fmt: skip
    if rebalance is not None:
        membership.prepare_rebalance(holder, rebalance)
    return record


def classic_record(group: ClassicGroup) -> NewRecord:
    """The classic group's metadata record with its members' assignments."""
    return NewRecord(group_metadata_key(group.group_id), group_metadata_value(group.to_record()))
