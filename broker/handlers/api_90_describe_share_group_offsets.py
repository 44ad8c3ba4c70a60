# DescribeShareGroupOffsets (key 90), versions 0-1.
# Per group and topic-partition the share-partition start offset and leader epoch from the share
# coordinator's ReadShareGroupStateSummary (through the persister), and (v1) the lag: the
# partition's end offset - start offset - delivery complete count, -1 while the state is
# uninitialized, as Kafka 4.3.1's GroupCoordinatorService.describeShareGroupOffsets.
# Topics null: every partition the group's records say is initialized (describeShareGroupAllOffsets,
# which needs this broker to be the group's coordinator); an unknown group has no topics (Kafka
# answers no GROUP_ID_NOT_FOUND here). An unknown topic: start offset -1, no error. A partition whose
# state read fails: start offset -1, leader epoch 0, no error.
# Authorization: DESCRIBE on each group (GROUP_AUTHORIZATION_FAILED) and topic (named topics:
# TOPIC_AUTHORIZATION_FAILED on each partition; all topics: unauthorized ones left out).
# The end offset comes from each partition's leader (ListOffsets latest, through
# broker/partition_metadata_client.py, as Kafka's NetworkPartitionMetadataClient); when it cannot be
# had, that partition carries the error (LEADER_NOT_AVAILABLE, NETWORK_EXCEPTION, the leader's own).
from __future__ import annotations

import asyncio
import uuid

from kio.schema.describe_share_group_offsets.v1.request import (
    DescribeShareGroupOffsetsRequest,
    DescribeShareGroupOffsetsRequestGroup,
)
from kio.schema.describe_share_group_offsets.v1.response import (
    DescribeShareGroupOffsetsResponse,
    DescribeShareGroupOffsetsResponseGroup,
    DescribeShareGroupOffsetsResponsePartition,
    DescribeShareGroupOffsetsResponseTopic,
)
from kio.schema.types import GroupId, TopicName
from kio.static.primitive import i32, i64

from broker.context import RequestContext
from broker.coordinator.wire import NO_THROTTLE, coordinator
from broker.handlers import registry
from broker.share.persister import SharePersister
from broker.share.share_coordinator_shard import DEFAULT_LEADER_EPOCH, SummaryAnswer
from broker.share.share_state import (
    UNINITIALIZED_DELIVERY_COMPLETE_COUNT,
    UNINITIALIZED_START_OFFSET,
    SharePartitionKey,
)
from controller.security_model import AclOperation, ResourceType
from protocol.errors import ErrorCode, KafkaError
from protocol.topic_partition import TopicPartition

API_KEY = 90
UNINITIALIZED_LAG = -1
ZERO_UUID = uuid.UUID(int=0)
TOPIC_AUTHORIZATION_FAILED = "Topic authorization failed."
"""Kafka's message for the code (Errors.TOPIC_AUTHORIZATION_FAILED.message)."""
COORDINATOR_MESSAGES = {
    ErrorCode.not_coordinator: "This is not the correct coordinator.",
    ErrorCode.coordinator_load_in_progress: "The coordinator is loading and hence can't process requests.",
    ErrorCode.coordinator_not_available: "The coordinator is not available.",
}
"""Kafka's messages (Errors.forException(e).message) for the group coordinator's errors."""

Partition = DescribeShareGroupOffsetsResponsePartition
Topic = DescribeShareGroupOffsetsResponseTopic
Group = DescribeShareGroupOffsetsResponseGroup


def _partition(index: int, start_offset: int = UNINITIALIZED_START_OFFSET, leader_epoch: int = DEFAULT_LEADER_EPOCH,
               lag: int = UNINITIALIZED_LAG, error: ErrorCode = ErrorCode.none,
               message: str | None = None) -> Partition:  # fmt: skip
    return Partition(partition_index=i32(index), start_offset=i64(start_offset), leader_epoch=i32(leader_epoch),
                     lag=i64(lag), error_code=error, error_message=message)  # fmt: skip


def _failed(group_id: str, error: ErrorCode, message: str | None = None) -> Group:
    return Group(group_id=GroupId(group_id), topics=(), error_code=error, error_message=message)


def _needs_lag(a: SummaryAnswer) -> bool:
    """Kafka's shouldComputeSharePartitionLag: a state read without error, initialized."""
    return (a.error == ErrorCode.none and a.start_offset != UNINITIALIZED_START_OFFSET
            and a.delivery_complete_count != UNINITIALIZED_DELIVERY_COMPLETE_COUNT)  # fmt: skip


def _answered(tp: TopicPartition, a: SummaryAnswer, end_offset: int | KafkaError | None) -> Partition:
    """Kafka's computeShareGroupLagAndBuildResponse for one partition (`end_offset`: None when
    no lag is computed for it)."""
    if a.error != ErrorCode.none:
        return _partition(tp.partition)
    if end_offset is None:
        return _partition(tp.partition, a.start_offset, a.leader_epoch)
    if isinstance(end_offset, KafkaError):
        return _partition(tp.partition, error=end_offset.code, message=end_offset.message)
    lag = end_offset - a.start_offset - a.delivery_complete_count
    return _partition(tp.partition, a.start_offset, a.leader_epoch, lag)


