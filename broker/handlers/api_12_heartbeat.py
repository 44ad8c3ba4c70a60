# Heartbeat (key 12), versions 0-4.
# Keeps a member's session alive. NONE in Stable and CompletingRebalance, REBALANCE_IN_PROGRESS in
# PreparingRebalance (the member must rejoin), else UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION,
# FENCED_INSTANCE_ID (v3+ static members) and the coordinator errors, as Kafka.
# A classic member of a consumer-protocol (KIP-848) group: classic_join.heartbeat_consumer_group.
# Not supported: nothing of v0-4 is left out.
# Authorization: READ on the group (GROUP_AUTHORIZATION_FAILED), as Kafka checks it first.
from __future__ import annotations

from kio.schema.heartbeat.v4.request import HeartbeatRequest
from kio.schema.heartbeat.v4.response import HeartbeatResponse

from broker.context import RequestContext
from broker.coordinator.classic_join import heartbeat_consumer_group
from broker.coordinator.wire import NO_THROTTLE, coordinator
from broker.handlers import registry
from controller.security_model import AclOperation, ResourceType
from protocol.errors import ErrorCode

API_KEY = 12


def _error_response(ctx: RequestContext, request: HeartbeatRequest, error: Exception) -> HeartbeatResponse:
    return HeartbeatResponse(throttle_time=NO_THROTTLE, error_code=getattr(error, "code", ErrorCode.unknown_server_error))


@registry.api(API_KEY, error_response=_error_response)
async def handle(ctx: RequestContext, request: HeartbeatRequest) -> HeartbeatResponse:
    ctx.require(AclOperation.READ, ResourceType.GROUP, request.group_id, ErrorCode.group_authorization_failed)
    coord = coordinator(ctx)
    error, group = coord.get_group(request.group_id)
    if error == ErrorCode.none:
        if group is None:
            error = ErrorCode.unknown_member_id
        else:
            instance_id = request.group_instance_id if ctx.api_version >= 3 else None
            if group.consumer is not None:  # a classic member of a consumer group (KIP-848 migration)
                error = heartbeat_consumer_group(coord.consumer_groups, group.consumer, request.member_id,
                                                 instance_id, int(request.generation_id))  # fmt: skip
            else:
                error = coord.membership.heartbeat(group, request.member_id, instance_id, int(request.generation_id))
    return HeartbeatResponse(throttle_time=NO_THROTTLE, error_code=error)
