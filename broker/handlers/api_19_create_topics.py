# CreateTopics (key 19), versions 2-7.
# Each topic is checked as Kafka's controller checks it, with Kafka's error codes and messages:
# the name (INVALID_TOPIC_EXCEPTION, also for a name that collides with an existing one once '.'
# and '_' are treated alike), TOPIC_ALREADY_EXISTS, the configs (INVALID_CONFIG, null values
# included), then either the manual assignment (num_partitions and replication_factor must be -1;
# INVALID_REPLICA_ASSIGNMENT) or num_partitions / replication_factor, where -1 means the broker's
# num.partitions / default.replication.factor (INVALID_PARTITIONS, INVALID_REPLICATION_FACTOR).
# A name given twice is INVALID_REQUEST "Duplicate topic name." and neither entry is created.
# validate_only checks everything and creates nothing. v5+ successes carry the partition count,
# replication factor and every topic config with its source; v7 the topic id.
# Internal topics: like Kafka, `__consumer_offsets` and `__transaction_state` may be created by a
# client; only `__cluster_metadata` is refused (INVALID_REQUEST).
# Not supported: v0-1 (kio has no schemas; no listed client needs them); create-topic policies
# and controller mutation quotas (throttle_time is always 0).
from __future__ import annotations

import uuid
from collections import Counter

from kio.schema.create_topics.v7.request import CreatableTopic, CreateTopicsRequest
from kio.schema.create_topics.v7.response import (
    CreatableTopicConfigs,
    CreatableTopicResult,
    CreateTopicsResponse,
)
from kio.static.primitive import i8, i16, i32

from broker.config import describe_topic_configs, validate_topic_configs
from broker.context import RequestContext
from broker.handlers import registry
from broker.handlers._admin import audit, check_manual_assignment, error_message
from controller.model import ClusterImage, NewTopic
from controller.placement import topic_name_error
from protocol.errors import ErrorCode, KafkaError
from protocol.types import NO_THROTTLE, BrokerId, TopicName

API_KEY = 19
CLUSTER_METADATA_TOPIC = "__cluster_metadata"
ZERO_UUID = uuid.UUID(int=0)


def _collision_key(name: str) -> str:
    return name.replace(".", "_")


def plan_topic(
    topic: CreatableTopic, image: ClusterImage, num_partitions: int, replication_factor: int
) -> NewTopic:
    """Check one topic of the request against the image; the NewTopic to hand the controller.

    Raises KafkaError with Kafka's code and message. `num_partitions` / `replication_factor` are
    the broker defaults that -1 stands for."""
    name = topic.name
    error = topic_name_error(name)
    if error:
        raise KafkaError(ErrorCode.invalid_topic_exception, error)
    if name == CLUSTER_METADATA_TOPIC:
        raise KafkaError(
            ErrorCode.invalid_request, f"Creation of internal topic {CLUSTER_METADATA_TOPIC} is prohibited."
        )
    if name in image.topics:
        raise KafkaError(ErrorCode.topic_already_exists, f"Topic '{name}' already exists.")
    if "." in name or "_" in name:
        key = _collision_key(name)
        for existing in sorted(image.topics):
            if _collision_key(existing) == key:
                raise KafkaError(
                    ErrorCode.invalid_topic_exception,
                    f"Topic '{name}' collides with existing topic: {existing}",
                )
    configs = {c.name: c.value for c in topic.configs}
    nulls = [k for k, v in configs.items() if v is None]
    if nulls:
        raise KafkaError(
            ErrorCode.invalid_config, f"Null value not supported for topic configs: {','.join(nulls)}"
        )
    validate_topic_configs(configs, allow_null=False, topic=name)
    overrides = {k: v for k, v in configs.items() if v is not None}

    if topic.assignments:
        if topic.replication_factor != -1:
            raise KafkaError(
                ErrorCode.invalid_request,
                "A manual partition assignment was specified, but replication factor was not set to -1.",
            )
        if topic.num_partitions != -1:
            raise KafkaError(
                ErrorCode.invalid_request,
                "A manual partition assignment was specified, but numPartitions was not set to -1.",
            )
        assignments: dict[int, tuple[BrokerId, ...]] = {}
        rf: int | None = None
        for a in topic.assignments:
            if a.partition_index in assignments:
                raise KafkaError(
                    ErrorCode.invalid_replica_assignment,
                    f"Found multiple manual partition assignments for partition {a.partition_index}",
                )
            check_manual_assignment(a.broker_ids, image.brokers, rf)
            rf = len(a.broker_ids)
            assignments[a.partition_index] = tuple(BrokerId(b) for b in a.broker_ids)
        if sorted(assignments) != list(range(len(assignments))):
            raise KafkaError(
                ErrorCode.invalid_replica_assignment,
                "partitions should be a consecutive 0-based integer sequence",
            )
        return NewTopic(
            name=TopicName(name),
            num_partitions=len(assignments),
            replication_factor=rf or 0,
            assignments=assignments,
            configs=overrides,
        )
    if topic.replication_factor < -1 or topic.replication_factor == 0:
        raise KafkaError(
            ErrorCode.invalid_replication_factor,
            "Replication factor must be larger than 0, or -1 to use the default value.",
        )
    if topic.num_partitions < -1 or topic.num_partitions == 0:
        raise KafkaError(
            ErrorCode.invalid_partitions, "Number of partitions was set to an invalid non-positive value."
        )
    partitions = num_partitions if topic.num_partitions == -1 else topic.num_partitions
    rf = replication_factor if topic.replication_factor == -1 else topic.replication_factor
    if rf > len(image.brokers):
        raise KafkaError(
            ErrorCode.invalid_replication_factor,
            f"Unable to replicate the partition {rf} time(s): The target replication factor of {rf} "
            f"cannot be reached because only {len(image.brokers)} broker(s) are registered.",
        )
    return NewTopic(name=name, num_partitions=partitions, replication_factor=rf, configs=overrides)


