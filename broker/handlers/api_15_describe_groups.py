# DescribeGroups (key 15), versions 0-5.
# For each group: state, protocol type, and while Stable the chosen protocol and every member's
# metadata and assignment (in other states members are listed without them), as Kafka. An unknown
# group, and a KIP-848 consumer group, are reported as Dead with error NONE (Kafka's answer up to v5); coordinator errors and
# INVALID_GROUP_ID per group. Authorization: DESCRIBE on each group (GROUP_AUTHORIZATION_FAILED).
# v3+ authorized operations, when asked, from the authorizer (without one, every group operation
# Kafka 4.x reports: READ, DELETE, DESCRIBE, DESCRIBE_CONFIGS, ALTER_CONFIGS).
# Not supported: v6 (error messages, GROUP_ID_NOT_FOUND for unknown groups).
from __future__ import annotations

from kio.schema.describe_groups.v5.request import DescribeGroupsRequest
from kio.schema.describe_groups.v5.response import (
    DescribedGroup,
    DescribedGroupMember,
    DescribeGroupsResponse,
)
from kio.static.primitive import i32

from broker.acl import AUTHORIZED_OPERATIONS_OMITTED
from broker.context import RequestContext
from broker.coordinator.group import ClassicGroup, GroupState
from broker.coordinator.wire import NO_THROTTLE, coordinator
from broker.handlers import registry
from controller.security_model import AclOperation, ResourceType
from protocol.errors import ErrorCode

API_KEY = 15


def _described(group_id: str, error: ErrorCode, group: ClassicGroup | None, operations: int) -> DescribedGroup:
    members: list[DescribedGroupMember] = []
    state, protocol_type, protocol = GroupState.DEAD.value, "", ""
    if group is not None and error == ErrorCode.none:
        state = group.state.value
        protocol_type = group.protocol_type or ""
        stable = group.is_in(GroupState.STABLE) and group.protocol_name is not None
        protocol = group.protocol_name or "" if stable else ""
        for m in group.members.values():
            members.append(
                DescribedGroupMember(
                    member_id=m.member_id,
                    group_instance_id=m.group_instance_id,
                    client_id=m.client_id,
                    client_host=m.client_host,
                    member_metadata=m.metadata_for(protocol) if stable else b"",
                    member_assignment=m.assignment if stable else b"",
                )
            )
    return DescribedGroup(
        error_code=error,
        group_id=group_id,  # type: ignore[arg-type]
        group_state=state,
        protocol_type=protocol_type,
        protocol_data=protocol,
        members=tuple(members),
        authorized_operations=i32(operations),
    )


def _error_response(ctx: RequestContext, request: DescribeGroupsRequest, error: Exception) -> DescribeGroupsResponse:
    code = getattr(error, "code", ErrorCode.unknown_server_error)
    return DescribeGroupsResponse(
        throttle_time=NO_THROTTLE,
        groups=tuple(_described(g, code, None, AUTHORIZED_OPERATIONS_OMITTED) for g in request.groups),
    )


@registry.api(API_KEY, error_response=_error_response)
async def handle(ctx: RequestContext, request: DescribeGroupsRequest) -> DescribeGroupsResponse:
    coord = coordinator(ctx)
    described = []
    for group_id in request.groups:
        if not ctx.authorized(AclOperation.DESCRIBE, ResourceType.GROUP, group_id):
            described.append(_described(group_id, ErrorCode.group_authorization_failed, None,
                                        AUTHORIZED_OPERATIONS_OMITTED))
            continue
        error, group = coord.get_group(group_id)
        if group is not None and group.consumer is not None:
            group = None  # a KIP-848 group: Dead, as Kafka answers DescribeGroups v0-5 for it
        operations = ctx.authorized_operations(ResourceType.GROUP, group_id) \
            if request.include_authorized_operations else AUTHORIZED_OPERATIONS_OMITTED
        described.append(_described(group_id, error, group, operations))
    return DescribeGroupsResponse(throttle_time=NO_THROTTLE, groups=tuple(described))
