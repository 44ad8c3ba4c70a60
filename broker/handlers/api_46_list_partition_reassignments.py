# ListPartitionReassignments (key 46), version 0.
# The partition reassignments in progress (kafka-reassign-partitions.sh --verify/--list,
# Admin.listPartitionReassignments): for the topics and partitions named, or every topic when
# topics is null, each reassigning partition's replicas (the union of old and target), adding and
# removing replicas, from this broker's metadata image (any broker answers, as Kafka 4.x's brokers
# forward it to the controller). Unknown topics and partitions, and topics with no reassignment,
# are left out (ReplicationControlManager.listPartitionReassignments). DESCRIBE on the cluster is
# required: CLUSTER_AUTHORIZATION_FAILED at the top otherwise.
# Not supported: throttle_time is always 0.
from __future__ import annotations

from kio.schema.list_partition_reassignments.v0.request import ListPartitionReassignmentsRequest
from kio.schema.list_partition_reassignments.v0.response import (
    ListPartitionReassignmentsResponse,
    OngoingPartitionReassignment,
    OngoingTopicReassignment,
)
from kio.schema.types import BrokerId, TopicName
from kio.static.primitive import i32

from broker.context import RequestContext
from broker.handlers import registry
from broker.handlers._admin import default_message
from controller.reassignment import ongoing
from controller.security_model import AclOperation, ResourceType
from protocol.errors import ErrorCode
from protocol.types import NO_THROTTLE

API_KEY = 46


@registry.api(API_KEY)
async def handle(
    ctx: RequestContext, request: ListPartitionReassignmentsRequest
) -> ListPartitionReassignmentsResponse:
    if not ctx.authorized(AclOperation.DESCRIBE, ResourceType.CLUSTER):
        error = ErrorCode.cluster_authorization_failed
        return ListPartitionReassignmentsResponse(
            throttle_time=NO_THROTTLE, error_code=error, error_message=default_message(error), topics=()
        )
    named = (
        None
        if request.topics is None
        else [(str(t.name), [int(p) for p in t.partition_indexes]) for t in request.topics]
    )
    return ListPartitionReassignmentsResponse(
        throttle_time=NO_THROTTLE,
        error_code=ErrorCode.none,
        error_message=None,
        topics=tuple(
            OngoingTopicReassignment(
                name=TopicName(topic),
                partitions=tuple(
                    OngoingPartitionReassignment(
                        partition_index=i32(p),
                        replicas=tuple(BrokerId(b) for b in reg.replicas),
                        adding_replicas=tuple(BrokerId(b) for b in reg.adding_replicas),
                        removing_replicas=tuple(BrokerId(b) for b in reg.removing_replicas),
                    )
                    for p, reg in partitions
                ),
            )
            for topic, partitions in ongoing(ctx.services.controller.image, named)
        ),
    )
