# CreateAcls (key 30), versions 1-3.
# Adds ACL bindings to the security store (ZooKeeper's /kafka-acl layout in a cluster, seen by every
# broker at once; the data directory on one node). Each creation is checked as Kafka's controller
# checks it: LITERAL or PREFIXED pattern, a real resource type, operation and permission, the
# cluster resource named kafka-cluster, a non-empty name, a principal `Type:name`
# (INVALID_REQUEST with Kafka's messages); a creation with an UNKNOWN part closes the connection
# (Kafka fails to parse it). Creating a binding that exists succeeds. Needs ALTER on
# the cluster (CLUSTER_AUTHORIZATION_FAILED for every creation); without an authorizer
# SECURITY_DISABLED.
# Not supported: v0 (Kafka 4.x has dropped it too).
from __future__ import annotations

from kio.schema.create_acls.v3.request import CreateAclsRequest
from kio.schema.create_acls.v3.response import AclCreationResult, CreateAclsResponse

from broker.context import RequestContext
from broker.handlers import registry
from broker.handlers._acls import NO_AUTHORIZER, acl_binding, close_on_unknown_creations
from broker.handlers._admin import audit, error_message
from controller.security_model import AclBinding, AclOperation
from protocol.errors import ErrorCode, KafkaError
from protocol.types import NO_THROTTLE

API_KEY = 30


def _result(error: KafkaError | None) -> AclCreationResult:
    if error is None:
        return AclCreationResult(error_code=ErrorCode.none, error_message=None)
    return AclCreationResult(error_code=error.code, error_message=error_message(error))


def _error_response(ctx: RequestContext, request: CreateAclsRequest, error: Exception) -> CreateAclsResponse:
    e = error if isinstance(error, KafkaError) else KafkaError(ErrorCode.unknown_server_error, str(error))
    return CreateAclsResponse(throttle_time=NO_THROTTLE, results=tuple(_result(e) for _ in request.creations))


@registry.api(API_KEY, error_response=_error_response)
async def handle(ctx: RequestContext, request: CreateAclsRequest) -> CreateAclsResponse:
    close_on_unknown_creations(request.creations)
    if not ctx.authorized(AclOperation.ALTER):
        raise KafkaError(ErrorCode.cluster_authorization_failed, "Cluster authorization failed.")
    if not ctx.services.authorizer.enabled:
        raise KafkaError(ErrorCode.security_disabled, NO_AUTHORIZER)
    items: list[tuple[AclBinding | None, KafkaError | None]] = []
    for creation in request.creations:
        try:
            items.append((acl_binding(creation), None))
        except KafkaError as e:
            items.append((None, e))
    valid = [b for b, _ in items if b is not None]
    stored = iter(await ctx.services.security_store.create_acls(valid) if valid else [])
    results = [next(stored) if b is not None else e for b, e in items]
    for (binding, _), r in zip(items, results):
        audit(ctx, "create_acl", binding=binding, result=(r.code if r else ErrorCode.none).name,
              message=repr(r and r.message))
    return CreateAclsResponse(throttle_time=NO_THROTTLE, results=tuple(_result(r) for r in results))
