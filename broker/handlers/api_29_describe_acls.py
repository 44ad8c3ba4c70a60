# DescribeAcls (key 29), versions 1-3.
# The ACL bindings matching the filter (resource type, name, pattern type LITERAL, PREFIXED, ANY or
# MATCH, principal, host, operation, permission; ANY and null match anything), grouped by resource
# pattern, from the security store every broker shares (broker/acl.py, controller/security_store.py).
# Needs DESCRIBE on the cluster (CLUSTER_AUTHORIZATION_FAILED); without an authorizer
# SECURITY_DISABLED "No Authorizer is configured on the broker", as Kafka. A filter with UNKNOWN
# parts closes the connection (Kafka fails to parse it).
# Not supported: v0 (Kafka 4.x has dropped it too).
from __future__ import annotations

from kio.schema.describe_acls.v3.request import DescribeAclsRequest
from kio.schema.describe_acls.v3.response import (
    AclDescription,
    DescribeAclsResource,
    DescribeAclsResponse,
)
from kio.static.primitive import i8

from broker.context import RequestContext
from broker.handlers import registry
from broker.handlers._acls import acl_filter
from broker.handlers._admin import audit, error_message
from controller.security_model import AclBinding, AclOperation, ResourcePattern
from protocol.errors import ErrorCode, KafkaError
from protocol.types import NO_THROTTLE

API_KEY = 29


def _error(code: ErrorCode, message: str | None) -> DescribeAclsResponse:
    return DescribeAclsResponse(throttle_time=NO_THROTTLE, error_code=code, error_message=message, resources=())


def _error_response(ctx: RequestContext, request: DescribeAclsRequest, error: Exception) -> DescribeAclsResponse:
    e = error if isinstance(error, KafkaError) else KafkaError(ErrorCode.unknown_server_error, str(error))
    return _error(e.code, error_message(e))


@registry.api(API_KEY, error_response=_error_response)
async def handle(ctx: RequestContext, request: DescribeAclsRequest) -> DescribeAclsResponse:
    f = acl_filter(request)
    if not ctx.authorized(AclOperation.DESCRIBE):
        return _error(ErrorCode.cluster_authorization_failed, "Cluster authorization failed.")
    if not ctx.services.authorizer.enabled:
        return _error(ErrorCode.security_disabled, "No Authorizer is configured on the broker")
    grouped: dict[ResourcePattern, list[AclBinding]] = {}
    for b in sorted(b for b in ctx.services.security_store.image.acls if f.matches(b)):
        grouped.setdefault(b.pattern, []).append(b)
    audit(ctx, "describe_acls", filter=f, bindings=sum(len(v) for v in grouped.values()))
    return DescribeAclsResponse(
        throttle_time=NO_THROTTLE, error_code=ErrorCode.none, error_message=None,
        resources=tuple(
            DescribeAclsResource(
                resource_type=i8(p.resource_type), resource_name=p.name, pattern_type=i8(p.pattern_type),
                acls=tuple(AclDescription(principal=b.entry.principal, host=b.entry.host,
                                          operation=i8(b.entry.operation),
                                          permission_type=i8(b.entry.permission_type)) for b in bindings))
            for p, bindings in grouped.items()),
    )
