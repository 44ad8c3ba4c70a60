"""KIP-848 online migration between the classic and the consumer group protocols: the policy
(`group.consumer.migration.policy`), its checks and the two conversions, pure (no clock, no I/O),
as Kafka 4.3.1's GroupMetadataManager (validateOnlineUpgrade, validateOnlineDowngrade*),
ConsumerGroup.fromClassicGroup and ClassicGroup.fromConsumerGroup have them.

- Upgrade: a ConsumerGroupHeartbeat joining a classic group with members converts it (if the
  policy allows, the group uses the "consumer" protocol type and fits in
  `group.consumer.max.size`): every classic member becomes a consumer-group member at the
  classic generation, Stable, with the partitions of its last assignment as both its current
  and its target assignment, and its JoinGroup protocols kept as classic member metadata; the
  group and target assignment epochs are the generation.
- Downgrade: when the last consumer-protocol member leaves a group whose other members use the
  classic protocol, the group becomes a classic group at generation = group epoch, Stable, each
  member with its target assignment written in the version of the subscription it joined with.
- Downgrade with a replaced member: a static classic member joining when every other member
  uses the classic protocol (in place of the last consumer-protocol member, or rejoining).

The policy is `group.consumer.migration.policy` (Kafka's default `bidirectional`). These
functions are pure; group_conversion.py applies them (ConsumerGroups calls it from a heartbeat's
group lookup and from every fencing: leave, session or rebalance timeout, LeaveGroup;
classic_join.py from a static member's JoinGroup), and classic_join.py serves the classic members
of a consumer group. compat/test_group_migration.py compares them with Kafka.
"""

from __future__ import annotations

import enum
import uuid
from collections.abc import Mapping, Set

from broker.coordinator.consumer_group import (
    Assignment,
    ClassicMemberMetadata,
    ConsumerGroup,
    ConsumerGroupMember,
    MemberState,
)
from broker.coordinator.group import ClassicGroup, GroupState, Member
from protocol.consumer_protocol import read_assignment, read_subscription, write_assignment

CONSUMER_PROTOCOL_TYPE = "consumer"


class MigrationPolicy(enum.Enum):
    """Kafka's ConsumerGroupMigrationPolicy (`group.consumer.migration.policy`)."""

    DISABLED = "disabled"
    UPGRADE = "upgrade"
    DOWNGRADE = "downgrade"
    BIDIRECTIONAL = "bidirectional"

    @property
    def upgrade_enabled(self) -> bool:
        return self in (MigrationPolicy.UPGRADE, MigrationPolicy.BIDIRECTIONAL)

    @property
    def downgrade_enabled(self) -> bool:
        return self in (MigrationPolicy.DOWNGRADE, MigrationPolicy.BIDIRECTIONAL)


class MigrationError(Exception):
    """The group cannot be converted (its members' embedded protocol): Kafka answers
    GROUP_ID_NOT_FOUND with this message."""


def upgrade_refusal(policy: MigrationPolicy, group: ClassicGroup, consumer_max_size: int) -> str | None:
    """Kafka's validateOnlineUpgrade: why a consumer heartbeat may not convert this classic group
    with members (answered GROUP_ID_NOT_FOUND with this message), or None."""
    prefix = f"Cannot upgrade classic group {group.group_id} to consumer group because"
    if not policy.upgrade_enabled:
        return f"{prefix} online upgrade is disabled."
    if group.protocol_type != CONSUMER_PROTOCOL_TYPE:
        return f"{prefix} the group does not use the consumer embedded protocol."
    if len(group.members) > consumer_max_size:
        return f"{prefix} the group size exceeds the consumer group maximum size."
    return None


def classic_join_refusal(policy: MigrationPolicy, group_id: str) -> str | None:
    """Kafka's throwIfClassicMemberCannotJoinConsumerGroup: the INCONSISTENT_GROUP_PROTOCOL
    message for a classic JoinGroup on a consumer group with members, or None."""
    if policy is MigrationPolicy.DISABLED:
        return (f"Cannot join the consumer group {group_id} with the classic protocol because the group "
                "migration is disabled.")  # fmt: skip
    return None


def can_downgrade(
    policy: MigrationPolicy, group: ConsumerGroup, leaving: Set[str], classic_max_size: int
) -> bool:
    """Kafka's validateOnlineDowngradeWithFencedMembers: every member left uses the classic
    protocol, there is one, the policy allows it and they fit in `group.max.size` (the classic
    groups' maximum)."""
    staying = [m for member_id, m in group.members.items() if member_id not in leaving]
    return (
        all(m.classic is not None for m in staying)
        and bool(staying)
        and policy.downgrade_enabled
        and len(staying) <= classic_max_size
    )


