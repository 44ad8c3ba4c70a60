# DescribeCluster (key 60), versions 0-2.
# The cluster id, the controller id (-1 if it is not among the live brokers, as Kafka answers) and
# every live broker with its endpoint on the listener the request came in on. endpoint_type
# (v1+) must be 1 (brokers): 2 (controllers) -> MISMATCHED_ENDPOINT_TYPE, anything else ->
# UNSUPPORTED_ENDPOINT_TYPE (INVALID_REQUEST on v0), with Kafka's messages. Cluster authorized
# operations, when asked, from the authorizer (0 without DESCRIBE on the cluster; without an
# authorizer every operation on the cluster resource).
# v2: include_fenced_brokers; brokers are never fenced here (is_fenced false).
from __future__ import annotations

from kio.schema.describe_cluster.v2.request import DescribeClusterRequest
from kio.schema.describe_cluster.v2.response import (
    DescribeClusterBroker,
    DescribeClusterResponse,
)
from kio.static.primitive import i8, i32

from broker.acl import AUTHORIZED_OPERATIONS_OMITTED
from broker.context import RequestContext
from broker.handlers import registry
from broker.handlers._admin import audit
from controller.security_model import AclOperation, ResourceType
from protocol.errors import ErrorCode
from protocol.types import NO_THROTTLE, BrokerId

API_KEY = 60
BROKER_ENDPOINTS = 1
CONTROLLER_ENDPOINTS = 2


def _error(ctx: RequestContext, code: ErrorCode, message: str) -> DescribeClusterResponse:
    return DescribeClusterResponse(
        throttle_time=NO_THROTTLE,
        error_code=code,
        error_message=message,
        cluster_id="",
        brokers=(),
    )


@registry.api(API_KEY)
async def handle(ctx: RequestContext, request: DescribeClusterRequest) -> DescribeClusterResponse:
    endpoint_type = request.endpoint_type
    if endpoint_type not in (BROKER_ENDPOINTS, CONTROLLER_ENDPOINTS):
        code = ErrorCode.invalid_request if ctx.api_version == 0 else ErrorCode.unsupported_endpoint_type
        response = _error(ctx, code, f"Unsupported endpoint type {endpoint_type}")
    elif endpoint_type == CONTROLLER_ENDPOINTS:
        code = ErrorCode.invalid_request if ctx.api_version == 0 else ErrorCode.mismatched_endpoint_type
        response = _error(
            ctx, code, "The request was sent to an endpoint of type BROKER, but we wanted an endpoint of type CONTROLLER"
        )
    else:
        image = ctx.services.controller.image
        brokers = []
        for broker in sorted(image.brokers.values(), key=lambda b: b.broker_id):
            ep = broker.endpoint(ctx.listener)
            if ep is not None:
                brokers.append(
                    DescribeClusterBroker(
                        broker_id=broker.broker_id, host=ep.host, port=i32(ep.port), rack=broker.rack, is_fenced=False
                    )
                )
        controller_id = image.controller_id if any(b.broker_id == image.controller_id for b in brokers) else -1
        response = DescribeClusterResponse(
            throttle_time=NO_THROTTLE,
            error_code=ErrorCode.none,
            error_message=None,
            endpoint_type=i8(BROKER_ENDPOINTS),
            cluster_id=image.cluster_id,
            controller_id=BrokerId(controller_id),
            brokers=tuple(brokers),
            cluster_authorized_operations=i32(
                AUTHORIZED_OPERATIONS_OMITTED if not request.include_cluster_authorized_operations
                else ctx.authorized_operations(ResourceType.CLUSTER) if ctx.authorized(AclOperation.DESCRIBE)
                else 0
            ),
        )
    audit(ctx, "describe_cluster", endpoint_type=endpoint_type, brokers=len(response.brokers),
          result=response.error_code.name)
    return response
