"""Classic-protocol members of a KIP-848 consumer group (a group mid-migration): the answers Kafka
4.3.1's GroupMetadataManager gives their JoinGroup (the first checks and the member of
classicGroupJoinToConsumerGroup), Heartbeat and SyncGroup (classicGroupHeartbeatToConsumerGroup,
classicGroupSyncToConsumerGroup and the checks they share) and LeaveGroup
(classicGroupLeaveToConsumerGroup before the fencing), pure. Such a member's generation is
its member epoch; the server assignor computes its assignment, SyncGroup hands it over in the
embedded consumer protocol, and REBALANCE_IN_PROGRESS tells it to rejoin (JoinGroup) when its
epoch is behind the target, it has partitions to revoke, or partitions it waits for are free.

Called by classic_join.py, which owns the session, join and sync timers Kafka reschedules here.
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Mapping, Sequence

from broker.coordinator.consumer_group import (
    ClassicMemberMetadata,
    ConsumerGroup,
    ConsumerGroupMember,
    MemberState,
)
from broker.coordinator.migration import CONSUMER_PROTOCOL_TYPE
from protocol.consumer_protocol import read_subscription, write_assignment
from protocol.errors import ErrorCode


class ClassicMemberError(Exception):
    def __init__(self, error: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.error = error
        self.message = message


def classic_member(
    group: ConsumerGroup, member_id: str, instance_id: str | None, generation: int
) -> ConsumerGroupMember:
    """Kafka's validateConsumerGroupMember, throwIfMemberDoesNotUseClassicProtocol and
    throwIfGenerationIdUnmatched: the member, or ClassicMemberError with Kafka's message."""
    if instance_id is None:
        member = group.members.get(member_id)
        if member is None:
            raise ClassicMemberError(ErrorCode.unknown_member_id,
                                     f"Member {member_id} is not a member of group {group.group_id}.")  # fmt: skip
    else:
        member = group.static_member(instance_id)
        if member is None:
            raise ClassicMemberError(ErrorCode.unknown_member_id,
                                     f"Member with instance id {instance_id} is not a member of group {group.group_id}.")  # fmt: skip
        if member.member_id != member_id:
            raise ClassicMemberError(ErrorCode.fenced_instance_id, f"Static member {member_id} with instance id "
                                     f"{instance_id} was fenced by member {member.member_id}.")  # fmt: skip
    _classic_protocols(member)
    if member.member_epoch != generation:
        raise ClassicMemberError(ErrorCode.illegal_generation, f"The request generation id {generation} is not "
                                 f"equal to the member epoch {member.member_epoch} of member {member.member_id}.")  # fmt: skip
    return member


def _classic_protocols(member: ConsumerGroupMember) -> tuple[tuple[str, bytes], ...]:
    if member.classic is None:
        raise ClassicMemberError(ErrorCode.unknown_member_id,
                                 f"Member {member.member_id} does not use the classic protocol.")  # fmt: skip
    return member.classic.supported_protocols


def waiting_on_unreleased_partition(group: ConsumerGroup, member: ConsumerGroupMember) -> bool:
    """Kafka's ConsumerGroup.waitingOnUnreleasedPartition: some partition of its target it does
    not have yet is still owned by another member."""
    if member.state is not MemberState.UNRELEASED_PARTITIONS:
        return False
    owners = group.partition_owners()
    for topic_id, partitions in group.target.get(member.member_id, {}).items():
        assigned = member.assigned.get(topic_id, frozenset())
        if any(p not in assigned and (topic_id, p) in owners for p in partitions):
            return True
    return False


def heartbeat_error(group: ConsumerGroup, member: ConsumerGroupMember) -> ErrorCode:
    """A valid classic Heartbeat's answer: REBALANCE_IN_PROGRESS (rejoin; the caller then starts
    the member's join timer) when its epoch is behind the target assignment, it has partitions
    to revoke, or the partitions it waits for have been released."""
    if (
        member.member_epoch < group.assignment_epoch
        or member.state is MemberState.UNREVOKED_PARTITIONS
        or (member.state is MemberState.UNRELEASED_PARTITIONS and not waiting_on_unreleased_partition(group, member))
    ):
        return ErrorCode.rebalance_in_progress
    return ErrorCode.none


def sync_assignment(
    group: ConsumerGroup,
    member: ConsumerGroupMember,
    protocol_type: str | None,
    protocol_name: str | None,
    topic_names: Mapping[uuid.UUID, str],
) -> bytes:
    """A valid classic SyncGroup's assignment: the member's assigned partitions in the version of
    the subscription it joined with (throwIfClassicProtocolUnmatched and throwIfRebalanceInProgress
    first, raising ClassicMemberError)."""
    name, metadata = _classic_protocols(member)[0]
    if protocol_type is not None and protocol_type != CONSUMER_PROTOCOL_TYPE:
        raise ClassicMemberError(ErrorCode.inconsistent_group_protocol, f"The protocol type {protocol_type} from "
                                 f"member {member.member_id} request is not equal to the group protocol type "
                                 f"{CONSUMER_PROTOCOL_TYPE}.")  # fmt: skip
    if protocol_name is not None and protocol_name != name:
        raise ClassicMemberError(ErrorCode.inconsistent_group_protocol, f"The protocol name {protocol_name} from "
                                 f"member {member.member_id} request is not equal to the protocol name {name} "
                                 "returned in the join response.")  # fmt: skip
    if group.assignment_epoch > member.member_epoch and member.state is not MemberState.UNREVOKED_PARTITIONS:
        raise ClassicMemberError(ErrorCode.rebalance_in_progress, f"A new rebalance is triggered in group "
                                 f"{group.group_id} and member {member.member_id} should rejoin to catch up.")  # fmt: skip
    named = sorted((topic_names[t], tuple(sorted(ps))) for t, ps in member.assigned.items() if t in topic_names)
    return write_assignment(read_subscription(metadata).version, tuple(named))


