# DeleteShareGroupOffsets (key 92), version 0.
# Deletes an Empty share group's state of the named topics, as Kafka 4.3.1's
# GroupCoordinatorService.deleteShareGroupOffsets: the topics' initialized partitions move to the
# group's deleting topics (its ShareGroupStatePartitionMetadata record), DeleteShareGroupState
# goes through the persister for each partition, and the topics whose state is gone leave the
# deleting topics (another record). GROUP_ID_NOT_FOUND for an unknown group or one of another
# type, NON_EMPTY_GROUP for a group with members (whole-request errors); per topic
# UNKNOWN_TOPIC_OR_PARTITION (unknown topic, or no state to delete) or the persister's error.
# Authorization: DELETE on the group (GROUP_AUTHORIZATION_FAILED), READ on each topic
# (TOPIC_AUTHORIZATION_FAILED for that topic).
from __future__ import annotations

import asyncio
import uuid

from kio.schema.delete_share_group_offsets.v0.request import DeleteShareGroupOffsetsRequest
from kio.schema.delete_share_group_offsets.v0.response import (
    DeleteShareGroupOffsetsResponse,
    DeleteShareGroupOffsetsResponseTopic,
)
from kio.schema.types import TopicName

from broker.context import RequestContext
from broker.coordinator.wire import NO_THROTTLE, coordinator
from broker.handlers import registry
from broker.share.share_state import SharePartitionKey
from controller.security_model import AclOperation, ResourceType
from protocol.errors import ErrorCode

API_KEY = 92
GROUP_AUTHORIZATION_FAILED = "Group authorization failed."
TOPIC_AUTHORIZATION_FAILED = "Topic authorization failed."
COORDINATOR_NOT_AVAILABLE = "The coordinator is not available."
"""Kafka's messages for the codes (Errors.X.message)."""


def _failed(error: ErrorCode, message: str | None) -> DeleteShareGroupOffsetsResponse:
    return DeleteShareGroupOffsetsResponse(throttle_time=NO_THROTTLE, error_code=error, error_message=message,
                                           responses=())  # fmt: skip


def _topic(name: str | None, topic_id: uuid.UUID | None, error: ErrorCode = ErrorCode.none,
           message: str | None = None) -> DeleteShareGroupOffsetsResponseTopic:  # fmt: skip
    return DeleteShareGroupOffsetsResponseTopic(topic_name=TopicName(name or ""), topic_id=topic_id,
                                                error_code=error, error_message=message)  # fmt: skip


@registry.api(API_KEY)
async def handle(ctx: RequestContext, request: DeleteShareGroupOffsetsRequest) -> DeleteShareGroupOffsetsResponse:
    group_id = str(request.group_id)
    if not ctx.authorized(AclOperation.DELETE, ResourceType.GROUP, group_id):
        return _failed(ErrorCode.group_authorization_failed, GROUP_AUTHORIZATION_FAILED)
    persister = ctx.services.share_persister
    if persister is None:
        return _failed(ErrorCode.coordinator_not_available, COORDINATOR_NOT_AVAILABLE)
    names = [str(t.topic_name) for t in request.topics]
    allowed = [n for n in names if ctx.authorized(AclOperation.READ, ResourceType.TOPIC, n)]
    refused = [_topic(n, None, ErrorCode.topic_authorization_failed, TOPIC_AUTHORIZATION_FAILED)
               for n in names if n not in allowed]  # fmt: skip
    groups = coordinator(ctx).share_groups
    error, message, todo, missing = await groups.initiate_delete_offsets(group_id, allowed)
    if error != ErrorCode.none:
        return _failed(error, message)
    keys = [SharePartitionKey(group_id, topic_id, p) for topic_id, ps in todo.items() for p in sorted(ps)]
    answers = await asyncio.gather(*(persister.delete(key) for key in keys))
    failed: dict[uuid.UUID, ErrorCode] = {}
    for key, answer in zip(keys, answers, strict=True):
        if answer.error != ErrorCode.none:
            failed.setdefault(key.topic_id, answer.error)
    image = ctx.services.controller.image

    def name_of(topic_id: uuid.UUID) -> str | None:
        topic = image.topic_by_id(topic_id)
        return None if topic is None else topic.name

    errors = [_topic(name_of(t), t, e, e.name) for t, e in failed.items()]
    deleted = frozenset(todo) - frozenset(failed)
    if deleted:
        completed = await groups.complete_delete_offsets(group_id, deleted)
        if completed != ErrorCode.none:
            return _failed(completed, None)
    done = [_topic(name_of(t), t) for t in todo if t in deleted]
    unknown = [_topic(n, None, ErrorCode.unknown_topic_or_partition, m) for n, m in missing]
    return DeleteShareGroupOffsetsResponse(throttle_time=NO_THROTTLE, error_code=ErrorCode.none, error_message=None,
                                           responses=tuple(refused + done + unknown + errors))  # fmt: skip
