# DeleteAcls (key 31), versions 1-3.
# Deletes every ACL binding matching each filter (as DescribeAcls matches) and answers, per filter,
# the bindings it deleted. A filter with UNKNOWN parts closes the connection (Kafka fails to parse
# the request). Needs ALTER on the cluster (CLUSTER_AUTHORIZATION_FAILED for every
# filter); without an authorizer SECURITY_DISABLED.
# Not supported: v0 (Kafka 4.x has dropped it too).
from __future__ import annotations

from kio.schema.delete_acls.v3.request import DeleteAclsRequest
from kio.schema.delete_acls.v3.response import (
    DeleteAclsFilterResult,
    DeleteAclsMatchingAcl,
    DeleteAclsResponse,
)
from kio.static.primitive import i8

from broker.context import RequestContext
from broker.handlers import registry
from broker.handlers._acls import NO_AUTHORIZER, acl_filter
from broker.handlers._admin import audit, error_message
from controller.security_model import AclBinding, AclOperation
from protocol.errors import ErrorCode, KafkaError
from protocol.types import NO_THROTTLE

API_KEY = 31


def _failed(error: KafkaError) -> DeleteAclsFilterResult:
    return DeleteAclsFilterResult(error_code=error.code, error_message=error_message(error), matching_acls=())


def _matching(b: AclBinding) -> DeleteAclsMatchingAcl:
    return DeleteAclsMatchingAcl(
        error_code=ErrorCode.none, error_message=None, resource_type=i8(b.pattern.resource_type),
        resource_name=b.pattern.name, pattern_type=i8(b.pattern.pattern_type), principal=b.entry.principal,
        host=b.entry.host, operation=i8(b.entry.operation), permission_type=i8(b.entry.permission_type))


def _error_response(ctx: RequestContext, request: DeleteAclsRequest, error: Exception) -> DeleteAclsResponse:
    e = error if isinstance(error, KafkaError) else KafkaError(ErrorCode.unknown_server_error, str(error))
    return DeleteAclsResponse(throttle_time=NO_THROTTLE, filter_results=tuple(_failed(e) for _ in request.filters))


@registry.api(API_KEY, error_response=_error_response)
async def handle(ctx: RequestContext, request: DeleteAclsRequest) -> DeleteAclsResponse:
    filters = [acl_filter(f) for f in request.filters]
    if not ctx.authorized(AclOperation.ALTER):
        raise KafkaError(ErrorCode.cluster_authorization_failed, "Cluster authorization failed.")
    if not ctx.services.authorizer.enabled:
        raise KafkaError(ErrorCode.security_disabled, NO_AUTHORIZER)
    deleted = await ctx.services.security_store.delete_acls(filters) if filters else []
    results = []
    for f, gone in zip(filters, deleted):
        audit(ctx, "delete_acls", filter=f, deleted=len(gone))
        results.append(DeleteAclsFilterResult(error_code=ErrorCode.none, error_message=None,
                                              matching_acls=tuple(_matching(b) for b in gone)))
    return DeleteAclsResponse(throttle_time=NO_THROTTLE, filter_results=tuple(results))