def _error(name: str, e: KafkaError) -> CreatableTopicResult:
    return CreatableTopicResult(
        name=TopicName(name),
        topic_id=ZERO_UUID,
        error_code=e.code,
        error_message=error_message(e),
        configs=(),
    )


@registry.api(API_KEY)
async def handle(ctx: RequestContext, request: CreateTopicsRequest) -> CreateTopicsResponse:
    services = ctx.services
    controller = services.controller
    image = controller.image
    counts = Counter(t.name for t in request.topics)
    results: dict[str, CreatableTopicResult] = {}
    planned: list[NewTopic] = []
    for topic in request.topics:
        if topic.name in results or any(p.name == topic.name for p in planned):
            continue
        if counts[topic.name] > 1:
            results[topic.name] = _error(
                topic.name, KafkaError(ErrorCode.invalid_request, "Duplicate topic name.")
            )
            continue
        try:
            planned.append(
                plan_topic(topic, image, services.config.num_partitions, services.config.default_replication_factor)
            )
        except KafkaError as e:
            results[topic.name] = _error(topic.name, e)

    outcome = await controller.create_topics(planned, validate_only=request.validate_only) if planned else {}
    image = controller.image
    for new in planned:
        failure = outcome.get(new.name)
        if failure is not None:
            results[new.name] = _error(new.name, failure)
            continue
        registration = None if request.validate_only else image.topics.get(new.name)
        configs = tuple(
            CreatableTopicConfigs(
                name=c.name,
                value=c.value,
                read_only=c.read_only,
                config_source=i8(c.source),
                is_sensitive=c.is_sensitive,
            )
            for c in describe_topic_configs(services.config, dict(new.configs))
        )
        results[new.name] = CreatableTopicResult(
            name=TopicName(new.name),
            topic_id=registration.topic_id if registration is not None else ZERO_UUID,
            error_code=ErrorCode.none,
            error_message=None,
            num_partitions=i32(new.num_partitions),
            replication_factor=i16(new.replication_factor),
            configs=configs,
        )

    ordered: dict[str, CreatableTopic] = {}
    for topic in request.topics:
        ordered.setdefault(topic.name, topic)
    for name, topic in ordered.items():
        r = results[name]
        ok = r.error_code == ErrorCode.none
        audit(
            ctx,
            "create_topic",
            topic=name,
            partitions=r.num_partitions if ok else topic.num_partitions,
            replication_factor=r.replication_factor if ok else topic.replication_factor,
            configs={c.name: c.value for c in topic.configs},
            validate_only=request.validate_only,
            result=r.error_code.name,
            message=repr(r.error_message),
        )
    return CreateTopicsResponse(
        throttle_time=NO_THROTTLE, topics=tuple(results[name] for name in ordered)
    )
