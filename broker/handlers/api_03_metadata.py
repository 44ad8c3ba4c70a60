# Metadata (key 3), versions 0-13.
# Brokers (with the endpoints of the listener the request came in on), cluster id, controller id,
# and for each topic its id, partitions, leader, leader epoch, replicas, ISR and offline replicas.
# v0: an empty topic list means all topics; v1+: null means all, empty means none. Unknown topics
# are created when the request allows it (v4+ flag; always for v0-3) and auto.create.topics.enable
# is on, with num.partitions and default.replication.factor; invalid names get
# INVALID_TOPIC_EXCEPTION. A topic this request creates is answered as Kafka 4.x answers it (its
# AutoTopicCreationManager passes the topic to the controller and answers at once, in every
# version): UNKNOWN_TOPIC_OR_PARTITION with no partitions, and the client asks again; the topic
# exists by then (Kafka 3.x in ZooKeeper mode answered LEADER_NOT_AVAILABLE; clients retry both).
# At most samsa.auto.create.topics.max.per.request topics are created per request, in request
# order; the others get the same answer without being created, so the next request creates the
# next ones, and one line is logged. v12 topics may be named by id (UNKNOWN_TOPIC_ID if unknown; a
# non-zero id wins over the name, which Java clients send empty); a null
# name before v12 closes the connection (Kafka rejects it as an invalid request).
# Authorization (Kafka's KafkaApis): a topic without DESCRIBE is left out of "all topics" and
# answered TOPIC_AUTHORIZATION_FAILED when named (by name: without disclosing whether it exists; by
# id: with the id, without the name); a topic to auto-create needs CREATE on the cluster or on it
# (TOPIC_AUTHORIZATION_FAILED otherwise). Authorized operations when asked (topic v8+, cluster v8-10:
# 0 without DESCRIBE on the cluster) come from the authorizer; without one every operation is
# reported as allowed, as Kafka also for a topic named that does not exist or has an invalid name,
# but not for an unknown topic id.
# Brokers the cluster suspects (a majority of the others stopped hearing their heartbeats; KRaft's
# fenced brokers) are left out, as Kafka leaves out brokers that are not alive: a partition they
# lead gets LEADER_NOT_AVAILABLE and leader -1, their replicas are offline replicas, and clients
# fail the requests waiting on them (librdkafka decommissions a broker Metadata no longer lists).
# v13's top-level error code (KIP-1102, REBOOTSTRAP_REQUIRED) is always NONE, as Kafka's
# brokers answer it.
from __future__ import annotations

import logging
import uuid

from kio.schema.metadata.v10.response import MetadataResponse as MetadataResponseV10
from kio.schema.metadata.v13.request import MetadataRequest
from kio.schema.metadata.v13.response import (
    MetadataResponse,
    MetadataResponseBroker,
    MetadataResponsePartition,
    MetadataResponseTopic,
)
from kio.static.primitive import i32

from broker.acl import AUTHORIZED_OPERATIONS_OMITTED
from broker.context import CloseConnection, RequestContext
from broker.handlers import registry
from controller.model import ClusterImage, TopicRegistration
from controller.placement import topic_name_error
from controller.security_model import AclOperation, ResourceType
from protocol.errors import ErrorCode
from protocol.messages import convert
from protocol.topic_partition import TopicPartition
from protocol.types import NO_THROTTLE, BrokerId, TopicName

API_KEY = 3
ZERO_UUID = uuid.UUID(int=0)
log = logging.getLogger("samsa.metadata")


def brokers_for(image: ClusterImage, listener: str) -> tuple[MetadataResponseBroker, ...]:
    result = []
    for broker in image.brokers.values():
        if broker.broker_id in image.fenced:
            continue
        ep = broker.endpoint(listener)
        if ep is None:
            continue
        result.append(
            MetadataResponseBroker(node_id=broker.broker_id, host=ep.host, port=i32(ep.port), rack=broker.rack)
        )
    return tuple(result)


def topic_metadata(
    image: ClusterImage, topic: TopicRegistration, operations: int
) -> MetadataResponseTopic:
    partitions = []
    for index, reg in sorted(topic.partitions.items()):
        offline = tuple(b for b in reg.replicas if b not in image.brokers or b in image.fenced
                        or TopicPartition(topic.name, index) in image.brokers[b].offline_replicas)  # a failed log dir
        online = reg.online and reg.leader not in image.fenced
        partitions.append(
            MetadataResponsePartition(
                error_code=ErrorCode.none if online else ErrorCode.leader_not_available,
                partition_index=i32(index),
                leader_id=reg.leader if online else BrokerId(-1),
                leader_epoch=i32(reg.leader_epoch),
                replica_nodes=reg.replicas,
                isr_nodes=reg.isr,
                offline_replicas=offline,
            )
        )
    return MetadataResponseTopic(
        error_code=ErrorCode.none,
        name=TopicName(topic.name),
        topic_id=topic.topic_id,
        is_internal=topic.internal,
        partitions=tuple(partitions),
        topic_authorized_operations=i32(operations),
    )


