# JoinGroup (key 11), versions 0-9.
# The classic group protocol's join phase (broker/coordinator/membership.py): a new member gets a
# member id (v4+: first MEMBER_ID_REQUIRED with the id, KIP-394), the group rebalances and every
# member is answered when the join phase completes; the leader gets all members' metadata for the
# protocol chosen by vote. Static members (group.instance.id, v5+) replace their previous member id
# and keep their assignment; v9 tells a static leader that rejoined a stable group to skip the
# assignment. Errors as Kafka: INVALID_GROUP_ID, INVALID_SESSION_TIMEOUT (outside
# group.min/max.session.timeout.ms), UNKNOWN_MEMBER_ID, INCONSISTENT_GROUP_PROTOCOL,
# GROUP_MAX_SIZE_REACHED, FENCED_INSTANCE_ID, NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS,
# COORDINATOR_NOT_AVAILABLE. v0-1 are served (old librdkafka checks v0 is advertised for GSSAPI);
# v0 has no rebalance timeout, so the session timeout is used. The reason (v8+) is logged.
# A group id that is a consumer-protocol (KIP-848) group with members goes to
# classic_join.join_consumer_group (Kafka's online migration: the member joins the consumer group;
# INCONSISTENT_GROUP_PROTOCOL when group.consumer.migration.policy is disabled); an empty one
# becomes a classic group once its tombstones are written (else the append's error, the consumer
# group kept: group_reverts.py). A share group's id answers INCONSISTENT_GROUP_PROTOCOL with an empty
# member id.
# Not supported: nothing of v0-9 is left out.
# Authorization: READ on the group (GROUP_AUTHORIZATION_FAILED), as Kafka checks it first.
from __future__ import annotations

from kio.schema.join_group.v9.request import JoinGroupRequest
from kio.schema.join_group.v9.response import JoinGroupResponse, JoinGroupResponseMember
from kio.static.primitive import i32

from broker.context import RequestContext
from broker.coordinator.classic_join import join_consumer_group
from broker.coordinator.group import ClassicGroup, GroupState
from broker.coordinator.membership import JoinRequest, JoinResult
from broker.coordinator.wire import NO_THROTTLE, client_host, coordinator, millis
from broker.handlers import registry
from controller.security_model import AclOperation, ResourceType
from protocol.errors import ErrorCode

API_KEY = 11


def _response(ctx: RequestContext, result: JoinResult) -> JoinGroupResponse:
    old = ctx.api_version < 7
    return JoinGroupResponse(
        throttle_time=NO_THROTTLE,
        error_code=result.error,
        generation_id=i32(result.generation_id),
        protocol_type=result.protocol_type,
        protocol_name=(result.protocol_name or "") if old else result.protocol_name,
        leader=result.leader_id,
        skip_assignment=result.skip_assignment if ctx.api_version >= 9 else False,
        member_id=result.member_id,
        members=tuple(
            JoinGroupResponseMember(member_id=m.member_id, group_instance_id=m.group_instance_id, metadata=m.metadata)
            for m in result.members
        ),
    )


def _error_response(ctx: RequestContext, request: JoinGroupRequest, error: Exception) -> JoinGroupResponse:
    code = getattr(error, "code", ErrorCode.unknown_server_error)
    return _response(ctx, JoinResult(code, request.member_id))


@registry.api(API_KEY, error_response=_error_response)
async def handle(ctx: RequestContext, request: JoinGroupRequest) -> JoinGroupResponse:
    ctx.require(AclOperation.READ, ResourceType.GROUP, request.group_id, ErrorCode.group_authorization_failed)
    coord = coordinator(ctx)
    config = ctx.services.config
    error, part = coord.group_status(request.group_id)
    if part is None:
        return _response(ctx, JoinResult(error, request.member_id))
    session_ms = millis(request.session_timeout)
    rebalance_ms = millis(request.rebalance_timeout) if ctx.api_version >= 1 else session_ms
    if rebalance_ms < 0:
        rebalance_ms = session_ms
    if not config.group_min_session_timeout_ms <= session_ms <= config.group_max_session_timeout_ms:
        return _response(ctx, JoinResult(ErrorCode.invalid_session_timeout, request.member_id))
    group_id = str(request.group_id)
    if coord.share_groups.holds(group_id):  # Kafka's classicGroupJoin on a share group
        return _response(ctx, JoinResult(ErrorCode.inconsistent_group_protocol, ""))
    group = part.groups.get(group_id)
    if group is None or group.is_in(GroupState.DEAD):
        if request.member_id:
            return _response(ctx, JoinResult(ErrorCode.unknown_member_id, request.member_id))
        group = ClassicGroup(group_id)
        part.groups[group_id] = group
    join = JoinRequest(
        group_id=group_id,
        member_id=request.member_id,
        group_instance_id=request.group_instance_id if ctx.api_version >= 5 else None,
        client_id=ctx.client_id or "",
        client_host=client_host(ctx),
        session_timeout_ms=session_ms,
        rebalance_timeout_ms=rebalance_ms,
        protocol_type=request.protocol_type,
        protocols=tuple((p.name, p.metadata) for p in request.protocols),
        require_known_member_id=ctx.api_version >= 4,
        reason=request.reason,
        correlation_id=ctx.correlation_id,
    )
    while group.consumer is not None:  # again if a consumer member made one while the deletion was written
        if not group.consumer.is_empty():  # a classic member joins a consumer group (KIP-848 migration)
            groups = coord.consumer_groups
            joined = await join_consumer_group(groups, group, group.consumer, join, groups.migration_policy,
                                               config.group_consumer_max_size, config.group_max_size)
            return _response(ctx, joined)
        converted = await coord.consumer_groups.convert_to_classic(group)  # an empty one becomes classic
        if converted != ErrorCode.none:  # its deletion could not be written: the consumer group stays
            return _response(ctx, JoinResult(converted, request.member_id))
    return _response(ctx, await coord.membership.join(group, join))
