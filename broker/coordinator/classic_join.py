"""Classic members of a KIP-848 consumer group with members (a group mid-migration): their
JoinGroup, SyncGroup and Heartbeat as Kafka 4.3.1's GroupMetadataManager serves them
(classicGroupJoinToConsumerGroup, classicGroupSyncToConsumerGroup,
classicGroupHeartbeatToConsumerGroup), on ConsumerGroups' state, records and timers.

JoinGroup:
1. the policy must allow migration (INCONSISTENT_GROUP_PROTOCOL), the group must have room and
   every classic member must share a protocol with the joining one (classic_members.join_error);
2. a dynamic member without a member id (JoinGroup v4+) gets MEMBER_ID_REQUIRED with a new id
   and nothing changes; a static member without a member id replaces the member of its instance
   id (which keeps its assignment), one with a member id must be that member (UNKNOWN_MEMBER_ID,
   FENCED_INSTANCE_ID);
3. the member is made from the JoinGroup (classic_members.joined_member) and goes through the
   consumer heartbeat's flow (ConsumerGroups.apply_member: epoch bump, target assignment,
   reconciliation against the owned partitions of its embedded subscription: none for a v0
   subscription or an eager member that revoked everything before rejoining), the records are
   written, then the answer: generation = the member epoch,
   protocol type "consumer", the member's first protocol, no leader and no member list. Its join
   timeout stops; its session (its own session timeout) and its sync timeout (its rebalance
   timeout: fenced without a SyncGroup by then) start.

SyncGroup hands over the member's assigned partitions in the embedded consumer protocol (the
leader's assignments are ignored) and restarts the session; Heartbeat restarts the session and
answers REBALANCE_IN_PROGRESS when the member must rejoin (classic_members.heartbeat_error),
starting its join timeout (fenced unless it joins within its rebalance timeout) if not running.

A static member joining when every other member uses the classic protocol (replacing the last
consumer-protocol member, or rejoining) converts the group back to a classic group
(validateOnlineDowngradeWithReplacedMember): the member takes the replaced one's place and target
assignment, and the classic group rebalances if that target was stale; the member then syncs with
the classic group.

Called by the JoinGroup, SyncGroup and Heartbeat handlers; joins are refused while
group.consumer.migration.policy is `disabled`.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Mapping

from broker.coordinator.classic_members import (
    ClassicMemberError,
    classic_member,
    heartbeat_error,
    join_error,
    joined_member,
    sync_assignment,
)
from broker.coordinator.consumer_group import ConsumerGroup, ConsumerGroupMember
from broker.coordinator.consumer_groups import ConsumerGroups, new_member_id
from broker.coordinator.group import ClassicGroup
from broker.coordinator.membership import JoinRequest, JoinResult, SyncResult
from broker.coordinator.migration import (
    CONSUMER_PROTOCOL_TYPE,
    MigrationPolicy,
    can_downgrade_replacing,
    classic_join_refusal,
)
from protocol.consumer_protocol import read_subscription
from protocol.errors import ErrorCode

log = logging.getLogger(__name__)


async def join_consumer_group(
    groups: ConsumerGroups,
    holder: ClassicGroup,
    group: ConsumerGroup,
    req: JoinRequest,
    policy: MigrationPolicy,
    consumer_max_size: int,
    classic_max_size: int,
) -> JoinResult:
    """Kafka's classicGroupJoinToConsumerGroup: the JoinGroup's answer, once its records are
    written (the coordinator's error if they could not be)."""
    refusal = classic_join_refusal(policy, group.group_id)
    if refusal is not None:
        log.info("classic join refused group=%s client_id=%s correlation_id=%d error=INCONSISTENT_GROUP_PROTOCOL "
                 "reason=%r", group.group_id, req.client_id, req.correlation_id, refusal)  # fmt: skip
        return JoinResult(ErrorCode.inconsistent_group_protocol, req.member_id)
    unknown = not req.member_id
    member_id = new_member_id() if unknown else req.member_id
    error = join_error(group, member_id, req.protocol_type, [n for n, _ in req.protocols], consumer_max_size)
    if error is not None:
        return JoinResult(error.error, req.member_id)
    if unknown and req.group_instance_id is None and req.require_known_member_id:
        log.info("member id required group=%s member=%s client_id=%s correlation_id=%d protocol=classic",
                 group.group_id, member_id, req.client_id, req.correlation_id)  # fmt: skip
        return JoinResult(ErrorCode.member_id_required, member_id)
    try:
        subscription = read_subscription(req.protocols[0][1])
    except (ValueError, KeyError):  # Kafka: an IllegalStateException, malformed embedded subscription
        return JoinResult(ErrorCode.unknown_server_error, req.member_id)
    topic_ids = {name: topic_id for topic_id, name in groups.topic_names().items()}
    owned = {topic_ids[t]: ps for t, ps in subscription.owned_partitions if t in topic_ids}
    groups.begin(group.group_id)
    replaced = None if req.group_instance_id is None else group.static_member(req.group_instance_id)
    member = _member(groups, group, member_id, req.group_instance_id, unknown)
    if isinstance(member, ErrorCode):
        return JoinResult(member, req.member_id)
    downgrade = replaced is not None and can_downgrade_replacing(policy, group, replaced.member_id, classic_max_size)
    updated = joined_member(member, req.group_instance_id, req.rebalance_timeout_ms, req.session_timeout_ms,
                            req.protocols, req.client_id, req.client_host)  # fmt: skip
    after = groups.apply_member(holder, group, member, updated, owned, downgrade)  # owned: what it says it owns
    if downgrade:  # the group is converted back with this member in the replaced one's place
        stale = group.assignment_epoch < group.group_epoch
        groups.downgrade(group, set(), f"Downgrade group {group.group_id} from consumer to classic with stale "
                         "assignment." if stale else None)  # fmt: skip
    written = await groups.commit(group.group_id)
    if written != ErrorCode.none:
        return JoinResult(written, req.member_id)
    groups.cancel_classic_timeout("join", group.group_id, member_id)
    if not downgrade:
        groups.start_session(group.group_id, member_id, req.session_timeout_ms)
        groups.schedule_classic_timeout("sync", group.group_id, member_id, req.rebalance_timeout_ms,
                                        "the member failed to sync within timeout")  # fmt: skip
    log.info("classic member joined consumer group group=%s member=%s instance_id=%s epoch=%d client_id=%s "
             "correlation_id=%d", group.group_id, member_id, req.group_instance_id, after.member_epoch,
             req.client_id, req.correlation_id)  # fmt: skip
    return JoinResult(
        ErrorCode.none,
        member_id,
        generation_id=after.member_epoch,
        protocol_type=CONSUMER_PROTOCOL_TYPE,
        protocol_name=req.protocols[0][0],
    )


def _member(
    groups: ConsumerGroups, group: ConsumerGroup, member_id: str, instance_id: str | None, unknown: bool
) -> ConsumerGroupMember | ErrorCode:
    """Kafka's getOrMaybeSubscribe{Dynamic,Static}ConsumerGroupMember for a classic member."""
    if instance_id is None:
        return group.members.get(member_id) or ConsumerGroupMember(member_id)
    existing = group.static_member(instance_id)
    if unknown:
        if existing is None:
            return ConsumerGroupMember(member_id, instance_id=instance_id)
        return groups.replace_static_member(group, existing, member_id)
    if existing is None:
        return ErrorCode.unknown_member_id
    if existing.member_id != member_id:
        return ErrorCode.fenced_instance_id
    return existing


def sync_consumer_group(
    groups: ConsumerGroups,
    group: ConsumerGroup,
    member_id: str,
    instance_id: str | None,
    generation: int,
    protocol_type: str | None,
    protocol_name: str | None,
    topic_names: Mapping[uuid.UUID, str],
) -> SyncResult:
    """Kafka's classicGroupSyncToConsumerGroup: the member's assigned partitions in the embedded
    consumer protocol (the leader's assignments, if any, are ignored: the server assigns); the
    sync timeout stops and the session restarts."""
    try:
        member = classic_member(group, member_id, instance_id, generation)
        assignment = sync_assignment(group, member, protocol_type, protocol_name, topic_names)
    except ClassicMemberError as e:
        return SyncResult(e.error)
    groups.cancel_classic_timeout("sync", group.group_id, member.member_id)
    groups.start_session(group.group_id, member.member_id, _session_timeout(member))
    return SyncResult(ErrorCode.none, assignment, protocol_type, protocol_name)


def heartbeat_consumer_group(
    groups: ConsumerGroups, group: ConsumerGroup, member_id: str, instance_id: str | None, generation: int
) -> ErrorCode:
    """Kafka's classicGroupHeartbeatToConsumerGroup: the session restarts; REBALANCE_IN_PROGRESS
    (classic_members.heartbeat_error) tells the member to rejoin, and it is fenced unless it does
    within its rebalance timeout."""
    try:
        member = classic_member(group, member_id, instance_id, generation)
    except ClassicMemberError as e:
        return e.error
    groups.start_session(group.group_id, member.member_id, _session_timeout(member))
    error = heartbeat_error(group, member)
    if error == ErrorCode.rebalance_in_progress:
        groups.schedule_classic_timeout("join", group.group_id, member.member_id, member.rebalance_timeout_ms,
                                        "the classic member failed to join within the rebalance timeout",
                                        if_absent=True)  # fmt: skip
    return error


def _session_timeout(member: ConsumerGroupMember) -> int:
    assert member.classic is not None  # classic_member checked it
    return member.classic.session_timeout_ms
