# DescribeTopicPartitions (key 75), version 0.
# What Java's admin client (3.7+) asks first for describeTopics: each topic's id, internal flag and
# partitions (leader, leader epoch, replicas, ISR, offline replicas), topics in name order, the
# whole cluster's when the request names none. Unknown topics get UNKNOWN_TOPIC_OR_PARTITION
# (never auto-created). Answers are paged: at most min(response_partition_limit, 2000) partitions
# (Kafka's max.request.partition.size.limit default), continuing from the request's cursor, with
# next_cursor where the next page starts; a cursor topic not among the requested ones is
# INVALID_REQUEST. Eligible leader replicas (KIP-966) are not used, so the ELR and last known ELR
# lists are empty, as on a Kafka cluster with ELR off. Authorization: a topic without DESCRIBE is
# left out of "all topics" and answered TOPIC_AUTHORIZATION_FAILED when named (whether it exists or
# not); topic authorized operations from the authorizer.
from __future__ import annotations

import uuid

from kio.schema.describe_topic_partitions.v0.request import (
    DescribeTopicPartitionsRequest,
)
from kio.schema.describe_topic_partitions.v0.response import (
    Cursor,
    DescribeTopicPartitionsResponse,
    DescribeTopicPartitionsResponsePartition,
    DescribeTopicPartitionsResponseTopic,
)
from kio.static.primitive import i32

from broker.context import RequestContext
from broker.handlers import registry
from controller.model import ClusterImage, TopicRegistration
from controller.security_model import AclOperation, ResourceType
from protocol.errors import ErrorCode, KafkaError
from protocol.topic_partition import TopicPartition
from protocol.types import NO_THROTTLE, TopicName

API_KEY = 75
MAX_PARTITIONS_PER_RESPONSE = 2000
ZERO_UUID = uuid.UUID(int=0)


def _partitions(
    image: ClusterImage, topic: TopicRegistration, first: int, limit: int
) -> tuple[DescribeTopicPartitionsResponsePartition, ...]:
    result = []
    for index in sorted(topic.partitions)[first : first + limit]:
        reg = topic.partitions[index]
        result.append(
            DescribeTopicPartitionsResponsePartition(
                error_code=ErrorCode.none
                if reg.online
                else ErrorCode.leader_not_available,
                partition_index=i32(index),
                leader_id=reg.leader,
                leader_epoch=i32(reg.leader_epoch),
                replica_nodes=reg.replicas,
                isr_nodes=reg.isr,
                eligible_leader_replicas=(),
                last_known_elr=(),
                offline_replicas=tuple(  # not registered, or its log dir failed
                    b for b in reg.replicas
                    if b not in image.brokers or TopicPartition(topic.name, index) in image.brokers[b].offline_replicas
                ),
            )
        )
    return tuple(result)


def _error_response(
    ctx: RequestContext, request: DescribeTopicPartitionsRequest, error: Exception
) -> DescribeTopicPartitionsResponse:
    code = (
        error.code if isinstance(error, KafkaError) else ErrorCode.unknown_server_error
    )
    return DescribeTopicPartitionsResponse(
        throttle_time=NO_THROTTLE,
        topics=tuple(
            DescribeTopicPartitionsResponseTopic(
                error_code=code, name=t.name, topic_id=ZERO_UUID, partitions=()
            )
            for t in request.topics
        ),
    )


@registry.api(API_KEY, error_response=_error_response)
async def handle(
    ctx: RequestContext, request: DescribeTopicPartitionsRequest
) -> DescribeTopicPartitionsResponse:
    image = ctx.services.controller.image
    names = (
        sorted({t.name for t in request.topics})
        if request.topics
        else sorted(n for n in image.topics if ctx.authorized(AclOperation.DESCRIBE, ResourceType.TOPIC, n))
    )
    cursor = request.cursor
    if cursor is not None:
        if request.topics and cursor.topic_name not in names:
            raise KafkaError(
                ErrorCode.invalid_request,
                "DescribeTopicPartitions cursor topic must be included in the topic list if provided.",
            )
        names = [n for n in names if n >= cursor.topic_name]
    budget = max(0, min(request.response_partition_limit, MAX_PARTITIONS_PER_RESPONSE))
    topics: list[DescribeTopicPartitionsResponseTopic] = []
    next_cursor: Cursor | None = None
    for name in names:
        topic = image.topics.get(name)
        described = ctx.authorized(AclOperation.DESCRIBE, ResourceType.TOPIC, name)
        if topic is None or not described:
            topics.append(
                DescribeTopicPartitionsResponseTopic(
                    error_code=ErrorCode.topic_authorization_failed if not described
                    else ErrorCode.unknown_topic_or_partition,
                    name=TopicName(name),
                    topic_id=ZERO_UUID,
                    partitions=(),
                )
            )
            continue
        first = (
            cursor.partition_index
            if cursor is not None and name == cursor.topic_name
            else 0
        )
        if budget == 0:
            next_cursor = Cursor(topic_name=TopicName(name), partition_index=i32(first))
            break
        partitions = _partitions(image, topic, first, budget)
        budget -= len(partitions)
        topics.append(
            DescribeTopicPartitionsResponseTopic(
                error_code=ErrorCode.none,
                name=TopicName(name),
                topic_id=topic.topic_id,
                is_internal=topic.internal,
                partitions=partitions,
                topic_authorized_operations=i32(ctx.authorized_operations(ResourceType.TOPIC, name)),
            )
        )
        if first + len(partitions) < len(topic.partitions):
            next_cursor = Cursor(
                topic_name=TopicName(name), partition_index=i32(first + len(partitions))
            )
            break
    return DescribeTopicPartitionsResponse(
        throttle_time=NO_THROTTLE,
        topics=tuple(topics),
        next_cursor=next_cursor,
    )