def _error_topic(
    name: str | None, error: ErrorCode, topic_id: uuid.UUID | None = None,
    operations: int = AUTHORIZED_OPERATIONS_OMITTED,
) -> MetadataResponseTopic:
    return MetadataResponseTopic(
        error_code=error,
        name=None if name is None else TopicName(name),
        topic_id=topic_id or ZERO_UUID,
        is_internal=False,
        partitions=(),
        topic_authorized_operations=i32(operations),
    )


@registry.api(API_KEY)
async def handle(ctx: RequestContext, request: MetadataRequest) -> MetadataResponse:
    services = ctx.services
    image = services.controller.image
    def ops(name: str) -> int:
        if not request.include_topic_authorized_operations:
            return AUTHORIZED_OPERATIONS_OMITTED
        return ctx.authorized_operations(ResourceType.TOPIC, name)

    def described(name: str) -> bool:
        return ctx.authorized(AclOperation.DESCRIBE, ResourceType.TOPIC, name)

    def may_create(name: str) -> bool:
        return ctx.authorized(AclOperation.CREATE) or ctx.authorized(AclOperation.CREATE, ResourceType.TOPIC, name)

    all_topics = request.topics is None or (ctx.api_version == 0 and not request.topics)
    allow_auto_create = (ctx.api_version < 4 or request.allow_auto_topic_creation) and (
        services.config.auto_create_topics_enable
    )

    topics: list[MetadataResponseTopic] = []
    if all_topics:
        topics = [topic_metadata(image, t, ops(name)) for name, t in sorted(image.topics.items()) if described(name)]
    else:
        to_create: dict[str, None] = {}  # in request order, each name once
        for requested in request.topics or ():
            name = requested.name
            by_id = ctx.api_version >= 12 and requested.topic_id not in (None, ZERO_UUID)
            if name is None or by_id:  # Kafka looks a topic with an id up by it (Java sends name "")
                if ctx.api_version < 12:  # as Kafka: names are nullable in requests from v12 only
                    raise CloseConnection(f"Topic name can not be null for version {ctx.api_version}")
                found = image.topic_by_id(requested.topic_id) if requested.topic_id else None
                if found is None:
                    topics.append(_error_topic(None, ErrorCode.unknown_topic_id, requested.topic_id))
                elif not described(found.name):  # ids are not secret, names are
                    topics.append(_error_topic(None, ErrorCode.topic_authorization_failed, requested.topic_id))
                else:
                    topics.append(topic_metadata(image, found, ops(found.name)))
                continue
            if not described(name):
                topics.append(_error_topic(name, ErrorCode.topic_authorization_failed))
            elif name in image.topics:
                continue
            elif topic_name_error(name):
                topics.append(_error_topic(name, ErrorCode.invalid_topic_exception, None, ops(name)))
            elif allow_auto_create and not may_create(name):
                topics.append(_error_topic(name, ErrorCode.topic_authorization_failed))
            elif allow_auto_create:
                to_create[name] = None
            else:
                topics.append(_error_topic(name, ErrorCode.unknown_topic_or_partition, None, ops(name)))
        cap = services.config.samsa_auto_create_topics_max_per_request
        names = list(to_create)
        deferred = set(names[cap:])
        if deferred:
            log.warning(
                "auto-creation capped client_id=%s correlation_id=%d requested=%d creating=%d "
                "deferred=%d samsa_auto_create_topics_max_per_request=%d",
                ctx.client_id,
                ctx.correlation_id,
                len(names),
                cap,
                len(deferred),
                cap,
            )
            to_create = dict.fromkeys(names[:cap])
        if to_create:
            await services.topic_creator.create(list(to_create))
            image = services.controller.image
        for requested in request.topics or ():
            name = requested.name
            if name is None or not described(name):
                continue
            if name in to_create or name in deferred:
                topics.append(_error_topic(name, ErrorCode.unknown_topic_or_partition, None, ops(name)))
            elif name in image.topics:
                topics.append(topic_metadata(image, image.topics[name], ops(name)))

    response = MetadataResponse(
        throttle_time=NO_THROTTLE,
        brokers=brokers_for(image, ctx.listener),
        cluster_id=image.cluster_id,
        controller_id=BrokerId(image.controller_id),
        topics=tuple(topics),
        error_code=ErrorCode.none,
    )
    if 8 <= ctx.api_version <= 10:
        # v8-10 also carry the cluster's authorized operations, dropped from the spec in v11.
        cluster_ops = AUTHORIZED_OPERATIONS_OMITTED
        if ctx.request.include_cluster_authorized_operations:
            cluster_ops = ctx.authorized_operations(ResourceType.CLUSTER) \
                if ctx.authorized(AclOperation.DESCRIBE) else 0
        return convert(response, MetadataResponseV10, cluster_authorized_operations=i32(cluster_ops))
    return response
