# CreatePartitions (key 37), versions 0-3.
# One result per topic (librdkafka and the Java admin need it), checked as Kafka's controller
# does, with its codes and messages: a topic named twice -> INVALID_REQUEST "Duplicate topic
# name."; unknown topic -> UNKNOWN_TOPIC_OR_PARTITION; a count equal to or below the current one ->
# INVALID_PARTITIONS; assignments (one broker list per new partition, same replication factor as
# the topic) -> INVALID_REPLICA_ASSIGNMENT when their number or contents are wrong. Without
# assignments the new partitions are placed like the existing ones. validate_only changes nothing.
# The replica manager creates the new partitions' logs when the image changes.
# Not supported: controller mutation quotas (throttle_time is always 0).
# Authorization: ALTER on each topic (TOPIC_AUTHORIZATION_FAILED).
from __future__ import annotations

from collections import Counter

from kio.schema.create_partitions.v3.request import (
    CreatePartitionsRequest,
    CreatePartitionsTopic,
)
from kio.schema.create_partitions.v3.response import (
    CreatePartitionsResponse,
    CreatePartitionsTopicResult,
)

from broker.context import RequestContext
from broker.handlers import registry
from broker.handlers._admin import (
    audit,
    check_manual_assignment,
    error_message,
)
from controller.model import ClusterImage
from controller.security_model import AclOperation, ResourceType
from protocol.errors import ErrorCode, KafkaError
from protocol.types import NO_THROTTLE, BrokerId

API_KEY = 37


def check_topic(topic: CreatePartitionsTopic, image: ClusterImage) -> None:
    """Kafka's checks of one topic's request; raises KafkaError."""
    registration = image.topics.get(topic.name)
    if registration is None:
        raise KafkaError(ErrorCode.unknown_topic_or_partition)
    current = len(registration.partitions)
    if topic.count == current:
        raise KafkaError(ErrorCode.invalid_partitions, f"Topic already has {current} partition(s).")
    if topic.count < current:
        raise KafkaError(
            ErrorCode.invalid_partitions,
            f"The topic {topic.name} currently has {current} partition(s); {topic.count} would not "
            "be an increase.",
        )
    additional = topic.count - current
    if topic.assignments is not None:
        if len(topic.assignments) != additional:
            raise KafkaError(
                ErrorCode.invalid_replica_assignment,
                f"Attempted to add {additional} additional partition(s), but only "
                f"{len(topic.assignments)} assignment(s) were specified.",
            )
        rf = len(next(iter(registration.partitions.values())).replicas)
        for a in topic.assignments:
            check_manual_assignment(a.broker_ids, image.brokers, rf)


@registry.api(API_KEY)
async def handle(ctx: RequestContext, request: CreatePartitionsRequest) -> CreatePartitionsResponse:
    controller = ctx.services.controller
    counts = Counter(t.name for t in request.topics)
    results: dict[str, CreatePartitionsTopicResult] = {}
    for topic in request.topics:
        if topic.name in results:
            continue
        try:
            if counts[topic.name] > 1:
                raise KafkaError(ErrorCode.invalid_request, "Duplicate topic name.")
            if not ctx.authorized(AclOperation.ALTER, ResourceType.TOPIC, topic.name):
                raise KafkaError(ErrorCode.topic_authorization_failed, "The topic authorization is failed.")
            check_topic(topic, controller.image)
            assignments = (
                None
                if topic.assignments is None
                else [tuple(BrokerId(b) for b in a.broker_ids) for a in topic.assignments]
            )
            await controller.create_partitions(
                topic.name, topic.count, assignments, validate_only=request.validate_only
            )
            result = CreatePartitionsTopicResult(name=topic.name, error_code=ErrorCode.none)
        except KafkaError as e:
            result = CreatePartitionsTopicResult(
                name=topic.name, error_code=e.code, error_message=error_message(e)
            )
        results[topic.name] = result
        audit(
            ctx,
            "create_partitions",
            topic=topic.name,
            count=topic.count,
            assignments=None if topic.assignments is None else [list(a.broker_ids) for a in topic.assignments],
            validate_only=request.validate_only,
            result=result.error_code.name,
            message=repr(result.error_message),
        )
    return CreatePartitionsResponse(throttle_time=NO_THROTTLE, results=tuple(results.values()))
