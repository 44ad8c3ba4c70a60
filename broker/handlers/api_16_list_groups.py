# ListGroups (key 16), versions 0-5.
# Every group this broker coordinates (groups of partitions still loading are left out and the
# response carries COORDINATOR_LOAD_IN_PROGRESS), with protocol type; v4+ state and a states
# filter, v5+ type ("classic", or "consumer" for a KIP-848 group, listed with protocol type
# "consumer" and its Empty/Assigning/Reconciling/Stable state, or "share" for a share group, with
# protocol type "share" and its Empty/Stable state) and a types filter (both case-insensitive;
# empty = all). Dead groups are never listed. Not supported: streams groups (they do not exist
# here). Authorization: DESCRIBE on the cluster lists every group, else only the groups with
# DESCRIBE on them (as Kafka).
from __future__ import annotations

from kio.schema.list_groups.v5.request import ListGroupsRequest
from kio.schema.list_groups.v5.response import ListedGroup, ListGroupsResponse

from broker.context import RequestContext
from broker.coordinator.consumer_group import CONSUMER_GROUP_TYPE
from broker.coordinator.group import CLASSIC_GROUP_TYPE, CONSUMER_PROTOCOL_TYPE, GroupState
from broker.coordinator.wire import NO_THROTTLE, coordinator
from broker.handlers import registry
from broker.share.share_group import SHARE_GROUP_TYPE
from controller.security_model import AclOperation, ResourceType
from protocol.errors import ErrorCode

API_KEY = 16


def _error_response(ctx: RequestContext, request: ListGroupsRequest, error: Exception) -> ListGroupsResponse:
    code = getattr(error, "code", ErrorCode.unknown_server_error)
    return ListGroupsResponse(throttle_time=NO_THROTTLE, error_code=code, groups=())


@registry.api(API_KEY, error_response=_error_response)
async def handle(ctx: RequestContext, request: ListGroupsRequest) -> ListGroupsResponse:
    loading, groups = coordinator(ctx).all_groups()
    share_groups = coordinator(ctx).share_groups.groups()
    if not ctx.authorized(AclOperation.DESCRIBE):  # DESCRIBE on the cluster lists all groups
        groups = [g for g in groups if ctx.authorized(AclOperation.DESCRIBE, ResourceType.GROUP, g.group_id)]
        share_groups = [
            g for g in share_groups if ctx.authorized(AclOperation.DESCRIBE, ResourceType.GROUP, g.group_id)
        ]
    states = {s.lower() for s in request.states_filter} if ctx.api_version >= 4 else set()
    types = {t.lower() for t in request.types_filter} if ctx.api_version >= 5 else set()
    rows: list[tuple[str, str, str, str]] = []  # group id, state, protocol type, group type
    for group in groups:
        if group.is_in(GroupState.DEAD):
            continue
        if group.consumer is not None:
            rows.append((group.group_id, group.consumer.state.value, CONSUMER_PROTOCOL_TYPE, CONSUMER_GROUP_TYPE))
        else:
            rows.append((group.group_id, group.state.value, group.protocol_type or "", CLASSIC_GROUP_TYPE))
    rows += [(g.group_id, g.state.value, SHARE_GROUP_TYPE, SHARE_GROUP_TYPE) for g in share_groups]
    listed = []
    for group_id, state, protocol_type, group_type in sorted(rows):
        if states and state.lower() not in states:
            continue
        if types and group_type not in types:
            continue
        listed.append(
            ListedGroup(
                group_id=group_id,  # type: ignore[arg-type]
                protocol_type=protocol_type,
                group_state=state,
                group_type=group_type,
            )
        )
    error = ErrorCode.coordinator_load_in_progress if loading else ErrorCode.none
    return ListGroupsResponse(throttle_time=NO_THROTTLE, error_code=error, groups=tuple(listed))