def can_downgrade_replacing(
    policy: MigrationPolicy, group: ConsumerGroup, replaced: str, classic_max_size: int
) -> bool:
    """Kafka's validateOnlineDowngradeWithReplacedMember: a classic static member joins in place of
    member `replaced` (or rejoins as it), every other member uses the classic protocol, the policy
    allows it and the group fits in `group.max.size` (the classic groups' maximum)."""
    return (
        all(m.classic is not None for member_id, m in group.members.items() if member_id != replaced)
        and policy.downgrade_enabled
        and len(group.members) <= classic_max_size
    )


def consumer_group_from_classic(group: ClassicGroup, topic_ids: Mapping[str, uuid.UUID]) -> ConsumerGroup:
    """Kafka's ConsumerGroup.fromClassicGroup; `topic_ids` maps the cluster's topic names to
    their ids (partitions of topics not in it are dropped, as Kafka drops them). Raises
    MigrationError (malformed embedded protocol, or user data of a custom assignor)."""
    epoch = group.generation
    converted = ConsumerGroup(group.group_id, group_epoch=epoch, assignment_epoch=epoch)
    upgrade = f"Cannot upgrade classic group {group.group_id} to consumer group because"
    for member in group.members.values():
        try:
            subscription = read_subscription(member.metadata_for(group.protocol_name or ""))
            assignment = read_assignment(member.assignment) if member.assignment else None
        except (ValueError, KeyError) as e:
            raise MigrationError(f"{upgrade} the embedded consumer protocol is malformed.") from e
        if assignment is not None and assignment.user_data:
            raise MigrationError(
                f"{upgrade} an unsupported custom assignor is in use. Please refer to the documentation or switch "
                "to a default assignor before re-attempting the upgrade."
            )
        assigned: dict[uuid.UUID, frozenset[int]] = {}
        for topic, partitions in assignment.partitions if assignment is not None else ():
            if topic in topic_ids:
                assigned[topic_ids[topic]] = frozenset(partitions)
        converted.update_member(ConsumerGroupMember(
            member.member_id, instance_id=member.group_instance_id, rack_id=subscription.rack_id,
            client_id=member.client_id, client_host=member.client_host,
            rebalance_timeout_ms=member.rebalance_timeout_ms, subscribed_topic_names=subscription.topics,
            state=MemberState.STABLE, member_epoch=epoch, previous_member_epoch=epoch, assigned=assigned,
            classic=ClassicMemberMetadata(member.session_timeout_ms, member.protocols),
            partition_epochs={(topic_id, p): epoch for topic_id, ps in assigned.items() for p in ps},
        ))  # fmt: skip
        converted.target[member.member_id] = assigned
    return converted


def classic_group_from_consumer(
    group: ConsumerGroup, leaving: Set[str], topic_names: Mapping[uuid.UUID, str], now_ms: int
) -> ClassicGroup:
    """Kafka's ClassicGroup.fromConsumerGroup (without a joining static member): the members
    that stay, all classic, in a Stable classic group at generation = group epoch, each assigned
    its target assignment in the version of its subscription for the selected protocol."""
    converted = ClassicGroup(
        group.group_id, state=GroupState.STABLE, state_timestamp_ms=now_ms, generation=group.group_epoch,
        protocol_type=CONSUMER_PROTOCOL_TYPE,
    )  # fmt: skip
    for member_id, m in group.members.items():
        if member_id in leaving or m.classic is None:
            continue
        converted.add(Member(
            member_id, m.instance_id, m.client_id, m.client_host, m.rebalance_timeout_ms,
            m.classic.session_timeout_ms, CONSUMER_PROTOCOL_TYPE, m.classic.supported_protocols,
        ))  # fmt: skip
    if not converted.members:
        raise ValueError(f"group {group.group_id}: no classic member to downgrade to")
    converted.protocol_name = converted.select_protocol()
    for member_id, member in converted.members.items():
        version = read_subscription(member.metadata_for(converted.protocol_name)).version
        member.assignment = write_assignment(version, _by_name(group.target.get(member_id, {}), topic_names))
    return converted


def _by_name(assignment: Assignment, topic_names: Mapping[uuid.UUID, str]) -> tuple[tuple[str, tuple[int, ...]], ...]:
    named = [(topic_names[t], tuple(sorted(ps))) for t, ps in assignment.items() if t in topic_names]
    return tuple(sorted(named))
