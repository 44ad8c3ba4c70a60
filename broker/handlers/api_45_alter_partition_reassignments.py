# AlterPartitionReassignments (key 45), versions 0-1.
# An operator's partition moves (kafka-reassign-partitions.sh --execute/--cancel,
# Admin.alterPartitionReassignments): per partition, target replicas start a reassignment and null
# replicas cancel one, under Kafka's controller rules (controller/reassignment.py): the new
# replicas are added and catch up, join the ISR, leadership leaves a replica being removed, then
# the removed replicas drop out and delete their logs. Per-partition errors with Kafka's messages:
# UNKNOWN_TOPIC_OR_PARTITION, INVALID_REPLICA_ASSIGNMENT (empty, duplicated or unregistered
# brokers; a cancel needing an unclean election the topic does not allow),
# NO_REASSIGNMENT_IN_PROGRESS (a cancel of nothing), INVALID_REPLICATION_FACTOR (v1
# allow_replication_factor_change=false and a target of another size, KIP-860). ALTER on the
# cluster is required (CLUSTER_AUTHORIZATION_FAILED, as Kafka's getErrorResponse: at the top and
# on every partition); a broker that is not the active controller forwards the request to it, as
# Kafka 4.x brokers do (handlers/_forward.py), and answers NOT_CONTROLLER the same way only when it
# cannot (no controller known or reachable, a request forwarded already). The answer comes once this broker's metadata shows the changes, or after the
# request's timeout; the data movement goes on after it, under the replication throttles
# (broker/replication/throttle.py) when kafka-reassign-partitions --throttle set them.
# Not supported: throttle_time is always 0.
from __future__ import annotations

from collections import Counter

from kio.schema.alter_partition_reassignments.v1.request import AlterPartitionReassignmentsRequest
from kio.schema.alter_partition_reassignments.v1.response import (
    AlterPartitionReassignmentsResponse,
    ReassignablePartitionResponse,
    ReassignableTopicResponse,
)
from kio.schema.types import TopicName
from kio.static.primitive import i32

from broker.context import RequestContext
from broker.handlers import registry
from broker.handlers._admin import audit, error_message
from broker.handlers._forward import forward_to_controller
from controller.reassignment import ReassignmentResults
from controller.security_model import AclOperation, ResourceType
from protocol.errors import ErrorCode, KafkaError
from protocol.types import NO_THROTTLE

API_KEY = 45


def _response(
    request: AlterPartitionReassignmentsRequest, results: ReassignmentResults, error: KafkaError | None = None
) -> AlterPartitionReassignmentsResponse:
    return AlterPartitionReassignmentsResponse(
        throttle_time=NO_THROTTLE,
        allow_replication_factor_change=request.allow_replication_factor_change,
        error_code=ErrorCode.none if error is None else error.code,
        error_message=None if error is None else error_message(error),
        responses=tuple(
            ReassignableTopicResponse(
                name=TopicName(topic),
                partitions=tuple(
                    ReassignablePartitionResponse(
                        partition_index=i32(p),
                        error_code=ErrorCode.none if e is None else e.code,
                        error_message=None if e is None else error_message(e),
                    )
                    for p, e in partitions
                ),
            )
            for topic, partitions in results
        ),
    )


@registry.api(API_KEY)
async def handle(
    ctx: RequestContext, request: AlterPartitionReassignmentsRequest
) -> AlterPartitionReassignmentsResponse:
    requested = [
        (str(t.name), [(int(p.partition_index), None if p.replicas is None else [int(b) for b in p.replicas])
                       for p in t.partitions])
        for t in request.topics
    ]
    try:
        if not ctx.authorized(AclOperation.ALTER, ResourceType.CLUSTER):
            raise KafkaError(ErrorCode.cluster_authorization_failed)
        results = await ctx.services.controller.alter_partition_reassignments(
            requested,
            allow_replication_factor_change=request.allow_replication_factor_change,
            timeout_ms=int(request.timeout.total_seconds() * 1000),
        )
    except KafkaError as e:  # not authorized, not the controller: everywhere, as getErrorResponse
        if e.code == ErrorCode.not_controller:  # Kafka 4.x brokers forward to the controller
            timeout_s = request.timeout.total_seconds() + 5
            forwarded = await forward_to_controller(ctx, request, AlterPartitionReassignmentsResponse, timeout_s)
            if forwarded is not None:
                audit(ctx, "alter_partition_reassignments", forwarded_to=ctx.services.controller.image.controller_id)
                return forwarded
        return _response(request, [(t, [(p, e) for p, _ in ps]) for t, ps in requested], e)
    audit(
        ctx,
        "alter_partition_reassignments",
        partitions={f"{t}-{p}": "cancel" if target is None else target for t, ps in requested for p, target in ps},
        results=dict(Counter("NONE" if e is None else e.code.name for _, ps in results for _, e in ps)),
    )
    return _response(request, results)
