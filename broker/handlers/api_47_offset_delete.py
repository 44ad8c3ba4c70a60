# OffsetDelete (key 47), version 0.
# Deletes committed offsets of a group (tombstones in __consumer_offsets). Allowed for an Empty
# group, and in a consumer group with members for topics none of them subscribes to
# (GROUP_SUBSCRIBED_TO_TOPIC otherwise); a non-consumer group with members gets NON_EMPTY_GROUP.
# GROUP_ID_NOT_FOUND for unknown groups, UNKNOWN_TOPIC_OR_PARTITION for partitions that do not
# exist, INVALID_GROUP_ID and coordinator errors at the top level. Authorization: DELETE on the group
# (GROUP_AUTHORIZATION_FAILED), READ on each topic (TOPIC_AUTHORIZATION_FAILED, not deleted).
# Not supported: nothing of v0 is left out.
from __future__ import annotations

from kio.schema.offset_delete.v0.request import OffsetDeleteRequest
from kio.schema.offset_delete.v0.response import (
    OffsetDeleteResponse,
    OffsetDeleteResponsePartition,
    OffsetDeleteResponseTopic,
)

from broker.context import RequestContext
from broker.coordinator.wire import NO_THROTTLE, coordinator
from broker.handlers import registry
from controller.security_model import AclOperation, ResourceType
from protocol.errors import ErrorCode
from protocol.topic_partition import TopicPartition

API_KEY = 47


def _response(
    error: ErrorCode, results: dict[TopicPartition, ErrorCode], partitions: list[TopicPartition] | None = None
) -> OffsetDeleteResponse:
    """The answer: for each of `partitions` (as often as the request named it, as Kafka answers;
    all of `results` when not given) its code."""
    by_topic: dict[str, list[OffsetDeleteResponsePartition]] = {}
    for tp in results if partitions is None else partitions:
        code = results[tp]
        by_topic.setdefault(tp.topic, []).append(
            OffsetDeleteResponsePartition(partition_index=tp.partition, error_code=code)  # type: ignore[arg-type]
        )
    return OffsetDeleteResponse(
        error_code=error,
        throttle_time=NO_THROTTLE,
        topics=tuple(OffsetDeleteResponseTopic(name=t, partitions=tuple(p)) for t, p in by_topic.items()),  # type: ignore[arg-type]
    )


def _error_response(ctx: RequestContext, request: OffsetDeleteRequest, error: Exception) -> OffsetDeleteResponse:
    return _response(getattr(error, "code", ErrorCode.unknown_server_error), {})


@registry.api(API_KEY, error_response=_error_response)
async def handle(ctx: RequestContext, request: OffsetDeleteRequest) -> OffsetDeleteResponse:
    ctx.require(AclOperation.DELETE, ResourceType.GROUP, request.group_id, ErrorCode.group_authorization_failed)
    partitions = [TopicPartition(t.name, int(p.partition_index)) for t in request.topics for p in t.partitions]
    denied = {tp for tp in partitions if not ctx.authorized(AclOperation.READ, ResourceType.TOPIC, tp.topic)}
    error, results = await coordinator(ctx).delete_offsets(
        str(request.group_id), [tp for tp in partitions if tp not in denied])
    results.update(dict.fromkeys(denied, ErrorCode.topic_authorization_failed))
    return _response(error, results, partitions if error == ErrorCode.none else None)
