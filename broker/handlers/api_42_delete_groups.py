# DeleteGroups (key 42), versions 0-2.
# Deletes Empty groups: the group and all its committed offsets get tombstones in
# __consumer_offsets; a share group's share-group state is deleted first (DeleteShareGroupState
# through the persister; its error answers the group). Per group: GROUP_ID_NOT_FOUND (unknown
# or Dead), NON_EMPTY_GROUP (has members), INVALID_GROUP_ID, coordinator errors;
# GROUP_AUTHORIZATION_FAILED without DELETE on the group. Not supported: nothing of v0-2 is left out.
from __future__ import annotations

from kio.schema.delete_groups.v2.request import DeleteGroupsRequest
from kio.schema.delete_groups.v2.response import (
    DeletableGroupResult,
    DeleteGroupsResponse,
)

from broker.context import RequestContext
from broker.coordinator.wire import NO_THROTTLE, coordinator
from broker.handlers import registry
from controller.security_model import AclOperation, ResourceType
from protocol.errors import ErrorCode

API_KEY = 42


def _response(results: dict[str, ErrorCode], order: tuple[str, ...]) -> DeleteGroupsResponse:
    return DeleteGroupsResponse(
        throttle_time=NO_THROTTLE,
        results=tuple(DeletableGroupResult(group_id=g, error_code=results[g]) for g in order),  # type: ignore[arg-type]
    )


def _error_response(ctx: RequestContext, request: DeleteGroupsRequest, error: Exception) -> DeleteGroupsResponse:
    code = getattr(error, "code", ErrorCode.unknown_server_error)
    return _response({g: code for g in request.groups_names}, request.groups_names)


@registry.api(API_KEY, error_response=_error_response)
async def handle(ctx: RequestContext, request: DeleteGroupsRequest) -> DeleteGroupsResponse:
    names = tuple(dict.fromkeys(request.groups_names))
    denied = {g for g in names if not ctx.authorized(AclOperation.DELETE, ResourceType.GROUP, g)}
    results = await coordinator(ctx).delete_groups([g for g in names if g not in denied])
    results.update(dict.fromkeys(denied, ErrorCode.group_authorization_failed))
    return _response(results, names)