async def _described(
    ctx: RequestContext, persister: SharePersister, group_id: str, topics: list[tuple[str, list[int]]]
) -> list[Topic]:  # fmt: skip
    """The offsets of these topics' partitions (Kafka's describeShareGroupOffsets)."""
    image = ctx.services.controller.image
    known: list[tuple[str, uuid.UUID, list[int]]] = []
    unknown: list[Topic] = []
    for name, partitions in topics:
        registration = image.topics.get(name)
        if registration is None:
            unknown.append(Topic(topic_name=TopicName(name), topic_id=ZERO_UUID,
                                 partitions=tuple(_partition(p) for p in partitions)))  # fmt: skip
        else:
            known.append((name, registration.topic_id, partitions))
    keys = [(name, SharePartitionKey(group_id, topic_id, p)) for name, topic_id, ps in known for p in ps]
    answers = await asyncio.gather(*(persister.read_summary(key) for _, key in keys))
    lagging = [TopicPartition(name, key.partition) for (name, key), a in zip(keys, answers, strict=True) if _needs_lag(a)]
    end_offsets: dict[TopicPartition, int | KafkaError] = {}
    if lagging:
        client = ctx.services.partition_metadata
        assert client is not None, "the broker builds a partition metadata client"
        end_offsets = await client.list_latest_offsets(lagging)
    by_topic: dict[tuple[str, uuid.UUID], list[Partition]] = {}
    for (name, key), answer in zip(keys, answers, strict=True):
        tp = TopicPartition(name, key.partition)
        by_topic.setdefault((name, key.topic_id), []).append(_answered(tp, answer, end_offsets.get(tp)))
    found = [Topic(topic_name=TopicName(name), topic_id=topic_id, partitions=tuple(ps))
             for (name, topic_id), ps in by_topic.items()]  # fmt: skip
    return found + unknown


async def _describe_group(
    ctx: RequestContext, persister: SharePersister | None, request: DescribeShareGroupOffsetsRequestGroup
) -> Group:  # fmt: skip
    group_id = str(request.group_id)
    if not ctx.authorized(AclOperation.DESCRIBE, ResourceType.GROUP, group_id):
        return _failed(group_id, ErrorCode.group_authorization_failed)
    if persister is None:
        return _failed(group_id, ErrorCode.coordinator_not_available,
                       COORDINATOR_MESSAGES[ErrorCode.coordinator_not_available])  # fmt: skip
    if request.topics is None:
        error, _, group = coordinator(ctx).share_groups.describe(group_id)
        if group is None and error != ErrorCode.group_id_not_found:
            return _failed(group_id, error, COORDINATOR_MESSAGES.get(error, error.name))
        image = ctx.services.controller.image
        initialized = [] if group is None else [
            (registration.name, sorted(ps)) for topic_id, ps in group.initialized.items()
            if (registration := image.topic_by_id(topic_id)) is not None
        ]  # fmt: skip
        topics = await _described(ctx, persister, group_id, initialized)
        allowed = [t for t in topics if ctx.authorized(AclOperation.DESCRIBE, ResourceType.TOPIC, str(t.topic_name))]
        return Group(group_id=GroupId(group_id), topics=tuple(allowed), error_code=ErrorCode.none)
    if not request.topics:
        return Group(group_id=GroupId(group_id), topics=(), error_code=ErrorCode.none)
    requested = [(str(t.topic_name), [int(p) for p in t.partitions]) for t in request.topics]
    allowed_names = [t for t in requested if ctx.authorized(AclOperation.DESCRIBE, ResourceType.TOPIC, t[0])]
    refused = [
        Topic(topic_name=TopicName(name), topic_id=ZERO_UUID, partitions=tuple(
            _partition(p, error=ErrorCode.topic_authorization_failed, message=TOPIC_AUTHORIZATION_FAILED)
            for p in partitions))
        for name, partitions in requested if (name, partitions) not in allowed_names
    ]  # fmt: skip
    topics = await _described(ctx, persister, group_id, allowed_names)
    return Group(group_id=GroupId(group_id), topics=tuple(topics + refused), error_code=ErrorCode.none)


@registry.api(API_KEY)
async def handle(ctx: RequestContext, request: DescribeShareGroupOffsetsRequest) -> DescribeShareGroupOffsetsResponse:
    persister = ctx.services.share_persister
    groups = await asyncio.gather(*(_describe_group(ctx, persister, g) for g in request.groups))
    return DescribeShareGroupOffsetsResponse(throttle_time=NO_THROTTLE, groups=tuple(groups))
