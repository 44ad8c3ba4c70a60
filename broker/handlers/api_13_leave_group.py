# LeaveGroup (key 13), versions 0-5.
# v0-2: one member (member_id); v3+: a batch of members, each by member id or group.instance.id,
# each answered on its own (UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID). A leaving member makes the
# group rebalance at once. For v0-2 the member's error is the response's error. An unknown group
# gives every member UNKNOWN_MEMBER_ID (top-level NONE), a Dead group COORDINATOR_NOT_AVAILABLE.
# The reason (v5) is logged. On a KIP-848 consumer group (Kafka 4.3.1) the named members of either
# protocol are fenced together (one group epoch bump), an empty member id with an instance id
# being an administrative removal. Not supported: nothing of v0-5 is left out.
# Authorization: READ on the group (GROUP_AUTHORIZATION_FAILED), as Kafka checks it first.
from __future__ import annotations

import logging
from typing import Any

from kio.schema.leave_group.v5.request import LeaveGroupRequest, MemberIdentity
from kio.schema.leave_group.v5.response import LeaveGroupResponse, MemberResponse

from broker.context import RequestContext
from broker.coordinator.classic_members import leave
from broker.coordinator.consumer_group import ConsumerGroup
from broker.coordinator.group import GroupState
from broker.coordinator.membership import LeavingMember
from broker.coordinator.wire import NO_THROTTLE, coordinator
from broker.handlers import registry
from controller.security_model import AclOperation, ResourceType
from protocol.errors import ErrorCode

API_KEY = 13
log = logging.getLogger("samsa.coordinator")


def _upgrade(api_version: int, request: Any) -> LeaveGroupRequest:
    if api_version >= 3:
        from protocol.messages import convert

        return convert(request, LeaveGroupRequest)
    return LeaveGroupRequest(
        group_id=request.group_id,
        members=(MemberIdentity(member_id=request.member_id, group_instance_id=None, reason=None),),
    )


def _response(ctx: RequestContext, error: ErrorCode, members: list[MemberResponse]) -> LeaveGroupResponse:
    if ctx.api_version < 3 and error == ErrorCode.none and members:
        error = members[0].error_code
    return LeaveGroupResponse(throttle_time=NO_THROTTLE, error_code=error, members=tuple(members))


def _error_response(ctx: RequestContext, request: LeaveGroupRequest, error: Exception) -> LeaveGroupResponse:
    return _response(ctx, getattr(error, "code", ErrorCode.unknown_server_error), [])


@registry.api(API_KEY, error_response=_error_response, upgrade=_upgrade)
async def handle(ctx: RequestContext, request: LeaveGroupRequest) -> LeaveGroupResponse:
    ctx.require(AclOperation.READ, ResourceType.GROUP, request.group_id, ErrorCode.group_authorization_failed)
    coord = coordinator(ctx)
    error, group = coord.get_group(request.group_id)
    if error != ErrorCode.none:
        return _response(ctx, error, [])
    if group is not None and group.is_in(GroupState.DEAD):
        return _response(ctx, ErrorCode.coordinator_not_available, [])
    if group is not None and group.consumer is not None:
        return _response(ctx, *await _leave_consumer_group(ctx, request, group.consumer))
    results = []
    for m in request.members:
        if group is None:
            code = ErrorCode.unknown_member_id
        else:
            code = coord.membership.leave(group, LeavingMember(m.member_id, m.group_instance_id, m.reason))
        if code != ErrorCode.none:
            log.info(
                "leave group failed group=%s member=%s instance=%s error=%s client_id=%s correlation_id=%d",
                request.group_id, m.member_id, m.group_instance_id, code.name, ctx.client_id, ctx.correlation_id,
            )  # fmt: skip
        results.append(MemberResponse(member_id=m.member_id, group_instance_id=m.group_instance_id, error_code=code))
    return _response(ctx, ErrorCode.none, results)


async def _leave_consumer_group(
    ctx: RequestContext, request: LeaveGroupRequest, group: ConsumerGroup
) -> tuple[ErrorCode, list[MemberResponse]]:
    """A LeaveGroup on a KIP-848 group (Kafka 4.3.1's classicGroupLeaveToConsumerGroup): members of
    either protocol named are fenced together, one group epoch bump, written before the answer."""
    answers, leaving = leave(group, [(m.member_id, m.group_instance_id) for m in request.members])
    for m, a in zip(request.members, answers, strict=True):
        log.info(
            "leave consumer group group=%s member=%s instance=%s reason=%s error=%s client_id=%s correlation_id=%d",
            request.group_id, a.member_id, a.instance_id, m.reason, a.error.name, ctx.client_id, ctx.correlation_id,
        )  # fmt: skip
    error = await coordinator(ctx).consumer_groups.fence_members(
        request.group_id, [m.member_id for m in leaving], "LeaveGroup"
    )
    if error != ErrorCode.none:
        return error, []
    return ErrorCode.none, [
        MemberResponse(member_id=a.member_id, group_instance_id=a.instance_id, error_code=a.error) for a in answers
    ]
