# AlterShareGroupOffsets (key 91), version 0.
# Sets the start offset of an Empty share group's partitions, as Kafka 4.3.1's
# GroupCoordinatorService.alterShareGroupOffsets: the group is created if absent, the partitions
# become initializing in the group's ShareGroupStatePartitionMetadata record, the persister
# initializes their state (InitializeShareGroupState at the group epoch, with the requested start
# offset), and the partitions initialized become initialized (another record).
# GROUP_ID_NOT_FOUND for a group of another type, NON_EMPTY_GROUP for a group with members
# (whole-request errors); per partition UNKNOWN_TOPIC_OR_PARTITION (unknown topic or partition)
# or the persister's error.
# Authorization: READ on the group (GROUP_AUTHORIZATION_FAILED) and on each topic
# (TOPIC_AUTHORIZATION_FAILED on its partitions).
from __future__ import annotations

import asyncio
import uuid

from kio.schema.alter_share_group_offsets.v0.request import AlterShareGroupOffsetsRequest
from kio.schema.alter_share_group_offsets.v0.response import (
    AlterShareGroupOffsetsResponse,
    AlterShareGroupOffsetsResponsePartition,
    AlterShareGroupOffsetsResponseTopic,
)
from kio.schema.types import TopicName
from kio.static.primitive import i32

from broker.context import RequestContext
from broker.coordinator.wire import NO_THROTTLE, coordinator
from broker.handlers import registry
from broker.share.share_state import SharePartitionKey
from controller.security_model import AclOperation, ResourceType
from protocol.errors import ErrorCode

API_KEY = 91
MESSAGES = {
    ErrorCode.group_authorization_failed: "Group authorization failed.",
    ErrorCode.topic_authorization_failed: "Topic authorization failed.",
    ErrorCode.unknown_topic_or_partition: "This server does not host this topic-partition.",
    ErrorCode.coordinator_not_available: "The coordinator is not available.",
}
"""Kafka's messages for the codes (Errors.X.message)."""


def _failed(error: ErrorCode, message: str | None) -> AlterShareGroupOffsetsResponse:
    return AlterShareGroupOffsetsResponse(throttle_time=NO_THROTTLE, error_code=error, error_message=message,
                                          responses=())  # fmt: skip


def _topic(name: str, topic_id: uuid.UUID | None,
           partitions: list[tuple[int, ErrorCode, str | None]]) -> AlterShareGroupOffsetsResponseTopic:  # fmt: skip
    return AlterShareGroupOffsetsResponseTopic(topic_name=TopicName(name), topic_id=topic_id, partitions=tuple(
        AlterShareGroupOffsetsResponsePartition(partition_index=i32(p), error_code=e, error_message=m)
        for p, e, m in partitions))  # fmt: skip


@registry.api(API_KEY)
async def handle(ctx: RequestContext, request: AlterShareGroupOffsetsRequest) -> AlterShareGroupOffsetsResponse:
    group_id = str(request.group_id)
    if not ctx.authorized(AclOperation.READ, ResourceType.GROUP, group_id):
        return _failed(ErrorCode.group_authorization_failed, MESSAGES[ErrorCode.group_authorization_failed])
    persister = ctx.services.share_persister
    if persister is None:
        return _failed(ErrorCode.coordinator_not_available, MESSAGES[ErrorCode.coordinator_not_available])
    image = ctx.services.controller.image
    refused: list[AlterShareGroupOffsetsResponseTopic] = []
    offsets: dict[tuple[str, int], int] = {}
    requested: list[tuple[str, list[int]]] = []
    for t in request.topics:
        name = str(t.topic_name)
        error = ErrorCode.topic_authorization_failed \
            if not ctx.authorized(AclOperation.READ, ResourceType.TOPIC, name) else \
            ErrorCode.unknown_topic_or_partition if name not in image.topics else ErrorCode.none  # fmt: skip
        if error != ErrorCode.none:
            refused.append(_topic(name, None, [(int(p.partition_index), error, MESSAGES[error]) for p in t.partitions]))
            continue
        requested.append((name, [int(p.partition_index) for p in t.partitions]))
        offsets.update({(name, int(p.partition_index)): int(p.start_offset) for p in t.partitions})
    groups = coordinator(ctx).share_groups
    error, message, state_epoch, results = await groups.alter_offsets(group_id, requested)
    if error != ErrorCode.none:
        return _failed(error, message)
    keys = [(name, SharePartitionKey(group_id, topic_id, p)) for name, topic_id, ps in results
            if topic_id is not None for p, e in ps if e == ErrorCode.none]  # fmt: skip
    answers = await asyncio.gather(*(
        persister.initialize_creating_topic(key, state_epoch, offsets[(name, key.partition)]) for name, key in keys))
    failed: dict[tuple[uuid.UUID, int], tuple[ErrorCode, str | None]] = {}
    done: dict[uuid.UUID, frozenset[int]] = {}
    for (_, key), answer in zip(keys, answers, strict=True):
        if answer.error == ErrorCode.none:
            done[key.topic_id] = done.get(key.topic_id, frozenset()) | {key.partition}
        else:
            failed[(key.topic_id, key.partition)] = (answer.error, answer.message)
    if not failed:  # as Kafka: a failed initialization leaves every partition initializing
        await groups.complete_alter_offsets(group_id, done)
    answered = [
        _topic(name, topic_id, [
            (p, *failed.get((topic_id, p), (e, MESSAGES.get(e)))) if topic_id is not None else (p, e, MESSAGES.get(e))
            for p, e in ps])
        for name, topic_id, ps in results
    ]  # fmt: skip
    return AlterShareGroupOffsetsResponse(throttle_time=NO_THROTTLE, error_code=ErrorCode.none, error_message=None,
                                          responses=tuple(refused + answered))  # fmt: skip