def supports_classic_protocols(group: ConsumerGroup, protocol_type: str, protocol_names: Sequence[str]) -> bool:
    """Kafka's ConsumerGroup.supportsClassicProtocols: the "consumer" protocol type, and (in a
    group with members) a protocol every classic member supports."""
    if protocol_type != CONSUMER_PROTOCOL_TYPE:
        return False
    if group.is_empty():
        return bool(protocol_names)
    classic = [m.classic for m in group.members.values() if m.classic is not None]
    return any(all(any(name == n for n, _ in c.supported_protocols) for c in classic) for name in protocol_names)


def join_error(
    group: ConsumerGroup, member_id: str, protocol_type: str, protocol_names: Sequence[str], consumer_max_size: int
) -> ClassicMemberError | None:
    """The first checks of Kafka's classicGroupJoinToConsumerGroup (`member_id` is the request's,
    or the one the coordinator just gave an unknown member): throwIfConsumerGroupIsFull, then
    throwIfClassicProtocolIsNotSupported; None when the join may go on."""
    if len(group.members) >= consumer_max_size and (not member_id or member_id not in group.members):
        return ClassicMemberError(ErrorCode.group_max_size_reached, "The consumer group has reached its maximum "
                                  f"capacity of {consumer_max_size} members.")  # fmt: skip
    if not supports_classic_protocols(group, protocol_type, protocol_names):
        return ClassicMemberError(ErrorCode.inconsistent_group_protocol,
                                  f"Member {member_id}'s protocols are not supported.")  # fmt: skip
    return None


def joined_member(
    member: ConsumerGroupMember,
    instance_id: str | None,
    rebalance_timeout_ms: int,
    session_timeout_ms: int,
    protocols: tuple[tuple[str, bytes], ...],
    client_id: str,
    client_host: str,
) -> ConsumerGroupMember:
    """The member a classic JoinGroup makes of `member` (the existing one, or a new
    ConsumerGroupMember with just its id), as Kafka's classicGroupJoinToConsumerGroup builds it:
    subscription and rack from the first protocol's embedded subscription (a rack and an instance
    id only replace the member's when given, a rebalance timeout of -1 keeps the member's), no
    regex, the server assignor untouched, the JoinGroup protocols kept as its classic metadata. Raises
    what read_subscription raises on a malformed embedded subscription (Kafka: an
    IllegalStateException)."""
    subscription = read_subscription(protocols[0][1])
    return dataclasses.replace(
        member,
        instance_id=member.instance_id if instance_id is None else instance_id,
        rack_id=member.rack_id if subscription.rack_id is None else subscription.rack_id,
        rebalance_timeout_ms=member.rebalance_timeout_ms if rebalance_timeout_ms == -1 else rebalance_timeout_ms,
        subscribed_topic_names=subscription.topics,
        subscribed_topic_regex=None,  # Kafka: a classic member cannot subscribe by regex
        client_id=client_id,
        client_host=client_host,
        classic=ClassicMemberMetadata(session_timeout_ms, protocols),
    )


@dataclasses.dataclass(frozen=True, slots=True)
class LeaveAnswer:
    """One MemberIdentity of a LeaveGroup request and its answer (echoing the request's ids)."""

    member_id: str
    instance_id: str | None
    error: ErrorCode = ErrorCode.none


def leave(
    group: ConsumerGroup, identities: Sequence[tuple[str, str | None]]
) -> tuple[list[LeaveAnswer], list[ConsumerGroupMember]]:
    """Kafka 4.3.1's classicGroupLeaveToConsumerGroup before the fencing: each (member id,
    instance id) answered (UNKNOWN_MEMBER_ID for an unknown member or instance id,
    FENCED_INSTANCE_ID when the instance id belongs to another member id; an empty member id
    with an instance id is an administrative removal), and the members to fence. Any member
    may be removed, whichever protocol it uses (4.3.1 no longer requires the classic one)."""
    answers: list[LeaveAnswer] = []
    leaving: list[ConsumerGroupMember] = []
    for member_id, instance_id in identities:
        member = group.members.get(member_id) if instance_id is None else group.static_member(instance_id)
        if member is None:
            error = ErrorCode.unknown_member_id
        elif instance_id is not None and member_id and member.member_id != member_id:
            error = ErrorCode.fenced_instance_id
        else:
            error = ErrorCode.none
            if member not in leaving:
                leaving.append(member)
        answers.append(LeaveAnswer(member_id, instance_id, error))
    return answers, leaving
