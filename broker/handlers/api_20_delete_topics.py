# DeleteTopics (key 20), versions 1-6.
# Topics are named (v1-5 `topic_names`, v6 `topics[].name`) or, from v6, given by topic id.
# With delete.topic.enable=false every topic fails: INVALID_REQUEST below v3,
# TOPIC_DELETION_DISABLED from v3 (as Kafka). Otherwise, as Kafka's controller answers: neither
# name nor id, or both, or the same name or id twice -> INVALID_REQUEST with Kafka's message; an
# unknown name -> UNKNOWN_TOPIC_OR_PARTITION; an unknown id -> UNKNOWN_TOPIC_ID; a name that maps
# to an id also given -> INVALID_REQUEST. Internal topics may be deleted, as in Kafka (only its
# CLI refuses). The controller drops the topic from the metadata image; the replica manager then
# takes the partitions offline and renames their directories to `<tp>.<id>-delete`, removed after
# file.delete.delay.ms; a topic created again under the same name starts empty at offset 0.
# Authorization: DELETE on the topic (TOPIC_AUTHORIZATION_FAILED, before its existence is looked
# at); a topic given by id without DESCRIBE on it is answered without its name.
# Not supported: controller mutation quotas (throttle_time is always 0).
from __future__ import annotations

import uuid
from collections import Counter
from typing import Any

from kio.schema.delete_topics.v6.request import DeleteTopicsRequest, DeleteTopicState
from kio.schema.delete_topics.v6.response import (
    DeletableTopicResult,
    DeleteTopicsResponse,
)

from broker.context import RequestContext
from broker.handlers import registry
from broker.handlers._admin import audit, default_message, error_message
from controller.security_model import AclOperation, ResourceType
from protocol.errors import ErrorCode
from protocol.types import NO_THROTTLE, TopicName

API_KEY = 20
ZERO_UUID = uuid.UUID(int=0)


def _upgrade(api_version: int, request: Any) -> DeleteTopicsRequest:
    """v1-5 name topics in `topic_names`, which v6 replaced by `topics`."""
    return DeleteTopicsRequest(
        topics=tuple(DeleteTopicState(name=n, topic_id=ZERO_UUID) for n in request.topic_names),
        timeout=request.timeout,
    )


def _result(
    name: str | None, topic_id: uuid.UUID | None, code: ErrorCode, message: str | None = None
) -> DeletableTopicResult:
    return DeletableTopicResult(
        name=None if name is None else TopicName(name),
        topic_id=topic_id or ZERO_UUID,
        error_code=code,
        error_message=message if message is not None else default_message(code),
    )


@registry.api(API_KEY, upgrade=_upgrade)
async def handle(ctx: RequestContext, request: DeleteTopicsRequest) -> DeleteTopicsResponse:
    services = ctx.services
    results: list[DeletableTopicResult] = []

    if not services.config.delete_topic_enable:
        code = ErrorCode.invalid_request if ctx.api_version < 3 else ErrorCode.topic_deletion_disabled
        for t in request.topics:
            results.append(_result(t.name, t.topic_id, code, "Topic deletion is disabled."))
            audit(ctx, "delete_topic", topic=t.name, topic_id=t.topic_id, result=code.name)
        return DeleteTopicsResponse(throttle_time=NO_THROTTLE, responses=tuple(results))

    image = services.controller.image
    names: Counter[str] = Counter(t.name for t in request.topics if t.name is not None and t.topic_id in (None, ZERO_UUID))
    ids = Counter(t.topic_id for t in request.topics if t.name is None and t.topic_id not in (None, ZERO_UUID))
    reported: set[object] = set()
    to_delete: dict[str, uuid.UUID] = {}  # name -> id, in request order
    for t in request.topics:
        by_id = t.topic_id not in (None, ZERO_UUID)
        if t.name is None and not by_id:
            results.append(_result(None, ZERO_UUID, ErrorCode.invalid_request,
                                   "Neither topic name nor id were specified."))
            continue
        if t.name is not None and by_id:
            results.append(_result(t.name, t.topic_id, ErrorCode.invalid_request,
                                   "You may not specify both topic name and topic id."))
            continue
        key: object = t.topic_id if by_id else t.name
        if key in reported:
            continue
        if (by_id and ids[t.topic_id or ZERO_UUID] > 1) or (not by_id and names[t.name or ""] > 1):
            reported.add(key)
            message = "Duplicate topic id." if by_id else "Duplicate topic name."
            results.append(_result(None if by_id else t.name, t.topic_id if by_id else ZERO_UUID,
                                   ErrorCode.invalid_request, message))
            continue
        reported.add(key)
        if by_id:
            topic = image.topic_by_id(t.topic_id or ZERO_UUID)
            if topic is None:
                results.append(_result(None, t.topic_id, ErrorCode.unknown_topic_id))
                continue
            if not ctx.authorized(AclOperation.DELETE, ResourceType.TOPIC, topic.name):
                described = ctx.authorized(AclOperation.DESCRIBE, ResourceType.TOPIC, topic.name)
                results.append(_result(topic.name if described else None, t.topic_id,
                                       ErrorCode.topic_authorization_failed))
                continue
        elif not ctx.authorized(AclOperation.DELETE, ResourceType.TOPIC, t.name or ""):
            results.append(_result(t.name, ZERO_UUID, ErrorCode.topic_authorization_failed))
            continue
        else:
            topic = image.topics.get(t.name or "")
            if topic is None:
                results.append(_result(t.name, ZERO_UUID, ErrorCode.unknown_topic_or_partition))
                continue
        if topic.name in to_delete:
            del to_delete[topic.name]
            results.append(_result(topic.name, topic.topic_id, ErrorCode.invalid_request,
                                   "The provided topic name maps to an ID that was already supplied."))
            continue
        to_delete[topic.name] = topic.topic_id

    if to_delete:
        outcome = await services.controller.delete_topics(list(to_delete))
        for name, topic_id in to_delete.items():
            failure = outcome.get(name)
            if failure is None:
                results.append(_result(name, topic_id, ErrorCode.none))
            else:
                results.append(_result(name, topic_id, failure.code, error_message(failure)))
    for r in results:
        audit(ctx, "delete_topic", topic=r.name, topic_id=r.topic_id, result=r.error_code.name,
              message=repr(r.error_message))
    return DeleteTopicsResponse(throttle_time=NO_THROTTLE, responses=tuple(results))
