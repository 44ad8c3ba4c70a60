# SyncGroup (key 14), versions 0-5.
# The leader sends every member's assignment; once the group's metadata record with the
# assignments is written to __consumer_offsets, every member of the generation gets its own
# assignment bytes (members the leader left out get empty bytes) and the group is Stable. In a
# Stable group SyncGroup answers with the stored assignment at once. v5 checks protocol type and
# name against the group's (INCONSISTENT_GROUP_PROTOCOL). Other errors as Kafka: UNKNOWN_MEMBER_ID,
# ILLEGAL_GENERATION, REBALANCE_IN_PROGRESS, FENCED_INSTANCE_ID, coordinator errors.
# A classic member of a consumer-protocol (KIP-848) group gets its server-assigned partitions
# (classic_join.sync_consumer_group).
# Not supported: nothing of v0-5 is left out.
# Authorization: READ on the group (GROUP_AUTHORIZATION_FAILED), as Kafka checks it first.
from __future__ import annotations

from kio.schema.sync_group.v5.request import SyncGroupRequest
from kio.schema.sync_group.v5.response import SyncGroupResponse

from broker.context import RequestContext
from broker.coordinator.classic_join import sync_consumer_group
from broker.coordinator.membership import SyncResult
from broker.coordinator.wire import NO_THROTTLE, coordinator
from broker.handlers import registry
from controller.security_model import AclOperation, ResourceType
from protocol.errors import ErrorCode

API_KEY = 14


def _response(result: SyncResult) -> SyncGroupResponse:
    return SyncGroupResponse(
        throttle_time=NO_THROTTLE,
        error_code=result.error,
        protocol_type=result.protocol_type,
        protocol_name=result.protocol_name,
        assignment=result.assignment,
    )


def _error_response(ctx: RequestContext, request: SyncGroupRequest, error: Exception) -> SyncGroupResponse:
    return _response(SyncResult(getattr(error, "code", ErrorCode.unknown_server_error)))


@registry.api(API_KEY, error_response=_error_response)
async def handle(ctx: RequestContext, request: SyncGroupRequest) -> SyncGroupResponse:
    ctx.require(AclOperation.READ, ResourceType.GROUP, request.group_id, ErrorCode.group_authorization_failed)
    coord = coordinator(ctx)
    error, group = coord.get_group(request.group_id)
    if error != ErrorCode.none:
        return _response(SyncResult(error))
    if group is None:
        return _response(SyncResult(ErrorCode.unknown_member_id))
    v5 = ctx.api_version >= 5
    if group.consumer is not None:  # a classic member of a consumer group (KIP-848 migration)
        if group.consumer.is_empty():
            return _response(SyncResult(ErrorCode.unknown_member_id))
        return _response(sync_consumer_group(
            coord.consumer_groups, group.consumer, request.member_id,
            request.group_instance_id if ctx.api_version >= 3 else None, int(request.generation_id),
            request.protocol_type if v5 else None, request.protocol_name if v5 else None,
            coord.consumer_groups.topic_names(),
        ))  # fmt: skip
    result = await coord.membership.sync(
        group,
        request.member_id,
        request.group_instance_id if ctx.api_version >= 3 else None,
        int(request.generation_id),
        request.protocol_type if v5 else None,
        request.protocol_name if v5 else None,
        {a.member_id: a.assignment for a in request.assignments},
    )
    return _response(result)
